package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/f91dcac0/tributary/bench"
	"github.com/f91dcac0/tributary/bench/cputime"
	"github.com/f91dcac0/tributary/bench/typed"
	"github.com/f91dcac0/tributary/cmd/internal/flagx"
	"github.com/f91dcac0/tributary/engine"
)

// The ranges of the numeric flags. Every flag is checked, by validate and
// checkFiles, before anything is measured.
const (
	minBenchtime   = time.Millisecond // -benchtime as a duration: 1ms..1h
	maxBenchtime   = time.Hour
	benchtimeRange = "1ms..1h"     // minBenchtime..maxBenchtime, as a user writes it
	maxBenchIters  = 1_000_000_000 // -benchtime as a count: 1x..1000000000x
	maxCount       = 100           // -count: 1..100

	// maxParallelCPU bounds -cpu when a parallel scenario is selected: those
	// run one goroutine per P, each on a partition of its own (or a member
	// of a 64-member group), and a topic has at most 64 partitions; above it
	// testing.Benchmark fails them, without a reason.
	maxParallelCPU = engine.MaxPartitionCount

	// -cputime's flags: -rounds 1..1000, -chunk 1ms..10s.
	maxRounds = 1000
	minChunk  = time.Millisecond
	maxChunk  = 10 * time.Second
)

// maxCPU returns the largest -cpu value allowed when no parallel scenario
// is selected: max(256, 4×NumCPU). The sequential scenarios run in one
// goroutine whatever GOMAXPROCS; far above the CPU count they measure
// nothing new, and at tens of thousands the runtime runs out of threads.
func maxCPU() int { return max(256, 4*runtime.NumCPU()) }

// options are the command-line flags: the values as given, then what
// validate derives from them.
type options struct {
	benchtime string        // per measurement: a duration ("1s") or an iteration count ("100x")
	count     int           // measurements per (scenario, subject, procs); the median is kept
	cpuList   string        // -cpu as given
	scenExpr  string        // -scenarios as given
	subjExpr  string        // -subjects as given
	jsonPath  string        // "" for none
	plotPath  string        // "" for none; .svg or .png
	mdPath    string        // "" for none; the table and targets as Markdown
	fromPath  string        // "" to measure; else re-render the results of this JSON file
	cputime   bool          // the CPU-time interleaved mode: bench/typed's families, not the scenarios
	rounds    int           // -cputime: chunks of each loop, and paired ratios
	chunk     time.Duration // -cputime: CPU time a chunk aims at

	// Set by validate.
	cpus      []int            // GOMAXPROCS values, ascending, without duplicates
	scenarios *regexp.Regexp   // selects scenarios by name
	subjects  *regexp.Regexp   // selects subject kinds by name
	plan      []job            // the selected (scenario, subject) pairs; nil with -from or -cputime
	families  []cputime.Family // -cputime: the selected families, their loops filtered; nil with -from
	cpuSet    bool             // -cpu was given
}

// usageError is a bad command line. main exits with status 2 for it, as the
// flag package does for the errors it reports; it prints the error on one
// line unless printed says the flag package has printed it, with the usage.
type usageError struct {
	err     error
	printed bool
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// newFlagSet returns the command's flag set, which parses into o.
func newFlagSet(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("brokerbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.benchtime, "benchtime", "1s", fmt.Sprintf("run each measurement for this `duration` (%s), or N iterations written Nx (1x..%dx), as go test -benchtime", benchtimeRange, maxBenchIters))
	flagx.IntVar(fs, &o.count, "count", 1, fmt.Sprintf("measure each (scenario, subject, procs) `n` times (1..%d) and keep the median ns/unit", maxCount))
	fs.StringVar(&o.cpuList, "cpu", defaultCPUs(min(runtime.NumCPU(), maxParallelCPU)), fmt.Sprintf("comma-separated GOMAXPROCS `list`, each value in 1..%d when a parallel scenario is selected (a topic has at most %[1]d partitions), else 1..%d (default: 1, 2, 4, … up to and including this machine's CPU count, at most %[1]d)", maxParallelCPU, maxCPU()))
	fs.StringVar(&o.scenExpr, "scenarios", ".", "run only scenarios whose name matches this `regexp`")
	fs.StringVar(&o.subjExpr, "subjects", ".", "run only subject kinds (engine, engine-poll, engine-rw, naive, chan, chan-raw) matching this `regexp`")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to `path` (its directory must exist; checked before measuring)")
	fs.StringVar(&o.plotPath, "plot", "", "write a plot of throughput against GOMAXPROCS to `path` (.svg or .png; its directory must exist)")
	fs.StringVar(&o.mdPath, "markdown", "", "also write the table and targets as Markdown to `path` (its directory must exist)")
	fs.StringVar(&o.fromPath, "from", "", "measure nothing: print (and -markdown, -plot) the results saved by -json in `path`, targets recomputed")
	fs.BoolVar(&o.cputime, "cputime", false, "CPU-time interleaved mode: run the CPU-time families below instead of the scenarios, each family's loops in interleaved chunks timed by the process's CPU time (getrusage RUSAGE_SELF, user+sys); -scenarios selects families, -subjects loops; -benchtime, -count and -plot do not apply")
	flagx.IntVar(fs, &o.rounds, "rounds", 20, fmt.Sprintf("-cputime: chunks of each loop, and paired ratios, `n` (1..%d)", maxRounds))
	fs.DurationVar(&o.chunk, "chunk", 25*time.Millisecond, "-cputime: the CPU time one chunk aims at, a `duration` in 1ms..10s; each loop's ops per chunk are fixed by calibration before the rounds")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: brokerbench [flags]\n\nRuns the bench package's scenarios on the engine and its baselines over GOMAXPROCS values.\nA bad flag value exits with status 2 before anything is measured.\n\nScenarios:")
		for _, sc := range bench.Scenarios() {
			fmt.Fprintf(fs.Output(), "  %-36s %s\n", sc.Name, sc.Doc)
		}
		fmt.Fprintln(fs.Output(), "\nSubjects:")
		for _, k := range bench.Kinds() {
			fmt.Fprintf(fs.Output(), "  %-12s %s\n", k.Name, k.Doc)
		}
		fmt.Fprint(fs.Output(), cputimeUsage)
		for _, f := range typed.Families() {
			fmt.Fprintf(fs.Output(), "  %-36s GOMAXPROCS %d; %s\n", f.Name, f.Procs, f.Doc)
			for _, l := range f.Loops {
				fmt.Fprintf(fs.Output(), "    %-34s %s\n", l.Name, l.Doc)
			}
		}
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses and checks the command line. Every error it returns is
// a *usageError (flag.ErrHelp for -h): nothing has been measured or
// written.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := newFlagSet(&o, stderr)
	if err := fs.Parse(args); err != nil {
		return o, &usageError{err: err, printed: true}
	}
	if fs.NArg() > 0 {
		return o, &usageError{err: fmt.Errorf("unexpected arguments %q (every setting is a flag; brokerbench -h lists them)", fs.Args())}
	}
	fs.Visit(func(f *flag.Flag) { o.cpuSet = o.cpuSet || f.Name == "cpu" })
	if err := o.validate(); err != nil {
		return o, &usageError{err: err}
	}
	if err := o.checkFiles(); err != nil {
		return o, &usageError{err: err}
	}
	return o, nil
}

// validate checks every flag value against its range and sets o's derived
// fields. It touches no file (checkFiles does). The error names the flag,
// the value and the allowed range, on one line.
func (o *options) validate() error {
	if err := checkBenchtime(o.benchtime); err != nil {
		return err
	}
	if o.count < 1 || o.count > maxCount {
		return fmt.Errorf("-count %d: must be in 1..%d", o.count, maxCount)
	}
	var err error
	if o.scenarios, err = regexp.Compile(o.scenExpr); err != nil {
		return fmt.Errorf("-scenarios %q: not a regular expression: %v", o.scenExpr, err)
	}
	if o.subjects, err = regexp.Compile(o.subjExpr); err != nil {
		return fmt.Errorf("-subjects %q: not a regular expression: %v", o.subjExpr, err)
	}
	if o.plotPath != "" {
		if _, err := plotFormat(o.plotPath); err != nil {
			return err
		}
	}
	if o.cputime {
		return o.validateCPUTime()
	}
	hi, why := maxCPU(), "max(256, 4×NumCPU); no parallel scenario selected"
	if o.fromPath == "" {
		if o.plan, err = selectJobs(o.scenarios, o.subjects); err != nil {
			return err
		}
		if slices.ContainsFunc(o.plan, func(j job) bool { return j.sc.Parallel }) {
			hi, why = maxParallelCPU, fmt.Sprintf("the parallel scenarios selected need a partition per P; without them 1..%d", maxCPU())
		}
	}
	if o.cpus, err = parseCPUs(o.cpuList, hi); err != nil {
		return fmt.Errorf("%w (%s)", err, why)
	}
	return nil
}

// checkBenchtime checks s against the syntax of go test -benchtime and
// the ranges minBenchtime..maxBenchtime and 1x..maxBenchIters x.
func checkBenchtime(s string) error {
	if n, ok := strings.CutSuffix(s, "x"); ok {
		if v, err := strconv.Atoi(n); err == nil && v >= 1 && v <= maxBenchIters {
			return nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d >= minBenchtime && d <= maxBenchtime {
		return nil
	}
	return fmt.Errorf("-benchtime %s: must be a duration in %s or an iteration count in 1x..%dx", s, benchtimeRange, maxBenchIters)
}

// selectJobs returns the (scenario, subject) pairs the expressions select,
// in bench.Scenarios order, or an error when they select none.
func selectJobs(scenarios, subjects *regexp.Regexp) ([]job, error) {
	var plan []job
	for _, sc := range bench.Scenarios() {
		if !scenarios.MatchString(sc.Name) {
			continue
		}
		for _, name := range sc.Subjects {
			if !subjects.MatchString(name) {
				continue
			}
			k, ok := bench.KindByName(name)
			if !ok {
				return nil, fmt.Errorf("scenario %s: unknown subject %q", sc.Name, name)
			}
			plan = append(plan, job{sc, k})
		}
	}
	if len(plan) == 0 {
		return nil, fmt.Errorf("-scenarios %q -subjects %q: select no (scenario, subject) pair; brokerbench -h lists them", scenarios, subjects)
	}
	return plan, nil
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

// parseCPUs parses a comma-separated list of GOMAXPROCS values, each in
// 1..hi, and returns them ascending, without duplicates.
func parseCPUs(s string, hi int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > hi {
			return nil, fmt.Errorf("-cpu %s: each value must be in 1..%d, not %q", s, hi, f)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// checkFiles checks, before anything is measured, that -from can be read
// and that -json, -plot and -markdown can be written: each names a
// different file, not a directory, and an existing file is writable, a new
// one creatable (tried with a temporary file in its directory, removed at
// once). It creates and changes nothing.
func (o *options) checkFiles() error {
	if o.fromPath != "" {
		f, err := os.Open(o.fromPath)
		if err != nil {
			return fmt.Errorf("-from %s: %v", o.fromPath, cause(err))
		}
		f.Close()
	}
	seen := map[string]string{}
	for _, out := range []struct{ flag, path string }{{"json", o.jsonPath}, {"plot", o.plotPath}, {"markdown", o.mdPath}} {
		if out.path == "" {
			continue
		}
		clean := filepath.Clean(out.path)
		if prev, ok := seen[clean]; ok {
			return fmt.Errorf("-%s %s: the same file as -%s", out.flag, out.path, prev)
		}
		seen[clean] = out.flag
		if err := checkWritable(out.path); err != nil {
			return fmt.Errorf("-%s %s: %v", out.flag, out.path, err)
		}
	}
	return nil
}

// checkWritable reports why os.WriteFile(path) would fail, without
// creating or changing anything.
func checkWritable(path string) error {
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return errors.New("is a directory")
	case err == nil && st.Mode().IsRegular():
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("not writable: %v", cause(err))
		}
		return f.Close()
	case err == nil: // a device such as /dev/null: opening a FIFO could block
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return cause(err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".brokerbench-check-*")
	if err != nil {
		return fmt.Errorf("cannot create a file in directory %s: %v", dir, cause(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// cause returns the reason inside err, a *fs.PathError, without the path
// (which a message names already, or which is a temporary name).
func cause(err error) error {
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
