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
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/bench"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, "brokerbench:", err)
		os.Exit(1)
	}
}

// options are the parsed command-line flags.
type options struct {
	benchtime string         // per measurement: a duration ("1s") or an iteration count ("100x")
	count     int            // measurements per (scenario, subject, procs); the median is kept
	cpus      []int          // GOMAXPROCS values, ascending
	scenarios *regexp.Regexp // selects scenarios by name
	subjects  *regexp.Regexp // selects subject kinds by name
	jsonPath  string         // "" for none
	plotPath  string         // "" for none; .svg or .png
	mdPath    string         // "" for none; the table and targets as Markdown
	fromPath  string         // "" to measure; else re-render the results of this JSON file
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("brokerbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var cpus, scenarios, subjects string
	fs.StringVar(&o.benchtime, "benchtime", "1s", "run each measurement for this `duration`, or N iterations written Nx (as go test -benchtime)")
	fs.IntVar(&o.count, "count", 1, "measure each (scenario, subject, procs) `n` times and keep the median ns/unit")
	fs.StringVar(&cpus, "cpu", defaultCPUs(runtime.NumCPU()), "comma-separated GOMAXPROCS `list` (default: 1, 2, 4, … up to and including this machine's CPU count)")
	fs.StringVar(&scenarios, "scenarios", ".", "run only scenarios whose name matches this `regexp`")
	fs.StringVar(&subjects, "subjects", ".", "run only subject kinds (engine, engine-poll, engine-rw, naive, chan, chan-raw) matching this `regexp`")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to `path`")
	fs.StringVar(&o.plotPath, "plot", "", "write a plot of throughput against GOMAXPROCS to `path` (.svg or .png)")
	fs.StringVar(&o.mdPath, "markdown", "", "also write the table and targets as Markdown to `path`")
	fs.StringVar(&o.fromPath, "from", "", "measure nothing: print (and -markdown, -plot) the results saved by -json in `path`, targets recomputed")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: brokerbench [flags]\n\nRuns the bench package's scenarios on the engine and its baselines over GOMAXPROCS values.\n\nScenarios:")
		for _, sc := range bench.Scenarios() {
			fmt.Fprintf(fs.Output(), "  %-36s %s\n", sc.Name, sc.Doc)
		}
		fmt.Fprintln(fs.Output(), "\nSubjects:")
		for _, k := range bench.Kinds() {
			fmt.Fprintf(fs.Output(), "  %-12s %s\n", k.Name, k.Doc)
		}
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.cpus, err = parseCPUs(cpus); err != nil {
		return o, err
	}
	if o.count < 1 {
		return o, fmt.Errorf("-count %d: want at least 1", o.count)
	}
	if o.scenarios, err = regexp.Compile(scenarios); err != nil {
		return o, fmt.Errorf("-scenarios: %w", err)
	}
	if o.subjects, err = regexp.Compile(subjects); err != nil {
		return o, fmt.Errorf("-subjects: %w", err)
	}
	if o.plotPath != "" {
		if _, err := plotFormat(o.plotPath); err != nil {
			return o, err
		}
	}
	return o, nil
}

// defaultCPUs lists the powers of two below n, then n: "1,2,4,8,16" for 16,
// "1,2,4,6" for 6.
func defaultCPUs(n int) string {
	var s []string
	for p := 1; p < n; p *= 2 {
		s = append(s, strconv.Itoa(p))
	}
	return strings.Join(append(s, strconv.Itoa(max(n, 1))), ",")
}

// parseCPUs parses a comma-separated list of positive GOMAXPROCS values and
// returns them ascending, without duplicates.
func parseCPUs(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-cpu %q: %q is not a positive integer", s, f)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// testing.Benchmark reads -test.benchtime; register the testing flags
	// on the default flag set (which this command does not parse) and set it.
	testing.Init()
	if err := flag.Set("test.benchtime", o.benchtime); err != nil {
		return fmt.Errorf("-benchtime %q: %w", o.benchtime, err)
	}

	var rep Report
	if o.fromPath != "" {
		data, err := os.ReadFile(o.fromPath)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			return fmt.Errorf("-from %s: %w", o.fromPath, err)
		}
		derive(rep.Results)
		rep.Targets = evaluateTargets(rep.Results)
		return output(rep, o, stdout, stderr)
	}

	var plan []job
	for _, sc := range bench.Scenarios() {
		if !o.scenarios.MatchString(sc.Name) {
			continue
		}
		for _, name := range sc.Subjects {
			if !o.subjects.MatchString(name) {
				continue
			}
			k, ok := bench.KindByName(name)
			if !ok {
				return fmt.Errorf("scenario %s: unknown subject %q", sc.Name, name)
			}
			plan = append(plan, job{sc, k})
		}
	}
	if len(plan) == 0 {
		return fmt.Errorf("no scenario matches -scenarios %q and -subjects %q", o.scenarios, o.subjects)
	}

	rep.Meta = collectMeta(o)
	start := time.Now()
	fmt.Fprintf(stderr, "brokerbench: %d measurements (%d jobs × %d procs values × count %d), -benchtime %s\n",
		len(plan)*len(o.cpus)*o.count, len(plan), len(o.cpus), o.count, o.benchtime)
	rep.Results = measure(plan, o, stderr)
	rep.Meta.LoadAvgEnd = loadAvg()
	rep.Meta.Seconds = time.Since(start).Seconds()
	derive(rep.Results)
	rep.Targets = evaluateTargets(rep.Results)

	return output(rep, o, stdout, stderr)
}

// output prints rep's table and targets and writes the -markdown, -json and
// -plot files. It fails if any measurement failed.
func output(rep Report, o options, stdout, stderr io.Writer) error {
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
	var failed []string
	for _, r := range rep.Results {
		if r.Failed {
			failed = append(failed, fmt.Sprintf("%s/%s@%d", r.Scenario, r.Subject, r.Procs))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d measurements failed: %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
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
}

func collectMeta(o options) Meta {
	return Meta{
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
