package engine

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/f91dcac0/tributary/shard"
)

// TestHotStateIsPadded checks the layout that keeps two partitions' hot
// state off each other's cache lines: the partition struct is whole padding
// units, and cursor slices grow in whole units.
func TestHotStateIsPadded(t *testing.T) {
	if sz := unsafe.Sizeof(partition{}); sz%shard.CacheLineSize != 0 {
		t.Errorf("unsafe.Sizeof(partition{}) = %d, want a multiple of %d", sz, shard.CacheLineSize)
	}
	var cs []cursor
	for i := 0; i < 3*cursorsPerLine; i++ {
		cs = appendCursor(cs, cursor{committed: int64(i)})
		if bytes := uintptr(cap(cs)) * unsafe.Sizeof(cursor{}); bytes%shard.CacheLineSize != 0 {
			t.Fatalf("after %d cursors: capacity %d cursors = %d bytes, want a multiple of %d", i+1, cap(cs), bytes, shard.CacheLineSize)
		}
		if cs[i].committed != int64(i) || len(cs) != i+1 {
			t.Fatalf("appendCursor lost data: len %d, cs[%d] = %+v", len(cs), i, cs[i])
		}
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
