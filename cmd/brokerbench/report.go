package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/f91dcac0/tributary/bench"
	"github.com/f91dcac0/tributary/bench/cputime"
)

// Report is everything one run measured; it is what -json writes.
type Report struct {
	Meta    Meta     `json:"meta"`
	Results []Result `json:"results"`
	Targets []Target `json:"targets"`
	// CPU holds the -cputime results, one per family and procs value.
	CPU []cputime.Result `json:"cputime,omitempty"`
}

// Result is one (scenario, subject, procs) measurement: the median of -count
// samples. Units are the scenario's Unit (a record, a delivery, a rebalance
// or a call).
type Result struct {
	Scenario   string `json:"scenario"`
	Unit       string `json:"unit"`
	Parallel   bool   `json:"parallel"` // b.RunParallel with one goroutine per proc
	Subject    string `json:"subject"`
	Procs      int    `json:"procs"` // GOMAXPROCS
	Failed     bool   `json:"failed,omitempty"`
	Iterations int    `json:"iterations"` // b.N of the kept sample

	Units         float64 `json:"units"`           // units done in the kept sample
	NsPerUnit     float64 `json:"ns_per_unit"`     // wall nanoseconds per unit (aggregate across goroutines)
	UnitsPerSec   float64 `json:"units_per_s"`     // units per wall-clock second, all goroutines together
	AllocsPerUnit float64 `json:"allocs_per_unit"` // heap allocations per unit
	BytesPerUnit  float64 `json:"bytes_per_unit"`  // heap bytes allocated per unit
	// SamplesNs is every repetition's ns/unit, in the order measured; the
	// k-th samples of two rows of one scenario were taken in the same
	// repetition, seconds apart.
	SamplesNs []float64 `json:"samples_ns_per_unit"`

	// Throughput of this subject divided by the naive broker's and the
	// channel baseline's in the same scenario at the same procs (>1: this
	// subject is faster). Absent for the baseline itself or where it was
	// not measured.
	VsNaive *float64 `json:"throughput_vs_naive,omitempty"`
	VsChan  *float64 `json:"throughput_vs_chan,omitempty"`
	// Scaling is this row's throughput divided by the same scenario and
	// subject at GOMAXPROCS 1; only for parallel scenarios, absent where 1
	// was not measured.
	Scaling *float64 `json:"scaling_vs_1_proc,omitempty"`
}

func (r Result) brief() string {
	if r.Failed {
		return "FAILED"
	}
	return fmt.Sprintf("%9.1f ns/%s  %s %s/s  %.2f allocs/%s", r.NsPerUnit, r.Unit, si(r.UnitsPerSec), bench.Plural(r.Unit), r.AllocsPerUnit, r.Unit)
}

type key struct {
	scenario, subject string
	procs             int
}

// index maps (scenario, subject, procs) to the successful results.
func index(rs []Result) map[key]*Result {
	m := map[key]*Result{}
	for i := range rs {
		if !rs[i].Failed {
			m[key{rs[i].Scenario, rs[i].Subject, rs[i].Procs}] = &rs[i]
		}
	}
	return m
}

// derive fills in the baseline ratios and the scaling of every result.
func derive(rs []Result) {
	m := index(rs)
	ratio := func(r *Result, subject string, procs int) *float64 {
		o := m[key{r.Scenario, subject, procs}]
		if o == nil || o.UnitsPerSec == 0 {
			return nil
		}
		v := r.UnitsPerSec / o.UnitsPerSec
		return &v
	}
	for i := range rs {
		r := &rs[i]
		if r.Failed {
			continue
		}
		if r.Subject != bench.KindNaive {
			r.VsNaive = ratio(r, bench.KindNaive, r.Procs)
		}
		if r.Subject != bench.KindChan {
			r.VsChan = ratio(r, bench.KindChan, r.Procs)
		}
		if r.Parallel {
			r.Scaling = ratio(r, r.Subject, 1)
		}
	}
}

// Target is one of the project's performance targets (README, Performance) with the measured ratio.
type Target struct {
	Name     string   `json:"name"`
	Goal     string   `json:"goal"`               // the inequality the ratio must meet
	Ratio    *float64 `json:"ratio,omitempty"`    // the measured ratio; absent when not measured
	Met      *bool    `json:"met,omitempty"`      // absent when not measured, or for a ratio only reported
	Measured string   `json:"measured,omitempty"` // how the ratio was computed, with the figures
}

// pairedRatio returns the median over repetitions k of
// num.SamplesNs[k] / den.SamplesNs[k], the samples of one repetition having
// been measured seconds apart, and the ratios themselves. Pairing cancels
// the slow drifts in machine speed that a ratio of two medians taken
// minutes apart would not. Both rows must have the same number of samples;
// otherwise it falls back to the ratio of the medians.
func pairedRatio(num, den *Result) (float64, []float64) {
	if len(num.SamplesNs) == 0 || len(num.SamplesNs) != len(den.SamplesNs) {
		return num.NsPerUnit / den.NsPerUnit, nil
	}
	rs := make([]float64, len(num.SamplesNs))
	for k := range rs {
		rs[k] = num.SamplesNs[k] / den.SamplesNs[k]
	}
	sorted := slices.Clone(rs)
	slices.Sort(sorted)
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2], rs
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2, rs
}

func ratiosText(rs []float64) string {
	if len(rs) < 2 {
		return ""
	}
	s := make([]string, len(rs))
	for k, r := range rs {
		s[k] = fmt.Sprintf("%.2f", r)
	}
	return fmt.Sprintf("; median of paired ratios [%s]", strings.Join(s, " "))
}

// strayAllocs is the allocations per record below which the zero-allocation
// target counts as met. A multi-second benchmark run now and then records
// one allocation that no broker call made (a bare channel loop, which calls
// no broker code, has shown one too); one allocation per record, or per 64,
// is far above it. bench/alloc_test.go asserts exact zeros per call with
// testing.AllocsPerRun.
const strayAllocs = 1e-3

// unitOf is the unit of scenario's rows ("record", "delivery", "call"),
// "record" when it has none.
func unitOf(rs []Result, scenario string) string {
	for _, r := range rs {
		if r.Scenario == scenario && r.Unit != "" {
			return r.Unit
		}
	}
	return "record"
}

// evaluateTargets computes the performance targets from the results, using only
// figures from this run. Each ratio is the median of the per-repetition
// (paired) ratios; the medians of the rows themselves appear in Measured.
func evaluateTargets(rs []Result) []Target {
	m := index(rs)
	get := func(sc, subject string, procs int) *Result { return m[key{sc, subject, procs}] }
	var ts []Target

	costVsChan := func(name, scenario string, limit float64) {
		t := Target{Name: name, Goal: fmt.Sprintf("engine ns/record ≤ %g× bare channel send+receive (chan-raw)", limit)}
		// Prefer 1 proc (one goroutine); else the fewest procs both have.
		for _, procs := range procsOf(rs) {
			e, c := get(scenario, bench.KindEngine, procs), get(scenario, bench.KindChanRaw, procs)
			if e == nil || c == nil {
				continue
			}
			v, pairs := pairedRatio(e, c)
			met := v <= limit
			t.Ratio, t.Met = &v, &met
			t.Measured = fmt.Sprintf("%s at GOMAXPROCS %d: engine %.1f ns, chan-raw %.1f ns%s", scenario, procs, e.NsPerUnit, c.NsPerUnit, ratiosText(pairs))
			break
		}
		ts = append(ts, t)
	}
	costVsChan("single-goroutine publish → poll(1) → ack", "RoundTrip", 3)
	costVsChan("the same with poll batches of 64, acks per record", "Batch64", 2)

	// scalingAt is throughput at procs over throughput at 1 proc.
	scalingAt := func(name, scenario string, procs int, limit float64) {
		t := Target{Name: name, Goal: fmt.Sprintf("engine %s/s at %d procs ≥ %g× at 1 proc", bench.Plural(unitOf(rs, scenario)), procs, limit)}
		if a, b := get(scenario, bench.KindEngine, 1), get(scenario, bench.KindEngine, procs); a != nil && b != nil {
			v, pairs := pairedRatio(a, b) // ns at 1 ÷ ns at procs = throughput at procs ÷ at 1
			met := v >= limit
			t.Ratio, t.Met = &v, &met
			t.Measured = fmt.Sprintf("%s %s/s at %d procs, %s at 1%s", si(b.UnitsPerSec), bench.Plural(b.Unit), procs, si(a.UnitsPerSec), ratiosText(pairs))
		}
		ts = append(ts, t)
	}
	scaling := func(name, scenario string, limit float64) { scalingAt(name, scenario, 2, limit) }
	scaling("parallel pipelines on distinct partitions: 2 procs vs 1", "Parallel/groups=1", 1.7)

	t := Target{Name: "pipelines with 3 groups at 2 procs vs the naive broker", Goal: "engine records/s ≥ 3× naive at 2 procs"}
	if e, n := get("Parallel/groups=3", bench.KindEngine, 2), get("Parallel/groups=3", bench.KindNaive, 2); e != nil && n != nil {
		v, pairs := pairedRatio(n, e) // naive ns ÷ engine ns = engine throughput ÷ naive
		met := v >= 3
		t.Ratio, t.Met = &v, &met
		t.Measured = fmt.Sprintf("engine %s records/s, naive %s%s", si(e.UnitsPerSec), si(n.UnitsPerSec), ratiosText(pairs))
	}
	ts = append(ts, t)

	scaling("one hot topic (16 partitions, 1 group, a goroutine each): 2 procs vs 1", "HotTopic/partitions=16", 1.8)

	t = Target{Name: "round trip against the first, RWMutex engine (engine-rw)", Goal: "engine ns/record ≤ 1.1× engine-rw at GOMAXPROCS 1"}
	if e, r := get("RoundTrip", bench.KindEngine, 1), get("RoundTrip", bench.KindEngineRW, 1); e != nil && r != nil {
		v, pairs := pairedRatio(e, r) // engine ns ÷ engine-rw ns
		met := v <= 1.1
		t.Ratio, t.Met = &v, &met
		t.Measured = fmt.Sprintf("engine %.1f ns, engine-rw %.1f ns%s", e.NsPerUnit, r.NsPerUnit, ratiosText(pairs))
	}
	ts = append(ts, t)

	t = Target{Name: "zero allocations per record on the steady publish / poll-into / ack path",
		Goal: fmt.Sprintf("engine allocs/record < %g in Publish, RoundTrip and Batch64 at every procs (exact 0 per call: bench/alloc_test.go)", strayAllocs)}
	var worst *Result
	n := 0
	for i := range rs {
		r := &rs[i]
		if r.Failed || r.Subject != bench.KindEngine || (r.Scenario != "Publish" && r.Scenario != "RoundTrip" && r.Scenario != "Batch64") {
			continue
		}
		n++
		if worst == nil || r.AllocsPerUnit > worst.AllocsPerUnit {
			worst = r
		}
	}
	if worst != nil {
		v := worst.AllocsPerUnit
		met := v < strayAllocs
		t.Ratio, t.Met = &v, &met
		t.Measured = fmt.Sprintf("largest of %d rows: %s at GOMAXPROCS %d, %.3g allocs/record", n, worst.Scenario, worst.Procs, v)
		if v > 0 {
			t.Measured += fmt.Sprintf(" (%.0f allocations in %.0f records)", v*worst.Units, worst.Units)
		}
	}
	ts = append(ts, t)

	// The goals of the per-group cursor locks (16 procs: bench/scaling.sh on
	// a 16-core machine).
	scalingAt("fan-out: 16 groups reading one partition, 16 procs vs 1", "Contended/groups=16", 16, 6)
	scalingAt("membership churn (Mixed, 1% join/leave), 16 procs vs 1", "Mixed", 16, 4)
	scalingAt("fan-out: 16 groups reading one partition, 2 procs vs 1", "Contended/groups=16", 2, 1.2)
	costVsChan("publish → poll(1) → ack through bound handles", "RoundTrip/handles", 1.5)
	return ts
}

// procsOf returns the procs values present in rs, ascending.
func procsOf(rs []Result) []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range rs {
		if !seen[r.Procs] {
			seen[r.Procs] = true
			out = append(out, r.Procs)
		}
	}
	slices.Sort(out)
	return out
}

// si formats v with a k/M/G suffix and three significant figures.
func si(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return fmt.Sprintf("%.3gG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func times(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f×", *v)
}

func allocs(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%.3g", v)
}

// rows returns the table's header and cells, one row per result.
func rows(rs []Result) [][]string {
	out := [][]string{{"scenario", "subject", "procs", "ns/unit", "unit", "units/s", "allocs/unit", "×naive", "×chan", "scaling"}}
	for _, r := range rs {
		if r.Failed {
			out = append(out, []string{r.Scenario, r.Subject, fmt.Sprint(r.Procs), "FAILED", r.Unit, "-", "-", "-", "-", "-"})
			continue
		}
		out = append(out, []string{r.Scenario, r.Subject, fmt.Sprint(r.Procs),
			fmt.Sprintf("%.1f", r.NsPerUnit), r.Unit, si(r.UnitsPerSec), allocs(r.AllocsPerUnit),
			times(r.VsNaive), times(r.VsChan), times(r.Scaling)})
	}
	return out
}

func metaLine(m Meta) string {
	if m.Mode == "cputime" {
		return fmt.Sprintf("%s · %s %s/%s · %d CPUs (%s) · -cputime -rounds %d -chunk %s · load average %s → %s · %.0f s",
			m.Date, m.GoVersion, m.GOOS, m.GOARCH, m.NumCPU, m.CPUModel, m.Rounds, m.Chunk, m.LoadAvgStart, m.LoadAvgEnd, m.Seconds)
	}
	return fmt.Sprintf("%s · %s %s/%s · %d CPUs (%s) · -benchtime %s -count %d · load average %s → %s · %.0f s",
		m.Date, m.GoVersion, m.GOOS, m.GOARCH, m.NumCPU, m.CPUModel, m.Benchtime, m.Count, m.LoadAvgStart, m.LoadAvgEnd, m.Seconds)
}

const legend = "ns/unit: wall time per unit, all goroutines together. ×naive, ×chan: this row's throughput ÷ that baseline's in the same scenario at the same procs (>1 = faster). scaling (parallel scenarios only): throughput ÷ the same scenario and subject at GOMAXPROCS 1."

func targetLine(t Target) (verdict, ratio string) {
	switch {
	case t.Met == nil && t.Ratio != nil:
		verdict = "report"
	case t.Met == nil:
		return "not measured", "-"
	case *t.Met:
		verdict = "met"
	default:
		verdict = "NOT met"
	}
	if *t.Ratio == 0 {
		return verdict, "0"
	}
	if math.Abs(*t.Ratio) < 0.01 {
		return verdict, fmt.Sprintf("%.3g", *t.Ratio)
	}
	return verdict, fmt.Sprintf("%.3f", *t.Ratio)
}

func writeText(w io.Writer, rep Report) {
	fmt.Fprintln(w, metaLine(rep.Meta))
	if len(rep.CPU) > 0 {
		writeCPUText(w, rep.CPU)
		fmt.Fprintln(w)
	}
	if len(rep.Results) > 0 || len(rep.CPU) == 0 {
		writeScenarioText(w, rep)
	}
	fmt.Fprintln(w, "Performance targets:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range rep.Targets {
		verdict, ratio := targetLine(t)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", verdict, ratio, t.Name, t.Goal, t.Measured)
	}
	tw.Flush()
}

// writeScenarioText writes the wall-time scenarios' table.
func writeScenarioText(w io.Writer, rep Report) {
	fmt.Fprintln(w, legend)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	prev := ""
	for i, row := range rows(rep.Results) {
		if i > 0 && row[0] != prev && prev != "scenario" {
			// An empty row between scenarios; its cells keep the columns aligned.
			fmt.Fprintln(tw, strings.Repeat("\t", len(row)-1))
		}
		prev = row[0]
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func writeMarkdown(w io.Writer, rep Report) {
	fmt.Fprintf(w, "%s\n\n", metaLine(rep.Meta))
	if len(rep.CPU) > 0 {
		writeCPUMarkdown(w, rep.CPU)
		fmt.Fprintln(w)
	}
	if len(rep.Results) > 0 || len(rep.CPU) == 0 {
		fmt.Fprintf(w, "%s\n\n", legend)
		for i, row := range rows(rep.Results) {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			if i == 0 {
				fmt.Fprintln(w, "|---|---|--:|--:|---|--:|--:|--:|--:|--:|")
			}
		}
	}
	fmt.Fprintln(w, "\n| target | goal | ratio | verdict | measured |\n|---|---|--:|---|---|")
	for _, t := range rep.Targets {
		verdict, ratio := targetLine(t)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", t.Name, t.Goal, ratio, verdict, t.Measured)
	}
}
