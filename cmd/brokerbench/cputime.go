package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/f91dcac0/tributary/bench/cputime"
	"github.com/f91dcac0/tributary/bench/typed"
)

// cputimeUsage introduces the CPU-time families in -h.
const cputimeUsage = `
CPU-time mode (-cputime): every selected family runs its loops in interleaved
chunks, A B C … then … C B A, -rounds rounds, each chunk about -chunk of CPU
time (ops per chunk fixed by calibration first) and timed by the process's CPU
time, user + system, from getrusage(RUSAGE_SELF): all threads of the process,
the garbage collector's included, nothing of another process. A GC runs,
untimed, before every chunk. Each ratio is the median over rounds of the paired
ratio (loop A's CPU ns per unit in round r over loop B's in round r), quoted
with its range, so another tenant's load, which slows both chunks of a round
alike, drops out. A family runs at its GOMAXPROCS below, or at each -cpu value
when -cpu is given. Wall time is reported (units/s) but no ratio uses it.

CPU-time families and their loops:
`

// validateCPUTime checks the -cputime flags and selects the families.
func (o *options) validateCPUTime() error {
	if o.rounds < 1 || o.rounds > maxRounds {
		return fmt.Errorf("-rounds %d: must be in 1..%d", o.rounds, maxRounds)
	}
	if o.chunk < minChunk || o.chunk > maxChunk {
		return fmt.Errorf("-chunk %v: must be in %v..%v", o.chunk, minChunk, maxChunk)
	}
	if o.plotPath != "" {
		return fmt.Errorf("-plot %s: -cputime has no plot (the throughput plot is of the wall-time scenarios)", o.plotPath)
	}
	if o.cpuSet {
		var err error
		if o.cpus, err = parseCPUs(o.cpuList, maxCPU()); err != nil {
			return fmt.Errorf("%w (max(256, 4×NumCPU))", err)
		}
	}
	if o.fromPath != "" {
		return nil
	}
	if err := cputime.CPUAvailable(); err != nil {
		return fmt.Errorf("-cputime: %v", err)
	}
	for _, f := range typed.Families() {
		if !o.scenarios.MatchString(f.Name) {
			continue
		}
		var loops []cputime.Loop
		for _, l := range f.Loops {
			if o.subjects.MatchString(l.Name) {
				loops = append(loops, l)
			}
		}
		if len(loops) > 0 {
			f.Loops = loops
			o.families = append(o.families, f)
		}
	}
	if len(o.families) == 0 {
		return fmt.Errorf("-cputime -scenarios %q -subjects %q: select no (family, loop) pair; brokerbench -h lists them", o.scenExpr, o.subjExpr)
	}
	return nil
}

// measureCPU runs every selected family at its GOMAXPROCS (or at each -cpu
// value) and returns the results and, for each family that failed, why.
func measureCPU(o options, progress io.Writer) (out []cputime.Result, failed []string) {
	cfg := cputime.Config{Rounds: o.rounds, Chunk: o.chunk}
	for _, f := range o.families {
		procsList := o.cpus
		if !o.cpuSet && f.Procs > 0 {
			procsList = []int{f.Procs}
		} else if len(procsList) == 0 {
			procsList = []int{runtime.GOMAXPROCS(0)}
		}
		for _, procs := range procsList {
			prev := runtime.GOMAXPROCS(procs)
			res, err := cputime.Run(f, cfg)
			runtime.GOMAXPROCS(prev)
			if err != nil {
				fmt.Fprintf(progress, "  %-28s procs=%-3d FAILED: %v\n", f.Name, procs, err)
				failed = append(failed, fmt.Sprintf("%s@%d: %v", f.Name, procs, err))
				continue
			}
			for _, row := range cpuRows([]cputime.Result{res})[1:] {
				fmt.Fprintf(progress, "  %-28s %-20s procs=%-3s %s ns/%s CPU  %s (%s)  %s allocs\n", row[0], row[1], row[2], row[4], res.Unit, row[5], row[6], row[7])
			}
			out = append(out, res)
		}
	}
	return out, failed
}

// findCPU returns the result of family at the fewest procs measured, or nil.
func findCPU(rs []cputime.Result, family string) *cputime.Result {
	var best *cputime.Result
	for i := range rs {
		if rs[i].Family == family && (best == nil || rs[i].Procs < best.Procs) {
			best = &rs[i]
		}
	}
	return best
}

// pairedText describes the paired ratios of a over b.
func pairedText(pairs []float64) string {
	lo, hi := cputime.Span(pairs)
	return fmt.Sprintf("paired ratios over %d rounds: median %.3f, range %.3f–%.3f", len(pairs), cputime.Median(pairs), lo, hi)
}

// cpuRunAllocs is the allocations per record below which typed Run counts
// as allocation-free. A drain ends with every consumer idle, and waking
// from idle may allocate (a fresh signal channel, a timer); amortized over a
// fill of typed.CycleRecords records that stays far below it, while one
// allocation per poll of Run's batch of 16 records is 0.06.
const cpuRunAllocs = 0.01

// evaluateCPUTargets computes the typed library's goals (issue 22) from the
// CPU-time results: each ratio the median of the paired ratios of one run.
func evaluateCPUTargets(rs []cputime.Result) []Target {
	var ts []Target
	// ratio adds the target num/den ≤ limit (atMost) or ≥ limit, computed
	// from the paired CPU ns per unit of two loops of family.
	ratio := func(name, goal, family, num, den string, limit float64, atMost bool) {
		t := Target{Name: name, Goal: goal}
		defer func() { ts = append(ts, t) }()
		r := findCPU(rs, family)
		if r == nil {
			return
		}
		a, b := r.Loop(num), r.Loop(den)
		pairs := cputime.Paired(a, b)
		if pairs == nil {
			return
		}
		v := cputime.Median(pairs)
		t.Ratio = &v
		if limit > 0 {
			met := v <= limit
			if !atMost {
				met = v >= limit
			}
			t.Met = &met
		}
		t.Measured = fmt.Sprintf("%s at GOMAXPROCS %d: %s %.1f ns, %s %.1f ns of CPU per %s; %s",
			family, r.Procs, num, a.NsPerUnit(), den, b.NsPerUnit(), r.Unit, pairedText(pairs))
	}
	allocs := func(name, goal, family, loop string, limit float64) {
		t := Target{Name: name, Goal: goal}
		defer func() { ts = append(ts, t) }()
		r := findCPU(rs, family)
		if r == nil || r.Loop(loop) == nil {
			return
		}
		l := r.Loop(loop)
		v := l.AllocsPerUnit()
		met := v <= limit
		t.Ratio, t.Met = &v, &met
		t.Measured = fmt.Sprintf("%s/%s at GOMAXPROCS %d: %.3g allocs, %.0f B per %s", family, loop, r.Procs, v, l.BytesPerUnit(), r.Unit)
	}

	for _, n := range typed.ConsumerCounts {
		f := typed.ConsumerRunName(n)
		// engine ns ÷ typed ns = typed records per CPU-second ÷ the engine's.
		ratio(fmt.Sprintf("typed Run vs the engine used directly, %d consumer(s)", n),
			"typed-run records per CPU-second ≥ 0.5× engine-direct's (engine CPU ns/record ÷ typed's)",
			f, typed.LoopEngineDirect, typed.LoopRun, 0.5, false)
		ratio(fmt.Sprintf("bound of goal 1 on this API, %d consumer(s)", n),
			"report: engine-direct ÷ engine-direct+handoff, the most typed Run can reach with the default session timeout and Run's handoff",
			f, typed.LoopEngineDirect, typed.LoopRunFloor, 0, false)
	}
	t := Target{Name: "typed Run allocations per record (String codec)",
		Goal: fmt.Sprintf("typed-run allocs/record ≤ %g at 1, 4 and 16 consumers (0 in steady state; idle wake-ups amortized)", cpuRunAllocs)}
	var worst float64
	var seen []string
	for _, n := range typed.ConsumerCounts {
		if r := findCPU(rs, typed.ConsumerRunName(n)); r != nil {
			if l := r.Loop(typed.LoopRun); l != nil {
				v := l.AllocsPerUnit()
				worst = max(worst, v)
				seen = append(seen, fmt.Sprintf("%d: %.3g", n, v))
			}
		}
	}
	if len(seen) > 0 {
		met := worst <= cpuRunAllocs
		t.Ratio, t.Met = &worst, &met
		t.Measured = "largest of allocs/record by consumers " + strings.Join(seen, ", ")
	}
	ts = append(ts, t)

	rt := typed.FamilyRoundTrip
	ratio("typed String round trip vs the engine handle", "typed-string CPU ns/record ≤ 2× engine-handle's", rt, typed.LoopString, typed.LoopHandle, 2, true)
	allocs("typed String round-trip allocations", "typed-string allocs/record ≤ 2", rt, typed.LoopString, 2)
	ratio("bound of goal 2 on this API", "report: engine-handle+results ÷ engine-handle, the least the typed String round trip can cost with its calls' result types", rt, typed.LoopFloor, typed.LoopHandle, 0, true)
	ratio("typed String round trip vs that bound", "report: typed-string ÷ engine-handle+results, the library's own cost beyond its result types", rt, typed.LoopString, typed.LoopFloor, 0, true)
	ratio("typed Bytes round trip vs the engine handle", "report: the String goal plus the copies that keep the broker's bytes private", rt, typed.LoopBytes, typed.LoopHandle, 0, true)
	ratio("typed JSON round trip vs engine handle + encoding/json", "typed-json CPU ns/record ≤ 1.2× engine-handle+json's (the codec the only cost)", rt, typed.LoopJSON, typed.LoopHandleJSON, 1.2, true)
	ratio("typed JSON round trip vs the same on the engine as NewCluster configures it", "typed-json CPU ns/record ≤ 1.2× engine-handle+json+session's (like for like: both read the exact clock per poll and ack, SPEC rule 24)", rt, typed.LoopJSON, typed.LoopHandleJSONSession, 1.2, true)
	ratio("engine handle round trip vs a bare channel", "engine-handle CPU ns/record ≤ 2× chan send+receive", rt, typed.LoopHandle, typed.LoopChan, 2, true)

	// Calibration: the same loop twice. Met when the run reads a ratio of
	// 1 as 1 ± calibrationTolerance; outside it, every ratio of the run is
	// that much less certain.
	ratio("calibration: the engine handle loop against itself", fmt.Sprintf("engine-handle-again ÷ engine-handle within 1 ± %g", calibrationTolerance), rt, typed.LoopCalibration, typed.LoopHandle, 1+calibrationTolerance, true)
	if t := &ts[len(ts)-1]; t.Met != nil {
		met := math.Abs(*t.Ratio-1) <= calibrationTolerance
		t.Met = &met
	}
	return ts
}

// calibrationTolerance is how far from 1 the calibration ratio may be for
// the run to count as steady.
const calibrationTolerance = 0.05

// cpuRows returns the CPU-time table's header and cells, one row per loop.
func cpuRows(rs []cputime.Result) [][]string {
	out := [][]string{{"family", "loop", "procs", "ops/chunk", "CPU ns/unit", "×base (median)", "range", "allocs/unit", "B/unit", "units/s (wall)"}}
	for _, r := range rs {
		base := r.Loop(r.Base)
		for _, l := range r.Loops {
			x, span := "-", "-"
			if l.Name == r.Base {
				x = "base"
			} else if pairs := cputime.Paired(&l, base); pairs != nil {
				lo, hi := cputime.Span(pairs)
				x, span = fmt.Sprintf("%.3f×", cputime.Median(pairs)), fmt.Sprintf("%.3f–%.3f", lo, hi)
			}
			out = append(out, []string{r.Family, l.Name, fmt.Sprint(r.Procs), fmt.Sprint(l.Ops),
				fmt.Sprintf("%.1f", l.NsPerUnit()), x, span, allocs(l.AllocsPerUnit()), fmt.Sprintf("%.0f", l.BytesPerUnit()), si(l.UnitsPerSec())})
		}
	}
	return out
}

const cpuLegend = "CPU ns/unit: median over rounds of each chunk's process CPU time (getrusage RUSAGE_SELF, user+sys) per unit. ×base: median over rounds of this loop's CPU ns/unit over the family's base loop's in the same round (paired ratios), with their range. allocs, B: heap allocations per unit in the timed windows. units/s: units per second of wall time in the timed windows (not used by any ratio)."

func writeCPUText(w io.Writer, rs []cputime.Result) {
	fmt.Fprintln(w, cpuLegend)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	prev := ""
	for i, row := range cpuRows(rs) {
		if i > 1 && row[0]+row[2] != prev {
			fmt.Fprintln(tw, strings.Repeat("\t", len(row)-1))
		}
		prev = row[0] + row[2]
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
}

func writeCPUMarkdown(w io.Writer, rs []cputime.Result) {
	fmt.Fprintf(w, "%s\n\n", cpuLegend)
	for i, row := range cpuRows(rs) {
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		if i == 0 {
			fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
		}
	}
}
