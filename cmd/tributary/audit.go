package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/f91dcac0/tributary/engine"
)

// runAudit is `tributary audit [flags]`: it parses the flags from args,
// runs the worked examples and the concurrent workload, prints the results
// to stdout and returns the exit status: exitOK when every check passed,
// exitFailed when one failed, exitUsage for a bad command line, reported on
// one line on stderr before any work starts (-h prints the usage on stdout
// and returns exitOK).
func runAudit(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseAuditFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "tributary audit: %v\n", err)
		return exitUsage
	}

	var failures []string
	fmt.Fprintln(stdout, "== worked examples ==")
	if bad := runExamples(stdout); len(bad) > 0 {
		failures = append(failures, fmt.Sprintf("%d worked-example step(s) mismatched", len(bad)))
	}

	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "== concurrent workload ==")
	describeWorkload(stdout, cfg)

	h, err := runWorkload(cfg)
	if err != nil {
		printWrapped(stdout, fmt.Sprintf("audit: FAILED: %v", err))
		return exitFailed
	}
	rep := verify(h)
	fmt.Fprintln(stdout)
	printReport(stdout, h, rep)
	failures = append(failures, rep.Problems...)

	if len(failures) > 0 {
		printWrapped(stdout, "audit: FAILED: "+strings.Join(failures, "; "))
		return exitFailed
	}
	fmt.Fprintln(stdout, "audit: all checks passed")
	return exitOK
}

// The ranges of the audit's flags, which auditConfig.validate also
// enforces. Memory grows with the deliveries the audit keeps to verify
// them: about records × (150 B + 250 B × groups) at -retry 0.5, each record
// being delivered 1/(1-retry) times on average. So records, records ×
// groups and retry are bounded to keep a run well under 1 GB. Peak RSS of
// "tributary audit" (go1.26, linux/amd64, 2 CPUs, 2026-12-01): 743 MB for
// -records 1000000 -groups 2 -retry 0.5; 650 MB for -records 666666
// -retry 0.5; 596 MB for -records 15625 -groups 128 -members 64
// -producers 256 -retry 0.5 (which took 55 s of the default 1m -timeout);
// before these bounds, 1,000,000 records in 3 groups at -retry 0.5 took
// 1.02 GB, and 10,000,000 at the defaults would take about 6 GB.
const (
	maxPartitions = engine.MaxPartitionCount   // -partitions 1..64
	maxCapacity   = engine.MaxExtendedCapacity // -capacity 1..16777216 (WithExtendedCapacity)
	maxProducers  = 256                        // -producers 1..256
	maxRecords    = 1_000_000                  // -records 1..1000000
	maxGroups     = 128                        // -groups 1..128
	maxMembers    = 64                         // -members 1..64
	maxBatch      = engine.MaxPollRecords      // -batch 1..64
	maxRetry      = 0.5                        // -retry 0..0.5

	// maxRecordGroups bounds -records × -groups, the records whose
	// acknowledgements the audit keeps and checks.
	maxRecordGroups = 2_000_000

	// minChurn is the shortest -churn interval (other than 0): much faster,
	// the rebalances cancel deliveries faster than members settle them.
	minChurn   = time.Millisecond
	maxChurn   = time.Hour
	minTimeout = time.Millisecond
	maxTimeout = time.Hour
)

// parseAuditFlags parses and checks the audit's flags. It writes nothing but
// the usage, to help, for -h (and then returns flag.ErrHelp). Any other
// error is one line naming the first bad flag, the value given and the
// allowed range; nothing has started then. A zero -seed is replaced by one
// drawn from the clock.
func parseAuditFlags(args []string, help io.Writer) (auditConfig, error) {
	cfg := defaultAuditConfig()
	var bad error // the first value a flag refused, in the house format
	fs := flag.NewFlagSet("tributary audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by the caller, on one line
	fs.Usage = func() {}
	intVar(fs, &bad, &cfg.Partitions, "partitions", 1, maxPartitions, "`n` partitions of the workload topic")
	intVar(fs, &bad, &cfg.Capacity, "capacity", 1, maxCapacity, "`n` records retained per partition; small values exercise back-pressure")
	intVar(fs, &bad, &cfg.Producers, "producers", 1, maxProducers, "`n` producer goroutines")
	intVar(fs, &bad, &cfg.Records, "records", 1, maxRecords, "`n` records published in total across all producers",
		fmt.Sprintf("records × groups at most %d", maxRecordGroups))
	intVar(fs, &bad, &cfg.Groups, "groups", 1, maxGroups, "`n` consumer groups, each consuming every record")
	intVar(fs, &bad, &cfg.Members, "members", 1, maxMembers, "`n` member goroutines per group")
	intVar(fs, &bad, &cfg.Batch, "batch", 1, maxBatch, "at most `n` records per poll")
	fs.Var(&floatValue{p: &cfg.Retry, name: "retry", lo: 0, hi: maxRetry, bad: &bad}, "retry",
		fmt.Sprintf("`probability` that a delivery is retried instead of acknowledged, in 0..%g", maxRetry))
	fs.Var(&durationValue{p: &cfg.Churn, name: "churn", lo: minChurn, hi: maxChurn, zero: true, bad: &bad}, "churn",
		fmt.Sprintf("`interval` between member leave-and-rejoin events while producers run, 0 or %s..%s; 0 disables churn", fmtDuration(minChurn), fmtDuration(maxChurn)))
	fs.Var(&seedValue{p: &cfg.Seed, bad: &bad}, "seed", "`seed` of the workload's random choices, any unsigned 64-bit integer; 0 picks one from the clock")
	fs.Var(&durationValue{p: &cfg.Timeout, name: "timeout", lo: minTimeout, hi: maxTimeout, bad: &bad}, "timeout",
		fmt.Sprintf("`deadline` for the workload, %s..%s, after which the audit fails", fmtDuration(minTimeout), fmtDuration(maxTimeout)))
	if err := fs.Parse(args); err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			fs.SetOutput(help)
			fmt.Fprintf(help, "Usage: tributary audit [flags]\n\n"+
				"Replays the broker contract's worked examples, then runs a concurrent\n"+
				"workload and verifies that every group acknowledged every record once, in order.\n"+
				"A bad flag value exits with status 2 before anything runs.\n\nFlags:\n")
			printFlags(help, fs)
			return cfg, err
		case bad != nil:
			return cfg, bad
		}
		return cfg, fmt.Errorf("%s (tributary audit -h lists the flags)", cutEchoes(err.Error(), args))
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %s (every setting is a flag; tributary audit -h lists them)", shown(fs.Arg(0)))
	}
	if cfg.Records*cfg.Groups > maxRecordGroups {
		return cfg, fmt.Errorf("-records %d with -groups %d: records × groups must be at most %d", cfg.Records, cfg.Groups, maxRecordGroups)
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	return cfg, cfg.validate()
}

// intVar defines an integer flag that accepts lo..hi, written in decimal,
// and records the first refusal in *bad. Its usage ends with the range and
// the further limits in more: "(1..64; …)".
func intVar[T int | int32](fs *flag.FlagSet, bad *error, p *T, name string, lo, hi T, usage string, more ...string) {
	limits := strings.Join(append([]string{fmt.Sprintf("%d..%d", lo, hi)}, more...), "; ")
	fs.Var(&intValue[T]{p: p, name: name, lo: lo, hi: hi, bad: bad}, name, usage+" ("+limits+")")
}

// intValue, floatValue, durationValue and seedValue are the flag.Values of
// the audit's flags. Set refuses a value outside lo..hi and, when it is the
// first refusal, stores in *bad the one-line error parseAuditFlags returns
// ("-name value: must be in lo..hi"), which the flag package's own message
// would bury under the usage. String is safe on the zero value, as
// flag.PrintDefaults requires.
type intValue[T int | int32] struct {
	p      *T
	name   string
	lo, hi T
	bad    *error
}

func (v *intValue[T]) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v *intValue[T]) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < int64(v.lo) || n > int64(v.hi) {
		return refuse(v.bad, v.name, s, fmt.Sprintf("in %d..%d", v.lo, v.hi))
	}
	*v.p = T(n)
	return nil
}

type floatValue struct {
	p      *float64
	name   string
	lo, hi float64
	bad    *error
}

func (v *floatValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

func (v *floatValue) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= v.lo && f <= v.hi) { // NaN fails both
		return refuse(v.bad, v.name, s, fmt.Sprintf("in %g..%g", v.lo, v.hi))
	}
	*v.p = f
	return nil
}

// durationValue accepts lo..hi, and 0 too when zero is set.
type durationValue struct {
	p      *time.Duration
	name   string
	lo, hi time.Duration
	zero   bool
	bad    *error
}

func (v *durationValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || (d < v.lo || d > v.hi) && !(v.zero && d == 0) {
		want := "in " + fmtDuration(v.lo) + ".." + fmtDuration(v.hi)
		if v.zero {
			want = "0 or " + want
		}
		return refuse(v.bad, v.name, s, want)
	}
	*v.p = d
	return nil
}

type seedValue struct {
	p   *uint64
	bad *error
}

func (v *seedValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strconv.FormatUint(*v.p, 10)
}

func (v *seedValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return refuse(v.bad, "seed", s, fmt.Sprintf("in 0..%d", uint64(math.MaxUint64)))
	}
	*v.p = n
	return nil
}

// refuse stores in *bad, unless it holds an earlier refusal, the error
// "-name value: must be want" (want such as "in 1..64"), and returns it
// for the flag package.
func refuse(bad *error, name, value, want string) error {
	err := fmt.Errorf("-%s %s: must be %s", name, shown(value), want)
	if *bad == nil {
		*bad = err
	}
	return err
}

// shown returns s as a message shows a command-line value: as typed, or
// quoted when it is empty or holds spaces or unprintable characters; cut
// to maxEcho bytes either way (quote, clipped).
func shown(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return quote(s)
	}
	return clipped(s)
}

// fmtDuration formats d as a flag value without time.Duration's trailing
// zero units: "1h", not "1h0m0s".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// ---------------------------------------------------------------------------
// Worked examples

// step is one broker call of a worked example: call describes it, do makes
// it and formats its result, want is the result the contract specifies.
type step struct {
	call string // the call as printed; a line after it is a note, printed under it
	do   func() (string, error)
	want string
}

// runExamples replays the contract's worked examples, each on a fresh
// broker, writing one line per call to w. It returns a description of every
// step whose result differed from the contract (nil when all matched).
// describeWorkload writes what the workload of cfg does, wrapped to
// lineWidth.
func describeWorkload(w io.Writer, cfg auditConfig) {
	fmt.Fprintf(w, "seed %d (rerun with -seed %d to repeat the random choices)\n", cfg.Seed, cfg.Seed)
	fmt.Fprintf(w, "topic %q: %d partitions, capacity %d records each\n", workloadTopic, cfg.Partitions, cfg.Capacity)
	churn := "no churn"
	if cfg.Churn > 0 {
		churn = "a member leaves and rejoins every " + cfg.Churn.String() + " while producers run"
	}
	printWrapped(w, fmt.Sprintf("%d producer(s) publish %d records to random partitions; %d group(s) of %d member(s) poll %d at a time, "+
		"retry %.0f%% of deliveries, %s; deadline %s", cfg.Producers, cfg.Records, cfg.Groups, cfg.Members, cfg.Batch, cfg.Retry*100, churn, cfg.Timeout))
}

// printWrapped writes text to w wrapped at spaces to lineWidth.
func printWrapped(w io.Writer, text string) {
	for _, l := range wrap(text, lineWidth, 0, "") {
		fmt.Fprintln(w, l)
	}
}

func runExamples(w io.Writer) []string {
	var bad []string

	// Example 1 (capacity 2): retry redelivers, ack advances; the last two
	// steps show retention: the acknowledged record frees a slot, then the
	// partition is full again.
	b, err := engine.New(2)
	if err != nil {
		return []string{fmt.Sprintf("New(2): %v", err)}
	}
	const o, g, m = "orders", "billing", "m1"
	fmt.Fprintln(w, "Each step: the call, its result, and whether it matches the contract.")
	fmt.Fprintln(w, "Records print as topic/partition/offset \"payload\".")
	fmt.Fprintln(w, "example 1: retry and acknowledge (capacity 2)")
	bad = append(bad, runSteps(w, []step{
		{`Create("orders", 1)`, func() (string, error) { return fmtBool(b.Create(o, 1)) }, "true"},
		{`Publish("orders", 0, "a")`, func() (string, error) { return fmtOffset(b.Publish(o, 0, "a")) }, "0"},
		{`Publish("orders", 0, "b")`, func() (string, error) { return fmtOffset(b.Publish(o, 0, "b")) }, "1"},
		{`Join("orders", "billing", "m1")`, func() (string, error) { return fmtPartitions(b.Join(o, g, m)) }, "[0]"},
		{"Poll(\"orders\", \"billing\", \"m1\", 2)\n(one in flight per partition)", func() (string, error) { return fmtRecords(b.Poll(o, g, m, 2)) }, `[orders/0/0 "a"]`},
		{`Retry("orders", "billing", "m1", 0, 0)`, func() (string, error) { return fmtBool(b.Retry(o, g, m, 0, 0)) }, "true"},
		{`Poll("orders", "billing", "m1", 2)`, func() (string, error) { return fmtRecords(b.Poll(o, g, m, 2)) }, `[orders/0/0 "a"]`},
		{`Ack("orders", "billing", "m1", 0, 0)`, func() (string, error) { return fmtBool(b.Ack(o, g, m, 0, 0)) }, "true"},
		{`Poll("orders", "billing", "m1", 2)`, func() (string, error) { return fmtRecords(b.Poll(o, g, m, 2)) }, `[orders/0/1 "b"]`},
		{`Publish("orders", 0, "c")`, func() (string, error) { return fmtOffset(b.Publish(o, 0, "c")) }, "2"},
		{`Publish("orders", 0, "d")`, func() (string, error) { return fmtOffset(b.Publish(o, 0, "d")) }, "-1"},
	})...)

	// Example 2: b joining moves partition 1 from a to b, cancelling a's
	// in-flight delivery there; a keeps its deliveries on 0 and 2.
	b, err = engine.New(4)
	if err != nil {
		return append(bad, fmt.Sprintf("New(4): %v", err))
	}
	const t, grp = "events", "g"
	fmt.Fprintln(w, "example 2: rebalance (3 partitions, capacity 4)")
	bad = append(bad, runSteps(w, []step{
		{`Create("events", 3)`, func() (string, error) { return fmtBool(b.Create(t, 3)) }, "true"},
		{`Publish("events", 0, "x")`, func() (string, error) { return fmtOffset(b.Publish(t, 0, "x")) }, "0"},
		{`Publish("events", 1, "y")`, func() (string, error) { return fmtOffset(b.Publish(t, 1, "y")) }, "0"},
		{`Publish("events", 2, "z")`, func() (string, error) { return fmtOffset(b.Publish(t, 2, "z")) }, "0"},
		{`Join("events", "g", "a")`, func() (string, error) { return fmtPartitions(b.Join(t, grp, "a")) }, "[0 1 2]"},
		{`Poll("events", "g", "a", 3)`, func() (string, error) { return fmtRecords(b.Poll(t, grp, "a", 3)) }, `[events/0/0 "x" events/1/0 "y" events/2/0 "z"]`},
		{`Join("events", "g", "b")`, func() (string, error) { return fmtPartitions(b.Join(t, grp, "b")) }, "[1]"},
		{"Join(\"events\", \"g\", \"a\")\n(already a member: no change since step 7)", func() (string, error) { return fmtPartitions(b.Join(t, grp, "a")) }, "[0 2]"},
		{`Poll("events", "g", "b", 3)`, func() (string, error) { return fmtRecords(b.Poll(t, grp, "b", 3)) }, `[events/1/0 "y"]`},
		{`Ack("events", "g", "a", 1, 0)`, func() (string, error) { return fmtBool(b.Ack(t, grp, "a", 1, 0)) }, "false"},
		{`Poll("events", "g", "a", 3)`, func() (string, error) { return fmtRecords(b.Poll(t, grp, "a", 3)) }, "[]"},
		{`Ack("events", "g", "a", 0, 0)`, func() (string, error) { return fmtBool(b.Ack(t, grp, "a", 0, 0)) }, "true"},
		{`Ack("events", "g", "b", 1, 0)`, func() (string, error) { return fmtBool(b.Ack(t, grp, "b", 1, 0)) }, "true"},
		{`Ack("events", "g", "a", 2, 0)`, func() (string, error) { return fmtBool(b.Ack(t, grp, "a", 2, 0)) }, "true"},
	})...)
	return bad
}

// runSteps runs steps in order, writing each call, its result and "ok" or
// "MISMATCH" to w as an aligned table (a step's note on a line of its own
// under its call, so that the table stays narrow), and returns a
// description of each mismatched step.
func runSteps(w io.Writer, steps []step) []string {
	var bad []string
	rows := make([][3]string, len(steps)) // number, call, result
	notes := make([]string, len(steps))
	for i, s := range steps {
		call, note, _ := strings.Cut(s.call, "\n")
		got, err := s.do()
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != s.want {
			bad = append(bad, fmt.Sprintf("%s = %s, want %s", call, got, s.want))
		}
		rows[i], notes[i] = [3]string{strconv.Itoa(i + 1), call, "-> " + got}, note
	}
	var cols [3]int
	for _, r := range rows {
		for c := range r {
			cols[c] = max(cols[c], width(r[c]))
		}
	}
	pad := func(s string, n int) string { return s + strings.Repeat(" ", n-width(s)) }
	for i, r := range rows {
		verdict := "ok"
		if s := steps[i]; r[2] != "-> "+s.want {
			verdict = "MISMATCH (want " + s.want + ")"
		}
		fmt.Fprintf(w, "  %s  %s  %s  %s\n", pad(r[0], cols[0]), pad(r[1], cols[1]), pad(r[2], cols[2]), verdict)
		if notes[i] != "" {
			fmt.Fprintf(w, "  %s  %s\n", strings.Repeat(" ", cols[0]), notes[i])
		}
	}
	return bad
}

// fmtBool, fmtOffset, fmtPartitions and fmtRecords format a broker call's
// result for a worked-example step, passing its error through.
func fmtBool(v bool, err error) (string, error)    { return strconv.FormatBool(v), err }
func fmtOffset(v int64, err error) (string, error) { return strconv.FormatInt(v, 10), err }

func fmtPartitions(ps []int32, err error) (string, error) {
	return strings.ReplaceAll(fmt.Sprint(ps), ",", ""), err
}

func fmtRecords(rs []engine.Record, err error) (string, error) {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s/%d/%d %q", r.Topic, r.Partition, r.Offset, r.Payload)
	}
	return "[" + strings.Join(parts, " ") + "]", err
}

// ---------------------------------------------------------------------------
// Concurrent workload

// workloadTopic is the topic the concurrent workload publishes to.
const workloadTopic = "events"

// groupNames names the workload's first groups; later ones are "group-N".
var groupNames = []string{"billing", "shipping", "audit"}

// maxErrors bounds the unexpected broker errors a history keeps verbatim.
const maxErrors = 10

// auditConfig sizes one concurrent workload. The zero value is not valid;
// see defaultAuditConfig and validate. The ranges are those of the flags,
// except that Records may be 0 and Churn any non-negative interval.
type auditConfig struct {
	Partitions int32         // partitions of the topic, 1..maxPartitions
	Capacity   int32         // records retained per partition, 1..maxCapacity
	Producers  int           // producer goroutines, 1..maxProducers
	Records    int           // records published in total, 0..maxRecords; Records × Groups at most maxRecordGroups
	Groups     int           // consumer groups, 1..maxGroups
	Members    int           // member goroutines per group, 1..maxMembers
	Batch      int32         // maxRecords of each poll, 1..maxBatch
	Retry      float64       // probability a delivery is retried instead of acked, 0..maxRetry
	Churn      time.Duration // interval between leave-and-rejoin events while producers run, >= 0; 0 for none
	Seed       uint64        // seed of every random choice (partitions, retries, churn)
	Timeout    time.Duration // deadline for the whole workload, 1ns..maxTimeout
}

// defaultAuditConfig returns the configuration of a default "tributary
// audit" run, with a zero Seed.
func defaultAuditConfig() auditConfig {
	return auditConfig{
		Partitions: 8,
		Capacity:   64,
		Producers:  4,
		Records:    200000,
		Groups:     3,
		Members:    3,
		Batch:      8,
		Retry:      0.10,
		Churn:      2 * time.Millisecond,
		Timeout:    60 * time.Second,
	}
}

// validate reports the first field of c that is out of range.
func (c auditConfig) validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > maxPartitions:
		return fmt.Errorf("partitions %d out of range [1,%d]", c.Partitions, maxPartitions)
	case c.Capacity < 1 || c.Capacity > maxCapacity:
		return fmt.Errorf("capacity %d out of range [1,%d]", c.Capacity, maxCapacity)
	case c.Producers < 1 || c.Producers > maxProducers:
		return fmt.Errorf("producers %d out of range [1,%d]", c.Producers, maxProducers)
	case c.Records < 0 || c.Records > maxRecords:
		return fmt.Errorf("records %d out of range [0,%d]", c.Records, maxRecords)
	case c.Groups < 1 || c.Groups > maxGroups:
		return fmt.Errorf("groups %d out of range [1,%d]", c.Groups, maxGroups)
	case c.Records*c.Groups > maxRecordGroups:
		return fmt.Errorf("records %d × groups %d exceeds %d", c.Records, c.Groups, maxRecordGroups)
	case c.Members < 1 || c.Members > maxMembers:
		return fmt.Errorf("members %d out of range [1,%d]", c.Members, maxMembers)
	case c.Batch < 1 || c.Batch > maxBatch:
		return fmt.Errorf("batch %d out of range [1,%d]", c.Batch, maxBatch)
	case !(c.Retry >= 0 && c.Retry <= maxRetry):
		return fmt.Errorf("retry probability %g out of range [0,%g]", c.Retry, maxRetry)
	case c.Churn < 0:
		return fmt.Errorf("churn interval %s must not be negative", c.Churn)
	case c.Timeout <= 0 || c.Timeout > maxTimeout:
		return fmt.Errorf("timeout %s out of range (0,%s]", c.Timeout, fmtDuration(maxTimeout))
	}
	return nil
}

// publication is one record as the workload saw it: published at
// (Partition, Offset) with Payload, or delivered by a poll.
type publication struct {
	Partition int32
	Offset    int64
	Payload   string
}

// history is everything one workload run observed, in the form verify
// checks. Its slices are in no particular order unless stated.
type history struct {
	Partitions int32
	Published  []publication // every successful publish
	Full       int64         // publishes answered -1 (partition full) and tried again
	Churns     int64         // member leave-and-rejoin events
	Groups     []groupHistory
	Errors     []string // unexpected broker errors, at most maxErrors
	ErrorCount int64    // all unexpected broker errors
	TimedOut   bool     // the deadline passed before every group acked everything
	Elapsed    time.Duration
}

// groupHistory is what one consumer group observed.
type groupHistory struct {
	Name       string
	Deliveries []publication // every record a poll returned, repeats included
	Acks       [][]int64     // per partition, offsets of successful acks in the order they took effect
	Retries    int64         // successful retries
	Refused    int64         // acks and retries answered false (the partition had moved)
}

// workload is the shared state of one run of runWorkload.
type workload struct {
	cfg    auditConfig
	b      *engine.Broker
	groups []*groupState

	published atomic.Int64 // successful publishes so far
	full      atomic.Int64 // publishes answered -1
	churns    atomic.Int64 // leave-and-rejoin events

	errMu    sync.Mutex // guards errs and errCount
	errs     []string
	errCount int64
}

// groupState is the live bookkeeping of one consumer group.
type groupState struct {
	name    string
	members []*member
	parts   []partAcks // indexed by partition

	acked   atomic.Int64 // successful acks, all partitions
	retried atomic.Int64 // successful retries
	refused atomic.Int64 // acks and retries answered false
}

// partAcks records the successful acks of one (group, partition).
type partAcks struct {
	// mu guards offsets and is held across the Ack call that produces each
	// entry, so offsets lists the successful acks in the order they took
	// effect in the broker.
	mu      sync.Mutex
	offsets []int64
}

// member is one consumer goroutine's state.
type member struct {
	id         string
	leave      chan struct{} // capacity 1; a pending value asks the member to leave and rejoin
	rng        *rand.Rand    // owned by the member goroutine
	deliveries []publication // owned by the member goroutine until it exits
}

// runWorkload runs the concurrent workload that cfg describes on a fresh
// broker and returns what it observed; verify judges the result. It returns
// an error only when the broker cannot be set up (New or Create fails).
// Every goroutine it starts has exited when it returns, deadline or not.
func runWorkload(cfg auditConfig) (*history, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b, err := engine.New(cfg.Capacity, engine.WithExtendedCapacity())
	if err != nil {
		return nil, fmt.Errorf("new broker: %w", err)
	}
	if ok, err := b.Create(workloadTopic, cfg.Partitions); err != nil || !ok {
		return nil, fmt.Errorf("create topic %q: %v, %v", workloadTopic, ok, err)
	}
	w := &workload{cfg: cfg, b: b}
	stream := uint64(0)
	newRand := func() *rand.Rand {
		stream++
		return rand.New(rand.NewPCG(cfg.Seed, stream))
	}
	for g := range cfg.Groups {
		name := fmt.Sprintf("group-%d", g)
		if g < len(groupNames) {
			name = groupNames[g]
		}
		gs := &groupState{name: name, parts: make([]partAcks, cfg.Partitions)}
		for i := range cfg.Members {
			gs.members = append(gs.members, &member{
				id:    fmt.Sprintf("m%d", i),
				leave: make(chan struct{}, 1),
				rng:   newRand(),
			})
		}
		w.groups = append(w.groups, gs)
	}

	// Every group must exist before the first publish: a group created later
	// starts at the log start, after the records the others already released.
	for _, gs := range w.groups {
		for _, m := range gs.members {
			if _, err := b.Join(workloadTopic, gs.name, m.id); err != nil {
				return nil, fmt.Errorf("join %s/%s: %w", gs.name, m.id, err)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	start := time.Now()

	consumeCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var consumers sync.WaitGroup
	for _, gs := range w.groups {
		for _, m := range gs.members {
			consumers.Go(func() { w.consume(consumeCtx, gs, m) })
		}
	}

	churnCtx, stopChurn := context.WithCancel(ctx)
	defer stopChurn()
	var churner sync.WaitGroup
	if cfg.Churn > 0 {
		rng := newRand()
		churner.Go(func() { w.churn(churnCtx, rng) })
	}

	var producers sync.WaitGroup
	pubs := make([][]publication, cfg.Producers)
	for i := range cfg.Producers {
		n := cfg.Records / cfg.Producers
		if i < cfg.Records%cfg.Producers {
			n++
		}
		rng := newRand()
		producers.Go(func() { pubs[i] = w.produce(ctx, i, n, rng) })
	}
	producers.Wait()
	stopChurn()
	churner.Wait()

	drained := w.waitDrained(ctx, w.published.Load())
	stopConsumers()
	consumers.Wait()
	elapsed := time.Since(start)

	h := &history{
		Partitions: cfg.Partitions,
		Published:  slices.Concat(pubs...),
		Full:       w.full.Load(),
		Churns:     w.churns.Load(),
		Errors:     w.errs,
		ErrorCount: w.errCount,
		TimedOut:   !drained,
		Elapsed:    elapsed,
	}
	for _, gs := range w.groups {
		gh := groupHistory{
			Name:    gs.name,
			Acks:    make([][]int64, len(gs.parts)),
			Retries: gs.retried.Load(),
			Refused: gs.refused.Load(),
		}
		for _, m := range gs.members {
			gh.Deliveries = append(gh.Deliveries, m.deliveries...)
		}
		for p := range gs.parts {
			gh.Acks[p] = gs.parts[p].offsets
		}
		h.Groups = append(h.Groups, gh)
	}
	return h, nil
}

// fail records an unexpected broker error.
func (w *workload) fail(format string, args ...any) {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	w.errCount++
	if len(w.errs) < maxErrors {
		w.errs = append(w.errs, fmt.Sprintf(format, args...))
	}
}

// produce publishes n records with payloads "p<id>-<seq>" to partitions
// chosen by rng, trying a full partition again after a short backoff, and
// returns what it published. It stops early when ctx is done or the broker
// returns an error.
func (w *workload) produce(ctx context.Context, id, n int, rng *rand.Rand) []publication {
	// Grown as records are published, not sized to n up front: a run cut
	// short by its deadline keeps no unused capacity.
	out := make([]publication, 0, min(n, 1024))
	for seq := range n {
		if ctx.Err() != nil {
			return out
		}
		p := rng.Int32N(w.cfg.Partitions)
		payload := "p" + strconv.Itoa(id) + "-" + strconv.Itoa(seq)
		for idle := 0; ; idle++ {
			off, err := w.b.Publish(workloadTopic, p, payload)
			if err != nil {
				w.fail("Publish(%q, %d): %v", workloadTopic, p, err)
				return out
			}
			if off >= 0 {
				out = append(out, publication{p, off, payload})
				w.published.Add(1)
				break
			}
			w.full.Add(1)
			if ctx.Err() != nil {
				return out
			}
			backoff(idle)
		}
	}
	return out
}

// consume is one member's loop: poll a batch, then retry each record with
// probability cfg.Retry and ack it otherwise, leaving and rejoining the
// group whenever churn asks. It returns when ctx is done.
func (w *workload) consume(ctx context.Context, gs *groupState, m *member) {
	idle := 0
	for ctx.Err() == nil {
		w.maybeRejoin(ctx, gs, m)
		recs, err := w.b.Poll(workloadTopic, gs.name, m.id, w.cfg.Batch)
		if err != nil {
			w.fail("Poll(%q, %q, %q): %v", workloadTopic, gs.name, m.id, err)
			return
		}
		if len(recs) == 0 {
			idle++
			backoff(idle)
			continue
		}
		idle = 0
		for _, r := range recs {
			m.deliveries = append(m.deliveries, publication{r.Partition, r.Offset, r.Payload})
			// Churn may strike mid-batch; the rest of the batch was then
			// cancelled by the rebalance and its acks are refused.
			w.maybeRejoin(ctx, gs, m)
			if m.rng.Float64() < w.cfg.Retry {
				ok, err := w.b.Retry(workloadTopic, gs.name, m.id, r.Partition, r.Offset)
				switch {
				case err != nil:
					w.fail("Retry(%q, %q, %q, %d, %d): %v", workloadTopic, gs.name, m.id, r.Partition, r.Offset, err)
				case ok:
					gs.retried.Add(1)
				default:
					gs.refused.Add(1)
				}
				continue
			}
			pa := &gs.parts[r.Partition]
			pa.mu.Lock()
			ok, err := w.b.Ack(workloadTopic, gs.name, m.id, r.Partition, r.Offset)
			if ok {
				pa.offsets = append(pa.offsets, r.Offset)
			}
			pa.mu.Unlock()
			switch {
			case err != nil:
				w.fail("Ack(%q, %q, %q, %d, %d): %v", workloadTopic, gs.name, m.id, r.Partition, r.Offset, err)
			case ok:
				gs.acked.Add(1)
			default:
				gs.refused.Add(1)
			}
		}
	}
}

// maybeRejoin makes m leave its group, stay away briefly and join again when
// churn has asked it to; otherwise it does nothing.
func (w *workload) maybeRejoin(ctx context.Context, gs *groupState, m *member) {
	select {
	case <-m.leave:
	default:
		return
	}
	w.churns.Add(1)
	ok, err := w.b.Leave(workloadTopic, gs.name, m.id)
	if err != nil || !ok {
		w.fail("Leave(%q, %q, %q) of a joined member = %v, %v", workloadTopic, gs.name, m.id, ok, err)
	}
	away := time.Duration(m.rng.Int64N(int64(w.cfg.Churn/2) + 1))
	t := time.NewTimer(away)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	if _, err := w.b.Join(workloadTopic, gs.name, m.id); err != nil {
		w.fail("Join(%q, %q, %q): %v", workloadTopic, gs.name, m.id, err)
	}
}

// churn asks a random member of a random group to leave and rejoin every
// cfg.Churn until ctx is done.
func (w *workload) churn(ctx context.Context, rng *rand.Rand) {
	t := time.NewTicker(w.cfg.Churn)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		gs := w.groups[rng.IntN(len(w.groups))]
		m := gs.members[rng.IntN(len(gs.members))]
		select {
		case m.leave <- struct{}{}:
		default: // a request is already pending
		}
	}
}

// waitDrained waits until every group has acknowledged total records and
// reports true, or until ctx is done and reports false.
func (w *workload) waitDrained(ctx context.Context, total int64) bool {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		done := true
		for _, gs := range w.groups {
			if gs.acked.Load() < total {
				done = false
				break
			}
		}
		if done {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// backoff yields the processor after the idle-th consecutive fruitless
// broker call (the broker never blocks), sleeping once yielding has not
// helped, for at most half a millisecond.
func backoff(idle int) {
	const spins = 4
	if idle < spins {
		runtime.Gosched()
		return
	}
	time.Sleep(min(time.Duration(idle-spins+1)*20*time.Microsecond, 500*time.Microsecond))
}

// ---------------------------------------------------------------------------
// Verification

// groupReport is verify's verdict on one group. Published, Delivered and
// so on count records; Delivered includes Redelivered.
type groupReport struct {
	Name        string
	Published   int64 // records published to the topic
	Delivered   int64 // records returned by polls, repeats included
	Acked       int64 // successful acks
	Redelivered int64 // deliveries of a record this group had already been given
	Retried     int64 // successful retries
	Refused     int64 // acks and retries refused because the partition moved
	Lost        int64 // published records this group never acked; must be 0
	AckedTwice  int64 // successful acks beyond the first of a record; must be 0
	OrderKept   bool  // on every partition the acks were offsets 0, 1, 2, … in order
}

// report is verify's verdict on a whole history.
type report struct {
	Groups   []groupReport
	Problems []string // one line per failed check; empty when all passed
}

// verify checks h: per partition, publish offsets are exactly 0..n-1 each
// once; every delivered payload is the one published at its (partition,
// offset); every group acked every published record exactly once and, per
// partition, in offset order; no broker call failed and the deadline held.
func verify(h *history) report {
	var r report
	problem := func(format string, args ...any) {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
	if h.TimedOut {
		problem("deadline passed before every group acknowledged every record")
	}
	if h.ErrorCount > 0 {
		problem("%d unexpected broker error(s), first: %s", h.ErrorCount, h.Errors[0])
	}

	// payloads[p][o] is the payload published at (p, o).
	payloads := make([][]string, h.Partitions)
	var badPartition int
	for _, pub := range h.Published {
		if pub.Partition < 0 || pub.Partition >= h.Partitions || pub.Offset < 0 {
			badPartition++
			continue
		}
		p := pub.Partition
		for int64(len(payloads[p])) <= pub.Offset {
			payloads[p] = append(payloads[p], "")
		}
		payloads[p][pub.Offset] = pub.Payload
	}
	if badPartition > 0 {
		problem("%d publish(es) reported an invalid partition or offset", badPartition)
	}
	counts := make([][]int, h.Partitions)
	for p := range counts {
		counts[p] = make([]int, len(payloads[p]))
	}
	for _, pub := range h.Published {
		if pub.Partition >= 0 && pub.Partition < h.Partitions && pub.Offset >= 0 {
			counts[pub.Partition][pub.Offset]++
		}
	}
	var total int64
	for p := range counts {
		var gaps, dups int
		for _, c := range counts[p] {
			switch {
			case c == 0:
				gaps++
			case c > 1:
				dups += c - 1
			}
		}
		if gaps > 0 || dups > 0 {
			problem("partition %d: publish offsets not exactly 0..%d once each (%d missing, %d repeated)",
				p, len(counts[p])-1, gaps, dups)
		}
		total += int64(len(counts[p]) - gaps)
	}

	for _, gh := range h.Groups {
		gr := groupReport{
			Name:      gh.Name,
			Published: total,
			Delivered: int64(len(gh.Deliveries)),
			Retried:   gh.Retries,
			Refused:   gh.Refused,
			OrderKept: true,
		}
		seen := make([][]bool, h.Partitions)
		for p := range seen {
			seen[p] = make([]bool, len(payloads[p]))
		}
		var unknown, wrong int
		for _, d := range gh.Deliveries {
			switch {
			case d.Partition < 0 || d.Partition >= h.Partitions || d.Offset < 0 || d.Offset >= int64(len(payloads[d.Partition])):
				unknown++
			case d.Payload != payloads[d.Partition][d.Offset]:
				wrong++
			case seen[d.Partition][d.Offset]:
				gr.Redelivered++
			default:
				seen[d.Partition][d.Offset] = true
			}
		}
		if unknown > 0 {
			problem("group %s: %d deliveries of records never published", gh.Name, unknown)
		}
		if wrong > 0 {
			problem("group %s: %d deliveries with a payload other than the one published", gh.Name, wrong)
		}

		var unpublished, undelivered int
		for p := range h.Partitions {
			var acks []int64
			if int(p) < len(gh.Acks) {
				acks = gh.Acks[p]
			}
			acked := make([]int, len(payloads[p]))
			for i, off := range acks {
				gr.Acked++
				if off != int64(i) {
					gr.OrderKept = false
				}
				if off < 0 || off >= int64(len(acked)) {
					unpublished++
					continue
				}
				if !seen[p][off] {
					undelivered++
				}
				acked[off]++
				if acked[off] > 1 {
					gr.AckedTwice++
				}
			}
			for off, c := range acked {
				if c == 0 && counts[p][off] > 0 {
					gr.Lost++
				}
			}
		}
		if gr.Lost > 0 {
			problem("group %s: %d record(s) lost (published, never acknowledged)", gh.Name, gr.Lost)
		}
		if gr.AckedTwice > 0 {
			problem("group %s: %d record(s) acknowledged twice", gh.Name, gr.AckedTwice)
		}
		if !gr.OrderKept {
			problem("group %s: acknowledgements out of partition order", gh.Name)
		}
		if unpublished > 0 {
			problem("group %s: %d ack(s) of records never published", gh.Name, unpublished)
		}
		if undelivered > 0 {
			problem("group %s: %d ack(s) of records never delivered to the group", gh.Name, undelivered)
		}
		r.Groups = append(r.Groups, gr)
	}
	return r
}

// printReport writes the per-group table and the run's totals to w.
func printReport(w io.Writer, h *history, r report) {
	if len(r.Groups) > 0 {
		// The same for every group: the records published to the topic.
		fmt.Fprintf(w, "published %d records; each group:\n", r.Groups[0].Published)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "group\tdelivered\tacked\tredelivered\tretried\trefused\tlost\tacked twice\torder kept\t")
	var acked int64
	for _, g := range r.Groups {
		order := "yes"
		if !g.OrderKept {
			order = "NO"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n",
			g.Name, g.Delivered, g.Acked, g.Redelivered, g.Retried, g.Refused, g.Lost, g.AckedTwice, order)
		acked += g.Acked
	}
	tw.Flush()
	fmt.Fprintln(w, "(redelivered = deliveries of a record the group had been given before: retried ones plus")
	fmt.Fprintln(w, " refused ones, whose ack or retry was refused because a rebalance moved the partition;")
	fmt.Fprintln(w, " lost and acked twice must be 0; order kept = each partition's acks were offsets 0, 1, 2, …")
	fmt.Fprintln(w, " in order)")
	fmt.Fprintf(w, "publishes refused while a partition was full (retried): %d\n", h.Full)
	fmt.Fprintf(w, "member leave-and-rejoin events: %d (two rebalances each)\n", h.Churns)
	rate := 0.0
	if s := h.Elapsed.Seconds(); s > 0 {
		rate = float64(acked) / s
	}
	fmt.Fprintf(w, "elapsed %s; %d acknowledgements across %d groups, %.0f per second\n",
		h.Elapsed.Round(time.Millisecond), acked, len(r.Groups), rate)
}
