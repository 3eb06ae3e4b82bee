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

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/cmd/internal/flagx"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// runAudit is `tributary audit [flags]`: it parses the flags from args,
// runs the worked examples and the concurrent workload on fresh brokers of
// the -backend (newBrokers), prints the results to stdout and returns the
// exit status: exitOK when every check passed,
// exitFailed when one failed, exitUsage for a bad command line, reported on
// one line on stderr before any work starts (-h prints the usage on stdout
// and returns exitOK). ctx ending (the program's: SIGINT or SIGTERM) stops
// the workload as its deadline would; the audit then fails as
// interrupted, having closed its brokers and what newBrokers started (an
// embedded server and its store).
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseAuditFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "tributary audit: %v\n", err)
		return exitUsage
	}

	bs, err := newBrokers(cfg.Backend, cfg.NATS)
	if err != nil {
		printWrapped(stdout, fmt.Sprintf("audit: FAILED: %s", errText(err)))
		return exitFailed
	}
	defer bs.close()

	var failures []string
	fmt.Fprintln(stdout, "== worked examples ==")
	bad, err := runExamples(stdout, bs.open)
	if err != nil {
		// No broker: nothing further can run (an unreachable -nats server).
		printWrapped(stdout, fmt.Sprintf("audit: FAILED: %s", errText(err)))
		return exitFailed
	}
	if len(bad) > 0 {
		failures = append(failures, fmt.Sprintf("%d worked-example step(s) mismatched", len(bad)))
	}

	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "== concurrent workload ==")
	describeWorkload(stdout, cfg)

	h, err := runWorkload(ctx, cfg, bs.open)
	if err != nil {
		printWrapped(stdout, fmt.Sprintf("audit: FAILED: %v", err))
		return exitFailed
	}
	if ctx.Err() != nil {
		printWrapped(stdout, fmt.Sprintf("audit: FAILED: interrupted after %v of the workload; its checks were not made", h.Elapsed.Round(time.Millisecond)))
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

	// jetstreamRecords and jetstreamChurn are the -records and -churn of
	// -backend jetstream when those flags are not given. Each broker call
	// there is a round trip to the server, and each publish, ack, retry
	// and rebalance a write, so the defaults of the memory backend (200000
	// records, a rebalance every 2ms) would run far past -timeout:
	// "tributary audit -backend jetstream -seed 11" on an embedded server
	// (go1.26, linux/amd64, 2 shared CPUs, 2026-12-04) acknowledged about
	// 450 records a second across its 3 groups, its 1000 records in 6.5 s
	// of the 1m deadline.
	jetstreamRecords = 1000
	jetstreamChurn   = 50 * time.Millisecond
)

// parseAuditFlags parses and checks the audit's flags. It writes nothing but
// the usage, to help, for -h (and then returns flag.ErrHelp). Any other
// error is one line naming the first bad flag, the value given and the
// allowed range (a *flagx.RangeError for a number out of range); nothing
// has started then. A zero -seed is replaced by one drawn from the clock.
// With -backend jetstream, -records and -churn default to
// jetstreamRecords and jetstreamChurn.
func parseAuditFlags(args []string, help io.Writer) (auditConfig, error) {
	cfg := defaultAuditConfig()
	fs := flag.NewFlagSet("tributary audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by the caller, on one line
	fs.Usage = func() {}
	rangedInt(fs, &cfg.Partitions, "partitions", 1, maxPartitions, "`n` partitions of the workload topic")
	rangedInt(fs, &cfg.Capacity, "capacity", 1, maxCapacity, "`n` records retained per partition; small values exercise back-pressure")
	rangedInt(fs, &cfg.Producers, "producers", 1, maxProducers, "`n` producer goroutines")
	rangedInt(fs, &cfg.Records, "records", 1, maxRecords, "`n` records published in total across all producers",
		fmt.Sprintf("records × groups at most %d; -backend jetstream: default %d", maxRecordGroups, jetstreamRecords))
	rangedInt(fs, &cfg.Groups, "groups", 1, maxGroups, "`n` consumer groups, each consuming every record")
	rangedInt(fs, &cfg.Members, "members", 1, maxMembers, "`n` member goroutines per group")
	rangedInt(fs, &cfg.Batch, "batch", 1, maxBatch, "at most `n` records per poll")
	flagx.Float(fs, &cfg.Retry, "retry", cfg.Retry, 0, maxRetry,
		fmt.Sprintf("`probability` that a delivery is retried instead of acknowledged, in 0..%g", maxRetry))
	flagx.Duration(fs, &cfg.Churn, "churn", cfg.Churn, minChurn, maxChurn, true,
		fmt.Sprintf("`interval` between member leave-and-rejoin events while producers run, 0 or %s..%s; 0 disables churn; -backend jetstream: default %s",
			flagx.FormatDuration(minChurn), flagx.FormatDuration(maxChurn), flagx.FormatDuration(jetstreamChurn)))
	flagx.Uint64(fs, &cfg.Seed, "seed", 0, 0, math.MaxUint64, "`seed` of the workload's random choices, any unsigned 64-bit integer; 0 picks one from the clock")
	flagx.Duration(fs, &cfg.Timeout, "timeout", cfg.Timeout, minTimeout, maxTimeout, false,
		fmt.Sprintf("`deadline` for the workload, %s..%s, after which the audit fails", flagx.FormatDuration(minTimeout), flagx.FormatDuration(maxTimeout)))
	defineBackendFlags(fs, &cfg.Backend, &cfg.NATS, "the audited broker")
	if err := flagx.Parse(fs, args); err != nil {
		var bad *flagx.RangeError
		switch {
		case errors.Is(err, flag.ErrHelp):
			fmt.Fprintf(help, "Usage: tributary audit [flags]\n\n"+
				"Replays the broker contract's worked examples, then runs a concurrent\n"+
				"workload and verifies that every group acknowledged every record once, in order,\n"+
				"on the backend -backend names. A bad flag value exits with status 2 before anything runs.\n\nFlags:\n")
			printFlags(help, fs)
			return cfg, err
		case errors.As(err, &bad):
			return cfg, err
		}
		return cfg, fmt.Errorf("%s (tributary audit -h lists the flags)", cutEchoes(err.Error(), args))
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %s (every setting is a flag; tributary audit -h lists them)", flagx.Shown(fs.Arg(0)))
	}
	if err := checkBackend(cfg.Backend, cfg.NATS); err != nil {
		return cfg, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.Backend == "jetstream" && !set["records"] {
		cfg.Records = jetstreamRecords
	}
	if cfg.Backend == "jetstream" && !set["churn"] {
		cfg.Churn = jetstreamChurn
	}
	if cfg.Records*cfg.Groups > maxRecordGroups {
		return cfg, fmt.Errorf("-records %d with -groups %d: records × groups must be at most %d", cfg.Records, cfg.Groups, maxRecordGroups)
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	return cfg, cfg.validate()
}

// rangedInt defines an integer flag of fs on *p (its default: *p's value)
// that accepts lo..hi (flagx.Int), with usage followed by that range and
// the further limits in more: "… (1..64; …)", so the range is stated once.
func rangedInt[T int | int32](fs *flag.FlagSet, p *T, name string, lo, hi T, usage string, more ...string) {
	usage += " (" + strings.Join(append([]string{fmt.Sprintf("%d..%d", lo, hi)}, more...), "; ") + ")"
	flagx.Int(fs, p, name, *p, lo, hi, usage)
}

// ---------------------------------------------------------------------------
// Brokers

// openBroker returns a fresh, empty broker whose partitions retain
// capacity records each (1..maxCapacity), with no replay window and no
// session timeout, and a function that closes it.
type openBroker func(capacity int32) (tributary.Backend, func(), error)

// brokers makes the fresh brokers of one audit run, one per worked example
// and one for the workload, on the backend of -backend: each an engine
// (tributary.NewEngineBackend), or each a jetstream.Backend of its own
// stream prefix on one NATS server: -nats's, or an embedded one started by
// newBrokers (natsConfig, as the program's other modes start it).
type brokers struct {
	backend string
	nats    jetstream.Config // jetstream: the server, with Capacity and Prefix unset
	stop    func()           // shuts the embedded server down; nothing otherwise
	stem    string           // jetstream: this run's stream prefix, numbered per broker
	made    int
}

// newBrokers returns the broker maker of backend ("memory" or "jetstream")
// and natsURL (jetstream: "" for an embedded server). Close releases it.
func newBrokers(backend, natsURL string) (*brokers, error) {
	bs := &brokers{backend: backend, stop: func() {}}
	if backend != "jetstream" {
		return bs, nil
	}
	cfg, stop, err := natsConfig(natsURL)
	if err != nil {
		return nil, err
	}
	// A prefix of this run's own, so that a server -nats names, which
	// other runs share, keeps each run's streams apart:
	// "AUDIT-<hex nanoseconds>-<n>", at most 32 bytes.
	bs.nats, bs.stop, bs.stem = cfg, stop, fmt.Sprintf("AUDIT-%x", time.Now().UnixNano())
	return bs, nil
}

// open is an openBroker.
func (bs *brokers) open(capacity int32) (tributary.Backend, func(), error) {
	if bs.backend != "jetstream" {
		b, err := tributary.NewEngineBackend(capacity)
		return b, func() {}, err
	}
	bs.made++
	cfg := bs.nats
	cfg.Capacity, cfg.Prefix = capacity, fmt.Sprintf("%s-%d", bs.stem, bs.made)
	b, err := jetstream.Open(cfg)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { _ = b.Close() }, nil
}

// close shuts down what newBrokers started; every broker it opened must be
// closed first.
func (bs *brokers) close() { bs.stop() }

// ---------------------------------------------------------------------------
// Worked examples

// step is one broker call of a worked example: call describes it, do makes
// it and formats its result, want is the result the contract specifies.
type step struct {
	call string // the call as printed; a line after it is a note, printed under it
	do   func() (string, error)
	want string
}

// describeWorkload writes what the workload of cfg does, wrapped to
// lineWidth.
func describeWorkload(w io.Writer, cfg auditConfig) {
	fmt.Fprintf(w, "seed %d (rerun with -seed %d to repeat the random choices)\n", cfg.Seed, cfg.Seed)
	printWrapped(w, backendNote(cfg))
	fmt.Fprintf(w, "topic %q: %d partitions, capacity %d records each\n", workloadTopic, cfg.Partitions, cfg.Capacity)
	churn := "no churn"
	if cfg.Churn > 0 {
		churn = "a member leaves and rejoins every " + cfg.Churn.String() + " while producers run"
	}
	printWrapped(w, fmt.Sprintf("%d producer(s) publish %d records to random partitions; %d group(s) of %d member(s) poll %d at a time, "+
		"retry %.0f%% of deliveries, %s; deadline %s", cfg.Producers, cfg.Records, cfg.Groups, cfg.Members, cfg.Batch, cfg.Retry*100, churn, cfg.Timeout))
}

// backendNote says which broker the audit runs on and, on JetStream, which
// of the contract's guarantees the audit's checks then cover only per
// partition (docs/jetstream.md's rule table).
func backendNote(cfg auditConfig) string {
	if cfg.Backend != "jetstream" {
		return "backend memory: the in-process engine"
	}
	server := "an embedded NATS server"
	if cfg.NATS != "" {
		server = "the NATS server at " + clipped(cfg.NATS)
	}
	return "backend jetstream, on " + server + ": the same examples and checks, each made per partition; " +
		"that a rebalance (rule 9) and a poll of several partitions (rule 10) take effect at one instant " +
		"is the engine's alone (docs/jetstream.md) and no check here tests it"
}

// printWrapped writes text to w wrapped at spaces to lineWidth.
func printWrapped(w io.Writer, text string) {
	for _, l := range wrap(text, lineWidth, 0, "") {
		fmt.Fprintln(w, l)
	}
}

// runExamples replays the contract's worked examples, each on a fresh
// broker from open, writing one line per call to w. Each call is printed
// as the contract writes it (the engine's API) and made through the
// Backend interface (exampleBroker). It returns a description of every
// step whose result differed from the contract (nil when all matched), or
// the error of a broker open could not make, with the examples before it.
func runExamples(w io.Writer, open openBroker) ([]string, error) {
	var bad []string

	// Example 1 (capacity 2): retry redelivers, ack advances; the last two
	// steps show retention: the acknowledged record frees a slot, then the
	// partition is full again.
	be, closeB, err := open(2)
	if err != nil {
		return nil, fmt.Errorf("a broker of capacity 2: %w", err)
	}
	defer closeB()
	b := newExampleBroker(be)
	const o, g, m = "orders", "billing", "m1"
	fmt.Fprintln(w, "Each step: the call, its result, and whether it matches the contract.")
	fmt.Fprintln(w, "Records print as topic/partition/offset \"payload\".")
	fmt.Fprintln(w, "example 1: retry and acknowledge (capacity 2)")
	bad = append(bad, runSteps(w, []step{
		{`Create("orders", 1)`, func() (string, error) { return fmtBool(b.create(o, 1)) }, "true"},
		{`Publish("orders", 0, "a")`, func() (string, error) { return fmtOffset(b.publish(o, 0, "a")) }, "0"},
		{`Publish("orders", 0, "b")`, func() (string, error) { return fmtOffset(b.publish(o, 0, "b")) }, "1"},
		{`Join("orders", "billing", "m1")`, func() (string, error) { return fmtPartitions(b.join(o, g, m)) }, "[0]"},
		{"Poll(\"orders\", \"billing\", \"m1\", 2)\n(one in flight per partition)", func() (string, error) { return fmtRecords(b.poll(o, g, m, 2)) }, `[orders/0/0 "a"]`},
		{`Retry("orders", "billing", "m1", 0, 0)`, func() (string, error) { return fmtBool(b.retry(o, g, m, 0, 0)) }, "true"},
		{`Poll("orders", "billing", "m1", 2)`, func() (string, error) { return fmtRecords(b.poll(o, g, m, 2)) }, `[orders/0/0 "a"]`},
		{`Ack("orders", "billing", "m1", 0, 0)`, func() (string, error) { return fmtBool(b.ack(o, g, m, 0, 0)) }, "true"},
		{`Poll("orders", "billing", "m1", 2)`, func() (string, error) { return fmtRecords(b.poll(o, g, m, 2)) }, `[orders/0/1 "b"]`},
		{`Publish("orders", 0, "c")`, func() (string, error) { return fmtOffset(b.publish(o, 0, "c")) }, "2"},
		{`Publish("orders", 0, "d")`, func() (string, error) { return fmtOffset(b.publish(o, 0, "d")) }, "-1"},
	})...)

	// Example 2: b joining moves partition 1 from a to b, cancelling a's
	// in-flight delivery there; a keeps its deliveries on 0 and 2.
	be, closeB2, err := open(4)
	if err != nil {
		return bad, fmt.Errorf("a broker of capacity 4: %w", err)
	}
	defer closeB2()
	b = newExampleBroker(be)
	const t, grp = "events", "g"
	fmt.Fprintln(w, "example 2: rebalance (3 partitions, capacity 4)")
	bad = append(bad, runSteps(w, []step{
		{`Create("events", 3)`, func() (string, error) { return fmtBool(b.create(t, 3)) }, "true"},
		{`Publish("events", 0, "x")`, func() (string, error) { return fmtOffset(b.publish(t, 0, "x")) }, "0"},
		{`Publish("events", 1, "y")`, func() (string, error) { return fmtOffset(b.publish(t, 1, "y")) }, "0"},
		{`Publish("events", 2, "z")`, func() (string, error) { return fmtOffset(b.publish(t, 2, "z")) }, "0"},
		{`Join("events", "g", "a")`, func() (string, error) { return fmtPartitions(b.join(t, grp, "a")) }, "[0 1 2]"},
		{`Poll("events", "g", "a", 3)`, func() (string, error) { return fmtRecords(b.poll(t, grp, "a", 3)) }, `[events/0/0 "x" events/1/0 "y" events/2/0 "z"]`},
		{`Join("events", "g", "b")`, func() (string, error) { return fmtPartitions(b.join(t, grp, "b")) }, "[1]"},
		{"Join(\"events\", \"g\", \"a\")\n(already a member: no change since step 7)", func() (string, error) { return fmtPartitions(b.join(t, grp, "a")) }, "[0 2]"},
		{`Poll("events", "g", "b", 3)`, func() (string, error) { return fmtRecords(b.poll(t, grp, "b", 3)) }, `[events/1/0 "y"]`},
		{`Ack("events", "g", "a", 1, 0)`, func() (string, error) { return fmtBool(b.ack(t, grp, "a", 1, 0)) }, "false"},
		{`Poll("events", "g", "a", 3)`, func() (string, error) { return fmtRecords(b.poll(t, grp, "a", 3)) }, "[]"},
		{`Ack("events", "g", "a", 0, 0)`, func() (string, error) { return fmtBool(b.ack(t, grp, "a", 0, 0)) }, "true"},
		{`Ack("events", "g", "b", 1, 0)`, func() (string, error) { return fmtBool(b.ack(t, grp, "b", 1, 0)) }, "true"},
		{`Ack("events", "g", "a", 2, 0)`, func() (string, error) { return fmtBool(b.ack(t, grp, "a", 2, 0)) }, "true"},
	})...)
	return bad, nil
}

// exampleBroker makes the worked examples' calls, named as the contract
// names them, through a Backend: a topic handle per topic and a member
// handle per (topic, group, member), made once and kept, so that a member
// joining again is the same incarnation.
type exampleBroker struct {
	b       tributary.Backend
	topics  map[string]tributary.BackendTopic
	members map[[3]string]tributary.BackendMember
}

// examplePayloadType is the payload type the examples' topics are created
// with (Backend.CreateTopic): the contract's payloads are strings.
const examplePayloadType = "String"

func newExampleBroker(b tributary.Backend) *exampleBroker {
	return &exampleBroker{b: b, topics: map[string]tributary.BackendTopic{}, members: map[[3]string]tributary.BackendMember{}}
}

func (e *exampleBroker) create(topic string, partitions int32) (bool, error) {
	return e.b.CreateTopic(topic, partitions, examplePayloadType)
}

func (e *exampleBroker) topic(topic string) (tributary.BackendTopic, error) {
	if bt, ok := e.topics[topic]; ok {
		return bt, nil
	}
	bt, _, err := e.b.OpenTopic(topic)
	if err == nil {
		e.topics[topic] = bt
	}
	return bt, err
}

// publish is the contract's Publish: the offset, or -1 when the partition
// is full (TryPublish's ErrPartitionFull).
func (e *exampleBroker) publish(topic string, partition int32, payload string) (int64, error) {
	bt, err := e.topic(topic)
	if err != nil {
		return -1, err
	}
	off, err := bt.TryPublish(partition, engine.Message{Payload: payload})
	if errors.Is(err, tributary.ErrPartitionFull) {
		return -1, nil
	}
	return off, err
}

func (e *exampleBroker) member(topic, group, member string) (tributary.BackendMember, error) {
	k := [3]string{topic, group, member}
	if m, ok := e.members[k]; ok {
		return m, nil
	}
	bt, err := e.topic(topic)
	if err != nil {
		return nil, err
	}
	m, err := bt.Member(group, member)
	if err == nil {
		e.members[k] = m
	}
	return m, err
}

func (e *exampleBroker) join(topic, group, member string) ([]int32, error) {
	m, err := e.member(topic, group, member)
	if err != nil {
		return nil, err
	}
	return m.Join()
}

// poll is the contract's Poll: TryPoll, which returns at once.
func (e *exampleBroker) poll(topic, group, member string, max int32) ([]engine.Record, error) {
	m, err := e.member(topic, group, member)
	if err != nil {
		return nil, err
	}
	return m.TryPoll(nil, max)
}

func (e *exampleBroker) ack(topic, group, member string, partition int32, offset int64) (bool, error) {
	m, err := e.member(topic, group, member)
	if err != nil {
		return false, err
	}
	return m.Ack(partition, offset)
}

func (e *exampleBroker) retry(topic, group, member string, partition int32, offset int64) (bool, error) {
	m, err := e.member(topic, group, member)
	if err != nil {
		return false, err
	}
	return m.Retry(partition, offset)
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
	Backend    string        // the broker audited: "memory" (or "": the engine) or "jetstream"
	NATS       string        // jetstream: the server's URL (-nats); "": an embedded server
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
		Backend:    "memory",
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
		return fmt.Errorf("timeout %s out of range (0,%s]", c.Timeout, flagx.FormatDuration(maxTimeout))
	}
	if c.Backend == "" {
		return checkBackend("memory", c.NATS)
	}
	return checkBackend(c.Backend, c.NATS)
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
	t      tributary.BackendTopic // the workload topic
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
	bm         tributary.BackendMember // the member's one incarnation
	polled     []engine.Record         // TryPoll's buffer, reused; owned by the member goroutine
	leave      chan struct{}           // capacity 1; a pending value asks the member to leave and rejoin
	rng        *rand.Rand              // owned by the member goroutine
	deliveries []publication           // owned by the member goroutine until it exits
}

// runWorkload runs the concurrent workload that cfg describes on a fresh
// broker from open and returns what it observed; verify judges the result.
// Every call goes through the Backend interface: TryPublish, and one
// BackendMember per group member for Join, TryPoll, Ack, Retry and Leave.
// It returns an error only when the broker cannot be set up (open,
// CreateTopic, OpenTopic or Member fails). Every goroutine it starts has
// exited when it returns, deadline or not, and the broker is closed. ctx
// ending stops the workload as the deadline (cfg.Timeout) does.
func runWorkload(ctx context.Context, cfg auditConfig, open openBroker) (*history, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b, closeB, err := open(cfg.Capacity)
	if err != nil {
		return nil, fmt.Errorf("new broker: %w", err)
	}
	defer closeB()
	if ok, err := b.CreateTopic(workloadTopic, cfg.Partitions, examplePayloadType); err != nil || !ok {
		return nil, fmt.Errorf("create topic %q: %v, %v", workloadTopic, ok, err)
	}
	bt, _, err := b.OpenTopic(workloadTopic)
	if err != nil {
		return nil, fmt.Errorf("open topic %q: %w", workloadTopic, err)
	}
	w := &workload{cfg: cfg, t: bt}
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
			id := fmt.Sprintf("m%d", i)
			bm, err := bt.Member(name, id)
			if err != nil {
				return nil, fmt.Errorf("member %s/%s: %w", name, id, err)
			}
			gs.members = append(gs.members, &member{
				id:    id,
				bm:    bm,
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
			if _, err := m.bm.Join(); err != nil {
				return nil, fmt.Errorf("join %s/%s: %w", gs.name, m.id, err)
			}
		}
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
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
			off, err := w.t.TryPublish(p, engine.Message{Payload: payload})
			if err == nil {
				out = append(out, publication{p, off, payload})
				w.published.Add(1)
				break
			}
			if !errors.Is(err, tributary.ErrPartitionFull) {
				w.fail("TryPublish(%q, %d): %v", workloadTopic, p, err)
				return out
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
		recs, err := m.bm.TryPoll(m.polled[:0], w.cfg.Batch)
		if err != nil {
			w.fail("TryPoll(%q, %q, %q): %v", workloadTopic, gs.name, m.id, err)
			return
		}
		if len(recs) == 0 {
			// Nothing deliverable: wait for something to be (Poll, woken by
			// the broker), for at most idleWait, so that a churn request
			// does not wait long and the member makes no call while idle.
			idle++
			if idle < pollAfter {
				backoff(idle)
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, idleWait)
			recs, err = m.bm.Poll(pctx, nil, m.polled[:0], w.cfg.Batch)
			cancel()
			if pctx.Err() != nil && errors.Is(err, pctx.Err()) {
				continue
			}
			if err != nil {
				w.fail("Poll(%q, %q, %q): %v", workloadTopic, gs.name, m.id, err)
				return
			}
		}
		m.polled = recs
		idle = 0
		for _, r := range recs {
			m.deliveries = append(m.deliveries, publication{r.Partition, r.Offset, r.Payload})
			// Churn may strike mid-batch; the rest of the batch was then
			// cancelled by the rebalance and its acks are refused.
			w.maybeRejoin(ctx, gs, m)
			if m.rng.Float64() < w.cfg.Retry {
				ok, err := m.bm.Retry(r.Partition, r.Offset)
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
			ok, err := m.bm.Ack(r.Partition, r.Offset)
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
	ok, err := m.bm.Leave()
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
	if _, err := m.bm.Join(); err != nil {
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

// spins is how many fruitless broker calls in a row backoff answers by
// yielding the processor, before it sleeps.
const spins = 4

// pollAfter is how many empty TryPolls in a row a consumer answers by
// backoff; after them it waits in Poll, for up to idleWait. Spinning is
// the faster on the engine, where a call costs no round trip; the wait
// keeps an idle member from calling a networked broker in a loop.
const pollAfter = 16

// idleWait bounds an idle consumer's wait in Poll: a member leaves for
// churn only between polls.
const idleWait = 10 * time.Millisecond

// backoff yields the processor after the idle-th consecutive fruitless
// broker call, sleeping once yielding has not helped, for at most half a
// millisecond: a producer's wait for room (TryPublish returns at once).
func backoff(idle int) {
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
