package main

import (
	"bytes"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/backendtest"
)

// -session-timeout (contract rule 24): show consumer group gives each
// member's last-seen age; a consumer that no command names for the
// timeout expires, and the next consume of it joins it again, saying so.
// The broker runs on a fake clock (sessionFlags.brokerNow), so ages are
// exact.
func TestSessionTimeoutFlag(t *testing.T) {
	clock := backendtest.NewFakeClock()
	var out bytes.Buffer
	files := fstest.MapFS{"e.json": &fstest.MapFile{Data: []byte(`{"value": "x"}`)}}
	s, err := newSession(&out, files.ReadFile, sessionFlags{capacity: 100, window: 100, now: time.Now,
		backend: "memory", session: 10 * time.Second, brokerNow: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { s.close() })
	run := func(line string) string {
		t.Helper()
		out.Reset()
		require.NoError(t, s.exec(line), line)
		return out.String()
	}
	run("create topic orders String 2")
	run("create consumer group billing orders RoundRobin")
	run("create consumer billing c1")
	clock.Advance(3 * time.Second)
	run("create consumer billing c2")
	run("create producer web String Manual")
	run("produce event web orders e.json p0")
	clock.Advance(4 * time.Second)
	show := run("show consumer group billing")
	require.Contains(t, show, "session timeout 10s; last seen: c1 7s ago, c2 4s ago\n", show)

	// c1 is named by no command for 10 s: the show expires it; its
	// consume joins it again.
	clock.Advance(3 * time.Second)
	show = run("show consumer group billing")
	require.Contains(t, show, "members c2\n", show)
	require.Contains(t, show, "last seen: c2 7s ago\n", show)
	got := run("consume event c1 p0")
	require.Contains(t, got, "c1 had expired (no command named it for the session timeout, 10s) and joined again: ", got)
	require.Contains(t, got, "x", "the consume went on: %s", got)
	show = run("show consumer group billing")
	require.Contains(t, show, "members c1 c2\n", show)
	require.Contains(t, show, "last seen: c1 0s ago, c2 7s ago\n", show)
}

// Without -session-timeout the program's consumers never expire and show
// consumer group prints no last-seen line (the transcripts in examples/
// stay as they are).
func TestNoSessionTimeoutByDefault(t *testing.T) {
	clock := backendtest.NewFakeClock()
	var out bytes.Buffer
	s, err := newSession(&out, fstest.MapFS{}.ReadFile, sessionFlags{capacity: 100, window: 100, now: time.Now,
		backend: "memory", brokerNow: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { s.close() })
	for _, line := range []string{"create topic orders String", "create consumer group billing orders Range", "create consumer billing c1"} {
		require.NoError(t, s.exec(line), line)
	}
	clock.Advance(24 * time.Hour)
	out.Reset()
	require.NoError(t, s.exec("show consumer group billing"))
	require.Contains(t, out.String(), "members c1\n")
	require.NotContains(t, out.String(), "last seen")
}

// -session-timeout is checked before any work: negative, or with the
// JetStream backend, it is refused naming the flag.
func TestSessionTimeoutFlagChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-session-timeout", "-1s"}, "-session-timeout -1s: must be 0 (none) or more"},
		{[]string{"-session-timeout", "10s", "-backend", "jetstream"}, "-session-timeout 10s: needs -backend memory"},
		{[]string{"-session-timeout", "ten"}, "session-timeout"},
	} {
		var out bytes.Buffer
		_, _, err := parseSessionFlags("tributary run", append(tc.args, "x.tri"), &out, usage)
		require.Error(t, err, "%v", tc.args)
		require.True(t, strings.Contains(err.Error(), tc.want), "%v: %v", tc.args, err)
	}
	f, _, err := parseSessionFlags("tributary run", []string{"-session-timeout", "45s", "x.tri"}, &bytes.Buffer{}, usage)
	require.NoError(t, err)
	require.Equal(t, 45*time.Second, f.session)
}

// expiryFixture is a session with -session-timeout 10s on a fake clock:
// topic orders (String, p0 p1) with one event on each partition, group
// billing (RoundRobin) with c1 [p0] and c2 [p1].
func expiryFixture(t *testing.T) (s *session, clock *backendtest.FakeClock, run func(string) string, fail func(string) error) {
	t.Helper()
	clock = backendtest.NewFakeClock()
	var out bytes.Buffer
	files := fstest.MapFS{"e.json": &fstest.MapFile{Data: []byte(`{"value": "x"}`)}}
	s, err := newSession(&out, files.ReadFile, sessionFlags{capacity: 100, window: 100, now: time.Now,
		backend: "memory", session: 10 * time.Second, brokerNow: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { s.close() })
	run = func(line string) string {
		t.Helper()
		out.Reset()
		require.NoError(t, s.exec(line), line)
		return out.String()
	}
	fail = func(line string) error {
		t.Helper()
		out.Reset()
		err := s.exec(line)
		require.Error(t, err, line)
		require.Empty(t, out.String(), "%s failed and printed: %s", line, out.String())
		return err
	}
	for _, line := range []string{"create topic orders String 2", "create consumer group billing orders RoundRobin",
		"create consumer billing c1", "create consumer billing c2", "create producer web String Manual",
		"produce event web orders e.json p0", "produce event web orders e.json p1"} {
		run(line)
	}
	return s, clock, run, fail
}

// A consume (or playback) that fails changes nothing, with a session
// timeout too: an expired consumer is checked against the assignment its
// rejoin would give and is not joined again when it would not own the
// partition; a member is not refreshed (its last-seen age stays).
func TestSessionTimeoutFailedConsumeChangesNothing(t *testing.T) {
	_, clock, run, fail := expiryFixture(t)
	const show = "show consumer group billing"

	// A member that does not own the partition: not even its last-seen
	// instant changes.
	clock.Advance(4 * time.Second)
	before := run(show)
	err := fail("consume event c1 p1")
	require.ErrorIs(t, err, errNotOwner)
	require.Equal(t, before, run(show))

	// Both expire; c2's consume joins it again, taking both partitions.
	clock.Advance(7 * time.Second)
	got := unwrapLines(run("consume event c2 p1"))
	require.Contains(t, got, "c2 had expired (no command named it for the session timeout, 10s) and joined again: billing (RoundRobin): c2 [p0 p1]\n", got)
	before = run(show)
	require.Contains(t, before, "members c2\n", before)
	for _, line := range []string{"consume event c1 p1", "consume events c1 p1 2", "playback c1 p1 0", "parallel consume (c1, p1)"} {
		err = fail(line)
		require.ErrorIs(t, err, errNotOwner, line)
		require.Contains(t, err.Error(), `consumer "c1" does not own orders p1: it had expired (no command named it for the session timeout, 10s), `+
			"and joining again would give billing (RoundRobin): c1 [p0] c2 [p1]; nothing changed: it is still expired", line)
		require.Equal(t, before, run(show), "%s changed the group", line)
	}
	// A playback the rejoin would allow but whose offset is outside the
	// partition's range: refused before the rejoin.
	err = fail("playback c1 p0 7")
	require.Contains(t, err.Error(), "offset 7 is outside what orders p0 can replay: 0 (log start) to 1 (log end)")
	require.Equal(t, before, run(show))

	// A parallel consume is checked as a whole, the rejoins of the tuples
	// before included: c1 joining first would leave c2 [p1] only.
	clock.Advance(11 * time.Second)
	before = run(show)
	require.Contains(t, before, "members none\n", before)
	err = fail("parallel consume (c1, p0), (c2, p0)")
	require.ErrorIs(t, err, errNotOwner)
	require.Contains(t, err.Error(), `tuple 2: consumer "c2" does not own orders p0: it had expired`)
	require.Equal(t, before, run(show))

	// The consume the rejoin allows joins it again and goes on.
	got = unwrapLines(run("consume event c1 p0"))
	require.Contains(t, got, "c1 had expired (no command named it for the session timeout, 10s) and joined again: billing (RoundRobin): c1 [p0 p1]\n", got)
	require.Contains(t, got, `acked   "x"`, got)
}

// create consumer of the program's expired consumer joins it again as a
// new incarnation; delete consumer <group> <member> of its name says it is
// not a member any more, changing nothing.
func TestSessionTimeoutExpiredConsumerNames(t *testing.T) {
	s, clock, run, fail := expiryFixture(t)
	const show = "show consumer group billing"

	// A member of that name: a duplicate still.
	err := fail("create consumer billing c1")
	require.ErrorIs(t, err, errDuplicateID)

	clock.Advance(10 * time.Second)
	run("consume event c2 p1") // c2 joins again; c1 stays expired
	before := run(show)
	require.Contains(t, before, "members c2\n", before)

	err = fail("delete consumer billing c1")
	require.ErrorIs(t, err, errUnknownID)
	require.Contains(t, err.Error(), `unknown member "c1" of consumer group "billing": it is not a member any more, its session expired `+
		"(no command named it for the session timeout, 10s); delete consumer c1 forgets it, create consumer billing c1 joins it again")
	require.Equal(t, before, run(show))

	// Refusals change nothing: another group's name, another policy.
	run("create consumer group shipping orders Range")
	before = run(show)
	err = fail("create consumer shipping c1")
	require.ErrorIs(t, err, errDuplicateID)
	require.Contains(t, err.Error(), `(in group "billing" of topic "orders", where it expired: no command named it for the session timeout, 10s; delete consumer c1 frees the name)`)
	err = fail("create consumer billing c1 --dead-letter dl")
	require.ErrorIs(t, err, tributary.ErrPolicyMismatch)
	require.Equal(t, before, run(show))
	old := s.consumers["c1"]
	require.NotNil(t, old)

	got := run("create consumer billing c1")
	require.Equal(t, "c1 had expired (no command named it for the session timeout, 10s) and joined again as a new incarnation: "+
		"billing (RoundRobin): c1 [p0] c2 [p1]\n", unwrapLines(got))
	require.NotSame(t, old, s.consumers["c1"], "a new incarnation")
	require.ErrorIs(t, old.Heartbeat(), tributary.ErrClosed, "the old incarnation is closed")
	require.Contains(t, run(show), "members c1 c2\n")
	require.Contains(t, run("consume event c1 p0"), `acked   "x"`)
}

// unwrapLines joins printf's wrapped continuation lines (indented by two)
// back into their line.
func unwrapLines(s string) string { return strings.ReplaceAll(s, "\n  ", " ") }

// delete consumer <consumer> of an expired consumer forgets it and says it
// had no membership to leave.
func TestSessionTimeoutDeleteExpiredConsumer(t *testing.T) {
	s, clock, run, _ := expiryFixture(t)
	clock.Advance(5 * time.Second)
	require.Equal(t, "c2 left billing (RoundRobin): c1 [p0 p1]\n", run("delete consumer c2"))
	clock.Advance(5 * time.Second)
	got := unwrapLines(run("delete consumer c1"))
	require.Equal(t, "deleted c1, which had expired (no command named it for the session timeout, 10s) and was no member to leave: "+
		"billing (RoundRobin): no members\n", got)
	require.NotContains(t, s.consumers, "c1")
	// The group has no members: it can go, and a consumer of the deleted
	// group's name is then forgotten without an assignment.
	run("create consumer billing c3")
	clock.Advance(10 * time.Second)
	run("delete consumer group billing")
	require.Equal(t, "deleted c3, which had expired (no command named it for the session timeout, 10s)\n", unwrapLines(run("delete consumer c3")))
}
