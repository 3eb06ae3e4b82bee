package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultCPUs(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want string
	}{{1, "1"}, {2, "1,2"}, {6, "1,2,4,6"}, {16, "1,2,4,8,16"}} {
		require.Equal(t, tt.want, defaultCPUs(tt.n), "n=%d", tt.n)
	}
}

func TestParseCPUs(t *testing.T) {
	got, err := parseCPUs("4, 1,2,2", 64)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 4}, got)
	for _, bad := range []string{"", "0", "1,x", "-2", "65", "1,,2"} {
		_, err := parseCPUs(bad, 64)
		require.ErrorContains(t, err, "each value must be in 1..64", "%q", bad)
	}
}

func TestFlagsRejectNonsense(t *testing.T) {
	for _, args := range [][]string{{"-count", "0"}, {"-plot", "x.gif"}, {"-scenarios", "("}, {"extra"}} {
		_, err := parseFlags(args, &bytes.Buffer{})
		require.Error(t, err, "%q", args)
	}
}

func fixture() []Result {
	r := func(sc, subject string, procs int, parallel bool, ns, allocs float64) Result {
		return Result{Scenario: sc, Unit: "record", Parallel: parallel, Subject: subject, Procs: procs,
			Iterations: 1000, NsPerUnit: ns, UnitsPerSec: 1e9 / ns, AllocsPerUnit: allocs}
	}
	return []Result{
		r("RoundTrip", "chan-raw", 1, false, 40, 0),
		r("RoundTrip", "engine", 1, false, 100, 0),
		r("RoundTrip", "naive", 1, false, 200, 2),
		r("Batch64", "engine", 1, false, 90, 0),
		r("Batch64", "chan-raw", 1, false, 40, 0),
		r("Parallel/groups=1", "engine", 1, true, 100, 0),
		r("Parallel/groups=1", "engine", 2, true, 50, 0),
		r("Parallel/groups=3", "engine", 2, true, 100, 0),
		r("Parallel/groups=3", "naive", 2, true, 400, 4),
		r("HotTopic/partitions=16", "engine", 1, true, 100, 0),
		r("HotTopic/partitions=16", "engine", 2, true, 60, 0),
		r("RoundTrip", "engine-rw", 1, false, 80, 0),
		r("Contended/groups=16", "engine", 1, true, 100, 0),
		r("Contended/groups=16", "engine", 16, true, 500, 0),
		r("Mixed", "engine", 1, true, 100, 0),
		r("Mixed", "engine", 16, true, 20, 0),
		r("Contended/groups=16", "engine", 2, true, 80, 0),
		r("RoundTrip/handles", "engine", 1, false, 70, 0),
		r("RoundTrip/handles", "chan-raw", 1, false, 40, 0),
	}
}

// TestTargets: each target is computed from the rows it names, with the
// issue's limits, and reported unmeasured when a row is missing.
func TestTargets(t *testing.T) {
	rs := fixture()
	derive(rs)
	require.InDelta(t, 2.0, *rs[1].VsNaive, 1e-9, "RoundTrip engine vs naive")
	require.Nil(t, rs[1].Scaling, "no scaling for a sequential scenario")
	require.InDelta(t, 2.0, *rs[6].Scaling, 1e-9, "Parallel 2 procs vs 1")

	ts := evaluateTargets(rs)
	require.Len(t, ts, 11)
	want := []struct {
		ratio float64
		met   bool
	}{{2.5, true}, {2.25, false}, {2, true}, {4, true}, {100.0 / 60, false}, {100.0 / 80, false}, {0, true}, {0.2, false}, {5, true}, {1.25, true}, {1.75, false}}
	for i, w := range want {
		require.NotNil(t, ts[i].Ratio, ts[i].Name)
		require.InDelta(t, w.ratio, *ts[i].Ratio, 1e-9, ts[i].Name)
		require.Equal(t, w.met, *ts[i].Met, ts[i].Name)
	}

	ts = evaluateTargets(rs[:5]) // no parallel rows
	require.Nil(t, ts[2].Met)
	require.Nil(t, ts[3].Met)
	require.Nil(t, ts[4].Met)
	require.Nil(t, ts[5].Met)
	require.Nil(t, ts[7].Met, "no 16-proc fan-out row")
	require.Nil(t, ts[8].Met, "no 16-proc Mixed row")
	require.Nil(t, ts[9].Met, "no 2-proc fan-out row")
	require.Nil(t, ts[10].Met, "no handle round-trip row")
	var buf bytes.Buffer
	writeText(&buf, Report{Results: rs[:5], Targets: ts})
	require.Contains(t, buf.String(), "not measured")
}

func TestTablesAndPlot(t *testing.T) {
	rs := fixture()
	derive(rs)
	rep := Report{Meta: Meta{CPUs: []int{1, 2}, NumCPU: 2}, Results: rs, Targets: evaluateTargets(rs)}
	var text, md bytes.Buffer
	writeText(&text, rep)
	writeMarkdown(&md, rep)
	for _, s := range []string{"RoundTrip", "2.00×", "NOT met", "met"} {
		require.Contains(t, text.String(), s)
		require.Contains(t, md.String(), s)
	}
	require.Contains(t, md.String(), "|---|")

	dir := t.TempDir()
	for _, name := range []string{"p.svg", "p.png"} {
		path := filepath.Join(dir, name)
		require.NoError(t, writePlot(path, rep))
		st, err := os.Stat(path)
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
	require.Error(t, writePlot(filepath.Join(dir, "none.svg"), Report{Results: rs[:5]}), "nothing parallel to plot")
}

// TestRunEndToEnd runs the command in-process on a few scenarios for a
// handful of iterations each and checks the JSON it writes.
func TestRunEndToEnd(t *testing.T) {
	testing.Init()
	f := flag.Lookup("test.benchtime")
	saved := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(saved) })

	dir := t.TempDir()
	jsonPath, plotPath, mdPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg"), filepath.Join(dir, "r.md")
	var out, progress bytes.Buffer
	err := run([]string{"-benchtime", "50x", "-cpu", "1,2", "-scenarios", "^(RoundTrip|Parallel/groups=1)$",
		"-json", jsonPath, "-plot", plotPath, "-markdown", mdPath}, &out, &progress)
	require.NoError(t, err, progress.String())
	require.Contains(t, out.String(), "Performance targets:")

	data, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var rep Report
	require.NoError(t, json.Unmarshal(data, &rep))
	// RoundTrip: 6 subjects; Parallel/groups=1: 4; at 2 procs each.
	require.Len(t, rep.Results, 2*(6+4))
	for _, r := range rep.Results {
		require.False(t, r.Failed, "%s/%s", r.Scenario, r.Subject)
		require.Positive(t, r.NsPerUnit)
		require.Equal(t, 50, r.Iterations, "%s/%s: -benchtime 50x", r.Scenario, r.Subject)
	}
	require.NotNil(t, rep.Targets[0].Met, "round-trip target measured")
	require.Nil(t, rep.Targets[1].Met, "Batch64 not run")
	_, err = os.Stat(plotPath)
	require.NoError(t, err)
	md, err := os.ReadFile(mdPath)
	require.NoError(t, err)
	require.Contains(t, string(md), "| RoundTrip | engine | 1 |")

	// -from re-renders the saved results without measuring.
	var again bytes.Buffer
	require.NoError(t, run([]string{"-from", jsonPath}, &again, &progress))
	require.Equal(t, out.String(), again.String())
}

// TestPairedRatio: ratios are taken sample by sample, then the median; rows
// without matching samples fall back to the ratio of their medians.
func TestPairedRatio(t *testing.T) {
	a := &Result{NsPerUnit: 200, SamplesNs: []float64{100, 200, 300}}
	b := &Result{NsPerUnit: 100, SamplesNs: []float64{50, 100, 100}}
	v, pairs := pairedRatio(a, b)
	require.Equal(t, []float64{2, 2, 3}, pairs)
	require.InDelta(t, 2.0, v, 1e-12)

	b.SamplesNs = b.SamplesNs[:2]
	v, pairs = pairedRatio(a, b)
	require.Nil(t, pairs)
	require.InDelta(t, 2.0, v, 1e-12)

	a.SamplesNs, b.SamplesNs = []float64{10, 40}, []float64{10, 10}
	v, _ = pairedRatio(a, b)
	require.InDelta(t, 2.5, v, 1e-12, "even count: mean of the middle two")
}

// TestFailureSaysWhy: a failed measurement's message tells a failed
// benchmark (no iterations) from one that counted nothing.
func TestFailureSaysWhy(t *testing.T) {
	require.Equal(t, "the benchmark failed; go test -run '^$' -bench 'Parallel' -cpu 65 ./bench/ says why",
		failure(Result{Scenario: "Parallel/groups=1", Unit: "record", Procs: 65}))
	require.Equal(t, "no deliveries counted in 1 iterations; raise -benchtime",
		failure(Result{Scenario: "Contended/groups=16", Unit: "delivery", Procs: 2, Iterations: 1}))
}
