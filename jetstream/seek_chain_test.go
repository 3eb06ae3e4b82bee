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

// Two Seeks of one cursor and an evicting publish whose retention pass
// read the cursors before both (committed 3, so record 0 looks fully
// committed): A writes 0 over the committed 3 and, while A still holds
// the log start, B is called (to 1) and the pass's raise is let go. The
// raise waits for A's hold, and B for it too (one Seek holds a partition
// at a time), so both Seeks report true, the cursor ends at B's 1, and
// the publish, deciding on the cursors as the Seeks left them, either
// evicts record 0 (after B: log start 1) or finds the partition full
// (between A and B: log start 0). With Seeks that write first and fence
// on the log start after, the raise to 1 passes A's write and A reports
// ErrOffsetOutOfRange although B's Seek, made over A's write, stands.
func TestSeeksHeldTogether(t *testing.T) {
	b, bt, m := fullPastWindow(t)
	var (
		phase            atomic.Int32 // of the Seeks' cursor writes
		raising          atomic.Bool
		atRaise, goRaise = make(chan struct{}), make(chan struct{})
		pubDone, bDone   = make(chan struct{}), make(chan struct{})
		pubErr, bErr     error
		bOK              bool
	)
	jetstream.SetLossy(b, func(key string, written bool) bool {
		switch {
		case !written && strings.HasPrefix(key, "low.t.") && raising.CompareAndSwap(false, true):
			close(atRaise) // the publish's pass: cursors read, low not yet raised
			<-goRaise
		case written && key == "cursor.t.g.0" && phase.Add(1) == 1: // A's write (0) landed
			go func() {
				defer close(bDone)
				bOK, bErr = b.Seek("t", "g", 0, 1)
			}()
			close(goRaise)
			select { // the raise passes A's write, unless it waits for A
			case <-pubDone:
			case <-time.After(500 * time.Millisecond):
			}
		}
		return false
	})
	go func() {
		defer close(pubDone)
		_, pubErr = bt.TryPublish(0, engine.Message{Payload: "y"})
	}()
	<-atRaise
	aOK, aErr := b.Seek("t", "g", 0, 0)
	<-bDone
	<-pubDone
	jetstream.SetLossy(b, nil)
	if aErr != nil || !aOK || bErr != nil || !bOK {
		t.Fatalf("Seek A to 0 = %v, %v; Seek B to 1 = %v, %v; want both true", aOK, aErr, bOK, bErr)
	}
	wantLow := int64(1) // the publish after B evicted record 0
	if errors.Is(pubErr, tributary.ErrPartitionFull) {
		wantLow = 0 // the publish between A and B: nothing fully committed
	} else if pubErr != nil {
		t.Fatalf("publish = %v, want it to evict record 0 or find the partition full", pubErr)
	}
	d := must(b.Describe("t")).of(t)
	if p := d.Groups[0].Partitions[0]; p.Committed != 1 || p.InFlight || d.Partitions[0].LogStartOffset != wantLow {
		t.Fatalf("after both Seeks and the publish (%v): %+v, log start %d; want committed 1 (B's), log start %d", pubErr, p, d.Partitions[0].LogStartOffset, wantLow)
	}
	wantRecs(t, poll(t, m, 1), rec{0, 1, "x", 1})
}
