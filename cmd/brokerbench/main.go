// Command brokerbench runs the bench package's scenarios on the engine and
// its baselines (the naive global-mutex broker and Go channels) over several
// GOMAXPROCS values, in one process, and prints a table of per-unit cost,
// throughput, allocations, the engine's throughput relative to each baseline
// and its scaling against one proc, then the performance targets
// with the measured ratios. Optionally it writes the results as JSON and a
// plot of throughput against cores.
//
// Each measurement is testing.Benchmark of bench.Func(scenario, kind), the
// same function go test -bench ./bench/ runs, with runtime.GOMAXPROCS set to
// the procs value for the duration.
//
// Usage:
//
//	brokerbench [-benchtime 1s] [-count 1] [-cpu 1,2,4] [-scenarios regexp]
//	            [-subjects regexp] [-json path] [-plot path.svg|.png] [-markdown path]
//	brokerbench -cputime [-rounds 20] [-chunk 25ms] [-cpu list] [-scenarios regexp]
//	            [-subjects regexp] [-json path] [-markdown path]
//
// With -cputime it runs the CPU-time families of package bench/typed
// instead (the typed library against the engine and channels): each
// family's loops in interleaved chunks timed by the process's CPU time
// (package bench/cputime), and the typed library's goals as medians of
// paired CPU-time ratios. -rounds is 1..1000, -chunk 1ms..10s; -plot is
// refused; -cpu, when given, runs every family at each value (else each at
// its own GOMAXPROCS, 1).
//
// Every flag is checked before anything is measured: -benchtime a duration
// in 1ms..1h or a count in 1x..1000000000x; -count 1..100; each -cpu value
// 1..64 when a parallel scenario is selected (they run one goroutine per P,
// each on a partition of its own, and a topic has at most 64 partitions),
// else 1..max(256, 4×NumCPU); -scenarios and -subjects valid regular
// expressions that select at least one pair; -json, -plot and -markdown
// distinct files that can be written (an existing directory), -plot ending
// in .svg or .png; -from a readable file. The default -cpu list stops at 64.
//
// Exit status: 0 on success; 2 for a bad flag, with one line on standard
// error naming the flag, the value and the allowed range (the flag
// package's own errors add the usage); 1 when a measurement fails or an
// output cannot be written.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/bench"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain runs the command and returns its exit status: 0 on success (and
// for -h), 2 for a bad command line (reported before any measuring, on one
// line, or by the flag package with the usage), 1 for any other failure,
// such as a failed measurement.
func realMain(args []string, stdout, stderr io.Writer) int {
	err := run(args, stdout, stderr)
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		if !ue.printed {
			fmt.Fprintln(stderr, "brokerbench:", err)
		}
		return 2
	}
	fmt.Fprintln(stderr, "brokerbench:", err)
	return 1
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var rep Report
	if o.fromPath != "" {
		data, err := os.ReadFile(o.fromPath)
		if err == nil {
			err = json.Unmarshal(data, &rep)
		}
		if err != nil {
			return &usageError{err: fmt.Errorf("-from %s: %w", o.fromPath, err)}
		}
		derive(rep.Results)
		rep.Targets = targetsOf(rep)
		return output(rep, o, stdout, stderr, nil)
	}
	if o.cputime {
		rep.Meta = collectMeta(o)
		start := time.Now()
		fmt.Fprintf(stderr, "brokerbench: -cputime: %d families, -rounds %d, -chunk %v\n", len(o.families), o.rounds, o.chunk)
		var failed []string
		rep.CPU, failed = measureCPU(o, stderr)
		rep.Meta.LoadAvgEnd = loadAvg()
		rep.Meta.Seconds = time.Since(start).Seconds()
		rep.Targets = targetsOf(rep)
		return output(rep, o, stdout, stderr, failed)
	}

	// testing.Benchmark reads -test.benchtime; register the testing flags
	// on the default flag set (which this command does not parse) and set it.
	// validate has checked the value against the same syntax.
	testing.Init()
	if err := flag.Set("test.benchtime", o.benchtime); err != nil {
		return &usageError{err: fmt.Errorf("-benchtime %s: %w", o.benchtime, err)}
	}

	plan := o.plan
	rep.Meta = collectMeta(o)
	start := time.Now()
	fmt.Fprintf(stderr, "brokerbench: %d measurements (%d jobs × %d procs values × count %d), -benchtime %s\n",
		len(plan)*len(o.cpus)*o.count, len(plan), len(o.cpus), o.count, o.benchtime)
	rep.Results = measure(plan, o, stderr)
	rep.Meta.LoadAvgEnd = loadAvg()
	rep.Meta.Seconds = time.Since(start).Seconds()
	derive(rep.Results)
	rep.Targets = targetsOf(rep)

	return output(rep, o, stdout, stderr, nil)
}

// targetsOf computes the targets of what rep measured: the wall-time
// scenarios' targets when it has their results, the CPU-time goals when it
// has CPU-time results.
func targetsOf(rep Report) []Target {
	var ts []Target
	if len(rep.Results) > 0 || len(rep.CPU) == 0 {
		ts = evaluateTargets(rep.Results)
	}
	if len(rep.CPU) > 0 {
		ts = append(ts, evaluateCPUTargets(rep.CPU)...)
	}
	return ts
}

// output prints rep's tables and targets and writes the -markdown, -json and
// -plot files. It fails if any measurement failed; failed lists the
// CPU-time families that did.
func output(rep Report, o options, stdout, stderr io.Writer, failed []string) error {
	writeText(stdout, rep)
	if o.mdPath != "" {
		var md strings.Builder
		writeMarkdown(&md, rep)
		if err := os.WriteFile(o.mdPath, []byte(md.String()), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "brokerbench: wrote", o.mdPath)
	}
	if o.jsonPath != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonPath, append(data, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "brokerbench: wrote", o.jsonPath)
	}
	if o.plotPath != "" {
		if err := writePlot(o.plotPath, rep); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Fprintln(stderr, "brokerbench: wrote", o.plotPath)
	}
	for _, r := range rep.Results {
		if r.Failed {
			failed = append(failed, fmt.Sprintf("%s/%s@%d (%s)", r.Scenario, r.Subject, r.Procs, failure(r)))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d measurements failed: %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

// failure says why r failed, as far as testing.Benchmark lets one know: it
// discards a failed benchmark's messages, and go test -bench shows them.
func failure(r Result) string {
	if r.Iterations == 0 {
		family, _, _ := strings.Cut(r.Scenario, "/")
		return fmt.Sprintf("the benchmark failed; go test -run '^$' -bench '%s' -cpu %d ./bench/ says why", family, r.Procs)
	}
	return fmt.Sprintf("no %s counted in %d iterations; raise -benchtime", bench.Plural(r.Unit), r.Iterations)
}

// job is one scenario on one subject kind.
type job struct {
	sc bench.Scenario
	k  bench.Kind
}

// measure runs every job at every procs value, count times each. Within a
// scenario it interleaves: each repetition measures every procs value and,
// within it, every subject in turn, so that the figures a ratio compares
// (engine and baseline, 2 procs and 1) are taken seconds apart, and the
// k-th samples of any two rows of a scenario form a pair (see
// pairedRatio).
func measure(plan []job, o options, progress io.Writer) []Result {
	var out []Result
	for i := 0; i < len(plan); {
		j := i // plan[i:j] is one scenario's subjects
		for j < len(plan) && plan[j].sc.Name == plan[i].sc.Name {
			j++
		}
		samples := make([][][]Result, len(o.cpus)) // [procs][subject][repetition]
		for c := range samples {
			samples[c] = make([][]Result, j-i)
		}
		for range o.count {
			for c, procs := range o.cpus {
				for n, jb := range plan[i:j] {
					samples[c][n] = append(samples[c][n], measureOne(jb, procs))
				}
			}
		}
		for c := range samples {
			for _, s := range samples[c] {
				r := median(s)
				fmt.Fprintf(progress, "  %-36s %-12s procs=%-3d %s\n", r.Scenario, r.Subject, r.Procs, r.brief())
				out = append(out, r)
			}
		}
		i = j
	}
	return out
}

func measureOne(jb job, procs int) Result {
	prev := runtime.GOMAXPROCS(procs)
	runtime.GC()
	br := testing.Benchmark(bench.Func(jb.sc, jb.k))
	runtime.GOMAXPROCS(prev)
	return fromBenchmark(jb.sc, jb.k.Name, procs, br)
}

// fromBenchmark converts a testing.BenchmarkResult into per-unit figures
// using the metrics the scenario reported.
func fromBenchmark(sc bench.Scenario, subject string, procs int, br testing.BenchmarkResult) Result {
	r := Result{Scenario: sc.Name, Unit: sc.Unit, Parallel: sc.Parallel, Subject: subject, Procs: procs, Iterations: br.N}
	perOp, _, _ := sc.Metric()
	upo := br.Extra[perOp]
	if br.N == 0 || upo <= 0 {
		r.Failed = true
		return r
	}
	units := upo * float64(br.N)
	r.Units = units
	r.NsPerUnit = float64(br.T.Nanoseconds()) / units
	r.UnitsPerSec = units / br.T.Seconds()
	r.AllocsPerUnit = float64(br.MemAllocs) / units
	r.BytesPerUnit = float64(br.MemBytes) / units
	r.SamplesNs = []float64{r.NsPerUnit}
	return r
}

// median returns the sample with the median ns/unit (the lower middle for
// an even count), carrying every sample's ns/unit in repetition order. A
// failed sample makes the result failed.
func median(s []Result) Result {
	var ok []Result
	var ns []float64
	for _, r := range s {
		if r.Failed {
			return r
		}
		ok = append(ok, r)
		ns = append(ns, r.NsPerUnit)
	}
	sort.Slice(ok, func(a, b int) bool { return ok[a].NsPerUnit < ok[b].NsPerUnit })
	m := ok[(len(ok)-1)/2]
	m.SamplesNs = ns
	return m
}

// Meta describes the run: when, where and how.
type Meta struct {
	Date         string  `json:"date"`          // RFC 3339, UTC, at the start
	GoVersion    string  `json:"go_version"`    // runtime.Version()
	GOOS         string  `json:"goos"`          // runtime.GOOS
	GOARCH       string  `json:"goarch"`        // runtime.GOARCH
	NumCPU       int     `json:"num_cpu"`       // runtime.NumCPU(): logical CPUs usable by the process
	CPUModel     string  `json:"cpu_model"`     // from /proc/cpuinfo; "" where unavailable
	Benchtime    string  `json:"benchtime"`     // -benchtime
	Count        int     `json:"count"`         // -count
	CPUs         []int   `json:"cpus"`          // -cpu
	LoadAvgStart string  `json:"loadavg_start"` // /proc/loadavg 1, 5 and 15 minute averages at the start
	LoadAvgEnd   string  `json:"loadavg_end"`   // the same at the end
	Seconds      float64 `json:"duration_s"`    // wall time of all measurements, in seconds
	Command      string  `json:"command"`       // the command line
	// Mode is "cputime" for a -cputime run, with its -rounds and -chunk;
	// empty for the wall-time scenarios.
	Mode   string `json:"mode,omitempty"`
	Rounds int    `json:"rounds,omitempty"`
	Chunk  string `json:"chunk,omitempty"`
}

func collectMeta(o options) Meta {
	m := Meta{
		Date:         time.Now().UTC().Format(time.RFC3339),
		GoVersion:    runtime.Version(),
		GOOS:         runtime.GOOS,
		GOARCH:       runtime.GOARCH,
		NumCPU:       runtime.NumCPU(),
		CPUModel:     cpuModel(),
		Benchtime:    o.benchtime,
		Count:        o.count,
		CPUs:         o.cpus,
		LoadAvgStart: loadAvg(),
		Command:      strings.Join(os.Args, " "),
	}
	if o.cputime {
		m.Mode, m.Rounds, m.Chunk, m.Benchtime, m.Count = "cputime", o.rounds, o.chunk.String(), "", 0
	}
	return m
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAvg returns the 1, 5 and 15 minute load averages from /proc/loadavg,
// or "".
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
