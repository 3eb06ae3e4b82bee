package jetstream_test

import (
	"errors"
	"fmt"
	"os"
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
//
// seek is checked on one server and on the cluster, resting on a
// migration that waits for an overtaken placement, a Seek that writes
// its cursor under a hold on the log start (no purge overtakes the
// write: TestSeekNotOvertakenByPurge, TestSeeksHeldTogether), a
// retention pass that reads the cursors again after a re-read of low
// (TestSeekNotPassedBySnapshotPass), and a Seek back that raises low to
// the retention owed before its write (TestSeekBackKeepsOwedRetention).
// Measured with TestLinSeeds (lin_seeds_test.go) under load (a busy loop or other test
// processes on the 2-core VM, AMD EPYC, 2026-12-04), 4 clients:
//   - One server (snapshot reads), 30 calls: 0 of 600 histories Illegal
//     (seeds 2000 to 2599). Without the Seek back's raise, 0 of 1000
//     (seeds 2000 to 2999); without the re-read too, 1 of those 1000
//     (seed 2646, not traced) and 4 of 3000 (seeds 1000 to 3999: 1635,
//     1963, 2383, 3603; 3603 traced to the re-read's case); with a Seek
//     that wrote and then fenced on the log start instead of holding
//     it, 12 of the 3000 (a Poll could act on a Seek's write that a
//     purge then overtook, the Seek answering offset-out-of-range).
//     Seeds 1000 to 1999 and 3000 to 3999 are not rerun with the
//     re-read.
//   - 3 nodes, Replicas 3 (every state key read by its own request, no
//     snapshot reads), about 2 s a history: 0 of 500 Illegal (seeds 0
//     to 299 with 25 calls, 300 to 499 with 30). Without the Seek
//     back's raise of the log start owed (seekWrite), 1 of the same 500
//     (seed 338). Seed 338 is a Seek forward of g0 to 4 with g1 at 4
//     (log start 2 in the model's order) whose pass had not raised low
//     yet, a Seek of g0 back to 2 (within what was owed) and one back
//     to 0, which, with the least committed offset 2 after the first
//     one's write, found nothing owed and answered true
//     (TestSeekBackKeepsOwedRetention); it can happen on one server
//     too. With the write-then-fence Seek, 1 to 2 in 100. Not known: a
//     rate below about 1 in 170 (0 of 500 bounds it there at 95%), and
//     what the single-server seeds Illegal without the re-read (1635,
//     1963, 2383, 2646) would show on the cluster.
//
// Fixed so far: an evicting publish's raise of low seen before its
// publish landed (a Seek then reported out-of-range an offset no
// successful publish had evicted; readers wait for the landing,
// lowVal.Evict); a Seek whose overtaken write another call had replaced
// answering true; a retention pass counting an overtaken write below low
// (a publish answered full), or deciding "nothing to free" on cursors read
// after a raise it had not seen; an Ack or Retry acting on an overtaken
// write below low; a Poll that found its record purged answering nothing
// instead of reading the cursor again; a Seek that a purge overtook
// moving the cursor although it answered offset-out-of-range; a Seek back
// racing a Seek forward whose retention had not run; a Poll that saw an
// overtaken Seek's cursor below the log start; a Seek back below the
// retention owed by a Seek forward whose pass had not run, after a Seek
// back within it.
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
// test-jetstream) runs the same mixes, seek included.

// linMixes are the mixes checked, on one server and on the cluster.
var linMixes = []string{"balanced", "rebalance", "full", "groups", "assignor", "lifecycle", "latest", "window", "multipoll", "ackretry", "seek"}

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
				h, bad := linHistory(t, srv, urls, replicas, mix, seed, clients, ops)
				n += len(h.Ops)
				if bad != "" {
					t.Fatal(bad)
				}
			}
			t.Logf("%d histories, %d calls, Ok, in %v", seeds, n, time.Since(start))
		})
	}
}

// linHistory records the history of mix and seed (2 topics of 1
// partition, clients × ops calls) on a fresh backend of the server or
// cluster, drops its Describe calls and checks it: bad is "" when it is
// Ok, else the verdict and the history (or its topic's) one call a line.
func linHistory(t *testing.T, srv *jetstream.Server, urls string, replicas int, mix string, seed uint64, clients, ops int) (h porcupine.History, bad string) {
	t.Helper()
	w, err := porcupine.Workload{Seed: seed, Mix: mix, Topics: 2, Clients: clients, OpsPerClient: ops, Partitions: 1}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if w.Options.TestClock {
		t.Fatalf("mix %s needs a test clock", mix)
	}
	b := linBackend(t, srv, urls, replicas, w)
	h, err = porcupine.RunOn(w, porcupine.BackendTarget(b))
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	h = withoutDescribe(h)
	res := porcupine.Check(h, 30*time.Second)
	if res.Verdict == porc.Ok {
		return h, ""
	}
	sub := h
	if res.Topic != "" {
		sub = h.Topic(res.Topic)
	}
	return h, fmt.Sprintf("mix %s, seed %d, %v: %s on topic %q\n%s", mix, seed, h.Workload, res.Verdict, res.Topic, dumpHistory(sub))
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
	checkMixes(t, nil, strings.Join(cl.URLs(), ","), 3, linMixes, 3, 4, 25)
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
