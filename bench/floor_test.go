package bench_test

import (
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// BenchmarkRoundTripFloor measures, in one run, the parts a round trip
// through the engine's handles cannot avoid on the current design, next to
// the bare channel it is compared with (issue: the handle path at 1.5× a
// channel send + receive). One publish → poll(1) → ack of a one-group topic
// takes four uncontended mutex pairs (the partition lock in Publish, the
// cursor lock in Poll, the cursor lock and then the partition lock in Ack,
// whose sole cursor is always the partition's least, so it applies
// retention) and one monotonic clock read (the record's time when the
// message has none). Sub-benchmarks, each in ns per round trip:
//
//   - chan: a buffered channel send + receive of one engine.Record, the
//     same loop as RoundTrip/handles/chan-raw;
//   - mutex-pair: one sync.Mutex Lock + Unlock;
//   - clock: one monotonic clock read (time.Since of a monotonic time);
//   - floor: four mutex pairs and one clock read, nothing else.
//
// floor ÷ chan is the lowest ratio the handle path can reach without
// removing a lock or the clock read; docs/performance.md gives the figures.
func BenchmarkRoundTripFloor(b *testing.B) {
	b.Run("chan", func(b *testing.B) {
		ch := make(chan engine.Record, 1)
		var r engine.Record
		for b.Loop() {
			ch <- r
			r = <-ch
			r.Offset++
		}
		if r.Offset != int64(b.N) {
			b.Fatalf("received %d records, want %d", r.Offset, b.N)
		}
	})
	var mus [4]paddedMutex
	b.Run("mutex-pair", func(b *testing.B) {
		n := 0
		for b.Loop() {
			mus[0].Lock()
			n++
			mus[0].Unlock()
		}
		if n != b.N {
			b.Fatalf("%d iterations, want %d", n, b.N)
		}
	})
	start := time.Now()
	b.Run("clock", func(b *testing.B) {
		var last time.Duration
		for b.Loop() {
			d := time.Since(start)
			if d < last {
				b.Fatalf("monotonic clock went back: %v after %v", d, last)
			}
			last = d
		}
	})
	b.Run("floor", func(b *testing.B) {
		var last time.Duration
		for b.Loop() {
			mus[0].Lock() // Publish: partition lock
			d := time.Since(start)
			mus[0].Unlock()
			mus[1].Lock() // Poll: cursor lock
			mus[1].Unlock()
			mus[1].Lock() // Ack: cursor lock, then partition lock
			mus[0].Lock()
			mus[0].Unlock()
			mus[1].Unlock()
			if d < last {
				b.Fatalf("monotonic clock went back: %v after %v", d, last)
			}
			last = d
		}
	})
}

// paddedMutex keeps each mutex on its own 128-byte unit, as the engine
// keeps its partition and cursor locks.
type paddedMutex struct {
	sync.Mutex
	_ [128 - 8]byte
}
