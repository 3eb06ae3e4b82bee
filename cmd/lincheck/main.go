// Command lincheck runs seeded concurrent workloads against the Tributary
// engine and checks each recorded history for linearizability against the
// sequential model (package porcupine, which uses the porcupine checker).
//
// Usage:
//
//	lincheck [flags]
//
// It runs histories one after another, history i with seed -seed+i, until
// -count histories or -duration have passed (whichever comes first; with
// neither, 100 histories), and prints one line per history (seed, mix, ops,
// clients, verdict, check time) and a summary. Each history is checked with
// a -timeout; a check that runs out of time is Unknown, never a pass.
//
// The calls are every call of the engine (the seven core calls,
// PublishMessage, CreateGroup, CreateGroupAt, DeleteGroup, SetAssignor,
// AddPartitions, Seek, Describe, Heartbeat and Rejoin) and, in workloads on
// a test clock, Advance of the clock.
// Each -mix stresses one part (lincheck -h lists them): six mixes of the
// core calls (balanced, multipoll, rebalance, ackretry, full, groups) and
// one per Tributary feature: seek (controlled replay in a replay window),
// assignor (SetAssignor switching assignors), addpartitions (topics growing
// under load), lifecycle (groups created and deleted), latest (groups
// created at the log end and deleted), window (a small
// replay window at capacity 2), acktimeout (an ack timeout on a test
// clock that Advance moves), session (a session timeout on a test clock:
// members falling silent expire, heartbeats keep the others) and rejoin
// (incarnations of one member id rejoining while the other holds
// deliveries). -mix all cycles through them. -window, -ack-timeout,
// -session-timeout, -max-message-bytes and -test-clock override a mix's
// broker options.
//
// On an Illegal history it writes to -out the porcupine HTML visualization
// of the failing topic (seed-<seed>-<topic>.html), that topic's history as
// a fixture for porcupine/testdata (seed-<seed>.json) and the command that
// reruns the workload (seed-<seed>.txt), then stops (unless -keep-going).
// The seed reproduces the workload's calls, not the interleaving: the JSON
// file is the exact history.
//
// With -replay file.json it checks one stored history instead (a fixture
// from porcupine/testdata, or a history lincheck wrote), with -timeout, and
// draws the visualization of an Illegal one.
//
// Every flag is checked before anything runs, -out included (an existing
// directory that can be written, or one that can be created): lincheck -h
// gives each numeric flag's range. -topics, -clients and -ops have no zero
// value; -partitions, -capacity, -groups, -members, -window,
// -max-message-bytes, -ack-timeout and -session-timeout take 0 for the
// mix's own.
//
// Exit status: 0 when every history is Ok; 1 when any is Illegal or Unknown;
// 2 for bad flags (one line on standard error naming the flag, the value and
// the allowed range, before any work; the flag package's own errors add the
// usage) or a failure to run.
//
// A progress bar is drawn on standard error when it is a terminal, or with
// -progress.
//
// Built with -tags tributary_faults, -fault runs the workloads against a
// deliberately broken engine (see engine/faults_on.go); with -mix all it
// uses the mix that exposes that fault (porcupine.FaultMix).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	porc "github.com/anishathalye/porcupine"
	"github.com/schollz/progressbar/v3"

	"github.com/f91dcac0/tributary/porcupine"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// faultFlag, set by fault_on.go in tributary_faults builds, registers -fault
// and returns a function giving the selected fault's broker constructor and
// name ("" and nil for the correct engine).
var faultFlag func(fs *flag.FlagSet) func() (porcupine.NewBroker, string, error)

// faultNames, set by fault_on.go, lists the faults for the help text.
var faultNames func() []string

// tally is the running summary.
type tally struct {
	histories, ok, illegal, unknown, ops int
	checks                               []time.Duration
	start                                time.Time
}

func (t *tally) String() string {
	var total time.Duration
	for _, d := range t.checks {
		total += d
	}
	sorted := slices.Sorted(slices.Values(t.checks))
	pct := func(p float64) time.Duration {
		if len(sorted) == 0 {
			return 0
		}
		return sorted[int(p*float64(len(sorted)-1))]
	}
	mean := time.Duration(0)
	if len(sorted) > 0 {
		mean = total / time.Duration(len(sorted))
	}
	return fmt.Sprintf("%d histories, %d ops (%.0f per history): Ok %d, Illegal %d, Unknown %d; check time total %v, mean %v, median %v, max %v; wall %v",
		t.histories, t.ops, float64(t.ops)/float64(max(t.histories, 1)), t.ok, t.illegal, t.unknown,
		round(total), round(mean), round(pct(0.5)), round(pct(1)), round(time.Since(t.start)))
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	var printed flagPrinted
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &printed):
		return 2 // the flag package has printed the error and the usage
	case err != nil:
		fmt.Fprintln(stderr, "lincheck:", err)
		return 2
	}
	if c.replay != "" {
		return replay(c, stdout, stderr)
	}
	if c.fault != "" {
		fmt.Fprintf(stdout, "fault injected: %s (expect Illegal)\n", c.fault)
	}
	bar := newBar(c, stderr)
	t := &tally{start: time.Now()}
	say := func(format string, a ...any) {
		if bar != nil {
			bar.Clear()
		}
		fmt.Fprintf(stdout, format, a...)
	}
	for i := 0; c.count == 0 || i < c.count; i++ {
		if ctx.Err() != nil || (c.duration > 0 && time.Since(t.start) >= c.duration) {
			break
		}
		w, err := c.workload(i)
		if err != nil {
			fmt.Fprintln(stderr, "lincheck:", err)
			return 2
		}
		h, err := porcupine.Run(w, c.newBroker)
		if err != nil {
			fmt.Fprintln(stderr, "lincheck:", err)
			return 2
		}
		h.Fault = c.fault
		res := porcupine.Check(h, c.timeout)
		t.histories++
		t.ops += len(h.Ops)
		t.checks = append(t.checks, res.Elapsed)
		line := fmt.Sprintf("seed=%d mix=%s topics=%d clients=%d ops=%d verdict=%s check=%v",
			w.Seed, w.Mix, w.Topics, w.Clients, len(h.Ops), res.Verdict, round(res.Elapsed))
		stopHere := false
		switch res.Verdict {
		case porc.Ok:
			t.ok++
		case porc.Unknown:
			t.unknown++
			line += fmt.Sprintf(" (check timed out after %v; not a pass)", c.timeout)
			if path, err := keepUnknown(c, h); err != nil {
				line += fmt.Sprintf("; writing the history: %v", err)
			} else {
				line += "; history in " + path
			}
		case porc.Illegal:
			t.illegal++
			files, err := keepIllegal(c, h, res)
			if err != nil {
				line += fmt.Sprintf(" topic=%s; writing the evidence: %v", res.Topic, err)
			} else {
				line += fmt.Sprintf(" topic=%s; wrote %s", res.Topic, strings.Join(files, " "))
			}
			stopHere = !c.keepGoing
		}
		say("%s\n", line)
		if bar != nil {
			bar.Describe(fmt.Sprintf("Ok %d Illegal %d Unknown %d", t.ok, t.illegal, t.unknown))
			if c.count > 0 {
				bar.Add(1)
			} else {
				bar.Set64(int64(time.Since(t.start) / time.Second))
			}
		}
		if stopHere {
			break
		}
	}
	if bar != nil {
		bar.Finish()
		bar.Clear()
	}
	fmt.Fprintf(stdout, "summary: %v\n", t)
	if ctx.Err() != nil {
		fmt.Fprintln(stdout, "interrupted")
	}
	if t.illegal > 0 || t.unknown > 0 || t.histories == 0 {
		return 1
	}
	return 0
}

// newBar returns the progress bar, or nil when standard error is not a
// terminal and -progress is off.
func newBar(c config, stderr io.Writer) *progressbar.ProgressBar {
	if !c.progress && !isTerminal(stderr) {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription("starting"),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetPredictTime(true),
	}
	if c.count > 0 && (c.duration == 0 || c.count < 1_000_000) {
		return progressbar.NewOptions(c.count, append(opts, progressbar.OptionShowCount())...)
	}
	return progressbar.NewOptions64(int64(c.duration/time.Second), append(opts, progressbar.OptionSetItsString("s"))...)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// optionFlags are the flags of porcupine's options, by Options field.
var optionFlags = map[string]string{
	"ReplayWindow": "window", "AckTimeout": "ack-timeout", "MaxMessageBytes": "max-message-bytes", "SessionTimeout": "session-timeout",
}

// reproduce returns the command line that reruns h's workload.
func reproduce(c config, h porcupine.History) string {
	w := h.Workload
	cmd := fmt.Sprintf("go run ./cmd/lincheck -count 1 -seed %d -mix %s -topics %d -clients %d -ops %d -partitions %d -capacity %d -groups %d -members %d",
		w.Seed, w.Mix, w.Topics, w.Clients, w.OpsPerClient, w.Partitions, w.Capacity, w.Groups, w.Members)
	for _, opt := range w.Options.NonDefault() {
		if opt.Field == "TestClock" {
			cmd += " -test-clock"
			continue
		}
		cmd += fmt.Sprintf(" -%s %v", optionFlags[opt.Field], opt.Value)
	}
	if c.fault != "" {
		cmd = strings.Replace(cmd, "go run ", "go run -tags tributary_faults ", 1) + " -fault " + c.fault
	}
	return cmd
}

// keepIllegal writes the evidence of an Illegal history to c.out and returns
// the paths written.
func keepIllegal(c config, h porcupine.History, res porcupine.Result) ([]string, error) {
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(c.out, fmt.Sprintf("seed-%d", h.Workload.Seed))
	html := fmt.Sprintf("%s-%s.html", base, res.Topic)
	verdict, err := porcupine.Visualize(h, res.Topic, html, 0)
	if err != nil {
		return nil, err
	}
	if verdict != porc.Illegal {
		return nil, fmt.Errorf("verbose recheck of topic %s says %s", res.Topic, verdict)
	}
	cmd := reproduce(c, h)
	note := fmt.Sprintf("Illegal: topic %s of %v, found by lincheck; rerun the workload with: %s", res.Topic, h.Workload, cmd)
	fixture := porcupine.Fixture{Verdict: porc.Illegal, Note: note, History: h.Topic(res.Topic)}
	if err := porcupine.WriteFixture(base+".json", fixture); err != nil {
		return nil, err
	}
	text := fmt.Sprintf(`Illegal history: seed %d, topic %s.
Workload: %v
Rerun the workload (same calls per client; the interleaving differs, so it
may take several runs, or -count with the same -seed, to fail again):

  %s

%s.json is the exact history of topic %s; copy it to porcupine/testdata/ to
keep it as a regression fixture. %s is its visualization.
`, h.Workload.Seed, res.Topic, h.Workload, cmd, filepath.Base(base), res.Topic, filepath.Base(html))
	if err := os.WriteFile(base+".txt", []byte(text), 0o644); err != nil {
		return nil, err
	}
	return []string{html, base + ".json", base + ".txt"}, nil
}

// keepUnknown writes a history whose check timed out, for a longer check.
func keepUnknown(c config, h porcupine.History) (string, error) {
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(c.out, fmt.Sprintf("seed-%d-unknown.json", h.Workload.Seed))
	note := fmt.Sprintf("Unknown: the check timed out after %v; not a fixture until a longer check decides it. Rerun: %s", c.timeout, reproduce(c, h))
	return path, porcupine.WriteFixture(path, porcupine.Fixture{Verdict: porc.Unknown, Note: note, History: h})
}

// replay checks one stored history with c.timeout; for an Illegal one it
// writes the failing topic's visualization to c.out.
func replay(c config, stdout, stderr io.Writer) int {
	f, err := porcupine.ReadFixture(c.replay)
	if err != nil {
		fmt.Fprintln(stderr, "lincheck:", err)
		return 2
	}
	res := porcupine.Check(f.History, c.timeout)
	line := fmt.Sprintf("%s: %d ops verdict=%s check=%v (recorded verdict %s)", c.replay, len(f.Ops), res.Verdict, round(res.Elapsed), f.Verdict)
	if res.Verdict == porc.Illegal {
		if err := os.MkdirAll(c.out, 0o755); err != nil {
			fmt.Fprintln(stderr, "lincheck:", err)
			return 2
		}
		html := filepath.Join(c.out, strings.TrimSuffix(filepath.Base(c.replay), ".json")+"-"+res.Topic+".html")
		if _, err := porcupine.Visualize(f.History, res.Topic, html, 0); err != nil {
			fmt.Fprintln(stderr, "lincheck:", err)
			return 2
		}
		line += fmt.Sprintf(" topic=%s; wrote %s", res.Topic, html)
	}
	fmt.Fprintln(stdout, line)
	if res.Verdict != porc.Ok {
		return 1
	}
	return 0
}
