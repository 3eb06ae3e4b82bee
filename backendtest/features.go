package backendtest

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// featureChecks are rules 15–23.
func featureChecks() []Check {
	return []Check{
		{"Rule15MessageRoundTrip", rule15RoundTrip},
		{"Rule15HeadersAreCopied", rule15HeadersCopied},
		{"Rule15MaxMessageBytes", rule15MaxBytes},
		{"Rule16Attempts", rule16Attempts},
		{"Rule17CreateGroup", rule17CreateGroup},
		{"Rule17DeleteGroup", rule17DeleteGroup},
		{"Rule17RecreatedGroupIsFresh", rule17Recreated},
		{"Rule18Assignors", rule18Assignors},
		{"Rule18StickyKeepsOwners", rule18Sticky},
		{"Rule18FaultyAssignorChangesNothing", rule18Faulty},
		{"Rule19AddPartitions", rule19AddPartitions},
		{"Rule19AddPartitionsBounds", rule19Bounds},
		{"Rule20SeekOutOfRange", rule20OutOfRange},
		{"Rule20SeekReplay", rule20Replay},
		{"Rule21WorkedExample", rule21WorkedExample},
		{"Rule21NoGroupIsFull", rule21NoGroup},
		{"Rule21WindowZeroIsRule13", rule21WindowZero},
		{"Rule22AckTimeout", rule22AckTimeout},
		{"Rule23Describe", rule23Describe},
		{"Rule23Snapshot", rule23Snapshot},
	}
}

// rule15RoundTrip: Poll returns the key, the headers in order and the
// time; a zero time is the broker clock at append; Publish of a payload
// is PublishMessage of a message with that payload alone.
func rule15RoundTrip(t testing.TB, nb NewBackend) {
	clock := NewFakeClock()
	h := newTopic(t, nb, Config{Capacity: 4, Clock: clock.Now}, 1)
	created := time.Date(2023, 5, 6, 7, 8, 9, 10, time.UTC)
	headers := []engine.Header{{Key: "h1", Value: "v1"}, {Key: "h1", Value: "v2"}, {Key: "h0", Value: ""}}
	require.Equal(t, int64(0), h.pubMsg("t", 0, engine.Message{Key: "k", Headers: headers, Payload: "p", Time: created}))
	appended := clock.Now()
	require.Equal(t, int64(1), h.pubMsg("t", 0, engine.Message{Key: "k2", Payload: "q"}))
	clock.Advance(time.Hour)
	require.Equal(t, int64(2), h.pub("t", 0, "plain"))
	clock.Advance(time.Hour)
	h.join("t", "g", "m")
	var recs []engine.Record
	for off := range int64(3) {
		got, err := h.m("t", "g", "m").TryPoll(nil, 1)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.True(t, h.ack("t", "g", "m", 0, off))
		recs = append(recs, got...)
	}
	require.Equal(t, "k", recs[0].Key)
	require.Equal(t, headers, recs[0].Headers)
	require.True(t, created.Equal(recs[0].Time), "Time %v, want %v", recs[0].Time, created)
	require.Equal(t, "k2", recs[1].Key)
	require.Empty(t, recs[1].Headers)
	require.True(t, appended.Equal(recs[1].Time), "zero Time: the clock at append, %v; got %v", appended, recs[1].Time)
	require.Equal(t, "", recs[2].Key)
	require.Empty(t, recs[2].Headers)
	require.Equal(t, "plain", recs[2].Payload)
	require.True(t, appended.Add(time.Hour).Equal(recs[2].Time), "Publish stamps the clock: %v", recs[2].Time)
}

// rule15HeadersCopied: the backend keeps its own copy of the headers, and
// a polled record's headers are the caller's.
func rule15HeadersCopied(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 1)
	headers := []engine.Header{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}
	h.pubMsg("t", 0, engine.Message{Headers: headers, Payload: "p"})
	headers[0].Value = "changed"
	h.join("t", "g", "m")
	recs, err := h.m("t", "g", "m").TryPoll(nil, 1)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	want := []engine.Header{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}
	require.Equal(t, want, recs[0].Headers, "a change to the published slice")
	recs[0].Headers[1].Value = "mine"
	require.True(t, h.retry("t", "g", "m", 0, 0))
	again, err := h.m("t", "g", "m").TryPoll(nil, 1)
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, want, again[0].Headers, "a change to a polled record")
	require.Equal(t, want, h.snapshot("t").Records[0][0].Headers)
}

// rule15MaxMessageBytes: key + header keys + header values + payload
// bytes above the limit is ErrInvalidArgument and changes nothing.
func rule15MaxBytes(t testing.TB, nb NewBackend) {
	h := newH(t, nb, Config{Capacity: 4, MaxMessageBytes: 10})
	tp := h.create("t", 1)
	h.join("t", "g", "m")
	require.Equal(t, int64(0), h.pubMsg("t", 0, engine.Message{Key: "ab", Headers: []engine.Header{{Key: "c", Value: "d"}}, Payload: "efghij"}), "exactly 10 bytes")
	require.Equal(t, int64(1), h.pub("t", 0, "ééééé"), "10 bytes of UTF-8")
	before := h.state()
	for _, m := range []engine.Message{
		{Key: "ab", Headers: []engine.Header{{Key: "c", Value: "d"}}, Payload: "efghijk"},
		{Key: "ab", Headers: []engine.Header{{Key: "c", Value: "dd"}}, Payload: "efghij"},
		{Key: "ab", Headers: []engine.Header{{Key: "cc", Value: "d"}}, Payload: "efghij"},
		{Key: "abc", Headers: []engine.Header{{Key: "c", Value: "d"}}, Payload: "efghij"},
		{Key: "0123456789a"},
		{Payload: "éééééa"},
	} {
		_, err := tp.TryPublish(0, m)
		requireInvalid(t, err, "TryPublish of %+v", m)
		ctx, cancel := bg()
		_, err = tp.Publish(ctx, nil, 0, m)
		cancel()
		requireInvalid(t, err, "Publish of %+v", m)
		h.unchanged(before, "a message of more than 10 bytes")
	}
	require.Equal(t, int64(2), h.pub("t", 0, "ok"), "no offset was used up")
}

func rule16Attempts(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 10}, 2)
	h.pubs("t", 0, 0, "r0", "r1", "r2")
	h.pubs("t", 1, 0, "s0", "s1", "s2")
	h.join("t", "g", "a")
	require.Equal(t, []int32{0, 0}, h.attempts("t", "g"), "before any delivery")
	require.Equal(t, []string{"0/0 r0 #1", "1/0 s0 #1"}, h.poll("t", "g", "a", 64))
	require.Equal(t, []int32{1, 1}, h.attempts("t", "g"))
	for want := int32(2); want <= 4; want++ {
		require.True(t, h.retry("t", "g", "a", 0, 0))
		require.Equal(t, []int32{want - 1, 1}, h.attempts("t", "g"), "Retry counts only when redelivered")
		require.Equal(t, []string{fmt.Sprintf("0/0 r0 #%d", want)}, h.poll("t", "g", "a", 64))
	}
	require.True(t, h.ack("t", "g", "a", 0, 0))
	require.Equal(t, []int32{0, 1}, h.attempts("t", "g"), "Ack resets")
	require.Equal(t, []string{"0/1 r1 #1"}, h.poll("t", "g", "a", 64))
	// A rebalance that moves partition 1 cancels its delivery: +1.
	require.Equal(t, []int32{1}, h.join("t", "g", "b"))
	require.Equal(t, []int32{1, 1}, h.attempts("t", "g"), "a cancelled delivery keeps its count")
	require.Equal(t, []string{"1/0 s0 #2"}, h.poll("t", "g", "b", 64))
	require.True(t, h.leave("t", "g", "b"))
	require.Equal(t, []string{"1/0 s0 #3"}, h.poll("t", "g", "a", 64), "moved back: cancelled again")
	// A rebalance that keeps the owner keeps the count.
	h.join("t", "g", "a")
	require.Equal(t, []int32{1, 3}, h.attempts("t", "g"))
	// Seek resets, to the committed offset itself too.
	require.True(t, h.seek("t", "g", 1, 0))
	require.Equal(t, []int32{1, 0}, h.attempts("t", "g"), "Seek resets")
	require.Equal(t, []string{"1/0 s0 #1"}, h.poll("t", "g", "a", 64))
	require.True(t, h.retry("t", "g", "a", 1, 0))
	require.True(t, h.seek("t", "g", 1, 1))
	require.Equal(t, []string{"1/1 s1 #1"}, h.poll("t", "g", "a", 64))
	// Counted per group.
	h.join("t", "h", "a")
	require.Equal(t, []string{"0/1 r1 #1", "1/1 s1 #1"}, h.poll("t", "h", "a", 64))
}

func rule17CreateGroup(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 4)
	require.True(t, h.createGroup("t", "g", engine.Range))
	require.False(t, h.createGroup("t", "g", engine.Sticky))
	require.False(t, h.createGroup("t", "g", engine.RoundRobin))
	g := h.group("t", "g")
	require.Equal(t, engine.Range.Name(), g.Assignor, "a duplicate keeps the assignor")
	require.Equal(t, []string{}, g.Members)
	h.join("t", "g", "a")
	require.Equal(t, []int32{2, 3}, h.join("t", "g", "b"), "the group's assignor is Range")

	// At the log start offsets; a member-less created group holds
	// retention.
	h.create("s", 1)
	h.pubs("s", 0, 0, "a", "b")
	h.join("s", "x", "m")
	h.poll("s", "x", "m", 1)
	require.True(t, h.ack("s", "x", "m", 0, 0))
	require.True(t, h.createGroup("s", "y", engine.RoundRobin))
	require.Equal(t, int64(1), h.group("s", "y").Partitions[0].Committed)
	h.poll("s", "x", "m", 1)
	require.True(t, h.ack("s", "x", "m", 0, 1))
	require.Equal(t, int64(1), h.describe("s").Partitions[0].LogStartOffset, "y holds offset 1")
	// Join of an absent group creates it with RoundRobin.
	h.join("s", "z", "m")
	require.Equal(t, engine.RoundRobin.Name(), h.group("s", "z").Assignor)
	require.Equal(t, []string{"0/1 b #1"}, h.poll("s", "z", "m", 1))
}

func rule17DeleteGroup(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 2}, 1)
	h.join("t", "g", "m")
	require.True(t, h.createGroup("t", "idle", engine.RoundRobin))
	h.pubs("t", 0, 0, "a", "b")
	for off := range int64(2) {
		h.poll("t", "g", "m", 1)
		require.True(t, h.ack("t", "g", "m", 0, off))
	}
	require.Equal(t, int64(-1), h.pub("t", 0, "c"), "idle holds a and b")
	ok, err := h.b.DeleteGroup("t", "nope")
	require.NoError(t, err)
	require.False(t, ok, "absent group")
	before := h.state()
	ok, err = h.b.DeleteGroup("t", "g")
	require.ErrorIs(t, err, tributary.ErrGroupNotEmpty)
	require.False(t, errors.Is(err, tributary.ErrInvalidArgument), "%v", err)
	require.False(t, ok)
	h.unchanged(before, "DeleteGroup of a group with members")
	ok, err = h.b.DeleteGroup("t", "idle")
	require.NoError(t, err)
	require.True(t, ok)
	d := h.describe("t")
	require.Equal(t, engine.PartitionDescription{Partition: 0, LogStartOffset: 2, LogEndOffset: 2}, d.Partitions[0], "retention freed at once")
	require.Len(t, d.Groups, 1)
	require.Equal(t, "g", d.Groups[0].Group)
	require.Equal(t, int64(2), h.pub("t", 0, "c"))
	ok, err = h.b.DeleteGroup("t", "idle")
	require.NoError(t, err)
	require.False(t, ok, "deleted twice")
	// Deleting the last group: the records stay, the partition fills up.
	require.True(t, h.leave("t", "g", "m"))
	ok, err = h.b.DeleteGroup("t", "g")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(3), h.pub("t", 0, "d"))
	require.Equal(t, int64(-1), h.pub("t", 0, "e"))
	require.Equal(t, []engine.GroupDescription{}, h.describe("t").Groups)
}

// rule17Recreated: a name deleted and used again is a fresh group.
func rule17Recreated(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 1)
	require.True(t, h.createGroup("t", "keep", engine.RoundRobin)) // holds offset 0
	h.pubs("t", 0, 0, "a", "b", "c")
	require.True(t, h.createGroup("t", "g", engine.Range))
	h.join("t", "g", "m")
	h.ackThenRetry("t", "g", "m")
	require.True(t, h.leave("t", "g", "m"))
	ok, err := h.b.DeleteGroup("t", "g")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []int32{0}, h.join("t", "g", "m2"))
	g := h.group("t", "g")
	require.Equal(t, engine.RoundRobin.Name(), g.Assignor, "Join's fresh group")
	require.Equal(t, []string{"m2"}, g.Members)
	require.Equal(t, engine.GroupPartition{Partition: 0, Owner: "m2", Committed: 0, Lag: 3}, g.Partitions[0])
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "g", "m2", 1))
	require.False(t, h.ack("t", "g", "m", 0, 1), "the old delivery is gone")
}

// partsOf returns each member's partitions from Assignment.
func (h *h) partsOf(topic, group string, members ...string) map[string][]int32 {
	h.t.Helper()
	out := map[string][]int32{}
	for _, m := range members {
		out[m] = h.assignment(topic, group, m)
	}
	return out
}

func rule18Assignors(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 7)
	for p := range int32(7) {
		h.pubs("t", p, 0, fmt.Sprint("r", p))
	}
	require.True(t, h.createGroup("t", "g", engine.Range))
	h.join("t", "g", "b")
	require.Equal(t, []int32{0, 1, 2, 3}, h.join("t", "g", "a"), "Range, P=7, n=2")
	require.Equal(t, []int32{4, 5, 6}, h.assignment("t", "g", "b"))
	require.Len(t, h.poll("t", "g", "a", 64), 4)
	require.Len(t, h.poll("t", "g", "b", 64), 3)

	require.True(t, h.setAssignor("t", "g", engine.RoundRobin))
	require.Equal(t, map[string][]int32{"a": {0, 2, 4, 6}, "b": {1, 3, 5}}, h.partsOf("t", "g", "a", "b"))
	require.Equal(t, engine.RoundRobin.Name(), h.group("t", "g").Assignor)
	// Rule 9 through SetAssignor: kept partitions keep their deliveries.
	require.False(t, h.ack("t", "g", "a", 1, 0), "1 moved from a to b")
	require.False(t, h.ack("t", "g", "b", 4, 0), "4 moved from b to a")
	require.True(t, h.ack("t", "g", "a", 2, 0), "2 kept its owner")
	require.True(t, h.ack("t", "g", "b", 5, 0), "5 kept its owner")

	h.join("t", "g", "c")
	require.Equal(t, map[string][]int32{"a": {0, 3, 6}, "b": {1, 4}, "c": {2, 5}}, h.partsOf("t", "g", "a", "b", "c"))
	require.True(t, h.setAssignor("t", "g", engine.Range))
	require.Equal(t, map[string][]int32{"a": {0, 1, 2}, "b": {3, 4}, "c": {5, 6}}, h.partsOf("t", "g", "a", "b", "c"), "Range, P=7, n=3")
	require.Equal(t, engine.Range.Name(), h.group("t", "g").Assignor)

	ok, err := h.b.SetAssignor("t", "absent", engine.Range)
	require.NoError(t, err)
	require.False(t, ok, "absent group")
	require.True(t, h.createGroup("t", "idle", engine.RoundRobin))
	require.True(t, h.setAssignor("t", "idle", engine.Sticky))
	g := h.group("t", "idle")
	require.Equal(t, engine.Sticky.Name(), g.Assignor)
	require.Equal(t, []string{}, g.Members)
	h.join("t", "idle", "x")
	require.True(t, h.leave("t", "idle", "x"))
	require.Equal(t, engine.Sticky.Name(), h.group("t", "idle").Assignor, "the assignor outlives its members")
}

// rule18Sticky: Sticky balances, then keeps as many owners as it can, the
// same answer each time.
func rule18Sticky(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 7)
	for p := range int32(7) {
		h.pubs("t", p, 0, fmt.Sprint("r", p))
	}
	var answers []map[string][]int32
	for _, group := range []string{"g1", "g2"} {
		require.True(t, h.createGroup("t", group, engine.RoundRobin))
		h.join("t", group, "a")
		h.join("t", group, "b")
		rr := h.partsOf("t", group, "a", "b")
		require.Len(t, h.poll("t", group, "a", 64), 4)
		require.True(t, h.setAssignor("t", group, engine.Sticky))
		require.Equal(t, rr, h.partsOf("t", group, "a", "b"), "balanced already: Sticky moves nothing")
		require.Equal(t, []string{}, h.poll("t", group, "a", 64), "nothing moved, nothing cancelled")
		h.join("t", group, "c")
		got := h.partsOf("t", group, "a", "b", "c")
		for m, ps := range got {
			require.Contains(t, []int{2, 3}, len(ps), "member %s of %s: balanced", m, group)
		}
		require.Len(t, got["c"], 2, "only two partitions move to c")
		for _, m := range []string{"a", "b"} {
			for _, p := range got[m] {
				require.Contains(t, rr[m], p, "%s keeps only partitions it had", m)
			}
		}
		answers = append(answers, got)
	}
	require.Equal(t, answers[0], answers[1], "deterministic")
}

// FaultyAssignorAnswer is one wrong answer of a user's assignor (SPEC rule
// 18): Answer stands for Assignor.Assign.
type FaultyAssignorAnswer struct {
	Name   string
	Answer func(members, previous []string) []string
}

// FaultyAssignorAnswers returns, in a new slice, the ways an assignor's
// answer can fail to be one current member per partition: too short, too
// long, nil, a stranger, an empty owner, a panic. Any backend must make the
// rebalancing call fail on each and change nothing; the engine's own rule
// 18 test uses the same table.
func FaultyAssignorAnswers() []FaultyAssignorAnswer {
	return []FaultyAssignorAnswer{
		{"too short", func(m, p []string) []string { return slices.Repeat([]string{m[0]}, len(p)-1) }},
		{"too long", func(m, p []string) []string { return slices.Repeat([]string{m[0]}, len(p)+1) }},
		{"nil", func(m, p []string) []string { return nil }},
		{"not a member", func(m, p []string) []string {
			out := slices.Repeat([]string{m[0]}, len(p))
			out[len(out)-1] = "stranger"
			return out
		}},
		{"no owner", func(m, p []string) []string {
			out := slices.Repeat([]string{m[0]}, len(p))
			out[0] = ""
			return out
		}},
		{"panics", func(m, p []string) []string { panic("assignor exploded") }},
	}
}

// rule18Faulty: a user's assignor whose answer is not one current member
// per partition makes Join, Leave, SetAssignor and AddPartitions fail with
// an error that is not ErrInvalidArgument, changing nothing.
func rule18Faulty(t testing.TB, nb NewBackend) {
	faults := FaultyAssignorAnswers()
	for _, f := range faults {
		broken := new(atomic.Bool)
		sw := userAssignor{fn: func(m, p []string) []string {
			if broken.Load() {
				return f.Answer(m, p)
			}
			return engine.RoundRobin.Assign(m, p)
		}}
		h := newH(t, nb, Config{Capacity: 4})
		h.create("t", 3)
		for p := range int32(3) {
			h.pubs("t", p, 0, "x")
		}
		h.join("t", "other", "a") // a healthy group on the same topic
		require.True(t, h.createGroup("t", "g", sw))
		require.Equal(t, "user", h.group("t", "g").Assignor)
		for _, m := range []string{"a", "b", "c"} {
			h.join("t", "g", m)
		}
		h.join("t", "rr", "a")
		h.join("t", "rr", "b")
		// Deliveries in flight, so that a half-applied rebalance shows.
		for _, m := range []string{"a", "b", "c"} {
			require.Len(t, h.poll("t", "g", m, 4), 1)
		}
		h.poll("t", "other", "a", 1)
		h.poll("t", "rr", "a", 4)
		broken.Store(true)
		before := h.state()
		requireFault := func(err error, call string) {
			t.Helper()
			require.Error(t, err, "%s with the assignor %s", call, f.Name)
			require.False(t, errors.Is(err, tributary.ErrInvalidArgument), "%s with the assignor %s: %v", call, f.Name, err)
			h.unchanged(before, "%s with the assignor %s", call, f.Name)
		}
		_, err := h.m("t", "g", "d").Join()
		requireFault(err, "Join")
		ok, err := h.m("t", "g", "b").Leave()
		requireFault(err, "Leave")
		require.False(t, ok)
		_, err = h.b.AddPartitions("t", 1)
		requireFault(err, "AddPartitions")
		require.Equal(t, int32(3), h.topic("t").Partitions())
		ok, err = h.b.SetAssignor("t", "rr", sw)
		requireFault(err, "SetAssignor")
		require.False(t, ok)
		require.Equal(t, engine.RoundRobin.Name(), h.group("t", "rr").Assignor, "the old assignor stays")

		broken.Store(false)
		require.Equal(t, []int32{}, h.join("t", "g", "d"), "repaired, the same call succeeds")
		require.True(t, h.setAssignor("t", "rr", sw))
	}
}

func rule19AddPartitions(t testing.TB, nb NewBackend) {
	h := newH(t, nb, Config{Capacity: 4})
	tp := h.create("t", 2)
	require.True(t, h.createGroup("t", "h", engine.Range))
	h.join("t", "g", "a")
	require.Equal(t, []int32{1}, h.join("t", "g", "b"))
	h.pubs("t", 0, 0, "x")
	require.Equal(t, []string{"0/0 x #1"}, h.poll("t", "g", "a", 64))
	n, err := h.b.AddPartitions("t", 2)
	require.NoError(t, err)
	require.Equal(t, int32(4), n)
	require.Equal(t, int32(4), tp.Partitions(), "a topic opened before sees the new count")
	require.Equal(t, int32(4), h.topic("t").Partitions())
	require.Equal(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}}, h.partsOf("t", "g", "a", "b"), "g rebalanced")
	d := h.describe("t")
	require.Equal(t, []engine.PartitionDescription{
		{Partition: 0, LogStartOffset: 0, LogEndOffset: 1},
		{Partition: 1},
		{Partition: 2},
		{Partition: 3},
	}, d.Partitions)
	for _, g := range d.Groups {
		require.Len(t, g.Partitions, 4, "group %s", g.Group)
		for _, p := range g.Partitions[2:] {
			require.Equal(t, int64(0), p.Committed, "group %s partition %d", g.Group, p.Partition)
		}
	}
	require.True(t, h.group("t", "g").Partitions[0].InFlight, "partition 0 kept its owner and delivery")
	require.Equal(t, int64(0), h.pub("t", 3, "y"), "a new partition starts at offset 0")
	require.Equal(t, []string{"3/0 y #1"}, h.poll("t", "g", "b", 64))
	require.True(t, h.ack("t", "g", "a", 0, 0))
	require.Equal(t, []int32{0, 1, 2, 3}, h.join("t", "h", "z"))
	require.Equal(t, []string{"0/0 x #1", "3/0 y #1"}, h.poll("t", "h", "z", 64))
}

func rule19Bounds(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 1}, 2)
	before := h.state()
	for _, k := range []int32{0, -1, 63} {
		_, err := h.b.AddPartitions("t", k)
		requireInvalid(t, err, "AddPartitions(t, %d) to 2", k)
		h.unchanged(before, "AddPartitions(t, %d)", k)
	}
	n, err := h.b.AddPartitions("t", 62)
	require.NoError(t, err)
	require.Equal(t, int32(64), n)
	_, err = h.b.AddPartitions("t", 1)
	requireInvalid(t, err, "AddPartitions beyond 64")
	require.Equal(t, int32(64), h.topic("t").Partitions())
	require.Equal(t, int64(0), h.pub("t", 63, "last"))
}

// rule20OutOfRange: Seek checks invalid arguments, then an absent group
// (false), then the range [log start, log end] (ErrOffsetOutOfRange),
// changing nothing unless it succeeds.
func rule20OutOfRange(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 1)
	h.pubs("t", 0, 0, "a", "b", "c")
	h.join("t", "g", "m")
	h.poll("t", "g", "m", 1)
	require.True(t, h.ack("t", "g", "m", 0, 0)) // log is [1, 3)
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "g", "m", 1))
	before := h.state()
	for _, off := range []int64{0, 4, 99} {
		ok, err := h.b.Seek("t", "g", 0, off)
		require.ErrorIs(t, err, tributary.ErrOffsetOutOfRange, "Seek to %d outside [1, 3]", off)
		require.False(t, errors.Is(err, tributary.ErrInvalidArgument), "%v", err)
		require.False(t, ok)
		h.unchanged(before, "Seek to %d", off)
	}
	require.False(t, h.seek("t", "absent", 0, 99), "an absent group is false before the range")
	_, err := h.b.Seek("t", "absent", 0, -1)
	requireInvalid(t, err, "Seek of an absent group to -1")
	h.unchanged(before, "Seek of an absent group")
	require.True(t, h.seek("t", "g", 0, 1), "the log start is in range")
	require.False(t, h.group("t", "g").Partitions[0].InFlight, "the delivery was cancelled")
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "g", "m", 1))
	require.True(t, h.seek("t", "g", 0, 3), "the log end is in range")
	require.Equal(t, int64(3), h.group("t", "g").Partitions[0].Committed)
	require.Equal(t, []string{}, h.poll("t", "g", "m", 1))
}

func rule20Replay(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 1)
	require.True(t, h.createGroup("t", "hold", engine.RoundRobin))
	h.pubs("t", 0, 0, "a", "b", "c")
	h.join("t", "g", "m")
	h.poll("t", "g", "m", 1)
	require.True(t, h.retry("t", "g", "m", 0, 0))
	require.Equal(t, []string{"0/0 a #2"}, h.poll("t", "g", "m", 1))
	// Seek cancels the delivery and resets the attempts.
	require.True(t, h.seek("t", "g", 0, 0))
	gp := h.group("t", "g").Partitions[0]
	require.False(t, gp.InFlight)
	require.Equal(t, int32(0), gp.Attempts)
	require.False(t, h.ack("t", "g", "m", 0, 0), "the cancelled delivery")
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "g", "m", 1))
	for off := range int64(2) {
		if off > 0 {
			h.poll("t", "g", "m", 1)
		}
		require.True(t, h.ack("t", "g", "m", 0, off))
	}
	// A backward seek replays in order.
	require.True(t, h.seek("t", "g", 0, 0))
	var seen []string
	for off := range int64(3) {
		seen = append(seen, h.poll("t", "g", "m", 1)...)
		require.True(t, h.ack("t", "g", "m", 0, off))
	}
	require.Equal(t, []string{"0/0 a #1", "0/1 b #1", "0/2 c #1"}, seen)
	require.Equal(t, int64(0), h.describe("t").Partitions[0].LogStartOffset, "hold holds")
	// An admin call, on a member-less group; a forward seek frees records.
	require.True(t, h.seek("t", "hold", 0, 2))
	require.Equal(t, int64(2), h.describe("t").Partitions[0].LogStartOffset)
	require.True(t, h.seek("t", "hold", 0, 3))
	require.Equal(t, engine.PartitionDescription{Partition: 0, LogStartOffset: 3, LogEndOffset: 3}, h.describe("t").Partitions[0])
	h.pubs("t", 0, 3, "d", "e", "f", "g")
	require.Equal(t, int64(-1), h.pub("t", 0, "h"))
}

// rule21WorkedExample is docs/contract.md's replay-window example (rule 21),
// verbatim (capacity 3, WithReplayWindow(2), partition 0, group g with one
// member joined first), with the log start checked at each step.
func rule21WorkedExample(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 3, ReplayWindow: 2}, 1)
	logStart := func(want int64, when string) {
		t.Helper()
		require.Equal(t, want, h.describe("t").Partitions[0].LogStartOffset, "log start %s", when)
	}
	require.Equal(t, []int32{0}, h.join("t", "g", "m"))
	h.pubs("t", 0, 0, "a", "b", "c")
	require.Equal(t, int64(-1), h.pub("t", 0, "x"), "full: nothing is committed")
	for off := range int64(2) {
		require.Equal(t, []string{fmt.Sprintf("0/%d %s #1", off, []string{"a", "b"}[off])}, h.poll("t", "g", "m", 1))
		require.True(t, h.ack("t", "g", "m", 0, off))
	}
	logStart(0, "after acking 0 and 1: both stay as the window")
	require.Equal(t, int64(3), h.pub("t", 0, "d"), "publish d removes offset 0, the oldest fully committed")
	logStart(1, "after publishing d")
	require.True(t, h.seek("t", "g", 0, 1))
	require.Equal(t, int64(-1), h.pub("t", 0, "e"), "retained 1 2 3, none fully committed")
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "g", "m", 1))
	require.True(t, h.ack("t", "g", "m", 0, 1))
	require.Equal(t, int64(4), h.pub("t", 0, "e"), "publish e removes offset 1")
	s := h.snapshot("t")
	require.Equal(t, engine.PartitionDescription{Partition: 0, LogStartOffset: 2, LogEndOffset: 5}, s.Partitions[0])
	var payloads []string
	for _, r := range s.Records[0] {
		payloads = append(payloads, r.Payload)
	}
	require.Equal(t, []string{"c", "d", "e"}, payloads)
}

// rule21NoGroup: with a window, a full partition of a topic with no group
// refuses a publish, and so does one whose groups have committed nothing
// (a member-less group counts); a deleted group's commits no longer make
// room, and a new group starts at the log start, the window included.
func rule21NoGroup(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 3, ReplayWindow: 2}, 1)
	h.pubs("t", 0, 0, "a", "b", "c")
	require.Equal(t, int64(-1), h.pub("t", 0, "x"), "no group: full")
	require.True(t, h.createGroup("t", "idle", engine.RoundRobin))
	h.join("t", "g", "m")
	for off := range int64(2) {
		h.poll("t", "g", "m", 1)
		require.True(t, h.ack("t", "g", "m", 0, off))
	}
	require.Equal(t, int64(-1), h.pub("t", 0, "x"), "the member-less group committed nothing")
	require.True(t, h.leave("t", "g", "m"))
	ok, err := h.b.DeleteGroup("t", "idle")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, engine.PartitionDescription{Partition: 0, LogStartOffset: 0, LogEndOffset: 3}, h.describe("t").Partitions[0], "g's acks stay in the window")
	require.Equal(t, int64(3), h.pub("t", 0, "d"), "offset 0 is fully committed by g")
	ok, err = h.b.DeleteGroup("t", "g")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(-1), h.pub("t", 0, "x"), "no group: full, though g had committed offset 1")
	require.Equal(t, engine.PartitionDescription{Partition: 0, LogStartOffset: 1, LogEndOffset: 4}, h.describe("t").Partitions[0])
	require.True(t, h.createGroup("t", "late", engine.RoundRobin))
	require.Equal(t, int64(1), h.group("t", "late").Partitions[0].Committed, "a new group starts at the log start")
	require.Equal(t, int64(-1), h.pub("t", 0, "x"), "late committed nothing")
	h.join("t", "late", "m")
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "late", "m", 1))
}

// rule21WindowZero: WithReplayWindow(0) is rule 13: an ack removes what
// every group committed at once, Seek cannot go back to it, and a full
// partition whose records nobody committed refuses a publish.
func rule21WindowZero(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 3, ReplayWindow: 0}, 1)
	h.join("t", "g", "m")
	h.pubs("t", 0, 0, "a", "b", "c")
	h.poll("t", "g", "m", 1)
	require.True(t, h.ack("t", "g", "m", 0, 0))
	require.Equal(t, engine.PartitionDescription{Partition: 0, LogStartOffset: 1, LogEndOffset: 3}, h.describe("t").Partitions[0], "offset 0 removed at once")
	before := h.state()
	ok, err := h.b.Seek("t", "g", 0, 0)
	require.ErrorIs(t, err, tributary.ErrOffsetOutOfRange, "Seek to a removed record")
	require.False(t, ok)
	h.unchanged(before, "Seek to 0")
	require.Equal(t, int64(3), h.pub("t", 0, "d"))
	require.Equal(t, int64(-1), h.pub("t", 0, "e"), "retained 1 2 3, none committed")
	h.poll("t", "g", "m", 1)
	require.True(t, h.ack("t", "g", "m", 0, 1))
	require.Equal(t, engine.PartitionDescription{Partition: 0, LogStartOffset: 2, LogEndOffset: 4}, h.describe("t").Partitions[0])
	require.Equal(t, int64(4), h.pub("t", 0, "e"))
}

// rule22AckTimeout: with a fake clock, a delivery d or more old is
// delivered again by its owner's next poll, not before; until then Ack and
// Retry of it work.
func rule22AckTimeout(t testing.TB, nb NewBackend) {
	const d = 10 * time.Second
	clock := NewFakeClock()
	h := newTopic(t, nb, Config{Capacity: 4, AckTimeout: d, Clock: clock.Now}, 2)
	h.pubs("t", 0, 0, "a", "b", "c")
	h.pubs("t", 1, 0, "x")
	h.join("t", "g", "m")
	require.Equal(t, []string{"0/0 a #1", "1/0 x #1"}, h.poll("t", "g", "m", 64))
	clock.Advance(d - time.Nanosecond)
	require.Equal(t, []string{}, h.poll("t", "g", "m", 64), "not before d")
	require.True(t, h.group("t", "g").Partitions[0].InFlight)
	clock.Advance(time.Nanosecond)
	require.True(t, h.retry("t", "g", "m", 1, 0), "an expired delivery can be retried")
	require.Equal(t, []string{"0/0 a #2", "1/0 x #2"}, h.poll("t", "g", "m", 64), "at exactly d")
	require.True(t, h.ack("t", "g", "m", 0, 0))
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "g", "m", 64))
	clock.Advance(2 * d)
	require.True(t, h.ack("t", "g", "m", 0, 1), "an expired delivery can be acked")
	require.Equal(t, []string{"0/2 c #1", "1/0 x #3"}, h.poll("t", "g", "m", 64), "1/0 expired too")
	// Only the owner's poll redelivers.
	require.Equal(t, []int32{1}, h.join("t", "g", "n"))
	clock.Advance(d)
	require.Equal(t, []string{"1/0 x #4"}, h.poll("t", "g", "n", 64), "n gets its own partition, not m's")
	require.Equal(t, []string{"0/2 c #2"}, h.poll("t", "g", "m", 64))
	require.False(t, h.ack("t", "g", "n", 0, 2))
	require.True(t, h.ack("t", "g", "m", 0, 2))
}

func rule23Describe(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 2)
	require.Equal(t, engine.TopicDescription{
		Topic:      "t",
		Partitions: []engine.PartitionDescription{{Partition: 0}, {Partition: 1}},
		Groups:     []engine.GroupDescription{},
	}, h.describe("t"), "no groups")
	h.pubs("t", 0, 0, "a", "b", "c")
	h.pubs("t", 1, 0, "d")
	require.True(t, h.createGroup("t", "h", engine.Range))
	h.join("t", "g", "m2")
	h.join("t", "g", "m1")
	h.ackThenRetry("t", "g", "m1")
	want := engine.TopicDescription{
		Topic: "t",
		Partitions: []engine.PartitionDescription{
			{Partition: 0, LogStartOffset: 0, LogEndOffset: 3},
			{Partition: 1, LogStartOffset: 0, LogEndOffset: 1},
		},
		Groups: []engine.GroupDescription{
			{Group: "g", Assignor: engine.RoundRobin.Name(), Members: []string{"m1", "m2"}, Partitions: []engine.GroupPartition{
				{Partition: 0, Owner: "m1", Committed: 1, InFlight: true, Attempts: 2, Lag: 2},
				{Partition: 1, Owner: "m2", Committed: 0, Lag: 1},
			}},
			{Group: "h", Assignor: engine.Range.Name(), Members: []string{}, Partitions: []engine.GroupPartition{
				{Partition: 0, Committed: 0, Lag: 3},
				{Partition: 1, Committed: 0, Lag: 1},
			}},
		},
	}
	require.Equal(t, want, h.describe("t"))
	ok, err := h.b.DeleteGroup("t", "h")
	require.NoError(t, err)
	require.True(t, ok)
	want.Groups = want.Groups[:1]
	want.Partitions[0].LogStartOffset = 1
	require.Equal(t, want, h.describe("t"), "after DeleteGroup(h)")
	// The result is the caller's.
	d := h.describe("t")
	d.Groups[0].Members[0] = "changed"
	d.Partitions[0].LogEndOffset = 99
	require.Equal(t, want, h.describe("t"))
}

func rule23Snapshot(t testing.TB, nb NewBackend) {
	clock := NewFakeClock()
	h := newTopic(t, nb, Config{Capacity: 4, Clock: clock.Now}, 2)
	h.pubs("t", 0, 0, "a", "b")
	h.pubMsg("t", 1, engine.Message{Key: "k", Headers: []engine.Header{{Key: "h", Value: "v"}}, Payload: "c"})
	h.join("t", "g", "m")
	h.poll("t", "g", "m", 64)
	require.True(t, h.ack("t", "g", "m", 0, 0))
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "g", "m", 64))
	s := h.snapshot("t")
	require.Equal(t, h.describe("t"), s.TopicDescription)
	require.Len(t, s.Records, 2)
	now := clock.Now()
	for _, recs := range s.Records {
		for i := range recs {
			require.True(t, now.Equal(recs[i].Time), "record time %v", recs[i].Time)
			recs[i].Time = time.Time{}
		}
	}
	require.Equal(t, [][]engine.Record{
		{{Topic: "t", Partition: 0, Offset: 1, Payload: "b"}},
		{{Topic: "t", Partition: 1, Offset: 0, Payload: "c", Key: "k", Headers: []engine.Header{{Key: "h", Value: "v"}}}},
	}, s.Records, "the retained records, Attempt 0")
	require.Equal(t, []string{}, h.poll("t", "g", "m", 64), "a snapshot is not a delivery")
}

// ackThenRetry moves member's group on partition 0 of topic, whose records
// from offset 0 are "a", "b": member polls and acks offset 0, polls and
// retries offset 1, and polls it again, which leaves the group's
// committed offset at 1, in flight to member on its second attempt.
func (h *h) ackThenRetry(topic, group, member string) {
	h.t.Helper()
	h.poll(topic, group, member, 1)
	require.True(h.t, h.ack(topic, group, member, 0, 0))
	require.Equal(h.t, []string{"0/1 b #1"}, h.poll(topic, group, member, 1))
	require.True(h.t, h.retry(topic, group, member, 0, 1))
	require.Equal(h.t, []string{"0/1 b #2"}, h.poll(topic, group, member, 1))
}
