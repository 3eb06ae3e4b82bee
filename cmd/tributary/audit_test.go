package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// script_test.go's TestMain checks that no test here leaks a goroutine.

// memoryBrokers is the openBroker of -backend memory.
func memoryBrokers(t *testing.T) openBroker {
	t.Helper()
	bs, err := newBrokers("memory", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bs.close)
	return bs.open
}

// smallConfig is a workload small enough for the race detector that still
// fills partitions, retries and churns.
func smallConfig() auditConfig {
	return auditConfig{
		Partitions: 4,
		Capacity:   4,
		Producers:  3,
		Records:    3000,
		Groups:     3,
		Members:    3,
		Batch:      4,
		Retry:      0.2,
		Churn:      200 * time.Microsecond,
		Seed:       1,
		Timeout:    60 * time.Second,
	}
}

func TestWorkedExamplesMatchContract(t *testing.T) {
	var out bytes.Buffer
	bad, err := runExamples(&out, memoryBrokers(t))
	if err != nil || len(bad) > 0 {
		t.Fatalf("worked examples mismatched: %q, %v\n%s", bad, err, out.String())
	}
	if strings.Contains(out.String(), "MISMATCH") {
		t.Fatalf("output reports a mismatch:\n%s", out.String())
	}
}

func TestRunStepsReportsMismatch(t *testing.T) {
	var out bytes.Buffer
	bad := runSteps(&out, []step{
		{"right", func() (string, error) { return "1", nil }, "1"},
		{"wrong", func() (string, error) { return "2", nil }, "3"},
	})
	if len(bad) != 1 || !strings.Contains(bad[0], "wrong") {
		t.Errorf("runSteps = %q, want one mismatch for step %q", bad, "wrong")
	}
	if !strings.Contains(out.String(), "MISMATCH") {
		t.Errorf("output lacks MISMATCH:\n%s", out.String())
	}
}

func TestWorkloadPassesAllChecks(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*auditConfig)
	}{
		{"default shape", func(*auditConfig) {}},
		{"one member per group", func(c *auditConfig) { c.Members = 1 }},
		{"one partition, capacity 1", func(c *auditConfig) { c.Partitions, c.Capacity = 1, 1 }},
		{"no retries, no churn", func(c *auditConfig) { c.Retry, c.Churn = 0, 0 }},
		{"more members than partitions", func(c *auditConfig) { c.Members, c.Batch = 6, 1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := smallConfig()
			tt.edit(&cfg)
			h, err := runWorkload(context.Background(), cfg, memoryBrokers(t))
			if err != nil {
				t.Fatalf("runWorkload: %v", err)
			}
			r := verify(h)
			if len(r.Problems) > 0 {
				t.Fatalf("verify problems: %q", r.Problems)
			}
			if len(r.Groups) != cfg.Groups {
				t.Fatalf("got %d group reports, want %d", len(r.Groups), cfg.Groups)
			}
			for _, g := range r.Groups {
				if g.Published != int64(cfg.Records) || g.Acked != int64(cfg.Records) {
					t.Errorf("group %s: published %d acked %d, want %d each", g.Name, g.Published, g.Acked, cfg.Records)
				}
				if g.Delivered != g.Acked+g.Redelivered {
					t.Errorf("group %s: delivered %d != acked %d + redelivered %d", g.Name, g.Delivered, g.Acked, g.Redelivered)
				}
				if cfg.Retry > 0 && g.Retried == 0 {
					t.Errorf("group %s: no retries with probability %g over %d records", g.Name, cfg.Retry, cfg.Records)
				}
			}
			t.Logf("full %d, churns %d, elapsed %s", h.Full, h.Churns, h.Elapsed)
		})
	}
}

func TestWorkloadTimesOutInsteadOfHanging(t *testing.T) {
	cfg := smallConfig()
	cfg.Records, cfg.Timeout = maxRecordGroups/cfg.Groups, 50*time.Millisecond
	start := time.Now()
	h, err := runWorkload(context.Background(), cfg, memoryBrokers(t))
	if err != nil {
		t.Fatalf("runWorkload: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("runWorkload took %s past a 50ms deadline", d)
	}
	r := verify(h)
	if !h.TimedOut || len(r.Problems) == 0 {
		t.Fatalf("TimedOut = %v, problems %q; want a reported timeout", h.TimedOut, r.Problems)
	}
}

// cleanHistory is a correct history: two partitions of three records, one
// group that got partition 0's offset 1 twice (a retry) and acked
// everything in order.
func cleanHistory() *history {
	pub := func(p int32, o int64, s string) publication { return publication{p, o, s} }
	return &history{
		Partitions: 2,
		Published: []publication{
			pub(0, 0, "a"), pub(1, 0, "x"), pub(0, 1, "b"), pub(1, 1, "y"), pub(0, 2, "c"), pub(1, 2, "z"),
		},
		Groups: []groupHistory{{
			Name: "g",
			Deliveries: []publication{
				pub(0, 0, "a"), pub(1, 0, "x"), pub(0, 1, "b"), pub(0, 1, "b"), pub(1, 1, "y"), pub(0, 2, "c"), pub(1, 2, "z"),
			},
			Acks:    [][]int64{{0, 1, 2}, {0, 1, 2}},
			Retries: 1,
		}},
	}
}

func TestVerifyAcceptsCleanHistory(t *testing.T) {
	r := verify(cleanHistory())
	if len(r.Problems) > 0 {
		t.Fatalf("problems %q, want none", r.Problems)
	}
	g := r.Groups[0]
	if g.Published != 6 || g.Delivered != 7 || g.Acked != 6 || g.Redelivered != 1 || g.Lost != 0 || g.AckedTwice != 0 || !g.OrderKept {
		t.Errorf("report %+v", g)
	}
}

func TestVerifyDetectsBrokenHistories(t *testing.T) {
	for _, tt := range []struct {
		name       string
		breakIt    func(h *history)
		wproblem   string
		wlost      int64
		wtwice     int64
		wunordered bool
	}{
		{"lost record", func(h *history) { h.Groups[0].Acks[1] = []int64{0, 1} },
			"lost", 1, 0, false},
		{"acked twice", func(h *history) { h.Groups[0].Acks[0] = []int64{0, 1, 1, 2} },
			"acknowledged twice", 0, 1, true},
		{"acks reordered", func(h *history) { h.Groups[0].Acks[0] = []int64{1, 0, 2} },
			"out of partition order", 0, 0, true},
		{"ack of unpublished offset", func(h *history) { h.Groups[0].Acks[0] = []int64{0, 1, 2, 3} },
			"never published", 0, 0, false},
		{"payload changed", func(h *history) { h.Groups[0].Deliveries[0].Payload = "A" },
			"payload other than", 0, 0, false},
		{"ack without delivery", func(h *history) { h.Groups[0].Deliveries = h.Groups[0].Deliveries[1:] },
			"never delivered", 0, 0, false},
		{"publish offset gap", func(h *history) { h.Published = h.Published[1:] },
			"not exactly 0..2 once each (1 missing", 0, 0, false},
		{"publish offset repeated", func(h *history) { h.Published = append(h.Published, publication{1, 1, "y"}) },
			"1 repeated", 0, 0, false},
		{"timed out", func(h *history) { h.TimedOut = true },
			"deadline", 0, 0, false},
		{"broker error", func(h *history) { h.ErrorCount, h.Errors = 1, []string{"Poll: boom"} },
			"Poll: boom", 0, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := cleanHistory()
			tt.breakIt(h)
			r := verify(h)
			if len(r.Problems) == 0 {
				t.Fatal("verify found no problem")
			}
			if got := strings.Join(r.Problems, "; "); !strings.Contains(got, tt.wproblem) {
				t.Errorf("problems %q, want one mentioning %q", got, tt.wproblem)
			}
			g := r.Groups[0]
			if g.Lost != tt.wlost || g.AckedTwice != tt.wtwice || g.OrderKept == tt.wunordered {
				t.Errorf("lost %d twice %d order kept %v; want %d %d %v",
					g.Lost, g.AckedTwice, g.OrderKept, tt.wlost, tt.wtwice, !tt.wunordered)
			}
		})
	}
}

// TestRunAuditCommand: good flags run the worked examples and the
// workload; -h prints the usage on stdout.
func TestRunAuditCommand(t *testing.T) {
	for _, tt := range []struct {
		name  string
		args  []string
		wcode int
		wout  string
	}{
		{"passes", []string{"-records", "500", "-partitions", "3", "-capacity", "4", "-churn", "1ms", "-seed", "7"},
			exitOK, "audit: all checks passed"},
		{"prints seed", []string{"-records", "10", "-seed", "42"}, exitOK, "seed 42"},
		{"capacity beyond rule 1", []string{"-records", "5000", "-partitions", "1", "-capacity", "3000", "-seed", "3"},
			exitOK, "audit: all checks passed"},
		{"ends of the ranges", []string{"-records", "1", "-partitions", "64", "-capacity", "16777216", "-producers", "256",
			"-groups", "128", "-members", "1", "-batch", "64", "-retry", "0.5", "-churn", "1h", "-timeout", "1h", "-seed", "18446744073709551615"},
			exitOK, "audit: all checks passed"},
		{"other ends", []string{"-records", "20", "-partitions", "1", "-capacity", "1", "-producers", "1",
			"-groups", "1", "-members", "64", "-batch", "1", "-retry", "0", "-churn", "0", "-timeout", "1m", "-seed", "010"},
			exitOK, "audit: all checks passed"},
		{"memory backend named", []string{"-backend", "memory", "-records", "300", "-seed", "5"},
			exitOK, "backend memory: the in-process engine"},
		{"help", []string{"-h"}, exitOK, "Usage: tributary audit [flags]"},
		{"help lists the backend flags", []string{"-h"}, exitOK, "-nats"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := runAudit(context.Background(), tt.args, &out, &errOut); code != tt.wcode {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wcode, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tt.wout) {
				t.Errorf("stdout lacks %q:\n%s", tt.wout, out.String())
			}
			if errOut.String() != "" {
				t.Errorf("stderr not empty:\n%s", errOut.String())
			}
		})
	}
}

// TestRunAuditRefusesBadFlags: every bad value, unknown flag and stray
// argument exits with status 2 and exactly one line on stderr, naming the
// flag, the value and the allowed range, before any work: stdout stays
// empty.
func TestRunAuditRefusesBadFlags(t *testing.T) {
	f := strings.Fields
	for _, tt := range []struct {
		args  []string
		wline string // the whole stderr line, without "tributary audit: " and the newline
	}{
		{f("-records 9223372036854775807"), "-records 9223372036854775807: must be in 1..1000000"},
		{f("-records 99999999999999999999"), "-records 99999999999999999999: must be in 1..1000000"},
		{f("-records 1000000000"), "-records 1000000000: must be in 1..1000000"},
		{f("-records 1000001"), "-records 1000001: must be in 1..1000000"},
		{f("-records 0"), "-records 0: must be in 1..1000000"},
		{f("-records -5"), "-records -5: must be in 1..1000000"},
		{f("-records many"), "-records many: must be in 1..1000000"},
		{[]string{"-records", ""}, `-records "": must be in 1..1000000`},
		{[]string{"-records", "0x10"}, `-records 0x10: must be in 1..1000000`},
		{f("-records 1000000 -groups 3"), "-records 1000000 with -groups 3: records × groups must be at most 2000000"},
		{f("-groups 128 -records 15626"), "-records 15626 with -groups 128: records × groups must be at most 2000000"},
		{f("-partitions 0"), "-partitions 0: must be in 1..64"},
		{f("-partitions 65"), "-partitions 65: must be in 1..64"},
		{f("-partitions 4294967297"), "-partitions 4294967297: must be in 1..64"},
		{f("-capacity 0"), "-capacity 0: must be in 1..16777216"},
		{f("-capacity 16777217"), "-capacity 16777217: must be in 1..16777216"},
		{f("-producers 0"), "-producers 0: must be in 1..256"},
		{f("-producers 257"), "-producers 257: must be in 1..256"},
		{f("-producers 9223372036854775807"), "-producers 9223372036854775807: must be in 1..256"},
		{f("-groups 0"), "-groups 0: must be in 1..128"},
		{f("-groups 129"), "-groups 129: must be in 1..128"},
		{f("-members 0"), "-members 0: must be in 1..64"},
		{f("-members 65"), "-members 65: must be in 1..64"},
		{f("-batch 0"), "-batch 0: must be in 1..64"},
		{f("-batch 65"), "-batch 65: must be in 1..64"},
		{f("-retry -0.1"), "-retry -0.1: must be in 0..0.5"},
		{f("-retry 0.51"), "-retry 0.51: must be in 0..0.5"},
		{f("-retry 1"), "-retry 1: must be in 0..0.5"},
		{f("-retry NaN"), "-retry NaN: must be in 0..0.5"},
		{f("-retry often"), "-retry often: must be in 0..0.5"},
		{f("-churn 999us"), "-churn 999us: must be 0 or in 1ms..1h"},
		{f("-churn -1ms"), "-churn -1ms: must be 0 or in 1ms..1h"},
		{f("-churn 2h"), "-churn 2h: must be 0 or in 1ms..1h"},
		{f("-churn 5"), "-churn 5: must be 0 or in 1ms..1h"},
		{f("-timeout 0"), "-timeout 0: must be in 1ms..1h"},
		{f("-timeout -1s"), "-timeout -1s: must be in 1ms..1h"},
		{f("-timeout 61m"), "-timeout 61m: must be in 1ms..1h"},
		{f("-timeout 1e9h"), "-timeout 1e9h: must be in 1ms..1h"},
		{f("-seed -1"), "-seed -1: must be in 0..18446744073709551615"},
		{f("-seed 18446744073709551616"), "-seed 18446744073709551616: must be in 0..18446744073709551615"},
		{f("-seed lucky"), "-seed lucky: must be in 0..18446744073709551615"},
		{f("-records 0 -groups 0"), "-records 0: must be in 1..1000000"}, // the first bad flag
		{f("-backend kafka"), `-backend "kafka": must be memory or jetstream`},
		{[]string{"-backend", ""}, `-backend "": must be memory or jetstream`},
		{f("-nats nats://127.0.0.1:4222"), `-nats "nats://127.0.0.1:4222": needs -backend jetstream`},
		{f("-backend memory -nats nats://127.0.0.1:4222"), `-nats "nats://127.0.0.1:4222": needs -backend jetstream`},
		{f("-backend jetstream -nats http://127.0.0.1:4222"), `-nats "http://127.0.0.1:4222": want nats://HOST:PORT (or tls://, ws://, wss://), several separated by commas`},
		{f("-backend jetstream -records 0"), "-records 0: must be in 1..1000000"},
		{f("-backend jetstream -groups 128 -records 15626"), "-records 15626 with -groups 128: records × groups must be at most 2000000"},
		{f("-nope"), "flag provided but not defined: -nope (tributary audit -h lists the flags)"},
		{f("-records"), "flag needs an argument: -records (tributary audit -h lists the flags)"},
		{f("-records 10 extra"), `unexpected argument extra (every setting is a flag; tributary audit -h lists them)`},
		{[]string{"-records", "10", "two words"}, `unexpected argument "two words" (every setting is a flag; tributary audit -h lists them)`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := runAudit(context.Background(), tt.args, &out, &errOut); code != exitUsage {
				t.Errorf("exit status %d, want %d", code, exitUsage)
			}
			if want := "tributary audit: " + tt.wline + "\n"; errOut.String() != want {
				t.Errorf("stderr %q, want %q", errOut.String(), want)
			}
			if out.Len() > 0 {
				t.Errorf("stdout not empty, so work started:\n%s", out.String())
			}
		})
	}
}

// TestAuditFlagRangesAreValidConfigs: the defaults and the flags' bounds
// pass auditConfig.validate, so a command line parseAuditFlags accepts
// never fails in runWorkload.
func TestAuditFlagRangesAreValidConfigs(t *testing.T) {
	lo := auditConfig{Partitions: 1, Capacity: 1, Producers: 1, Records: 1, Groups: 1, Members: 1, Batch: 1, Timeout: minTimeout}
	hi := auditConfig{Partitions: maxPartitions, Capacity: maxCapacity, Producers: maxProducers, Records: maxRecordGroups / maxGroups,
		Groups: maxGroups, Members: maxMembers, Batch: maxBatch, Retry: maxRetry, Churn: maxChurn, Timeout: maxTimeout}
	for name, c := range map[string]auditConfig{"default": defaultAuditConfig(), "low": lo, "high": hi} {
		if err := c.validate(); err != nil {
			t.Errorf("%s: validate: %v", name, err)
		}
	}
	c := defaultAuditConfig()
	c.Records = maxRecords + 1
	if err := c.validate(); err == nil {
		t.Errorf("validate accepted %d records", c.Records)
	}
}

// TestAuditJetStreamDefaults: -backend jetstream lowers the defaults of
// -records and -churn to what fits JetStream, and the flags given still
// win; -backend memory keeps the memory defaults.
func TestAuditJetStreamDefaults(t *testing.T) {
	def := defaultAuditConfig()
	for _, tt := range []struct {
		args          []string
		records       int
		churn         time.Duration
		backend, nats string
	}{
		{nil, def.Records, def.Churn, "memory", ""},
		{strings.Fields("-backend memory"), def.Records, def.Churn, "memory", ""},
		{strings.Fields("-backend jetstream"), jetstreamRecords, jetstreamChurn, "jetstream", ""},
		{strings.Fields("-backend jetstream -records 10 -churn 0"), 10, 0, "jetstream", ""},
		{strings.Fields("-records 10 -backend jetstream -nats nats://127.0.0.1:4222"), 10, jetstreamChurn, "jetstream", "nats://127.0.0.1:4222"},
	} {
		cfg, err := parseAuditFlags(tt.args, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if cfg.Records != tt.records || cfg.Churn != tt.churn || cfg.Backend != tt.backend || cfg.NATS != tt.nats {
			t.Errorf("%q: records %d churn %v backend %q nats %q; want %d %v %q %q",
				tt.args, cfg.Records, cfg.Churn, cfg.Backend, cfg.NATS, tt.records, tt.churn, tt.backend, tt.nats)
		}
	}
}

// TestAuditOnJetStream: the whole audit, worked examples and workload, on
// an embedded JetStream server, passes every check and says which backend
// it ran on and what it does not check there.
func TestAuditOnJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	var out, errOut bytes.Buffer
	// 300 records: each call is a round trip to the server, and the run
	// took 2.3 s, 11 s under the race detector, of the 1m deadline (go1.26,
	// linux/amd64, 2 shared CPUs, 2026-12-04).
	args := strings.Fields("-backend jetstream -records 300 -churn 50ms -seed 11")
	if code := runAudit(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, out.String(), errOut.String())
	}
	for _, want := range []string{"backend jetstream, on an embedded NATS server", "is the engine's alone",
		"published 300 records", "audit: all checks passed"} {
		if !strings.Contains(strings.ReplaceAll(out.String(), "\n", " "), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "MISMATCH") {
		t.Errorf("a worked example mismatched on JetStream:\n%s", out.String())
	}
	if errOut.Len() > 0 {
		t.Errorf("stderr not empty:\n%s", errOut.String())
	}
	t.Logf("\n%s", out.String())
}

// TestAuditUnreachableServerFailsFast: -backend jetstream with -nats naming
// a port nothing listens on exits with status 1 within seconds, its one
// FAILED line naming the server and why, and runs nothing after the
// broker it could not open: no worked-example step and no workload.
func TestAuditUnreachableServerFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + ln.Addr().String()
	ln.Close() // a port that was just free: a connection is refused
	var out, errOut bytes.Buffer
	start := time.Now()
	code := runAudit(context.Background(), []string{"-backend", "jetstream", "-nats", url, "-seed", "1"}, &out, &errOut)
	if code != exitFailed {
		t.Errorf("exit status %d, want %d", code, exitFailed)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v to fail", d)
	}
	text := strings.Join(strings.Fields(out.String()), " ")
	if !strings.Contains(text, "audit: FAILED:") || !strings.Contains(text, url) || !strings.Contains(text, "unavailable") {
		t.Errorf("stdout does not say the server %s is unavailable:\n%s", url, out.String())
	}
	if strings.Contains(text, "== concurrent workload ==") || strings.Contains(text, "Create(") {
		t.Errorf("the audit went on without a broker:\n%s", out.String())
	}
	if errOut.Len() > 0 {
		t.Errorf("stderr not empty:\n%s", errOut.String())
	}
}

// TestAuditInterruptedCleansUp: the program's context ending mid-workload
// (SIGINT) stops the audit within seconds (the memory workload alone takes
// longer), long before its -timeout, with
// status 1 and a FAILED line saying it was interrupted; with an embedded
// JetStream server, the server's store (a directory in the temporary
// directory) is removed too.
func TestAuditInterruptedCleansUp(t *testing.T) {
	for _, tt := range []struct {
		name string
		args string
	}{
		{"memory", "-records 1000000 -groups 2 -retry 0.5 -capacity 1 -timeout 1h -seed 5"},
		{"jetstream", "-backend jetstream -records 100000 -timeout 1h -seed 5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "jetstream" && testing.Short() {
				t.Skip("starts a NATS server")
			}
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			ctx, cancel := context.WithCancel(context.Background())
			var out, errOut lockedBuffer
			done := make(chan int)
			go func() { done <- runAudit(ctx, strings.Fields(tt.args), &out, &errOut) }()
			// Cancelled once the workload runs: its first line is printed.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				select {
				case code := <-done:
					t.Fatalf("ended with status %d before the interrupt:\n%s", code, out.String())
				default:
				}
				if time.Now().After(deadline) {
					cancel()
					t.Fatalf("the workload did not start within 30s")
				}
				if strings.Contains(out.String(), "== concurrent workload ==") {
					break
				}
			}
			time.Sleep(200 * time.Millisecond)
			cancel()
			var code int
			select {
			case code = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the audit went on for 10s after the interrupt")
			}
			text := strings.Join(strings.Fields(out.String()), " ")
			if code != exitFailed || !strings.Contains(text, "audit: FAILED: interrupted") {
				t.Errorf("exit status %d, want %d, and a FAILED line naming the interrupt:\n%s", code, exitFailed, out.String())
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
				t.Errorf("left behind in the temporary directory: %q", left)
			}
			if errOut.String() != "" {
				t.Errorf("stderr not empty:\n%s", errOut.String())
			}
		})
	}
}
