package engine

import (
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock, in nanoseconds. time.Now reads
// it and the wall clock, two clock reads; the publish path needs only one.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// wallClockResync is how often, in monotonic time, wallClock re-reads the
// wall clock, so that its readings follow adjustments of the system clock
// to within this interval.
const wallClockResync = 100 * time.Millisecond

// wallClock is the broker's default clock: the wall clock, in Unix
// nanoseconds, derived from one monotonic clock read per call and a base
// pair (wall, monotonic) re-read every wallClockResync. Publish stamps every
// record with it; a time.Now per publish would read two clocks.
//
// The zero wallClock is ready to use.
type wallClock struct {
	base atomic.Pointer[clockBase]
	mu   sync.Mutex // serialises resync; guards nothing readers read
}

// clockBase is one simultaneous reading of both clocks; immutable.
type clockBase struct {
	wall int64 // Unix ns
	mono int64 // nanotime
}

// now returns the current wall-clock time in Unix nanoseconds.
func (c *wallClock) now() int64 {
	m := nanotime()
	b := c.base.Load()
	if b == nil || m-b.mono >= int64(wallClockResync) {
		b = c.resync()
	}
	return b.wall + (m - b.mono)
}

// resync stores a fresh base reading and returns it.
func (c *wallClock) resync() *clockBase {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := nanotime()
	if b := c.base.Load(); b != nil && m-b.mono < int64(wallClockResync) {
		return b // another caller resynced meanwhile
	}
	b := &clockBase{wall: time.Now().UnixNano(), mono: nanotime()}
	c.base.Store(b)
	return b
}
