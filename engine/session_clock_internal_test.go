package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The default clock's part in member liveness (SPEC rule 24): the instants
// a member's calls keep are exact readings, whatever the coarse clock that
// stamps records holds, so a member never expires early; a publish, which
// names no member, checks expiry at its record's (coarse) time, so it
// expires a member whose session has run out, and never one early.

// freezeCoarse stops b's coarse clock at at: once a refresher that runs has
// stopped (no reading for coarseIdleTicks ticks), it is replaced by one that
// does nothing, and the clock is marked running, so every coarse reading is
// at until an exact reading (every coarseExactEvery-th append to a
// partition) advances it. Called again on a frozen clock, it moves it to at.
func freezeCoarse(t *testing.T, b *Broker, at int64) {
	t.Helper()
	if frozen[b] {
		b.coarse.now.Store(at)
		return
	}
	frozen[b] = true
	for deadline := time.Now().Add(10 * time.Second); b.coarse.state.Load() != coarseStopped; {
		if time.Now().After(deadline) {
			t.Fatal("the coarse clock's refresher did not stop")
		}
		time.Sleep(time.Millisecond)
	}
	b.coarse.run = func() {}
	b.coarse.now.Store(at)
	b.coarse.state.Store(coarseUsed)
}

// frozen holds the brokers whose coarse clock freezeCoarse froze; the
// tests that use it do not run in parallel.
var frozen = map[*Broker]bool{}

// membersOf returns the members of group g of topic t as the broker holds
// them, without a call (a call would expire first).
func membersOf(t *testing.T, b *Broker, topic, group string) []string {
	t.Helper()
	tp, err := b.lookup(topic)
	if err != nil {
		t.Fatal(err)
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	g := tp.groups.Load(group)
	if g == nil {
		t.Fatalf("no group %q", group)
	}
	return slices.Clone(g.members)
}

// TestMemberCallsStampExactly: with the coarse clock frozen half a session
// in the past, a member's Join, Heartbeat, Poll and Ack still record the
// exact time as its last-seen instant. Stamped with the coarse reading
// instead, the member would look half a session older than it is, and
// expire that much early: the same calls on a broker whose clock is the
// coarse reading (its broken variant) are caught.
func TestMemberCallsStampExactly(t *testing.T) {
	if errs := stampErrors(t, nil); len(errs) > 0 {
		t.Errorf("member calls on the default clock:\n%s", strings.Join(errs, "\n"))
	}
	// The broken variant: every reading of the broker clock is the coarse
	// clock's (WithClock set to it).
	coarseClock := func(b *Broker) {
		b.clock = func() time.Time { return time.Unix(0, b.coarse.read(&b.wall)) }
	}
	if errs := stampErrors(t, coarseClock); len(errs) < 5 {
		t.Errorf("member calls on the coarse clock: %d of 5 calls caught (%v), want all", len(errs), errs)
	}
}

// stampErrors makes a member's calls on a broker with a session timeout,
// changed by breakIt when not nil, each with the coarse clock frozen half a
// session before it, and returns one line per call whose last-seen instant
// is before the call.
func stampErrors(t *testing.T, breakIt func(*Broker)) []string {
	t.Helper()
	const d = 10 * time.Second
	b, err := New(10, WithSessionTimeout(d))
	if err != nil {
		t.Fatal(err)
	}
	if breakIt != nil {
		breakIt(b)
	}
	if _, err := b.Create("t", 1); err != nil {
		t.Fatal(err)
	}
	h, err := b.Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	m, err := h.Member("g", "a")
	if err != nil {
		t.Fatal(err)
	}
	seen := func() int64 {
		tp, _ := b.lookup("t")
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return tp.groups.Load("g").assign.Load().sessions["a"].seen.Load()
	}
	var errs []string
	check := func(call string, do func() error) {
		t.Helper()
		before := time.Now().UnixNano()
		freezeCoarse(t, b, before-int64(d/2))
		if err := do(); err != nil {
			t.Fatalf("%s: %v", call, err)
		}
		if got := seen(); got < before {
			errs = append(errs, fmt.Sprintf("%s: last seen %v before the call, want at or after it (exact)", call, time.Duration(before-got)))
		}
	}
	check("Join", func() error { _, err := m.Join(); return err })
	if _, err := h.Publish(0, "x"); err != nil {
		t.Fatal(err)
	}
	check("Heartbeat", func() error { _, err := m.Heartbeat(); return err })
	check("Poll", func() error { _, err := m.Poll(1); return err })
	check("Ack", func() error { _, err := m.Ack(0, 0); return err })
	check("Broker.Heartbeat", func() error { _, err := b.Heartbeat("t", "g", "a"); return err })
	return errs
}

// TestPublishExpiresAtItsRecordTime: a publish expires a member whose
// session has run out by its record's time, and leaves one whose session
// has not. With the coarse clock frozen in the past the publish's reading
// lags, and it expires nobody (the next member call does, at its exact
// reading); it never expires early. (With the expiry taken out of the
// publish paths every case fails at "past the session".)
func TestPublishExpiresAtItsRecordTime(t *testing.T) {
	const d = 50 * time.Millisecond
	publishes := []struct {
		name string
		do   func(b *Broker) error
	}{
		{"Publish", func(b *Broker) error { _, err := b.Publish("t", 0, "x"); return err }},
		{"PublishMessage", func(b *Broker) error { _, err := b.PublishMessage("t", 0, Message{Payload: "x"}); return err }},
		{"PublishMessage with its own Time", func(b *Broker) error {
			_, err := b.PublishMessage("t", 0, Message{Payload: "x", Time: time.Unix(1, 0)})
			return err
		}},
		{"TopicHandle.PublishStamped", func(b *Broker) error {
			h, err := b.Topic("t")
			if err == nil {
				_, _, err = h.PublishStamped(0, Message{Payload: "x"})
			}
			return err
		}},
	}
	for _, p := range publishes {
		t.Run(p.name, func(t *testing.T) {
			b, err := New(1000, WithSessionTimeout(d))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Create("t", 1); err != nil {
				t.Fatal(err)
			}
			joined := time.Now()
			if _, err := b.Join("t", "g", "a"); err != nil {
				t.Fatal(err)
			}
			if err := p.do(b); err != nil {
				t.Fatal(err)
			}
			if time.Since(joined) < d {
				if got := membersOf(t, b, "t", "g"); !slices.Equal(got, []string{"a"}) {
					t.Fatalf("members %v after a publish within the session, want [a]", got)
				}
			}
			time.Sleep(d + d/2)
			if err := p.do(b); err != nil {
				t.Fatal(err)
			}
			if got := membersOf(t, b, "t", "g"); len(got) != 0 {
				t.Fatalf("members %v after a publish %v past the session, want none", got, time.Since(joined)-d)
			}

			// The coarse clock frozen at the join: a publish past the
			// session expires nobody; a member call then does.
			if _, err := b.Join("t", "g", "a"); err != nil {
				t.Fatal(err)
			}
			freezeCoarse(t, b, time.Now().UnixNano())
			time.Sleep(d + d/2)
			if err := p.do(b); err != nil {
				t.Fatal(err)
			}
			if got := membersOf(t, b, "t", "g"); !slices.Equal(got, []string{"a"}) {
				t.Fatalf("members %v after a publish on a lagging coarse clock, want [a] (left to the next call)", got)
			}
			if ok, err := b.Heartbeat("t", "g", "b"); err != nil || ok {
				t.Fatalf("Heartbeat of a non-member = %v, %v", ok, err)
			}
			if got := membersOf(t, b, "t", "g"); len(got) != 0 {
				t.Fatalf("members %v after a member call past the session, want none", got)
			}
		})
	}
}

// TestPublishAfterWallClockStepBack: after the wall clock steps back by
// less than wallClockResync (a system clock set back a little, or a resync
// that lost time), the coarse clock keeps its later reading and runs ahead
// of the exact one. A member that joins then (an exact last-seen instant)
// is not expired by the next publish, whose coarse reading is ahead: the
// publish only filters on it and expires at an exact reading. (Expiring at
// the coarse reading itself fails here: the member expires 76 µs after
// its Join.)
func TestPublishAfterWallClockStepBack(t *testing.T) {
	const d = 50 * time.Millisecond
	const step = 80 * time.Millisecond // < wallClockResync
	b, err := New(1000, WithSessionTimeout(d))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create("t", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish("t", 0, "x"); err != nil { // starts the coarse clock
		t.Fatal(err)
	}
	time.Sleep(3 * time.Millisecond) // the refresher ticks
	// The base a resync stores after the wall clock was set back by step.
	b.wall.base.Store(&clockBase{wall: time.Now().UnixNano() - int64(step), mono: nanotime()})
	exactBefore := b.nowNanos()
	if _, err := b.Join("t", "g", "a"); err != nil {
		t.Fatal(err)
	}
	if ahead := time.Duration(b.coarse.now.Load() - b.nowNanos()); ahead < d {
		t.Fatalf("the coarse clock is %v ahead of the exact one, want at least the session (%v): the scenario did not happen", ahead, d)
	}
	for _, publish := range []func() error{
		func() error { _, err := b.Publish("t", 0, "y"); return err },
		func() error { _, err := b.PublishMessage("t", 0, Message{Payload: "y"}); return err },
	} {
		if err := publish(); err != nil {
			t.Fatal(err)
		}
		if got := membersOf(t, b, "t", "g"); len(got) != 1 {
			t.Fatalf("members %v after a publish %v after the Join (exact clock), session %v; want [a]",
				got, time.Duration(b.nowNanos()-exactBefore), d)
		}
	}
}
