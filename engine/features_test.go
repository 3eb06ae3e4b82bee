package engine_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/backendtest"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// Tests of SPEC rules 15–23 (the Tributary features), one group of table
// tests per rule, plus the options of New and the zero Broker. Time is a
// fake clock (internal/testclock) passed with engine.WithClock, so record times and ack
// timeouts are exact. Helpers are prefixed ft to keep out of the way of the
// other test files of the package.

// ftBroker wraps a broker with calls that must not fail: each one requires
// a nil error and returns the other result.
type ftBroker struct {
	t testing.TB
	*engine.Broker
}

func ftNew(t testing.TB, capacity int32, opts ...engine.Option) ftBroker {
	t.Helper()
	b, err := engine.New(capacity, opts...)
	require.NoError(t, err)
	require.NotNil(t, b)
	return ftBroker{t, b}
}

func (f ftBroker) create(topic string, partitions int32) {
	f.t.Helper()
	ok, err := f.Create(topic, partitions)
	require.NoError(f.t, err, "Create(%q, %d)", topic, partitions)
	require.True(f.t, ok, "Create(%q, %d)", topic, partitions)
}

func (f ftBroker) join(topic, group, member string) []int32 {
	f.t.Helper()
	parts, err := f.Join(topic, group, member)
	require.NoError(f.t, err, "Join(%q, %q, %q)", topic, group, member)
	return parts
}

func (f ftBroker) leave(topic, group, member string) bool {
	f.t.Helper()
	ok, err := f.Leave(topic, group, member)
	require.NoError(f.t, err, "Leave(%q, %q, %q)", topic, group, member)
	return ok
}

func (f ftBroker) pub(topic string, partition int32, payload string) int64 {
	f.t.Helper()
	off, err := f.Publish(topic, partition, payload)
	require.NoError(f.t, err, "Publish(%q, %d, %q)", topic, partition, payload)
	return off
}

func (f ftBroker) pubMsg(topic string, partition int32, m engine.Message) int64 {
	f.t.Helper()
	off, err := f.PublishMessage(topic, partition, m)
	require.NoError(f.t, err, "PublishMessage(%q, %d, %+v)", topic, partition, m)
	return off
}

func (f ftBroker) poll(topic, group, member string, maxRecords int32) []engine.Record {
	f.t.Helper()
	recs, err := f.Poll(topic, group, member, maxRecords)
	require.NoError(f.t, err, "Poll(%q, %q, %q, %d)", topic, group, member, maxRecords)
	require.NotNil(f.t, recs)
	// Rule 16: the Attempts inspection agrees with every delivery.
	for _, r := range recs {
		require.Equal(f.t, r.Attempt, f.attempts(topic, group, r.Partition), "Attempts after delivering %v", ftSeen(r))
	}
	return recs
}

func (f ftBroker) ack(topic, group, member string, partition int32, offset int64) bool {
	f.t.Helper()
	ok, err := f.Ack(topic, group, member, partition, offset)
	require.NoError(f.t, err, "Ack(%q, %q, %q, %d, %d)", topic, group, member, partition, offset)
	return ok
}

func (f ftBroker) retry(topic, group, member string, partition int32, offset int64) bool {
	f.t.Helper()
	ok, err := f.Retry(topic, group, member, partition, offset)
	require.NoError(f.t, err, "Retry(%q, %q, %q, %d, %d)", topic, group, member, partition, offset)
	return ok
}

func (f ftBroker) createGroup(topic, group string, a engine.Assignor) bool {
	f.t.Helper()
	ok, err := f.CreateGroup(topic, group, a)
	require.NoError(f.t, err, "CreateGroup(%q, %q)", topic, group)
	return ok
}

func (f ftBroker) deleteGroup(topic, group string) bool {
	f.t.Helper()
	ok, err := f.DeleteGroup(topic, group)
	require.NoError(f.t, err, "DeleteGroup(%q, %q)", topic, group)
	return ok
}

func (f ftBroker) setAssignor(topic, group string, a engine.Assignor) bool {
	f.t.Helper()
	ok, err := f.SetAssignor(topic, group, a)
	require.NoError(f.t, err, "SetAssignor(%q, %q)", topic, group)
	return ok
}

func (f ftBroker) seek(topic, group string, partition int32, offset int64) bool {
	f.t.Helper()
	ok, err := f.Seek(topic, group, partition, offset)
	require.NoError(f.t, err, "Seek(%q, %q, %d, %d)", topic, group, partition, offset)
	return ok
}

func (f ftBroker) describe(topic string) engine.TopicDescription {
	f.t.Helper()
	d, err := f.Describe(topic)
	require.NoError(f.t, err, "Describe(%q)", topic)
	return d
}

func (f ftBroker) attempts(topic, group string, partition int32) int32 {
	f.t.Helper()
	n, err := f.Attempts(topic, group, partition)
	require.NoError(f.t, err, "Attempts(%q, %q, %d)", topic, group, partition)
	return n
}

func (f ftBroker) committed(topic, group string, partition int32) int64 {
	f.t.Helper()
	n, err := f.Committed(topic, group, partition)
	require.NoError(f.t, err, "Committed(%q, %q, %d)", topic, group, partition)
	return n
}

func (f ftBroker) inFlight(topic, group string, partition int32) bool {
	f.t.Helper()
	ok, err := f.InFlight(topic, group, partition)
	require.NoError(f.t, err, "InFlight(%q, %q, %d)", topic, group, partition)
	return ok
}

func (f ftBroker) logStart(topic string, partition int32) int64 {
	f.t.Helper()
	n, err := f.LogStartOffset(topic, partition)
	require.NoError(f.t, err)
	return n
}

func (f ftBroker) logEnd(topic string, partition int32) int64 {
	f.t.Helper()
	n, err := f.LogEndOffset(topic, partition)
	require.NoError(f.t, err)
	return n
}

// drain polls and acks as member until a poll returns nothing and returns
// what it acked, as ftSeen strings.
func (f ftBroker) drain(topic, group, member string) []string {
	f.t.Helper()
	return ftSeen(f.drainRecords(topic, group, member)...)
}

// drainRecords is drain returning the records.
func (f ftBroker) drainRecords(topic, group, member string) []engine.Record {
	f.t.Helper()
	var acked []engine.Record
	for range 10000 {
		recs := f.poll(topic, group, member, engine.MaxPollRecords)
		if len(recs) == 0 {
			return acked
		}
		for _, r := range recs {
			require.True(f.t, f.ack(topic, group, member, r.Partition, r.Offset), "ack of %v", ftSeen(r))
		}
		acked = append(acked, recs...)
	}
	f.t.Fatalf("drain(%q, %q, %q) did not end", topic, group, member)
	return nil
}

// ftSeen writes records as "partition/offset payload #attempt", the form
// the tests compare deliveries in.
func ftSeen(recs ...engine.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%d/%d %s #%d", r.Partition, r.Offset, r.Payload, r.Attempt)
	}
	return out
}

// ftGroup returns the description of group in d.
func ftGroup(t testing.TB, d engine.TopicDescription, group string) engine.GroupDescription {
	t.Helper()
	for _, g := range d.Groups {
		if g.Group == group {
			return g
		}
	}
	t.Fatalf("Describe(%q) has no group %q", d.Topic, group)
	return engine.GroupDescription{}
}

// ftColumn returns field of each partition of a group, in partition order.
func ftColumn[T any](g engine.GroupDescription, field func(engine.GroupPartition) T) []T {
	out := make([]T, len(g.Partitions))
	for i, p := range g.Partitions {
		out[i] = field(p)
	}
	return out
}

// ftOwners returns a group's owner per partition.
func ftOwners(g engine.GroupDescription) []string {
	return ftColumn(g, func(p engine.GroupPartition) string { return p.Owner })
}

// ftCommitted returns a group's committed offset per partition.
func ftCommitted(g engine.GroupDescription) []int64 {
	return ftColumn(g, func(p engine.GroupPartition) int64 { return p.Committed })
}

// ftInFlight returns a group's in-flight flag per partition.
func ftInFlight(g engine.GroupDescription) []bool {
	return ftColumn(g, func(p engine.GroupPartition) bool { return p.InFlight })
}

// ftAttempts returns a group's attempts per partition.
func ftAttempts(g engine.GroupDescription) []int32 {
	return ftColumn(g, func(p engine.GroupPartition) int32 { return p.Attempts })
}

// ftInvalid requires err to be ErrInvalidArgument.
func ftInvalid(t testing.TB, err error, call string) {
	t.Helper()
	require.Error(t, err, "%s: want ErrInvalidArgument", call)
	require.True(t, errors.Is(err, engine.ErrInvalidArgument), "%s: %v, want ErrInvalidArgument", call, err)
}

// ftUnchanged requires that Describe(topic) still equals before.
func (f ftBroker) unchanged(topic string, before engine.TopicDescription, call string) {
	f.t.Helper()
	if diff := cmp.Diff(before, f.describe(topic)); diff != "" {
		f.t.Fatalf("%s changed the topic (-before +after):\n%s", call, diff)
	}
}

// ---------------------------------------------------------------------------
// Rule 15: messages.

func TestRule15PublishMessage(t *testing.T) {
	zone := time.FixedZone("UTC+5", 5*3600)
	given := time.Date(2020, time.January, 2, 3, 4, 5, 6, zone)
	tests := []struct {
		name     string
		m        engine.Message
		wkey     string
		wheaders []engine.Header
		wtime    time.Time // zero: the broker clock at the publish
	}{
		{name: "payload only", m: engine.Message{Payload: "p"}},
		{name: "empty message", m: engine.Message{}},
		{name: "key", m: engine.Message{Key: "customer-7", Payload: "p"}, wkey: "customer-7"},
		{
			name: "headers keep order and duplicates",
			m: engine.Message{Payload: "p", Headers: []engine.Header{
				{Key: "b", Value: "1"}, {Key: "a", Value: "2"}, {Key: "b", Value: "3"}, {Key: "b", Value: "3"},
			}},
			wheaders: []engine.Header{{Key: "b", Value: "1"}, {Key: "a", Value: "2"}, {Key: "b", Value: "3"}, {Key: "b", Value: "3"}},
		},
		{
			name:     "empty header key and value",
			m:        engine.Message{Headers: []engine.Header{{}}},
			wheaders: []engine.Header{{}},
		},
		{name: "empty headers slice is no headers", m: engine.Message{Payload: "p", Headers: []engine.Header{}}},
		{name: "time given", m: engine.Message{Payload: "p", Time: given}, wtime: given},
		{
			name:     "everything",
			m:        engine.Message{Key: "k", Headers: []engine.Header{{Key: "trace", Value: "ab12"}}, Payload: `{"id":7}`, Time: given},
			wkey:     "k",
			wheaders: []engine.Header{{Key: "trace", Value: "ab12"}},
			wtime:    given,
		},
		{name: "binary payload and key", m: engine.Message{Key: "\x00\xff", Payload: "\x00a\xffb"}, wkey: "\x00\xff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := testclock.New()
			f := ftNew(t, 4, engine.WithClock(clock.Now))
			f.create("t", 2)
			clock.Advance(time.Second)
			published := clock.Now()
			require.Equal(t, int64(0), f.pubMsg("t", 1, tt.m))
			clock.Advance(time.Minute) // the record's time is the publish's, not the poll's
			f.join("t", "g", "m")
			recs := f.poll("t", "g", "m", 4)
			require.Len(t, recs, 1)
			r := recs[0]
			wtime := tt.wtime
			if wtime.IsZero() {
				wtime = published
			}
			assert.Equal(t, "t", r.Topic)
			assert.Equal(t, int32(1), r.Partition)
			assert.Equal(t, int64(0), r.Offset)
			assert.Equal(t, tt.m.Payload, r.Payload)
			assert.Equal(t, tt.wkey, r.Key)
			assert.Equal(t, tt.wheaders, r.Headers) // nil and empty differ
			assert.True(t, r.Time.Equal(wtime), "Time %v, want %v", r.Time, wtime)
			assert.Equal(t, int32(1), r.Attempt)
		})
	}
}

// TestRule15HeadersAreCopied: the broker keeps its own copy of the headers
// given to PublishMessage, and every Record gets a copy of its own.
func TestRule15HeadersAreCopied(t *testing.T) {
	f := ftNew(t, 4)
	f.create("t", 1)
	want := []engine.Header{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}
	hs := slices.Clone(want)
	require.Equal(t, int64(0), f.pubMsg("t", 0, engine.Message{Payload: "p", Headers: hs}))
	hs[0].Value = "changed by the producer"
	hs[1] = engine.Header{Key: "x", Value: "y"}

	f.join("t", "g", "m")
	f.join("t", "h", "m")
	first := f.poll("t", "g", "m", 1)
	require.Len(t, first, 1)
	require.Equal(t, want, first[0].Headers)
	first[0].Headers[0].Key = "changed by the consumer"
	first[0].Headers = append(first[0].Headers[:1], engine.Header{Key: "appended"})

	require.True(t, f.retry("t", "g", "m", 0, 0))
	again := f.poll("t", "g", "m", 1)
	require.Len(t, again, 1)
	assert.Equal(t, want, again[0].Headers, "redelivery")
	other := f.poll("t", "h", "m", 1)
	require.Len(t, other, 1)
	assert.Equal(t, want, other[0].Headers, "another group")
	again[0].Headers[1].Value = "changed"
	assert.Equal(t, want, other[0].Headers, "two records share headers")
}

// TestRule15MaxMessageBytes: with WithMaxMessageBytes(10) a message of key
// + header keys + header values + payload bytes up to 10 is accepted; one
// byte more is ErrInvalidArgument, returns -1 and changes nothing.
func TestRule15MaxMessageBytes(t *testing.T) {
	const limit = 10
	h := func(kv ...string) []engine.Header {
		var out []engine.Header
		for i := 0; i < len(kv); i += 2 {
			out = append(out, engine.Header{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name     string
		m        engine.Message
		winvalid bool
	}{
		{"empty", engine.Message{}, false},
		{"payload of exactly n", engine.Message{Payload: "0123456789"}, false},
		{"payload of n+1", engine.Message{Payload: "0123456789a"}, true},
		{"key counts: n", engine.Message{Key: "abcd", Payload: "012345"}, false},
		{"key counts: n+1", engine.Message{Key: "abcde", Payload: "012345"}, true},
		{"key alone n+1", engine.Message{Key: "0123456789a"}, true},
		{"header key counts: n", engine.Message{Headers: h("abc", ""), Payload: "0123456"}, false},
		{"header key counts: n+1", engine.Message{Headers: h("abc", ""), Payload: "01234567"}, true},
		{"header value counts: n", engine.Message{Headers: h("", "abc"), Payload: "0123456"}, false},
		{"header value counts: n+1", engine.Message{Headers: h("", "abc"), Payload: "01234567"}, true},
		{"all parts: n", engine.Message{Key: "ab", Headers: h("a", "b", "c", "d"), Payload: "wxyz"}, false},
		{"all parts: n+1", engine.Message{Key: "ab", Headers: h("a", "b", "c", "d"), Payload: "vwxyz"}, true},
		{"bytes, not runes: n", engine.Message{Payload: "ééééé"}, false},
		{"bytes, not runes: n+1", engine.Message{Payload: "éééééa"}, true},
		{"time does not count", engine.Message{Payload: "0123456789", Time: testclock.Epoch}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ftNew(t, 4, engine.WithMaxMessageBytes(limit))
			f.create("t", 1)
			f.createGroup("t", "g", engine.RoundRobin)
			require.Equal(t, int64(0), f.pubMsg("t", 0, engine.Message{Payload: "first"}))
			before := f.describe("t")

			off, err := f.PublishMessage("t", 0, tt.m)
			if !tt.winvalid {
				require.NoError(t, err)
				require.Equal(t, int64(1), off)
				f.join("t", "g", "m")
				require.True(t, f.ack("t", "g", "m", 0, f.poll("t", "g", "m", 1)[0].Offset))
				recs := f.poll("t", "g", "m", 1)
				require.Len(t, recs, 1)
				assert.Equal(t, tt.m.Payload, recs[0].Payload)
				assert.Equal(t, tt.m.Key, recs[0].Key)
				return
			}
			ftInvalid(t, err, "PublishMessage")
			require.Equal(t, int64(-1), off)
			require.Equal(t, int64(1), f.logEnd("t", 0))
			f.unchanged("t", before, "an oversized PublishMessage")
			// The next publish gets the offset the failed one did not use.
			require.Equal(t, int64(1), f.pubMsg("t", 0, engine.Message{Payload: "next"}))
		})
	}
	t.Run("Publish is bound too", func(t *testing.T) {
		// Publish(t, p, s) is PublishMessage(t, p, Message{Payload: s}).
		f := ftNew(t, 4, engine.WithMaxMessageBytes(limit))
		f.create("t", 1)
		require.Equal(t, int64(0), f.pub("t", 0, "0123456789"))
		off, err := f.Publish("t", 0, "0123456789a")
		ftInvalid(t, err, "Publish of n+1 bytes")
		require.Equal(t, int64(-1), off)
		require.Equal(t, int64(1), f.logEnd("t", 0))
	})
	t.Run("no limit by default", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 1)
		big := strings.Repeat("x", 1<<20)
		require.Equal(t, int64(0), f.pubMsg("t", 0, engine.Message{Key: big, Headers: h(big, big), Payload: big}))
	})
}

// TestRule15PublishIsPublishMessage: twin brokers on one fake clock, one fed
// Publish(t, p, s) and the other PublishMessage(t, p, Message{Payload: s}),
// give the same offsets and the same records, times included.
func TestRule15PublishIsPublishMessage(t *testing.T) {
	clock := testclock.New()
	a := ftNew(t, 2, engine.WithClock(clock.Now))
	b := ftNew(t, 2, engine.WithClock(clock.Now))
	for _, f := range []ftBroker{a, b} {
		f.create("t", 2)
		f.join("t", "g", "m")
	}
	payloads := []string{"", "a", "bb", "ccc", "dddd"}
	for i, s := range payloads {
		clock.Advance(time.Millisecond)
		p := int32(i % 2)
		offA := a.pub("t", p, s)
		offB := b.pubMsg("t", p, engine.Message{Payload: s})
		require.Equal(t, offA, offB, "publish %d", i)
		if i < 4 {
			require.Equal(t, int64(i/2), offA)
		} else {
			require.Equal(t, int64(-1), offA, "the partition is full")
		}
	}
	for range 3 {
		ra, rb := a.poll("t", "g", "m", 4), b.poll("t", "g", "m", 4)
		require.Empty(t, cmp.Diff(ra, rb), "Publish and PublishMessage records differ")
		require.Len(t, ra, 2)
		for _, r := range ra {
			assert.Nil(t, r.Headers)
			assert.Empty(t, r.Key)
			assert.Equal(t, testclock.Epoch.Add(time.Duration(2*r.Offset+int64(r.Partition)+1)*time.Millisecond), r.Time.UTC())
			require.True(t, a.ack("t", "g", "m", r.Partition, r.Offset))
			require.True(t, b.ack("t", "g", "m", r.Partition, r.Offset))
		}
		if ra[0].Offset == 1 {
			break
		}
	}
}

// TestRule15Errors: an invalid publish returns -1 and ErrInvalidArgument,
// from Publish and PublishMessage alike, and changes nothing.
func TestRule15Errors(t *testing.T) {
	tests := []struct {
		name      string
		topic     string
		partition int32
	}{
		{"unknown topic", "nope", 0},
		{"invalid topic", "bad topic", 0},
		{"empty topic", "", 0},
		{"partition -1", "t", -1},
		{"partition == count", "t", 2},
		{"partition max int32", "t", math.MaxInt32},
		{"partition min int32", "t", math.MinInt32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ftNew(t, 4, engine.WithMaxMessageBytes(100))
			f.create("t", 2)
			before := f.describe("t")
			off, err := f.Publish(tt.topic, tt.partition, "p")
			ftInvalid(t, err, "Publish")
			assert.Equal(t, int64(-1), off)
			off, err = f.PublishMessage(tt.topic, tt.partition, engine.Message{Key: "k", Payload: "p"})
			ftInvalid(t, err, "PublishMessage")
			assert.Equal(t, int64(-1), off)
			// Validation comes first: also with an oversized message.
			off, err = f.PublishMessage(tt.topic, tt.partition, engine.Message{Payload: strings.Repeat("x", 101)})
			ftInvalid(t, err, "PublishMessage, oversized")
			assert.Equal(t, int64(-1), off)
			f.unchanged("t", before, "an invalid publish")
			assert.Equal(t, []string{"t"}, f.Topics())
		})
	}
}

// ---------------------------------------------------------------------------
// Rule 16: attempts.

func TestRule16Attempts(t *testing.T) {
	const timeout = 10 * time.Second
	tests := []struct {
		name       string
		partitions int32
		run        func(t *testing.T, f ftBroker, clock *testclock.Clock) []string
		wseen      []string // every delivery, in order, as ftSeen
	}{
		{
			name: "first delivery, retries, ack resets", partitions: 1,
			run: func(t *testing.T, f ftBroker, _ *testclock.Clock) []string {
				var seen []string
				for range 3 {
					recs := f.poll("t", "g", "a", 4)
					seen = append(seen, ftSeen(recs...)...)
					require.True(t, f.retry("t", "g", "a", 0, 0))
				}
				recs := f.poll("t", "g", "a", 4)
				seen = append(seen, ftSeen(recs...)...)
				require.True(t, f.ack("t", "g", "a", 0, 0))
				require.Zero(t, f.attempts("t", "g", 0), "after Ack")
				return append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...)
			},
			wseen: []string{"0/0 r0 #1", "0/0 r0 #2", "0/0 r0 #3", "0/0 r0 #4", "0/1 r1 #1"},
		},
		{
			name: "a rebalance that moves the partition", partitions: 2,
			run: func(t *testing.T, f ftBroker, _ *testclock.Clock) []string {
				seen := ftSeen(f.poll("t", "g", "a", 4)...)
				require.Equal(t, []int32{1}, f.join("t", "g", "b"))
				require.Equal(t, int32(1), f.attempts("t", "g", 1), "a cancelled delivery keeps its count")
				require.False(t, f.inFlight("t", "g", 1))
				seen = append(seen, ftSeen(f.poll("t", "g", "b", 4)...)...)
				seen = append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...) // partition 0 is still in flight
				require.False(t, f.ack("t", "g", "a", 1, 0), "a no longer owns partition 1")
				// b leaves: partition 1 moves back to a, cancelled again.
				require.True(t, f.leave("t", "g", "b"))
				return append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...)
			},
			wseen: []string{"0/0 r0 #1", "1/0 s0 #1", "1/0 s0 #2", "1/0 s0 #3"},
		},
		{
			name: "a rebalance that keeps the owner", partitions: 2,
			run: func(t *testing.T, f ftBroker, _ *testclock.Clock) []string {
				seen := ftSeen(f.poll("t", "g", "a", 4)...)
				f.join("t", "g", "a") // joining twice changes nothing
				require.Equal(t, []int32{1}, f.join("t", "g", "b"))
				require.True(t, f.inFlight("t", "g", 0))
				require.True(t, f.retry("t", "g", "a", 0, 0))
				return append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...)
			},
			wseen: []string{"0/0 r0 #1", "1/0 s0 #1", "0/0 r0 #2"},
		},
		{
			name: "an ack timeout", partitions: 1,
			run: func(t *testing.T, f ftBroker, clock *testclock.Clock) []string {
				seen := ftSeen(f.poll("t", "g", "a", 4)...)
				clock.Advance(timeout)
				seen = append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...)
				clock.Advance(timeout)
				seen = append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...)
				require.True(t, f.ack("t", "g", "a", 0, 0))
				return append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...)
			},
			wseen: []string{"0/0 r0 #1", "0/0 r0 #2", "0/0 r0 #3", "0/1 r1 #1"},
		},
		{
			name: "seek resets", partitions: 1,
			run: func(t *testing.T, f ftBroker, _ *testclock.Clock) []string {
				seen := ftSeen(f.poll("t", "g", "a", 4)...)
				require.True(t, f.retry("t", "g", "a", 0, 0))
				seen = append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...)
				require.True(t, f.seek("t", "g", 0, 0)) // to the committed offset itself
				require.Zero(t, f.attempts("t", "g", 0), "after Seek")
				seen = append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...)
				require.True(t, f.retry("t", "g", "a", 0, 0))
				require.True(t, f.seek("t", "g", 0, 1))
				return append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...)
			},
			wseen: []string{"0/0 r0 #1", "0/0 r0 #2", "0/0 r0 #1", "0/1 r1 #1"},
		},
		{
			name: "counted per group", partitions: 1,
			run: func(t *testing.T, f ftBroker, _ *testclock.Clock) []string {
				seen := ftSeen(f.poll("t", "g", "a", 4)...)
				require.True(t, f.retry("t", "g", "a", 0, 0))
				seen = append(seen, ftSeen(f.poll("t", "g", "a", 4)...)...)
				f.join("t", "h", "a")
				return append(seen, ftSeen(f.poll("t", "h", "a", 4)...)...)
			},
			wseen: []string{"0/0 r0 #1", "0/0 r0 #2", "0/0 r0 #1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := testclock.New()
			f := ftNew(t, 10, engine.WithClock(clock.Now), engine.WithAckTimeout(timeout))
			f.create("t", tt.partitions)
			for p := range tt.partitions {
				for i := range 3 {
					f.pub("t", p, fmt.Sprintf("%c%d", 'r'+rune(p), i))
				}
			}
			f.join("t", "g", "a")
			seen := tt.run(t, f, clock)
			require.Equal(t, tt.wseen, seen)
		})
	}
}

// TestRule16AttemptsInspection: after each delivery, Broker.Attempts and
// Describe report the Attempt the record carried; after Ack, 0.
func TestRule16AttemptsInspection(t *testing.T) {
	f := ftNew(t, 10)
	f.create("t", 2)
	f.pub("t", 0, "a")
	f.pub("t", 1, "b")
	f.pub("t", 1, "c")
	f.join("t", "g", "m")
	require.Zero(t, f.attempts("t", "g", 0), "before any delivery")
	for want := int32(1); want <= 5; want++ {
		recs := f.poll("t", "g", "m", 4)
		require.Equal(t, []string{fmt.Sprintf("0/0 a #%d", want), fmt.Sprintf("1/0 b #%d", want)}, ftSeen(recs...))
		require.Equal(t, []int32{want, want}, ftAttempts(ftGroup(t, f.describe("t"), "g")))
		require.Equal(t, want, f.attempts("t", "g", 1))
		if want < 5 {
			require.True(t, f.retry("t", "g", "m", 0, 0))
			require.True(t, f.retry("t", "g", "m", 1, 0))
			require.Equal(t, want, f.attempts("t", "g", 0), "Retry does not count until redelivered")
		}
	}
	require.True(t, f.ack("t", "g", "m", 1, 0))
	require.Equal(t, []int32{5, 0}, ftAttempts(ftGroup(t, f.describe("t"), "g")))
	require.Equal(t, []string{"1/1 c #1"}, ftSeen(f.poll("t", "g", "m", 4)...))
	require.Equal(t, []int32{5, 1}, ftAttempts(ftGroup(t, f.describe("t"), "g")))

	_, err := f.Attempts("t", "nope", 0)
	require.ErrorIs(t, err, engine.ErrUnknownGroup)
	_, err = f.Attempts("t", "g", 2)
	ftInvalid(t, err, "Attempts of partition 2")
}

// ---------------------------------------------------------------------------
// Rule 17: groups.

func TestRule17CreateGroup(t *testing.T) {
	t.Run("true, then false keeping the assignor", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 4)
		require.True(t, f.createGroup("t", "g", engine.Range))
		require.False(t, f.createGroup("t", "g", engine.Sticky))
		require.False(t, f.createGroup("t", "g", engine.RoundRobin))
		g := ftGroup(t, f.describe("t"), "g")
		require.Equal(t, "Range", g.Assignor)
		require.Equal(t, []string{}, g.Members)
		// Joins rebalance with the group's assignor.
		require.Equal(t, []int32{0, 1, 2, 3}, f.join("t", "g", "a"))
		require.Equal(t, []int32{2, 3}, f.join("t", "g", "b"))
		require.Equal(t, []int32{0, 1}, f.join("t", "g", "a"))
	})
	t.Run("starts at the log start offsets", func(t *testing.T) {
		f := ftNew(t, 5)
		f.create("t", 3)
		f.join("t", "old", "m")
		for range 3 {
			f.pub("t", 0, "x")
		}
		f.pub("t", 1, "y")
		require.True(t, f.ack("t", "old", "m", 0, f.poll("t", "old", "m", 1)[0].Offset)) // p0: 0
		require.True(t, f.ack("t", "old", "m", 0, f.poll("t", "old", "m", 1)[0].Offset)) // p0: 1
		// Now p0 retains [2,3), p1 [0,1), p2 nothing (0).
		require.True(t, f.createGroup("t", "new", engine.Sticky))
		d := f.describe("t")
		require.Equal(t, []int64{2, 0, 0}, ftCommitted(ftGroup(t, d, "new")))
		for p, w := range []int64{1, 1, 0} {
			require.Equal(t, w, ftGroup(t, d, "new").Partitions[p].Lag)
		}
		for p, w := range []int64{2, 0, 0} {
			require.Equal(t, w, f.committed("t", "new", int32(p)))
		}
		// A group with no members counts for retention: old's acks free nothing.
		f.drain("t", "old", "m")
		require.Equal(t, int64(2), f.logStart("t", 0))
		require.Equal(t, int64(0), f.logStart("t", 1))
		// And it is delivered from its start when a member joins.
		f.join("t", "new", "n")
		require.Equal(t, []string{"0/2 x #1", "1/0 y #1"}, f.drain("t", "new", "n"))
		require.Equal(t, int64(3), f.logStart("t", 0))
	})
	t.Run("invalid calls", func(t *testing.T) {
		tests := []struct {
			name, topic, group string
			a                  engine.Assignor
		}{
			{"unknown topic", "nope", "g", engine.RoundRobin},
			{"invalid topic", "bad topic", "g", engine.RoundRobin},
			{"invalid group", "t", "bad group", engine.RoundRobin},
			{"empty group", "t", "", engine.RoundRobin},
			{"group of 65 bytes", "t", strings.Repeat("g", 65), engine.RoundRobin},
			{"nil assignor", "t", "g", nil},
			{"nil assignor and invalid group", "t", "bad group", nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := ftNew(t, 4)
				f.create("t", 2)
				ok, err := f.CreateGroup(tt.topic, tt.group, tt.a)
				ftInvalid(t, err, "CreateGroup")
				require.False(t, ok)
				require.Equal(t, []engine.GroupDescription{}, f.describe("t").Groups)
			})
		}
	})
}

func TestRule17DeleteGroup(t *testing.T) {
	t.Run("absent, invalid, not empty", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 2)
		f.pub("t", 0, "a")
		require.False(t, f.deleteGroup("t", "g"), "absent group")
		f.join("t", "g", "m")
		f.join("t", "h", "m")
		require.Len(t, f.poll("t", "g", "m", 4), 1)
		before := f.describe("t")
		for _, tt := range []struct{ topic, group string }{{"nope", "g"}, {"bad topic", "g"}, {"t", "bad group"}, {"t", ""}} {
			ok, err := f.DeleteGroup(tt.topic, tt.group)
			ftInvalid(t, err, fmt.Sprintf("DeleteGroup(%q, %q)", tt.topic, tt.group))
			require.False(t, ok)
		}
		ok, err := f.DeleteGroup("t", "g")
		require.ErrorIs(t, err, engine.ErrGroupNotEmpty)
		require.False(t, errors.Is(err, engine.ErrInvalidArgument), "%v", err)
		require.False(t, ok)
		f.unchanged("t", before, "DeleteGroup of a group with members")
		require.True(t, f.ack("t", "g", "m", 0, 0), "the delivery survived")

		require.True(t, f.leave("t", "g", "m"))
		require.True(t, f.deleteGroup("t", "g"))
		d := f.describe("t")
		require.Len(t, d.Groups, 1)
		require.Equal(t, "h", d.Groups[0].Group)
		require.False(t, f.deleteGroup("t", "g"), "deleted twice")
		_, err = f.Committed("t", "g", 0)
		require.ErrorIs(t, err, engine.ErrUnknownGroup)
		require.Equal(t, []engine.Record{}, f.poll("t", "g", "m", 4), "a deleted group's former member")
	})
	t.Run("frees retention at once", func(t *testing.T) {
		// The scenario: an abandoned group joined and left without
		// acking; a live group fills the topic; publishes return -1 for
		// ever, until the abandoned group is deleted.
		f := ftNew(t, 5)
		f.create("t", 1)
		f.join("t", "abandoned", "m")
		require.True(t, f.leave("t", "abandoned", "m"))
		f.join("t", "live", "m")
		for i := range int64(5) {
			require.Equal(t, i, f.pub("t", 0, fmt.Sprint("r", i)))
		}
		require.Len(t, f.drain("t", "live", "m"), 5)
		for range 3 {
			require.Equal(t, int64(-1), f.pub("t", 0, "stuck"))
		}
		require.Equal(t, int64(0), f.logStart("t", 0))
		require.True(t, f.deleteGroup("t", "abandoned"))
		require.Equal(t, int64(5), f.logStart("t", 0), "retention applied by DeleteGroup itself")
		for i := int64(5); i < 10; i++ {
			require.Equal(t, i, f.pub("t", 0, fmt.Sprint("r", i)))
		}
		require.Equal(t, int64(-1), f.pub("t", 0, "full again: live has not acked"))
	})
	t.Run("deleting the last group keeps the records", func(t *testing.T) {
		f := ftNew(t, 3)
		f.create("t", 1)
		f.createGroup("t", "g", engine.RoundRobin)
		f.pub("t", 0, "a")
		f.pub("t", 0, "b")
		require.True(t, f.deleteGroup("t", "g"))
		d := f.describe("t")
		require.Equal(t, []engine.PartitionDescription{{Partition: 0, LogStartOffset: 0, LogEndOffset: 2}}, d.Partitions)
		require.Equal(t, int64(2), f.pub("t", 0, "c"))
		require.Equal(t, int64(-1), f.pub("t", 0, "d"), "no group: nothing is removed")
	})
	t.Run("a re-created name starts fresh", func(t *testing.T) {
		f := ftNew(t, 10)
		f.create("t", 2)
		f.createGroup("t", "keeper", engine.RoundRobin) // holds the records at 0
		for i := range 4 {
			f.pub("t", int32(i%2), fmt.Sprint("r", i))
		}
		f.createGroup("t", "g", engine.Range)
		f.join("t", "g", "m")
		f.drain("t", "g", "m")
		f.pub("t", 0, "r4")
		require.Len(t, f.poll("t", "g", "m", 4), 1)
		require.True(t, f.retry("t", "g", "m", 0, 2))
		require.Len(t, f.poll("t", "g", "m", 4), 1) // in flight, attempts 2
		f.setAssignor("t", "g", engine.Sticky)
		require.True(t, f.leave("t", "g", "m"))
		require.True(t, f.deleteGroup("t", "g"))

		require.True(t, f.createGroup("t", "g", engine.Range))
		want := engine.GroupDescription{
			Group: "g", Assignor: "Range", Members: []string{},
			Partitions: []engine.GroupPartition{
				{Partition: 0, Committed: 0, Lag: 3},
				{Partition: 1, Committed: 0, Lag: 2},
			},
		}
		require.Empty(t, cmp.Diff(want, ftGroup(t, f.describe("t"), "g")))
		f.join("t", "g", "m")
		require.Equal(t, []string{"0/0 r0 #1", "1/0 r1 #1", "0/1 r2 #1", "1/1 r3 #1", "0/2 r4 #1"}, f.drain("t", "g", "m"))

		// Join of a deleted name creates it with RoundRobin.
		require.True(t, f.leave("t", "g", "m"))
		require.True(t, f.deleteGroup("t", "g"))
		f.join("t", "g", "m")
		g := ftGroup(t, f.describe("t"), "g")
		require.Equal(t, "RoundRobin", g.Assignor)
		require.Equal(t, []int64{0, 0}, ftCommitted(g))
	})
	t.Run("other groups untouched", func(t *testing.T) {
		f := ftNew(t, 10)
		f.create("t", 2)
		for _, g := range []string{"a", "b", "c"} {
			f.join("t", g, "m")
		}
		for i := range 6 {
			f.pub("t", int32(i%2), "x")
		}
		f.drain("t", "a", "m")
		f.poll("t", "c", "m", 1)
		require.True(t, f.leave("t", "b", "m"))
		before := f.describe("t")
		require.True(t, f.deleteGroup("t", "b"))
		after := f.describe("t")
		require.Empty(t, cmp.Diff([]engine.GroupDescription{before.Groups[0], before.Groups[2]}, after.Groups))
	})
}

// TestRule17GroupSlotReuse creates and deletes 1,000 groups on a topic, the
// number of live groups swinging between 3 and 14, each new group reusing
// a deleted one's place, and after every step compares Describe with an
// oracle: the groups listed, each one's committed offsets, in-flight flags
// and attempts, and the log offsets retention leaves.
func TestRule17GroupSlotReuse(t *testing.T) {
	const (
		capacity = 8
		rounds   = 1000
	)
	type oracleGroup struct {
		committed [2]int64
		attempts  [2]int32
	}
	f := ftNew(t, capacity)
	f.create("t", 2)
	f.join("t", "live", "m")
	groups := map[string]*oracleGroup{"live": {}}
	var end [2]int64
	start := func(p int) int64 {
		low := int64(math.MaxInt64)
		for _, g := range groups {
			low = min(low, g.committed[p])
		}
		return low
	}
	assignors := []engine.Assignor{engine.RoundRobin, engine.Range, engine.Sticky}
	rng := rand.New(rand.NewPCG(17, 17))
	var order []string // the created groups still alive, oldest first
	for i := range rounds {
		// Publish to one partition: -1 exactly when retention leaves no room.
		p := int32(i % 2)
		woff := end[p]
		if end[p]-start(int(p)) == capacity {
			woff = -1
		}
		require.Equal(t, woff, f.pub("t", p, fmt.Sprint("r", i)), "round %d: publish to %d", i, p)
		if woff >= 0 {
			end[p]++
		}
		// The live group keeps up.
		for _, r := range f.drainRecords("t", "live", "m") {
			groups["live"].committed[r.Partition]++
		}

		// Create a group: it starts at the log start, fresh, whatever the
		// group that had its place before did.
		name := fmt.Sprintf("g%d", i)
		require.True(t, f.createGroup("t", name, assignors[i%3]), "round %d", i)
		g := &oracleGroup{committed: [2]int64{start(0), start(1)}}
		groups[name] = g
		order = append(order, name)
		for q := range int32(2) {
			require.Equal(t, g.committed[q], f.committed("t", name, q), "round %d: new group %s", i, name)
			require.Zero(t, f.attempts("t", name, q), "round %d: new group %s", i, name)
			require.False(t, f.inFlight("t", name, q), "round %d: new group %s", i, name)
		}
		// Move it somewhere in the log, then have a member take a delivery
		// and leave: the group keeps attempts 1 where it had a record.
		for q := range 2 {
			off := start(q) + rng.Int64N(end[q]-start(q)+1)
			require.True(t, f.seek("t", name, int32(q), off), "round %d", i)
			g.committed[q] = off
		}
		require.Equal(t, []int32{0, 1}, f.join("t", name, "m"))
		for _, r := range f.poll("t", name, "m", 4) {
			require.Equal(t, int32(1), r.Attempt)
			g.attempts[r.Partition] = r.Attempt
		}
		for q := range 2 {
			require.Equal(t, g.committed[q] < end[q], g.attempts[q] == 1, "round %d: %s polled partition %d", i, name, q)
		}
		require.True(t, f.leave("t", name, "m"))

		// Delete the oldest groups down to this round's size.
		keep := 3 + (i/40)%12
		for len(order) > keep {
			require.True(t, f.deleteGroup("t", order[0]), "round %d: delete %s", i, order[0])
			delete(groups, order[0])
			order = order[1:]
		}

		// Compare with the oracle.
		d := f.describe("t")
		names := make([]string, 0, len(d.Groups))
		for _, gd := range d.Groups {
			names = append(names, gd.Group)
		}
		wnames := slices.Sorted(func(yield func(string) bool) {
			for n := range groups {
				if !yield(n) {
					return
				}
			}
		})
		require.Equal(t, wnames, names, "round %d: groups", i)
		for _, gd := range d.Groups {
			og := groups[gd.Group]
			require.Equal(t, og.committed[:], ftCommitted(gd), "round %d: %s committed", i, gd.Group)
			if gd.Group != "live" {
				require.Equal(t, og.attempts[:], ftAttempts(gd), "round %d: %s attempts", i, gd.Group)
				require.Equal(t, []bool{false, false}, ftInFlight(gd), "round %d: %s in flight", i, gd.Group)
			}
		}
		for q := range 2 {
			require.Equal(t, engine.PartitionDescription{Partition: int32(q), LogStartOffset: start(q), LogEndOffset: end[q]},
				d.Partitions[q], "round %d", i)
		}
	}
	require.Greater(t, end[0]+end[1], int64(2*capacity), "retention never freed anything: the test is too weak")
}

// ---------------------------------------------------------------------------
// Rule 18: assignors.

func TestRule18Assignors(t *testing.T) {
	tests := []struct {
		name       string
		a          engine.Assignor
		partitions int32
		steps      []string // "+m" joins m, "-m" leaves m
		wowners    []string // Describe's owner per partition after the steps
	}{
		{"round-robin 7/2", engine.RoundRobin, 7, []string{"+b", "+a"}, []string{"a", "b", "a", "b", "a", "b", "a"}},
		{"round-robin 7/3", engine.RoundRobin, 7, []string{"+c", "+a", "+b"}, []string{"a", "b", "c", "a", "b", "c", "a"}},
		{"range 7/2 (rule 18)", engine.Range, 7, []string{"+b", "+a"}, []string{"a", "a", "a", "a", "b", "b", "b"}},
		{"range 7/3", engine.Range, 7, []string{"+a", "+b", "+c"}, []string{"a", "a", "a", "b", "b", "c", "c"}},
		{"range 8/3", engine.Range, 8, []string{"+a", "+b", "+c"}, []string{"a", "a", "a", "b", "b", "b", "c", "c"}},
		{"range more members than partitions", engine.Range, 2, []string{"+a", "+b", "+c"}, []string{"a", "b"}},
		{"range is bytewise: B before a", engine.Range, 4, []string{"+a", "+B"}, []string{"B", "B", "a", "a"}},
		{"sticky 7: a", engine.Sticky, 7, []string{"+a"}, []string{"a", "a", "a", "a", "a", "a", "a"}},
		{"sticky 7: a, b", engine.Sticky, 7, []string{"+a", "+b"}, []string{"a", "a", "a", "a", "b", "b", "b"}},
		{"sticky 7: a, b, c", engine.Sticky, 7, []string{"+a", "+b", "+c"}, []string{"a", "a", "a", "c", "b", "b", "c"}},
		{"sticky 7: a, b, c, -a", engine.Sticky, 7, []string{"+a", "+b", "+c", "-a"}, []string{"b", "b", "c", "c", "b", "b", "c"}},
		{"sticky 7: b joins first", engine.Sticky, 7, []string{"+b", "+a"}, []string{"b", "b", "b", "b", "a", "a", "a"}},
		{"sticky 4: a, b, c, d, -b", engine.Sticky, 4, []string{"+a", "+b", "+c", "+d", "-b"}, []string{"a", "d", "a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ftNew(t, 4)
			f.create("t", tt.partitions)
			require.True(t, f.createGroup("t", "g", tt.a))
			for _, s := range tt.steps {
				if s[0] == '+' {
					f.join("t", "g", s[1:])
				} else {
					require.True(t, f.leave("t", "g", s[1:]))
				}
			}
			g := ftGroup(t, f.describe("t"), "g")
			require.Equal(t, tt.wowners, ftOwners(g))
			require.Equal(t, tt.a.Name(), g.Assignor)
			// Join (again) returns each member's partitions ascending.
			for _, m := range g.Members {
				var want []int32
				for p, o := range tt.wowners {
					if o == m {
						want = append(want, int32(p))
					}
				}
				if want == nil {
					want = []int32{}
				}
				require.Equal(t, want, f.join("t", "g", m), "member %s", m)
			}
		})
	}
}

// TestRule18JoinReturnsTheNewAssignment: each Join returns the partitions
// the member got in the rebalance it caused.
func TestRule18JoinReturnsTheNewAssignment(t *testing.T) {
	f := ftNew(t, 4)
	f.create("t", 7)
	f.createGroup("t", "r", engine.Range)
	f.createGroup("t", "s", engine.Sticky)
	require.Equal(t, []int32{0, 1, 2, 3, 4, 5, 6}, f.join("t", "r", "m"))
	require.Equal(t, []int32{0, 1, 2, 3}, f.join("t", "r", "a")) // a < m
	require.Equal(t, []int32{0, 1, 2, 3, 4, 5, 6}, f.join("t", "s", "m"))
	require.Equal(t, []int32{4, 5, 6}, f.join("t", "s", "a")) // sticky: m keeps 0..3
	require.Equal(t, []int32{0, 1, 2, 3}, f.join("t", "s", "m"))
}

// TestRule18SetAssignor switches a group RoundRobin → Range → Sticky →
// RoundRobin with deliveries in flight: a partition that moves loses its
// delivery (the new owner gets it again, Attempt + 1), one that stays keeps
// it.
func TestRule18SetAssignor(t *testing.T) {
	f := ftNew(t, 4)
	f.create("t", 4)
	for p := range int32(4) {
		f.pub("t", p, fmt.Sprint("x", p))
	}
	require.Equal(t, []int32{0, 1, 2, 3}, f.join("t", "g", "a"))
	require.Equal(t, []int32{1, 3}, f.join("t", "g", "b"))
	require.Equal(t, []string{"0/0 x0 #1", "2/0 x2 #1"}, ftSeen(f.poll("t", "g", "a", 4)...))
	require.Equal(t, []string{"1/0 x1 #1", "3/0 x3 #1"}, ftSeen(f.poll("t", "g", "b", 4)...))

	// RoundRobin [a b a b] → Range [a a b b]: 1 and 2 move.
	require.True(t, f.setAssignor("t", "g", engine.Range))
	g := ftGroup(t, f.describe("t"), "g")
	require.Equal(t, "Range", g.Assignor)
	require.Equal(t, []string{"a", "a", "b", "b"}, ftOwners(g))
	require.Equal(t, []bool{true, false, false, true}, ftInFlight(g))
	require.Equal(t, []int32{1, 1, 1, 1}, ftAttempts(g))
	require.False(t, f.ack("t", "g", "a", 2, 0), "a lost partition 2")
	require.False(t, f.ack("t", "g", "b", 1, 0), "b lost partition 1")
	require.Equal(t, []string{"1/0 x1 #2"}, ftSeen(f.poll("t", "g", "a", 4)...))
	require.Equal(t, []string{"2/0 x2 #2"}, ftSeen(f.poll("t", "g", "b", 4)...))
	require.True(t, f.ack("t", "g", "a", 0, 0), "partition 0 kept its owner and delivery")
	require.True(t, f.ack("t", "g", "b", 3, 0), "partition 3 kept its owner and delivery")

	// Range [a a b b] → Sticky: balanced already, nothing moves.
	before := ftGroup(t, f.describe("t"), "g")
	require.True(t, f.setAssignor("t", "g", engine.Sticky))
	g = ftGroup(t, f.describe("t"), "g")
	require.Equal(t, "Sticky", g.Assignor)
	before.Assignor = "Sticky"
	require.Empty(t, cmp.Diff(before, g), "switching to Sticky moved something")

	// Sticky [a a b b] → RoundRobin [a b a b]: 1 and 2 move again.
	require.True(t, f.setAssignor("t", "g", engine.RoundRobin))
	g = ftGroup(t, f.describe("t"), "g")
	require.Equal(t, []string{"a", "b", "a", "b"}, ftOwners(g))
	require.Equal(t, []bool{false, false, false, false}, ftInFlight(g))
	require.Equal(t, []string{"2/0 x2 #3"}, ftSeen(f.poll("t", "g", "a", 4)...))
	require.Equal(t, []string{"1/0 x1 #3"}, ftSeen(f.poll("t", "g", "b", 4)...))

	// The same assignor again: nothing moves.
	require.True(t, f.setAssignor("t", "g", engine.RoundRobin))
	require.Equal(t, []bool{false, true, true, false}, ftInFlight(ftGroup(t, f.describe("t"), "g")))

	t.Run("memberless group: only the assignor changes", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 3)
		f.createGroup("t", "g", engine.RoundRobin)
		require.True(t, f.setAssignor("t", "g", engine.Range))
		require.Equal(t, "Range", ftGroup(t, f.describe("t"), "g").Assignor)
		f.join("t", "g", "a")
		require.Equal(t, []int32{2}, f.join("t", "g", "b"))
	})
	t.Run("absent group and invalid calls", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 2)
		require.False(t, f.setAssignor("t", "nope", engine.Range))
		f.join("t", "g", "m")
		before := f.describe("t")
		for _, tt := range []struct {
			topic, group string
			a            engine.Assignor
		}{
			{"nope", "g", engine.Range},
			{"bad topic", "g", engine.Range},
			{"t", "bad group", engine.Range},
			{"t", "g", nil},
			{"t", "absent", nil}, // validation before state
		} {
			ok, err := f.SetAssignor(tt.topic, tt.group, tt.a)
			ftInvalid(t, err, fmt.Sprintf("SetAssignor(%q, %q, %v)", tt.topic, tt.group, tt.a))
			require.False(t, ok)
		}
		f.unchanged("t", before, "invalid SetAssignor calls")
		require.Len(t, before.Groups, 1, "SetAssignor created a group")
	})
}

// ftAssignor is a user assignor that answers like RoundRobin until broken
// is set, and then answers with bad.
type ftAssignor struct {
	broken *atomic.Bool
	bad    func(members, previous []string) []string
}

func (ftAssignor) Name() string { return "user" }

func (a ftAssignor) Assign(members, previous []string) []string {
	if a.broken.Load() {
		return a.bad(members, previous)
	}
	return engine.RoundRobin.Assign(members, previous)
}

// TestRule18InvalidAssignment: a user assignor whose answer is not one
// current member per partition, or that panics, makes the call that
// rebalanced (Join, Leave, SetAssignor, AddPartitions) return
// ErrInvalidAssignment, not ErrInvalidArgument, and change nothing.
func TestRule18InvalidAssignment(t *testing.T) {
	bads := backendtest.FaultyAssignorAnswers()
	calls := []struct {
		name string
		// setup builds the state before the call with a working assignor
		// a; the call is made after a breaks.
		setup func(f ftBroker, a engine.Assignor)
		call  func(b *engine.Broker) (zero bool, err error)
	}{
		{"Join", func(f ftBroker, a engine.Assignor) {
			f.createGroup("t", "g", a)
			f.join("t", "g", "a")
		}, func(b *engine.Broker) (bool, error) {
			parts, err := b.Join("t", "g", "b")
			return parts == nil, err
		}},
		{"Join of a memberless group", func(f ftBroker, a engine.Assignor) {
			f.createGroup("t", "g", a)
		}, func(b *engine.Broker) (bool, error) {
			parts, err := b.Join("t", "g", "b")
			return parts == nil, err
		}},
		{"Leave", func(f ftBroker, a engine.Assignor) {
			f.createGroup("t", "g", a)
			f.join("t", "g", "a")
			f.join("t", "g", "b")
			f.join("t", "g", "c")
		}, func(b *engine.Broker) (bool, error) {
			ok, err := b.Leave("t", "g", "b")
			return !ok, err
		}},
		{"SetAssignor", func(f ftBroker, a engine.Assignor) {
			f.join("t", "g", "a")
			f.join("t", "g", "b")
		}, nil}, // set below: it needs the assignor
		{"AddPartitions", func(f ftBroker, a engine.Assignor) {
			f.createGroup("t", "g", a)
			f.join("t", "g", "a")
			f.join("t", "g", "b")
		}, func(b *engine.Broker) (bool, error) {
			n, err := b.AddPartitions("t", 2)
			return n == 0, err
		}},
	}
	for _, call := range calls {
		for _, bad := range bads {
			t.Run(call.name+"/"+bad.Name, func(t *testing.T) {
				broken := new(atomic.Bool)
				a := ftAssignor{broken: broken, bad: bad.Answer}
				f := ftNew(t, 4)
				f.create("t", 3)
				f.join("t", "other", "a") // a healthy group on the same topic
				for p := range int32(3) {
					f.pub("t", p, "x")
				}
				call.setup(f, a)
				// Deliveries in flight, so that a half-applied rebalance would show.
				for _, m := range []string{"a", "b", "c"} {
					f.poll("t", "g", m, 4)
				}
				f.poll("t", "other", "a", 1)
				broken.Store(true)
				before := f.describe("t")

				var (
					zero bool
					err  error
				)
				if call.call == nil {
					ok, e := f.SetAssignor("t", "g", a)
					zero, err = !ok, e
				} else {
					zero, err = call.call(f.Broker)
				}
				require.Error(t, err)
				require.True(t, errors.Is(err, engine.ErrInvalidAssignment), "%v", err)
				require.False(t, errors.Is(err, engine.ErrInvalidArgument), "%v", err)
				require.True(t, zero, "the other results are zero values")
				f.unchanged("t", before, call.name+" with a broken assignor")
				n, err := f.PartitionCount("t")
				require.NoError(t, err)
				require.Equal(t, int32(3), n)

				// Repaired, the same call succeeds and the broker works on.
				broken.Store(false)
				if call.call == nil {
					require.True(t, f.setAssignor("t", "g", a))
					require.Equal(t, "user", ftGroup(t, f.describe("t"), "g").Assignor)
				} else {
					zero, err = call.call(f.Broker)
					require.NoError(t, err)
					require.False(t, zero)
				}
				for _, m := range ftGroup(t, f.describe("t"), "g").Members {
					f.drain("t", "g", m)
				}
			})
		}
	}
	t.Run("SetAssignor keeps the old assignor", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 2)
		f.createGroup("t", "g", engine.Range)
		f.join("t", "g", "a")
		broken := new(atomic.Bool)
		broken.Store(true)
		_, err := f.SetAssignor("t", "g", ftAssignor{broken: broken, bad: bads[0].Answer})
		require.ErrorIs(t, err, engine.ErrInvalidAssignment)
		require.Equal(t, "Range", ftGroup(t, f.describe("t"), "g").Assignor)
		require.Equal(t, []int32{1}, f.join("t", "g", "b"), "Range still rebalances")
	})
	t.Run("memberless group: SetAssignor does not run it", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 2)
		f.createGroup("t", "g", engine.Range)
		broken := new(atomic.Bool)
		broken.Store(true)
		require.True(t, f.setAssignor("t", "g", ftAssignor{broken: broken, bad: bads[0].Answer}))
		_, err := f.Join("t", "g", "a")
		require.ErrorIs(t, err, engine.ErrInvalidAssignment)
		require.Equal(t, []string{}, ftGroup(t, f.describe("t"), "g").Members)
	})
}

// ---------------------------------------------------------------------------
// Rule 19: adding partitions.

func TestRule19AddPartitionsBounds(t *testing.T) {
	tests := []struct {
		name     string
		count    int32
		wtotal   int32
		winvalid bool
	}{
		{"1", 1, 4, false},
		{"to exactly 64", 61, 64, false},
		{"0", 0, 0, true},
		{"-1", -1, 0, true},
		{"min int32", math.MinInt32, 0, true},
		{"to 65", 62, 0, true},
		{"max int32", math.MaxInt32, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ftNew(t, 4)
			f.create("t", 3)
			f.join("t", "g", "m")
			before := f.describe("t")
			total, err := f.AddPartitions("t", tt.count)
			if tt.winvalid {
				ftInvalid(t, err, "AddPartitions")
				require.Zero(t, total)
				f.unchanged("t", before, "an invalid AddPartitions")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wtotal, total)
			n, err := f.PartitionCount("t")
			require.NoError(t, err)
			require.Equal(t, tt.wtotal, n)
			require.Len(t, f.describe("t").Partitions, int(tt.wtotal))
		})
	}
	t.Run("at 64 nothing more", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 64)
		total, err := f.AddPartitions("t", 1)
		ftInvalid(t, err, "AddPartitions at 64")
		require.Zero(t, total)
	})
	t.Run("unknown or invalid topic", func(t *testing.T) {
		f := ftNew(t, 4)
		for _, topic := range []string{"nope", "bad topic", ""} {
			total, err := f.AddPartitions(topic, 1)
			ftInvalid(t, err, fmt.Sprintf("AddPartitions(%q)", topic))
			require.Zero(t, total)
		}
	})
}

// TestRule19AddPartitions: the new partitions start empty at offset 0,
// every group's committed offset on them is 0, every group is rebalanced at
// once by its own assignor, the old partitions are untouched, and the new
// ones work.
func TestRule19AddPartitions(t *testing.T) {
	f := ftNew(t, 10)
	f.create("t", 2)
	f.createGroup("t", "h", engine.Range)
	f.createGroup("t", "e", engine.Sticky) // memberless
	for _, m := range []string{"a", "b"} {
		f.join("t", "g", m) // RoundRobin
	}
	for _, m := range []string{"a", "b", "c"} {
		f.join("t", "h", m)
	}
	for i := range 6 {
		f.pub("t", int32(i%2), fmt.Sprint("r", i))
	}
	require.True(t, f.ack("t", "g", "a", 0, f.poll("t", "g", "a", 1)[0].Offset))
	f.poll("t", "g", "a", 1)
	f.poll("t", "g", "b", 1)
	f.poll("t", "h", "a", 1)
	f.poll("t", "h", "b", 1)
	before := f.describe("t")
	require.Equal(t, []string{"a", "b"}, ftOwners(ftGroup(t, before, "h")))

	total, err := f.AddPartitions("t", 2)
	require.NoError(t, err)
	require.Equal(t, int32(4), total)
	d := f.describe("t")
	require.Equal(t, before.Partitions, d.Partitions[:2], "old partitions untouched")
	require.Equal(t, []engine.PartitionDescription{{Partition: 2}, {Partition: 3}}, d.Partitions[2:])

	want := map[string]struct {
		owners    []string
		committed []int64
		inFlight  []bool
	}{
		"e": {[]string{"", "", "", ""}, []int64{0, 0, 0, 0}, []bool{false, false, false, false}},
		// RoundRobin [a b] → [a b a b]: nothing moves.
		"g": {[]string{"a", "b", "a", "b"}, []int64{1, 0, 0, 0}, []bool{true, true, false, false}},
		// Range [a b] (c none) → [a a b c]: 1 moves from b to a.
		"h": {[]string{"a", "a", "b", "c"}, []int64{0, 0, 0, 0}, []bool{true, false, false, false}},
	}
	for _, g := range d.Groups {
		w := want[g.Group]
		require.Equal(t, w.owners, ftOwners(g), "group %s owners", g.Group)
		require.Equal(t, w.committed, ftCommitted(g), "group %s committed", g.Group)
		require.Equal(t, w.inFlight, ftInFlight(g), "group %s in flight", g.Group)
		// On the old partitions only owners and deliveries may change.
		for p, old := range ftGroup(t, before, g.Group).Partitions {
			now := g.Partitions[p]
			require.Equal(t, [3]int64{old.Committed, int64(old.Attempts), old.Lag}, [3]int64{now.Committed, int64(now.Attempts), now.Lag},
				"group %s partition %d: committed, attempts, lag", g.Group, p)
		}
	}
	require.Equal(t, []int32{0, 1}, f.join("t", "h", "a"))
	require.Equal(t, []int32{3}, f.join("t", "h", "c"))

	// The new partitions work.
	require.Equal(t, int64(0), f.pub("t", 3, "new"))
	require.Equal(t, int64(1), f.pub("t", 3, "newer"))
	require.Equal(t, []string{"3/0 new #1"}, ftSeen(f.poll("t", "h", "c", 4)...))
	require.True(t, f.ack("t", "h", "c", 3, 0))
	recs := f.poll("t", "h", "a", 4)
	require.Equal(t, []string{"1/0 r1 #2"}, ftSeen(recs...), "partition 0 is in flight, 1 was cancelled")
	require.Equal(t, int64(0), f.logStart("t", 3), "e and g have not consumed it")
	for _, g := range []string{"e", "g"} {
		f.seek("t", g, 3, 2)
	}
	require.Equal(t, int64(1), f.logStart("t", 3), "h holds offset 1")
	_, err = f.Publish("t", 4, "x")
	ftInvalid(t, err, "Publish to partition 4 of 4")
}

// ---------------------------------------------------------------------------
// Rule 20: seek.

// TestRule20SeekCheckOrder: invalid arguments (a negative offset included)
// → ErrInvalidArgument; then an absent group → false; then an offset
// outside [log start, log end] → ErrOffsetOutOfRange. Errors change nothing.
func TestRule20SeekCheckOrder(t *testing.T) {
	const (
		winvalid = "invalid"
		wrange   = "out of range"
		wfalse   = "false"
		wtrue    = "true"
	)
	tests := []struct {
		name      string
		topic     string
		group     string
		partition int32
		offset    int64
		want      string
	}{
		{"unknown topic", "nope", "g", 0, 3, winvalid},
		{"invalid topic", "bad topic", "g", 0, 3, winvalid},
		{"invalid group", "t", "bad group", 0, 3, winvalid},
		{"empty group", "t", "", 0, 3, winvalid},
		{"partition -1", "t", "g", -1, 3, winvalid},
		{"partition == count", "t", "g", 2, 3, winvalid},
		{"negative offset", "t", "g", 0, -1, winvalid},
		{"min int64 offset", "t", "g", 0, math.MinInt64, winvalid},
		{"negative offset, absent group", "t", "absent", 0, -1, winvalid},
		{"bad partition, absent group", "t", "absent", 5, 3, winvalid},
		{"absent group, offset out of range", "t", "absent", 0, 999, wfalse},
		{"absent group, offset in range", "t", "absent", 0, 3, wfalse},
		{"below log start", "t", "g", 0, 1, wrange},
		{"zero, below log start", "t", "g", 0, 0, wrange},
		{"beyond log end", "t", "g", 0, 5, wrange},
		{"max int64", "t", "g", 0, math.MaxInt64, wrange},
		{"empty partition: 1", "t", "g", 1, 1, wrange},
		{"log start", "t", "g", 0, 2, wtrue},
		{"inside", "t", "g", 0, 3, wtrue},
		{"log end", "t", "g", 0, 4, wtrue},
		{"empty partition: 0", "t", "g", 1, 0, wtrue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ftNew(t, 10)
			f.create("t", 2)
			f.join("t", "g", "m")
			f.createGroup("t", "h", engine.RoundRobin) // holds the records
			for range 4 {
				f.pub("t", 0, "x")
			}
			f.drainRecords("t", "g", "m")
			require.True(t, f.seek("t", "g", 0, 2)) // back to 2
			require.True(t, f.seek("t", "h", 0, 2)) // log start 2, end 4
			require.Equal(t, int64(2), f.logStart("t", 0))
			require.Len(t, f.poll("t", "g", "m", 1), 1) // in flight
			before := f.describe("t")

			ok, err := f.Seek(tt.topic, tt.group, tt.partition, tt.offset)
			switch tt.want {
			case winvalid:
				ftInvalid(t, err, "Seek")
				require.False(t, errors.Is(err, engine.ErrOffsetOutOfRange), "%v", err)
			case wrange:
				require.Error(t, err)
				require.True(t, errors.Is(err, engine.ErrOffsetOutOfRange), "%v", err)
				require.False(t, errors.Is(err, engine.ErrInvalidArgument), "%v", err)
			default:
				require.NoError(t, err)
			}
			require.Equal(t, tt.want == wtrue, ok)
			if tt.want != wtrue {
				f.unchanged("t", before, "Seek")
				return
			}
			require.Equal(t, tt.offset, f.committed("t", "g", tt.partition))
			require.False(t, f.inFlight("t", "g", tt.partition))
		})
	}
}

func TestRule20Seek(t *testing.T) {
	t.Run("cancels the delivery and resets attempts", func(t *testing.T) {
		f := ftNew(t, 10)
		f.create("t", 2)
		f.createGroup("t", "keeper", engine.RoundRobin)
		for i := range 3 {
			f.pub("t", 0, fmt.Sprint("r", i))
		}
		f.pub("t", 1, "s0")
		f.join("t", "g", "m")
		require.Equal(t, []string{"0/0 r0 #1", "1/0 s0 #1"}, ftSeen(f.poll("t", "g", "m", 4)...))
		require.True(t, f.retry("t", "g", "m", 0, 0))
		require.Equal(t, []string{"0/0 r0 #2"}, ftSeen(f.poll("t", "g", "m", 4)...))
		require.True(t, f.seek("t", "g", 0, 2))
		g := ftGroup(t, f.describe("t"), "g")
		require.Equal(t, []int64{2, 0}, ftCommitted(g))
		require.Equal(t, []bool{false, true}, ftInFlight(g), "partition 1 untouched")
		require.Equal(t, []int32{0, 1}, ftAttempts(g))
		require.False(t, f.ack("t", "g", "m", 0, 0), "the cancelled delivery")
		require.Equal(t, []string{"0/2 r2 #1"}, ftSeen(f.poll("t", "g", "m", 4)...))
		require.True(t, f.ack("t", "g", "m", 1, 0), "partition 1's delivery survived")
	})
	t.Run("a forward seek frees records", func(t *testing.T) {
		f := ftNew(t, 3)
		f.create("t", 1)
		f.createGroup("t", "g", engine.RoundRobin)
		f.createGroup("t", "h", engine.RoundRobin)
		for i := range int64(3) {
			require.Equal(t, i, f.pub("t", 0, "x"))
		}
		require.Equal(t, int64(-1), f.pub("t", 0, "full"))
		require.True(t, f.seek("t", "g", 0, 3))
		require.Equal(t, int64(0), f.logStart("t", 0), "h still needs 0..2")
		require.True(t, f.seek("t", "h", 0, 2))
		require.Equal(t, int64(2), f.logStart("t", 0))
		require.Equal(t, int64(3), f.pub("t", 0, "y"))
		require.Equal(t, int64(4), f.pub("t", 0, "z"))
		require.Equal(t, int64(-1), f.pub("t", 0, "full"))
		require.Equal(t, []engine.PartitionDescription{{Partition: 0, LogStartOffset: 2, LogEndOffset: 5}}, f.describe("t").Partitions)
	})
	t.Run("a backward seek replays in order", func(t *testing.T) {
		f := ftNew(t, 10)
		f.create("t", 1)
		f.createGroup("t", "h", engine.RoundRobin) // keeps the records
		for _, s := range []string{"a", "b", "c"} {
			f.pub("t", 0, s)
		}
		f.join("t", "g", "m")
		require.Equal(t, []string{"0/0 a #1", "0/1 b #1", "0/2 c #1"}, f.drain("t", "g", "m"))
		require.True(t, f.seek("t", "g", 0, 0))
		require.Equal(t, []string{"0/0 a #1", "0/1 b #1", "0/2 c #1"}, f.drain("t", "g", "m"))
		require.True(t, f.seek("t", "g", 0, 1))
		require.Equal(t, []string{"0/1 b #1", "0/2 c #1"}, f.drain("t", "g", "m"))
		require.True(t, f.seek("t", "g", 0, 3)) // log end: nothing to replay
		require.Empty(t, f.drain("t", "g", "m"))
	})
	t.Run("an admin call: memberless groups too", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 1)
		f.pub("t", 0, "a")
		f.pub("t", 0, "b")
		f.join("t", "g", "m")
		require.True(t, f.leave("t", "g", "m"))
		require.True(t, f.seek("t", "g", 0, 1))
		require.Equal(t, int64(1), f.logStart("t", 0))
		f.join("t", "g", "m")
		require.Equal(t, []string{"0/1 b #1"}, f.drain("t", "g", "m"))
	})
}

// ---------------------------------------------------------------------------
// Rule 21: the replay window.

// TestRule21WindowZeroIsRule13 runs one random script on a default broker
// and on one with WithReplayWindow(0): every call answers the same, and
// whenever the topic has groups its log start is the least committed
// offset of its groups (rule 13: nothing fully committed is kept).
func TestRule21WindowZeroIsRule13(t *testing.T) {
	plain := ftNew(t, 4)
	zero := ftNew(t, 4, engine.WithReplayWindow(0))
	brokers := []ftBroker{plain, zero}
	for _, f := range brokers {
		f.create("t", 2)
	}
	rng := rand.New(rand.NewPCG(21, 13))
	groups := []string{"g", "h"}
	members := []string{"a", "b"}
	ops := 3000
	if raceEnabled {
		ops = 1000
	}
	for i := range ops {
		g, m, p, op := groups[rng.IntN(2)], members[rng.IntN(2)], int32(rng.IntN(2)), rng.IntN(10)
		var outs [2]string
		for k, f := range brokers {
			var out any
			switch {
			case op < 3:
				out = f.pub("t", p, fmt.Sprint(i))
			case op < 5:
				out = ftSeen(f.poll("t", g, m, 2)...)
			case op < 7:
				for q := range int32(2) {
					if c, err := f.Committed("t", g, q); err == nil {
						out = fmt.Sprint(out, f.ack("t", g, m, q, c))
					}
				}
			case op == 7:
				out = f.join("t", g, m)
			case op == 8:
				out = f.leave("t", g, m)
			default:
				ok, err := f.Seek("t", g, p, f.logStart("t", p))
				out = fmt.Sprint(ok, err)
			}
			outs[k] = fmt.Sprint(out)
		}
		require.Equal(t, outs[0], outs[1], "op %d", i)
		for _, f := range brokers {
			d := f.describe("t")
			for q, pd := range d.Partitions {
				if len(d.Groups) == 0 {
					continue
				}
				low := int64(math.MaxInt64)
				for _, gd := range d.Groups {
					low = min(low, gd.Partitions[q].Committed)
				}
				require.Equal(t, low, pd.LogStartOffset, "op %d: partition %d", i, q)
			}
		}
		require.Empty(t, cmp.Diff(plain.describe("t"), zero.describe("t")), "op %d", i)
	}
	require.Positive(t, plain.logStart("t", 0)+plain.logStart("t", 1), "nothing was ever removed: the script is too weak")
}

func TestRule21Window(t *testing.T) {
	t.Run("option bounds", func(t *testing.T) {
		for _, tt := range []struct {
			window   int32
			winvalid bool
		}{{-1, true}, {math.MinInt32, true}, {0, false}, {1, false}, {5, false}, {6, true}, {math.MaxInt32, true}} {
			b, err := engine.New(5, engine.WithReplayWindow(tt.window))
			if tt.winvalid {
				ftInvalid(t, err, fmt.Sprintf("WithReplayWindow(%d), capacity 5", tt.window))
				require.Nil(t, b)
			} else {
				require.NoError(t, err, "WithReplayWindow(%d)", tt.window)
			}
		}
	})
	t.Run("no group: full is -1", func(t *testing.T) {
		f := ftNew(t, 2, engine.WithReplayWindow(2))
		f.create("t", 1)
		f.pub("t", 0, "a")
		f.pub("t", 0, "b")
		for range 3 {
			require.Equal(t, int64(-1), f.pub("t", 0, "c"))
		}
		// Still so after a group came and went.
		f.createGroup("t", "g", engine.RoundRobin)
		require.True(t, f.seek("t", "g", 0, 2))
		require.True(t, f.deleteGroup("t", "g"))
		require.Equal(t, int64(-1), f.pub("t", 0, "c"))
		require.Equal(t, [2]int64{0, 2}, [2]int64{f.logStart("t", 0), f.logEnd("t", 0)})
	})
	t.Run("keeps the w most recent fully committed", func(t *testing.T) {
		f := ftNew(t, 10, engine.WithReplayWindow(3))
		f.create("t", 1)
		f.join("t", "g", "m")
		f.createGroup("t", "h", engine.RoundRobin)
		for i := range 8 {
			f.pub("t", 0, fmt.Sprint("r", i))
		}
		for range 7 {
			r := f.poll("t", "g", "m", 1)[0]
			require.True(t, f.ack("t", "g", "m", 0, r.Offset))
		}
		require.Equal(t, int64(0), f.logStart("t", 0), "h has committed nothing")
		require.True(t, f.seek("t", "h", 0, 6))
		require.Equal(t, int64(3), f.logStart("t", 0), "low 6, window 3")
		require.True(t, f.seek("t", "h", 0, 8))
		require.Equal(t, int64(4), f.logStart("t", 0), "low 7 (g), window 3")
		// Fill up: 4..7 retained, 6 more publishes fit, then each publish
		// evicts one fully committed record (4, 5, 6) and then -1.
		for off := int64(8); off < 14; off++ {
			require.Equal(t, off, f.pub("t", 0, "x"))
		}
		for off, wstart := int64(14), int64(5); off < 17; off, wstart = off+1, wstart+1 {
			require.Equal(t, off, f.pub("t", 0, "x"))
			require.Equal(t, wstart, f.logStart("t", 0))
		}
		require.Equal(t, int64(-1), f.pub("t", 0, "x"), "7 is g's next record")
		require.Equal(t, [2]int64{7, 17}, [2]int64{f.logStart("t", 0), f.logEnd("t", 0)})
	})
	t.Run("a new group starts at the log start, window included", func(t *testing.T) {
		f := ftNew(t, 5, engine.WithReplayWindow(2))
		f.create("t", 1)
		f.join("t", "g", "m")
		for _, s := range []string{"a", "b", "c"} {
			f.pub("t", 0, s)
		}
		f.drain("t", "g", "m")
		require.Equal(t, int64(1), f.logStart("t", 0), "b and c kept as the window")
		require.True(t, f.createGroup("t", "late", engine.RoundRobin))
		require.Equal(t, int64(1), f.committed("t", "late", 0))
		f.join("t", "joined", "m")
		require.Equal(t, int64(1), f.committed("t", "joined", 0))
		f.join("t", "late", "m")
		require.Equal(t, []string{"0/1 b #1", "0/2 c #1"}, f.drain("t", "late", "m"))
		require.Equal(t, int64(1), f.logStart("t", 0), "joined still holds b")
	})
}

// ---------------------------------------------------------------------------
// Rule 22: ack timeout.

func TestRule22AckTimeout(t *testing.T) {
	const d = 10 * time.Second
	setup := func(t *testing.T, opts ...engine.Option) (ftBroker, *testclock.Clock) {
		clock := testclock.New()
		f := ftNew(t, 10, append([]engine.Option{engine.WithClock(clock.Now)}, opts...)...)
		f.create("t", 2)
		for i := range 2 {
			f.pub("t", 0, fmt.Sprint("r", i))
			f.pub("t", 1, fmt.Sprint("s", i))
		}
		return f, clock
	}
	t.Run("redelivered at exactly d, not before", func(t *testing.T) {
		f, clock := setup(t, engine.WithAckTimeout(d))
		f.join("t", "g", "m")
		require.Equal(t, []string{"0/0 r0 #1"}, ftSeen(f.poll("t", "g", "m", 1)...))
		clock.Advance(d - time.Nanosecond)
		require.Equal(t, []string{"1/0 s0 #1"}, ftSeen(f.poll("t", "g", "m", 4)...))
		require.Empty(t, f.poll("t", "g", "m", 4))
		require.True(t, f.inFlight("t", "g", 0))
		clock.Advance(time.Nanosecond) // partition 0's delivery is d old now
		require.Equal(t, []string{"0/0 r0 #2"}, ftSeen(f.poll("t", "g", "m", 4)...))
		// The redelivery restarts the clock of the delivery.
		clock.Advance(d - time.Nanosecond)
		require.Equal(t, []string{"1/0 s0 #2"}, ftSeen(f.poll("t", "g", "m", 4)...))
		clock.Advance(time.Nanosecond)
		require.Equal(t, []string{"0/0 r0 #3"}, ftSeen(f.poll("t", "g", "m", 4)...))
		clock.Advance(time.Hour)
		require.Equal(t, []string{"0/0 r0 #4", "1/0 s0 #3"}, ftSeen(f.poll("t", "g", "m", 4)...))
	})
	t.Run("Ack and Retry of an expired delivery work", func(t *testing.T) {
		f, clock := setup(t, engine.WithAckTimeout(d))
		f.join("t", "g", "m")
		require.Len(t, f.poll("t", "g", "m", 4), 2)
		clock.Advance(3 * d)
		require.True(t, f.inFlight("t", "g", 0), "still in flight until redelivered")
		require.True(t, f.ack("t", "g", "m", 0, 0))
		require.True(t, f.retry("t", "g", "m", 1, 0))
		require.False(t, f.ack("t", "g", "m", 1, 0), "released by the Retry")
		require.Equal(t, []string{"0/1 r1 #1", "1/0 s0 #2"}, ftSeen(f.poll("t", "g", "m", 4)...))
	})
	t.Run("only the owner's poll redelivers", func(t *testing.T) {
		f, clock := setup(t, engine.WithAckTimeout(d))
		f.join("t", "g", "a")
		f.join("t", "g", "b") // a owns 0, b owns 1
		f.join("t", "h", "a")
		require.Equal(t, []string{"0/0 r0 #1"}, ftSeen(f.poll("t", "g", "a", 4)...))
		clock.Advance(d)
		require.Equal(t, []string{"1/0 s0 #1"}, ftSeen(f.poll("t", "g", "b", 4)...))
		require.Equal(t, []string{"0/0 r0 #1", "1/0 s0 #1"}, ftSeen(f.poll("t", "h", "a", 4)...), "another group")
		require.Equal(t, []bool{true, true}, ftInFlight(ftGroup(t, f.describe("t"), "g")))
		require.Equal(t, []int32{1, 1}, ftAttempts(ftGroup(t, f.describe("t"), "g")))
		require.Equal(t, []string{"0/0 r0 #2"}, ftSeen(f.poll("t", "g", "a", 4)...))
	})
	t.Run("no timeout by default", func(t *testing.T) {
		f, clock := setup(t)
		f.join("t", "g", "m")
		require.Len(t, f.poll("t", "g", "m", 4), 2)
		clock.Advance(1000 * time.Hour)
		require.Empty(t, f.poll("t", "g", "m", 4))
	})
	t.Run("option bounds", func(t *testing.T) {
		for _, d := range []time.Duration{0, -1, math.MinInt64} {
			b, err := engine.New(5, engine.WithAckTimeout(d))
			ftInvalid(t, err, fmt.Sprintf("WithAckTimeout(%v)", d))
			require.Nil(t, b)
		}
		_, err := engine.New(5, engine.WithAckTimeout(time.Nanosecond))
		require.NoError(t, err)
	})
}

// ---------------------------------------------------------------------------
// Rule 23: Describe.

// TestRule23Describe compares Describe with a state built by hand.
func TestRule23Describe(t *testing.T) {
	f := ftNew(t, 10)
	f.create("t", 3)
	f.createGroup("t", "b-grp", engine.Range)
	for _, m := range []string{"z", "a", "m"} {
		f.join("t", "b-grp", m)
	}
	f.createGroup("t", "a-grp", engine.Sticky)
	f.join("t", "c", "x")
	for i := range 4 {
		f.pub("t", 0, fmt.Sprint("r", i))
	}
	f.pub("t", 1, "s0")
	f.pub("t", 1, "s1")

	require.Equal(t, []string{"0/0 r0 #1"}, ftSeen(f.poll("t", "b-grp", "a", 4)...))
	require.True(t, f.ack("t", "b-grp", "a", 0, 0))
	require.Equal(t, []string{"0/1 r1 #1"}, ftSeen(f.poll("t", "b-grp", "a", 4)...))
	require.True(t, f.retry("t", "b-grp", "a", 0, 1))
	require.Equal(t, []string{"0/1 r1 #2"}, ftSeen(f.poll("t", "b-grp", "a", 4)...))
	require.Equal(t, []string{"1/0 s0 #1"}, ftSeen(f.poll("t", "b-grp", "m", 4)...))
	require.True(t, f.ack("t", "b-grp", "m", 1, 0))
	require.Empty(t, f.poll("t", "b-grp", "z", 4))
	require.Equal(t, []string{"0/0 r0 #1", "1/0 s0 #1"}, ftSeen(f.poll("t", "c", "x", 4)...))
	require.True(t, f.ack("t", "c", "x", 1, 0))
	require.Equal(t, []string{"1/1 s1 #1"}, ftSeen(f.poll("t", "c", "x", 4)...))

	want := engine.TopicDescription{
		Topic: "t",
		Partitions: []engine.PartitionDescription{
			{Partition: 0, LogStartOffset: 0, LogEndOffset: 4},
			{Partition: 1, LogStartOffset: 0, LogEndOffset: 2},
			{Partition: 2, LogStartOffset: 0, LogEndOffset: 0},
		},
		Groups: []engine.GroupDescription{
			{Group: "a-grp", Assignor: "Sticky", Members: []string{}, Partitions: []engine.GroupPartition{
				{Partition: 0, Lag: 4},
				{Partition: 1, Lag: 2},
				{Partition: 2},
			}},
			{Group: "b-grp", Assignor: "Range", Members: []string{"a", "m", "z"}, Partitions: []engine.GroupPartition{
				{Partition: 0, Owner: "a", Committed: 1, InFlight: true, Attempts: 2, Lag: 3},
				{Partition: 1, Owner: "m", Committed: 1, Lag: 1},
				{Partition: 2, Owner: "z"},
			}},
			{Group: "c", Assignor: "RoundRobin", Members: []string{"x"}, Partitions: []engine.GroupPartition{
				{Partition: 0, Owner: "x", InFlight: true, Attempts: 1, Lag: 4},
				{Partition: 1, Owner: "x", Committed: 1, InFlight: true, Attempts: 1, Lag: 1},
				{Partition: 2, Owner: "x"},
			}},
		},
	}
	d := f.describe("t")
	require.Empty(t, cmp.Diff(want, d), "(-want +got)")

	// The result is the caller's.
	d.Partitions[0].LogEndOffset = 99
	d.Groups[1].Members[0] = "changed"
	d.Groups[1].Partitions[0].Owner = "changed"
	d.Groups[0].Partitions = append(d.Groups[0].Partitions[:0], engine.GroupPartition{Partition: 7})
	d.Groups = d.Groups[:1]
	require.Empty(t, cmp.Diff(want, f.describe("t")), "changing a description changed the broker")
	require.Equal(t, []int32{0}, f.join("t", "b-grp", "a"))

	t.Run("no groups: empty, not nil", func(t *testing.T) {
		f := ftNew(t, 10)
		f.create("u", 1)
		d := f.describe("u")
		require.NotNil(t, d.Groups)
		require.Empty(t, d.Groups)
		require.Equal(t, []engine.PartitionDescription{{Partition: 0}}, d.Partitions)
	})
	t.Run("invalid calls", func(t *testing.T) {
		for _, topic := range []string{"nope", "bad topic", "", strings.Repeat("t", 65)} {
			d, err := f.Describe(topic)
			ftInvalid(t, err, fmt.Sprintf("Describe(%q)", topic))
			require.Empty(t, cmp.Diff(engine.TopicDescription{}, d))
		}
	})
}

func TestRule23Topics(t *testing.T) {
	f := ftNew(t, 1)
	require.NotNil(t, f.Topics())
	require.Empty(t, f.Topics())
	for _, name := range []string{"b", "a", "_x", "C", "-", "9", "ab", "aB"} {
		f.create(name, 1)
	}
	created, err := f.Create("a", 3)
	require.NoError(t, err)
	require.False(t, created)
	want := []string{"-", "9", "C", "_x", "a", "aB", "ab", "b"}
	got := f.Topics()
	require.Equal(t, want, got)
	got[0] = "changed"
	require.Equal(t, want, f.Topics(), "changing the result changed the broker")
}

// TestRule23DescribeConcurrent takes Describe snapshots while publishers,
// consumers and a member that joins and leaves run: no snapshot shows a
// negative lag or a committed offset outside [log start, log end], and no
// committed offset or log offset goes backwards between snapshots (nothing
// seeks). Each snapshot must also be self-consistent: lag is end minus
// committed, an in-flight record exists and has an owner.
func TestRule23DescribeConcurrent(t *testing.T) {
	const partitions = 4
	f := ftNew(t, 50)
	f.create("t", partitions)
	f.createGroup("t", "sticky", engine.Sticky)
	groups := []string{"rr", "sticky"}
	members := []string{"m1", "m2"}
	for _, g := range groups {
		for _, m := range members {
			f.join("t", g, m)
		}
	}
	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		errs   = make(chan error, 16)
		report = func(err error) {
			select {
			case errs <- err:
			default:
			}
		}
	)
	for w := range 2 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if _, err := f.Publish("t", int32((i+w)%partitions), "x"); err != nil {
					report(err)
					return
				}
			}
		})
	}
	for _, g := range groups {
		consumers := members
		if g == "rr" {
			consumers = append(slices.Clone(members), "m3")
		}
		for _, m := range consumers {
			wg.Go(func() {
				for i := 0; !stop.Load(); i++ {
					if m == "m3" && g == "rr" {
						// The churner: joins and leaves, rebalancing.
						if _, err := f.Join("t", g, m); err != nil {
							report(err)
							return
						}
					}
					recs, err := f.Poll("t", g, m, 8)
					if err != nil {
						report(err)
						return
					}
					for _, r := range recs {
						settle := f.Ack
						if i%5 == 0 {
							settle = f.Retry
						}
						if _, err := settle("t", g, m, r.Partition, r.Offset); err != nil {
							report(err)
							return
						}
					}
					if m == "m3" && g == "rr" {
						if _, err := f.Leave("t", g, m); err != nil {
							report(err)
							return
						}
					}
				}
			})
		}
	}

	deadline := time.Now().Add(300 * time.Millisecond)
	prevCommitted := map[string][]int64{}
	var prevParts []engine.PartitionDescription
	snapshots, moved := 0, false
	func() {
		defer func() {
			stop.Store(true)
			wg.Wait()
		}()
		for time.Now().Before(deadline) {
			d, err := f.Describe("t")
			require.NoError(t, err)
			snapshots++
			require.Len(t, d.Partitions, partitions)
			for p, pd := range d.Partitions {
				require.LessOrEqual(t, pd.LogStartOffset, pd.LogEndOffset)
				if prevParts != nil {
					require.GreaterOrEqual(t, pd.LogStartOffset, prevParts[p].LogStartOffset, "partition %d log start went back", p)
					require.GreaterOrEqual(t, pd.LogEndOffset, prevParts[p].LogEndOffset, "partition %d log end went back", p)
				}
			}
			prevParts = d.Partitions
			require.Len(t, d.Groups, 2)
			for _, g := range d.Groups {
				require.True(t, slices.IsSorted(g.Members), "members %v", g.Members)
				prev := prevCommitted[g.Group]
				for p, gp := range g.Partitions {
					pd := d.Partitions[p]
					require.GreaterOrEqual(t, gp.Lag, int64(0), "group %s partition %d: negative lag", g.Group, p)
					require.Equal(t, pd.LogEndOffset-gp.Committed, gp.Lag, "group %s partition %d", g.Group, p)
					require.GreaterOrEqual(t, gp.Committed, pd.LogStartOffset, "group %s partition %d", g.Group, p)
					require.LessOrEqual(t, gp.Committed, pd.LogEndOffset, "group %s partition %d", g.Group, p)
					require.GreaterOrEqual(t, gp.Attempts, int32(0))
					if gp.InFlight {
						require.Less(t, gp.Committed, pd.LogEndOffset, "group %s partition %d: in flight past the end", g.Group, p)
						require.Contains(t, g.Members, gp.Owner, "group %s partition %d: in flight, owner %q", g.Group, p, gp.Owner)
						require.GreaterOrEqual(t, gp.Attempts, int32(1))
					}
					if prev != nil {
						require.GreaterOrEqual(t, gp.Committed, prev[p], "group %s partition %d: committed went back", g.Group, p)
						moved = moved || gp.Committed > prev[p]
					}
				}
				prevCommitted[g.Group] = ftCommitted(g)
			}
		}
	}()
	select {
	case err := <-errs:
		t.Fatalf("worker: %v", err)
	default:
	}
	require.Greater(t, snapshots, 1)
	require.True(t, moved, "no committed offset moved during the test")
}

// ---------------------------------------------------------------------------
// New's options and the zero Broker.

func TestNewOptions(t *testing.T) {
	clock := testclock.New()
	tests := []struct {
		name     string
		capacity int32
		opts     []engine.Option
		winvalid bool
	}{
		{"none", 5, nil, false},
		{"all valid", 5, []engine.Option{engine.WithReplayWindow(5), engine.WithClock(clock.Now), engine.WithAckTimeout(time.Second), engine.WithMaxMessageBytes(1)}, false},
		{"nil option", 5, []engine.Option{nil}, true},
		{"nil option after valid ones", 5, []engine.Option{engine.WithReplayWindow(1), nil}, true},
		{"nil clock", 5, []engine.Option{engine.WithClock(nil)}, true},
		{"window above capacity", 5, []engine.Option{engine.WithReplayWindow(6)}, true},
		{"negative window", 5, []engine.Option{engine.WithReplayWindow(-1)}, true},
		{"zero ack timeout", 5, []engine.Option{engine.WithAckTimeout(0)}, true},
		{"negative ack timeout", 5, []engine.Option{engine.WithAckTimeout(-time.Second)}, true},
		{"zero max message bytes", 5, []engine.Option{engine.WithMaxMessageBytes(0)}, true},
		{"negative max message bytes", 5, []engine.Option{engine.WithMaxMessageBytes(-1)}, true},
		{"min int max message bytes", 5, []engine.Option{engine.WithMaxMessageBytes(math.MinInt)}, true},
		{"bad capacity with valid options", 0, []engine.Option{engine.WithReplayWindow(0)}, true},
		{"one bad among good", 5, []engine.Option{engine.WithClock(clock.Now), engine.WithAckTimeout(0), engine.WithReplayWindow(1)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := engine.New(tt.capacity, tt.opts...)
			if tt.winvalid {
				ftInvalid(t, err, "New")
				require.Nil(t, b)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, b)
			require.Equal(t, tt.capacity, b.Capacity())
		})
	}
}

// TestZeroBroker: every method of a Broker not made by New returns
// ErrInvalidArgument (and its zero or -1 results) and does not panic.
func TestZeroBroker(t *testing.T) {
	var b engine.Broker
	calls := []struct {
		name string
		call func() (any, error)
		want any
	}{
		{"Create", func() (any, error) { return b.Create("t", 1) }, false},
		{"Join", func() (any, error) { return b.Join("t", "g", "m") }, []int32(nil)},
		{"Leave", func() (any, error) { return b.Leave("t", "g", "m") }, false},
		{"Publish", func() (any, error) { return b.Publish("t", 0, "p") }, int64(-1)},
		{"PublishMessage", func() (any, error) { return b.PublishMessage("t", 0, engine.Message{Payload: "p"}) }, int64(-1)},
		{"Poll", func() (any, error) { return b.Poll("t", "g", "m", 1) }, []engine.Record(nil)},
		{"AppendPoll", func() (any, error) { return b.AppendPoll(nil, "t", "g", "m", 1) }, []engine.Record(nil)},
		{"Ack", func() (any, error) { return b.Ack("t", "g", "m", 0, 0) }, false},
		{"Retry", func() (any, error) { return b.Retry("t", "g", "m", 0, 0) }, false},
		{"CreateGroup", func() (any, error) { return b.CreateGroup("t", "g", engine.RoundRobin) }, false},
		{"DeleteGroup", func() (any, error) { return b.DeleteGroup("t", "g") }, false},
		{"SetAssignor", func() (any, error) { return b.SetAssignor("t", "g", engine.Range) }, false},
		{"AddPartitions", func() (any, error) { return b.AddPartitions("t", 1) }, int32(0)},
		{"Seek", func() (any, error) { return b.Seek("t", "g", 0, 0) }, false},
		{"Describe", func() (any, error) { return b.Describe("t") }, engine.TopicDescription{}},
		{"PartitionCount", func() (any, error) { return b.PartitionCount("t") }, int32(0)},
		{"LogStartOffset", func() (any, error) { return b.LogStartOffset("t", 0) }, int64(0)},
		{"LogEndOffset", func() (any, error) { return b.LogEndOffset("t", 0) }, int64(0)},
		{"Committed", func() (any, error) { return b.Committed("t", "g", 0) }, int64(0)},
		{"Attempts", func() (any, error) { return b.Attempts("t", "g", 0) }, int32(0)},
		{"InFlight", func() (any, error) { return b.InFlight("t", "g", 0) }, false},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.call()
			ftInvalid(t, err, c.name+" on a zero Broker")
			require.Equal(t, c.want, got)
		})
	}
	require.NotNil(t, b.Topics())
	require.Empty(t, b.Topics())
	require.Zero(t, b.Capacity())
}
