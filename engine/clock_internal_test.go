package engine

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCoarseClockStopsWhenIdle checks that a publish starts the coarse
// clock's refresher and that it stops by itself once publishes stop, and
// starts again with the next one (an idle broker runs no goroutine).
func TestCoarseClockStopsWhenIdle(t *testing.T) {
	b, err := New(10)
	require.NoError(t, err)
	_, err = b.Create("t", 1)
	require.NoError(t, err)
	for round := range 2 {
		off, err := b.Publish("t", 0, "x")
		require.NoError(t, err)
		require.GreaterOrEqual(t, off, int64(0))
		require.NotEqual(t, coarseStopped, b.coarse.state.Load(), "round %d: no refresher after a publish", round)
		require.Eventually(t, func() bool { return b.coarse.state.Load() == coarseStopped },
			10*time.Second, time.Millisecond, "round %d: the refresher still runs with no publish", round)
	}
}

// TestCoarseClockReadings checks the coarse clock's readings from several
// goroutines, across stops and restarts of its refresher: each goroutine's
// readings are non-decreasing, none is ahead of the wall clock, and a
// reading taken while the refresher runs is at most a generous bound
// behind it.
func TestCoarseClockReadings(t *testing.T) {
	b, err := New(10)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for i := range 3000 {
				if i%500 == 499 {
					time.Sleep(time.Duration(w+1) * 6 * time.Millisecond) // let the refresher stop now and then
				}
				before := time.Now().UnixNano()
				n := b.coarse.read(&b.wall)
				after := time.Now().UnixNano()
				switch {
				case n < last:
					errs <- "reading went back"
					return
				case n > after+int64(time.Millisecond):
					errs <- "reading ahead of the wall clock"
					return
				case n < before-int64(time.Second):
					errs <- "reading a second behind the wall clock"
					return
				}
				last = n
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	require.Eventually(t, func() bool { return b.coarse.state.Load() == coarseStopped }, 10*time.Second, time.Millisecond)
}

// TestCoarseClockStartAllocatesNothing checks that a publish that starts
// the refresher allocates nothing (Publish's allocation guarantee holds
// after an idle spell too), nor does the refresher's first tick.
// testing.AllocsPerRun's warm-up call would start it, so the count is read
// around the one call and that tick, at GOMAXPROCS 1 so that
// no other goroutine allocates meanwhile and the goroutine the publish
// starts can reuse the one the last refresher left (with several Ps it
// may be on another P's free list, and the runtime makes a new one).
func TestCoarseClockStartAllocatesNothing(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b, err := New(1000)
	require.NoError(t, err)
	_, err = b.Create("t", 1)
	require.NoError(t, err)
	_, err = b.Publish("t", 0, "x") // warm-up: the first publish of a topic
	require.NoError(t, err)
	var before, after runtime.MemStats
	for round := range 3 {
		require.Eventually(t, func() bool { return b.coarse.state.Load() == coarseStopped }, 10*time.Second, time.Millisecond)
		runtime.ReadMemStats(&before)
		_, err := b.Publish("t", 0, "x")
		started := b.coarse.state.Load() != coarseStopped
		for b.coarse.state.Load() == coarseUsed {
			runtime.Gosched() // until the refresher's first tick, which is counted too
		}
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		require.True(t, started, "round %d: the publish started no refresher", round)
		require.Zero(t, after.Mallocs-before.Mallocs, "round %d: allocations of a publish that starts the refresher", round)
	}
}

// TestTimeNowIsOnePairedReading: the runtime's paired reading that
// wallClock's resync takes its base from gives nanotime's monotonic clock
// (between two nanotime reads around it) and the wall clock (within a
// second of time.Now's); a monotonic value of another origin, such as
// time's process-relative one, would put every reading of the broker
// clock off by the process's age.
func TestTimeNowIsOnePairedReading(t *testing.T) {
	for range 1000 {
		before := nanotime()
		sec, nsec, mono := timeNow()
		after := nanotime()
		if mono < before || mono > after {
			t.Fatalf("timeNow's monotonic reading %d outside nanotime's [%d, %d]", mono, before, after)
		}
		wall := time.Unix(sec, int64(nsec))
		if d := time.Since(wall); d < -time.Second || d > time.Second {
			t.Fatalf("timeNow's wall reading %v is %v from time.Now", wall, d)
		}
	}
	var c wallClock
	if d := time.Duration(c.now() - time.Now().UnixNano()); d < -time.Second || d > time.Second {
		t.Fatalf("wallClock reads %v from time.Now", d)
	}
}
