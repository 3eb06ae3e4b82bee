package engine

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/f91dcac0/tributary/shard"
)

// TestHotStateIsPadded checks the layout that keeps hot state of different
// cores off each other's cache lines: a partition is whole cache lines,
// with its log end offset (read by every poll) on a line of its own, apart
// from the partition lock (taken by every publish); and a cursor (one
// group's lock and position on one partition) is whole cache lines.
func TestHotStateIsPadded(t *testing.T) {
	const line = shard.CacheLineSize
	var p partition
	if sz := unsafe.Sizeof(p); sz%line != 0 {
		t.Errorf("unsafe.Sizeof(partition{}) = %d, want a multiple of %d", sz, line)
	}
	if off := unsafe.Offsetof(p.end); off%line != 0 || unsafe.Sizeof(p)-off != line {
		t.Errorf("partition.end at offset %d of %d bytes, want the start of the last %d-byte line", off, unsafe.Sizeof(p), line)
	}
	if unsafe.Offsetof(p.mu)/line == unsafe.Offsetof(p.end)/line {
		t.Error("partition.mu and partition.end share a cache line")
	}
	if sz := unsafe.Sizeof(cursor{}); sz%line != 0 {
		t.Errorf("unsafe.Sizeof(cursor{}) = %d, want a multiple of %d", sz, line)
	}
	// The package doc's memory figure: 256 bytes per partition, one
	// padding unit of state and one for the log end.
	if sz := unsafe.Sizeof(p); sz != 2*line {
		t.Errorf("unsafe.Sizeof(partition{}) = %d, want %d (package doc: memory per topic)", sz, 2*line)
	}
}

// packedPartition is partitionState without the padding, for the benchmark.
type packedPartition struct{ partitionState }

// BenchmarkPartitionPadding measures what the padding buys: goroutines
// each publish to their own partition of one topic-like array, padded
// (the engine's layout) versus packed back to back.
func BenchmarkPartitionPadding(b *testing.B) {
	b.Run("padded", func(b *testing.B) {
		parts := make([]partition, 64)
		benchOwnPartition(b, func(i int) *partitionState { return &parts[i].partitionState })
	})
	b.Run("packed", func(b *testing.B) {
		parts := make([]packedPartition, 64)
		benchOwnPartition(b, func(i int) *partitionState { return &parts[i].partitionState })
	})
}

func benchOwnPartition(b *testing.B, part func(int) *partitionState) {
	for i := 0; i < 64; i++ {
		part(i).log.Init(8)
	}
	var next sync.Mutex
	n := 0
	b.RunParallel(func(pb *testing.PB) {
		next.Lock()
		p := part(n % 64)
		n++
		next.Unlock()
		for pb.Next() {
			p.mu.Lock()
			p.log.Append(entry{})
			p.log.TrimTo(p.log.EndOffset())
			p.mu.Unlock()
		}
	})
}

// TestRecordSlotSize checks that a header-less record's ring slot is at
// most 32 bytes (the payload's string header, the append time, and a nil
// pointer to the rarely used key, headers and time): bench's
// BenchmarkMemory measures what a record costs beyond it.
func TestRecordSlotSize(t *testing.T) {
	if sz := unsafe.Sizeof(entry{}); sz > 32 {
		t.Errorf("unsafe.Sizeof(entry{}) = %d bytes, want at most 32", sz)
	}
}
