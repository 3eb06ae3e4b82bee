// Package ringlog is a bounded partition log: entries addressed by offset,
// held in memory that follows the number of entries retained.
//
// A Log holds the retained entries of one partition, from its log start
// offset (the oldest retained entry) up to, but not including, its log end
// offset (the offset the next Append gets). Offsets start at 0 and grow by one
// per append; they are never reused. Trimming removes a prefix and advances the
// log start offset; appending fails, without using up an offset, while the log
// holds Cap entries.
//
// # Memory
//
// A log of capacity up to PageLen (1,024) entries is one ring of the
// smallest power of two of entries that holds Cap, allocated by Init: the
// entry at offset off sits in slot off mod that length. A larger log keeps
// its entries in pages of PageLen entries, allocated as appends reach them
// and given up as trims pass them, under a directory: a ring of page
// pointers, a power of two long, indexed by page number (off / PageLen),
// which doubles when the pages in use outgrow it. So its memory is the
// retained entries rounded up to whole pages, one spare page (a trimmed
// page kept, zeroed, for the next one needed, so that a log whose length
// holds steady allocates nothing), and the directory, one pointer per page
// of the most ever retained: an empty log of capacity 16,777,216 holds no
// page.
//
// # Concurrency
//
// A Log does no locking: it is not safe for concurrent use, with one
// exception, Read. The engine guards each partition's Log with that
// partition's mutex. Append, At, Read and TrimTo allocate nothing, except
// that an Append that starts a page allocates one when no spare is kept,
// and one that outgrows the directory allocates a new directory.
//
// Read reads an entry without the writer's lock. A ring is written by
// Init alone, before the log is shared; Read reads its slot, which the
// writer does not write while the entry stays retained (the slot is reused
// only by the append at off + the ring's length, which needs off trimmed
// first). For a paged log Read loads the directory atomically and then
// reads the directory slot of the entry's page and the entry; the writer
// writes neither while the entry stays retained: a page is installed in a
// slot no retained page uses (the pages in use are no more than the
// directory's slots, and each has its own slot), a page's slot is cleared
// only once every entry of the page is trimmed, and a grown directory is a
// new one, filled before it is published and never written after it is
// replaced. The caller provides the rest (see Read).
package ringlog

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// PageLen is the number of entries in one page of a log whose capacity
// exceeds it; a log of at most PageLen entries is a single ring.
const PageLen = 1 << pageShift

const pageShift = 10

// Log is a bounded FIFO of entries of type T addressed by int64 offsets.
// The zero Log has capacity 0 and accepts no entries; use New or Init.
type Log[T any] struct {
	// hooks are the seams of the package's deliberate faults (faults.go):
	// empty, and calls to them compiled away, in a normal build.
	hooks hooks[T]
	// ring is the whole log of a capacity up to PageLen, a power of two
	// long: the entry at off is ring[off & (len(ring) - 1)]. Written by
	// Init only; nil for a paged log.
	ring []T
	// dir holds a paged log's pages: the page of offset off is
	// dir.pages[(off / PageLen) & (len(dir.pages) - 1)]. Replaced, never
	// modified once replaced, when it grows; Read loads it atomically.
	dir      atomic.Pointer[directory[T]]
	capacity int         // the most entries retained at once
	start    int64       // log start offset: offset of the oldest retained entry
	end      int64       // log end offset: the offset the next Append gets
	spare    *[PageLen]T // paged: a zeroed page for the next page needed; nil when none
}

// directory is a ring of page pointers, a power of two long. Pages not in
// use are nil.
type directory[T any] struct {
	pages []*[PageLen]T
}

// New returns an empty log that retains at most capacity entries, starting at
// offset 0. capacity must be at least 1; New panics otherwise (a caller bug,
// since the engine validates capacities before building logs).
func New[T any](capacity int) *Log[T] {
	l := new(Log[T])
	l.Init(capacity)
	return l
}

// Init resets l to an empty log of the given capacity starting at offset 0,
// for logs embedded by value. It panics if capacity < 1. A capacity up to
// PageLen gets its ring now; a larger one no page until the first Append.
// l must not be in use by a reader meanwhile.
//
// A ring is allocated in whole units of padUnit bytes, so that the rings
// of two logs (two partitions written by different cores) never share a
// cache line; a page is 32 KiB of 32-byte entries, whole units already.
func (l *Log[T]) Init(capacity int) {
	if capacity < 1 {
		panic("ringlog: capacity must be at least 1")
	}
	*l = Log[T]{capacity: capacity}
	if capacity > PageLen {
		l.dir.Store(&directory[T]{pages: make([]*[PageLen]T, 2)})
		return
	}
	n := 1 << bits.Len(uint(capacity-1)) // the least power of two ≥ capacity
	var zero T
	room := n
	if size := int(unsafe.Sizeof(zero)); size > 0 && size <= padUnit {
		perUnit := padUnit / size
		room = (n + perUnit - 1) / perUnit * perUnit
	}
	l.ring = make([]T, n, room)
}

// padUnit is the allocation unit of a ring, in bytes: two 64-byte cache
// lines, which the amd64 spatial prefetcher fetches in pairs.
const padUnit = 128

// Cap returns the most entries the log retains at once.
func (l *Log[T]) Cap() int { return l.capacity }

// Len returns the number of retained entries, EndOffset - StartOffset.
func (l *Log[T]) Len() int { return int(l.end - l.start) }

// Full reports whether the log retains Cap entries, so that Append would fail.
func (l *Log[T]) Full() bool { return l.Len() == l.capacity }

// StartOffset returns the log start offset: the offset of the oldest retained
// entry, or EndOffset when the log is empty.
func (l *Log[T]) StartOffset() int64 { return l.start }

// EndOffset returns the log end offset: the offset the next Append gets.
func (l *Log[T]) EndOffset() int64 { return l.end }

// Allocated returns the entries the log holds memory for: its ring, or its
// pages in use and its spare page, PageLen entries each. The directory is
// not counted.
func (l *Log[T]) Allocated() int {
	if l.ring != nil {
		return len(l.ring)
	}
	n := 0
	if d := l.dir.Load(); d != nil {
		for _, p := range d.pages {
			if p != nil {
				n += PageLen
			}
		}
	}
	if l.spare != nil {
		n += PageLen
	}
	return n
}

// Append stores v at the log end offset and returns that offset and true.
// When the log is full it returns (-1, false) and changes nothing: no offset
// is used up. An append that starts a page of a paged log installs one (the
// spare, or a new one).
func (l *Log[T]) Append(v T) (int64, bool) {
	if l.Len() == l.capacity {
		return -1, false
	}
	off := l.end
	if l.ring != nil {
		l.ring[int(off)&(len(l.ring)-1)] = v
	} else {
		if off&(PageLen-1) == 0 {
			l.install(off >> pageShift)
		}
		*l.readPaged(off) = v
	}
	l.end++
	return off, true
}

// install puts a page for page number k, which no page holds yet, in the
// directory, growing the directory first if the pages in use from the log
// start's to k outnumber its slots.
func (l *Log[T]) install(k int64) {
	d := l.dir.Load()
	lo := l.start >> pageShift
	if need := int(k - lo + 1); need > len(d.pages) {
		n := 2 * len(d.pages)
		for n < need {
			n *= 2
		}
		grown := &directory[T]{pages: make([]*[PageLen]T, n)}
		l.hooks.filling(&l.dir, grown)
		for j := lo; j < k; j++ {
			grown.pages[j&int64(n-1)] = d.pages[j&int64(len(d.pages)-1)]
		}
		l.dir.Store(grown)
		d = grown
	}
	page := l.spare
	l.spare = nil
	if page == nil {
		page = new([PageLen]T)
	}
	d.pages[k&int64(len(d.pages)-1)] = page
}

// At returns a pointer to the retained entry at offset off, or nil when off is
// outside [StartOffset, EndOffset). The pointer stays valid (and the entry
// unchanged) until the entry is trimmed; callers copy what they keep.
func (l *Log[T]) At(off int64) *T {
	if off < l.start || off >= l.end {
		return nil
	}
	return l.Read(off)
}

// Read returns a pointer to the entry at offset off without checking that
// it is retained and without reading any field that Append or TrimTo
// write, but for the directory, which it loads atomically: a reader may
// call it while another goroutine appends or trims, provided the caller
// knows, by its own synchronisation, that the entry at off is retained
// (StartOffset ≤ off < EndOffset, with EndOffset published to it after the
// Append that wrote off) and stays retained while it reads. Neither the
// entry nor the directory slot of its page is written meanwhile (package
// doc). Read of an offset not retained may panic or return another entry.
func (l *Log[T]) Read(off int64) *T {
	if r := l.ring; r != nil {
		return &r[int(off)&(len(r)-1)]
	}
	return l.readPaged(off)
}

// readPaged is Read of a paged log.
func (l *Log[T]) readPaged(off int64) *T {
	d := l.dir.Load()
	page := d.pages[int(uint64(off)>>pageShift)&(len(d.pages)-1)]
	return &page[off&(PageLen-1)]
}

// TrimTo removes every retained entry with an offset below off and returns
// how many it removed. The log start offset becomes max(StartOffset, off),
// capped at EndOffset: entries not yet appended cannot be trimmed. Removed
// entries are zeroed, or their page given up, so that the log does not keep
// their contents reachable; of the pages given up, one is kept, zeroed, as
// the spare.
func (l *Log[T]) TrimTo(off int64) int {
	if off > l.end {
		off = l.end
	}
	if off <= l.start {
		return 0
	}
	n := int(off - l.start)
	if r := l.ring; r != nil {
		for from := l.start; from < off; { // in at most two runs
			i := int(from) & (len(r) - 1)
			run := min(len(r)-i, int(off-from))
			clear(r[i : i+run])
			from += int64(run)
		}
		l.start = off
		return n
	}
	d := l.dir.Load()
	mask := int64(len(d.pages) - 1)
	last := l.hooks.firstKept(off>>pageShift, off, l.end) // the first page kept
	for k := l.start >> pageShift; k < last; k++ {
		slot := &d.pages[k&mask]
		if l.spare == nil {
			clear((*slot)[:])
			l.spare = *slot
		}
		*slot = nil
	}
	if from := max(l.start, last<<pageShift); from < off { // within the page of off
		page := d.pages[(from>>pageShift)&mask]
		clear(page[from&(PageLen-1) : off&(PageLen-1)])
	}
	l.start = off
	return n
}
