package engine_test

// Exactly-once delivery under storms: publishers, consumers that poll, ack
// and retry, group growth, membership churn (every Join and Leave a
// rebalance) and publishes racing the trims of a full partition, all
// recorded in a ledger (hLedger) of what was published, delivered and
// acked. Checked while running: engine-only invariants (hInvariants) and
// the start offset of new groups; after quiescing: every group acked each
// published record exactly once with its payload (hDrainVerify).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// hGP names one group's cursor on one partition of the storm topic.
type hGP struct {
	group string
	part  int32
}

// hLedger records what a storm published, delivered and acknowledged.
type hLedger struct {
	mu   sync.Mutex
	pubs map[int32]map[int64]string // partition → offset → payload
	seen map[hGP]map[int64]string   // payloads delivered to a group
	acks map[hGP][]int64            // successful acks
	bad  *hFailures
	// counts, readable without mu
	nPub, nAck atomic.Int64
}

func hNewLedger(f *hFailures) *hLedger {
	return &hLedger{pubs: map[int32]map[int64]string{}, seen: map[hGP]map[int64]string{}, acks: map[hGP][]int64{}, bad: f}
}

func (l *hLedger) published(p int32, off int64, payload string) {
	l.nPub.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pubs[p] == nil {
		l.pubs[p] = map[int64]string{}
	}
	if _, dup := l.pubs[p][off]; dup {
		l.bad.fail("p%d: offset %d returned by two publishes", p, off)
	}
	l.pubs[p][off] = payload
}

func (l *hLedger) polled(g string, recs []engine.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range recs {
		if i > 0 && r.Partition <= recs[i-1].Partition {
			l.bad.fail("%s: poll result not in ascending partition order: %+v", g, recs)
		}
		k := hGP{g, r.Partition}
		if l.seen[k] == nil {
			l.seen[k] = map[int64]string{}
		}
		if prev, ok := l.seen[k][r.Offset]; ok && prev != r.Payload {
			l.bad.fail("%s p%d off %d delivered with payloads %q then %q", g, r.Partition, r.Offset, prev, r.Payload)
		}
		l.seen[k][r.Offset] = r.Payload
	}
}

func (l *hLedger) acked(g string, p int32, off int64) {
	l.nAck.Add(1)
	l.mu.Lock()
	l.acks[hGP{g, p}] = append(l.acks[hGP{g, p}], off)
	l.mu.Unlock()
}

// hPublisher publishes to its own partitions, in turn, payloads that name
// partition and offset; it is the only publisher of those partitions, so
// offsets must be consecutive.
func hPublisher(b *engine.Broker, topic string, parts []int32, l *hLedger, f *hFailures, done *atomic.Bool) func() {
	return func() {
		next := map[int32]int64{}
		for i := 0; !f.stop.Load() && !done.Load(); i++ {
			p := parts[i%len(parts)]
			payload := fmt.Sprintf("%d:%d", p, next[p])
			off, err := b.Publish(topic, p, payload)
			switch {
			case err != nil:
				f.fail("Publish(%q,%d): %v", topic, p, err)
			case off == -1:
				runtime.Gosched()
			case off != next[p]:
				f.fail("p%d: publish got offset %d, want %d (sole publisher)", p, off, next[p])
			default:
				l.published(p, off, payload)
				next[p]++
			}
		}
	}
}

// hConsume polls once as member and acks (or, one time in retryEvery,
// retries) what it got, recording everything in l.
func hConsume(b *engine.Broker, rng *rand.Rand, topic, group, member string, max int32, retryEvery int, l *hLedger, f *hFailures) {
	recs, err := b.Poll(topic, group, member, max)
	if err != nil {
		f.fail("Poll(%s,%s): %v", group, member, err)
		return
	}
	if recs == nil {
		f.fail("Poll(%s,%s) returned nil", group, member)
	}
	if len(recs) > int(max) {
		f.fail("Poll(%s,%s,%d) returned %d records", group, member, max, len(recs))
	}
	l.polled(group, recs)
	if len(recs) == 0 {
		// Let publishers run: a goroutine that never blocks keeps its P
		// for a whole 10 ms preemption slice.
		runtime.Gosched()
	}
	for _, r := range recs {
		if retryEvery > 0 && rng.IntN(retryEvery) == 0 {
			if _, err := b.Retry(topic, group, member, r.Partition, r.Offset); err != nil {
				f.fail("Retry: %v", err)
			}
			continue
		}
		ok, err := b.Ack(topic, group, member, r.Partition, r.Offset)
		if err != nil {
			f.fail("Ack: %v", err)
		}
		if ok {
			l.acked(group, r.Partition, r.Offset)
		}
	}
}

// hInvariants checks, on a quiet or live broker, the invariants that hold
// at every instant: per partition end-start <= capacity (end read first),
// and on a quiet broker, committed in [start, end] and start == min committed.
func hInvariants(b *engine.Broker, topic string, P int32, groups []string, quiet bool) error {
	for p := int32(0); p < P; p++ {
		end, err1 := b.LogEndOffset(topic, p)
		start, err2 := b.LogStartOffset(topic, p)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("p%d offsets: %v %v", p, err1, err2)
		}
		if end-start > int64(b.Capacity()) {
			return fmt.Errorf("p%d retains [%d,%d), more than capacity %d", p, start, end, b.Capacity())
		}
		if !quiet {
			continue
		}
		low := int64(math.MaxInt64)
		for _, g := range groups {
			c, err := b.Committed(topic, g, p)
			if err != nil {
				return fmt.Errorf("Committed(%s,%d): %v", g, p, err)
			}
			if c < start || c > end {
				return fmt.Errorf("%s p%d committed %d outside [%d,%d]", g, p, c, start, end)
			}
			inf, _ := b.InFlight(topic, g, p)
			if inf && c == end {
				return fmt.Errorf("%s p%d in flight at log end %d", g, p, c)
			}
			low = min(low, c)
		}
		if len(groups) > 0 && low != start {
			return fmt.Errorf("p%d: log start %d, but least committed offset is %d", p, start, low)
		}
	}
	return nil
}

// hDrainVerify quiesces nothing (the caller has): for each group it removes
// the given members, joins a drainer, polls and acks to the end; then it
// requires every group to have acked exactly [initial, end) per partition,
// each once, with the published payloads, and the log to be empty.
func hDrainVerify(t *testing.T, b *engine.Broker, topic string, P int32, initial map[string][]int64, leave []string, l *hLedger) {
	t.Helper()
	for g := range initial {
		for _, m := range leave {
			if _, err := b.Leave(topic, g, m); err != nil {
				t.Fatalf("Leave(%s,%s): %v", g, m, err)
			}
		}
		parts, err := b.Join(topic, g, "drainer")
		if err != nil || len(parts) != int(P) {
			t.Fatalf("drainer of %s owns %v (%v), want all %d partitions", g, parts, err, P)
		}
		for i := 0; ; i++ {
			recs, err := b.Poll(topic, g, "drainer", 64)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			if i > 100000 {
				t.Fatalf("drain of %s does not end", g)
			}
			l.polled(g, recs)
			for _, r := range recs {
				ok, err := b.Ack(topic, g, "drainer", r.Partition, r.Offset)
				if !ok || err != nil {
					t.Fatalf("drain ack %s %+v: %v %v", g, r, ok, err)
				}
				l.acked(g, r.Partition, r.Offset)
			}
		}
	}
	l.bad.report(t)
	var names []string
	for g := range initial {
		names = append(names, g)
	}
	if err := hInvariants(b, topic, P, names, true); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < P; p++ {
		end, _ := b.LogEndOffset(topic, p)
		start, _ := b.LogStartOffset(topic, p)
		if start != end {
			t.Fatalf("p%d: after every group drained, log retains [%d,%d)", p, start, end)
		}
		if int64(len(l.pubs[p])) != end {
			t.Fatalf("p%d: %d successful publishes recorded, log end %d", p, len(l.pubs[p]), end)
		}
		for g, init := range initial {
			got := slices.Clone(l.acks[hGP{g, p}])
			slices.Sort(got)
			want := make([]int64, 0, end-init[p])
			for off := init[p]; off < end; off++ {
				want = append(want, off)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s p%d: acked offsets %v, want each of [%d,%d) exactly once", g, p, hShort(got), init[p], end)
			}
			for _, off := range got {
				if s := l.seen[hGP{g, p}][off]; s != l.pubs[p][off] {
					t.Fatalf("%s p%d off %d: delivered %q, published %q", g, p, off, s, l.pubs[p][off])
				}
			}
		}
	}
}

func hShort(xs []int64) string {
	if len(xs) <= 40 {
		return fmt.Sprint(xs)
	}
	return fmt.Sprint(xs[:20], "…", xs[len(xs)-20:], fmt.Sprintf(" (%d)", len(xs)))
}

// TestGroupGrowthRacingAcks creates 200 groups on one topic (the
// engine grows every partition's cursor array) while publishers, a steady
// group and workers hopping between the new groups publish, poll, ack and
// retry. Each new group must start at the log start offset of its creation
// instant — observable as Committed == LogStartOffset right after Join,
// before it acks anything — and must never have a record it has not acked
// trimmed: some groups stay untouched ("frozen") for a while and the log
// start may not pass them. At the end every group drains and must have acked
// exactly its records, each once.
func TestGroupGrowthRacingAcks(t *testing.T) {
	const topic, P, nGroups = "T", int32(4), 200
	b, err := hNew(12)
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, P)
	f := &hFailures{}
	l := hNewLedger(f)
	initial := map[string][]int64{"base": make([]int64, P)}
	if _, err := b.Join(topic, "base", "b0"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var active []string
	frozen := map[string][]int64{}
	var created, workersDone atomic.Bool
	creator := func() {
		defer created.Store(true)
		for i := 0; i < nGroups && !f.stop.Load(); i++ {
			g := fmt.Sprintf("g%03d", i)
			parts, err := b.Join(topic, g, "c")
			if err != nil || len(parts) != int(P) {
				f.fail("Join(%s,c) = %v, %v; want all partitions", g, parts, err)
				return
			}
			init := make([]int64, P)
			for p := int32(0); p < P; p++ {
				c, err1 := b.Committed(topic, g, p)
				s, err2 := b.LogStartOffset(topic, p)
				if err1 != nil || err2 != nil || c != s {
					f.fail("new group %s p%d: committed %d (%v), log start %d (%v): a new group must start at the log start and hold it", g, p, c, err1, s, err2)
				}
				init[p] = c
			}
			if ok, err := b.Leave(topic, g, "c"); !ok || err != nil {
				f.fail("Leave(%s,c): %v %v", g, ok, err)
			}
			mu.Lock()
			initial[g] = init
			// Every 10th group stays frozen until 10 more are created.
			if i%10 == 0 {
				frozen[g] = init
			} else {
				active = append(active, g)
			}
			if i%10 == 9 {
				for fg := range frozen {
					active = append(active, fg)
				}
				clear(frozen)
			}
			mu.Unlock()
			runtime.Gosched()
		}
	}
	worker := func(id int) func() {
		return func() {
			rng := rand.New(rand.NewPCG(uint64(id), 99))
			me := fmt.Sprint("w", id)
			for !f.stop.Load() && !(created.Load() && workersDone.Load()) {
				mu.Lock()
				if len(active) == 0 {
					mu.Unlock()
					runtime.Gosched()
					continue
				}
				var g string
				if rng.IntN(3) != 0 {
					g = active[max(0, len(active)-1-rng.IntN(8))]
				} else {
					g = active[rng.IntN(len(active))]
				}
				mu.Unlock()
				if _, err := b.Join(topic, g, me); err != nil {
					f.fail("Join: %v", err)
				}
				hConsume(b, rng, topic, g, me, int32(1+rng.IntN(3)), 6, l, f)
				if rng.IntN(4) == 0 {
					b.Leave(topic, g, me)
				}
			}
		}
	}
	baseConsumer := func() {
		rng := rand.New(rand.NewPCG(5, 5))
		for !f.stop.Load() && !workersDone.Load() {
			hConsume(b, rng, topic, "base", "b0", P, 0, l, f)
		}
	}
	checker := func() {
		for !f.stop.Load() && !workersDone.Load() {
			mu.Lock()
			fz := make(map[string][]int64, len(frozen))
			for g, init := range frozen {
				fz[g] = init
			}
			mu.Unlock()
			for g, init := range fz {
				for p := int32(0); p < P; p++ {
					// Read the start first: a frozen group is only released under mu.
					s, _ := b.LogStartOffset(topic, p)
					mu.Lock()
					_, still := frozen[g]
					c, _ := b.Committed(topic, g, p)
					mu.Unlock()
					if still && (c != init[p] || s > c) {
						f.fail("frozen group %s p%d: committed %d (initially %d), log start %d: trimmed past an unacked record", g, p, c, init[p], s)
					}
				}
			}
			if err := hInvariants(b, topic, P, nil, false); err != nil {
				f.fail("%v", err)
			}
			runtime.Gosched()
		}
	}
	timer := func() {
		for !created.Load() && !f.stop.Load() {
			time.Sleep(time.Millisecond)
		}
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) && !f.stop.Load() && l.nAck.Load() < 6000 {
			time.Sleep(time.Millisecond)
		}
		workersDone.Store(true)
	}
	runAll(t, hDeadline,
		creator, worker(1), worker(2), baseConsumer, checker, timer,
		hPublisher(b, topic, []int32{0, 2}, l, f, &workersDone),
		hPublisher(b, topic, []int32{1, 3}, l, f, &workersDone),
	)
	f.report(t)
	if l.nAck.Load() < 200 {
		t.Fatalf("only %d acks before the drain", l.nAck.Load())
	}
	hDrainVerify(t, b, topic, P, initial, []string{"w1", "w2", "b0", "c"}, l)
}

// TestMembershipStormSettles: members of one group join and leave in
// a storm (every Join and Leave a rebalance) while every member id polls,
// acks and retries as fast as it can, a second group consumes the same topic
// steadily, and publishers fill partitions that trims keep emptying. Checks:
// no call errors, Join results are consistent with ownership (a member's
// partitions are p ≡ i mod n for some i < n ≤ 6), and after quiescing, each
// group acked every published record exactly once with its payload.
func TestMembershipStormSettles(t *testing.T) {
	const topic, P = "S", int32(6)
	b, err := hNew(8)
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, P)
	f := &hFailures{}
	l := hNewLedger(f)
	members := []string{"m0", "M1", "m-2", "m_3", "9", "zz"}
	for _, g := range []string{"A", "B"} {
		if _, err := b.Join(topic, g, "steady"); err != nil {
			t.Fatal(err)
		}
	}
	var done atomic.Bool
	var ops atomic.Int64
	churn := func(seed uint64) func() {
		return func() {
			rng := rand.New(rand.NewPCG(seed, 1))
			for !f.stop.Load() && !done.Load() {
				m := members[rng.IntN(len(members))]
				if rng.IntN(2) == 0 {
					parts, err := b.Join(topic, "A", m)
					if err != nil || parts == nil {
						f.fail("Join(A,%s) = %v, %v", m, parts, err)
					}
					// Round-robin: partitions p, p+n, p+2n… for n members.
					if len(parts) > 1 {
						n := parts[1] - parts[0]
						for i := 1; i < len(parts); i++ {
							if parts[i]-parts[i-1] != n || n < 1 || n > 8 {
								f.fail("Join(A,%s) = %v: not a round-robin share", m, parts)
							}
						}
					}
				} else if _, err := b.Leave(topic, "A", m); err != nil {
					f.fail("Leave: %v", err)
				}
				ops.Add(1)
				runtime.Gosched()
			}
		}
	}
	consumer := func(group, m string, seed uint64) func() {
		return func() {
			rng := rand.New(rand.NewPCG(seed, 2))
			for !f.stop.Load() && !done.Load() {
				hConsume(b, rng, topic, group, m, int32(1+rng.IntN(4)), 5, l, f)
				ops.Add(1)
			}
		}
	}
	fs := []func(){churn(1), churn(2), consumer("B", "steady", 3), consumer("A", "steady", 4)}
	for i, m := range members {
		fs = append(fs, consumer("A", m, uint64(10+i)))
	}
	fs = append(fs,
		hPublisher(b, topic, []int32{0, 1, 2}, l, f, &done),
		hPublisher(b, topic, []int32{3, 4, 5}, l, f, &done),
		func() {
			// Until enough happened, or for at most a few seconds.
			deadline := time.Now().Add(4 * time.Second)
			for time.Now().Before(deadline) && !f.stop.Load() &&
				(ops.Load() < 30000 || l.nPub.Load() < 3000 || l.nAck.Load() < 3000) {
				if err := hInvariants(b, topic, P, nil, false); err != nil {
					f.fail("%v", err)
				}
				time.Sleep(time.Millisecond)
			}
			done.Store(true)
		})
	runAll(t, hDeadline, fs...)
	f.report(t)
	if ops.Load() < 1000 || l.nAck.Load() < 100 {
		t.Fatalf("storm made only %d calls, %d acks", ops.Load(), l.nAck.Load())
	}
	initial := map[string][]int64{"A": make([]int64, P), "B": make([]int64, P)}
	hDrainVerify(t, b, topic, P, initial, append(members, "steady"), l)
	var total int
	for p := int32(0); p < P; p++ {
		total += len(l.pubs[p])
	}
	if total < int(P)*8 {
		t.Fatalf("storm published only %d records", total)
	}
}

// TestPublishFullRacingTrim: with capacity 1 and 2, publishers race to
// fill one partition while two groups ack, each ack possibly trimming. Every
// successful publish gets a fresh consecutive offset, -1 uses up none, the
// log never retains more than capacity, and each group acks every record once.
func TestPublishFullRacingTrim(t *testing.T) {
	for _, capacity := range []int32{1, 2} {
		b, err := hNew(capacity)
		if err != nil {
			t.Fatal(err)
		}
		b.Create("F", 1)
		f := &hFailures{}
		l := hNewLedger(f)
		for _, g := range []string{"x", "y"} {
			b.Join("F", g, "m")
		}
		var done atomic.Bool
		var full atomic.Int64
		pub := func(id int) func() {
			return func() {
				for i := 0; !f.stop.Load() && !done.Load(); i++ {
					payload := fmt.Sprintf("%d/%d", id, i)
					off, err := b.Publish("F", 0, payload)
					if err != nil {
						f.fail("Publish: %v", err)
					}
					if off == -1 {
						full.Add(1)
						runtime.Gosched()
						continue
					}
					l.published(0, off, payload)
				}
			}
		}
		cons := func(g string, seed uint64) func() {
			return func() {
				rng := rand.New(rand.NewPCG(seed, 3))
				for !f.stop.Load() && !done.Load() {
					hConsume(b, rng, "F", g, "m", 1, 4, l, f)
				}
			}
		}
		runAll(t, hDeadline, pub(1), pub(2), pub(3), cons("x", 1), cons("y", 2), func() {
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) && !f.stop.Load() && (l.nPub.Load() < 2000 || full.Load() < 500) {
				if err := hInvariants(b, "F", 1, nil, false); err != nil {
					f.fail("%v", err)
				}
				runtime.Gosched()
			}
			done.Store(true)
		})
		f.report(t)
		if full.Load() == 0 || len(l.pubs[0]) < 20 {
			t.Fatalf("capacity %d: %d publishes, %d full: the race never happened", capacity, len(l.pubs[0]), full.Load())
		}
		end, _ := b.LogEndOffset("F", 0)
		for off := int64(0); off < end; off++ {
			if _, ok := l.pubs[0][off]; !ok {
				t.Fatalf("capacity %d: offset %d below log end %d was never returned by a publish", capacity, off, end)
			}
		}
		hDrainVerify(t, b, "F", 1, map[string][]int64{"x": {0}, "y": {0}}, []string{"m"}, l)
	}
}
