// Package ringlog is a bounded partition log: a fixed-capacity ring buffer of
// entries addressed by offset.
//
// A Log holds the retained entries of one partition, from its log start
// offset (the oldest retained entry) up to, but not including, its log end
// offset (the offset the next Append gets). Offsets start at 0 and grow by one
// per append; they are never reused. Trimming removes a prefix and advances the
// log start offset; appending fails, without using up an offset, while the log
// holds Cap entries.
//
// A Log does no locking: it is not safe for concurrent use, with one
// exception, InSlot. The engine guards each partition's Log with that
// partition's mutex. Append, At, InSlot and TrimTo allocate nothing.
//
// The entry at offset off always sits in buffer slot off mod Cap: a log
// starts at offset 0 in slot 0, and Append and TrimTo advance the offsets and
// the slots together. Slot and InSlot rely on it to read an entry without
// reading the log start offset, which TrimTo writes.
package ringlog

import "unsafe"

// Log is a bounded FIFO of entries of type T addressed by int64 offsets.
// The zero Log has capacity 0 and accepts no entries; use New or Init.
type Log[T any] struct {
	buf   []T   // len(buf) == capacity; buf[head] holds the entry at start
	head  int   // index in buf of the entry at offset start
	start int64 // log start offset: offset of the oldest retained entry
	end   int64 // log end offset: the offset the next Append gets
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
// for logs embedded by value. It panics if capacity < 1.
//
// The buffer is allocated in whole units of padUnit bytes, so that the
// buffers of two logs (two partitions written by different cores) never
// share a cache line.
func (l *Log[T]) Init(capacity int) {
	if capacity < 1 {
		panic("ringlog: capacity must be at least 1")
	}
	var zero T
	room := capacity
	if size := int(unsafe.Sizeof(zero)); size > 0 && size <= padUnit {
		perUnit := padUnit / size
		room = (capacity + perUnit - 1) / perUnit * perUnit
	}
	*l = Log[T]{buf: make([]T, capacity, room)}
}

// padUnit is the allocation unit of a log's buffer, in bytes: two 64-byte
// cache lines, which the amd64 spatial prefetcher fetches in pairs.
const padUnit = 128

// Cap returns the most entries the log retains at once.
func (l *Log[T]) Cap() int { return len(l.buf) }

// Len returns the number of retained entries, EndOffset - StartOffset.
func (l *Log[T]) Len() int { return int(l.end - l.start) }

// Full reports whether the log retains Cap entries, so that Append would fail.
func (l *Log[T]) Full() bool { return l.Len() == len(l.buf) }

// StartOffset returns the log start offset: the offset of the oldest retained
// entry, or EndOffset when the log is empty.
func (l *Log[T]) StartOffset() int64 { return l.start }

// EndOffset returns the log end offset: the offset the next Append gets.
func (l *Log[T]) EndOffset() int64 { return l.end }

// Append stores v at the log end offset and returns that offset and true.
// When the log is full it returns (-1, false) and changes nothing: no offset
// is used up.
func (l *Log[T]) Append(v T) (int64, bool) {
	n := l.Len()
	if n == len(l.buf) {
		return -1, false
	}
	l.buf[l.slot(n)] = v
	off := l.end
	l.end++
	return off, true
}

// At returns a pointer to the retained entry at offset off, or nil when off is
// outside [StartOffset, EndOffset). The pointer stays valid (and the entry
// unchanged) until the entry is trimmed; callers copy what they keep.
func (l *Log[T]) At(off int64) *T {
	if off < l.start || off >= l.end {
		return nil
	}
	return &l.buf[l.slot(int(off-l.start))]
}

// Slot returns the buffer slot of offset off, off mod Cap, in [0, Cap): the
// slot where the entry at off is, or will be, stored. It reads nothing that
// Append or TrimTo write. off must not be negative.
func (l *Log[T]) Slot(off int64) int { return int(uint64(off) % uint64(len(l.buf))) }

// InSlot returns a pointer to buffer slot i, 0 ≤ i < Cap, without any
// bounds check on offsets and without reading any field that Append or
// TrimTo write: a reader may call it while another goroutine appends or
// trims, provided the caller knows, by its own synchronisation, that the
// entry at the offset off it wants is retained (StartOffset ≤ off <
// EndOffset, with EndOffset published to it after the Append that wrote
// off), stays retained while it reads, and that i is Slot(off). The slot
// cannot be overwritten meanwhile: it is reused only by the append at
// off + Cap, which needs off trimmed first. A reader that walks offsets one
// by one keeps i itself (the next offset's slot is i+1, or 0 after Cap−1)
// and never divides.
func (l *Log[T]) InSlot(i int) *T { return &l.buf[i] }

// TrimTo removes every retained entry with an offset below off and returns
// how many it removed. The log start offset becomes max(StartOffset, off),
// capped at EndOffset: entries not yet appended cannot be trimmed. Removed
// slots are zeroed so that the log does not keep their contents reachable.
func (l *Log[T]) TrimTo(off int64) int {
	if off > l.end {
		off = l.end
	}
	if off <= l.start {
		return 0
	}
	n := int(off - l.start)
	var zero T
	for i := 0; i < n; i++ {
		l.buf[l.head] = zero
		l.head++
		if l.head == len(l.buf) {
			l.head = 0
		}
	}
	l.start = off
	return n
}

// slot returns the buffer index of the i-th retained entry (0 = oldest);
// i ranges over [0, Cap).
func (l *Log[T]) slot(i int) int {
	j := l.head + i
	if j >= len(l.buf) {
		j -= len(l.buf)
	}
	return j
}
