package backendtest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// coreChecks are docs/contract.md's orders and rebalance examples and rules 1–13.
func coreChecks() []Check {
	return []Check{
		{"SpecWorkedExampleOrders", specWorkedExampleOrders},
		{"SpecWorkedExampleRebalance", specWorkedExampleRebalance},
		{"Rule01Capacity", rule01Capacity},
		{"Rule02CreateTopic", rule02CreateTopic},
		{"Rule02DuplicateLeavesTopicUntouched", rule02Duplicate},
		{"Rule03ValidIdentifiers", rule03Valid},
		{"Rule03CaseSensitive", rule03CaseSensitive},
		{"Rule03InvalidIdentifiers", rule03Invalid},
		{"Rule04UnknownTopic", rule04UnknownTopic},
		{"Rule04InvalidCallChangesNothing", rule04InvalidChangesNothing},
		{"Rule05PublishOffsets", rule05PublishOffsets},
		{"Rule05PublishFull", rule05PublishFull},
		{"Rule06Ownership", rule06Ownership},
		{"Rule06JoinTwiceLeaveAbsentChangeNothing", rule06NoEffect},
		{"Rule07Join", rule07Join},
		{"Rule08Leave", rule08Leave},
		{"Rule08MemberlessGroupHoldsRetention", rule08Memberless},
		{"Rule09RebalanceCancelsMovedInFlight", rule09Moved},
		{"Rule09RebalanceKeepsInFlight", rule09Kept},
		{"Rule10Poll", rule10Poll},
		{"Rule10TryPollAppends", rule10Appends},
		{"Rule10TryPollPartition", rule10PollPartition},
		{"Rule11Ack", rule11Ack},
		{"Rule11AckMismatchChangesNothing", rule11Mismatch},
		{"Rule12Retry", rule12Retry},
		{"Rule13RetentionNoGroups", rule13NoGroups},
		{"Rule13RetentionTwoGroups", rule13TwoGroups},
		{"Rule13RetentionPerPartition", rule13PerPartition},
	}
}

// specWorkedExampleOrders is docs/contract.md's orders example, verbatim.
func specWorkedExampleOrders(t testing.TB, nb NewBackend) {
	h := newH(t, nb, Config{Capacity: 2})
	h.create("orders", 1)
	require.Equal(t, int64(0), h.pub("orders", 0, "a"))
	require.Equal(t, int64(1), h.pub("orders", 0, "b"))
	require.Equal(t, []int32{0}, h.join("orders", "billing", "m1"))
	require.Equal(t, []string{"0/0 a #1"}, h.poll("orders", "billing", "m1", 2))
	require.True(t, h.retry("orders", "billing", "m1", 0, 0))
	require.Equal(t, []string{"0/0 a #2"}, h.poll("orders", "billing", "m1", 2))
	require.True(t, h.ack("orders", "billing", "m1", 0, 0))
	require.Equal(t, []string{"0/1 b #1"}, h.poll("orders", "billing", "m1", 2))
}

// specWorkedExampleRebalance is docs/contract.md's rebalance example: topic
// of 3 partitions, member a owns [0 1 2]; b joins: a owns [0 2], b owns
// [1]; a's in-flight record of partition 1 is cancelled, b can poll it, and
// a's later ack of it returns false.
func specWorkedExampleRebalance(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 10}, 3)
	for p := range int32(3) {
		h.pubs("t", p, 0, fmt.Sprint("x", p))
	}
	require.Equal(t, []int32{0, 1, 2}, h.join("t", "g", "a"))
	require.Equal(t, []string{"0/0 x0 #1", "1/0 x1 #1", "2/0 x2 #1"}, h.poll("t", "g", "a", 64))
	require.Equal(t, []int32{1}, h.join("t", "g", "b"))
	require.Equal(t, []int32{0, 2}, h.assignment("t", "g", "a"))
	require.Equal(t, []string{"1/0 x1 #2"}, h.poll("t", "g", "b", 64))
	require.False(t, h.ack("t", "g", "a", 1, 0))
	require.True(t, h.ack("t", "g", "b", 1, 0))
	// a's partitions kept their owner, so their deliveries stay in flight.
	require.Equal(t, []string{}, h.poll("t", "g", "a", 64))
	require.True(t, h.ack("t", "g", "a", 0, 0))
	require.True(t, h.ack("t", "g", "a", 2, 0))
}

// rule01Capacity: a partition retains exactly the capacity.
func rule01Capacity(t testing.TB, nb NewBackend) {
	for _, capacity := range []int32{1, 3} {
		h := newH(t, nb, Config{Capacity: capacity})
		h.create("t", 1)
		for off := range int64(capacity) {
			require.Equal(t, off, h.pub("t", 0, "p"), "capacity %d", capacity)
		}
		require.Equal(t, int64(-1), h.pub("t", 0, "p"), "capacity %d: full", capacity)
		require.Equal(t, int64(capacity), h.describe("t").Partitions[0].LogEndOffset)
	}
}

func rule02CreateTopic(t testing.TB, nb NewBackend) {
	h := newH(t, nb, Config{Capacity: 4})
	one := h.create("t", 1)
	wide := h.create("u", 64)
	require.Equal(t, int32(1), one.Partitions())
	require.Equal(t, int32(64), wide.Partitions())
	h.pubs("u", 63, 0, "last")
	_, err := wide.TryPublish(64, engine.Message{Payload: "beyond"})
	requireInvalid(t, err, "publish to partition 64 of 64")
	_, err = one.TryPublish(1, engine.Message{Payload: "beyond"})
	requireInvalid(t, err, "publish to partition 1 of 1")
	for _, n := range []int32{0, 65, -1, math.MinInt32, math.MaxInt32} {
		ok, err := h.b.CreateTopic("bad", n, "bytes")
		requireInvalid(t, err, "CreateTopic with %d partitions", n)
		require.False(t, ok)
		_, _, err = h.b.OpenTopic("bad")
		require.ErrorIs(t, err, tributary.ErrUnknownTopic, "no topic was made by CreateTopic(%d)", n)
	}
	h.create("b", 1)
	h.create("C", 1)
	h.create("a", 2)
	require.Equal(t, []string{"C", "a", "b", "t", "u"}, h.b.Topics(), "Topics is sorted bytewise")
	tp, pt, err := h.b.OpenTopic("a")
	require.NoError(t, err)
	require.Equal(t, "bytes", pt)
	require.Equal(t, int32(2), tp.Partitions())
}

// rule02Duplicate: a duplicate CreateTopic is false and leaves the topic,
// its payload type, records, offsets and groups untouched.
func rule02Duplicate(t testing.TB, nb NewBackend) {
	h := newH(t, nb, Config{Capacity: 4})
	ok, err := h.b.CreateTopic("t", 1, "first")
	require.NoError(t, err)
	require.True(t, ok)
	h.pubs("t", 0, 0, "a")
	require.Equal(t, []int32{0}, h.join("t", "g", "m"))
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "g", "m", 64))
	before := h.state()
	for _, n := range []int32{1, 5, 64} {
		ok, err := h.b.CreateTopic("t", n, "second")
		require.NoError(t, err)
		require.False(t, ok, "duplicate CreateTopic(t, %d)", n)
		h.unchanged(before, "duplicate CreateTopic(t, %d)", n)
	}
	tp, pt, err := h.b.OpenTopic("t")
	require.NoError(t, err)
	require.Equal(t, "first", pt)
	require.Equal(t, int32(1), tp.Partitions())
	require.True(t, h.ack("t", "g", "m", 0, 0), "the in-flight delivery survived")
	require.Equal(t, int64(1), h.pub("t", 0, "b"), "offsets were not reset")
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "g", "m", 64))
}

var validIDs = []string{
	"a", "Z", "0", "_", "-",
	strings.Repeat("a", 64),
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
	"Order-Events_2024",
}

func rule03Valid(t testing.TB, nb NewBackend) {
	h := newH(t, nb, Config{Capacity: 4})
	for _, id := range validIDs {
		h.create(id, 2)
		h.pubs(id, 1, 0, "p")
		require.Equal(t, []int32{0, 1}, h.join(id, id, id), "id %q", id)
		require.Equal(t, []string{"1/0 p #1"}, h.poll(id, id, id, 64), "id %q", id)
		require.True(t, h.retry(id, id, id, 1, 0), "id %q", id)
		require.Equal(t, []string{"1/0 p #2"}, h.poll(id, id, id, 64), "id %q", id)
		require.True(t, h.ack(id, id, id, 1, 0), "id %q", id)
		require.True(t, h.leave(id, id, id), "id %q", id)
	}
}

func rule03CaseSensitive(t testing.TB, nb NewBackend) {
	h := newH(t, nb, Config{Capacity: 4})
	h.create("A", 1)
	h.create("a", 1)
	h.pubs("A", 0, 0, "upper")
	h.pubs("a", 0, 0, "lower")
	h.join("A", "g", "m")
	h.join("a", "g", "m")
	require.Equal(t, []string{"0/0 upper #1"}, h.poll("A", "g", "m", 64))
	require.Equal(t, []string{"0/0 lower #1"}, h.poll("a", "g", "m", 64))

	h.create("t", 2)
	h.pubs("t", 0, 0, "p")
	h.join("t", "G", "m")
	h.join("t", "g", "m")
	require.Equal(t, []string{"0/0 p #1"}, h.poll("t", "G", "m", 64), "group G")
	require.Equal(t, []string{"0/0 p #1"}, h.poll("t", "g", "m", 64), "group g is another group")
	require.Equal(t, []int32{0}, h.join("t", "g", "M"), `"M" sorts before "m": two members`)
	require.Equal(t, []int32{1}, h.assignment("t", "g", "m"))
	require.False(t, h.leave("t", "g", "x"))
	require.True(t, h.leave("t", "g", "M"))
	require.Equal(t, []int32{0, 1}, h.assignment("t", "g", "m"))
}

// badIDs are invalid identifiers, several a valid one with a byte added.
var badIDs = []string{
	"", strings.Repeat("a", 65), "g x", " ", " g", "g ", "g\t", "g\n", "g.x", "g/x",
	"é", "gé", "g\xe9", "g\x00", "\x00",
}

func rule03Invalid(t testing.TB, nb NewBackend) {
	h := newH(t, nb, Config{Capacity: 4})
	tp := h.create("t", 2)
	h.pubs("t", 0, 0, "a")
	h.join("t", "g", "m")
	h.poll("t", "g", "m", 1)
	before := h.state()
	for _, id := range badIDs {
		_, err := h.b.CreateTopic(id, 1, "bytes")
		requireInvalid(t, err, "CreateTopic(%q)", id)
		_, _, err = h.b.OpenTopic(id)
		requireInvalid(t, err, "OpenTopic(%q)", id)
		_, err = tp.Member(id, "m")
		requireInvalid(t, err, "Member(%q, m)", id)
		_, err = tp.Member("g", id)
		requireInvalid(t, err, "Member(g, %q)", id)
		_, err = h.b.CreateGroup("t", id, engine.RoundRobin)
		requireInvalid(t, err, "CreateGroup(t, %q)", id)
		_, err = h.b.DeleteGroup("t", id)
		requireInvalid(t, err, "DeleteGroup(t, %q)", id)
		_, err = h.b.SetAssignor("t", id, engine.Range)
		requireInvalid(t, err, "SetAssignor(t, %q)", id)
		_, err = h.b.Seek("t", id, 0, 0)
		requireInvalid(t, err, "Seek(t, %q)", id)
		_, err = h.b.Describe(id)
		requireInvalid(t, err, "Describe(%q)", id)
		_, err = h.b.AddPartitions(id, 1)
		requireInvalid(t, err, "AddPartitions(%q)", id)
		h.unchanged(before, "calls with the identifier %q", id)
	}
}

// rule04UnknownTopic: OpenTopic of an unknown topic is ErrUnknownTopic;
// every other call about one is ErrInvalidArgument (rule 4).
func rule04UnknownTopic(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 1)
	for _, name := range []string{"nope", "T", strings.Repeat("t", 64)} {
		_, _, err := h.b.OpenTopic(name)
		require.ErrorIs(t, err, tributary.ErrUnknownTopic, "OpenTopic(%q)", name)
		_, err = h.b.CreateGroup(name, "g", engine.RoundRobin)
		requireInvalid(t, err, "CreateGroup(%q)", name)
		_, err = h.b.DeleteGroup(name, "g")
		requireInvalid(t, err, "DeleteGroup(%q)", name)
		_, err = h.b.SetAssignor(name, "g", engine.Range)
		requireInvalid(t, err, "SetAssignor(%q)", name)
		_, err = h.b.AddPartitions(name, 1)
		requireInvalid(t, err, "AddPartitions(%q)", name)
		_, err = h.b.Seek(name, "g", 0, 0)
		requireInvalid(t, err, "Seek(%q)", name)
		_, err = h.b.Describe(name)
		requireInvalid(t, err, "Describe(%q)", name)
		_, err = h.b.Snapshot(name)
		requireInvalid(t, err, "Snapshot(%q)", name)
	}
	require.Equal(t, []string{"t"}, h.b.Topics())
}

// baseState builds a backend with a bit of everything: two topics, records,
// a group g with two members and deliveries in flight, a second group g2,
// a member-less group idle, acked records.
func baseState(t testing.TB, nb NewBackend) *h {
	h := newTopic(t, nb, Config{Capacity: 4}, 3)
	h.create("u", 1)
	h.pubs("t", 0, 0, "a0", "a1", "a2")
	h.pubs("t", 1, 0, "b0")
	h.pubs("t", 2, 0, "c0")
	h.pubs("u", 0, 0, "u0")
	h.join("t", "g", "m1")
	require.Equal(t, []int32{1}, h.join("t", "g", "m2"))
	h.join("t", "g2", "m1")
	h.join("t", "idle", "x")
	require.True(t, h.leave("t", "idle", "x"))
	require.Equal(t, []string{"0/0 a0 #1", "2/0 c0 #1"}, h.poll("t", "g", "m1", 64))
	require.True(t, h.ack("t", "g", "m1", 0, 0))
	require.True(t, h.ack("t", "g", "m1", 2, 0))
	require.Equal(t, []string{"0/1 a1 #1"}, h.poll("t", "g", "m1", 64))
	require.Equal(t, []string{"1/0 b0 #1"}, h.poll("t", "g", "m2", 64))
	h.join("u", "g", "m1")
	require.Equal(t, []string{"0/0 u0 #1"}, h.poll("u", "g", "m1", 64))
	return h
}

// rule04InvalidChangesNothing: every invalid call returns
// ErrInvalidArgument and changes nothing, validation before any state check
// (an invalid call about an absent group is an error, not false).
func rule04InvalidChangesNothing(t testing.TB, nb NewBackend) {
	h := baseState(t, nb)
	tp := h.topic("t")
	m1 := h.m("t", "g", "m1")
	absent := h.m("t", "absent", "m1")
	stranger := h.m("t", "g", "m3")
	msg := engine.Message{Payload: "x"}
	ctx, cancel := bg()
	defer cancel()
	calls := []struct {
		name string
		call func() error
	}{}
	add := func(name string, call func() error) {
		calls = append(calls, struct {
			name string
			call func() error
		}{name, call})
	}
	for _, n := range []int32{0, 65, -1, math.MinInt32} {
		add(fmt.Sprintf("CreateTopic(fresh, %d)", n), func() error { _, err := h.b.CreateTopic("fresh", n, "bytes"); return err })
		add(fmt.Sprintf("CreateTopic(t, %d) of an existing topic", n), func() error { _, err := h.b.CreateTopic("t", n, "bytes"); return err })
	}
	for _, p := range []int32{-1, 3, 64, math.MinInt32, math.MaxInt32} {
		add(fmt.Sprintf("TryPublish(%d)", p), func() error { _, err := tp.TryPublish(p, msg); return err })
		add(fmt.Sprintf("Publish(%d)", p), func() error { _, err := tp.Publish(ctx, nil, p, msg); return err })
		add(fmt.Sprintf("TryPollPartition(%d)", p), func() error { _, err := m1.TryPollPartition(nil, p); return err })
		add(fmt.Sprintf("Ack(%d, 1)", p), func() error { _, err := m1.Ack(p, 1); return err })
		add(fmt.Sprintf("Retry(%d, 1)", p), func() error { _, err := m1.Retry(p, 1); return err })
		add(fmt.Sprintf("Ack(%d, 0) of an absent group", p), func() error { _, err := absent.Ack(p, 0); return err })
		add(fmt.Sprintf("Seek(g, %d, 0)", p), func() error { _, err := h.b.Seek("t", "g", p, 0); return err })
		add(fmt.Sprintf("Seek(absent, %d, 0)", p), func() error { _, err := h.b.Seek("t", "absent", p, 0); return err })
	}
	for _, off := range []int64{-1, math.MinInt64} {
		add(fmt.Sprintf("Ack(0, %d)", off), func() error { _, err := m1.Ack(0, off); return err })
		add(fmt.Sprintf("Retry(0, %d)", off), func() error { _, err := m1.Retry(0, off); return err })
		add(fmt.Sprintf("Ack(0, %d) of an absent group", off), func() error { _, err := absent.Ack(0, off); return err })
		add(fmt.Sprintf("Retry(0, %d) of an absent member", off), func() error { _, err := stranger.Retry(0, off); return err })
		add(fmt.Sprintf("Seek(g, 0, %d)", off), func() error { _, err := h.b.Seek("t", "g", 0, off); return err })
		add(fmt.Sprintf("Seek(absent, 0, %d)", off), func() error { _, err := h.b.Seek("t", "absent", 0, off); return err })
	}
	for _, n := range []int32{0, 65, -1, math.MinInt32, math.MaxInt32} {
		add(fmt.Sprintf("TryPoll(%d)", n), func() error { _, err := h.m("t", "g2", "m1").TryPoll(nil, n); return err })
		add(fmt.Sprintf("Poll(%d)", n), func() error { _, err := h.m("t", "g2", "m1").Poll(ctx, nil, nil, n); return err })
		add(fmt.Sprintf("TryPoll(%d) of an absent group", n), func() error { _, err := absent.TryPoll(nil, n); return err })
	}
	for _, n := range []int32{0, -1, 62, math.MaxInt32, math.MinInt32} {
		add(fmt.Sprintf("AddPartitions(t, %d)", n), func() error { _, err := h.b.AddPartitions("t", n); return err })
	}
	add("CreateGroup nil assignor", func() error { _, err := h.b.CreateGroup("t", "new", nil); return err })
	add("CreateGroup nil assignor of an existing group", func() error { _, err := h.b.CreateGroup("t", "g", nil); return err })
	add("SetAssignor nil", func() error { _, err := h.b.SetAssignor("t", "g", nil); return err })
	add("SetAssignor nil of an absent group", func() error { _, err := h.b.SetAssignor("t", "absent", nil); return err })

	before := h.state()
	for _, c := range calls {
		requireInvalid(t, c.call(), "%s", c.name)
		h.unchanged(before, "invalid call %s", c.name)
	}
}

func rule05PublishOffsets(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 10}, 2)
	require.Equal(t, int64(0), h.pub("t", 0, "a"))
	require.Equal(t, int64(1), h.pub("t", 0, "b"))
	require.Equal(t, int64(0), h.pub("t", 1, "c"))
	require.Equal(t, int64(2), h.pub("t", 0, ""), "an empty payload is valid")
	require.Equal(t, int64(1), h.pub("t", 1, "é \x00\n.{}"), "payloads are not validated")
	h.join("t", "g", "m")
	require.Equal(t, []string{"0/0 a #1", "1/0 c #1"}, h.poll("t", "g", "m", 64))
	require.True(t, h.ack("t", "g", "m", 0, 0))
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "g", "m", 64))
	require.True(t, h.ack("t", "g", "m", 0, 1))
	require.True(t, h.ack("t", "g", "m", 1, 0))
	require.Equal(t, []string{"0/2  #1", "1/1 é \x00\n.{} #1"}, h.poll("t", "g", "m", 64))
}

// rule05PublishFull: a full partition reports ErrPartitionFull and uses up
// no offset; fullness is per partition.
func rule05PublishFull(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 2}, 2)
	h.pubs("t", 0, 0, "a", "b")
	before := h.state()
	require.Equal(t, int64(-1), h.pub("t", 0, "c"))
	require.Equal(t, int64(-1), h.pub("t", 0, "d"))
	h.unchanged(before, "a publish to a full partition")
	h.pubs("t", 1, 0, "x", "y")
	require.Equal(t, int64(-1), h.pub("t", 1, "z"))
	require.Equal(t, []int32{0, 1}, h.join("t", "g", "m"))
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "g", "m", 1))
	require.True(t, h.ack("t", "g", "m", 0, 0))
	require.Equal(t, int64(2), h.pub("t", 0, "e"), "no offset was used up")
	require.Equal(t, int64(-1), h.pub("t", 0, "f"))
	require.Equal(t, int64(-1), h.pub("t", 1, "z"), "partition 1 is still full")
	require.Equal(t, []string{"0/1 b #1", "1/0 x #1"}, h.poll("t", "g", "m", 64))
	require.True(t, h.ack("t", "g", "m", 0, 1))
	require.Equal(t, []string{"0/2 e #1"}, h.poll("t", "g", "m", 64))
}

func rule06Ownership(t testing.TB, nb NewBackend) {
	tests := []struct {
		partitions int32
		joins      []string // in join order
		wowns      map[string][]int32
	}{
		{3, []string{"a"}, map[string][]int32{"a": {0, 1, 2}}},
		{3, []string{"a", "B"}, map[string][]int32{"B": {0, 2}, "a": {1}}},
		{3, []string{"a9", "a10"}, map[string][]int32{"a10": {0, 2}, "a9": {1}}},
		{2, []string{"ab", "a"}, map[string][]int32{"a": {0}, "ab": {1}}},
		{5, []string{"a", "_", "A", "0", "-"}, map[string][]int32{"-": {0}, "0": {1}, "A": {2}, "_": {3}, "a": {4}}},
		{7, []string{"z", "x", "y"}, map[string][]int32{"x": {0, 3, 6}, "y": {1, 4}, "z": {2, 5}}},
		{2, []string{"c", "b", "a"}, map[string][]int32{"a": {0}, "b": {1}, "c": {}}},
	}
	for i, tt := range tests {
		h := newH(t, nb, Config{Capacity: 4})
		h.create("t", tt.partitions)
		for p := range tt.partitions {
			h.pubs("t", p, 0, fmt.Sprint("r", p))
		}
		for _, m := range tt.joins {
			h.join("t", "g", m)
		}
		for m, want := range tt.wowns {
			require.Equal(t, want, h.join("t", "g", m), "case %d: Join(%q) twice", i, m)
			require.Equal(t, want, h.assignment("t", "g", m), "case %d: Assignment(%q)", i, m)
			var polled []int32
			recs, err := h.m("t", "g", m).TryPoll(nil, 64)
			require.NoError(t, err)
			for _, r := range recs {
				polled = append(polled, r.Partition)
			}
			require.Equal(t, want, append([]int32{}, polled...), "case %d: Poll(%q) gives its partitions", i, m)
		}
		for p, gp := range h.group("t", "g").Partitions {
			require.Equal(t, int32(p), gp.Partition)
			require.Contains(t, tt.wowns[gp.Owner], int32(p), "case %d: Describe's owner of %d", i, p)
		}
	}
}

// rule06NoEffect: joining twice and leaving when absent change nothing.
func rule06NoEffect(t testing.TB, nb NewBackend) {
	h := baseState(t, nb)
	before := h.state()
	require.Equal(t, []int32{0, 2}, h.join("t", "g", "m1"))
	require.Equal(t, []int32{1}, h.join("t", "g", "m2"))
	require.Equal(t, []int32{0, 1, 2}, h.join("t", "g2", "m1"))
	require.Equal(t, []int32{0}, h.join("u", "g", "m1"))
	h.unchanged(before, "joining twice")
	require.False(t, h.leave("t", "g", "m3"))
	require.False(t, h.leave("t", "idle", "y"))
	require.False(t, h.leave("t", "idle", "x"))
	require.False(t, h.leave("t", "absent", "m1"))
	require.False(t, h.leave("u", "g2", "m1"))
	require.False(t, h.leave("t", "g", "M1"))
	h.unchanged(before, "leaving when absent")
}

func rule07Join(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 5)
	require.Equal(t, []int32{0, 1, 2, 3, 4}, h.join("t", "g", "b"))
	require.Equal(t, []int32{0, 2, 4}, h.join("t", "g", "a"), "ascending")
	require.Equal(t, []int32{1, 3}, h.join("t", "g", "b"))
	h.create("one", 1)
	require.Equal(t, []int32{0}, h.join("one", "g", "a"))
	require.Equal(t, []int32{}, h.join("one", "g", "b"), "more members than partitions")

	// A new group on an empty partition starts at its next offset.
	h.create("e", 1)
	h.join("e", "g", "m")
	require.Equal(t, []string{}, h.poll("e", "g", "m", 1))
	h.pubs("e", 0, 0, "a")
	require.Equal(t, []string{"0/0 a #1"}, h.poll("e", "g", "m", 1))

	// A new group starts at the log start: after trims, not at another
	// group's position, per partition.
	h.create("s", 2)
	h.pubs("s", 0, 0, "a", "b", "c")
	h.pubs("s", 1, 0, "d")
	h.join("s", "g1", "m")
	h.join("s", "slow", "m")
	require.Equal(t, []string{"0/0 a #1", "1/0 d #1"}, h.poll("s", "g1", "m", 64))
	require.True(t, h.ack("s", "g1", "m", 0, 0))
	h.join("s", "g2", "m")
	require.Equal(t, []string{"0/0 a #1", "1/0 d #1"}, h.poll("s", "g2", "m", 64), "slow holds the log at 0")
	require.True(t, h.ack("s", "g2", "m", 0, 0))
	require.False(t, h.ack("s", "slow", "m", 0, 0), "slow has not polled")
	require.Equal(t, []string{"0/0 a #1", "1/0 d #1"}, h.poll("s", "slow", "m", 64))
	require.True(t, h.ack("s", "slow", "m", 0, 0)) // log start of 0 is now 1
	require.Equal(t, int64(1), h.describe("s").Partitions[0].LogStartOffset)
	h.join("s", "g3", "m")
	require.Equal(t, []string{"0/1 b #1", "1/0 d #1"}, h.poll("s", "g3", "m", 64))

	// A partition emptied by trims: a new group starts at its next offset.
	h.create("x", 1)
	h.pubs("x", 0, 0, "a", "b")
	h.join("x", "g1", "m")
	for off := range int64(2) {
		h.poll("x", "g1", "m", 1)
		require.True(t, h.ack("x", "g1", "m", 0, off))
	}
	h.join("x", "g2", "m")
	require.Equal(t, []string{}, h.poll("x", "g2", "m", 1))
	h.pubs("x", 0, 2, "c")
	require.Equal(t, []string{"0/2 c #1"}, h.poll("x", "g2", "m", 1))
	require.Equal(t, int64(2), h.group("x", "g2").Partitions[0].Committed)
}

func rule08Leave(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 3)
	require.False(t, h.leave("t", "g", "a"), "absent group")
	require.Equal(t, []int32{0, 1, 2}, h.join("t", "g", "a"))
	require.False(t, h.leave("t", "g", "b"), "absent member")
	h.join("t", "g", "b")
	h.join("t", "g", "c")
	require.True(t, h.leave("t", "g", "a"))
	require.False(t, h.leave("t", "g", "a"), "true once")
	require.Equal(t, []int32{0, 2}, h.assignment("t", "g", "b"), "the rest take over")
	require.Equal(t, []int32{1}, h.assignment("t", "g", "c"))
	require.Equal(t, []int32{}, h.assignment("t", "g", "a"))

	// A member-less group keeps its committed offsets and is not deleted.
	h.create("k", 1)
	h.pubs("k", 0, 0, "a", "b")
	h.join("k", "g", "m")
	h.poll("k", "g", "m", 1)
	require.True(t, h.ack("k", "g", "m", 0, 0))
	require.True(t, h.leave("k", "g", "m"))
	require.Equal(t, []string{}, h.poll("k", "g", "m", 1), "a former member gets nothing")
	g := h.group("k", "g")
	require.Equal(t, []string{}, g.Members)
	require.Equal(t, int64(1), g.Partitions[0].Committed)
	h.join("k", "g", "other")
	require.Equal(t, []string{"0/1 b #1"}, h.poll("k", "g", "other", 1))
}

// rule08Memberless: a group with no members counts for retention.
func rule08Memberless(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 2}, 1)
	h.join("t", "idle", "x")
	require.True(t, h.leave("t", "idle", "x"))
	h.pubs("t", 0, 0, "a", "b")
	h.join("t", "g", "m")
	for off := range int64(2) {
		h.poll("t", "g", "m", 1)
		require.True(t, h.ack("t", "g", "m", 0, off))
	}
	require.Equal(t, int64(-1), h.pub("t", 0, "c"), "idle holds a and b")
	h.join("t", "idle", "x")
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "idle", "x", 1))
	require.True(t, h.ack("t", "idle", "x", 0, 0))
	require.Equal(t, int64(2), h.pub("t", 0, "c"))
	require.Equal(t, int64(-1), h.pub("t", 0, "d"))
}

// rule09Setup: three partitions of two records; a owns all three and has
// each partition's first record in flight.
func rule09Setup(t testing.TB, nb NewBackend) *h {
	h := newTopic(t, nb, Config{Capacity: 4}, 3)
	h.pubs("t", 0, 0, "a0", "a1")
	h.pubs("t", 1, 0, "b0", "b1")
	h.pubs("t", 2, 0, "c0", "c1")
	require.Equal(t, []int32{0, 1, 2}, h.join("t", "g", "a"))
	require.Equal(t, []string{"0/0 a0 #1", "1/0 b0 #1", "2/0 c0 #1"}, h.poll("t", "g", "a", 64))
	return h
}

func rule09Moved(t testing.TB, nb NewBackend) {
	h := rule09Setup(t, nb)
	require.Equal(t, []int32{1}, h.join("t", "g", "b"))
	p1 := h.group("t", "g").Partitions[1]
	require.False(t, p1.InFlight, "the moved delivery is cancelled")
	require.Equal(t, int64(0), p1.Committed, "its committed offset is kept")
	require.False(t, h.ack("t", "g", "a", 1, 0))
	require.False(t, h.retry("t", "g", "a", 1, 0))
	require.Equal(t, []string{"1/0 b0 #2"}, h.poll("t", "g", "b", 64))
	require.True(t, h.ack("t", "g", "b", 1, 0))
	require.Equal(t, []string{"1/1 b1 #1"}, h.poll("t", "g", "b", 64))
	// Moved back on leave: lost again.
	require.True(t, h.leave("t", "g", "b"))
	require.False(t, h.ack("t", "g", "b", 1, 1))
	require.Equal(t, []string{"1/1 b1 #2"}, h.poll("t", "g", "a", 64))
	require.True(t, h.ack("t", "g", "a", 1, 1))
}

func rule09Kept(t testing.TB, nb NewBackend) {
	h := rule09Setup(t, nb)
	require.Equal(t, []int32{1}, h.join("t", "g", "b"))
	require.Equal(t, []string{}, h.poll("t", "g", "a", 64), "0 and 2 are still in flight")
	gp := h.group("t", "g").Partitions
	require.True(t, gp[0].InFlight)
	require.True(t, gp[2].InFlight)
	require.True(t, h.ack("t", "g", "a", 0, 0))
	require.True(t, h.retry("t", "g", "a", 2, 0))
	require.Equal(t, []string{"0/1 a1 #1", "2/0 c0 #2"}, h.poll("t", "g", "a", 64))
}

func rule10Poll(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 4)
	for p := int32(3); p >= 0; p-- {
		h.pubs("t", p, 0, fmt.Sprint("r", p, "a"), fmt.Sprint("r", p, "b"))
	}
	require.Equal(t, []string{}, h.poll("t", "absent", "m", 64), "absent group")
	h.join("t", "g", "m")
	require.Equal(t, []string{}, h.poll("t", "g", "n", 64), "absent member")
	require.Equal(t, []string{"0/0 r0a #1", "1/0 r1a #1"}, h.poll("t", "g", "m", 2), "ascending, maxRecords")
	require.Equal(t, []string{"2/0 r2a #1"}, h.poll("t", "g", "m", 1))
	require.Equal(t, []string{"3/0 r3a #1"}, h.poll("t", "g", "m", 64), "one in flight per partition")
	require.Equal(t, []string{}, h.poll("t", "g", "m", 64), "everything in flight")
	require.True(t, h.ack("t", "g", "m", 2, 0))
	require.True(t, h.retry("t", "g", "m", 1, 0))
	require.Equal(t, []string{"1/0 r1a #2", "2/1 r2b #1"}, h.poll("t", "g", "m", 64))
	// Only the member's own partitions; groups are independent.
	require.Equal(t, []int32{1, 3}, h.join("t", "g", "n"))
	require.Equal(t, []string{"1/0 r1a #3", "3/0 r3a #2"}, h.poll("t", "g", "n", 64))
	require.Equal(t, []string{}, h.poll("t", "g", "m", 64))
	h.join("t", "h", "m")
	require.Equal(t, []string{"0/0 r0a #1", "1/0 r1a #1", "2/1 r2b #1", "3/0 r3a #1"}, h.poll("t", "h", "m", 64), "h starts at the log start")
}

// rule10Appends: TryPoll appends to dst and leaves what dst held.
func rule10Appends(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 2)
	h.pubs("t", 0, 0, "a")
	h.pubs("t", 1, 0, "b")
	h.join("t", "g", "m")
	mark := engine.Record{Topic: "mark", Offset: 42, Payload: "mine"}
	dst := make([]engine.Record, 1, 8)
	dst[0] = mark
	out, err := h.m("t", "g", "m").TryPoll(dst, 64)
	require.NoError(t, err)
	require.Len(t, out, 3)
	require.Equal(t, mark, out[0])
	require.Equal(t, []string{"0/0 a #1", "1/0 b #1"}, h.seen("t", out[1:]))
	out, err = h.m("t", "g", "m").TryPoll(dst[:1], 64)
	require.NoError(t, err)
	require.Equal(t, []engine.Record{mark}, out, "nothing deliverable: dst as it was")
	out, err = h.m("t", "g", "m").TryPollPartition(dst[:1], 0)
	require.NoError(t, err)
	require.Equal(t, []engine.Record{mark}, out)
}

func rule10PollPartition(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 3)
	for p := range int32(3) {
		h.pubs("t", p, 0, fmt.Sprint("r", p, "a"), fmt.Sprint("r", p, "b"))
	}
	h.join("t", "g", "a")
	require.Equal(t, []int32{1}, h.join("t", "g", "b"))
	a := h.m("t", "g", "a")
	pp := func(m tributary.BackendMember, p int32) []string {
		t.Helper()
		out, err := m.TryPollPartition(nil, p)
		require.NoError(t, err)
		return h.seen("t", out)
	}
	require.Equal(t, []string{}, pp(a, 1), "not the member's partition")
	require.Equal(t, []string{"2/0 r2a #1"}, pp(a, 2), "only that partition, one record")
	require.Equal(t, []string{}, pp(a, 2), "in flight")
	require.False(t, h.group("t", "g").Partitions[0].InFlight, "partition 0 untouched")
	require.Equal(t, []string{"0/0 r0a #1"}, h.poll("t", "g", "a", 64))
	require.True(t, h.ack("t", "g", "a", 2, 0))
	require.Equal(t, []string{"2/1 r2b #1"}, pp(a, 2))
	require.Equal(t, []string{}, pp(h.m("t", "g", "c"), 0), "not a member")
	require.Equal(t, []string{}, pp(h.m("t", "absent", "a"), 0), "absent group")
	require.Equal(t, []string{"1/0 r1a #1"}, pp(h.m("t", "g", "b"), 1))
}

// settleState: group g in which m1 owns partition 0 and m2 partition 1,
// each with its first record in flight; group h in which m1 owns both,
// nothing in flight.
func settleState(t testing.TB, nb NewBackend) *h {
	h := newTopic(t, nb, Config{Capacity: 4}, 2)
	h.pubs("t", 0, 0, "a", "b")
	h.pubs("t", 1, 0, "c")
	h.join("t", "g", "m1")
	h.join("t", "g", "m2")
	h.join("t", "h", "m1")
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "g", "m1", 64))
	require.Equal(t, []string{"1/0 c #1"}, h.poll("t", "g", "m2", 64))
	return h
}

func rule11Ack(t testing.TB, nb NewBackend) {
	h := settleState(t, nb)
	require.True(t, h.ack("t", "g", "m1", 0, 0))
	require.False(t, h.ack("t", "g", "m1", 0, 0), "double ack")
	require.Equal(t, int64(1), h.group("t", "g").Partitions[0].Committed)
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "g", "m1", 64))
	require.Equal(t, []string{}, h.poll("t", "g", "m2", 64), "m2's delivery is still in flight")
	// Commits are per group, and the log is trimmed only past every group.
	require.Equal(t, int64(0), h.describe("t").Partitions[0].LogStartOffset, "h holds offset 0")
	h.pubs("t", 0, 2, "d", "e")
	require.Equal(t, int64(-1), h.pub("t", 0, "f"))
	require.Equal(t, []string{"0/0 a #1", "1/0 c #1"}, h.poll("t", "h", "m1", 64))
	require.True(t, h.ack("t", "h", "m1", 0, 0))
	require.Equal(t, int64(1), h.describe("t").Partitions[0].LogStartOffset)
	h.pubs("t", 0, 4, "f")
	require.Equal(t, int64(-1), h.pub("t", 0, "g"))
}

// rule11Mismatch: an Ack or Retry that is not the current owner's exact
// in-flight delivery is false and changes nothing.
func rule11Mismatch(t testing.TB, nb NewBackend) {
	cases := []struct {
		name          string
		pre           func(h *h)
		group, member string
		p             int32
		off           int64
		wstill        bool // g/m1's delivery 0/0 is still in flight after pre
	}{
		{"wrong member", nil, "g", "m2", 0, 0, true},
		{"absent member", nil, "g", "m3", 0, 0, true},
		{"member differing in case", nil, "g", "M1", 0, 0, true},
		{"wrong partition", nil, "g", "m1", 1, 0, true},
		{"the next offset", nil, "g", "m1", 0, 1, true},
		{"beyond the log end", nil, "g", "m1", 0, 99, true},
		{"other group", nil, "h", "m1", 0, 0, true},
		{"absent group", nil, "nog", "m1", 0, 0, true},
		{"not in flight", func(h *h) { h.ack("t", "g", "m1", 0, 0) }, "g", "m1", 0, 1, false},
		{"double ack", func(h *h) { h.ack("t", "g", "m1", 0, 0) }, "g", "m1", 0, 0, false},
		{"after retry", func(h *h) { h.retry("t", "g", "m1", 0, 0) }, "g", "m1", 0, 0, false},
		{"stale owner after rebalance", func(h *h) { h.join("t", "g", "m0") }, "g", "m1", 0, 0, false},
		{"rejoined owner", func(h *h) { h.leave("t", "g", "m1"); h.join("t", "g", "m1") }, "g", "m1", 0, 0, false},
	}
	for _, c := range cases {
		for _, op := range []string{"Ack", "Retry"} {
			h := settleState(t, nb)
			if c.pre != nil {
				c.pre(h)
			}
			before := h.state()
			var ok bool
			if op == "Ack" {
				ok = h.ack("t", c.group, c.member, c.p, c.off)
			} else {
				ok = h.retry("t", c.group, c.member, c.p, c.off)
			}
			require.False(t, ok, "%s: %s", op, c.name)
			h.unchanged(before, "%s: %s", op, c.name)
			require.Equal(t, c.wstill, h.ack("t", "g", "m1", 0, 0), "%s: %s: the delivery is unaffected", op, c.name)
		}
	}
}

func rule12Retry(t testing.TB, nb NewBackend) {
	h := settleState(t, nb)
	h.pubs("t", 0, 2, "d", "e") // full
	require.True(t, h.retry("t", "g", "m1", 0, 0))
	require.False(t, h.retry("t", "g", "m1", 0, 0), "no longer in flight")
	require.False(t, h.ack("t", "g", "m1", 0, 0), "ack after retry, before a poll")
	gp := h.group("t", "g").Partitions[0]
	require.False(t, gp.InFlight)
	require.Equal(t, int64(0), gp.Committed, "retry does not commit")
	require.Equal(t, []string{"0/0 a #2"}, h.poll("t", "g", "m1", 64))
	require.True(t, h.retry("t", "g", "m1", 0, 0))
	require.Equal(t, []string{"0/0 a #3"}, h.poll("t", "g", "m1", 64))
	// Nothing was trimmed by the retries: h and g both at 0.
	h.poll("t", "h", "m1", 1)
	require.True(t, h.ack("t", "h", "m1", 0, 0))
	require.Equal(t, int64(-1), h.pub("t", 0, "f"), "g still holds offset 0")
	require.True(t, h.ack("t", "g", "m1", 0, 0))
	require.False(t, h.retry("t", "g", "m1", 0, 0), "retry after ack")
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "g", "m1", 64))
	// A retried record may go to a new owner.
	require.True(t, h.retry("t", "g", "m1", 0, 1))
	require.Equal(t, []int32{0}, h.join("t", "g", "m0"))
	require.Equal(t, []string{"0/1 b #2"}, h.poll("t", "g", "m0", 64))
}

func rule13NoGroups(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 3}, 1)
	h.pubs("t", 0, 0, "a", "b", "c")
	require.Equal(t, int64(-1), h.pub("t", 0, "d"))
	require.Equal(t, int64(-1), h.pub("t", 0, "e"))
	d := h.describe("t").Partitions[0]
	require.Equal(t, engine.PartitionDescription{Partition: 0, LogStartOffset: 0, LogEndOffset: 3}, d)
	h.join("t", "g", "m")
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "g", "m", 1))
	require.True(t, h.ack("t", "g", "m", 0, 0))
	require.Equal(t, int64(3), h.pub("t", 0, "f"), "not 5")
	require.Equal(t, int64(-1), h.pub("t", 0, "g"))
}

// rule13TwoGroups: a record is removed only when every group, a member-less
// one included, has acknowledged it; the slowest group decides.
func rule13TwoGroups(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 2}, 1)
	h.join("t", "g1", "m")
	h.join("t", "g2", "m")
	h.join("t", "idle", "m")
	require.True(t, h.leave("t", "idle", "m"))
	h.pubs("t", 0, 0, "a", "b")
	require.Equal(t, int64(-1), h.pub("t", 0, "c"))
	for _, g := range []string{"g2", "g1"} {
		for off := range int64(2) {
			h.poll("t", g, "m", 1)
			require.True(t, h.ack("t", g, "m", 0, off), "%s acks %d", g, off)
			require.Equal(t, int64(0), h.describe("t").Partitions[0].LogStartOffset, "idle holds 0")
		}
	}
	require.Equal(t, int64(-1), h.pub("t", 0, "c"), "idle has acked nothing")
	h.join("t", "idle", "m")
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "idle", "m", 1))
	require.True(t, h.ack("t", "idle", "m", 0, 0))
	require.Equal(t, int64(1), h.describe("t").Partitions[0].LogStartOffset)
	require.Equal(t, int64(2), h.pub("t", 0, "c"), "one slot freed")
	require.Equal(t, int64(-1), h.pub("t", 0, "d"))
	snap := h.snapshot("t")
	require.Len(t, snap.Records[0], 2)
	require.Equal(t, "b", snap.Records[0][0].Payload)
	require.Equal(t, int64(1), snap.Records[0][0].Offset)
}

// rule13PerPartition: retention is per partition and per topic.
func rule13PerPartition(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 1}, 2)
	h.create("u", 1)
	h.join("u", "slow", "m") // a group of u, not of t
	h.join("t", "g", "m")
	h.pubs("t", 0, 0, "a")
	h.pubs("t", 1, 0, "b")
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "g", "m", 1))
	require.True(t, h.ack("t", "g", "m", 0, 0))
	require.Equal(t, int64(1), h.pub("t", 0, "c"))
	require.Equal(t, int64(-1), h.pub("t", 1, "d"))
}
