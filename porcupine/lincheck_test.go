package porcupine_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	porc "github.com/anishathalye/porcupine"

	"github.com/f91dcac0/tributary/porcupine"
)

var writeOKFixture = flag.Bool("write-ok-fixture", false,
	"TestEngineLinearizable: write the first history's first topic to testdata/ok-engine.json, and "+
		"TestOKFixtures an Ok history of each Tributary mix to testdata/ok-<mix>.json, each unless that file exists")

// checkTimeout bounds each history's check in the tests. Histories of the
// sizes below check in milliseconds (README cost table); a check that hits
// this is reported as Unknown, which fails the test.
const checkTimeout = 30 * time.Second

// TestEngineLinearizable runs engineHistories seeded workloads against the
// real engine, cycling through every mix, each with 8 clients on each of its
// topics, and requires every history to be linearizable. Unknown (a checker
// timeout) fails the test like Illegal does. A failing history is written,
// with its visualization, under the test's temporary directory and named in
// the failure.
func TestEngineLinearizable(t *testing.T) {
	mixes := porcupine.MixNames()
	var ops int
	var worst, total time.Duration
	for i := 0; i < engineHistories; i++ {
		w := porcupine.Workload{Seed: uint64(i), Mix: mixes[i%len(mixes)], Topics: 4, Clients: 8, OpsPerClient: 100}
		h, err := porcupine.Run(w, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := porcupine.Check(h, checkTimeout)
		ops += len(h.Ops)
		total += res.Elapsed
		worst = max(worst, res.Elapsed)
		if res.Verdict != porc.Ok {
			t.Fatalf("history %d (%v): %s on topic %q after %v\n%s", i, h.Workload, res.Verdict, res.Topic, res.Elapsed, keep(t, h, res))
		}
		if _, err := os.Stat(filepath.Join("testdata", "ok-engine.json")); i == 0 && *writeOKFixture && err != nil {
			topic := h.Topics()[0]
			note := fmt.Sprintf("real engine, TestEngineLinearizable history 0 (%v), topic %s", h.Workload, topic)
			if err := porcupine.WriteFixture(filepath.Join("testdata", "ok-engine.json"), porcupine.Fixture{Verdict: porc.Ok, Note: note, History: h.Topic(topic)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d histories (%d ops, 8 clients per topic) all Ok; check time total %v, worst %v", engineHistories, ops, total, worst)
}

// keep writes a failing history (as a fixture to add to testdata/) and, for
// Illegal, the failing topic's visualization, and says where.
func keep(t *testing.T, h porcupine.History, res porcupine.Result) string {
	t.Helper()
	dir := t.TempDir()
	if d := os.Getenv("LINCHECK_KEEP"); d != "" {
		dir = d
	}
	sub := h
	if res.Topic != "" {
		sub = h.Topic(res.Topic)
	}
	name := fmt.Sprintf("seed-%d", h.Workload.Seed)
	note := fmt.Sprintf("%s from TestEngineLinearizable, %v, topic %s", res.Verdict, h.Workload, res.Topic)
	msg := ""
	if err := porcupine.WriteFixture(filepath.Join(dir, name+".json"), porcupine.Fixture{Verdict: res.Verdict, Note: note, History: sub}); err != nil {
		msg += fmt.Sprintf("writing the history: %v\n", err)
	}
	if res.Verdict == porc.Illegal {
		if _, err := porcupine.Visualize(h, res.Topic, filepath.Join(dir, name+".html"), checkTimeout); err != nil {
			msg += fmt.Sprintf("writing the visualization: %v\n", err)
		}
	}
	return msg + "history and visualization in " + dir + " (set LINCHECK_KEEP=dir to keep them)"
}

// TestOKFixtures, with -write-ok-fixture, writes testdata/ok-<mix>.json for
// each mix of the Tributary calls that has none: one topic of a short
// history of the real engine, which must be Ok. Without the flag it does
// nothing; TestFixtures replays what it wrote.
func TestOKFixtures(t *testing.T) {
	if !*writeOKFixture {
		t.Skip("only with -write-ok-fixture")
	}
	for _, mix := range porcupine.Mixes() {
		path := filepath.Join("testdata", "ok-"+mix.Name+".json")
		if _, err := os.Stat(path); err == nil || !usesTributaryCalls(mix) {
			continue
		}
		w := porcupine.Workload{Seed: 1, Mix: mix.Name, Topics: 1, Clients: 8, OpsPerClient: 25}
		h, err := porcupine.Run(w, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res := porcupine.Check(h, checkTimeout); res.Verdict != porc.Ok {
			t.Fatalf("%v: %s\n%s", h.Workload, res.Verdict, keep(t, h, res))
		}
		note := fmt.Sprintf("real engine, TestOKFixtures (%v)", h.Workload)
		if err := porcupine.WriteFixture(path, porcupine.Fixture{Verdict: porc.Ok, Note: note, History: h}); err != nil {
			t.Fatal(err)
		}
	}
}

// usesTributaryCalls reports whether mix makes calls beyond the seven core
// calls.
func usesTributaryCalls(mix porcupine.Mix) bool {
	for _, k := range porcupine.Kinds() {
		if k > porcupine.KindRetry && mix.Weights[k] > 0 {
			return true
		}
	}
	return false
}
