package jetstream_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// A retention pass that reads low and the cursors in one snapshot, finds
// an eviction's publish not landed yet and waits for it, reads low again:
// the cursors it then decides on are the snapshot's, older than that low.
// A Seek back that holds, writes and releases in the wait is then passed
// by the raise (its revision is the one after the release), which evicts
// a record the sought cursor needs. Here publish A evicts record 0 (low 1,
// its publish to come) and stops; a Seek to 1 on a second process waits
// for A's publish until fallbackWait and then writes; publish B's pass
// reads its snapshot (committed 3) before the Seek's write and low again
// after A's publish lands. In every order the Seek's true allows (A, Seek,
// B) B finds the partition full, the log start stays 1 and the cursor 1;
// a pass that decides on the snapshot's cursors evicts record 1 and
// publishes B (the seek mix of the linearizability check, about 1 history
// in 700 under load). The hooks stop A after its raise and let it go once
// the Seek has returned.
func TestSeekNotPassedBySnapshotPass(t *testing.T) {
	cfg := jetstream.Config{Capacity: 5, ReplayWindow: 4}
	b, srv, bt, m := fullPastWindowOn(t, cfg)
	cfg.Server = srv
	b2, err := jetstream.Open(cfg) // the Seek's process: its own view of landed publishes
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	var (
		raised         atomic.Bool
		atRaise, goPub = make(chan struct{}), make(chan struct{})
		aDone, bDone   = make(chan struct{}), make(chan struct{})
		aErr, bErr     error
		bOff           int64
	)
	jetstream.SetLossy(b, func(key string, written bool) bool {
		if written && strings.HasPrefix(key, "low.t.") && raised.CompareAndSwap(false, true) {
			close(atRaise) // A's eviction: low 1, record 0 not purged, A's publish to come
			<-goPub
		}
		return false
	})
	go func() {
		defer close(aDone)
		_, aErr = bt.TryPublish(0, engine.Message{Payload: "a"})
	}()
	<-atRaise
	type seekRes struct {
		ok  bool
		err error
	}
	seek := make(chan seekRes, 1)
	go func() {
		ok, err := b2.Seek("t", "g", 0, 1) // waits fallbackWait for A's publish, then writes
		seek <- seekRes{ok, err}
	}()
	time.Sleep(time.Second) // B's snapshot before the Seek's write, its wait past it
	go func() {
		defer close(bDone)
		bOff, bErr = bt.TryPublish(0, engine.Message{Payload: "b"})
	}()
	s := <-seek
	close(goPub) // A publishes: B's pass reads low again
	<-aDone
	<-bDone
	jetstream.SetLossy(b, nil)
	if s.err != nil || !s.ok {
		t.Fatalf("Seek to 1 = %v, %v; want true", s.ok, s.err)
	}
	if aErr != nil {
		t.Fatalf("publish A = %v; want it to evict record 0", aErr)
	}
	if !errors.Is(bErr, tributary.ErrPartitionFull) {
		t.Fatalf("publish B = %d, %v; want partition full (the cursor at 1 after the Seek: nothing fully committed)", bOff, bErr)
	}
	d := must(b.Describe("t")).of(t)
	if p := d.Groups[0].Partitions[0]; p.Committed != 1 || p.InFlight || d.Partitions[0].LogStartOffset != 1 {
		t.Fatalf("after A, the Seek and B: %+v, log start %d; want committed 1, log start 1", p, d.Partitions[0].LogStartOffset)
	}
	wantRecs(t, poll(t, m, 1), rec{0, 1, "x", 1})
}
