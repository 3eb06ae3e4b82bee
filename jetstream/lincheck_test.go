package jetstream_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	porc "github.com/anishathalye/porcupine"

	"github.com/f91dcac0/tributary/jetstream"
	"github.com/f91dcac0/tributary/porcupine"
)

// Linearizability of the backend (SPEC rule 14) as the porcupine package
// checks the engine: seeded workloads recorded through
// porcupine.BackendTarget and checked against the sequential model.
//
// The backend documents weakenings of rule 14 (see the package doc), so the
// histories are shaped to stay inside what it promises:
//
//   - One partition per topic (Workload.Partitions 1). A Poll of several
//     partitions is one compare-and-set per cursor, not one atomic step: two
//     concurrent polls of one member may each take a different partition,
//     which no atomic order explains (seen in multipoll: 4 of 30 histories
//     of 4 clients × 25 calls at its 6 partitions). A rebalance's
//     migrations also follow its commit partition by partition. With one
//     partition both are one step.
//   - Describe calls are removed from the history before the check (a
//     read changes nothing, so the rest stays a valid history): Describe
//     reads the group, then each partition, and is not one instant (seen:
//     a Describe listing a member that had left before a publish it shows).
//
// Mixes left out:
//   - acktimeout: needs the test clock, which RunOn cannot drive.
//   - addpartitions: grows every topic to 8 partitions (multi-partition
//     polls and rebalances, above).
//   - seek, on the cluster only. On one server it is checked: with the
//     group, cursor and log start read at one instant (snapshot reads), a
//     migration that waits for an overtaken placement, and a Seek that
//     writes its cursor under a hold on the log start (no purge overtakes
//     the write: TestSeekNotOvertakenByPurge, TestSeeksHeldTogether), 4 of
//     3000 histories (4 clients × 30 calls, seeds 1000 to 3999) are still
//     Illegal under load (a busy loop and other test processes on 2 cores,
//     2026-12-04: seeds 1635, 1963, 2383, 3603), against 12 of the same
//     3000 with a Seek that wrote and then fenced on the log start (seeds
//     1471, 1801, 2015, 2309, 2433, 2445, 2675, 2806, 3190, 3437, 3631,
//     3663; there a Poll could act on a Seek's write that a purge then
//     overtook, the Seek answering offset-out-of-range). What the
//     remaining ones show is not known yet. The cluster reads key by key,
//     1 to 2 Illegal in 100 with the write-then-fence Seek; not measured
//     with the holds. Fixed so far: an evicting publish's raise of
//     low seen before its publish landed (a Seek then reported
//     out-of-range an offset no successful publish had evicted; now readers
//     wait for the landing, lowVal.Evict); a Seek whose overtaken write
//     another call had replaced answering true; a retention pass counting
//     an overtaken write below low (a publish answered full), or deciding
//     "nothing to free" on cursors read after a raise it had not seen; an
//     Ack or Retry acting on an overtaken write below low. Earlier: a Poll
//     that found its record purged answered nothing instead of reading the
//     cursor again; a Seek that a purge overtook moved the cursor although
//     it answered offset-out-of-range; a Seek back racing a Seek forward
//     whose retention had not run; a Poll that saw an overtaken Seek's
//     cursor below the log start.
//
// Put back after fixes (see the package doc): lifecycle (a Poll
// resurrecting a deleted group's cursor; a CreateGroup between a
// DeleteGroup's commit and its retention), window, and multipoll,
// ackretry and assignor (a Publish answering full after an Ack's retention
// had made room).
//
// latest (groups created at the log end) is checked on its one partition:
// the backend places such a group's cursor at the log end after the
// group's commit, partition after partition (CreateGroup), and whoever
// reads the cursor first places it, so with one partition every reader
// sees one start (60 histories of 4 clients × 30 calls, all Ok, on
// 2026-12-01). What could still show a gap: a duplicate CreateGroup that
// returns false between the commit and the placement, with a publish
// landing there too.
//
// The cluster test (Replicas 3; TRIBUTARY_JS_CLUSTER=1, make
// test-jetstream) runs the same mixes.

// linMixes are the mixes checked on one server.
var linMixes = append(slices.Clone(linClusterMixes), "seek")

// linClusterMixes are the mixes checked on the cluster: all but seek
// (above: its reads there are key by key, with the wider window).
var linClusterMixes = []string{"balanced", "rebalance", "full", "groups", "assignor", "lifecycle", "latest", "window", "multipoll", "ackretry"}

// linPrefix numbers the backends: each history gets a fresh, empty broker.
var linPrefix atomic.Int64

// linBackend opens a backend for the resolved workload w on the server or
// cluster urls, with w's capacity and options.
func linBackend(t *testing.T, srv *jetstream.Server, urls string, replicas int, w porcupine.Workload) *jetstream.Backend {
	t.Helper()
	cfg := jetstream.Config{
		Server: srv, URL: urls, Replicas: replicas,
		Prefix:   fmt.Sprintf("L%d", linPrefix.Add(1)),
		Storage:  jetstream.MemoryStorage,
		Capacity: w.Capacity, AckTimeout: w.Options.AckTimeout,
		MaxMessageBytes: w.Options.MaxMessageBytes, ReplayWindow: w.Options.ReplayWindow,
		RequestTimeout: 10 * time.Second,
	}
	var b *jetstream.Backend
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// A cluster just started may not know every peer yet.
		if b, err = jetstream.Open(cfg); err == nil || !errors.Is(err, jetstream.ErrUnavailable) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkMixes records and checks seeds histories of each mix.
func checkMixes(t *testing.T, srv *jetstream.Server, urls string, replicas int, mixes []string, seeds, clients, ops int) {
	for _, mix := range mixes {
		t.Run(mix, func(t *testing.T) {
			start, n := time.Now(), 0
			for seed := range uint64(seeds) {
				w, err := porcupine.Workload{Seed: seed, Mix: mix, Topics: 2, Clients: clients, OpsPerClient: ops, Partitions: 1}.Resolve()
				if err != nil {
					t.Fatal(err)
				}
				if w.Options.TestClock {
					t.Fatalf("mix %s needs a test clock", mix)
				}
				b := linBackend(t, srv, urls, replicas, w)
				h, err := porcupine.RunOn(w, porcupine.BackendTarget(b))
				b.Close()
				if err != nil {
					t.Fatal(err)
				}
				h = withoutDescribe(h)
				n += len(h.Ops)
				res := porcupine.Check(h, 30*time.Second)
				if res.Verdict != porc.Ok {
					sub := h
					if res.Topic != "" {
						sub = h.Topic(res.Topic)
					}
					t.Fatalf("%v: %s on topic %q\n%s", h.Workload, res.Verdict, res.Topic, dumpHistory(sub))
				}
			}
			t.Logf("%d histories, %d calls, Ok, in %v", seeds, n, time.Since(start))
		})
	}
}

// TestLinSingle checks the mixes on one embedded server.
func TestLinSingle(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	seeds, ops := 3, 30
	if testing.Short() {
		seeds, ops = 1, 20
	}
	checkMixes(t, srv, "", 1, linMixes, seeds, 4, ops)
}

// TestLinCluster checks the mixes on a 3-node cluster with Replicas 3;
// only with TRIBUTARY_JS_CLUSTER=1 (a few seconds per history).
func TestLinCluster(t *testing.T) {
	if os.Getenv("TRIBUTARY_JS_CLUSTER") != "1" {
		t.Skip("set TRIBUTARY_JS_CLUSTER=1")
	}
	cl, err := jetstream.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Shutdown()
	checkMixes(t, nil, strings.Join(cl.URLs(), ","), 3, linClusterMixes, 3, 4, 25)
}

// TestLinCatchesForgetfulBackend shows the check can fail: the same
// shapes on a backend whose Poll at once retries what it delivered (as if
// a rebalance had cancelled the delivery, with no rebalance) are Illegal:
// the owner's Ack of what it just polled returns false.
func TestLinCatchesForgetfulBackend(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	for seed := range uint64(5) {
		w, err := porcupine.Workload{Seed: seed, Mix: "ackretry", Topics: 1, Clients: 4, OpsPerClient: 20, Partitions: 1}.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		b := linBackend(t, srv, "", 1, w)
		h, err := porcupine.RunOn(w, porcupine.BackendTarget(porcupine.ForgetfulBackend(b)))
		b.Close()
		if err != nil {
			t.Fatal(err)
		}
		if porcupine.Check(h, 30*time.Second).Verdict == porc.Illegal {
			return
		}
	}
	t.Fatal("a backend that cancels every delivery passed 5 histories")
}

// withoutDescribe returns h without its Describe calls.
func withoutDescribe(h porcupine.History) porcupine.History {
	ops := make([]porcupine.Op, 0, len(h.Ops))
	for _, op := range h.Ops {
		if op.In.Kind != porcupine.KindDescribe {
			ops = append(ops, op)
		}
	}
	h.Ops = ops
	return h
}

// dumpHistory renders a history one call a line: client, [call, return]
// in µs, the call and its result.
func dumpHistory(h porcupine.History) string {
	var sb strings.Builder
	for _, op := range h.Ops {
		fmt.Fprintf(&sb, "c%d [%7d,%7d] %s\n", op.Client, op.Call/1000, op.Return/1000, porcupine.Describe(op.In, op.Out))
	}
	return sb.String()
}
