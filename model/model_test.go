package model_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/model"
)

// fx wraps a broker with calls that must not return an error, so scenarios
// read like docs/contract.md's worked examples.
type fx struct {
	t *testing.T
	b *model.Broker
}

// t0 is the time of the fixed clock newFx gives its brokers, so that the
// records' times are known; the tests' fake clocks (testclock.New) start
// there too.
var t0 = testclock.Epoch

func at0() time.Time { return t0 }

// newFx returns a fixture around model.New(capacity, opts...) whose clock
// always reads t0 unless opts set another.
func newFx(t *testing.T, capacity int32, opts ...model.Option) fx {
	t.Helper()
	b, err := model.New(capacity, append([]model.Option{model.WithClock(at0)}, opts...)...)
	require.NoError(t, err)
	require.NotNil(t, b)
	return fx{t: t, b: b}
}

func (f fx) create(topic string, n int32) bool {
	f.t.Helper()
	ok, err := f.b.Create(topic, n)
	require.NoError(f.t, err)
	return ok
}

func (f fx) join(topic, group, member string) []int32 {
	f.t.Helper()
	ps, err := f.b.Join(topic, group, member)
	require.NoError(f.t, err)
	require.NotNil(f.t, ps)
	return ps
}

func (f fx) leave(topic, group, member string) bool {
	f.t.Helper()
	ok, err := f.b.Leave(topic, group, member)
	require.NoError(f.t, err)
	return ok
}

func (f fx) publish(topic string, p int32, payload string) int64 {
	f.t.Helper()
	off, err := f.b.Publish(topic, p, payload)
	require.NoError(f.t, err)
	return off
}

func (f fx) poll(topic, group, member string, n int32) []model.Record {
	f.t.Helper()
	rs, err := f.b.Poll(topic, group, member, n)
	require.NoError(f.t, err)
	require.NotNil(f.t, rs)
	return rs
}

func (f fx) ack(topic, group, member string, p int32, off int64) bool {
	f.t.Helper()
	ok, err := f.b.Ack(topic, group, member, p, off)
	require.NoError(f.t, err)
	return ok
}

func (f fx) retry(topic, group, member string, p int32, off int64) bool {
	f.t.Helper()
	ok, err := f.b.Retry(topic, group, member, p, off)
	require.NoError(f.t, err)
	return ok
}

func (f fx) publishMsg(topic string, p int32, m model.Message) int64 {
	f.t.Helper()
	off, err := f.b.PublishMessage(topic, p, m)
	require.NoError(f.t, err)
	return off
}

func (f fx) createGroup(topic, group string, a model.Assignor) bool {
	f.t.Helper()
	ok, err := f.b.CreateGroup(topic, group, a)
	require.NoError(f.t, err)
	return ok
}

func (f fx) deleteGroup(topic, group string) bool {
	f.t.Helper()
	ok, err := f.b.DeleteGroup(topic, group)
	require.NoError(f.t, err)
	return ok
}

func (f fx) setAssignor(topic, group string, a model.Assignor) bool {
	f.t.Helper()
	ok, err := f.b.SetAssignor(topic, group, a)
	require.NoError(f.t, err)
	return ok
}

func (f fx) addPartitions(topic string, k int32) int32 {
	f.t.Helper()
	n, err := f.b.AddPartitions(topic, k)
	require.NoError(f.t, err)
	return n
}

func (f fx) seek(topic, group string, p int32, off int64) bool {
	f.t.Helper()
	ok, err := f.b.Seek(topic, group, p, off)
	require.NoError(f.t, err)
	return ok
}

func (f fx) describe(topic string) model.TopicDescription {
	f.t.Helper()
	d, err := f.b.Describe(topic)
	require.NoError(f.t, err)
	return d
}

// group returns the description of group in Describe(topic), failing the
// test when the topic has no such group.
func (f fx) group(topic, group string) model.GroupDescription {
	f.t.Helper()
	for _, g := range f.describe(topic).Groups {
		if g.Group == group {
			return g
		}
	}
	f.t.Fatalf("Describe(%q) has no group %q", topic, group)
	return model.GroupDescription{}
}

func (f fx) attempts(topic, group string, p int32) int32 {
	f.t.Helper()
	v, err := f.b.Attempts(topic, group, p)
	require.NoError(f.t, err)
	return v
}

func (f fx) logStart(topic string, p int32) int64 {
	f.t.Helper()
	v, err := f.b.LogStartOffset(topic, p)
	require.NoError(f.t, err)
	return v
}

func (f fx) logEnd(topic string, p int32) int64 {
	f.t.Helper()
	v, err := f.b.LogEndOffset(topic, p)
	require.NoError(f.t, err)
	return v
}

func (f fx) committed(topic, group string, p int32) int64 {
	f.t.Helper()
	v, err := f.b.Committed(topic, group, p)
	require.NoError(f.t, err)
	return v
}

func (f fx) inFlight(topic, group string, p int32) bool {
	f.t.Helper()
	v, err := f.b.InFlight(topic, group, p)
	require.NoError(f.t, err)
	return v
}

func (f fx) assignment(topic, group string) map[string][]int32 {
	f.t.Helper()
	v, err := f.b.Assignment(topic, group)
	require.NoError(f.t, err)
	return v
}

func (f fx) groups(topic string) []string {
	f.t.Helper()
	v, err := f.b.Groups(topic)
	require.NoError(f.t, err)
	return v
}

func (f fx) retained(topic string, p int32) []model.Record {
	f.t.Helper()
	v, err := f.b.Retained(topic, p)
	require.NoError(f.t, err)
	return v
}

// requireUnchanged fails unless b still equals before.
func requireUnchanged(t *testing.T, before, b *model.Broker) {
	t.Helper()
	require.Truef(t, b.Equal(before), "state changed\nbefore:\n%s\nafter:\n%s", before, b)
	require.NoError(t, b.CheckInvariants())
}

// rec is the first delivery of a record published by payload alone at t0.
func rec(topic string, p int32, off int64, payload string) model.Record {
	return recN(topic, p, off, payload, 1)
}

// recN is delivery number attempt of a record published by payload alone
// at t0.
func recN(topic string, p int32, off int64, payload string, attempt int32) model.Record {
	return model.Record{Topic: topic, Partition: p, Offset: off, Payload: payload, Time: t0, Attempt: attempt}
}

// kept is a record published by payload alone at t0 as Retained returns it.
func kept(topic string, p int32, off int64, payload string) model.Record {
	return recN(topic, p, off, payload, 0)
}

// TestSpecWorkedExample is docs/contract.md's orders example, verbatim.
func TestSpecWorkedExample(t *testing.T) {
	f := newFx(t, 2)
	require.True(t, f.create("orders", 1))
	require.Equal(t, int64(0), f.publish("orders", 0, "a"))
	require.Equal(t, int64(1), f.publish("orders", 0, "b"))
	require.Equal(t, []int32{0}, f.join("orders", "billing", "m1"))
	require.Equal(t, []model.Record{rec("orders", 0, 0, "a")}, f.poll("orders", "billing", "m1", 2))
	require.True(t, f.retry("orders", "billing", "m1", 0, 0))
	require.Equal(t, []model.Record{recN("orders", 0, 0, "a", 2)}, f.poll("orders", "billing", "m1", 2))
	require.True(t, f.ack("orders", "billing", "m1", 0, 0))
	require.Equal(t, []model.Record{rec("orders", 0, 1, "b")}, f.poll("orders", "billing", "m1", 2))
	require.NoError(t, f.b.CheckInvariants())
}

// TestSpecRebalanceExample is docs/contract.md's rebalance example, verbatim.
func TestSpecRebalanceExample(t *testing.T) {
	f := newFx(t, 10)
	require.True(t, f.create("t", 3))
	for p := range int32(3) {
		require.Equal(t, int64(0), f.publish("t", p, "x"))
	}
	require.Equal(t, []int32{0, 1, 2}, f.join("t", "g", "a"))
	require.Equal(t, []model.Record{rec("t", 0, 0, "x"), rec("t", 1, 0, "x"), rec("t", 2, 0, "x")},
		f.poll("t", "g", "a", 64))

	require.Equal(t, []int32{1}, f.join("t", "g", "b"))
	require.Equal(t, map[string][]int32{"a": {0, 2}, "b": {1}}, f.assignment("t", "g"))
	require.True(t, f.inFlight("t", "g", 0), "kept partition keeps its delivery")
	require.False(t, f.inFlight("t", "g", 1), "moved partition loses its delivery")
	require.True(t, f.inFlight("t", "g", 2), "kept partition keeps its delivery")
	require.Equal(t, int64(0), f.committed("t", "g", 1), "moved partition keeps its committed offset")

	require.Equal(t, []model.Record{recN("t", 1, 0, "x", 2)}, f.poll("t", "g", "b", 64), "a's delivery was the first")
	require.False(t, f.ack("t", "g", "a", 1, 0), "a's late ack of the moved partition")
	require.True(t, f.ack("t", "g", "b", 1, 0))
	require.True(t, f.ack("t", "g", "a", 0, 0))
	require.True(t, f.ack("t", "g", "a", 2, 0))
	require.NoError(t, f.b.CheckInvariants())
}

func TestNewCapacity(t *testing.T) {
	tests := []struct {
		capacity int32
		wok      bool
	}{
		{math.MinInt32, false}, {-1, false}, {0, false},
		{1, true}, {2, true}, {1000, true},
		{1001, false}, {math.MaxInt32, false},
	}
	for _, tt := range tests {
		b, err := model.New(tt.capacity)
		if !tt.wok {
			require.ErrorIs(t, err, model.ErrInvalidArgument, "capacity %d", tt.capacity)
			require.Nil(t, b, "capacity %d", tt.capacity)
			continue
		}
		require.NoError(t, err, "capacity %d", tt.capacity)
		require.Equal(t, tt.capacity, b.Capacity())
		require.Empty(t, b.Topics())
	}
}

// args are the arguments of one call; populated makes them all valid.
type args struct {
	topic, group, member string
	partition            int32
	offset               int64
	maxRecords, count    int32 // count is Create's partitionCount and AddPartitions' count
	assignor             model.Assignor
	msg                  model.Message
}

var validArgs = args{topic: "t", group: "g", member: "m", partition: 0, offset: 0, maxRecords: 1, count: 2,
	assignor: model.Sticky, msg: model.Message{Key: "k", Headers: []model.Header{{Key: "h", Value: "v"}}, Payload: "p"}}

// populatedMaxBytes is the WithMaxMessageBytes of populated brokers.
const populatedMaxBytes = 16

// populated returns a broker in which validArgs is a valid call of every
// method: topic t (2 partitions) with records, group g with members m (owns
// p0, offset 0 in flight) and m2 (owns p1), a memberless group idle, and a
// second topic u. It has a replay window of 1, an ack timeout of a minute
// and a message limit of populatedMaxBytes.
func populated(t *testing.T) *model.Broker { return populatedWith(t) }

// populatedWith is populated with more options (a later WithClock replaces
// the fixed one).
func populatedWith(t *testing.T, opts ...model.Option) *model.Broker {
	f := newFx(t, 3, append([]model.Option{model.WithReplayWindow(1), model.WithAckTimeout(time.Minute),
		model.WithMaxMessageBytes(populatedMaxBytes)}, opts...)...)
	f.create("t", 2)
	f.create("u", 1)
	f.publish("t", 0, "a")
	f.publish("t", 0, "b")
	f.publish("t", 1, "c")
	f.publish("u", 0, "d")
	f.join("t", "g", "m")
	f.join("t", "g", "m2")
	require.Len(t, f.poll("t", "g", "m", 64), 1)
	f.join("t", "idle", "x")
	f.leave("t", "idle", "x")
	require.NoError(t, f.b.CheckInvariants())
	return f.b
}

// methods are the calls; uses lists the argument kinds each takes: t topic
// id, k topic must exist, g group, m member, p partition, o offset, n
// maxRecords, c partitionCount or added count, x added count, a assignor, s
// message. valid, when set, adjusts validArgs to a valid call of the method.
var methods = []struct {
	name  string
	uses  string
	call  func(b *model.Broker, a args) (any, error)
	wzero any
	valid func(a *args)
}{
	{"Create", "tc", func(b *model.Broker, a args) (any, error) { return b.Create(a.topic, a.count) }, false, nil},
	{"Join", "tkgm", func(b *model.Broker, a args) (any, error) { return b.Join(a.topic, a.group, a.member) }, []int32(nil), nil},
	{"Leave", "tkgm", func(b *model.Broker, a args) (any, error) { return b.Leave(a.topic, a.group, a.member) }, false, nil},
	{"Publish", "tkp", func(b *model.Broker, a args) (any, error) { return b.Publish(a.topic, a.partition, "payload") }, int64(-1), nil},
	{"Poll", "tkgmn", func(b *model.Broker, a args) (any, error) {
		return b.Poll(a.topic, a.group, a.member, a.maxRecords)
	}, []model.Record(nil), nil},
	{"Ack", "tkgmpo", func(b *model.Broker, a args) (any, error) {
		return b.Ack(a.topic, a.group, a.member, a.partition, a.offset)
	}, false, nil},
	{"Retry", "tkgmpo", func(b *model.Broker, a args) (any, error) {
		return b.Retry(a.topic, a.group, a.member, a.partition, a.offset)
	}, false, nil},
	{"PublishMessage", "tkps", func(b *model.Broker, a args) (any, error) {
		return b.PublishMessage(a.topic, a.partition, a.msg)
	}, int64(-1), nil},
	{"CreateGroup", "tkga", func(b *model.Broker, a args) (any, error) {
		return b.CreateGroup(a.topic, a.group, a.assignor)
	}, false, func(a *args) { a.group = "fresh" }},
	{"DeleteGroup", "tkg", func(b *model.Broker, a args) (any, error) {
		return b.DeleteGroup(a.topic, a.group)
	}, false, func(a *args) { a.group = "idle" }},
	{"SetAssignor", "tkga", func(b *model.Broker, a args) (any, error) {
		return b.SetAssignor(a.topic, a.group, a.assignor)
	}, false, nil},
	{"AddPartitions", "tkcx", func(b *model.Broker, a args) (any, error) {
		return b.AddPartitions(a.topic, a.count)
	}, int32(0), nil},
	{"Seek", "tkgpo", func(b *model.Broker, a args) (any, error) {
		return b.Seek(a.topic, a.group, a.partition, a.offset)
	}, false, nil},
	{"Describe", "tk", func(b *model.Broker, a args) (any, error) {
		return b.Describe(a.topic)
	}, model.TopicDescription{}, nil},
	{"Heartbeat", "tkgm", func(b *model.Broker, a args) (any, error) {
		return b.Heartbeat(a.topic, a.group, a.member)
	}, false, nil},
	{"Rejoin", "tkgm", func(b *model.Broker, a args) (any, error) {
		return b.Rejoin(a.topic, a.group, a.member)
	}, []int32(nil), nil},
	{"PollPartition", "tkgmp", func(b *model.Broker, a args) (any, error) {
		return b.PollPartition(a.topic, a.group, a.member, a.partition)
	}, []model.Record(nil), nil},
	{"CreateGroupAt", "tkga", func(b *model.Broker, a args) (any, error) {
		return b.CreateGroupAt(a.topic, a.group, a.assignor, model.StartLatest)
	}, false, func(a *args) { a.group = "fresh" }},
	{"Snapshot", "tk", func(b *model.Broker, a args) (any, error) {
		return b.Snapshot(a.topic)
	}, model.TopicSnapshot{}, nil},
}

var badIDs = []struct{ name, id string }{
	{"empty", ""},
	{"65 bytes", strings.Repeat("a", 65)},
	{"space", "a b"},
	{"leading space", " t"},
	{"trailing newline", "t\n"},
	{"dot", "a.b"},
	{"slash", "a/b"},
	{"NUL", "a\x00"},
	{"non-ASCII", "é"},
	{"non-ASCII letter after valid", "tΩ"},
	{"invalid UTF-8", "t\xff"},
}

// mutation invalidates validArgs; it applies to each method that uses every
// argument kind in needs.
type mutation struct {
	name  string
	needs string
	mut   func(a *args)
}

func mutations() []mutation {
	ms := []mutation{
		{"unknown topic", "k", func(a *args) { a.topic = "nope" }},
		{"unknown topic, absent group", "kg", func(a *args) { a.topic, a.group = "nope", "absent" }},
	}
	for _, bad := range badIDs {
		ms = append(ms,
			mutation{"topic " + bad.name, "t", func(a *args) { a.topic = bad.id }},
			mutation{"group " + bad.name, "g", func(a *args) { a.group = bad.id }},
			mutation{"member " + bad.name, "m", func(a *args) { a.member = bad.id }},
			mutation{"absent group, member " + bad.name, "gm", func(a *args) { a.group, a.member = "absent", bad.id }},
			mutation{"unknown topic, member " + bad.name, "km", func(a *args) { a.topic, a.member = "nope", bad.id }},
		)
	}
	for _, p := range []int32{math.MinInt32, -1, 2, 3, math.MaxInt32} {
		ms = append(ms,
			mutation{"partition " + itoa(int64(p)), "p", func(a *args) { a.partition = p }},
			mutation{"absent group, partition " + itoa(int64(p)), "gp", func(a *args) { a.group, a.partition = "absent", p }},
		)
	}
	for _, o := range []int64{math.MinInt64, -1} {
		ms = append(ms,
			mutation{"offset " + itoa(o), "o", func(a *args) { a.offset = o }},
			mutation{"absent group, offset " + itoa(o), "go", func(a *args) { a.group, a.offset = "absent", o }},
			mutation{"non-owner, offset " + itoa(o), "mo", func(a *args) { a.member, a.offset = "m2", o }},
		)
	}
	for _, n := range []int32{math.MinInt32, -1, 0, 65, math.MaxInt32} {
		ms = append(ms,
			mutation{"maxRecords " + itoa(int64(n)), "n", func(a *args) { a.maxRecords = n }},
			mutation{"absent group, maxRecords " + itoa(int64(n)), "gn", func(a *args) { a.group, a.maxRecords = "absent", n }},
		)
	}
	for _, c := range []int32{math.MinInt32, -1, 0, 65, math.MaxInt32} {
		ms = append(ms,
			mutation{"existing topic, partitionCount " + itoa(int64(c)), "c", func(a *args) { a.count = c }},
			mutation{"new topic, partitionCount " + itoa(int64(c)), "c", func(a *args) { a.topic, a.count = "fresh", c }},
		)
	}
	for _, c := range []int32{63, 64} {
		ms = append(ms, mutation{"added count " + itoa(int64(c)) + " past 64 partitions", "x", func(a *args) { a.count = c }})
	}
	ms = append(ms,
		mutation{"nil assignor", "a", func(a *args) { a.assignor = nil }},
		mutation{"absent group, nil assignor", "ga", func(a *args) { a.group, a.assignor = "absent", nil }},
		mutation{"unknown topic, nil assignor", "ka", func(a *args) { a.topic, a.assignor = "nope", nil }},
	)
	over := populatedMaxBytes + 1
	for _, m := range []struct {
		name string
		msg  model.Message
	}{
		{"payload", model.Message{Payload: strings.Repeat("x", over)}},
		{"key", model.Message{Key: strings.Repeat("k", over)}},
		{"header key", model.Message{Headers: []model.Header{{Key: strings.Repeat("h", over)}}}},
		{"header value", model.Message{Headers: []model.Header{{Value: strings.Repeat("v", over)}}}},
		{"all parts, one byte over", model.Message{Key: "kkkk", Headers: []model.Header{{Key: "hh", Value: "vv"}, {Key: "h", Value: "vvv"}},
			Payload: strings.Repeat("p", over-12)}},
		{"many empty-valued headers", model.Message{Headers: slices.Repeat([]model.Header{{Key: "h"}}, over)}},
	} {
		ms = append(ms,
			mutation{"message over the limit: " + m.name, "s", func(a *args) { a.msg = m.msg }},
			mutation{"partition -1 and message over the limit: " + m.name, "ps", func(a *args) { a.partition, a.msg = -1, m.msg }},
		)
	}
	return ms
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func usesAll(uses, needs string) bool {
	for _, c := range needs {
		if !strings.ContainsRune(uses, c) {
			return false
		}
	}
	return true
}

// TestValidArgsBaseline proves that validArgs is valid for every method, so
// that in TestInvalidArguments the mutation alone causes the error.
func TestValidArgsBaseline(t *testing.T) {
	for _, m := range methods {
		a := validArgs
		if m.valid != nil {
			m.valid(&a)
		}
		b := populated(t)
		_, err := m.call(b, a)
		require.NoError(t, err, m.name)
		require.NoError(t, b.CheckInvariants(), m.name)
	}
}

// TestInvalidArguments checks SPEC rules 1 to 4 on every method: each invalid
// call returns ErrInvalidArgument and zero results, and changes nothing, even
// when it also names an absent group (validation before state checks).
func TestInvalidArguments(t *testing.T) {
	ran := map[string]int{}
	for _, m := range methods {
		for _, mu := range mutations() {
			if !usesAll(m.uses, mu.needs) {
				continue
			}
			ran[m.name]++
			t.Run(m.name+"/"+mu.name, func(t *testing.T) {
				b := populated(t)
				before := b.Clone()
				a := validArgs
				if m.valid != nil {
					m.valid(&a)
				}
				mu.mut(&a)
				got, err := m.call(b, a)
				require.ErrorIs(t, err, model.ErrInvalidArgument)
				require.Contains(t, err.Error(), model.ErrInvalidArgument.Error())
				require.Equal(t, m.wzero, got)
				requireUnchanged(t, before, b)
			})
		}
	}
	for _, m := range methods {
		require.NotZero(t, ran[m.name], "no invalid case for %s", m.name)
	}
}

func TestInspectionErrors(t *testing.T) {
	b := populated(t)
	before := b.Clone()
	_, err := b.LogStartOffset("nope", 0)
	require.ErrorIs(t, err, model.ErrInvalidArgument)
	_, err = b.LogEndOffset("t", 2)
	require.ErrorIs(t, err, model.ErrInvalidArgument)
	_, err = b.Retained("t", -1)
	require.ErrorIs(t, err, model.ErrInvalidArgument)
	_, err = b.PartitionCount("a.b")
	require.ErrorIs(t, err, model.ErrInvalidArgument)
	_, err = b.Groups("nope")
	require.ErrorIs(t, err, model.ErrInvalidArgument)
	_, err = b.Members("t", "")
	require.ErrorIs(t, err, model.ErrInvalidArgument)
	_, err = b.Committed("t", "absent", 5)
	require.ErrorIs(t, err, model.ErrInvalidArgument, "partition is checked before the group")

	_, err = b.Members("t", "absent")
	require.ErrorIs(t, err, model.ErrUnknownGroup)
	require.NotErrorIs(t, err, model.ErrInvalidArgument)
	_, err = b.Assignment("t", "absent")
	require.ErrorIs(t, err, model.ErrUnknownGroup)
	_, err = b.Committed("t", "absent", 0)
	require.ErrorIs(t, err, model.ErrUnknownGroup)
	_, err = b.InFlight("u", "g", 0)
	require.ErrorIs(t, err, model.ErrUnknownGroup)
	_, err = b.Attempts("t", "absent", 0)
	require.ErrorIs(t, err, model.ErrUnknownGroup)
	_, err = b.Attempts("t", "g", 2)
	require.ErrorIs(t, err, model.ErrInvalidArgument)
	_, err = b.Attempts("t", "g!", 0)
	require.ErrorIs(t, err, model.ErrInvalidArgument)
	requireUnchanged(t, before, b)
}

func TestIdentifiers(t *testing.T) {
	f := newFx(t, 5)
	long := strings.Repeat("Z", 64)
	require.True(t, f.create(long, 1))
	require.True(t, f.create("Az09_-", 1))
	require.True(t, f.create("az09_-", 1), "ids are case-sensitive")
	require.Equal(t, []string{"Az09_-", long, "az09_-"}, f.b.Topics())
	require.Equal(t, []int32{0}, f.join(long, long, long))
	require.Equal(t, []int32{0}, f.join("Az09_-", "g", "m"))
	require.Equal(t, []int32{0}, f.join("Az09_-", "g", "M"), "M sorts before m and takes the only partition")
	require.Equal(t, map[string][]int32{"M": {0}, "m": {}}, f.assignment("Az09_-", "g"))
}

func TestCreateDuplicateKeepsTopic(t *testing.T) {
	f := newFx(t, 5)
	require.True(t, f.create("t", 2))
	f.publish("t", 1, "a")
	f.join("t", "g", "m")
	before := f.b.Clone()
	require.False(t, f.create("t", 2))
	require.False(t, f.create("t", 64))
	requireUnchanged(t, before, f.b)
	n, err := f.b.PartitionCount("t")
	require.NoError(t, err)
	require.Equal(t, int32(2), n)
}

// TestOwnership checks rule 6: members sorted bytewise, p to p mod count.
func TestOwnership(t *testing.T) {
	f := newFx(t, 5)
	f.create("t", 6)
	f.join("t", "g", "b")
	f.join("t", "g", "a")
	f.join("t", "g", "_")
	require.Equal(t, []int32{0, 4}, f.join("t", "g", "B"))
	// Byte order: B (0x42) < _ (0x5f) < a < b.
	require.Equal(t, map[string][]int32{"B": {0, 4}, "_": {1, 5}, "a": {2}, "b": {3}}, f.assignment("t", "g"))
	members, err := f.b.Members("t", "g")
	require.NoError(t, err)
	require.Equal(t, []string{"B", "_", "a", "b"}, members)

	before := f.b.Clone()
	require.Equal(t, []int32{2}, f.join("t", "g", "a"), "joining twice")
	requireUnchanged(t, before, f.b)

	f.join("t", "g", "c")
	f.join("t", "g", "d")
	f.join("t", "g", "e")
	require.Equal(t, []int32{}, f.join("t", "g", "f"), "more members than partitions: the last owns nothing")
	require.Equal(t, []int32{0, 1, 2, 3, 4, 5}, f.join("t", "h", "z"), "groups are independent")
}

// TestJoinStartsAtLogStart checks rule 7 for empty, full and trimmed logs.
func TestJoinStartsAtLogStart(t *testing.T) {
	f := newFx(t, 2)
	f.create("t", 3)
	f.publish("t", 1, "a")
	f.publish("t", 1, "b")
	f.publish("t", 2, "c")
	f.join("t", "g1", "m")
	require.Equal(t, []model.Record{rec("t", 2, 0, "c")}, f.poll("t", "g1", "m", 64)[1:])
	require.True(t, f.ack("t", "g1", "m", 2, 0))
	require.Equal(t, int64(1), f.logStart("t", 2))

	f.join("t", "g2", "m")
	require.Equal(t, int64(0), f.committed("t", "g2", 0), "empty partition: next offset")
	require.Equal(t, int64(0), f.committed("t", "g2", 1), "retained records: log start")
	require.Equal(t, int64(1), f.committed("t", "g2", 2), "trimmed, empty partition: next offset")
	require.Equal(t, []model.Record{rec("t", 1, 0, "a")}, f.poll("t", "g2", "m", 64))
}

// TestLeave checks rules 8 and 9 on leaving.
func TestLeave(t *testing.T) {
	f := newFx(t, 5)
	f.create("t", 2)
	f.publish("t", 0, "a")
	f.publish("t", 0, "b")
	f.publish("t", 1, "c")

	before := f.b.Clone()
	require.False(t, f.leave("t", "g", "m"), "absent group")
	require.Equal(t, []string{}, f.groups("t"), "Leave never creates a group")
	requireUnchanged(t, before, f.b)

	f.join("t", "g", "m")
	f.join("t", "g", "n")
	before = f.b.Clone()
	require.False(t, f.leave("t", "g", "x"), "absent member")
	require.False(t, f.leave("t", "g", "M"), "absent member, case differs")
	requireUnchanged(t, before, f.b)

	require.Len(t, f.poll("t", "g", "m", 64), 1)
	require.True(t, f.ack("t", "g", "m", 0, 0))
	require.Equal(t, []model.Record{rec("t", 0, 1, "b")}, f.poll("t", "g", "m", 64))
	require.Equal(t, []model.Record{rec("t", 1, 0, "c")}, f.poll("t", "g", "n", 64))

	require.True(t, f.leave("t", "g", "n"))
	require.Equal(t, map[string][]int32{"m": {0, 1}}, f.assignment("t", "g"))
	require.True(t, f.inFlight("t", "g", 0), "m keeps partition 0 and its delivery")
	require.False(t, f.inFlight("t", "g", 1), "partition 1 moved from n to m")

	require.True(t, f.leave("t", "g", "m"))
	require.False(t, f.leave("t", "g", "m"), "leaving twice")
	require.Equal(t, map[string][]int32{}, f.assignment("t", "g"))
	require.False(t, f.inFlight("t", "g", 0), "a memberless group has no deliveries")
	require.Equal(t, int64(1), f.committed("t", "g", 0), "a memberless group keeps its offsets")
	require.Equal(t, []string{"g"}, f.groups("t"), "a memberless group is never deleted")
	require.False(t, f.ack("t", "g", "m", 0, 1), "a former member cannot ack")

	require.Equal(t, []int32{0, 1}, f.join("t", "g", "m"))
	require.Equal(t, []model.Record{recN("t", 0, 1, "b", 2), recN("t", 1, 0, "c", 2)}, f.poll("t", "g", "m", 64),
		"both deliveries were cancelled")
}

// TestPoll checks rule 10.
func TestPoll(t *testing.T) {
	f := newFx(t, 5)
	f.create("t", 3)
	f.publish("t", 0, "a")
	f.publish("t", 0, "b")
	f.publish("t", 2, "")

	before := f.b.Clone()
	require.Equal(t, []model.Record{}, f.poll("t", "g", "m", 64), "absent group")
	require.Equal(t, []string{}, f.groups("t"), "Poll never creates a group")
	requireUnchanged(t, before, f.b)

	f.join("t", "g", "m")
	before = f.b.Clone()
	require.Equal(t, []model.Record{}, f.poll("t", "g", "x", 64), "absent member")
	requireUnchanged(t, before, f.b)

	require.Equal(t, []model.Record{rec("t", 0, 0, "a")}, f.poll("t", "g", "m", 1), "maxRecords stops the walk")
	require.Equal(t, []model.Record{rec("t", 2, 0, "")}, f.poll("t", "g", "m", 64),
		"p0 in flight, p1 empty; empty payloads are records")
	before = f.b.Clone()
	require.Equal(t, []model.Record{}, f.poll("t", "g", "m", 64), "everything in flight")
	requireUnchanged(t, before, f.b)

	f.join("t", "h", "m")
	require.Equal(t, []model.Record{rec("t", 0, 0, "a"), rec("t", 2, 0, "")}, f.poll("t", "h", "m", 64),
		"another group gets the same records")

	require.True(t, f.ack("t", "g", "m", 0, 0))
	f.publish("t", 1, "c")
	require.Equal(t, []model.Record{rec("t", 0, 1, "b"), rec("t", 1, 0, "c")}, f.poll("t", "g", "m", 64),
		"ascending partitions; never the later offset before the ack")
}

// TestAckRetryMismatch checks that Ack and Retry return false and change
// nothing unless the caller owns the partition and names its in-flight offset.
func TestAckRetryMismatch(t *testing.T) {
	setup := func(t *testing.T) fx {
		f := newFx(t, 5)
		f.create("t", 2)
		f.publish("t", 0, "a")
		f.publish("t", 0, "b")
		f.publish("t", 1, "c")
		f.join("t", "g", "m") // owns p0
		f.join("t", "g", "n") // owns p1
		require.Len(t, f.poll("t", "g", "m", 64), 1)
		return f
	}
	tests := []struct {
		name, group, member string
		partition           int32
		offset              int64
	}{
		{"later retained offset, not in flight", "g", "m", 0, 1},
		{"offset past the log end", "g", "m", 0, 7},
		{"another member's in-flight partition", "g", "n", 0, 0},
		{"not the owner", "g", "m", 1, 0},
		{"owner, nothing in flight", "g", "n", 1, 0},
		{"absent member", "g", "z", 0, 0},
		{"absent group", "h", "m", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			before := f.b.Clone()
			require.False(t, f.ack("t", tt.group, tt.member, tt.partition, tt.offset))
			requireUnchanged(t, before, f.b)
			require.False(t, f.retry("t", tt.group, tt.member, tt.partition, tt.offset))
			requireUnchanged(t, before, f.b)
			require.Equal(t, []string{"g"}, f.groups("t"), "Ack and Retry never create a group")
		})
	}

	t.Run("ack then retry", func(t *testing.T) {
		f := setup(t)
		require.True(t, f.ack("t", "g", "m", 0, 0))
		before := f.b.Clone()
		require.False(t, f.retry("t", "g", "m", 0, 0))
		require.False(t, f.ack("t", "g", "m", 0, 0))
		requireUnchanged(t, before, f.b)
		require.Equal(t, int64(1), f.committed("t", "g", 0))
	})
	t.Run("retry then ack", func(t *testing.T) {
		f := setup(t)
		require.True(t, f.retry("t", "g", "m", 0, 0))
		before := f.b.Clone()
		require.False(t, f.ack("t", "g", "m", 0, 0))
		require.False(t, f.retry("t", "g", "m", 0, 0))
		requireUnchanged(t, before, f.b)
		require.Equal(t, int64(0), f.committed("t", "g", 0))
	})
}

// TestRetentionSeveralGroups checks rule 13 with a memberless group.
func TestRetentionSeveralGroups(t *testing.T) {
	f := newFx(t, 3)
	f.create("r", 1)
	f.join("r", "g1", "m1")
	f.join("r", "g2", "m2")
	f.join("r", "g3", "m3")
	require.True(t, f.leave("r", "g3", "m3"))
	for i, s := range []string{"a", "b", "c"} {
		require.Equal(t, int64(i), f.publish("r", 0, s))
	}
	require.Equal(t, int64(-1), f.publish("r", 0, "d"))

	for off := range int64(3) {
		require.Equal(t, []model.Record{rec("r", 0, off, []string{"a", "b", "c"}[off])}, f.poll("r", "g1", "m1", 64))
		require.True(t, f.ack("r", "g1", "m1", 0, off))
	}
	require.Equal(t, int64(0), f.logStart("r", 0), "g2 and g3 have acknowledged nothing")
	require.Len(t, f.retained("r", 0), 3)

	require.Len(t, f.poll("r", "g2", "m2", 64), 1)
	require.True(t, f.ack("r", "g2", "m2", 0, 0))
	require.Equal(t, int64(0), f.logStart("r", 0), "the memberless g3 still counts")
	require.Equal(t, int64(-1), f.publish("r", 0, "d"))

	require.Equal(t, []int32{0}, f.join("r", "g3", "m3"))
	require.Equal(t, []model.Record{rec("r", 0, 0, "a")}, f.poll("r", "g3", "m3", 64), "g3 kept offset 0")
	require.True(t, f.ack("r", "g3", "m3", 0, 0))
	require.Equal(t, int64(1), f.logStart("r", 0))
	require.Equal(t, []model.Record{kept("r", 0, 1, "b"), kept("r", 0, 2, "c")}, f.retained("r", 0))
	require.Equal(t, int64(3), f.publish("r", 0, "d"))

	f.join("r", "g4", "m4")
	require.Equal(t, int64(1), f.committed("r", "g4", 0), "a new group starts at the log start")
	require.True(t, f.leave("r", "g4", "m4"))
	require.Len(t, f.poll("r", "g2", "m2", 64), 1)
	require.True(t, f.ack("r", "g2", "m2", 0, 1))
	require.Len(t, f.poll("r", "g3", "m3", 64), 1)
	require.True(t, f.ack("r", "g3", "m3", 0, 1))
	require.Equal(t, int64(1), f.logStart("r", 0), "the memberless g4 holds offset 1")
	require.NoError(t, f.b.CheckInvariants())
}

func TestNoGroupsNothingTrimmed(t *testing.T) {
	f := newFx(t, 2)
	f.create("t", 2)
	require.Equal(t, int64(0), f.publish("t", 0, "a"))
	require.Equal(t, int64(1), f.publish("t", 0, "b"))
	require.Equal(t, int64(-1), f.publish("t", 0, "c"))
	require.Equal(t, int64(0), f.publish("t", 1, "x"), "partitions fill independently")
	require.Equal(t, int64(0), f.logStart("t", 0))
	require.Equal(t, int64(2), f.logEnd("t", 0))
	require.Equal(t, []model.Record{kept("t", 0, 0, "a"), kept("t", 0, 1, "b")}, f.retained("t", 0))
}

// TestPublishFullUsesNoOffset checks rule 5: -1 uses up no offset.
func TestPublishFullUsesNoOffset(t *testing.T) {
	f := newFx(t, 2)
	f.create("t", 1)
	require.Equal(t, int64(0), f.publish("t", 0, "a"))
	require.Equal(t, int64(1), f.publish("t", 0, "b"))
	before := f.b.Clone()
	require.Equal(t, int64(-1), f.publish("t", 0, "c"))
	require.Equal(t, int64(-1), f.publish("t", 0, "d"))
	requireUnchanged(t, before, f.b)

	f.join("t", "g", "m")
	require.Len(t, f.poll("t", "g", "m", 64), 1)
	require.Equal(t, int64(-1), f.publish("t", 0, "c"), "an unacknowledged record still counts")
	require.True(t, f.ack("t", "g", "m", 0, 0))
	require.Equal(t, int64(2), f.publish("t", 0, "c"))
	require.Equal(t, int64(3), f.logEnd("t", 0))
	require.Equal(t, []model.Record{kept("t", 0, 1, "b"), kept("t", 0, 2, "c")}, f.retained("t", 0))
}

func TestCloneIndependence(t *testing.T) {
	b := populated(t)
	saved := b.Clone()
	require.True(t, saved.Equal(b))

	c := fx{t: t, b: b.Clone()}
	c.publish("t", 1, "x")
	c.publish("u", 0, "y")
	c.poll("t", "g", "m2", 64)
	require.True(t, c.ack("t", "g", "m", 0, 0))
	c.join("t", "g", "m3")
	c.join("t", "idle", "x")
	c.join("u", "new", "x")
	require.True(t, c.leave("t", "g", "m2"))
	c.create("v", 1)
	requireUnchanged(t, saved, b)
	require.Equal(t, saved.Hash(), b.Hash())
	require.Equal(t, saved.String(), b.String())
	require.False(t, c.b.Equal(b))

	// A clone must not share a backing array with the original: a log of
	// three payloads has spare capacity, so a shallow copy would let the two
	// appends below overwrite each other.
	o := newFx(t, 10)
	o.create("t", 1)
	for _, s := range []string{"a", "b", "c"} {
		o.publish("t", 0, s)
	}
	o.join("t", "g", "m")
	require.Len(t, o.poll("t", "g", "m", 64), 1)
	k := fx{t: t, b: o.b.Clone()}
	k.publish("t", 0, "from clone")
	o.publish("t", 0, "from original")
	require.Equal(t, "from clone", k.retained("t", 0)[3].Payload)
	require.Equal(t, "from original", o.retained("t", 0)[3].Payload)
	require.True(t, o.ack("t", "g", "m", 0, 0))
	o.join("t", "g", "l")
	require.Equal(t, int64(0), k.committed("t", "g", 0))
	require.True(t, k.inFlight("t", "g", 0))
	require.Equal(t, map[string][]int32{"m": {0}}, k.assignment("t", "g"))
	require.Equal(t, int64(0), k.logStart("t", 0))
}

// TestReturnedValuesAreCallers checks that changing returned slices, maps and
// records never changes the broker.
func TestReturnedValuesAreCallers(t *testing.T) {
	f := fx{t: t, b: populated(t)}
	f.publish("t", 1, "e")
	ps := f.join("t", "g", "m")
	rs := f.poll("t", "g", "m2", 64)
	require.Len(t, rs, 1)
	saved := f.b.Clone()

	ps[0] = 1
	rs[0].Offset, rs[0].Payload, rs[0].Partition = 9, "changed", 0
	ret := f.retained("t", 0)
	ret[0].Payload = "changed"
	as := f.assignment("t", "g")
	as["m"][0] = 1
	as["intruder"] = []int32{0}
	delete(as, "m2")
	members, err := f.b.Members("t", "g")
	require.NoError(t, err)
	members[0] = "zz"
	gs := f.groups("t")
	gs[0] = "zz"
	ts := f.b.Topics()
	ts[0] = "zz"

	requireUnchanged(t, saved, f.b)
	require.Equal(t, map[string][]int32{"m": {0}, "m2": {1}}, f.assignment("t", "g"))
	require.Equal(t, []int32{0}, f.join("t", "g", "m"))
	require.Equal(t, "a", f.retained("t", 0)[0].Payload)
}

func TestEqualHashString(t *testing.T) {
	build := func(t *testing.T, steps ...func(f fx)) *model.Broker {
		f := newFx(t, 3)
		for _, s := range steps {
			s(f)
		}
		require.NoError(t, f.b.CheckInvariants())
		return f.b
	}
	base := []func(f fx){
		func(f fx) { f.create("a", 2); f.create("b", 1) },
		func(f fx) { f.publish("a", 0, "x"); f.publish("a", 0, "y"); f.publish("a", 1, "z") },
		func(f fx) { f.join("a", "g", "m1"); f.join("a", "g", "m2"); f.join("a", "h", "m1") },
		func(f fx) { f.poll("a", "g", "m1", 64) },
	}
	b := build(t, base...)
	require.True(t, b.Equal(b))

	same := []struct {
		name  string
		steps []func(f fx)
	}{
		{"same calls", base},
		{"topics and members in other orders", []func(f fx){
			func(f fx) { f.create("b", 1); f.create("a", 2) },
			func(f fx) { f.publish("a", 1, "z"); f.publish("a", 0, "x"); f.publish("a", 0, "y") },
			func(f fx) { f.join("a", "h", "m1"); f.join("a", "g", "m2"); f.join("a", "g", "m1") },
			func(f fx) { f.poll("a", "g", "m1", 64) },
		}},
		{"group created and deleted", append(slices.Clone(base), func(f fx) {
			require.True(t, f.createGroup("a", "extra", model.Sticky))
			require.True(t, f.deleteGroup("a", "extra"))
		})},
		{"assignor set and set back", append(slices.Clone(base), func(f fx) {
			require.True(t, f.setAssignor("a", "h", model.Range))
			require.True(t, f.setAssignor("a", "h", model.RoundRobin))
		})},
		{"join and leave of a member that moves no partition", append(slices.Clone(base), func(f fx) {
			f.join("a", "g", "m3")
			f.leave("a", "g", "m3")
		})},
	}
	full := build(t, append(slices.Clone(base), func(f fx) {
		for _, s := range []string{"1", "2", "3"} {
			f.publish("b", 0, s)
		}
	})...)
	fullThenRefused := full.Clone()
	off, err := fullThenRefused.Publish("b", 0, "4")
	require.NoError(t, err)
	require.Equal(t, int64(-1), off)
	require.True(t, full.Equal(fullThenRefused), "a refused publish leaves no trace")
	require.Equal(t, full.Hash(), fullThenRefused.Hash())
	for _, tt := range same {
		t.Run("equal/"+tt.name, func(t *testing.T) {
			o := build(t, tt.steps...)
			require.True(t, b.Equal(o))
			require.True(t, o.Equal(b))
			require.Equal(t, b.Hash(), o.Hash())
			require.Equal(t, b.String(), o.String())
			require.Equal(t, b.Hash(), b.Clone().Hash())
		})
	}

	differ := []struct {
		name  string
		build func(t *testing.T) *model.Broker
	}{
		{"capacity", func(t *testing.T) *model.Broker {
			f := newFx(t, 4)
			for _, s := range base {
				s(f)
			}
			return f.b
		}},
		{"extra topic", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) { f.create("c", 1) })...)
		}},
		{"extra record", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) { f.publish("b", 0, "") })...)
		}},
		{"other payload", func(t *testing.T) *model.Broker {
			return build(t, append([]func(f fx){base[0],
				func(f fx) { f.publish("a", 0, "x"); f.publish("a", 0, "Y"); f.publish("a", 1, "z") }}, base[2:]...)...)
		}},
		{"payload boundaries", func(t *testing.T) *model.Broker {
			return build(t, append([]func(f fx){base[0],
				func(f fx) { f.publish("a", 0, "xy"); f.publish("a", 0, ""); f.publish("a", 1, "z") }}, base[2:]...)...)
		}},
		{"in flight", func(t *testing.T) *model.Broker { return build(t, base[:3]...) }},
		{"committed and trimmed", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) {
				require.True(t, f.ack("a", "g", "m1", 0, 0))
				f.poll("a", "h", "m1", 64)
				require.True(t, f.ack("a", "h", "m1", 0, 0))
			})...)
		}},
		{"committed only", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) { require.True(t, f.ack("a", "g", "m1", 0, 0)) })...)
		}},
		{"extra memberless group", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) { f.join("a", "e", "m"); f.leave("a", "e", "m") })...)
		}},
		{"extra member", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) { f.join("a", "h", "m2") })...)
		}},
		{"other partition count", func(t *testing.T) *model.Broker {
			return build(t, append([]func(f fx){func(f fx) { f.create("a", 2); f.create("b", 2) }}, base[1:]...)...)
		}},
		{"attempts after poll and retry", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) {
				f.poll("a", "g", "m2", 64)
				require.True(t, f.retry("a", "g", "m2", 1, 0))
			})...)
		}},
		{"delivery cancelled by a rebalance", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) {
				f.join("a", "g", "m0") // m0 takes p0 from m1, cancelling its delivery
				f.leave("a", "g", "m0")
			})...)
		}},
		{"assignor only", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) { f.setAssignor("a", "h", model.Range) })...)
		}},
		{"assignor of a memberless group", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) { f.createGroup("b", "e", model.Sticky) })...)
		}},
		{"key", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) { f.publishMsg("b", 0, model.Message{Key: "k"}) })...)
		}},
		{"headers", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) {
				f.publishMsg("b", 0, model.Message{Headers: []model.Header{{Key: "h", Value: "v"}}})
			})...)
		}},
		{"time", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) {
				f.publishMsg("b", 0, model.Message{Time: t0.Add(time.Nanosecond)})
			})...)
		}},
		{"committed by seek", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) { require.True(t, f.seek("a", "h", 0, 2)) })...)
		}},
		{"added partitions", func(t *testing.T) *model.Broker {
			return build(t, append(slices.Clone(base), func(f fx) { f.addPartitions("b", 1) })...)
		}},
	}
	for _, tt := range differ {
		t.Run("differ/"+tt.name, func(t *testing.T) {
			o := tt.build(t)
			require.False(t, b.Equal(o))
			require.False(t, o.Equal(b))
			require.NotEqual(t, b.Hash(), o.Hash())
			require.NotEqual(t, b.String(), o.String())
		})
	}

	// Pairs that differ in one piece of state base cannot show.
	pairs := []struct {
		name string
		a, b func(t *testing.T) *model.Broker
	}{
		{"owners only (sticky remembers who came first)",
			func(t *testing.T) *model.Broker {
				f := newFx(t, 3)
				f.create("a", 2)
				f.createGroup("a", "s", model.Sticky)
				require.Equal(t, []int32{0, 1}, f.join("a", "s", "m1"))
				require.Equal(t, []int32{1}, f.join("a", "s", "m2"))
				return f.b
			},
			func(t *testing.T) *model.Broker {
				f := newFx(t, 3)
				f.create("a", 2)
				f.createGroup("a", "s", model.Sticky)
				require.Equal(t, []int32{0, 1}, f.join("a", "s", "m2"))
				require.Equal(t, []int32{1}, f.join("a", "s", "m1"))
				return f.b
			}},
		{"header order",
			func(t *testing.T) *model.Broker {
				f := newFx(t, 3)
				f.create("a", 1)
				f.publishMsg("a", 0, model.Message{Headers: []model.Header{{Key: "x", Value: "1"}, {Key: "y", Value: "2"}}})
				return f.b
			},
			func(t *testing.T) *model.Broker {
				f := newFx(t, 3)
				f.create("a", 1)
				f.publishMsg("a", 0, model.Message{Headers: []model.Header{{Key: "y", Value: "2"}, {Key: "x", Value: "1"}}})
				return f.b
			}},
		{"header boundaries",
			func(t *testing.T) *model.Broker {
				f := newFx(t, 3)
				f.create("a", 1)
				f.publishMsg("a", 0, model.Message{Key: "k", Headers: []model.Header{{Key: "ab", Value: ""}}})
				return f.b
			},
			func(t *testing.T) *model.Broker {
				f := newFx(t, 3)
				f.create("a", 1)
				f.publishMsg("a", 0, model.Message{Key: "k", Headers: []model.Header{{Key: "a", Value: "b"}}})
				return f.b
			}},
		{"delivery time under an ack timeout",
			func(t *testing.T) *model.Broker { return polledAt(t, t0) },
			func(t *testing.T) *model.Broker { return polledAt(t, t0.Add(time.Millisecond)) }},
		{"replay window", func(t *testing.T) *model.Broker { return newFx(t, 3).b },
			func(t *testing.T) *model.Broker { return newFx(t, 3, model.WithReplayWindow(1)).b }},
		{"ack timeout", func(t *testing.T) *model.Broker { return newFx(t, 3, model.WithAckTimeout(time.Second)).b },
			func(t *testing.T) *model.Broker { return newFx(t, 3, model.WithAckTimeout(2*time.Second)).b }},
		{"max message bytes", func(t *testing.T) *model.Broker { return newFx(t, 3).b },
			func(t *testing.T) *model.Broker { return newFx(t, 3, model.WithMaxMessageBytes(100)).b }},
	}
	for _, tt := range pairs {
		t.Run("differ/"+tt.name, func(t *testing.T) {
			x, y := tt.a(t), tt.b(t)
			require.NoError(t, x.CheckInvariants())
			require.NoError(t, y.CheckInvariants())
			require.False(t, x.Equal(y))
			require.False(t, y.Equal(x))
			require.NotEqual(t, x.Hash(), y.Hash())
			require.NotEqual(t, x.String(), y.String())
			require.True(t, x.Equal(x.Clone()))
			require.Equal(t, x.Hash(), x.Clone().Hash())
		})
	}

	t.Run("equal/times as instants, the clock ignored", func(t *testing.T) {
		build := func(loc *time.Location, clock func() time.Time) *model.Broker {
			f := newFx(t, 3, model.WithClock(clock))
			f.create("a", 1)
			f.publishMsg("a", 0, model.Message{Time: t0.In(loc)})
			return f.b
		}
		x := build(time.UTC, at0)
		y := build(time.FixedZone("east", 3600), time.Now)
		require.True(t, x.Equal(y))
		require.Equal(t, x.Hash(), y.Hash())
		require.Equal(t, x.String(), y.String())
	})
}

// polledAt returns a broker with an ack timeout whose only record was
// delivered at time at.
func polledAt(t *testing.T, at time.Time) *model.Broker {
	f := newFx(t, 3, model.WithAckTimeout(time.Minute), model.WithClock(func() time.Time { return at }))
	f.create("a", 1)
	f.publishMsg("a", 0, model.Message{Time: t0})
	f.join("a", "g", "m")
	require.Len(t, f.poll("a", "g", "m", 1), 1)
	return f.b
}

func TestString(t *testing.T) {
	f := newFx(t, 2)
	f.create("orders", 2)
	f.create("audit", 1)
	f.publish("orders", 0, "a")
	f.publish("orders", 0, "b\n")
	f.join("orders", "billing", "m1")
	f.join("orders", "ship", "m1")
	f.leave("orders", "ship", "m1")
	f.poll("orders", "billing", "m1", 2)
	want := `capacity=2
topic audit partitions=1
  log p0 [0,0)
topic orders partitions=2
  log p0 [0,2) "a"{time=2026-01-02T03:04:05Z} "b\n"{time=2026-01-02T03:04:05Z}
  log p1 [0,0)
  group billing assignor=RoundRobin members=[m1]
    p0 owner=m1 committed=0 attempts=1 inflight
    p1 owner=m1 committed=0
  group ship assignor=RoundRobin members=[]
    p0 owner=- committed=0
    p1 owner=- committed=0
`
	require.Equal(t, want, f.b.String())

	// Every option and every piece of rule 15–23 state.
	now := t0
	g := newFx(t, 3, model.WithReplayWindow(1), model.WithAckTimeout(30*time.Second),
		model.WithMaxMessageBytes(1024), model.WithClock(func() time.Time { return now }))
	g.create("orders", 1)
	g.publishMsg("orders", 0, model.Message{Key: "k", Headers: []model.Header{{Key: "h", Value: "v"}, {Key: "h", Value: ""}},
		Payload: "a", Time: time.Time{}})
	g.publishMsg("orders", 0, model.Message{Payload: "b", Time: t0.Add(-time.Hour).In(time.FixedZone("x", 7200))})
	g.createGroup("orders", "audit", model.Sticky)
	g.join("orders", "billing", "m1")
	g.poll("orders", "billing", "m1", 1)
	require.True(t, g.ack("orders", "billing", "m1", 0, 0))
	now = now.Add(1500 * time.Millisecond)
	g.poll("orders", "billing", "m1", 1)
	want = `capacity=3 window=1 acktimeout=30s maxbytes=1024
topic orders partitions=1
  log p0 [0,2) "a"{key="k" headers=["h":"v" "h":""] time=2026-01-02T03:04:05Z} "b"{time=2026-01-02T02:04:05Z}
  group audit assignor=Sticky members=[]
    p0 owner=- committed=0
  group billing assignor=RoundRobin members=[m1]
    p0 owner=m1 committed=1 attempts=1 inflight since=2026-01-02T03:04:06.5Z
`
	require.Equal(t, want, g.b.String())
}

// FuzzOperations drives random call sequences, every call of rules 1–25
// under random options, and checks, after every call, the model's
// invariants, the result conventions, that invalid, failed or false calls
// change nothing (without a session timeout: with one, a valid call may
// expire members and refresh its own, TestInvalidCallsExpireNobody and
// TestLastSeenRefresh check that), and that Clone, Equal and Hash agree.
func FuzzOperations(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 64 {
		seed := make([]byte, 400)
		for i := range seed {
			seed[i] = byte(r.Uint32())
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4000 {
			data = data[:4000] // about 500 calls; longer inputs only slow the fuzzer
		}
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			v := int(data[0])
			data = data[1:]
			return v
		}
		topics := []string{"t", "u", "nope", "a.b"}
		groups := []string{"g", "h", "i", ""}
		members := []string{"a", "b", "c", "d", "A"}
		never := false
		assignors := []model.Assignor{model.RoundRobin, model.Range, model.Sticky,
			badAssignor{fault: "stranger", ok: &never}, nil}
		clock := testclock.New()
		capacity := int32(next()%4 + 1)
		opts := []model.Option{model.WithClock(clock.Now), model.WithReplayWindow(int32(next()) % (capacity + 1))}
		if next()%2 == 0 {
			opts = append(opts, model.WithAckTimeout(3*time.Second))
		}
		if next()%3 == 0 {
			opts = append(opts, model.WithMaxMessageBytes(4))
		}
		session := next()%3 == 0
		if session {
			opts = append(opts, model.WithSessionTimeout(5*time.Second))
		}
		b, err := model.New(capacity, opts...)
		require.NoError(t, err)
		for len(data) > 0 {
			op, tp, g, m := next()%18, topics[next()%len(topics)], groups[next()%len(groups)], members[next()%len(members)]
			p, off, n := int32(next()%5)-1, int64(next()%5)-1, int32(next()%5)
			before := b.Clone()
			require.True(t, before.Equal(b))
			require.Equal(t, before.Hash(), b.Hash())
			// want: 0 no claim, 1 state must be unchanged, 2 state must differ.
			const (
				anything = iota
				same
				differs
			)
			want := same
			expect := func(changed bool) {
				if changed {
					want = differs
				}
			}
			switch op {
			case 0:
				ok, err := b.Create(tp, n)
				if err != nil {
					require.False(t, ok)
				}
				expect(ok)
			case 1:
				ps, err := b.Join(tp, g, m)
				if err == nil {
					require.NotNil(t, ps)
					require.True(t, slices.IsSorted(ps))
					as, err := b.Assignment(tp, g)
					require.NoError(t, err)
					require.Equal(t, ps, as[m])
					want = anything // joining twice changes nothing
				} else {
					require.Nil(t, ps)
				}
			case 2:
				ok, err := b.Leave(tp, g, m)
				if err != nil {
					require.False(t, ok)
				}
				expect(ok)
			case 3, 4:
				got, err := b.Publish(tp, p, "x")
				if err == nil && got >= 0 {
					end, err := b.LogEndOffset(tp, p)
					require.NoError(t, err)
					require.Equal(t, end-1, got)
					want = differs
				} else {
					require.Equal(t, int64(-1), got, "a refused or invalid publish returns -1")
				}
			case 5:
				rs, err := b.Poll(tp, g, m, n)
				if err != nil {
					require.Nil(t, rs)
					break
				}
				require.NotNil(t, rs)
				require.LessOrEqual(t, len(rs), int(n))
				for i, r := range rs {
					require.Equal(t, tp, r.Topic)
					if i > 0 {
						require.Less(t, rs[i-1].Partition, r.Partition)
					}
					c, err := b.Committed(tp, g, r.Partition)
					require.NoError(t, err)
					require.Equal(t, c, r.Offset)
					inf, err := b.InFlight(tp, g, r.Partition)
					require.NoError(t, err)
					require.True(t, inf)
					at, err := b.Attempts(tp, g, r.Partition)
					require.NoError(t, err)
					require.Equal(t, at, r.Attempt)
					require.Positive(t, r.Attempt)
				}
				expect(len(rs) > 0)
			case 6, 7:
				call := b.Ack
				if op == 7 {
					call = b.Retry
				}
				// Aim at the in-flight offset half of the time.
				if c, err := b.Committed(tp, g, p); err == nil && next()%2 == 0 {
					off = c
				}
				ok, err := call(tp, g, m, p, off)
				if err != nil {
					require.False(t, ok)
				}
				if ok {
					inf, err := b.InFlight(tp, g, p)
					require.NoError(t, err)
					require.False(t, inf)
					c, err := b.Committed(tp, g, p)
					require.NoError(t, err)
					if op == 6 {
						require.Equal(t, off+1, c)
					} else {
						require.Equal(t, off, c)
					}
				}
				expect(ok)
			case 8:
				msg := model.Message{Key: []string{"", "k"}[next()%2], Payload: []string{"", "x", "xyz"}[next()%3]}
				if next()%2 == 0 {
					msg.Headers = []model.Header{{Key: "h", Value: "v"}}
				}
				if next()%2 == 0 {
					msg.Time = t0.Add(-time.Hour)
				}
				got, err := b.PublishMessage(tp, p, msg)
				if err == nil && got >= 0 {
					rs, err := b.Retained(tp, p)
					require.NoError(t, err)
					last := rs[len(rs)-1]
					require.Equal(t, got, last.Offset)
					require.Equal(t, msg.Key, last.Key)
					require.Equal(t, msg.Payload, last.Payload)
					require.Equal(t, len(msg.Headers), len(last.Headers))
					want = differs
				} else {
					require.Equal(t, int64(-1), got)
				}
			case 9:
				ok, err := b.CreateGroup(tp, g, assignors[next()%len(assignors)])
				if err != nil {
					require.False(t, ok)
				}
				expect(ok)
			case 10:
				ok, err := b.DeleteGroup(tp, g)
				if err != nil {
					require.False(t, ok)
				}
				if errors.Is(err, model.ErrGroupNotEmpty) {
					ms, err := b.Members(tp, g)
					require.NoError(t, err)
					require.NotEmpty(t, ms)
				}
				expect(ok)
			case 11:
				ok, err := b.SetAssignor(tp, g, assignors[next()%len(assignors)])
				if err != nil {
					require.False(t, ok)
				}
				if ok {
					want = anything // the same assignor again changes nothing
				}
			case 12:
				count, _ := b.PartitionCount(tp)
				got, err := b.AddPartitions(tp, n-1)
				if err != nil {
					require.Zero(t, got)
				} else {
					require.Equal(t, count+n-1, got)
					want = differs
				}
			case 13:
				// Aim near the committed offset most of the time.
				if c, err := b.Committed(tp, g, p); err == nil && next()%4 != 0 {
					off = c + int64(next()%3) - 1
				}
				ok, err := b.Seek(tp, g, p, off)
				if err != nil {
					require.False(t, ok)
				}
				if ok {
					c, err := b.Committed(tp, g, p)
					require.NoError(t, err)
					require.Equal(t, off, c)
					inf, err := b.InFlight(tp, g, p)
					require.NoError(t, err)
					require.False(t, inf)
					at, err := b.Attempts(tp, g, p)
					require.NoError(t, err)
					require.Zero(t, at)
					want = anything // seeking where nothing is in flight changes nothing
				}
			case 14:
				clock.Advance(time.Duration(n) * time.Second)
			case 15:
				d, err := b.Describe(tp)
				if err != nil {
					require.Equal(t, model.TopicDescription{}, d)
					break
				}
				for _, gd := range d.Groups {
					for _, gp := range gd.Partitions {
						c, err := b.Committed(tp, gd.Group, gp.Partition)
						require.NoError(t, err)
						require.Equal(t, c, gp.Committed)
						require.Equal(t, d.Partitions[gp.Partition].LogEndOffset-c, gp.Lag)
					}
				}
			case 16:
				ok, err := b.Heartbeat(tp, g, m)
				if err != nil {
					require.False(t, ok)
				}
				if ok {
					ms, err := b.Members(tp, g)
					require.NoError(t, err)
					require.Contains(t, ms, m)
					want = anything // a refreshed last-seen
				}
			case 17:
				inFlight := b.Clone()
				ps, err := b.Rejoin(tp, g, m)
				if err != nil {
					require.Nil(t, ps)
					break
				}
				require.NotNil(t, ps)
				as, err := b.Assignment(tp, g)
				require.NoError(t, err)
				require.Equal(t, ps, as[m])
				for _, p := range ps {
					inf, err := b.InFlight(tp, g, p)
					require.NoError(t, err)
					require.False(t, inf, "Rejoin leaves none of its deliveries in flight")
					a0, _ := inFlight.Attempts(tp, g, p)
					a1, _ := b.Attempts(tp, g, p)
					require.Equal(t, a0, a1, "Rejoin keeps attempts")
				}
				want = anything
			}
			if session && want == same {
				want = anything
			}
			require.NoError(t, b.CheckInvariants(), "after op %d\n%s", op, b)
			switch want {
			case same:
				requireUnchanged(t, before, b)
			case differs:
				require.False(t, before.Equal(b), "op %d reported a change but the state is equal", op)
				require.NotEqual(t, before.String(), b.String())
			}
			c := b.Clone()
			require.True(t, c.Equal(b))
			require.Equal(t, b.Hash(), c.Hash())
			require.Equal(t, b.String(), c.String())
		}
	})
}
