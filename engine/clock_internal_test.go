package engine

import (
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
