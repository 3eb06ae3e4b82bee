package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/bench/cputime"
	"github.com/f91dcac0/tributary/bench/typed"
)

// cpuLoop is a loop result with one chunk per round, each of 1000 units at
// the given CPU ns per unit, and allocs allocations per unit.
func cpuLoop(name string, allocs float64, ns ...float64) cputime.LoopResult {
	l := cputime.LoopResult{Name: name, Ops: 1000}
	for _, v := range ns {
		l.Chunks = append(l.Chunks, cputime.Chunk{Units: 1000, CPU: durNs(v * 1000), Wall: durNs(v * 1000), Allocs: uint64(allocs * 1000)})
	}
	return l
}

func cpuFixture() []cputime.Result {
	rt := cputime.Result{Family: typed.FamilyRoundTrip, Unit: "record", Procs: 1, Base: typed.LoopHandle, Loops: []cputime.LoopResult{
		cpuLoop(typed.LoopChan, 0, 40, 50, 40),
		cpuLoop(typed.LoopHandle, 0, 100, 100, 120), // chan ratios 2.5, 2, 3 → median 2.5
		cpuLoop(typed.LoopString, 2, 150, 300, 240), // 1.5, 3, 2 → 2 (met: ≤ 2)
		cpuLoop(typed.LoopBytes, 3, 300, 300, 360),  // 3, 3, 3
		cpuLoop(typed.LoopJSON, 10, 1100, 1500, 1300),
		cpuLoop(typed.LoopHandleJSON, 9, 1000, 1000, 1000),        // 1.1, 1.5, 1.3 → 1.3
		cpuLoop(typed.LoopHandleJSONSession, 9, 1000, 1250, 1100), // 1.1, 1.2, 1.182 → 1.182 (met)
		cpuLoop(typed.LoopCalibration, 0, 90, 110, 120),           // 0.9, 1.1, 1 → 1
		cpuLoop(typed.LoopFloor, 1, 150, 150, 180),                // 1.5, 1.5, 1.5; typed-string ÷ it 1, 2, 1.333
	}}
	out := []cputime.Result{rt}
	for i, n := range typed.ConsumerCounts {
		run := float64(200 * (i + 1)) // engine 100: ratios 0.5, 0.25, 0.167
		out = append(out, cputime.Result{Family: typed.ConsumerRunName(n), Unit: "record", Procs: 1, Base: typed.LoopEngineDirect, Loops: []cputime.LoopResult{
			cpuLoop(typed.LoopEngineDirect, 0, 100, 100, 100),
			cpuLoop(typed.LoopRun, 0.001*float64(i), run, run, run),
			cpuLoop(typed.LoopRunFloor, 0, 125, 125, 125), // engine ÷ it 0.8
		}})
	}
	return out
}

// TestCPUTargets: each goal is computed from the loops it names, in the
// direction it is stated (the Run ratio is engine ÷ typed: typed
// throughput per CPU second over the engine's), with the limits,
// from paired ratios; a family not measured leaves its goals "not
// measured".
func TestCPUTargets(t *testing.T) {
	ts := evaluateCPUTargets(cpuFixture())
	require.Len(t, ts, 16)
	want := []struct {
		name  string
		ratio float64
		met   *bool
	}{
		{"1 consumer", 0.5, ptr(true)},
		{"bound of goal 1 on this API, 1 consumer", 0.8, nil},
		{"4 consumer", 0.25, ptr(false)},
		{"bound of goal 1 on this API, 4 consumer", 0.8, nil},
		{"16 consumer", 1.0 / 6, ptr(false)},
		{"bound of goal 1 on this API, 16 consumer", 0.8, nil},
		{"allocations per record", 0.002, ptr(true)},
		{"String round trip", 2, ptr(true)},
		{"String round-trip allocations", 2, ptr(true)},
		{"bound of goal 2", 1.5, nil},
		{"String round trip vs that bound", 4.0 / 3, nil},
		{"Bytes", 3, nil},
		{"JSON", 1.3, ptr(false)},
		{"JSON round trip vs the same on the engine as NewCluster", 1.3 / 1.1, ptr(true)},
		{"bare channel", 2.5, ptr(false)},
		{"calibration", 1, ptr(true)},
	}
	for i, w := range want {
		require.Contains(t, ts[i].Name, w.name)
		require.NotNil(t, ts[i].Ratio, ts[i].Name)
		require.InDelta(t, w.ratio, *ts[i].Ratio, 1e-9, ts[i].Name)
		require.Equal(t, w.met, ts[i].Met, ts[i].Name)
	}
	verdict, _ := targetLine(ts[11])
	require.Equal(t, "report", verdict)
	require.Contains(t, ts[7].Measured, "median 2.000, range 1.500–3.000")

	// A calibration ratio off by more than 5 % either way is not met.
	for _, c := range []struct {
		ns  float64
		met bool
	}{{94, false}, {96, true}, {104, true}, {106, false}} {
		rs := cpuFixture()
		rs[0].Loops[7] = cpuLoop(typed.LoopCalibration, 0, c.ns, c.ns, c.ns*1.2)
		ts := evaluateCPUTargets(rs)
		require.Equal(t, c.met, *ts[15].Met, "calibration at %.2f", c.ns/100)
	}

	ts = evaluateCPUTargets(cpuFixture()[:1]) // no consumer families
	for i := range 6 {
		require.Nil(t, ts[i].Met, ts[i].Name)
		verdict, _ := targetLine(ts[i])
		require.Equal(t, "not measured", verdict)
	}
	require.Nil(t, ts[6].Ratio)
	require.NotNil(t, ts[7].Met)
}

func ptr(b bool) *bool { return &b }

// TestCPUTables: the table gives each loop's CPU ns, its paired ratio to
// the family's base with the range, and its allocations.
func TestCPUTables(t *testing.T) {
	rs := cpuFixture()
	rows := cpuRows(rs[:1])
	require.Equal(t, []string{typed.FamilyRoundTrip, typed.LoopChan, "1", "1000", "40.0", "0.400×", "0.333–0.500", "0", "0", "23.1M"}, rows[1])
	require.Equal(t, "base", rows[2][5])
	var text, md bytes.Buffer
	rep := Report{Meta: Meta{Mode: "cputime", Rounds: 3, Chunk: "25ms"}, CPU: rs}
	rep.Targets = targetsOf(rep)
	require.Len(t, rep.Targets, 16, "a CPU-time report has only the CPU-time goals")
	writeText(&text, rep)
	writeMarkdown(&md, rep)
	for _, s := range []string{"-cputime -rounds 3 -chunk 25ms", "ConsumerRun/consumers=16", "typed-run", "NOT met", "report"} {
		require.Contains(t, text.String(), s)
		require.Contains(t, md.String(), s)
	}
	require.NotContains(t, text.String(), "Publish", "no wall-time table or targets")
}

// TestCPUFlags: the -cputime flags are checked before anything runs.
func TestCPUFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		werr string
	}{
		{[]string{"-cputime"}, ""},
		{[]string{"-cputime", "-rounds", "1000", "-chunk", "1ms", "-cpu", "1,2"}, ""},
		{[]string{"-cputime", "-rounds", "0"}, "-rounds 0: must be in 1..1000"},
		{[]string{"-cputime", "-rounds", "1001"}, "-rounds 1001: must be in 1..1000"},
		{[]string{"-cputime", "-chunk", "999us"}, "-chunk 999µs: must be in 1ms..10s"},
		{[]string{"-cputime", "-chunk", "11s"}, "-chunk 11s: must be in 1ms..10s"},
		{[]string{"-cputime", "-plot", "x.svg"}, "-plot x.svg: -cputime has no plot"},
		{[]string{"-cputime", "-scenarios", "^RoundTrip$"}, "select no (family, loop) pair"},
		{[]string{"-cputime", "-cpu", "0"}, "-cpu 0: each value must be in"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o, err := parseFlags(tt.args, &bytes.Buffer{})
			if tt.werr == "" {
				require.NoError(t, err)
				require.NotEmpty(t, o.families)
				return
			}
			require.ErrorContains(t, err, tt.werr)
		})
	}
	o, err := parseFlags([]string{"-cputime", "-scenarios", "Consumer", "-subjects", "typed-run"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Len(t, o.families, len(typed.ConsumerCounts))
	for _, f := range o.families {
		require.Len(t, f.Loops, 1)
	}
	require.False(t, o.cpuSet)

	var help bytes.Buffer
	_, err = parseFlags([]string{"-h"}, &help)
	require.Error(t, err)
	for _, s := range []string{"-cputime", "RUSAGE_SELF", typed.FamilyRoundTrip, typed.LoopHandleJSON, typed.ConsumerRunName(16)} {
		require.Contains(t, help.String(), s)
	}
}

// TestCPUEndToEnd runs -cputime in-process on two families at a tiny size
// and checks the JSON it writes and its re-rendering with -from.
func TestCPUEndToEnd(t *testing.T) {
	dir := t.TempDir()
	jsonPath, mdPath := filepath.Join(dir, "c.json"), filepath.Join(dir, "c.md")
	var out, progress bytes.Buffer
	err := run([]string{"-cputime", "-rounds", "2", "-chunk", "2ms", "-scenarios", fmt.Sprintf("^(%s|%s)$", typed.FamilyRoundTrip, typed.ConsumerRunName(1)),
		"-json", jsonPath, "-markdown", mdPath}, &out, &progress)
	require.NoError(t, err, progress.String())
	require.Contains(t, out.String(), "Performance targets:")

	data, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var rep Report
	require.NoError(t, json.Unmarshal(data, &rep))
	require.Equal(t, "cputime", rep.Meta.Mode)
	require.Len(t, rep.CPU, 2)
	for _, r := range rep.CPU {
		require.Equal(t, 1, r.Procs, r.Family)
		for _, l := range r.Loops {
			require.Len(t, l.Chunks, 2, "%s/%s", r.Family, l.Name)
			require.Positive(t, l.NsPerUnit(), "%s/%s", r.Family, l.Name)
		}
	}
	require.NotNil(t, rep.Targets[0].Met, "Run at 1 consumer measured")
	require.Nil(t, rep.Targets[1].Met, "4 consumers not run")
	md, err := os.ReadFile(mdPath)
	require.NoError(t, err)
	require.Contains(t, string(md), "| TypedRoundTrip | typed-string | 1 |")

	var again bytes.Buffer
	require.NoError(t, run([]string{"-from", jsonPath}, &again, &progress))
	require.Equal(t, out.String(), again.String())
}

func durNs(v float64) time.Duration { return time.Duration(v) }
