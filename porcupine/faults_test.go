//go:build tributary_faults && !race

// The broken brokers: the real engine with one deliberate bug switched on
// (engine/faults_on.go). Built only with the tributary_faults tag, which
// `make test` passes in its second step:
//
//	go test -tags tributary_faults ./porcupine/...
//
// Not under -race: faults (a) and (f) open their window with a yield, which
// the race detector's slowdown makes needlessly long, and a faulty broker
// is not what the race detector is for.

package porcupine_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	porc "github.com/anishathalye/porcupine"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/porcupine"
)

var writeFixtures = flag.Bool("write-fixtures", false,
	"TestBrokenBrokersCaught: write each fault's first Illegal history to testdata/illegal-<fault>.json, unless that file exists")

// faulty returns a newBroker for Run that injects f.
func faulty(f engine.Fault) porcupine.NewBroker {
	return func(c int32, opts ...engine.Option) (*engine.Broker, error) {
		b, err := engine.New(c, opts...)
		if err == nil {
			err = b.InjectFault(f)
		}
		return b, err
	}
}

// maxTries bounds the histories run per fault before the test gives up.
const maxTries = 50

// TestBrokenBrokersCaught requires the checker to find each fault: seeded
// workloads of the mix that stresses it (porcupine.FaultMix) run until
// porcupine returns Illegal, at most maxTries histories. The verbose recheck
// of the failing topic must agree, and its visualization must be writable.
//
// Measured 2026-11-30 on the 2-core development machine, rows (a), (g), (n)
// and (o) again on 2026-12-01 after the cursor locks (4 topics of 8
// clients × 25 calls each): "first" is the histories this test needed and
// its wall time to the first violation, over five runs (three for the rows
// measured again; with -v it logs both); "rate" is the share of 100 histories (seeds 5001..5100) that are
// Illegal. Row (p) was measured on 2026-12-01, its rate with go run -tags
// tributary_faults ./cmd/lincheck -fault latest-starts-behind -mix latest
// -seed 5001 -count 100 -topics 4 -clients 8 -ops 25 -keep-going. Faults (b) to (e), (h) to (m) and (o) are deterministic once the
// workload makes the calls that expose them; (a), (f), (g) and (n) need an
// interleaving, which their yield makes likely (before the yields, (a) was
// caught in 1 of 200 single-topic histories, (f) in 59 of 200; without its
// yield (g) went uncaught in 50 histories of 4 topics). (k) needs the
// deleted group to be the one holding records back, which the lifecycle
// mix's one-member groups make likely (with two member ids per group: 79
// of 100); (m) shows since records carry their Attempt.
//
//	fault                              mix            first              rate
//	(a) poll-releases-each             multipoll      1, 7–26 ms        100
//	(b) rebalance-keeps-inflight       rebalance      1, 8–19 ms        100
//	(c) ack-skips-owner                rebalance      1, 6–11 ms        100
//	(d) publish-burns-offset           full           1, 6–30 ms        100
//	(e) trim-ignores-memberless        full           1, 11–28 ms        94
//	(f) poll-stale-assignment          rebalance      1, 9–36 ms        100
//	(g) rebalance-skips-lock           rebalance      1–5, 123–689 ms    79
//	(h) seek-keeps-inflight            seek           1, 9–14 ms        100
//	(i) setassignor-keeps-inflight     assignor       1, 9–16 ms        100
//	(j) window-evicts-needed           window         1, 6–17 ms        100
//	(k) delete-skips-retention         lifecycle      1, 13–20 ms        91
//	(l) added-partitions-wrong-offset  addpartitions  1, 6–10 ms        100
//	(m) rebalance-resets-attempts      rebalance      1, 6–21 ms        100
//	(n) poll-skips-recheck             multipoll      1, 7 ms            85
//	(o) ack-ignores-pin                groups         1, 11 ms           94
//	(p) latest-starts-behind           latest         1, 9–12 ms         96
//	(r) expiry-skips-rebalance         session        1, 8–25 ms        100
//	(s) expiry-strict                  session        1, 5–22 ms        100
//	(t) rejoin-keeps-delivery          rejoin         1, 4–11 ms        100
//	(u) heartbeat-rejoins              session        1, 7–10 ms        100
//	(v) settle-skips-refresh           session        1, 11–20 ms       100
//	(w) join-keeps-deadline            session        1, 4–12 ms        100
//	(x) catch-up-skips-trim            ackretry       1, 6–24 ms        100
//
// Rows (r) to (w), the faults of member liveness (SPEC rules 24–25), were
// measured on 2026-12-02 on the same machine (2-core AMD EPYC VM, go1.26.8),
// "first" over five runs of go test -count=1 -tags tributary_faults -run
// 'TestBrokenBrokersCaught/(expiry|rejoin|heartbeat|settle|join-keeps)' -v
// ./porcupine/, the rate with go run -tags tributary_faults ./cmd/lincheck
// -fault <fault> -mix <mix> -seed 5001 -count 100 -topics 4 -clients 8 -ops
// 25 -keep-going. All six are deterministic once the mix makes the calls
// that expose them; (s) needs a member last seen exactly the session
// timeout before a call, which the session mix's Advance by eighths of the
// timeout makes common. Row (x), the sole cursor's catch-up (engine/doc.go),
// was measured on 2026-12-02 the same way (go test -run
// 'TestBrokenBrokersCaught/catch-up' -v, five runs; the rate with -fault
// catch-up-skips-trim -mix ackretry); it is deterministic once a partition
// of the mix's one group fills with records that group has acked.
func TestBrokenBrokersCaught(t *testing.T) {
	for _, f := range engine.Faults() {
		t.Run(f.String(), func(t *testing.T) {
			mix, ok := porcupine.FaultMix(f.String())
			if !ok {
				t.Fatalf("no mix chosen for fault %v (porcupine.FaultMix)", f)
			}
			start := time.Now()
			for i := 1; i <= maxTries; i++ {
				w := porcupine.Workload{Seed: uint64(i), Mix: mix, Topics: 4, Clients: 8, OpsPerClient: 25}
				h, err := porcupine.Run(w, faulty(f))
				if err != nil {
					t.Fatal(err)
				}
				h.Fault = f.String()
				res := porcupine.Check(h, checkTimeout)
				switch res.Verdict {
				case porc.Ok:
					continue
				case porc.Unknown:
					t.Fatalf("history %d (%v): checker timed out after %v", i, h.Workload, res.Elapsed)
				}
				t.Logf("caught after %d histories, %v (mix %s, %d ops, topic %s, check %v)", i, time.Since(start).Round(time.Millisecond), mix, len(h.Ops), res.Topic, res.Elapsed)
				html := filepath.Join(t.TempDir(), "viz.html")
				verdict, err := porcupine.Visualize(h, res.Topic, html, checkTimeout)
				if err != nil || verdict != porc.Illegal {
					t.Fatalf("verbose recheck of topic %s: %v, %v; want Illegal", res.Topic, verdict, err)
				}
				if fi, err := os.Stat(html); err != nil || fi.Size() == 0 {
					t.Fatalf("visualization not written: %v", err)
				}
				path := filepath.Join("testdata", "illegal-"+f.String()+".json")
				if _, err := os.Stat(path); *writeFixtures && err != nil {
					note := fmt.Sprintf("fault %s caught by TestBrokenBrokersCaught after %d histories; topic %s of seed %d", f, i, res.Topic, w.Seed)
					if err := porcupine.WriteFixture(path, porcupine.Fixture{Verdict: porc.Illegal, Note: note, History: h.Topic(res.Topic)}); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			t.Fatalf("fault %v not caught in %d histories of mix %s", f, maxTries, mix)
		})
	}
}
