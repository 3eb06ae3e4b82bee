package jetstream_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// Two Seeks of one cursor and an evicting publish whose retention pass
// read the cursors before both (committed 3, so record 0 looks fully
// committed) hold off that pass until both have written: A writes 0 over
// the committed 3, B writes 1 over A's write, and only then does the
// pass's raise of the log start go ahead, on the cursors as the Seeks left
// them. Both Seeks report true and the cursor ends at B's 1 (the order A,
// B, publish: the publish evicts record 0, which B's cursor has passed).
// With Seeks that write first and fence on the log start after, the pass
// raises low to 1 past A's write and A reports ErrOffsetOutOfRange
// although B's Seek, made over A's write, stands. Two shapes: A's hook
// waits for B's Seek to return, or lets A go on while B writes.
func TestSeeksHeldTogether(t *testing.T) {
	for _, bFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "A waits for B", false: "A goes on during B"}[bFirst], func(t *testing.T) {
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
				case written && key == "cursor.t.g.0":
					switch phase.Add(1) {
					case 1: // A's write (0) landed
						go func() {
							defer close(bDone)
							bOK, bErr = b.Seek("t", "g", 0, 1)
						}()
						if bFirst {
							<-bDone
						} else {
							time.Sleep(100 * time.Millisecond) // B's write, under its hold
						}
					case 2: // B's write (1) over A's: the raise may go now
						close(goRaise)
						select { // it passes both writes, unless it waits for them
						case <-pubDone:
						case <-time.After(500 * time.Millisecond):
						}
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
			if pubErr != nil {
				t.Fatalf("publish = %v, want it to evict record 0 (B's cursor at 1)", pubErr)
			}
			d := must(b.Describe("t")).of(t)
			if p := d.Groups[0].Partitions[0]; p.Committed != 1 || p.InFlight || d.Partitions[0].LogStartOffset != 1 {
				t.Fatalf("after both Seeks and the publish: %+v, log start %d; want committed 1 (B's), log start 1", p, d.Partitions[0].LogStartOffset)
			}
			wantRecs(t, poll(t, m, 1), rec{0, 1, "x", 1})
		})
	}
}
