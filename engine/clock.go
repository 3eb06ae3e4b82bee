package engine

import (
	"runtime"
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
	sec, nsec, mono := timeNow()
	b := &clockBase{wall: sec*int64(time.Second) + int64(nsec), mono: mono}
	c.base.Store(b)
	return b
}

// timeNow is the runtime's reading behind time.Now: the wall clock and
// the monotonic clock (nanotime's, not time's process-relative one) read
// back to back inside the runtime, where no goroutine preemption can fall
// between them. Two separate calls could be preempted between their reads,
// and the base would then be off by the pause: every reading until the
// next resync that much early, the one after it that much later.
//
//go:linkname timeNow time.now
func timeNow() (sec int64, nsec int32, mono int64)

// coarseTick is how often the coarse clock's refresher re-reads the wall
// clock while the broker has traffic: the resolution of the default clock's
// record times (SPEC rule 15).
const coarseTick = time.Millisecond

// coarseExactEvery is how often, in appends to one partition, a record's
// time is read exactly instead of from the coarse clock (append): a busy
// publisher thus bounds the lag itself when the refresher waits for CPU,
// as at GOMAXPROCS 1, where it runs only when the publisher is preempted.
const coarseExactEvery = 64

// coarseIdleTicks is how many ticks without a reading the refresher waits
// before it stops, so that an idle broker runs no goroutine and uses no CPU.
const coarseIdleTicks = 8

// The coarse clock's states.
const (
	coarseStopped  int32 = iota // no refresher; the next reading starts one
	coarseStarting              // a reader is storing the first reading
	coarseIdle                  // a refresher runs; no reading since its last tick
	coarseUsed                  // a refresher runs; read since its last tick
)

// coarseClock is the default clock's reading for record times (SPEC rule
// 15): the wall clock as wallClock gives it, re-read every coarseTick by a
// refresher goroutine that runs only while readings come and stops
// coarseIdleTicks ticks after the last one, and by every
// coarseExactEvery-th append to a partition (exact). A reading is then two
// loads, where wallClock.now costs a monotonic clock read. It lags the
// wall clock by the time since the last refresh: coarseTick while the
// refresher gets CPU, and a partition's record times lag by at most the
// time its last coarseExactEvery appends took. Readings are non-decreasing
// in real time as wallClock's are: every store goes through advance, which
// never lowers now by less than wallClockResync (an exact reading older
// than now loses to it; a system clock set back by more is followed); the
// one reader that starts a refresher stores its fresh reading before any
// reader can use now, and readers that come meanwhile wait for it.
//
// Ack and session timeouts (SPEC rules 22 and 24) do not read it for the
// instants they keep (delivery and last-seen instants), nor for the calls
// that name a member: they read wallClock, so that they never fire early. A
// publish compares its record's coarse time with the topic's earliest
// session deadline, and expires at an exact reading only when that looks
// due (topic.expireBy): the coarse clock can run ahead of wallClock too,
// after the wall clock stepped back (advance).
//
// The zero coarseClock is ready to use once run and timer are set. At most
// one refresher runs: one starts only from coarseStopped, which the last
// one stores as its last use of the clock.
type coarseClock struct {
	_     [64]byte // keep the words off the Broker's read-mostly fields
	state atomic.Int32
	now   atomic.Int64 // Unix ns, the last reading stored
	run   func()       // the refresher, set by New: go run() allocates nothing
	timer *time.Timer  // the refresher's, made stopped by New: a tick allocates nothing
	_     [64]byte
}

// read returns the coarse wall-clock time in Unix nanoseconds, starting the
// refresher if none runs; w is the clock it reads.
func (c *coarseClock) read(w *wallClock) int64 {
	for {
		switch c.state.Load() {
		case coarseUsed:
			return c.now.Load()
		case coarseIdle:
			if c.state.CompareAndSwap(coarseIdle, coarseUsed) {
				return c.now.Load()
			}
		case coarseStopped:
			if c.state.CompareAndSwap(coarseStopped, coarseStarting) {
				n := c.advance(w.now())
				c.state.Store(coarseUsed)
				go c.run()
				return n
			}
		default: // coarseStarting: the first reading is a store away
			runtime.Gosched()
		}
	}
}

// refresh is the refresher: every coarseTick it stores a fresh reading of
// w, and it returns once coarseIdleTicks ticks in a row saw no reading.
func (c *coarseClock) refresh(w *wallClock) {
	idle := 0
	for {
		c.timer.Reset(coarseTick)
		<-c.timer.C
		c.advance(w.now())
		if c.state.CompareAndSwap(coarseUsed, coarseIdle) {
			idle = 0
			continue
		}
		if idle++; idle >= coarseIdleTicks && c.state.CompareAndSwap(coarseIdle, coarseStopped) {
			return
		}
	}
}

// exact stores an exact reading of w and returns the coarse clock's
// reading after it: the exact one, or a later one already stored.
func (c *coarseClock) exact(w *wallClock) int64 { return c.advance(w.now()) }

// advance stores n, a fresh reading of the wall clock, unless now holds a
// later one less than wallClockResync later (n was read before it), and
// returns what now holds.
func (c *coarseClock) advance(n int64) int64 {
	for {
		old := c.now.Load()
		if n <= old && old-n < int64(wallClockResync) {
			return old
		}
		if c.now.CompareAndSwap(old, n) {
			return n
		}
	}
}
