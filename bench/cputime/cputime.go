// Package cputime compares workloads by the CPU time they use, measured in
// short interleaved chunks, so that the load of other processes on a shared
// machine drops out of the comparison.
//
// A Family is a set of Loops compared with each other. Run builds every
// loop, fixes for each the number of ops a chunk does (enough for about
// Config.Chunk of CPU time), then runs Config.Rounds rounds; each round runs
// one chunk of every loop, in order in even rounds and in reverse order in
// odd ones (A B C, C B A, …), so that a drift in the machine's speed hits
// every loop alike and a loop's position in the round averages out. Each
// chunk is timed by the process's CPU time, user + system, from
// getrusage(RUSAGE_SELF): every thread of the process is counted (the
// garbage collector's workers, a consumer's goroutines on other threads)
// and nothing of another process is. (getrusage(RUSAGE_THREAD) under
// runtime.LockOSThread would count one thread only: it would miss the
// collector's work that an allocating loop causes and every goroutine but
// one, and locking would make each goroutine switch a thread hand-off.)
// A garbage collection runs, untimed,
// before every chunk, so that no chunk pays for another's garbage.
//
// The figure a comparison quotes is the median, over rounds, of the paired
// ratio: loop A's CPU time per unit in round r over loop B's in round r
// (Paired, Median), with its range. Two chunks of one round run within tens
// of milliseconds of each other; what changes the machine's speed more
// slowly than that (a neighbour's load on the shared cache, frequency
// scaling) changes both and cancels in their ratio.
//
// Wall time is recorded too (Chunk.Wall), for throughput figures; CPU time
// is the measure of every ratio.
package cputime

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"
)

// Clock reads a monotonic time. ProcessCPU is the one Run uses by default.
type Clock func() time.Duration

// ProcessCPU returns the CPU time the process has used so far, user +
// system, all threads: getrusage(RUSAGE_SELF), whose sum is kept by the
// kernel in nanoseconds and reported in microseconds. It returns 0 where
// getrusage is unavailable (not a Unix system); Run then fails.
func ProcessCPU() time.Duration {
	d, err := processCPU()
	if err != nil {
		return 0
	}
	return d
}

// CPUAvailable reports whether ProcessCPU works here, with the reason when it
// does not.
func CPUAvailable() error {
	_, err := processCPU()
	return err
}

// WallClock returns a Clock reading the wall-clock time since the call.
func WallClock() Clock {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }
}

// Meter times the windows of one chunk: CPU time by its Clock, wall time,
// and heap allocations (runtime.MemStats.Mallocs and TotalAlloc, read outside
// the timed window). A Loop calls Start just before the work it compares and
// Stop just after, once or several times per chunk; what it does between a
// Stop and the next Start (refilling a topic, say) is not counted.
type Meter struct {
	clock Clock
	on    bool
	cpu0  time.Duration
	wall0 time.Time
	ms0   runtime.MemStats

	// Sums over the closed windows.
	CPU    time.Duration // by the Meter's Clock
	Wall   time.Duration
	Allocs uint64 // heap allocations
	Bytes  uint64 // heap bytes allocated
}

// NewMeter returns a Meter reading clock; nil means ProcessCPU.
func NewMeter(clock Clock) *Meter {
	if clock == nil {
		clock = ProcessCPU
	}
	return &Meter{clock: clock}
}

// Start opens a window. Starting an open window does nothing.
func (m *Meter) Start() {
	if m.on {
		return
	}
	m.on = true
	runtime.ReadMemStats(&m.ms0)
	m.wall0 = time.Now()
	m.cpu0 = m.clock()
}

// Stop closes the open window and adds it to the sums. Stopping a closed
// Meter does nothing.
func (m *Meter) Stop() {
	if !m.on {
		return
	}
	cpu := m.clock()
	wall := time.Now()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.on = false
	m.CPU += cpu - m.cpu0
	m.Wall += wall.Sub(m.wall0)
	m.Allocs += ms.Mallocs - m.ms0.Mallocs
	m.Bytes += ms.TotalAlloc - m.ms0.TotalAlloc
}

// Instance is a built Loop.
type Instance struct {
	// Run does n ≥ 1 ops, timing with m only the work compared, and returns
	// the units done (its Family's Unit; one per op unless the loop says
	// otherwise). It leaves m stopped. An error ends the measurement.
	Run func(m *Meter, n int) (units int64, err error)
	// Stop releases what the Loop's Start built, goroutines included; nil
	// for nothing to release.
	Stop func() error
}

// Loop is one workload of a Family.
type Loop struct {
	Name string // unique in its family
	Doc  string // one line: what one op does
	// Start builds the workload, outside any timing.
	Start func() (Instance, error)
}

// Family is a set of loops measured together, interleaved, and compared
// with each other.
type Family struct {
	Name  string // slash-separated, as brokerbench's -scenarios selects it
	Unit  string // what a unit is: "record"
	Doc   string // one line
	Procs int    // GOMAXPROCS the family is meant for; 0: any (the caller's)
	// Base names the loop the others are compared with in tables; "" means
	// the first.
	Base  string
	Loops []Loop
}

// Config shapes a Run.
type Config struct {
	// Rounds is the number of chunks of each loop, and of paired ratios;
	// at least 1.
	Rounds int
	// Chunk is the CPU time one chunk aims at (> 0). Calibration fixes each
	// loop's ops per chunk once, before the rounds, from its own chunks.
	Chunk time.Duration
	// Clock times the chunks; nil means ProcessCPU.
	Clock Clock

	// sequential runs every chunk of a loop before the next loop's: no
	// interleaving, so round r of two loops are not neighbours in time. The
	// tests use it as the broken schedule that pairing must not be fooled
	// by.
	sequential bool
}

// Chunk is one timed chunk of one loop.
type Chunk struct {
	Units  int64         `json:"units"`
	CPU    time.Duration `json:"cpu_ns"`
	Wall   time.Duration `json:"wall_ns"`
	Allocs uint64        `json:"allocs"`
	Bytes  uint64        `json:"bytes"`
}

// NsPerUnit is the chunk's CPU nanoseconds per unit.
func (c Chunk) NsPerUnit() float64 { return float64(c.CPU) / float64(c.Units) }

// LoopResult is one loop's chunks, by round.
type LoopResult struct {
	Name   string  `json:"name"`
	Doc    string  `json:"doc"`
	Ops    int     `json:"ops_per_chunk"`
	Chunks []Chunk `json:"chunks"`
}

// NsPerUnit returns the median over rounds of the chunks' CPU ns per unit.
func (l LoopResult) NsPerUnit() float64 {
	xs := make([]float64, len(l.Chunks))
	for i, c := range l.Chunks {
		xs[i] = c.NsPerUnit()
	}
	return Median(xs)
}

func (l LoopResult) sums() (units int64, wall time.Duration, allocs, bytes uint64) {
	for _, c := range l.Chunks {
		units += c.Units
		wall += c.Wall
		allocs += c.Allocs
		bytes += c.Bytes
	}
	return
}

// AllocsPerUnit returns heap allocations per unit over all chunks.
func (l LoopResult) AllocsPerUnit() float64 {
	units, _, allocs, _ := l.sums()
	return float64(allocs) / float64(units)
}

// BytesPerUnit returns heap bytes allocated per unit over all chunks.
func (l LoopResult) BytesPerUnit() float64 {
	units, _, _, bytes := l.sums()
	return float64(bytes) / float64(units)
}

// UnitsPerSec returns units per second of wall time in the timed windows,
// over all chunks.
func (l LoopResult) UnitsPerSec() float64 {
	units, wall, _, _ := l.sums()
	return float64(units) / wall.Seconds()
}

// Result is one Run of a family.
type Result struct {
	Family string       `json:"family"`
	Unit   string       `json:"unit"`
	Procs  int          `json:"procs"` // GOMAXPROCS during the run
	Base   string       `json:"base"`  // the loop the others are compared with
	Rounds int          `json:"rounds"`
	Chunk  string       `json:"chunk"` // Config.Chunk
	Loops  []LoopResult `json:"loops"`
}

// Loop returns the named loop's result, or nil.
func (r *Result) Loop(name string) *LoopResult {
	for i := range r.Loops {
		if r.Loops[i].Name == name {
			return &r.Loops[i]
		}
	}
	return nil
}

// Paired returns, round by round, a's CPU time per unit over b's: the
// paired ratios. It returns nil when the two have different round counts
// (they were not measured together).
func Paired(a, b *LoopResult) []float64 {
	if a == nil || b == nil || len(a.Chunks) != len(b.Chunks) || len(a.Chunks) == 0 {
		return nil
	}
	out := make([]float64, len(a.Chunks))
	for r := range out {
		out[r] = a.Chunks[r].NsPerUnit() / b.Chunks[r].NsPerUnit()
	}
	return out
}

// Median returns the median of xs (the mean of the middle two for an even
// count), NaN for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Span returns the smallest and largest of xs, NaN for none.
func Span(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}

// Order returns the order in which round r runs the loops: 0..n-1 in even
// rounds, n-1..0 in odd ones.
func Order(r, n int) []int {
	o := make([]int, n)
	for i := range o {
		if r%2 == 0 {
			o[i] = i
		} else {
			o[i] = n - 1 - i
		}
	}
	return o
}

// maxOps bounds a chunk's op count.
const maxOps = 1 << 30

// Run measures f under cfg at the caller's GOMAXPROCS: it builds every loop,
// calibrates each one's ops per chunk, runs the rounds and stops every loop
// (also on error). Errors: a bad Config, a loop's Start, Run or Stop error,
// a chunk that did no units or used no time, ProcessCPU unavailable.
func Run(f Family, cfg Config) (res Result, err error) {
	res = Result{Family: f.Name, Unit: f.Unit, Procs: runtime.GOMAXPROCS(0), Base: f.Base, Rounds: cfg.Rounds, Chunk: cfg.Chunk.String()}
	if res.Base == "" && len(f.Loops) > 0 {
		res.Base = f.Loops[0].Name
	}
	if cfg.Rounds < 1 || cfg.Chunk <= 0 {
		return res, fmt.Errorf("cputime: rounds %d, chunk %v: need at least 1 round and a positive chunk", cfg.Rounds, cfg.Chunk)
	}
	if len(f.Loops) == 0 {
		return res, fmt.Errorf("cputime: family %s has no loops", f.Name)
	}
	if cfg.Clock == nil {
		if err := CPUAvailable(); err != nil {
			return res, err
		}
		cfg.Clock = ProcessCPU
	}
	insts := make([]Instance, 0, len(f.Loops))
	defer func() {
		for _, in := range insts {
			if in.Stop != nil {
				err = errors.Join(err, in.Stop())
			}
		}
	}()
	for _, l := range f.Loops {
		in, e := l.Start()
		if e != nil {
			return res, fmt.Errorf("%s/%s: start: %w", f.Name, l.Name, e)
		}
		insts = append(insts, in)
		res.Loops = append(res.Loops, LoopResult{Name: l.Name, Doc: l.Doc})
	}
	for i, in := range insts {
		if res.Loops[i].Ops, err = calibrate(in, cfg); err != nil {
			return res, fmt.Errorf("%s/%s: %w", f.Name, f.Loops[i].Name, err)
		}
	}
	chunkOf := func(i int) error {
		c, e := runChunk(insts[i], cfg.Clock, res.Loops[i].Ops)
		if e != nil {
			return fmt.Errorf("%s/%s: %w", f.Name, f.Loops[i].Name, e)
		}
		res.Loops[i].Chunks = append(res.Loops[i].Chunks, c)
		return nil
	}
	if cfg.sequential {
		for i := range insts {
			for range cfg.Rounds {
				if err = chunkOf(i); err != nil {
					return res, err
				}
			}
		}
		return res, err
	}
	for r := range cfg.Rounds {
		for _, i := range Order(r, len(insts)) {
			if err = chunkOf(i); err != nil {
				return res, err
			}
		}
	}
	return res, err
}

// runChunk runs one chunk of n ops after an untimed garbage collection.
func runChunk(in Instance, clock Clock, n int) (Chunk, error) {
	runtime.GC()
	m := NewMeter(clock)
	units, err := in.Run(m, n)
	m.Stop()
	if err != nil {
		return Chunk{}, err
	}
	if units <= 0 || m.CPU <= 0 {
		return Chunk{}, fmt.Errorf("a chunk of %d ops did %d units in %v: nothing to divide by", n, units, m.CPU)
	}
	return Chunk{Units: units, CPU: m.CPU, Wall: m.Wall, Allocs: m.Allocs, Bytes: m.Bytes}, nil
}

// calibrate returns the ops per chunk that take about cfg.Chunk of the
// clock's time, from chunks that grow from 1 op (as testing.B sizes b.N);
// the calibration chunks also warm the loop up.
func calibrate(in Instance, cfg Config) (int, error) {
	n := 1
	for {
		runtime.GC()
		m := NewMeter(cfg.Clock)
		units, err := in.Run(m, n)
		m.Stop()
		if err != nil {
			return 0, err
		}
		if units <= 0 {
			return 0, fmt.Errorf("a chunk of %d ops did no units", n)
		}
		if m.CPU >= cfg.Chunk/2 || n >= maxOps {
			next := float64(n) * float64(cfg.Chunk) / float64(m.CPU)
			return int(min(max(next, 1), maxOps)), nil
		}
		next := n * 100
		if m.CPU > 0 {
			next = int(min(float64(n)*float64(cfg.Chunk)/float64(m.CPU)*1.2, float64(n)*100))
		}
		n = min(max(next, n+1), maxOps)
	}
}
