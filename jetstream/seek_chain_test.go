package jetstream_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// Two Seeks of one cursor that one purge overtakes both leave the cursor
// where it was: A writes 0 over the committed 3, B then writes 1 over A's
// write (B's "previous" cursor is A's unfenced write), and a raise of the
// log start to 2 that read the cursors before A's write passes both. Each
// reports ErrOffsetOutOfRange, as if after the purge, so the cursor must
// stay at 3. It used to end at the log start 2 (an Ack lost: seen in the
// seek mix of the linearizability check as publishes answering full that
// the committed offset would have let evict): B, finding its previous
// cursor below the log start, moved the cursor there instead of putting
// A's write back for A to undo. Both orders of the two undoing rounds:
// B's before A's, and A's (which then waits for B) before B's.
func TestSeeksOvertakenTogether(t *testing.T) {
	for _, bFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "replacer undoes first", false: "replaced undoes first"}[bFirst], func(t *testing.T) {
			b, _ := start(t, jetstream.Config{Capacity: 10, ReplayWindow: 4})
			bt := topic(t, b, "t", 1)
			for range 5 {
				pub(t, bt, 0, "x")
			}
			m := member(t, bt, "g", "m")
			must(m.Join()).of(t)
			for off := range int64(3) {
				poll(t, m, 1)
				ok, err := m.Ack(0, off)
				wantBool(t, "Ack", ok, err, true)
			}
			var phase atomic.Int32
			aWrote, bUndid := make(chan struct{}), make(chan struct{})
			var bOK atomic.Bool
			var bErr atomic.Value
			jetstream.SetLossy(b, func(key string, written bool) bool {
				if !written || key != "cursor.t.g.0" {
					return false
				}
				switch phase.Add(1) {
				case 1: // A's write (0) landed, its fence not yet sent
					go func() {
						ok, err := b.Seek("t", "g", 0, 1)
						bOK.Store(ok)
						bErr.Store([]error{err})
					}()
					if bFirst {
						<-bUndid
					} else {
						<-aWrote
					}
				case 2: // B's write (1) over A's: a purge that read 3 passes both
					if err := jetstream.RaiseLowWithoutPurge(b, "t", 0, 2); err != nil {
						t.Error(err)
					}
					close(aWrote)
					if !bFirst {
						time.Sleep(100 * time.Millisecond) // A's undoing round first
					}
				case 3: // B's undoing write
					if bFirst {
						close(bUndid)
					}
				}
				return false
			})
			aOK, aErr := b.Seek("t", "g", 0, 0)
			for bErr.Load() == nil {
				time.Sleep(time.Millisecond)
			}
			jetstream.SetLossy(b, nil)
			if e := bErr.Load().([]error)[0]; aOK || bOK.Load() || !errors.Is(aErr, engine.ErrOffsetOutOfRange) || !errors.Is(e, engine.ErrOffsetOutOfRange) {
				t.Fatalf("Seek A to 0 = %v, %v; Seek B to 1 = %v, %v; want both false, offset out of range", aOK, aErr, bOK.Load(), e)
			}
			p := must(b.Describe("t")).of(t).Groups[0].Partitions[0]
			if p.Committed != 3 {
				t.Fatalf("after both Seeks: %+v, want committed 3 (where it was)", p)
			}
			wantRecs(t, poll(t, m, 1), rec{0, 3, "x", 1})
		})
	}
}
