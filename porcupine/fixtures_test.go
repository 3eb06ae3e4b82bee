package porcupine_test

import (
	"path/filepath"
	"strings"
	"testing"

	porc "github.com/anishathalye/porcupine"

	"github.com/f91dcac0/tributary/porcupine"
)

// wantFixtures are the fixtures that must exist: Ok histories of the real
// engine (ok-engine.json, of the core calls in history format version 0, and
// one of each Tributary mix, ok-<mix>.json, in version 1) and one Illegal
// history per broken broker of faults_test.go (those of faults (a) to (g) in
// version 0, the others in version 1). Any other history that ever failed
// is added beside them (cmd/lincheck and the tests write failing histories
// in this format).
var wantFixtures = []string{
	"ok-engine.json",
	"ok-seek.json",
	"ok-assignor.json",
	"ok-addpartitions.json",
	"ok-lifecycle.json",
	"ok-window.json",
	"ok-acktimeout.json",
	"ok-extended.json",
	"illegal-poll-releases-each.json",
	"illegal-rebalance-keeps-inflight.json",
	"illegal-ack-skips-owner.json",
	"illegal-publish-burns-offset.json",
	"illegal-trim-ignores-memberless.json",
	"illegal-poll-stale-assignment.json",
	"illegal-rebalance-skips-lock.json",
	"illegal-seek-keeps-inflight.json",
	"illegal-setassignor-keeps-inflight.json",
	"illegal-window-evicts-needed.json",
	"illegal-delete-skips-retention.json",
	"illegal-added-partitions-wrong-offset.json",
	"illegal-rebalance-resets-attempts.json",
	"ok-session.json",
	"ok-rejoin.json",
	"illegal-expiry-skips-rebalance.json",
	"illegal-expiry-strict.json",
	"illegal-rejoin-keeps-delivery.json",
	"illegal-heartbeat-rejoins.json",
	"illegal-settle-skips-refresh.json",
	"illegal-join-keeps-deadline.json",
	"illegal-catch-up-skips-trim.json",
}

// TestFixtures replays every recorded history in testdata/ and requires the
// verdict it was kept with. Unknown fails.
func TestFixtures(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, p := range paths {
		have[filepath.Base(p)] = true
	}
	for _, name := range wantFixtures {
		if !have[name] {
			t.Errorf("testdata/%s is missing", name)
		}
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			f, err := porcupine.ReadFixture(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.Verdict != porc.Ok && f.Verdict != porc.Illegal {
				t.Fatalf("verdict %q: a fixture must be Ok or Illegal", f.Verdict)
			}
			if len(f.Ops) == 0 {
				t.Fatal("fixture has no operations")
			}
			res := porcupine.Check(f.History, checkTimeout)
			if res.Verdict != f.Verdict {
				t.Fatalf("verdict %s after %v, want %s (%s)", res.Verdict, res.Elapsed, f.Verdict, f.Note)
			}
			if f.Verdict == porc.Illegal && res.Topic == "" {
				t.Fatal("Illegal without a failing topic")
			}
		})
	}
}
