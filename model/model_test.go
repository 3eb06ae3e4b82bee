package model_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/model"
)

// fx wraps a broker with calls that must not return an error, so scenarios
// read like the SPEC's worked examples.
type fx struct {
	t *testing.T
	b *model.Broker
}

func newFx(t *testing.T, capacity int32) fx {
	t.Helper()
	b, err := model.New(capacity)
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

func rec(topic string, p int32, off int64, payload string) model.Record {
	return model.Record{Topic: topic, Partition: p, Offset: off, Payload: payload}
}

// TestSpecWorkedExample is SPEC section 2's first worked example, verbatim.
func TestSpecWorkedExample(t *testing.T) {
	f := newFx(t, 2)
	require.True(t, f.create("orders", 1))
	require.Equal(t, int64(0), f.publish("orders", 0, "a"))
	require.Equal(t, int64(1), f.publish("orders", 0, "b"))
	require.Equal(t, []int32{0}, f.join("orders", "billing", "m1"))
	require.Equal(t, []model.Record{rec("orders", 0, 0, "a")}, f.poll("orders", "billing", "m1", 2))
	require.True(t, f.retry("orders", "billing", "m1", 0, 0))
	require.Equal(t, []model.Record{rec("orders", 0, 0, "a")}, f.poll("orders", "billing", "m1", 2))
	require.True(t, f.ack("orders", "billing", "m1", 0, 0))
	require.Equal(t, []model.Record{rec("orders", 0, 1, "b")}, f.poll("orders", "billing", "m1", 2))
	require.NoError(t, f.b.CheckInvariants())
}

// TestSpecRebalanceExample is SPEC section 2's rebalance example, verbatim.
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

	require.Equal(t, []model.Record{rec("t", 1, 0, "x")}, f.poll("t", "g", "b", 64))
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

// args are the arguments of one core call; populated makes them all valid.
type args struct {
	topic, group, member string
	partition            int32
	offset               int64
	maxRecords, count    int32
}

var validArgs = args{topic: "t", group: "g", member: "m", partition: 0, offset: 0, maxRecords: 1, count: 2}

// populated returns a broker in which validArgs is a valid call of every
// method: topic t (2 partitions) with records, group g with members m (owns
// p0, offset 0 in flight) and m2 (owns p1), a memberless group idle, and a
// second topic u.
func populated(t *testing.T) *model.Broker {
	f := newFx(t, 3)
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

// methods are the core calls; uses lists the argument kinds each takes:
// t topic id, k topic must exist, g group, m member, p partition, o offset,
// n maxRecords, c partitionCount.
var methods = []struct {
	name  string
	uses  string
	call  func(b *model.Broker, a args) (any, error)
	wzero any
}{
	{"Create", "tc", func(b *model.Broker, a args) (any, error) { return b.Create(a.topic, a.count) }, false},
	{"Join", "tkgm", func(b *model.Broker, a args) (any, error) { return b.Join(a.topic, a.group, a.member) }, []int32(nil)},
	{"Leave", "tkgm", func(b *model.Broker, a args) (any, error) { return b.Leave(a.topic, a.group, a.member) }, false},
	{"Publish", "tkp", func(b *model.Broker, a args) (any, error) { return b.Publish(a.topic, a.partition, "payload") }, int64(0)},
	{"Poll", "tkgmn", func(b *model.Broker, a args) (any, error) {
		return b.Poll(a.topic, a.group, a.member, a.maxRecords)
	}, []model.Record(nil)},
	{"Ack", "tkgmpo", func(b *model.Broker, a args) (any, error) {
		return b.Ack(a.topic, a.group, a.member, a.partition, a.offset)
	}, false},
	{"Retry", "tkgmpo", func(b *model.Broker, a args) (any, error) {
		return b.Retry(a.topic, a.group, a.member, a.partition, a.offset)
	}, false},
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
		_, err := m.call(populated(t), validArgs)
		require.NoError(t, err, m.name)
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
	require.Equal(t, []model.Record{rec("t", 0, 1, "b"), rec("t", 1, 0, "c")}, f.poll("t", "g", "m", 64))
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
	require.Equal(t, []model.Record{rec("r", 0, 1, "b"), rec("r", 0, 2, "c")}, f.retained("r", 0))
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
	require.Equal(t, []model.Record{rec("t", 0, 0, "a"), rec("t", 0, 1, "b")}, f.retained("t", 0))
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
	require.Equal(t, []model.Record{rec("t", 0, 1, "b"), rec("t", 0, 2, "c")}, f.retained("t", 0))
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
		{"poll and retry undone", append(slices.Clone(base), func(f fx) {
			f.poll("a", "g", "m2", 64)
			require.True(t, f.retry("a", "g", "m2", 1, 0))
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
  log p0 [0,2) "a" "b\n"
  log p1 [0,0)
  group billing members=[m1]
    p0 owner=m1 committed=0 inflight
    p1 owner=m1 committed=0
  group ship members=[]
    p0 owner=- committed=0
    p1 owner=- committed=0
`
	require.Equal(t, want, f.b.String())
}

// FuzzOperations drives random call sequences and checks, after every call,
// the model's invariants, the result conventions, that invalid or false calls
// change nothing, and that Clone, Equal and Hash agree.
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
		b, err := model.New(int32(next()%4 + 1))
		require.NoError(t, err)
		for len(data) > 0 {
			op, tp, g, m := next()%8, topics[next()%len(topics)], groups[next()%len(groups)], members[next()%len(members)]
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
					require.Contains(t, []int64{0, -1}, got)
					if err != nil {
						require.Zero(t, got)
					}
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
