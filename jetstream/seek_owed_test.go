package jetstream_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// A Seek back lowers the least committed offset M, and the log start an
// Ack owes, max(low, M − w), is applied by no Ack: unless the Seek makes
// the log start owed before its write durable (raises low to it), its
// write moves the owed log start back, and the records below it, which
// the engine removed at the Acks, come back. Here groups a and b have
// committed 5 with a replay window of 2 (log start 3, low still 0); a
// seeks back to 3. The log start must stay 3: Describe shows it, a Seek
// of b to 1 is refused with ErrOffsetOutOfRange, a new group starts at 3,
// Snapshot holds no record below 3.
func TestSeekBackKeepsOwedLogStart(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 10, ReplayWindow: 2})
	bt := topic(t, b, "t", 1)
	for range 6 {
		pub(t, bt, 0, "x")
	}
	ma, mb := member(t, bt, "a", "m"), member(t, bt, "b", "m")
	must(ma.Join()).of(t)
	must(mb.Join()).of(t)
	for off := range int64(5) {
		poll(t, ma, 1)
		ok, err := ma.Ack(0, off)
		wantBool(t, "a's Ack", ok, err, true)
		poll(t, mb, 1)
		ok, err = mb.Ack(0, off)
		wantBool(t, "b's Ack", ok, err, true)
	}
	if s := must(b.Describe("t")).of(t).Partitions[0].LogStartOffset; s != 3 {
		t.Fatalf("set-up: log start %d, want 3 (committed 5, window 2)", s)
	}
	ok, err := b.Seek("t", "a", 0, 3)
	wantBool(t, "Seek of a to 3", ok, err, true)
	if s := must(b.Describe("t")).of(t).Partitions[0].LogStartOffset; s != 3 {
		t.Fatalf("after a's Seek back to 3: Describe shows log start %d, want 3 (records below it were removed)", s)
	}
	snap := must(b.Snapshot("t")).of(t)
	if rs := snap.Records[0]; len(rs) == 0 || rs[0].Offset != 3 {
		t.Fatalf("after a's Seek back to 3: Snapshot's records start at %v, want offset 3", recs(rs))
	}
	if ok, err := b.Seek("t", "b", 0, 1); !errors.Is(err, engine.ErrOffsetOutOfRange) {
		t.Fatalf("Seek of b to 1, below the log start 3 = %v, %v; want ErrOffsetOutOfRange", ok, err)
	}
	mc := member(t, bt, "c", "m")
	must(mc.Join()).of(t)
	wantRecs(t, poll(t, mc, 1), rec{0, 3, "x", 1})
}

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
