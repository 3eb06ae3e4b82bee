package jetstream_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// A Seek forward whose retention pass has not run yet, then two Seeks back
// of the same cursor: the first stays within the retention owed, the
// second goes below it. Records 0 to 3 (capacity 4, replay window 2),
// groups g0 and g1 at 0; g1 seeks to 4, then A seeks g0 to 4: in the
// model's order the log start is then 4 − 2 = 2. A's retention pass is
// held at its raise of low. B seeks g0 back to 2 (in range: the retention
// owed is 2) and C seeks g0 back to 0, which must report
// ErrOffsetOutOfRange: the log start is 2 since A, whatever cursor B
// left. A Seek back that leaves the owed raise to A's pass lets C through
// (B's write lowers the least committed offset to 2, so C finds nothing
// owed), and A's pass, reading B's and C's cursors, never raises: the
// seek mix of the cluster's linearizability check, seed 338 of 4 clients
// × 30 calls. The hook holds A's third write of low (after its hold and
// release) until C has returned.
func TestSeekBackKeepsOwedRetention(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 4, ReplayWindow: 2})
	bt := topic(t, b, "t", 1)
	for range 4 {
		pub(t, bt, 0, "x")
	}
	for _, g := range []string{"g0", "g1"} {
		must(member(t, bt, g, "m").Join()).of(t)
	}
	ok, err := b.Seek("t", "g1", 0, 4)
	wantBool(t, "Seek g1 to 4", ok, err, true)
	var (
		lowWrites       atomic.Int32 // A's writes of low: hold, release, raise
		atRaise, goOn   = make(chan struct{}), make(chan struct{})
		aDone           = make(chan struct{})
		aOK             bool
		aErr            error
		armed, released atomic.Bool
	)
	armed.Store(true)
	jetstream.SetLossy(b, func(key string, written bool) bool {
		if !written && strings.HasPrefix(key, "low.t.") && armed.Load() && lowWrites.Add(1) == 3 {
			armed.Store(false)
			close(atRaise) // A's pass: cursors read (both at 4), low not yet raised
			<-goOn
			released.Store(true)
		}
		return false
	})
	go func() {
		defer close(aDone)
		aOK, aErr = b.Seek("t", "g0", 0, 4)
	}()
	<-atRaise
	bOK, bErr := b.Seek("t", "g0", 0, 2)
	cOK, cErr := b.Seek("t", "g0", 0, 0)
	close(goOn)
	<-aDone
	jetstream.SetLossy(b, nil)
	if !released.Load() {
		t.Fatal("hook: A's raise of low was not held")
	}
	if aErr != nil || !aOK || bErr != nil || !bOK {
		t.Fatalf("Seek A to 4 = %v, %v; Seek B to 2 = %v, %v; want both true", aOK, aErr, bOK, bErr)
	}
	if !errors.Is(cErr, engine.ErrOffsetOutOfRange) {
		t.Fatalf("Seek C to 0 = %v, %v after A to 4 (log start 2) and B to 2; want ErrOffsetOutOfRange", cOK, cErr)
	}
	d := must(b.Describe("t")).of(t)
	for _, g := range d.Groups {
		want := map[string]int64{"g0": 2, "g1": 4}[g.Group]
		if p := g.Partitions[0]; p.Committed != want {
			t.Fatalf("group %s: %+v; want committed %d", g.Group, p, want)
		}
	}
	if low := d.Partitions[0].LogStartOffset; low != 2 {
		t.Fatalf("log start %d after A to 4 and B to 2 (g1 at 4, window 2); want 2", low)
	}
}
