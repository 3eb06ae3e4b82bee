package backendtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// livenessChecks are rules 24–25 (member liveness: the session timeout
// and the rejoin of a new incarnation) and the in-process fencing of old
// incarnations that BackendMember documents. Every check of rule 24 runs
// on a backend made with Config.SessionTimeout and a FakeClock, and first
// requires Backend.SessionTimeout to report it: a backend that does not
// enforce a session timeout names these checks in Run's skips, with its
// reason.
func livenessChecks() []Check {
	return []Check{
		{"Rule24WorkedExample", rule24WorkedExample},
		{"Rule24SessionTimeout", rule24SessionTimeout},
		{"Rule24ExpiredMember", rule24ExpiredMember},
		{"Rule25WorkedExample", rule25WorkedExample},
		{"Rule25Rejoin", rule25Rejoin},
		{"Rule25FencesEarlierIncarnations", rule25Fencing},
	}
}

// liveH is newH for a liveness check: a backend with session timeout d on
// a FakeClock, which must report d.
func liveH(t testing.TB, nb NewBackend, capacity int32, d time.Duration) (*h, *FakeClock) {
	t.Helper()
	clock := NewFakeClock()
	h := newH(t, nb, Config{Capacity: capacity, SessionTimeout: d, Clock: clock.Now})
	require.Equal(t, d, h.b.SessionTimeout(), "SessionTimeout of a backend made with Config.SessionTimeout %v", d)
	return h, clock
}

func (h *h) heartbeat(topic, group, member string) bool {
	h.t.Helper()
	ok, err := h.m(topic, group, member).Heartbeat()
	require.NoError(h.t, err, "Heartbeat(%q, %q, %q)", topic, group, member)
	return ok
}

func (h *h) rejoin(topic, group, member string) []int32 {
	h.t.Helper()
	return h.parts("Rejoin", h.m(topic, group, member).Rejoin, topic, group, member)
}

// groupMembers returns group's members, from Describe (a call on the topic:
// it expires whoever is due first, rule 24).
func (h *h) groupMembers(topic, group string) []string {
	h.t.Helper()
	return h.group(topic, group).Members
}

// requireLastSeen requires Describe's LastSeen of group to be want, member
// by member (instants compared with Equal).
func (h *h) requireLastSeen(topic, group string, want []time.Time, what string) {
	h.t.Helper()
	g := h.group(topic, group)
	require.Len(h.t, g.LastSeen, len(g.Members), "%s: LastSeen has one entry per member %v", what, g.Members)
	require.Len(h.t, g.LastSeen, len(want), "%s: members %v", what, g.Members)
	for i := range want {
		require.True(h.t, want[i].Equal(g.LastSeen[i]), "%s: LastSeen of %q is %v, want %v", what, g.Members[i], g.LastSeen[i], want[i])
	}
}

// rule24WorkedExample: docs/contract.md's rule-24 example, verbatim.
func rule24WorkedExample(t testing.TB, nb NewBackend) {
	h, clock := liveH(t, nb, 10, 10*time.Second)
	h.create("t", 2)
	h.pubs("t", 0, 0, "x")
	h.pubs("t", 1, 0, "y")
	require.Equal(t, []int32{0, 1}, h.join("t", "g", "a"), "t=0s")
	clock.Advance(time.Second)
	require.Equal(t, []int32{1}, h.join("t", "g", "b"), "t=1s")
	require.Equal(t, []int32{0}, h.assignment("t", "g", "a"), "t=1s")
	clock.Advance(time.Second)
	require.Equal(t, []string{"0/0 x #1"}, h.poll("t", "g", "a", 64), "t=2s: a polls p0")
	clock.Advance(7 * time.Second)
	require.True(t, h.heartbeat("t", "g", "b"), "t=9s: b heartbeats")
	require.Equal(t, []string{"a", "b"}, h.groupMembers("t", "g"), "t=9s: a was last seen 7s before, not expired")
	clock.Advance(6 * time.Second)
	require.Equal(t, []string{"0/0 x #2", "1/0 y #1"}, h.poll("t", "g", "b", 64),
		"t=15s: b's poll first expires a (last seen 13s before), then returns p0 offset 0 (Attempt 2) and p1 offset 0")
	require.Equal(t, []int32{0, 1}, h.assignment("t", "g", "b"), "t=15s: b owns both")
	clock.Advance(time.Second)
	require.False(t, h.ack("t", "g", "a", 0, 0), "t=16s: a's Ack")
	require.False(t, h.heartbeat("t", "g", "a"), "t=16s: a's Heartbeat")
	require.Equal(t, []string{"b"}, h.groupMembers("t", "g"), "t=16s")
	require.True(t, h.ack("t", "g", "b", 0, 0), "t=16s: b's Ack")
}

// rule24SessionTimeout: a member expires at exactly d after it was last
// seen, not before, on any caller's call (Describe included); every valid
// call naming it refreshes it, whatever it returns, and Describe's
// LastSeen shows it; an invalid call refreshes nothing.
func rule24SessionTimeout(t testing.TB, nb NewBackend) {
	const d = 10 * time.Second
	h, clock := liveH(t, nb, 4, d)
	h.create("t", 1)
	h.pubs("t", 0, 0, "x")
	t0 := clock.Now()
	require.Equal(t, []int32{0}, h.join("t", "g", "a"))
	h.requireLastSeen("t", "g", []time.Time{t0}, "after Join")
	clock.Advance(d - time.Nanosecond)
	require.Equal(t, []string{"a"}, h.groupMembers("t", "g"), "d − 1ns after the Join")
	h.requireLastSeen("t", "g", []time.Time{t0}, "Describe refreshes nothing")
	clock.Advance(time.Nanosecond)
	require.Equal(t, []string{}, h.groupMembers("t", "g"), "exactly d after the Join: expired by Describe")
	h.requireLastSeen("t", "g", []time.Time{}, "no members")

	// Each call naming the member refreshes it, whatever it returns: a
	// member that makes only that call, every d − 1ns, stays.
	require.Equal(t, []int32{0}, h.join("t", "g", "a"))
	require.Equal(t, []string{"0/0 x #1"}, h.poll("t", "g", "a", 1))
	calls := []struct {
		name string
		call func()
	}{
		{"an empty TryPoll", func() { require.Equal(t, []string{}, h.poll("t", "g", "a", 1)) }},
		{"an empty TryPollPartition", func() {
			recs, err := h.m("t", "g", "a").TryPollPartition(nil, 0)
			require.NoError(t, err)
			require.Empty(t, recs)
		}},
		{"an Ack of another offset (false)", func() { require.False(t, h.ack("t", "g", "a", 0, 5)) }},
		{"a Retry of another offset (false)", func() { require.False(t, h.retry("t", "g", "a", 0, 5)) }},
		{"a Heartbeat", func() { require.True(t, h.heartbeat("t", "g", "a")) }},
		{"a second Join", func() { require.Equal(t, []int32{0}, h.join("t", "g", "a")) }},
	}
	clock.Advance(d - time.Nanosecond)
	for _, c := range calls {
		c.call()
		h.requireLastSeen("t", "g", []time.Time{clock.Now()}, c.name+" refreshes the member")
		clock.Advance(d - time.Nanosecond)
		require.Equal(t, []string{"a"}, h.groupMembers("t", "g"), "d − 1ns after %s", c.name)
	}
	require.True(t, h.group("t", "g").Partitions[0].InFlight, "a's delivery is still in flight")

	// An invalid call refreshes nothing.
	_, err := h.m("t", "g", "a").Ack(0, -1)
	requireInvalid(t, err, "Ack of a negative offset")
	_, err = h.m("t", "g", "a").TryPoll(nil, 0)
	requireInvalid(t, err, "TryPoll of max 0")
	_, err = h.m("t", "g", "a").Retry(7, 0)
	requireInvalid(t, err, "Retry of a partition out of range")
	clock.Advance(time.Nanosecond)
	require.Equal(t, []string{}, h.groupMembers("t", "g"), "d after the last valid call: the invalid ones did not refresh it")
}

// rule24ExpiredMember: an expired member leaves as by Leave (its in-flight
// deliveries cancelled, committed offsets and attempts kept); its own Ack,
// Retry, Heartbeat and poll are false or empty and bring it back to
// nothing; a Heartbeat of a member that never joined is false; Join brings
// it back, last seen at that Join.
func rule24ExpiredMember(t testing.TB, nb NewBackend) {
	const d = 10 * time.Second
	h, clock := liveH(t, nb, 4, d)
	h.create("t", 2)
	h.pubs("t", 0, 0, "a0", "a1")
	h.pubs("t", 1, 0, "b0")
	require.Equal(t, []int32{0, 1}, h.join("t", "g", "a"))
	require.Equal(t, []string{"0/0 a0 #1", "1/0 b0 #1"}, h.poll("t", "g", "a", 64))
	require.True(t, h.ack("t", "g", "a", 0, 0))
	require.Equal(t, []string{"0/1 a1 #1"}, h.poll("t", "g", "a", 64))
	clock.Advance(d)
	g := h.group("t", "g")
	require.Equal(t, []string{}, g.Members, "expired d after its last call")
	require.Equal(t, []engine.GroupPartition{
		{Partition: 0, Committed: 1, Attempts: 1, Lag: 1},
		{Partition: 1, Committed: 0, Attempts: 1, Lag: 1},
	}, g.Partitions, "deliveries cancelled, committed offsets and attempts kept")
	before := h.state()
	require.False(t, h.ack("t", "g", "a", 0, 1), "the expired member's Ack")
	require.False(t, h.retry("t", "g", "a", 1, 0), "the expired member's Retry")
	require.False(t, h.heartbeat("t", "g", "a"), "the expired member's Heartbeat")
	require.Equal(t, []string{}, h.poll("t", "g", "a", 64), "the expired member's poll")
	require.False(t, h.heartbeat("t", "g", "z"), "Heartbeat of a member that never joined")
	require.False(t, h.heartbeat("t", "absent", "a"), "Heartbeat in an absent group")
	h.unchanged(before, "calls naming members that are not in the group")
	clock.Advance(time.Second)
	require.Equal(t, []int32{0, 1}, h.join("t", "g", "a"), "it joins again")
	h.requireLastSeen("t", "g", []time.Time{clock.Now()}, "after the second Join")
	require.Equal(t, []string{"0/1 a1 #2", "1/0 b0 #2"}, h.poll("t", "g", "a", 64), "its cancelled deliveries again")
}

// rule25WorkedExample: docs/contract.md's rule-25 example, verbatim.
func rule25WorkedExample(t testing.TB, nb NewBackend) {
	h, _ := liveH(t, nb, 10, 10*time.Second)
	h.create("t", 2)
	h.pubs("t", 0, 0, "x")
	h.pubs("t", 1, 0, "y")
	require.Equal(t, []int32{0, 1}, h.join("t", "g", "a"))
	require.Equal(t, []string{"0/0 x #1", "1/0 y #1"}, h.poll("t", "g", "a", 64))
	require.Equal(t, []int32{0, 1}, h.rejoin("t", "g", "a"))
	require.Equal(t, []string{"a"}, h.groupMembers("t", "g"), "still the one member")
	require.Equal(t, []string{"0/0 x #2", "1/0 y #2"}, h.poll("t", "g", "a", 64), "both again, Attempt 2")
}

// rule25Rejoin: Rejoin of a non-member is Join (it creates the group);
// of a member, it cancels that member's in-flight deliveries alone, with
// no rebalance (another member keeps its delivery, assignments stay), and
// refreshes its session; its earlier Ack of a cancelled delivery is false.
func rule25Rejoin(t testing.TB, nb NewBackend) {
	const d = 10 * time.Second
	h, clock := liveH(t, nb, 4, d)
	h.create("t", 2)
	h.pubs("t", 0, 0, "x")
	h.pubs("t", 1, 0, "y")
	require.Equal(t, []int32{0, 1}, h.rejoin("t", "g", "a"), "Rejoin of an absent group and member is Join")
	require.Equal(t, []string{"a"}, h.groupMembers("t", "g"))
	require.Equal(t, []int32{1}, h.join("t", "g", "b"))
	require.Equal(t, []string{"0/0 x #1"}, h.poll("t", "g", "a", 64))
	require.Equal(t, []string{"1/0 y #1"}, h.poll("t", "g", "b", 64))
	tb := clock.Now()
	clock.Advance(5 * time.Second)
	require.Equal(t, []int32{0}, h.rejoin("t", "g", "a"), "Rejoin of a member: its partitions, unchanged")
	g := h.group("t", "g")
	require.Equal(t, []string{"a", "b"}, g.Members)
	require.False(t, g.Partitions[0].InFlight, "a's delivery cancelled")
	require.Equal(t, int32(1), g.Partitions[0].Attempts)
	require.True(t, g.Partitions[1].InFlight, "b's delivery kept: no rebalance")
	h.requireLastSeen("t", "g", []time.Time{clock.Now(), tb}, "Rejoin refreshes a alone")
	require.Equal(t, []int32{1}, h.assignment("t", "g", "b"))
	require.False(t, h.ack("t", "g", "a", 0, 0), "the Ack of a delivery Rejoin cancelled")
	require.Equal(t, []string{"0/0 x #2"}, h.poll("t", "g", "a", 64))
	require.True(t, h.ack("t", "g", "b", 1, 0), "b's delivery survived a's Rejoin")
	require.True(t, h.ack("t", "g", "a", 0, 0))
	require.Equal(t, []int32{0}, h.rejoin("t", "g", "a"), "Rejoin with nothing in flight")
	require.Equal(t, []string{"a", "b"}, h.groupMembers("t", "g"))
}

// rule25Fencing: of two BackendMembers of the same names made by one
// backend, the one that joined or rejoined last is the member's
// incarnation; the earlier one is superseded: its calls fail with
// ErrFenced (and ErrClosed) and change nothing, its Leave leaves nothing.
// RemoveMember supersedes the incarnation it removes; a member made later
// joins afresh.
func rule25Fencing(t testing.TB, nb NewBackend) {
	h := newH(t, nb, Config{Capacity: 4})
	tp := h.create("t", 1)
	h.pubs("t", 0, 0, "x", "y")
	fresh := func() tributary.BackendMember {
		m, err := tp.Member("g", "m")
		require.NoError(t, err)
		return m
	}
	fenced := func(err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, tributary.ErrFenced, what)
		require.ErrorIs(t, err, tributary.ErrClosed, what)
	}
	old := fresh()
	_, err := old.Join()
	require.NoError(t, err)
	recs, err := old.TryPoll(nil, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"0/0 x #1"}, h.seen("t", recs))
	next := fresh()
	parts, err := next.Rejoin()
	require.NoError(t, err)
	require.Equal(t, []int32{0}, parts)

	before := h.state()
	_, err = old.TryPoll(nil, 1)
	fenced(err, "TryPoll of the superseded member")
	_, err = old.TryPollPartition(nil, 0)
	fenced(err, "TryPollPartition of the superseded member")
	_, err = old.Ack(0, 0)
	fenced(err, "Ack of the superseded member")
	_, err = old.Retry(0, 0)
	fenced(err, "Retry of the superseded member")
	_, err = old.Heartbeat()
	fenced(err, "Heartbeat of the superseded member")
	_, err = old.Join()
	fenced(err, "Join of the superseded member")
	_, err = old.Rejoin()
	fenced(err, "Rejoin of the superseded member")
	ok, err := old.Leave()
	require.NoError(t, err, "Leave of the superseded member")
	require.False(t, ok, "Leave of the superseded member leaves nothing")
	h.unchanged(before, "the superseded member's calls")
	require.Equal(t, []string{"m"}, h.groupMembers("t", "g"))

	recs, err = next.TryPoll(nil, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"0/0 x #2"}, h.seen("t", recs), "the successor has the delivery Rejoin cancelled")
	ok, err = next.Ack(0, 0)
	require.NoError(t, err)
	require.True(t, ok)

	ok, err = h.b.RemoveMember("t", "g", "m")
	require.NoError(t, err)
	require.True(t, ok)
	_, err = next.TryPoll(nil, 1)
	fenced(err, "TryPoll of the removed incarnation")
	_, err = next.Join()
	fenced(err, "Join of the removed incarnation")
	ok, err = next.Leave()
	require.NoError(t, err)
	require.False(t, ok, "Leave of the removed incarnation")

	last := fresh()
	parts, err = last.Join()
	require.NoError(t, err)
	require.Equal(t, []int32{0}, parts, "a member made after the removal joins")
	recs, err = last.TryPoll(nil, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"0/1 y #1"}, h.seen("t", recs))
	ok, err = last.Leave()
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []string{}, h.groupMembers("t", "g"))
}
