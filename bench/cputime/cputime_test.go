package cputime

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMedianSpanOrder(t *testing.T) {
	require.True(t, math.IsNaN(Median(nil)))
	require.Equal(t, 2.0, Median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, Median([]float64{4, 1, 3, 2}), "even count: mean of the middle two")
	xs := []float64{5, 1, 4}
	Median(xs)
	require.Equal(t, []float64{5, 1, 4}, xs, "Median does not reorder its argument")
	lo, hi := Span([]float64{2, 0.5, 3})
	require.Equal(t, [2]float64{0.5, 3}, [2]float64{lo, hi})
	require.Equal(t, []int{0, 1, 2}, Order(0, 3))
	require.Equal(t, []int{2, 1, 0}, Order(1, 3))
	require.Equal(t, []int{0, 1, 2}, Order(4, 3))
}

func TestPaired(t *testing.T) {
	a := &LoopResult{Chunks: []Chunk{{Units: 10, CPU: 200}, {Units: 5, CPU: 300}, {Units: 1, CPU: 20}}}
	b := &LoopResult{Chunks: []Chunk{{Units: 10, CPU: 100}, {Units: 10, CPU: 200}, {Units: 2, CPU: 20}}}
	// Per unit: a 20, 60, 20; b 10, 20, 10.
	require.Equal(t, []float64{2, 3, 2}, Paired(a, b))
	require.Nil(t, Paired(a, &LoopResult{Chunks: b.Chunks[:2]}), "different round counts are not pairs")
	require.Nil(t, Paired(a, nil))
	require.Equal(t, 20.0, a.NsPerUnit())
	require.InDelta(t, 520.0/16, a.NsPerUnit()*0+float64(a.Chunks[0].CPU+a.Chunks[1].CPU+a.Chunks[2].CPU)/16, 1e-9)
}

// fakeMachine is a machine whose speed drifts: an op of cost c takes
// c × (1 + now/drift) of its clock. Its loops do no real work.
type fakeMachine struct {
	now   time.Duration
	drift time.Duration
}

func (f *fakeMachine) clock() time.Duration { return f.now }

func (f *fakeMachine) loop(name string, cost time.Duration) Loop {
	return Loop{Name: name, Start: func() (Instance, error) {
		return Instance{Run: func(m *Meter, n int) (int64, error) {
			m.Start()
			for range n {
				f.now += time.Duration(float64(cost) * (1 + float64(f.now)/float64(f.drift)))
			}
			m.Stop()
			return int64(n), nil
		}}, nil
	}}
}

// TestPairingCancelsDrift: on a machine that slows to a third of its speed
// over the run, loop "two" (twice loop "one"'s cost per op) comes out at 2× ± 2 % by
// the median of paired ratios of interleaved chunks (A B, B A, …). The broken schedule —
// every chunk of one loop, then every chunk of the other, the k-th chunks
// "paired" though minutes apart — is caught: it is off by more than 20 %.
func TestPairingCancelsDrift(t *testing.T) {
	run := func(sequential bool) float64 {
		// The run lasts about 20 rounds × (1 s + 1 s) of clock; over that
		// the machine's speed falls from 1 to about a third.
		f := &fakeMachine{drift: 20 * time.Second}
		fam := Family{Name: "fake", Unit: "op", Loops: []Loop{f.loop("one", time.Millisecond), f.loop("two", 2*time.Millisecond)}}
		res, err := Run(fam, Config{Rounds: 20, Chunk: time.Second, Clock: f.clock, sequential: sequential})
		require.NoError(t, err)
		require.Len(t, res.Loops[0].Chunks, 20)
		return Median(Paired(res.Loop("two"), res.Loop("one")))
	}
	paired := run(false)
	require.InDelta(t, 2, paired, 0.04, "interleaved, paired")
	got := run(true)
	t.Logf("two/one: interleaved %.4f, sequential %.4f", paired, got)
	require.Greater(t, math.Abs(got-2)/2, 0.2, "sequential: got %.3f, which the check must reject", got)
}

// burn does n × k steps of a xorshift generator: counted work, no memory
// traffic, no allocation.
func burn(n, k int) uint64 {
	x := uint64(0x9E3779B97F4A7C15)
	for range n * k {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

var sink uint64

// burnLoop burns k steps per op; stalled, it then waits three times as
// long as it burned, using no CPU: what other tenants holding the CPU for
// three quarters of each of this loop's chunks look like from inside the
// process.
func burnLoop(name string, k int, stalled bool) Loop {
	return Loop{Name: name, Start: func() (Instance, error) {
		return Instance{Run: func(m *Meter, n int) (int64, error) {
			m.Start()
			t0 := time.Now()
			sink += burn(n, k)
			if stalled {
				time.Sleep(3 * time.Since(t0))
			}
			m.Stop()
			return int64(n), nil
		}}, nil
	}}
}

// within2x is the check: the ratio of a loop doing twice the counted work
// per op to one doing it once is 2 ± 25 %. The work is counted exactly; what
// the tolerance covers is the clock (microseconds in 5 ms chunks), a
// hypervisor's steal time charged to the process on some VMs, and the
// scheduler's interrupts, all of which vary chunk to chunk on a shared
// machine.
func within2x(ratio float64) bool { return math.Abs(ratio-2)/2 <= 0.25 }

// TestCPUTimeSeesWorkNotStalls: loop "twice" does twice loop "once"'s work
// per op and also stalls, using no CPU, three times as long as it works. By
// process CPU time (the mode's clock) it comes out 2×; by wall time (the
// broken variant) the stall counts, it comes out near 8×, and the same check
// fails — as it still would if a neighbour slowed every chunk of "once"
// threefold.
func TestCPUTimeSeesWorkNotStalls(t *testing.T) {
	require.NoError(t, CPUAvailable())
	fam := Family{Name: "burn", Unit: "op", Loops: []Loop{burnLoop("once", 200, false), burnLoop("twice", 400, true)}}
	cfg := Config{Rounds: 7, Chunk: 5 * time.Millisecond}
	res, err := Run(fam, cfg)
	require.NoError(t, err)
	cpu := Median(Paired(res.Loop("twice"), res.Loop("once")))
	require.True(t, within2x(cpu), "CPU time: twice/once = %.3f (paired %v)", cpu, Paired(res.Loop("twice"), res.Loop("once")))

	cfg.Clock = WallClock()
	res, err = Run(fam, cfg)
	require.NoError(t, err)
	wall := Median(Paired(res.Loop("twice"), res.Loop("once")))
	require.False(t, within2x(wall), "wall time: twice/once = %.3f, which the check must reject", wall)
	t.Logf("twice/once: CPU time %.3f, wall time %.3f", cpu, wall)
}

// TestRunErrors: a loop that counts nothing, or fails, ends the run with
// its name; every started loop is stopped.
func TestRunErrors(t *testing.T) {
	stopped := 0
	zero := Loop{Name: "zero", Start: func() (Instance, error) {
		return Instance{Run: func(m *Meter, n int) (int64, error) { return 0, nil }, Stop: func() error { stopped++; return nil }}, nil
	}}
	_, err := Run(Family{Name: "f", Loops: []Loop{burnLoop("ok", 1, false), zero}}, Config{Rounds: 1, Chunk: time.Millisecond})
	require.ErrorContains(t, err, "f/zero")
	require.Equal(t, 1, stopped)
	_, err = Run(Family{Name: "f", Loops: []Loop{zero}}, Config{Rounds: 0, Chunk: time.Millisecond})
	require.ErrorContains(t, err, "rounds 0")
}
