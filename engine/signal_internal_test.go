package engine

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSignalWaitNotify: wait creates one channel that every waiter shares,
// notify closes it and forgets it, the next wait makes a new one, and
// notify with nobody waiting does nothing (no channel is made, no second
// close panics).
func TestSignalWaitNotify(t *testing.T) {
	var s signal
	s.notify() // nobody waits
	if s.ch.Load() != nil {
		t.Fatal("notify with no waiter made a channel")
	}
	c1, c2 := s.wait(), s.wait()
	if c1 != c2 {
		t.Fatal("two waits before a notify return different channels")
	}
	if isClosed(c1) {
		t.Fatal("fresh channel is closed")
	}
	s.notify()
	if !isClosed(c1) {
		t.Fatal("notify left the channel open")
	}
	if s.ch.Load() != nil {
		t.Fatal("notify kept the closed channel")
	}
	s.notify() // must not close c1 again
	c3 := s.wait()
	if c3 == c1 || isClosed(c3) {
		t.Fatal("wait after notify did not return a new open channel")
	}
}

// TestSignalNotifyAllocatesNothing: notify with nobody waiting, and wait on
// an existing channel, allocate nothing.
func TestSignalNotifyAllocatesNothing(t *testing.T) {
	var s signal
	if a := testing.AllocsPerRun(1000, s.notify); a != 0 {
		t.Fatalf("notify without waiter: %v allocations", a)
	}
	s.wait()
	if a := testing.AllocsPerRun(1000, func() { s.wait() }); a != 0 {
		t.Fatalf("wait on an existing channel: %v allocations", a)
	}
}

// TestSignalNoLostWakeup: waiters follow "wait, check, block" while
// notifiers follow "change, notify"; no waiter may block past the last
// change. Run with -race.
func TestSignalNoLostWakeup(t *testing.T) {
	const (
		waiters   = 8
		notifiers = 4
		limit     = 5 * time.Second
	)
	changes := 20000
	if testing.Short() {
		changes = 2000
	}
	var (
		s     signal
		state atomic.Int64
		wg    sync.WaitGroup
	)
	for range notifiers {
		wg.Go(func() {
			for range changes / notifiers {
				state.Add(1)
				s.notify()
			}
		})
	}
	for w := range waiters {
		wg.Go(func() {
			wakes := 0
			for {
				ch := s.wait()
				if state.Load() == int64(changes) {
					return
				}
				select {
				case <-ch:
					wakes++
				case <-time.After(limit):
					t.Errorf("waiter %d: blocked %v at state %d of %d after %d wake-ups: lost wake-up", w, limit, state.Load(), changes, wakes)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestTrimNotifiesOnlyWhenItRemoves: trimLocked closes Room exactly when
// the log start moves.
func TestTrimNotifiesOnlyWhenItRemoves(t *testing.T) {
	b, err := New(4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create("t", 1); err != nil {
		t.Fatal(err)
	}
	tp := b.topics.Load("t")
	part := tp.parts[0]
	for range 3 {
		if off, err := b.Publish("t", 0, "r"); err != nil || off < 0 {
			t.Fatal(off, err)
		}
	}
	part.mu.Lock()
	defer part.mu.Unlock()
	room := part.room.wait()
	part.low = noLow // no group: nothing to remove
	tp.trimLocked(part)
	if isClosed(room) {
		t.Fatal("trim without a group closed Room")
	}
	part.low = 0 // nothing fully committed
	tp.trimLocked(part)
	if isClosed(room) {
		t.Fatal("trim that removed nothing closed Room")
	}
	part.low = 2
	tp.trimLocked(part)
	if !isClosed(room) {
		t.Fatal("trim that removed two records left Room open")
	}
	if got := part.log.StartOffset(); got != 2 {
		t.Fatalf("log start %d after trim to 2", got)
	}
}

// TestDeleteGroupMarksGroupDeleted: DeleteGroup sets deleted, which a
// MemberHandle reads to drop its cached group, and a re-created group is a
// new one.
func TestDeleteGroupMarksGroupDeleted(t *testing.T) {
	b, err := New(4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create("t", 1); err != nil {
		t.Fatal(err)
	}
	th, err := b.Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	m, err := th.Member("g", "m")
	if err != nil {
		t.Fatal(err)
	}
	if m.live() != nil {
		t.Fatal("live group before any exists")
	}
	if _, err := b.CreateGroup("t", "g", RoundRobin); err != nil {
		t.Fatal(err)
	}
	g1 := m.live()
	if g1 == nil || g1.deleted.Load() {
		t.Fatal("no live group after CreateGroup")
	}
	if ok, err := b.DeleteGroup("t", "g"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if !g1.deleted.Load() {
		t.Fatal("DeleteGroup did not mark the group deleted")
	}
	if m.live() != nil {
		t.Fatal("handle still sees the deleted group")
	}
	if _, err := m.Join(); err != nil {
		t.Fatal(err)
	}
	if g2 := m.live(); g2 == nil || g2 == g1 {
		t.Fatal("handle does not see the re-created group")
	}
}

// isClosed reports whether ch is closed, without blocking.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
