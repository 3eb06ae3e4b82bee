package jetstream_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/f91dcac0/tributary/jetstream"
)

// One process (one Backend), two Members of "a": the old one's poll
// reserves a record just after the new one's Rejoin, and the reply of
// that reservation is lost (ErrUnavailable). The new incarnation's poll
// through the same Backend must deliver the record so that it can ack it
// (or leave it for its next poll), and never twice.
func TestHJSUnsureReservationOfOldIncarnation(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 1)
	pub(t, bt, 0, "x")
	old := member(t, bt, "g", "a")
	must(old.Join()).of(t)
	nu := member(t, bt, "g", "a")
	var step atomic.Int32
	var rejoinErr error
	jetstream.SetLossy(b, func(key string, written bool) bool {
		if !strings.HasPrefix(key, "cursor.t.g.") {
			return false
		}
		switch {
		case !written && step.CompareAndSwap(0, 1):
			_, rejoinErr = nu.Rejoin() // between old's group read and its cursor write
			return false
		case written && step.CompareAndSwap(1, 2):
			return true // the reservation took effect; its reply is lost
		}
		return false
	})
	_, err := old.TryPoll(nil, 1)
	jetstream.SetLossy(b, nil)
	if rejoinErr != nil || !errors.Is(err, jetstream.ErrUnavailable) {
		t.Fatalf("setup: Rejoin %v, old TryPoll %v", rejoinErr, err)
	}
	var got []rec
	for range 3 {
		rs := poll(t, nu, 1)
		got = append(got, rs...)
		for _, r := range rs {
			ok, err := nu.Ack(r.P, r.Off)
			if err != nil || !ok {
				t.Errorf("the current incarnation's Ack of %+v = %v, %v", r, ok, err)
			}
		}
	}
	if len(got) != 1 {
		t.Errorf("the current incarnation was delivered %v, want the record once", got)
	}
	d := must(b.Describe("t")).of(t).Groups[0].Partitions[0]
	if d.Committed != 1 || d.InFlight {
		t.Errorf("after: %+v", d)
	}
}
