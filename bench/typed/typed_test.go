package typed

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/f91dcac0/tributary/bench/cputime"
	"github.com/f91dcac0/tributary/engine"
)

// maxConsumers is the largest of ConsumerCounts.
var maxConsumers = slices.Max(ConsumerCounts)

// TestLoops runs every loop of every family for a few chunks, the consumer
// loops over more than one fill, and checks that each counts the units it
// was asked for (a consumer loop: less at most one poll per consumer and
// fill), times them, and stops every goroutine it started.
func TestLoops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, f := range Families() {
		for _, l := range f.Loops {
			t.Run(f.Name+"/"+l.Name, func(t *testing.T) {
				in, err := l.Start()
				require.NoError(t, err)
				if in.Stop != nil {
					t.Cleanup(func() { require.NoError(t, in.Stop()) })
				}
				for _, n := range []int{1, 7, CycleRecords + 3} {
					m := cputime.NewMeter(nil)
					units, err := in.Run(m, n)
					require.NoError(t, err, "n=%d", n)
					if f.Name == FamilyRoundTrip {
						require.Equal(t, int64(n), units)
					} else {
						// A consumer past the gate when it shut may handle
						// one poll of a fill outside the timed window, even
						// at GOMAXPROCS 1 (the untimed runtime.GC before the
						// window yields to it), so a one-record run may
						// count none; never more than one poll per consumer.
						fills := (n + CycleRecords - 1) / CycleRecords
						require.LessOrEqual(t, units, int64(n))
						require.GreaterOrEqual(t, units, int64(n-fills*maxConsumers*engine.MaxPollRecords), "n=%d", n)
					}
					// One op of a fast loop can take less than the process
					// CPU clock's resolution: only the long run must show CPU.
					if n > CycleRecords {
						require.Positive(t, m.CPU, "n=%d", n)
					}
					require.GreaterOrEqual(t, m.CPU, time.Duration(0), "n=%d", n)
					require.Positive(t, m.Wall, "n=%d", n)
				}
			})
		}
	}
}

// TestFamiliesNamed: the family and loop names the targets look up exist.
func TestFamiliesNamed(t *testing.T) {
	want := map[string][]string{FamilyRoundTrip: {LoopChan, LoopHandle, LoopString, LoopBytes, LoopJSON, LoopFloor, LoopHandleJSON, LoopHandleJSONSession, LoopHandleSession, LoopCalibration}}
	for _, n := range ConsumerCounts {
		want[ConsumerRunName(n)] = []string{LoopEngineDirect, LoopRun, LoopRunFloor}
	}
	got := map[string][]string{}
	for _, f := range Families() {
		require.Equal(t, 1, f.Procs, f.Name)
		for _, l := range f.Loops {
			got[f.Name] = append(got[f.Name], l.Name)
		}
	}
	require.Equal(t, want, got)
	require.Equal(t, "ConsumerRun/consumers=4", ConsumerRunName(4))
}

// TestRunFamily: one short interleaved run of the round-trip family gives
// every loop its rounds and a per-unit CPU figure.
func TestRunFamily(t *testing.T) {
	f := Families()[0]
	res, err := cputime.Run(f, cputime.Config{Rounds: 2, Chunk: 2 * time.Millisecond})
	require.NoError(t, err)
	for _, l := range res.Loops {
		require.Len(t, l.Chunks, 2, l.Name)
		require.Positive(t, l.NsPerUnit(), l.Name)
	}
	require.Positive(t, res.Loop(LoopString).AllocsPerUnit(), "the typed round trip allocates")
}
