package jetstream_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// A rebalance commits at its group write and migrates the moved
// partitions' cursors after it; an Ack by the poll's write (settle's fast
// path) reads no group, so between the commit and the migration of its
// partition the old owner's Ack of a delivery there would succeed. A
// Describe that shows the partition moved writes the migration first
// (helping, as a Poll of the new owner does), so the old owner's Ack after
// it fails its compare-and-set, reads the group and is refused: no order
// of the calls would explain that Describe followed by a successful Ack.
// Two ways into the window: inside a Join (its migration write of
// partition 1 paused while Describe and the Ack run), and after a Join
// whose migration writes were lost (it returned ErrUnavailable; its
// process may as well have died there).
func TestStaleOwnerFastAckAfterCommit(t *testing.T) {
	for _, failed := range []bool{false, true} {
		name := "inside-join"
		if failed {
			name = "after-failed-join"
		}
		t.Run(name, func(t *testing.T) {
			b, ma, mb := aHoldsBoth(t)
			var (
				fired    atomic.Bool
				shown    engine.GroupPartition // partition 1 as a Describe showed it before a's Ack
				ackOK    bool
				ackErr   error
				describe = func() {
					d := must(b.Describe("t")).of(t)
					shown = d.Groups[0].Partitions[1]
				}
			)
			jetstream.SetLossy(b, func(key string, written bool) bool {
				if written || key != "cursor.t.g.1" {
					return false
				}
				if failed {
					return true // the migration write is not sent: lost
				}
				if fired.CompareAndSwap(false, true) {
					describe()
					ackOK, ackErr = ma.Ack(1, 0)
				}
				return false
			})
			_, joinErr := mb.Join()
			jetstream.SetLossy(b, nil)
			if failed {
				if !errors.Is(joinErr, tributary.ErrUnavailable) {
					t.Fatalf("b's Join with its migration writes lost = %v, want ErrUnavailable", joinErr)
				}
				describe()
				ackOK, ackErr = ma.Ack(1, 0)
			} else if joinErr != nil || !fired.Load() {
				t.Fatalf("b's Join = %v, hook fired %v", joinErr, fired.Load())
			}
			if shown.Owner != "b" || shown.InFlight {
				t.Fatalf("set-up: Describe showed partition 1 as %+v, want owner b, nothing in flight", shown)
			}
			if ackOK || ackErr != nil {
				t.Fatalf("a's Ack of (1, 0) after a Describe showed partition 1 owned by b, nothing in flight = %v, %v; want false", ackOK, ackErr)
			}
		})
	}
}

// RemoveMember is a rebalance too: after one whose migration write was
// lost (it returned ErrUnavailable, the member removed), a Describe shows
// the member gone and its partition owned by nobody, having written the
// migration, so the removed member's Ack of its delivery there is
// refused.
func TestRemovedMemberFastAck(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 10})
	bt := topic(t, b, "t", 1)
	pub(t, bt, 0, "x")
	m := member(t, bt, "g", "a")
	must(m.Join()).of(t)
	if got := poll(t, m, 1); len(got) != 1 {
		t.Fatalf("poll = %v, want record 0", got)
	}
	jetstream.SetLossy(b, func(key string, written bool) bool {
		return !written && key == "cursor.t.g.0"
	})
	_, err := b.RemoveMember("t", "g", "a")
	jetstream.SetLossy(b, nil)
	if !errors.Is(err, tributary.ErrUnavailable) {
		t.Fatalf("RemoveMember with its migration write lost = %v, want ErrUnavailable", err)
	}
	d := must(b.Describe("t")).of(t)
	if g := d.Groups[0]; len(g.Members) != 0 || g.Partitions[0].Owner != "" || g.Partitions[0].InFlight {
		t.Fatalf("set-up: Describe after RemoveMember = %+v, want no member, partition 0 unowned, nothing in flight", g)
	}
	if ok, err := m.Ack(0, 0); ok {
		t.Fatalf("the removed member's Ack of (0, 0) after a Describe showed it gone = true, %v; want false or ErrFenced", err)
	}
}

// The old owner's own view: a Member that reads its assignment (or polls)
// and finds a partition moved forgets its reservation there, so its Ack of
// that delivery reads the group and is refused, although the rebalance's
// migration write is paused (inside b's Join) and nothing else helped.
func TestStaleOwnerAckAfterItsAssignment(t *testing.T) {
	b, ma, mb := aHoldsBoth(t)
	var (
		fired  atomic.Bool
		seen   []int32
		ackOK  bool
		ackErr error
	)
	jetstream.SetLossy(b, func(key string, written bool) bool {
		if !written && key == "cursor.t.g.1" && fired.CompareAndSwap(false, true) {
			seen = ma.Assignment()
			ackOK, ackErr = ma.Ack(1, 0)
		}
		return false
	})
	_, joinErr := mb.Join()
	jetstream.SetLossy(b, nil)
	if joinErr != nil || !fired.Load() {
		t.Fatalf("b's Join = %v, hook fired %v", joinErr, fired.Load())
	}
	if len(seen) != 1 || seen[0] != 0 {
		t.Fatalf("set-up: a's Assignment inside b's Join = %v, want [0]", seen)
	}
	if ackOK {
		t.Fatalf("a's Ack of (1, 0) after its Assignment showed partition 1 moved = true, %v; want false", ackErr)
	}
}

// The new owner's view: after a Join whose migration writes were lost
// (ErrUnavailable), b's Assignment shows partition 1 as b's, having
// written the migration it found pending (helping), so a's Ack of its
// delivery there is refused; with snapshot reads and key by key.
func TestStaleOwnerFastAckAfterAssignment(t *testing.T) {
	for _, snapshots := range []bool{true, false} {
		t.Run(fmt.Sprintf("snapshots=%v", snapshots), func(t *testing.T) {
			b, ma, mb := aHoldsBoth(t)
			jetstream.SetSnapshots(b, snapshots)
			jetstream.SetLossy(b, func(key string, written bool) bool {
				return !written && (key == "cursor.t.g.0" || key == "cursor.t.g.1")
			})
			_, err := mb.Join()
			jetstream.SetLossy(b, nil)
			if !errors.Is(err, tributary.ErrUnavailable) {
				t.Fatalf("b's Join with its migration writes lost = %v, want ErrUnavailable", err)
			}
			asg := mb.Assignment()
			if len(asg) != 1 || asg[0] != 1 {
				t.Fatalf("set-up: b's Assignment = %v, want [1]", asg)
			}
			if ok, err := ma.Ack(1, 0); ok || err != nil {
				t.Fatalf("a's Ack of (1, 0) after b's Assignment showed [1] = %v, %v; want false", ok, err)
			}
		})
	}
}

// aHoldsBoth starts a backend with topic t of 2 partitions, one record on
// each, member a of group g owning both and holding both records in
// flight (polled by its poll's write), and member b of g not joined yet.
func aHoldsBoth(t *testing.T) (*jetstream.Backend, tributary.BackendMember, tributary.BackendMember) {
	t.Helper()
	b, _ := start(t, jetstream.Config{Capacity: 10})
	bt := topic(t, b, "t", 2)
	pub(t, bt, 0, "x")
	pub(t, bt, 1, "y")
	ma, mb := member(t, bt, "g", "a"), member(t, bt, "g", "b")
	must(ma.Join()).of(t)
	if got := poll(t, ma, 2); len(got) != 2 {
		t.Fatalf("a's poll = %v, want records of partitions 0 and 1", got)
	}
	return b, ma, mb
}
