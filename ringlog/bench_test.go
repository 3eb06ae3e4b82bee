package ringlog_test

import (
	"testing"

	"github.com/f91dcac0/tributary/ringlog"
)

// BenchmarkPagedAppendTrim: a paged log held between one and two pages
// long, appended to one entry at a time and trimmed by a page at a time:
// the engine's steady state on a partition of capacity above PageLen.
// Page installs (from the spare) and trims that give up a page are in
// the loop; no directory growth.
func BenchmarkPagedAppendTrim(b *testing.B) {
	b.ReportAllocs()
	l := ringlog.New[int64](4 * ringlog.PageLen)
	for b.Loop() {
		off, ok := l.Append(1)
		if !ok {
			b.Fatal("full")
		}
		if l.Len() >= 2*ringlog.PageLen {
			l.TrimTo(off - ringlog.PageLen + 1)
		}
	}
}

// BenchmarkPagedGrow: a paged log filled from empty to 64 pages, its
// directory doubling from 2 to 64 slots on the way, per op.
func BenchmarkPagedGrow(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		l := ringlog.New[int64](64 * ringlog.PageLen)
		for range 64 * ringlog.PageLen {
			l.Append(1)
		}
	}
}
