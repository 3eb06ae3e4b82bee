package jetstream_test

// Three-node clusters with Replicas 3: the basics, the loss of the node
// leading the state stream, a node killed and restarted under load, a
// member cut off by a rebalance, and clients whose servers are gone. Each
// starts its own cluster (about a second).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// startCluster3 starts a three-node cluster, stopped when the test ends.
func startCluster3(t *testing.T) *jetstream.Cluster {
	t.Helper()
	cl, err := jetstream.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Shutdown)
	return cl
}

// openOn opens a Replicas 3 backend on urls (prefix FAULT), closed when
// the test ends.
func openOn(t *testing.T, urls []string, cfg jetstream.Config) *jetstream.Backend {
	t.Helper()
	cfg.URL = strings.Join(urls, ",")
	cfg.Replicas = 3
	if cfg.Prefix == "" {
		cfg.Prefix = "FAULT"
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = 100
	}
	// Right after StartCluster the meta leader may not know every peer
	// yet ("no suitable peers for placement"): retry a while.
	b, err := retryUnavailable(time.Now().Add(10*time.Second), func() (*jetstream.Backend, error) { return jetstream.Open(cfg) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// stateLeader returns the node leading the backend's state stream, or -1.
func stateLeader(cl *jetstream.Cluster, prefix string) int {
	for i := range 3 {
		if n := cl.Node(i); n != nil && n.JetStreamIsStreamLeader("$G", prefix+"_STATE") {
			return i
		}
	}
	return -1
}

// holds tracks, for a fault run (TestFaultNodeRestart,
// TestRestartSnapshots), which member holds each (group,
// partition) delivery (from the poll that returned it to the Ack or Retry
// that settled it), and what each group acked.
type holds struct {
	mu     sync.Mutex
	held   map[string]string // "g/p" → member
	acked  map[string]int    // "g/p/off" → successful Acks
	failed map[string]bool   // "g/p/off" → an Ack returned an error
	nacked atomic.Int64
	errs   []string
}

// newHolds returns an empty holds.
func newHolds() *holds {
	return &holds{held: map[string]string{}, acked: map[string]int{}, failed: map[string]bool{}}
}

func (h *holds) fail(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) < 20 {
		h.errs = append(h.errs, fmt.Sprintf(format, args...))
	}
}

// take records that member m of g was handed a delivery on p; a different
// member holding it is a violation.
func (h *holds) take(g, m string, p int32, off int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := fmt.Sprintf("%s/%d", g, p)
	if o, ok := h.held[k]; ok && o != m {
		h.errs = append(h.errs, fmt.Sprintf("%s polled %s@%d while %s holds a delivery of it", m, k, off, o))
	}
	h.held[k] = m
}

// release ends m's hold on (g, p); acked says the Ack returned true.
func (h *holds) release(g, m string, p int32, off int64, acked, failed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := fmt.Sprintf("%s/%d", g, p)
	if h.held[k] == m {
		delete(h.held, k)
	}
	if failed {
		h.failed[fmt.Sprintf("%s/%d/%d", g, p, off)] = true
	}
	if acked {
		a := fmt.Sprintf("%s/%d/%d", g, p, off)
		h.acked[a]++
		if h.acked[a] > 1 {
			h.errs = append(h.errs, fmt.Sprintf("%s acked %s twice", m, a))
		}
		h.nacked.Add(1)
	}
}

// TestFaultNodeRestart kills the node leading the state stream during a
// workload of two producers and two groups of two members, then restarts
// it. Required: every offset a Publish returned is acked once by each
// group (nothing acked is lost, nothing acked twice), and no two members
// ever hold a delivery of the same (group, partition) at once. Membership
// is fixed before the load (no rebalance), so a member never legitimately
// loses a delivery to another; the ack timeout redelivers a delivery whose
// Poll or Ack failed with ErrUnavailable after it took effect.
//
// Catches: a lost write on failover (an acked record redelivered or
// never delivered: a double ack or a missing ack), a cursor reset on
// restart (double acks), ownership lost or duplicated across the restart
// (two holders), and a backend that does not reconnect (no commit for
// stallBound: a bound on a hang, not on speed, since a loaded machine
// makes every call slower).
func TestFaultNodeRestart(t *testing.T) {
	cl := startCluster3(t)
	const parts, perProducer = 2, 40
	b := openOn(t, cl.URLs(), jetstream.Config{Capacity: 200, AckTimeout: 3 * time.Second, RequestTimeout: 2 * time.Second})
	bt := topic(t, b, "t", parts)
	groups, members, handles := faultMembers(t, bt)
	h := newHolds()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var pmu sync.Mutex
	published := map[string]bool{} // "p/off" a Publish returned
	var wg sync.WaitGroup
	var producing sync.WaitGroup
	for pi := range 2 {
		producing.Add(1)
		wg.Go(func() {
			defer producing.Done()
			for i := range perProducer {
				p := int32((pi + i) % parts)
				off, err := retryUnavailable(time.Now().Add(10*time.Second), func() (int64, error) {
					return bt.TryPublish(p, engine.Message{Payload: fmt.Sprintf("p%d.%d", pi, i)})
				})
				if err != nil {
					h.fail("publish: %v", err)
					return
				}
				pmu.Lock()
				published[fmt.Sprintf("%d/%d", p, off)] = true
				pmu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	for _, g := range groups {
		for _, name := range members {
			wg.Go(func() { faultConsumer(ctx, h, g, name, handles[g+"/"+name], parts, 10*time.Millisecond) })
		}
	}
	// Kill the state stream's leader once some records are acked, restart
	// it a second later.
	for start := time.Now(); h.nacked.Load() < 10; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			cancel()
			wg.Wait()
			t.Fatalf("%d acks in a minute before any fault: %v", h.nacked.Load(), h.errs)
		}
	}
	victim := max(stateLeader(cl, "FAULT"), 0)
	cl.StopNode(victim)
	t.Logf("stopped node %d after %d acks", victim, h.nacked.Load())
	time.Sleep(time.Second)
	if err := cl.RestartNode(victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted node %d after %d acks", victim, h.nacked.Load())
	producing.Wait()

	checkFaultRun(t, b, h, groups, &pmu, published, 2*perProducer, 15*time.Second, cancel, &wg)
}

// faultMembers makes the members of a fault run on bt: groups g1 and g2,
// members a and b of each, joined; handles by "group/member".
func faultMembers(t *testing.T, bt tributary.BackendTopic) (groups, members []string, handles map[string]tributary.BackendMember) {
	t.Helper()
	groups, members = []string{"g1", "g2"}, []string{"a", "b"}
	handles = map[string]tributary.BackendMember{}
	for _, g := range groups {
		for _, m := range members {
			handles[g+"/"+m] = member(t, bt, g, m)
			must(handles[g+"/"+m].Join()).of(t)
		}
	}
	return groups, members, handles
}

// faultConsumer is member name of group g in a fault run: until ctx ends
// it polls (max parts; idle for idle when nothing came) and acks every
// record, each delivery recorded in h (take, release). ErrUnavailable and
// ErrContention are expected during the fault; other errors fail h.
func faultConsumer(ctx context.Context, h *holds, g, name string, m tributary.BackendMember, parts int32, idle time.Duration) {
	for ctx.Err() == nil {
		rs, err := m.TryPoll(nil, parts)
		if err != nil && !errors.Is(err, jetstream.ErrUnavailable) && !errors.Is(err, jetstream.ErrContention) {
			h.fail("%s/%s poll: %v", g, name, err)
			return
		}
		if len(rs) == 0 {
			time.Sleep(idle)
			continue
		}
		for _, r := range rs {
			h.take(g, name, r.Partition, r.Offset)
			ok, err := m.Ack(r.Partition, r.Offset)
			if err != nil && !errors.Is(err, jetstream.ErrUnavailable) && !errors.Is(err, jetstream.ErrContention) {
				h.fail("%s/%s ack: %v", g, name, err)
			}
			// An Ack that failed may have taken effect: the final
			// committed offsets tell.
			h.release(g, name, r.Partition, r.Offset, ok && err == nil, err != nil)
		}
	}
}

// checkFaultRun ends a fault run on b: it waits until each of groups has
// committed every partition of topic "t" to its log end, giving up when no
// committed offset has moved for stallBound, then ends the run (cancel,
// wg), reports h's errors, and checks that the want offsets published (a
// Publish returned them: published, under pmu) were each acked by every
// group, once (take and release check that), or by an Ack that returned an
// error (it may have taken effect: the committed offsets say it did).
func checkFaultRun(t *testing.T, b *jetstream.Backend, h *holds, groups []string, pmu *sync.Mutex, published map[string]bool, want int, stallBound time.Duration, cancel context.CancelFunc, wg *sync.WaitGroup) {
	t.Helper()
	committed, moved := int64(-1), time.Now()
	done := func() bool {
		d, err := b.Describe("t")
		if err != nil || len(d.Groups) != len(groups) {
			return false
		}
		done, sum := true, int64(0)
		for _, g := range d.Groups {
			for p, gp := range g.Partitions {
				sum += gp.Committed
				if gp.Committed != d.Partitions[p].LogEndOffset {
					done = false
				}
			}
		}
		if sum > committed {
			committed, moved = sum, time.Now()
		}
		return done
	}
	for !done() && time.Since(moved) < stallBound {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	for _, e := range h.errs {
		t.Error(e)
	}
	if !done() {
		d, err := b.Describe("t")
		t.Fatalf("not every record committed, none for %v: %+v %v", stallBound, d, err)
	}
	pmu.Lock()
	defer pmu.Unlock()
	if len(published) != want {
		t.Fatalf("%d offsets published, want %d", len(published), want)
	}
	ambiguous := 0
	for po := range published {
		for _, g := range groups {
			k := g + "/" + po
			switch {
			case h.acked[k] > 0:
			case h.failed[k]:
				ambiguous++
			default:
				t.Errorf("%s: published, committed, never acked", k)
			}
		}
	}
	t.Logf("%d successful acks; %d (group, offset) pairs settled by an Ack that returned an error", h.nacked.Load(), ambiguous)
}

// staleAck runs TestFaultStaleMember's scenario on backends b (m1's and
// m2's) and other (another process on the same prefix), with m1's member
// handle passed through wrap, and returns the first violation.
//
// Scenario: m1, owning every partition, polls the one record. With remove
// false the topic has two partitions, the record is on partition 1, and m2
// joins: round-robin moves partition 1 to m2. With remove true the topic
// has one partition, m2 is already a member (owning nothing), and another
// process (other) calls Leave on m1's behalf: partition 0 moves to m2.
// Either way m1's later Ack must be refused, the record delivered to m2
// with attempt 2, and m1 must poll nothing more.
func staleAck(b, other *jetstream.Backend, remove bool, wrap func(tributary.BackendMember) tributary.BackendMember) error {
	name := "join"
	parts := int32(2)
	if remove {
		name, parts = "leave", 1
	}
	if ok, err := b.CreateTopic(name, parts, "string"); !ok || err != nil {
		return fmt.Errorf("CreateTopic = %v, %v", ok, err)
	}
	bt, _, err := b.OpenTopic(name)
	if err != nil {
		return err
	}
	p := parts - 1
	if _, err := bt.TryPublish(p, engine.Message{Payload: "x"}); err != nil {
		return err
	}
	raw1, err := bt.Member("g", "m1")
	if err != nil {
		return err
	}
	m1 := wrap(raw1)
	m2, err := bt.Member("g", "m2")
	if err != nil {
		return err
	}
	if _, err := m1.Join(); err != nil {
		return err
	}
	if remove {
		if _, err := m2.Join(); err != nil {
			return err
		}
	}
	rs, err := m1.TryPoll(nil, 5)
	if err != nil || len(rs) != 1 || rs[0].Partition != p || rs[0].Offset != 0 {
		return fmt.Errorf("m1 poll = %+v, %v", rs, err)
	}
	if remove {
		ot, _, err := other.OpenTopic(name)
		if err != nil {
			return err
		}
		om, err := ot.Member("g", "m1")
		if err != nil {
			return err
		}
		if ok, err := om.Leave(); !ok || err != nil {
			return fmt.Errorf("Leave on m1's behalf = %v, %v", ok, err)
		}
	} else {
		a, err := m2.Join()
		if err != nil || len(a) != 1 || a[0] != p {
			return fmt.Errorf("m2 Join = %v, %v, want [%d]", a, err, p)
		}
	}
	// Removed by another process, m1 is fenced (its incarnation is gone):
	// ErrFenced; cut off by a rebalance it keeps its incarnation: false.
	if ok, err := m1.Ack(p, 0); ok || err != nil && !(remove && errors.Is(err, tributary.ErrFenced)) {
		return fmt.Errorf("m1's stale Ack = %v, %v, want false (or ErrFenced once removed)", ok, err)
	}
	rs, err = m2.TryPoll(nil, 5)
	if err != nil || len(rs) != 1 || rs[0].Partition != p || rs[0].Offset != 0 || rs[0].Attempt != 2 {
		return fmt.Errorf("m2 poll = %+v, %v, want %d@0 attempt 2", rs, err, p)
	}
	if ok, err := m2.Ack(p, 0); !ok || err != nil {
		return fmt.Errorf("m2's Ack = %v, %v", ok, err)
	}
	if rs, err := m1.TryPoll(nil, 5); len(rs) != 0 || err != nil && !(remove && errors.Is(err, tributary.ErrFenced)) {
		return fmt.Errorf("m1 poll after losing the partition = %+v, %v", rs, err)
	}
	return nil
}

// TestFaultStaleMember: a member cut off by a rebalance it did not see (m2
// joined, or another process removed it) keeps its polled record in hand;
// its later Ack must be refused and the record delivered to the new owner.
// Catches: an Ack that checks the in-flight offset but not the owner or
// generation (the stale Ack would commit the record m2 should get), and a
// rebalance that keeps the moved partition's delivery (m2 gets nothing).
// TestFaultStaleMemberCaught shows the first is caught.
func TestFaultStaleMember(t *testing.T) {
	cl := startCluster3(t)
	b := openOn(t, cl.URLs(), jetstream.Config{RequestTimeout: 5 * time.Second})
	other := openOn(t, cl.URLs(), jetstream.Config{RequestTimeout: 5 * time.Second})
	for _, remove := range []bool{false, true} {
		if err := staleAck(b, other, remove, func(m tributary.BackendMember) tributary.BackendMember { return m }); err != nil {
			t.Errorf("remove=%v: %v", remove, err)
		}
	}
}

// TestFaultStaleMemberCaught runs the scenario with m1's handle wrapped so
// that its Ack skips the ownership check (a refused Ack is made again as
// the partition's current owner, as a broker without fencing would commit
// it): the scenario must report the violation. Single server: the
// scenario, not replication, is under test.
func TestFaultStaleMemberCaught(t *testing.T) {
	b, srv := start(t, jetstream.Config{})
	other, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, remove := range []bool{false, true} {
		err := staleAck(b, other, remove, func(m tributary.BackendMember) tributary.BackendMember {
			return unfencedMember{m, b}
		})
		if err == nil {
			t.Errorf("remove=%v: an Ack without the ownership check went unnoticed", remove)
		} else {
			t.Logf("remove=%v: caught: %v", remove, err)
		}
	}
}

// unfencedMember is a faulty member: an Ack the broker refuses is made
// again as the partition's current owner.
type unfencedMember struct {
	tributary.BackendMember
	b *jetstream.Backend
}

func (m unfencedMember) Ack(p int32, off int64) (bool, error) {
	ok, err := m.BackendMember.Ack(p, off)
	if ok || err != nil && !errors.Is(err, tributary.ErrFenced) {
		return ok, err
	}
	for _, topic := range m.b.Topics() {
		d, err := m.b.Describe(topic)
		if err != nil {
			return false, err
		}
		for _, g := range d.Groups {
			if g.Group != m.Group() || int(p) >= len(g.Partitions) || g.Partitions[p].Owner == "" {
				continue
			}
			bt, _, err := m.b.OpenTopic(topic)
			if err != nil {
				return false, err
			}
			owner, err := bt.Member(g.Group, g.Partitions[p].Owner)
			if err != nil {
				return false, err
			}
			// Deliver to the owner (as the broker would have), then commit.
			if _, err := owner.TryPoll(nil, 64); err != nil {
				return false, err
			}
			if ok, err := owner.Ack(p, off); ok || err != nil {
				return ok, err
			}
		}
	}
	return false, nil
}

// TestFaultUnreachable: a client whose servers are gone gets an error
// within its timeout, never a hang: first with two of three nodes down (no
// quorum: the remaining node answers nothing for JetStream), then with all
// three down (no connection). Every call must return an error wrapping
// ErrUnavailable within a bound of a few request timeouts, and a blocking
// Poll must end at its context's deadline. Catches: a request without a
// deadline, a retry loop that treats ErrUnavailable as contention and
// loops, a Poll that waits on a dead connection.
func TestFaultUnreachable(t *testing.T) {
	cl := startCluster3(t)
	const rt = 500 * time.Millisecond
	urls := cl.URLs()
	b := openOn(t, urls[:1], jetstream.Config{RequestTimeout: rt})
	bt := topic(t, b, "t", 2)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	pub(t, bt, 0, "a")

	// hangBound is generous: a Poll has taken 5.6 s on a loaded CI machine.
	bound := hangBound(rt)
	// check requires call to return within bound, with an error wrapping
	// ErrUnavailable if wantErr. Without quorum, a read may still be
	// answered for a while by the node that led the state stream; only
	// writes must fail then.
	check := func(stage, what string, wantErr bool, call func() error) {
		t.Helper()
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- call() }()
		select {
		case err := <-done:
			if d := time.Since(start); d > bound {
				t.Errorf("%s: %s took %v (bound %v)", stage, what, d, bound)
			}
			if wantErr && !errors.Is(err, jetstream.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: %s: %v, want ErrUnavailable", stage, what, err)
			}
		case <-time.After(10 * bound):
			t.Fatalf("%s: %s hangs", stage, what)
		}
	}
	calls := func(stage string, reads bool) {
		check(stage, "TryPublish", true, func() error { _, err := bt.TryPublish(0, engine.Message{Payload: "b"}); return err })
		check(stage, "TryPoll", reads, func() error { _, err := m.TryPoll(nil, 5); return err })
		check(stage, "Ack", reads, func() error { _, err := m.Ack(0, 0); return err })
		check(stage, "Join", true, func() error {
			n, err := bt.Member("g", "n")
			if err != nil {
				return err
			}
			_, err = n.Join()
			return err
		})
		check(stage, "Describe", reads, func() error { _, err := b.Describe("t"); return err })
		check(stage, "CreateTopic", true, func() error { _, err := b.CreateTopic("u", 1, ""); return err })
		check(stage, "OpenTopic", reads, func() error { _, _, err := b.OpenTopic("t"); return err })
		check(stage, "Poll", reads, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), rt)
			defer cancel()
			_, err := m.Poll(ctx, nil, nil, 5)
			return err
		})
	}
	cl.StopNode(1)
	cl.StopNode(2)
	calls("no quorum", false)
	cl.StopNode(0)
	calls("no server", true)
	start := time.Now()
	if _, err := jetstream.Open(jetstream.Config{URL: strings.Join(urls, ","), Capacity: 1, ConnectTimeout: rt}); !errors.Is(err, jetstream.ErrUnavailable) {
		t.Errorf("Open with every node down: %v", err)
	}
	if d := time.Since(start); d > bound {
		t.Errorf("Open took %v", d)
	}
}

// A three-node cluster with Replicas 3.
func TestCluster3(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start-up")
	}
	cl, err := jetstream.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Shutdown()
	urls := cl.URLs()
	b, err := jetstream.Open(jetstream.Config{URL: urls[0] + "," + urls[1] + "," + urls[2], Capacity: 5, Replicas: 3, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bt := topic(t, b, "t", 2)
	pub(t, bt, 1, "a")
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	wantRecs(t, poll(t, m, 5), rec{1, 0, "a", 1})
	ok, err := m.Ack(1, 0)
	wantBool(t, "Ack", ok, err, true)
	wantRecs(t, poll(t, m, 5))
	for range 5 {
		pub(t, bt, 0, "f")
	}
	if _, err := bt.TryPublish(0, engine.Message{Payload: "c"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("publish to a full replicated partition: %v", err)
	}
	// Compare-and-set conflicts on replicated state: two handles of the
	// member race for the one deliverable record.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []engine.Record
	for _, x := range []tributary.BackendMember{m, member(t, bt, "g", "m")} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				rs, err := x.TryPoll(nil, 5)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				got = append(got, rs...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wantRecs(t, recs(got), rec{0, 0, "f", 1})
	d := must(b.Describe("t")).of(t)
	if p := d.Partitions[1]; p.LogStartOffset != 1 || p.LogEndOffset != 1 {
		t.Fatalf("partition %+v", p)
	}
}

// A three-node cluster with Replicas 3 loses the node that leads the state
// stream and gets it back, while a member keeps publishing, polling and
// acking through the survivors: no record acked is delivered again, and
// every record published is delivered, in offset order per partition.
func TestCluster3NodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start-up and leader elections")
	}
	cl, err := jetstream.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Shutdown()
	b, err := jetstream.Open(jetstream.Config{URL: strings.Join(cl.URLs(), ","), Capacity: 20, Replicas: 3, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const parts = 2
	bt := topic(t, b, "t", parts)
	m := member(t, bt, "g", "m")
	if a := must(m.Join()).of(t); len(a) != parts {
		t.Fatalf("Join = %v", a)
	}
	published := map[[2]int64]string{} // (partition, offset) → payload
	next := [parts]int64{}             // per partition: the next offset to be delivered
	n, failed := 0, 0
	describe := func() engine.TopicDescription {
		t.Helper()
		d, ambiguous := retrying(t, "describe", func() (engine.TopicDescription, error) { return b.Describe("t") })
		if ambiguous {
			failed++
		}
		return d
	}
	// round publishes k records to each partition and consumes them all.
	round := func(phase string, k int) {
		t.Helper()
		for range k {
			for p := range int32(parts) {
				n++
				payload := fmt.Sprintf("%s-%d", phase, n)
				off, ambiguous := retrying(t, "publish", func() (int64, error) { return bt.TryPublish(p, engine.Message{Payload: payload}) })
				if ambiguous {
					failed++
				}
				published[[2]int64{int64(p), off}] = payload
			}
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			done := true
			for p := range parts {
				if next[p] < describe().Partitions[p].LogEndOffset {
					done = false
				}
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: consumed up to %v", phase, next)
			}
			rs, err := m.TryPoll(nil, parts)
			if err != nil {
				if !errors.Is(err, jetstream.ErrUnavailable) && !errors.Is(err, jetstream.ErrContention) {
					t.Fatal(err)
				}
				failed++
				// The failed poll may have reserved a record: hand it back.
				for p := range int32(parts) {
					retrying(t, "retry", func() (bool, error) { return m.Retry(p, next[p]) })
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			for _, r := range rs {
				if r.Offset < next[r.Partition] {
					t.Fatalf("%s: %d/%d delivered again after its ack", phase, r.Partition, r.Offset)
				}
				if r.Offset != next[r.Partition] {
					t.Fatalf("%s: %d/%d delivered, want offset %d", phase, r.Partition, r.Offset, next[r.Partition])
				}
				if want, ok := published[[2]int64{int64(r.Partition), r.Offset}]; ok && want != r.Payload {
					t.Fatalf("%d/%d is %q, published %q", r.Partition, r.Offset, r.Payload, want)
				}
				ok, ambiguous := retrying(t, "ack", func() (bool, error) { return m.Ack(r.Partition, r.Offset) })
				if ambiguous {
					failed++
				}
				if !ok && !ambiguous {
					t.Fatalf("%s: Ack(%d, %d) = false", phase, r.Partition, r.Offset)
				}
				// An Ack answered false after a failed attempt took effect
				// then; Describe must agree either way.
				if !ok {
					committed := describe().Groups[0].Partitions[r.Partition].Committed
					if committed != r.Offset+1 {
						t.Fatalf("%s: Ack(%d, %d) false, committed %d", phase, r.Partition, r.Offset, committed)
					}
				}
				next[r.Partition]++
			}
		}
	}
	round("before", 5)
	victim := -1
	for i := range 3 {
		if cl.Node(i).JetStreamIsStreamLeader("$G", "TRIB_STATE") {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no node leads the state stream")
	}
	began := time.Now()
	cl.StopNode(victim)
	round("down", 5)
	t.Logf("node %d (the state stream's leader) down: 5 rounds took %v, %d calls failed and were retried", victim, time.Since(began), failed)
	if err := cl.RestartNode(victim); err != nil {
		t.Fatal(err)
	}
	round("restarted", 5)
	// Nothing lost: every published offset was delivered and acked.
	for k := range published {
		if k[1] >= next[k[0]] {
			t.Fatalf("%d/%d published, never delivered", k[0], k[1])
		}
	}
	d := must(b.Describe("t")).of(t)
	for p := range parts {
		if gp, pd := d.Groups[0].Partitions[p], d.Partitions[p]; gp.Committed != next[p] || pd.LogEndOffset != next[p] || gp.InFlight {
			t.Fatalf("partition %d: %+v %+v, consumed %d", p, pd, gp, next[p])
		}
	}
}
