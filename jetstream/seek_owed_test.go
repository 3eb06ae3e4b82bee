package jetstream_test

import (
	"errors"
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
