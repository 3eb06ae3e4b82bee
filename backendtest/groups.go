package backendtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// groupChecks are the typed library's additions to the group calls: a
// group's configuration kept by the backend (Backend.CreateGroup's options,
// Backend.GroupConfig), a group created at the log end (engine.StartLatest)
// and the admin removal of a member (Backend.RemoveMember).
func groupChecks() []Check {
	return []Check{
		{"GroupConfigKept", groupConfigKept},
		{"GroupConfigInvalid", groupConfigInvalid},
		{"GroupStartLatest", groupStartLatest},
		{"GroupStartLatestAlone", groupStartLatestAlone},
		{"RemoveMember", removeMember},
		{"BlockingPollMemberRemoved", blockingPollRemoved},
	}
}

// groupConfig returns GroupConfig's answer, failing the check on an error.
func (h *h) groupConfig(topic, group string) (tributary.GroupConfig, bool) {
	h.t.Helper()
	c, ok, err := h.b.GroupConfig(topic, group)
	require.NoError(h.t, err, "GroupConfig(%q, %q)", topic, group)
	return c, ok
}

// groupConfigKept: the configuration CreateGroup was given is what
// GroupConfig returns, until the group is deleted; a duplicate CreateGroup
// does not change it; a group made by a Join has the zero one.
func groupConfigKept(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 2)
	want := tributary.GroupConfig{Start: engine.StartLatest, DeadLetter: "t-dlq", MaxAttempts: 3, Backoff: 5 * time.Millisecond, MaxBackoff: time.Second}
	ok, err := h.b.CreateGroup("t", "g", engine.Range,
		tributary.WithDeadLetter("t-dlq", 3), tributary.WithBackoff(5*time.Millisecond, time.Second), tributary.WithStart(engine.StartLatest))
	require.NoError(t, err)
	require.True(t, ok)
	got, ok := h.groupConfig("t", "g")
	require.True(t, ok, "GroupConfig of a created group")
	require.Equal(t, want, got)
	// Members joining and leaving do not change it.
	h.join("t", "g", "a")
	h.join("t", "g", "b")
	require.True(t, h.leave("t", "g", "a"))
	got, _ = h.groupConfig("t", "g")
	require.Equal(t, want, got, "after joins and leaves")
	// A duplicate is false and changes nothing, its options included.
	ok, err = h.b.CreateGroup("t", "g", engine.Sticky, tributary.WithDeadLetter("other", 7))
	require.NoError(t, err)
	require.False(t, ok)
	got, _ = h.groupConfig("t", "g")
	require.Equal(t, want, got, "after a duplicate CreateGroup")
	require.Equal(t, engine.Range.Name(), h.group("t", "g").Assignor)

	// A group made by a Join, or by CreateGroup without options: zero.
	h.join("t", "j", "m")
	got, ok = h.groupConfig("t", "j")
	require.True(t, ok)
	require.Equal(t, tributary.GroupConfig{}, got, "a group made by a Join")
	require.True(t, h.createGroup("t", "plain", engine.RoundRobin))
	got, ok = h.groupConfig("t", "plain")
	require.True(t, ok)
	require.Equal(t, tributary.GroupConfig{}, got, "CreateGroup without options")
	_, ok = h.groupConfig("t", "absent")
	require.False(t, ok, "an absent group")

	// Deleted: gone; created again by a Join: zero; by CreateGroup: the new.
	require.True(t, h.leave("t", "g", "b"))
	ok, err = h.b.DeleteGroup("t", "g")
	require.NoError(t, err)
	require.True(t, ok)
	_, ok = h.groupConfig("t", "g")
	require.False(t, ok, "a deleted group")
	h.join("t", "g", "c")
	got, ok = h.groupConfig("t", "g")
	require.True(t, ok)
	require.Equal(t, tributary.GroupConfig{}, got, "deleted, then made again by a Join")
	require.True(t, h.leave("t", "g", "c"))
	ok, err = h.b.DeleteGroup("t", "g")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = h.b.CreateGroup("t", "g", engine.RoundRobin, tributary.WithDeadLetter("t-dlq2", 1))
	require.NoError(t, err)
	require.True(t, ok)
	got, _ = h.groupConfig("t", "g")
	require.Equal(t, tributary.GroupConfig{DeadLetter: "t-dlq2", MaxAttempts: 1}, got, "deleted, then created again")
	// Per topic: the same group name on another topic is another group.
	h.create("u", 1)
	_, ok = h.groupConfig("u", "g")
	require.False(t, ok, "group g of another topic")
}

// groupConfigInvalid: CreateGroup with an option out of range and
// GroupConfig with bad names are ErrInvalidArgument and change nothing.
func groupConfigInvalid(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 2)
	h.pubs("t", 0, 0, "a")
	before := h.state()
	for _, tc := range []struct {
		name string
		opts []tributary.GroupOption
	}{
		{"a nil option", []tributary.GroupOption{nil}},
		{"the zero FailureOption", []tributary.GroupOption{tributary.FailureOption{}}},
		{"start 2", []tributary.GroupOption{tributary.WithStart(2)}},
		{"0 attempts", []tributary.GroupOption{tributary.WithDeadLetter("d", 0)}},
		{"1001 attempts", []tributary.GroupOption{tributary.WithDeadLetter("d", 1001)}},
		{"dead letter to itself", []tributary.GroupOption{tributary.WithDeadLetter("t", 3)}},
		{"dead letter not an identifier", []tributary.GroupOption{tributary.WithDeadLetter("bad name", 3)}},
		{"dead letter empty", []tributary.GroupOption{tributary.WithDeadLetter("", 3)}},
		{"backoff 0", []tributary.GroupOption{tributary.WithBackoff(0, time.Second)}},
		{"backoff above its max", []tributary.GroupOption{tributary.WithBackoff(2*time.Second, time.Second)}},
		{"one bad among good", []tributary.GroupOption{tributary.WithStart(engine.StartLatest), tributary.WithDeadLetter("d", -1)}},
	} {
		ok, err := h.b.CreateGroup("t", "g", engine.RoundRobin, tc.opts...)
		requireInvalid(t, err, "CreateGroup with %s", tc.name)
		require.False(t, ok, tc.name)
		h.unchanged(before, "CreateGroup with %s", tc.name)
		_, ok = h.groupConfig("t", "g")
		require.False(t, ok, "GroupConfig after CreateGroup with %s", tc.name)
	}
	// Unknown topic before a bad option (rule 4's order is the engine's).
	_, err := h.b.CreateGroup("nope", "g", engine.RoundRobin, tributary.WithDeadLetter("d", 0))
	requireInvalid(t, err, "CreateGroup on an unknown topic")
	for _, tc := range []struct{ topic, group string }{
		{"nope", "g"}, {"bad topic", "g"}, {"t", "bad group"}, {"t", ""}, {"t", strings.Repeat("g", 65)},
	} {
		c, ok, err := h.b.GroupConfig(tc.topic, tc.group)
		requireInvalid(t, err, "GroupConfig(%q, %q)", tc.topic, tc.group)
		require.False(t, ok)
		require.Equal(t, tributary.GroupConfig{}, c)
	}
	h.unchanged(before, "GroupConfig")
}

// groupStartLatest: a group created at the log end starts at each
// partition's log end, receives what is published afterwards and nothing
// before; behind a group that still needs the records, nothing is freed.
func groupStartLatest(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 8}, 3)
	require.True(t, h.createGroup("t", "slow", engine.RoundRobin))
	h.pubs("t", 0, 0, "a", "b", "c")
	h.pubs("t", 1, 0, "d")
	ok, err := h.b.CreateGroup("t", "new", engine.Sticky, tributary.WithStart(engine.StartLatest))
	require.NoError(t, err)
	require.True(t, ok)
	g := h.group("t", "new")
	require.Equal(t, engine.Sticky.Name(), g.Assignor)
	for p, want := range []int64{3, 1, 0} {
		require.Equal(t, engine.GroupPartition{Partition: int32(p), Committed: want}, g.Partitions[p], "partition %d", p)
	}
	d := h.describe("t")
	require.Equal(t, int64(0), d.Partitions[0].LogStartOffset, "slow still needs a, b, c")
	h.join("t", "new", "m")
	require.Equal(t, []string{}, h.poll("t", "new", "m", 64), "nothing published before")
	h.pubs("t", 1, 1, "e")
	h.pubs("t", 2, 0, "f")
	require.Equal(t, []string{"1/1 e #1", "2/0 f #1"}, h.poll("t", "new", "m", 64))
	// slow, created earlier, still gets everything.
	h.join("t", "slow", "s")
	require.Equal(t, []string{"0/0 a #1", "1/0 d #1", "2/0 f #1"}, h.poll("t", "slow", "s", 64))
}

// groupStartLatestAlone: a group created at the log end on a topic whose
// records no group needs commits past them: retention removes them at
// once, but for the replay window, and a full partition has room again.
func groupStartLatestAlone(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 3, ReplayWindow: 1}, 1)
	h.pubs("t", 0, 0, "a", "b", "c")
	require.Equal(t, int64(-1), h.pub("t", 0, "full"), "no group: nothing is removed")
	ok, err := h.b.CreateGroup("t", "g", engine.RoundRobin, tributary.WithStart(engine.StartLatest))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, engine.PartitionDescription{Partition: 0, LogStartOffset: 2, LogEndOffset: 3}, h.describe("t").Partitions[0],
		"a and b removed; c kept by the window")
	require.Equal(t, int64(3), h.group("t", "g").Partitions[0].Committed)
	h.pubs("t", 0, 3, "d")
	h.join("t", "g", "m")
	require.Equal(t, []string{"0/3 d #1"}, h.poll("t", "g", "m", 1))
	// An earliest group created now starts at what is still retained.
	require.True(t, h.createGroup("t", "e", engine.RoundRobin))
	require.Equal(t, int64(2), h.group("t", "e").Partitions[0].Committed)
}

// removeMember: RemoveMember is the member's Leave by name, by anyone:
// the group rebalances, the removed member's delivery moves with its
// partition, and its Ack is false; false for an absent member or group;
// ErrInvalidArgument for bad names, changing nothing.
func removeMember(t testing.TB, nb NewBackend) {
	h := newTopic(t, nb, Config{Capacity: 4}, 2)
	h.pubs("t", 0, 0, "a")
	h.pubs("t", 1, 0, "b")
	require.Equal(t, []int32{0, 1}, h.join("t", "g", "x"))
	require.Equal(t, []int32{1}, h.join("t", "g", "y"))
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "g", "x", 4))
	ok, err := h.b.RemoveMember("t", "g", "x")
	require.NoError(t, err)
	require.True(t, ok)
	g := h.group("t", "g")
	require.Equal(t, []string{"y"}, g.Members)
	require.Equal(t, []int32{0, 1}, h.assignment("t", "g", "y"))
	require.Equal(t, []int32{}, h.assignment("t", "g", "x"))
	require.False(t, g.Partitions[0].InFlight, "x's delivery is cancelled")
	// The removed member's own calls: false and empty, or, on a backend
	// that fences the incarnation it removed (BackendMember), ErrFenced.
	ok, err = h.m("t", "g", "x").Ack(0, 0)
	if !errors.Is(err, tributary.ErrFenced) {
		require.NoError(t, err, "the removed member's Ack")
		require.False(t, ok, "the removed member's Ack")
	}
	require.Equal(t, []string{"0/0 a #2", "1/0 b #1"}, h.poll("t", "g", "y", 4))
	recs, err := h.m("t", "g", "x").TryPoll(nil, 4)
	if !errors.Is(err, tributary.ErrFenced) {
		require.NoError(t, err, "the removed member's TryPoll")
		require.Empty(t, recs, "a removed member polls nothing")
	}

	before := h.state()
	for _, tc := range []struct{ group, member string }{{"g", "x"}, {"g", "X"}, {"absent", "y"}} {
		ok, err := h.b.RemoveMember("t", tc.group, tc.member)
		require.NoError(t, err, "RemoveMember(%q, %q)", tc.group, tc.member)
		require.False(t, ok, "RemoveMember(%q, %q) of an absent member", tc.group, tc.member)
	}
	for _, tc := range []struct{ topic, group, member string }{
		{"nope", "g", "y"}, {"bad topic", "g", "y"}, {"t", "bad group", "y"}, {"t", "g", ""}, {"t", "g", "bad member"},
		{"nope", "absent", "y"}, {"t", "absent", strings.Repeat("m", 65)},
	} {
		ok, err := h.b.RemoveMember(tc.topic, tc.group, tc.member)
		requireInvalid(t, err, "RemoveMember(%q, %q, %q)", tc.topic, tc.group, tc.member)
		require.False(t, ok)
	}
	h.unchanged(before, "RemoveMember of absent members and with bad names")
	// The last member removed: the group stays, with its offsets (rule 8).
	ok, err = h.b.RemoveMember("t", "g", "y")
	require.NoError(t, err)
	require.True(t, ok)
	g = h.group("t", "g")
	require.Equal(t, []string{}, g.Members)
	require.Equal(t, int64(0), g.Partitions[0].Committed)
	// The removed member may join again, through a new BackendMember (the
	// removed one may be fenced).
	delete(h.members, [3]string{"t", "g", "x"})
	require.Equal(t, []int32{0, 1}, h.join("t", "g", "x"))
	require.Equal(t, []string{"0/0 a #3", "1/0 b #2"}, h.poll("t", "g", "x", 4))
}

// blockingPollRemoved: a member's waiting Poll returns ErrClosed when the
// member is removed by RemoveMember, and so does its next Poll.
func blockingPollRemoved(t testing.TB, nb NewBackend) {
	h, m := idleMember(t, nb)
	ctx, cancel := bg()
	defer cancel()
	c := waitingPoll(ctx, t, m, nil, nil, "nothing to deliver")
	ok, err := h.b.RemoveMember("t", "g", "m")
	require.NoError(t, err)
	require.True(t, ok)
	r := await(t, c, "Poll after the member was removed")
	require.ErrorIs(t, r.err, tributary.ErrClosed)
	_, err = m.Poll(ctx, nil, nil, 4)
	require.ErrorIs(t, err, tributary.ErrClosed, "Poll of a removed member")
}
