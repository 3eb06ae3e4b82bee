package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// smallConfig is a workload small enough for the race detector that still
// fills partitions, retries and churns.
func smallConfig() demoConfig {
	return demoConfig{
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
	if bad := runExamples(&out); len(bad) > 0 {
		t.Fatalf("worked examples mismatched: %q\n%s", bad, out.String())
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
		edit func(*demoConfig)
	}{
		{"default shape", func(*demoConfig) {}},
		{"one member per group", func(c *demoConfig) { c.Members = 1 }},
		{"one partition, capacity 1", func(c *demoConfig) { c.Partitions, c.Capacity = 1, 1 }},
		{"no retries, no churn", func(c *demoConfig) { c.Retry, c.Churn = 0, 0 }},
		{"more members than partitions", func(c *demoConfig) { c.Members, c.Batch = 6, 1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := smallConfig()
			tt.edit(&cfg)
			h, err := runWorkload(cfg)
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
	cfg.Records, cfg.Timeout = 1_000_000, 50*time.Millisecond
	start := time.Now()
	h, err := runWorkload(cfg)
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

func TestRunDemoCommand(t *testing.T) {
	for _, tt := range []struct {
		name  string
		args  []string
		wcode int
		wout  string
	}{
		{"passes", []string{"demo", "-records", "500", "-partitions", "3", "-capacity", "4", "-churn", "1ms", "-seed", "7"},
			exitOK, "demo: all checks passed"},
		{"prints seed", []string{"demo", "-records", "10", "-seed", "42"}, exitOK, "seed 42"},
		{"bad retry", []string{"demo", "-retry", "1"}, exitUsage, "retry probability"},
		{"bad partitions", []string{"demo", "-partitions", "65"}, exitUsage, "partitions 65"},
		{"unknown flag", []string{"demo", "-nope"}, exitUsage, "-nope"},
		{"help", []string{"help"}, exitOK, "Commands:"},
		{"no command", nil, exitUsage, "Usage:"},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := run(tt.args, &out, &out); code != tt.wcode {
				t.Errorf("exit status %d, want %d\n%s", code, tt.wcode, out.String())
			}
			if !strings.Contains(out.String(), tt.wout) {
				t.Errorf("output lacks %q:\n%s", tt.wout, out.String())
			}
		})
	}
}
