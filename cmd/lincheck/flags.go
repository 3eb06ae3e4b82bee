package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/f91dcac0/tributary/cmd/internal/flagx"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/porcupine"
)

// The ranges of the flags, checked by validate before anything runs. The
// workload's ranges are porcupine.Workload's; 0 in a range whose low end is
// 0 means the mix's own value (for -count: 100, or unlimited with
// -duration; for -duration: no limit).
var (
	countRange      = intRange{0, 1_000_000_000}
	topicsRange     = intRange{1, 1000}
	clientsRange    = intRange{1, 64}
	opsRange        = intRange{1, 100_000}
	partitionsRange = intRange{0, engine.MaxPartitionCount}
	capacityRange   = intRange{0, engine.MaxExtendedCapacity} // above engine.MaxCapacity: WithExtendedCapacity
	groupsRange     = intRange{0, 100}
	membersRange    = intRange{0, 100}
	windowRange     = intRange{0, engine.MaxExtendedCapacity} // and at most the capacity
	maxBytesRange   = intRange{0, 1 << 20}

	durationRange   = durRange{0, 168 * time.Hour}
	timeoutRange    = durRange{time.Millisecond, 24 * time.Hour}
	ackTimeoutRange = durRange{0, 24 * time.Hour}
	sessionRange    = durRange{0, 24 * time.Hour}
)

// valueRange is a flag's values lo..hi. String writes it as a user writes
// it: "1..64", "1ms..24h", "0..168h".
type valueRange[T int | time.Duration] struct{ lo, hi T }

type (
	intRange = valueRange[int]
	durRange = valueRange[time.Duration]
)

func (r valueRange[T]) String() string { return rangeEnd(r.lo) + ".." + rangeEnd(r.hi) }

// rangeEnd writes an end of a range: an integer in decimal, a non-zero
// duration without trailing zero units ("168h"), a zero one as 0.
func rangeEnd[T int | time.Duration](v T) string {
	if d, ok := any(v).(time.Duration); ok && d != 0 {
		return flagx.FormatDuration(d)
	}
	return fmt.Sprint(int64(v))
}

// bounded is one flag's value and its range; zero, when not empty, says
// what 0 means, after "; ".
type bounded[T int | time.Duration] struct {
	name string
	v    T
	r    valueRange[T]
	zero string
}

// firstOutOfRange returns, for the first of flags whose value is outside
// its range, the one-line error naming the flag, the value and the range
// ("-ops 0: must be in 1..100000"); nil when every value is in range.
func firstOutOfRange[T int | time.Duration](flags ...bounded[T]) error {
	for _, f := range flags {
		if f.v < f.r.lo || f.v > f.r.hi {
			return fmt.Errorf("-%s %v: must be in %v%s", f.name, f.v, f.r, f.zero)
		}
	}
	return nil
}

// config is the parsed command line.
type config struct {
	count     int           // histories; 0: 100, or unlimited with -duration (parse sets 100)
	duration  time.Duration // 0: no limit
	seed      uint64        // history i uses seed+i
	mix       string        // "all" or a mix name
	topics    int           // per history
	clients   int           // per topic
	ops       int           // calls per client
	timeout   time.Duration // per check
	out       string        // directory for the evidence of a violation
	progress  bool
	keepGoing bool
	replay    string // "" to run workloads
	newBroker porcupine.NewBroker
	fault     string // "" for the correct engine

	// 0: the mix's.
	partitions, capacity, groups, members int
	window, maxBytes                      int
	ackTimeout, sessionTimeout            time.Duration
	testClock                             bool // false: the mix's
}

// flagPrinted is an error the flag package has already printed, with the
// usage.
type flagPrinted struct{ err error }

func (e flagPrinted) Error() string { return e.err.Error() }
func (e flagPrinted) Unwrap() error { return e.err }

// newFlagSet returns the command's flag set, which parses into c, and the
// function that resolves -fault (nil in a build without the faults).
func newFlagSet(c *config, stderr io.Writer) (*flag.FlagSet, func() (porcupine.NewBroker, string, error)) {
	fs := flag.NewFlagSet("lincheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: lincheck [flags]\n\nChecks seeded concurrent histories of the engine for linearizability: every engine\n"+
			"call (Create Join Leave Publish Poll Ack Retry PublishMessage CreateGroup CreateGroupAt DeleteGroup\n"+
			"SetAssignor AddPartitions Seek Describe Heartbeat Rejoin) and, on a test clock, Advance.\n"+
			"A bad flag value exits with status 2 before anything runs.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nMixes (-mix):\n")
		for _, m := range porcupine.Mixes() {
			opts := ""
			if m.Options != (porcupine.Options{}) {
				opts = " [" + strings.TrimSpace(m.Options.String()) + "]"
			}
			fmt.Fprintf(stderr, "  %-14s %s%s\n", m.Name, m.About, opts)
		}
		if faultNames != nil {
			fmt.Fprintf(stderr, "\nFaults (-fault; with -mix all, the mix that exposes the fault):\n")
			for _, f := range faultNames() {
				mix, _ := porcupine.FaultMix(f)
				fmt.Fprintf(stderr, "  %-30s %s\n", f, mix)
			}
		}
	}
	flagx.IntVar(fs, &c.count, "count", 0, fmt.Sprintf("histories to run, %v (0: 100, or unlimited with -duration)", countRange))
	fs.DurationVar(&c.duration, "duration", 0, fmt.Sprintf("run histories until this much time has passed, %v (0: no limit)", durationRange))
	flagx.Uint64Var(fs, &c.seed, "seed", 1, "seed of the first history, any uint64; history i uses seed+i")
	fs.StringVar(&c.mix, "mix", "all", "workload mix: all (cycle through the mixes) or one of "+strings.Join(porcupine.MixNames(), ", "))
	flagx.IntVar(fs, &c.topics, "topics", 4, fmt.Sprintf("independent topics per history, %v", topicsRange))
	flagx.IntVar(fs, &c.clients, "clients", 8, fmt.Sprintf("client goroutines per topic, %v", clientsRange))
	flagx.IntVar(fs, &c.ops, "ops", 40, fmt.Sprintf("calls per client, %v", opsRange))
	flagx.IntVar(fs, &c.partitions, "partitions", 0, fmt.Sprintf("partitions per topic, %v (0: the mix's)", partitionsRange))
	flagx.IntVar(fs, &c.capacity, "capacity", 0, fmt.Sprintf("records per partition, %v (0: the mix's)", capacityRange))
	flagx.IntVar(fs, &c.groups, "groups", 0, fmt.Sprintf("consumer groups per topic, %v (0: the mix's)", groupsRange))
	flagx.IntVar(fs, &c.members, "members", 0, fmt.Sprintf("member ids per group, %v (0: the mix's)", membersRange))
	flagx.IntVar(fs, &c.window, "window", 0, fmt.Sprintf("broker replay window, records per partition, %v and at most the capacity (0: the mix's)", windowRange))
	fs.DurationVar(&c.ackTimeout, "ack-timeout", 0, fmt.Sprintf("broker ack timeout on the test clock, %v (0: the mix's); implies -test-clock", ackTimeoutRange))
	fs.DurationVar(&c.sessionTimeout, "session-timeout", 0, fmt.Sprintf("broker session timeout on the test clock, %v (0: the mix's); implies -test-clock", sessionRange))
	flagx.IntVar(fs, &c.maxBytes, "max-message-bytes", 0, fmt.Sprintf("broker message size limit, %v (0: the mix's)", maxBytesRange))
	fs.BoolVar(&c.testClock, "test-clock", false, "a test clock per topic (and so a broker per topic), record times checked (default: the mix's)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, fmt.Sprintf("limit on checking one history, %v; a check that hits it is Unknown", timeoutRange))
	fs.StringVar(&c.out, "out", "lincheck-out", "directory for the files written on a violation (created then; checked before running)")
	fs.BoolVar(&c.progress, "progress", false, "draw the progress bar even when standard error is not a terminal")
	fs.BoolVar(&c.keepGoing, "keep-going", false, "go on after an Illegal history")
	fs.StringVar(&c.replay, "replay", "", "check the history in this JSON file (a fixture, or one lincheck wrote) instead of running workloads")
	if faultFlag != nil {
		return fs, faultFlag(fs)
	}
	fs.Func("fault", "only in a build with -tags tributary_faults", func(string) error {
		return errors.New("this lincheck was built without the deliberate bugs; run it as: go run -tags tributary_faults ./cmd/lincheck -fault …")
	})
	return fs, nil
}

// parse parses and checks the command line. Nothing has run, and no file
// or directory has been created, when it returns an error: a flagPrinted,
// flag.ErrHelp, or one line naming the flag, the value and its range.
func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs, fault := newFlagSet(&c, stderr)
	if err := fs.Parse(args); err != nil {
		return c, flagPrinted{err}
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q (every setting is a flag; lincheck -h lists them)", fs.Args())
	}
	if fault != nil {
		var err error
		if c.newBroker, c.fault, err = fault(); err != nil {
			return c, fmt.Errorf("-fault %s: %w", fs.Lookup("fault").Value, err)
		}
		if mix, ok := porcupine.FaultMix(c.fault); ok && c.mix == "all" {
			c.mix = mix
		}
	}
	if err := c.validate(); err != nil {
		return c, err
	}
	if err := checkOut(c.out); err != nil {
		return c, err
	}
	if c.count == 0 && c.duration == 0 {
		c.count = 100
	}
	return c, nil
}

// validate checks every flag value against its range, then the workloads
// the run will use (each mix -mix all reaches) against each other: the
// replay window at most the capacity. It touches no file (checkOut does).
// The error names the flag, the value and the allowed range, on one line.
func (c *config) validate() error {
	if err := firstOutOfRange(
		bounded[int]{"count", c.count, countRange, "; 0: 100, or unlimited with -duration"},
		bounded[int]{"topics", c.topics, topicsRange, ""},
		bounded[int]{"clients", c.clients, clientsRange, ""},
		bounded[int]{"ops", c.ops, opsRange, ""},
		bounded[int]{"partitions", c.partitions, partitionsRange, "; 0: the mix's"},
		bounded[int]{"capacity", c.capacity, capacityRange, "; 0: the mix's"},
		bounded[int]{"groups", c.groups, groupsRange, "; 0: the mix's"},
		bounded[int]{"members", c.members, membersRange, "; 0: the mix's"},
		bounded[int]{"window", c.window, windowRange, "; 0: the mix's"},
		bounded[int]{"max-message-bytes", c.maxBytes, maxBytesRange, "; 0: the mix's"},
	); err != nil {
		return err
	}
	if err := firstOutOfRange(
		bounded[time.Duration]{"duration", c.duration, durationRange, "; 0: no limit"},
		bounded[time.Duration]{"timeout", c.timeout, timeoutRange, ""},
		bounded[time.Duration]{"ack-timeout", c.ackTimeout, ackTimeoutRange, "; 0: the mix's"},
		bounded[time.Duration]{"session-timeout", c.sessionTimeout, sessionRange, "; 0: the mix's"},
	); err != nil {
		return err
	}
	names := porcupine.MixNames()
	if c.mix != "all" {
		if _, err := porcupine.LookupMix(c.mix); err != nil {
			return fmt.Errorf("-mix %s: must be all or one of %s", c.mix, strings.Join(names, ", "))
		}
	}
	// History i runs mix names[(seed+i) % len(names)] under -mix all; the
	// first len(names) histories reach every mix the run will use.
	n := len(names)
	if c.mix != "all" {
		n = 1
	}
	if c.count > 0 {
		n = min(n, c.count)
	}
	for i := range n {
		w, err := c.workload(i)
		switch {
		case err == nil:
		case w.Options.ReplayWindow > w.Capacity && c.window == 0:
			return fmt.Errorf("-capacity %d: must be in %d..%d with mix %s, whose replay window is %d (or set a smaller -window)",
				c.capacity, w.Options.ReplayWindow, capacityRange.hi, w.Mix, w.Options.ReplayWindow)
		case w.Options.ReplayWindow > w.Capacity:
			return fmt.Errorf("-window %d: must be in 0..%d, the capacity of a partition with mix %s (-capacity sets it)",
				c.window, w.Capacity, w.Mix)
		default: // not expected after the checks above
			return fmt.Errorf("workload %v: %s", w, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	return nil
}

// workload returns history i's workload, resolved.
func (c config) workload(i int) (porcupine.Workload, error) {
	w := porcupine.Workload{
		Seed:         c.seed + uint64(i),
		Mix:          c.mix,
		Topics:       c.topics,
		Clients:      c.clients,
		OpsPerClient: c.ops,
		Partitions:   int32(c.partitions), // validate has checked the ranges
		Capacity:     int32(c.capacity),
		Groups:       c.groups,
		Members:      c.members,
		Options: porcupine.Options{
			ReplayWindow:    int32(c.window),
			AckTimeout:      c.ackTimeout,
			SessionTimeout:  c.sessionTimeout,
			MaxMessageBytes: c.maxBytes,
			TestClock:       c.testClock,
		},
	}
	if c.mix == "all" {
		names := porcupine.MixNames()
		w.Mix = names[int(w.Seed%uint64(len(names)))]
	}
	return w.Resolve()
}

// checkOut checks that dir, the -out directory, can take the files of a
// violation: it is a directory that can be written, or it does not exist
// and its nearest existing parent is a directory that can be written (tried
// with a temporary file, removed at once). It creates nothing.
func checkOut(dir string) error {
	if dir == "" {
		return errors.New(`-out "": must name a directory`)
	}
	d := dir
	for {
		st, err := os.Stat(d)
		if err == nil && st.IsDir() {
			break
		}
		if err == nil {
			return fmt.Errorf("-out %s: %s is not a directory", dir, d)
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) { // ENOTDIR: a file above; found next
			return fmt.Errorf("-out %s: %v", dir, err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return fmt.Errorf("-out %s: %v", dir, err)
		}
		d = parent
	}
	f, err := os.CreateTemp(d, ".lincheck-check-*")
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("-out %s: cannot create files in %s: %v", dir, d, err)
	}
	f.Close()
	return os.Remove(f.Name())
}
