// Package testclock is the one fake clock of Tributary's tests: a time that
// moves only when a test advances it, safe for concurrent use, which counts
// how often it was read.
//
// Every package's tests use it where a broker, a backend or a monitor takes
// a clock function (engine.WithClock, tributary.WithClock, jetstream.Config,
// the Watermill adapter's and the monitor's options): pass c.Now.
package testclock

import (
	"sync/atomic"
	"time"
)

// Epoch is where New's clocks start: 2026-01-02 03:04:05 UTC.
var Epoch = time.Date(2026, time.January, 2, 3, 4, 5, 0, time.UTC)

// Clock is a fake clock. The zero Clock reads the zero time; New starts one
// at Epoch. Its methods are safe for concurrent use.
type Clock struct {
	ns    atomic.Int64 // the reading, in Unix ns; 0 is the zero time
	set   atomic.Bool  // false until Set or New: the zero Clock reads time.Time{}
	reads atomic.Int64 // how many times Now was called
}

// New returns a clock that reads Epoch until it is advanced.
func New() *Clock {
	c := new(Clock)
	c.Set(Epoch)
	return c
}

// At returns a clock that reads t (in UTC) until it is advanced.
func At(t time.Time) *Clock {
	c := new(Clock)
	c.Set(t)
	return c
}

// Now returns the clock's reading, in UTC, and counts the read.
func (c *Clock) Now() time.Time {
	c.reads.Add(1)
	if !c.set.Load() {
		return time.Time{}
	}
	return time.Unix(0, c.ns.Load()).UTC()
}

// Advance moves the clock forward by d (backward when d is negative) and
// returns the new reading.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.set.Store(true)
	return time.Unix(0, c.ns.Add(int64(d))).UTC()
}

// Set makes the clock read t from now on. t must lie within the range of
// Unix nanoseconds (years 1678 to 2262).
func (c *Clock) Set(t time.Time) {
	c.ns.Store(t.UnixNano())
	c.set.Store(true)
}

// Reads returns how many times Now has been called.
func (c *Clock) Reads() int64 { return c.reads.Load() }
