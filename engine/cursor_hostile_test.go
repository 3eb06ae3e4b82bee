package engine_test

// Hostile concurrent tests of the per-(group, partition) cursor design:
// lock-free polls of the log end, compare-and-swap commits
// of unpinned cursors, the pin at the least committed offset, rebalances
// that lock only moved cursors, and AddPartitions publishing assignments
// before the count. Every check is an exact expectation derived from the
// contract (docs/contract.md), never a timing assertion. Names start with "cx" / "TestCursorHostile"
// so as not to clash with the other test files.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// cxDur is how long each storm runs: short under -race (2-core machines).
func cxDur() time.Duration {
	if raceEnabled {
		return 350 * time.Millisecond
	}
	return 150 * time.Millisecond
}

// cxPayload is the payload a sole publisher of partition p gives offset off.
func cxPayload(p int32, off int64) string { return fmt.Sprintf("%d:%d", p, off) }

// cxMax raises a to at least v.
func cxMax(a *atomic.Int64, v int64) {
	for {
		c := a.Load()
		if c >= v || a.CompareAndSwap(c, v) {
			return
		}
	}
}

// cxCheckDesc checks what must hold in every Describe snapshot: offsets in
// order and within capacity, groups sorted, owners among the members,
// committed offsets inside the log, lag = end − committed ≥ 0, an in-flight
// delivery only of a record that exists, and retention exact at that
// instant: with any group, low − window ≤ log start ≤ low, where low is the
// least committed offset (log start = low without a replay window).
func cxCheckDesc(d engine.TopicDescription, capacity, window int64) error {
	n := len(d.Partitions)
	for i, pd := range d.Partitions {
		if pd.Partition != int32(i) {
			return fmt.Errorf("Partitions[%d].Partition = %d", i, pd.Partition)
		}
		if pd.LogStartOffset < 0 || pd.LogStartOffset > pd.LogEndOffset || pd.LogEndOffset-pd.LogStartOffset > capacity {
			return fmt.Errorf("p%d: log [%d,%d) with capacity %d", i, pd.LogStartOffset, pd.LogEndOffset, capacity)
		}
	}
	if !sort.SliceIsSorted(d.Groups, func(i, j int) bool { return d.Groups[i].Group < d.Groups[j].Group }) {
		return fmt.Errorf("groups not sorted")
	}
	low := make([]int64, n)
	for i := range low {
		low[i] = math.MaxInt64
	}
	for _, g := range d.Groups {
		if len(g.Partitions) != n {
			return fmt.Errorf("group %s: %d partitions, topic has %d", g.Group, len(g.Partitions), n)
		}
		for i := 1; i < len(g.Members); i++ {
			if g.Members[i-1] >= g.Members[i] {
				return fmt.Errorf("group %s: members %v not sorted and distinct", g.Group, g.Members)
			}
		}
		for p, gp := range g.Partitions {
			pd := d.Partitions[p]
			if gp.Partition != int32(p) {
				return fmt.Errorf("group %s: Partitions[%d].Partition = %d", g.Group, p, gp.Partition)
			}
			if len(g.Members) == 0 {
				if gp.Owner != "" {
					return fmt.Errorf("group %s p%d: owner %q with no members", g.Group, p, gp.Owner)
				}
			} else if _, ok := slices.BinarySearch(g.Members, gp.Owner); !ok {
				return fmt.Errorf("group %s p%d: owner %q not among %v", g.Group, p, gp.Owner, g.Members)
			}
			if gp.Committed < pd.LogStartOffset || gp.Committed > pd.LogEndOffset {
				return fmt.Errorf("group %s p%d: committed %d outside log [%d,%d]", g.Group, p, gp.Committed, pd.LogStartOffset, pd.LogEndOffset)
			}
			if gp.Lag != pd.LogEndOffset-gp.Committed || gp.Lag < 0 {
				return fmt.Errorf("group %s p%d: lag %d, end %d committed %d", g.Group, p, gp.Lag, pd.LogEndOffset, gp.Committed)
			}
			if gp.Attempts < 0 {
				return fmt.Errorf("group %s p%d: attempts %d", g.Group, p, gp.Attempts)
			}
			if gp.InFlight && (gp.Committed >= pd.LogEndOffset || gp.Attempts < 1 || gp.Owner == "") {
				return fmt.Errorf("group %s p%d: in flight at %d (end %d) attempts %d owner %q", g.Group, p, gp.Committed, pd.LogEndOffset, gp.Attempts, gp.Owner)
			}
			low[p] = min(low[p], gp.Committed)
		}
	}
	if len(d.Groups) > 0 {
		for p, pd := range d.Partitions {
			if pd.LogStartOffset > low[p] || pd.LogStartOffset < low[p]-window {
				return fmt.Errorf("p%d: log start %d, least committed %d, window %d: retention not exact", p, pd.LogStartOffset, low[p], window)
			}
		}
	}
	return nil
}

// cxDescMonotonic checks that offsets and the partition count never go
// back between two snapshots taken in order.
func cxDescMonotonic(prev, d engine.TopicDescription) error {
	if len(d.Partitions) < len(prev.Partitions) {
		return fmt.Errorf("partition count went from %d to %d", len(prev.Partitions), len(d.Partitions))
	}
	for p, pd := range prev.Partitions {
		nd := d.Partitions[p]
		if nd.LogEndOffset < pd.LogEndOffset || nd.LogStartOffset < pd.LogStartOffset {
			return fmt.Errorf("p%d: log went from [%d,%d) to [%d,%d)", p, pd.LogStartOffset, pd.LogEndOffset, nd.LogStartOffset, nd.LogEndOffset)
		}
	}
	return nil
}

// cxDescriber returns a goroutine that checks Describe (and, every few
// rounds, Snapshot: records contiguous, payloads as published by sole
// publishers when payloads is set) until stop.
func cxDescriber(b *engine.Broker, topic string, capacity, window int64, payloads bool, f *hFailures, stop *atomic.Bool) func() {
	return func() {
		var prev engine.TopicDescription
		for i := 0; !stop.Load() && !f.stop.Load(); i++ {
			var d engine.TopicDescription
			if i%4 == 3 {
				s, err := b.Snapshot(topic)
				if err != nil {
					f.fail("Snapshot: %v", err)
					return
				}
				d = s.TopicDescription
				for p, rs := range s.Records {
					pd := d.Partitions[p]
					if int64(len(rs)) != pd.LogEndOffset-pd.LogStartOffset {
						f.fail("snapshot p%d: %d records for [%d,%d)", p, len(rs), pd.LogStartOffset, pd.LogEndOffset)
					}
					for j, r := range rs {
						if r.Offset != pd.LogStartOffset+int64(j) || r.Partition != int32(p) {
							f.fail("snapshot p%d: record %d at p%d off %d", p, j, r.Partition, r.Offset)
						}
						if payloads && r.Payload != cxPayload(int32(p), r.Offset) {
							f.fail("snapshot p%d off %d: payload %q", p, r.Offset, r.Payload)
						}
					}
				}
			} else {
				var err error
				if d, err = b.Describe(topic); err != nil {
					f.fail("Describe: %v", err)
					return
				}
			}
			if err := cxCheckDesc(d, capacity, window); err != nil {
				f.fail("snapshot %d: %v", i, err)
			}
			if i > 0 {
				if err := cxDescMonotonic(prev, d); err != nil {
					f.fail("snapshot %d: %v", i, err)
				}
			}
			prev = d
			runtime.Gosched()
		}
	}
}

// cxFill publishes to partition of a quiet topic until it is full and
// checks that exactly capacity − (end − low) publishes succeed, low being
// the least committed offset (the pin's promise: Publish's capacity check
// is against exact retention), and that the log then retains [low, end)
// when window is 0, ends full otherwise.
func cxFill(t *testing.T, b *engine.Broker, topic string, p int32, low int64) {
	t.Helper()
	end, _ := b.LogEndOffset(topic, p)
	want := int64(b.Capacity()) - (end - low)
	got := int64(0)
	for {
		off, err := b.Publish(topic, p, cxPayload(p, end+got))
		if err != nil {
			t.Fatal(err)
		}
		if off < 0 {
			break
		}
		if off != end+got {
			t.Fatalf("p%d: fill publish got offset %d, want %d", p, off, end+got)
		}
		got++
		if got > int64(b.Capacity())+1 {
			break
		}
	}
	if got != want {
		t.Fatalf("p%d: %d publishes fit at quiescence (end %d, least committed %d, capacity %d), want %d", p, got, end, low, b.Capacity(), want)
	}
	start, _ := b.LogStartOffset(topic, p)
	if start != low {
		t.Fatalf("p%d: after filling, log start %d, want the least committed offset %d", p, start, low)
	}
}

// ---------------------------------------------------------------------------

// TestCursorHostileFanOut: 16 to 64 groups on one partition of capacity 1 to
// 4 (with and without a replay window), two publishers, one or two pollers
// per group sharing the group's member id. Checked online: a publish that
// got offset o ≥ capacity happened after every group had begun acking
// o − capacity (retention exactness: no publish succeeds before every group
// committed past the record it displaces); no group is given a record
// already acked, nor a record whose predecessor it has not begun acking;
// every Ack of a held record succeeds; every Describe/Snapshot is
// self-consistent. At the end: every group was given and acked each offset
// of [0, end) exactly once with the published payload; log start is
// max(0, end − window); exactly capacity more publishes fit.
func TestCursorHostileFanOut(t *testing.T) {
	cfgs := []struct {
		groups           int
		capacity, window int32
		pollers          int
	}{
		{16, 1, 0, 1}, {32, 2, 1, 2}, {64, 4, 4, 1}, {24, 3, 0, 2}, {48, 1, 1, 1}, {16, 2, 2, 2},
	}
	for _, c := range cfgs {
		t.Run(fmt.Sprintf("G%d-C%d-W%d-P%d", c.groups, c.capacity, c.window, c.pollers), func(t *testing.T) {
			cxFanOut(t, c.groups, c.capacity, c.window, c.pollers)
		})
	}
}

// cxPublisher returns a goroutine body that, until stop or a failure,
// publishes cxPayload records to each of parts in turn, yielding after each
// round; it must be their only publisher, so each offset must be the next
// (or -1 for a full partition).
func cxPublisher(b *engine.Broker, topic string, parts []int32, f *hFailures, stop *atomic.Bool) func() {
	return func() {
		next := make([]int64, len(parts))
		for !stop.Load() && !f.stop.Load() {
			for i, p := range parts {
				off, err := b.Publish(topic, p, cxPayload(p, next[i]))
				if err != nil || off != -1 && off != next[i] {
					f.fail("p%d: publish %d %v, want %d", p, off, err, next[i])
					return
				}
				if off >= 0 {
					next[i]++
				}
			}
			runtime.Gosched()
		}
	}
}

// cxPartitions returns partitions 0..n-1.
func cxPartitions(n int32) []int32 {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}

// cxGroupsOnOnePartition returns a broker of the given capacity and replay
// window with topic of one partition and G groups named by format from
// 0 (their names, in order), each with the one member "m".
func cxGroupsOnOnePartition(t *testing.T, topic, format string, G int, capacity, window int32) (*engine.Broker, []string) {
	t.Helper()
	b, err := hNew(capacity, engine.WithReplayWindow(window))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(topic, 1); err != nil {
		t.Fatal(err)
	}
	names := make([]string, G)
	for g := range names {
		names[g] = fmt.Sprintf(format, g)
		if _, err := b.Join(topic, names[g], "m"); err != nil {
			t.Fatal(err)
		}
	}
	return b, names
}

func cxFanOut(t *testing.T, G int, capacity, window int32, pollers int) {
	const topic = "fan"
	b, names := cxGroupsOnOnePartition(t, topic, "g%02d", G, capacity, window)
	var f hFailures
	var stop atomic.Bool
	ackStarted := make([]atomic.Int64, G)  // highest offset whose Ack was called
	ackReturned := make([]atomic.Int64, G) // highest offset whose Ack returned true
	for g := range G {
		ackStarted[g].Store(-1)
		ackReturned[g].Store(-1)
	}
	var mu sync.Mutex
	pubs := map[int64]string{}
	delivered := make([]map[int64]string, G)
	acked := make([]map[int64]int, G)
	for g := range G {
		delivered[g], acked[g] = map[int64]string{}, map[int64]int{}
	}
	C := int64(capacity)
	var fs []func()
	for w := range 2 {
		fs = append(fs, func() {
			for i := 0; !stop.Load() && !f.stop.Load(); i++ {
				payload := fmt.Sprintf("w%d-%d", w, i)
				off, err := b.Publish(topic, 0, payload)
				if err != nil {
					f.fail("Publish: %v", err)
					return
				}
				if off < 0 {
					runtime.Gosched()
					continue
				}
				if off >= C {
					for g := range G {
						if s := ackStarted[g].Load(); s < off-C {
							f.fail("publish got offset %d (capacity %d) but group %s had begun acking only up to %d", off, C, names[g], s)
						}
					}
				}
				mu.Lock()
				if _, dup := pubs[off]; dup {
					f.fail("offset %d returned by two publishes", off)
				}
				pubs[off] = payload
				mu.Unlock()
			}
		})
	}
	for g := range G {
		for range pollers {
			fs = append(fs, func() {
				for !stop.Load() && !f.stop.Load() {
					recs, err := b.Poll(topic, names[g], "m", 1)
					if err != nil || len(recs) > 1 {
						f.fail("Poll %s: %v %v", names[g], recs, err)
						return
					}
					if len(recs) == 0 {
						runtime.Gosched()
						continue
					}
					r := recs[0]
					if r.Partition != 0 || r.Attempt != 1 {
						f.fail("%s: got %+v", names[g], r)
					}
					if r.Offset <= ackReturned[g].Load() {
						f.fail("%s: given offset %d, already acked up to %d", names[g], r.Offset, ackReturned[g].Load())
					}
					if s := ackStarted[g].Load(); r.Offset > 0 && s < r.Offset-1 {
						f.fail("%s: given offset %d before any Ack of %d began (acks begun to %d): a record skipped", names[g], r.Offset, r.Offset-1, s)
					}
					mu.Lock()
					if _, dup := delivered[g][r.Offset]; dup {
						f.fail("%s: offset %d delivered twice", names[g], r.Offset)
					}
					delivered[g][r.Offset] = r.Payload
					mu.Unlock()
					cxMax(&ackStarted[g], r.Offset)
					ok, err := b.Ack(topic, names[g], "m", 0, r.Offset)
					if !ok || err != nil {
						f.fail("%s: Ack(%d) of a held record = %v, %v", names[g], r.Offset, ok, err)
						return
					}
					cxMax(&ackReturned[g], r.Offset)
					mu.Lock()
					acked[g][r.Offset]++
					mu.Unlock()
				}
			})
		}
	}
	fs = append(fs, cxDescriber(b, topic, C, int64(window), false, &f, &stop))
	fs = append(fs, func() { time.Sleep(cxDur()); stop.Store(true) })
	hRun(t, hDeadline, fs...)
	f.report(t)

	// Drain every group, sequentially.
	for g := range G {
		for {
			recs, err := b.Poll(topic, names[g], "m", 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			r := recs[0]
			delivered[g][r.Offset] = r.Payload
			if ok, _ := b.Ack(topic, names[g], "m", 0, r.Offset); !ok {
				t.Fatalf("%s: drain ack %d failed", names[g], r.Offset)
			}
			acked[g][r.Offset]++
		}
	}
	end, _ := b.LogEndOffset(topic, 0)
	start, _ := b.LogStartOffset(topic, 0)
	if int64(len(pubs)) != end {
		t.Fatalf("%d successful publishes, log end %d", len(pubs), end)
	}
	for g := range G {
		if int64(len(delivered[g])) != end || int64(len(acked[g])) != end {
			t.Fatalf("%s: %d offsets delivered, %d acked, want %d each", names[g], len(delivered[g]), len(acked[g]), end)
		}
		for off := range end {
			if delivered[g][off] != pubs[off] || acked[g][off] != 1 {
				t.Fatalf("%s off %d: delivered %q (published %q), acked %d times", names[g], off, delivered[g][off], pubs[off], acked[g][off])
			}
		}
	}
	if want := max(0, end-int64(window)); start != want {
		t.Fatalf("every group committed %d: log start %d, want %d (window %d)", end, start, want, window)
	}
	d, _ := b.Describe(topic)
	if err := cxCheckDesc(d, C, int64(window)); err != nil {
		t.Fatal(err)
	}
	cxFill(t, b, topic, 0, end)
	t.Logf("%d records through %d groups", end, G)
}

// ---------------------------------------------------------------------------

// TestCursorHostileRoomAfterLastAck: a full partition of capacity C holds
// [k, k+C); every one of G groups has k in flight (so all are pinned at the
// least committed offset) and, optionally, a memberless group also holds k
// (or less, with a window). All G acks and the DeleteGroup of the holder
// are released at once while a publisher hammers the partition. A publish
// that began after every ack and the delete returned must succeed; exactly
// one publish succeeds in the round (offset k+C), the log is then
// [k+1, k+C+1), every group committed k+1, nothing in flight.
func TestCursorHostileRoomAfterLastAck(t *testing.T) {
	cfgs := []struct {
		groups           int
		capacity, window int32
		holder           bool
	}{
		{32, 1, 0, false}, {32, 1, 1, false}, {16, 3, 0, true}, {16, 3, 2, true}, {24, 2, 2, false}, {8, 1, 0, true},
	}
	for _, c := range cfgs {
		t.Run(fmt.Sprintf("G%d-C%d-W%d-holder%v", c.groups, c.capacity, c.window, c.holder), func(t *testing.T) {
			cxRoom(t, c.groups, c.capacity, c.window, c.holder)
		})
	}
}

func cxRoom(t *testing.T, G int, capacity, window int32, holder bool) {
	const topic = "room"
	b, names := cxGroupsOnOnePartition(t, topic, "r%02d", G, capacity, window)
	C := int64(capacity)
	for off := range C {
		if got, _ := b.Publish(topic, 0, cxPayload(0, off)); got != off {
			t.Fatalf("initial publish got %d", got)
		}
	}
	rounds := 300
	if raceEnabled {
		rounds = 120
	}
	rng := rand.New(rand.NewPCG(uint64(G), uint64(capacity)))
	for k := int64(0); k < int64(rounds); k++ {
		for g := range G {
			recs, err := b.Poll(topic, names[g], "m", 1)
			if err != nil || len(recs) != 1 || recs[0].Offset != k || recs[0].Payload != cxPayload(0, k) {
				t.Fatalf("round %d: %s polled %+v, %v; want offset %d", k, names[g], recs, err, k)
			}
		}
		useHolder := holder && k%2 == 0
		if useHolder {
			if ok, err := b.CreateGroup(topic, "holder", engine.RoundRobin); !ok || err != nil {
				t.Fatalf("round %d: CreateGroup holder: %v %v", k, ok, err)
			}
		}
		// Some groups ack early, in random order, so the racing ones are a
		// random subset (always at least two, for the compare-and-swap race).
		order := rng.Perm(G)
		early := rng.IntN(G - 1)
		for _, g := range order[:early] {
			if ok, _ := b.Ack(topic, names[g], "m", 0, k); !ok {
				t.Fatalf("round %d: early ack of %s failed", k, names[g])
			}
		}
		if off, _ := b.Publish(topic, 0, "x"); off != -1 {
			t.Fatalf("round %d: publish got %d while %d groups still hold %d", k, off, G-early, k)
		}
		racers := order[early:]
		total := int64(len(racers))
		if useHolder {
			total++
		}
		var done, succeeded atomic.Int64
		succeeded.Store(-1)
		var f hFailures
		gate := make(chan struct{})
		var fs []func()
		for _, g := range racers {
			fs = append(fs, func() {
				<-gate
				ok, err := b.Ack(topic, names[g], "m", 0, k)
				if !ok || err != nil {
					f.fail("round %d: ack of %s: %v %v", k, names[g], ok, err)
				}
				done.Add(1)
			})
		}
		if useHolder {
			fs = append(fs, func() {
				<-gate
				ok, err := b.DeleteGroup(topic, "holder")
				if !ok || err != nil {
					f.fail("round %d: DeleteGroup holder: %v %v", k, ok, err)
				}
				done.Add(1)
			})
		}
		fs = append(fs, func() {
			close(gate)
			for {
				before := done.Load()
				off, err := b.Publish(topic, 0, cxPayload(0, k+C))
				if err != nil {
					f.fail("publish: %v", err)
					return
				}
				if off >= 0 {
					if before < total && off != k+C {
						f.fail("round %d: publish got %d, want %d", k, off, k+C)
					}
					succeeded.Store(off)
					return
				}
				if before == total {
					f.fail("round %d: publish refused (-1) although every group (and the holder's delete) had returned: full partition without room", k)
					return
				}
				runtime.Gosched()
			}
		})
		hRun(t, hDeadline, fs...)
		f.report(t)
		if s := succeeded.Load(); s != k+C {
			t.Fatalf("round %d: racing publish got %d, want %d", k, s, k+C)
		}
		if off, _ := b.Publish(topic, 0, "y"); off != -1 {
			t.Fatalf("round %d: a second publish got %d: the partition of capacity %d took %d records past the least committed offset %d", k, off, C, C+1, k+1)
		}
		d, _ := b.Describe(topic)
		pd := d.Partitions[0]
		if pd.LogStartOffset != k+1 || pd.LogEndOffset != k+C+1 {
			t.Fatalf("round %d: log [%d,%d), want [%d,%d)", k, pd.LogStartOffset, pd.LogEndOffset, k+1, k+C+1)
		}
		if len(d.Groups) != G {
			t.Fatalf("round %d: %d groups", k, len(d.Groups))
		}
		for _, g := range d.Groups {
			if gp := g.Partitions[0]; gp.Committed != k+1 || gp.InFlight || gp.Attempts != 0 {
				t.Fatalf("round %d: %s: %+v", k, g.Group, gp)
			}
		}
		if err := cxCheckDesc(d, C, int64(window)); err != nil {
			t.Fatalf("round %d: %v", k, err)
		}
	}
}

// ---------------------------------------------------------------------------

// TestCursorHostilePollNoSkip: one member owns every partition of its group;
// sole publishers per partition record each completed publish; a single
// consumer snapshots those counts before each poll, polls with maxRecords 64
// or 1..4, and acks everything before polling again (so nothing of its own
// is in flight). Exact expectation: every returned record is at the
// group's committed offset with its payload; if fewer than maxRecords came
// back, every partition whose record was published (and returned) before
// the poll began is in the result; otherwise every such partition below
// the highest one returned is. Noise: SetAssignor flips (new snapshots, no
// owner change), another group with churning members, Describe, and in
// "grow" AddPartitions from 1 to 24 partitions, a publish to each new
// partition right after it appears.
func TestCursorHostilePollNoSkip(t *testing.T) {
	t.Run("fixed16", func(t *testing.T) { cxNoSkip(t, 16, 16, 2) })
	t.Run("fixed64", func(t *testing.T) { cxNoSkip(t, 64, 64, 1) })
	t.Run("grow", func(t *testing.T) { cxNoSkip(t, 1, 24, 2) })
	t.Run("grow64", func(t *testing.T) { cxNoSkip(t, 1, 64, 1) })
}

func cxNoSkip(t *testing.T, P0, Pmax int32, capacity int32) {
	const topic = "ns"
	b, err := hNew(capacity)
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, P0)
	if _, err := b.Join(topic, "g", "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(topic, "other", "o1"); err != nil {
		t.Fatal(err)
	}
	var f hFailures
	var stop, growDone atomic.Bool
	var pubDone [engine.MaxPartitionCount]atomic.Int64
	// Real-time order of publishes: a shared tick taken just before each
	// publish call and just after it returned, per (partition, offset).
	var tick atomic.Int64
	var tmu sync.Mutex
	startTick, endTick := map[[2]int64]int64{}, map[[2]int64]int64{}
	var fs []func()
	for w := range int32(2) {
		fs = append(fs, func() {
			var next [engine.MaxPartitionCount]int64
			for !stop.Load() && !f.stop.Load() {
				n, _ := b.PartitionCount(topic)
				progress := false
				for p := w; p < n; p += 2 {
					k := [2]int64{int64(p), next[p]}
					tmu.Lock()
					startTick[k] = tick.Add(1)
					tmu.Unlock()
					off, err := b.Publish(topic, p, cxPayload(p, next[p]))
					if off >= 0 {
						e := tick.Add(1)
						tmu.Lock()
						endTick[k] = e
						tmu.Unlock()
					}
					if err != nil {
						f.fail("Publish p%d: %v", p, err)
						return
					}
					if off == -1 {
						continue
					}
					if off != next[p] {
						f.fail("p%d: publish got %d, want %d", p, off, next[p])
						return
					}
					next[p]++
					pubDone[p].Store(next[p])
					progress = true
				}
				if !progress {
					runtime.Gosched()
				}
			}
		})
	}
	if Pmax > P0 {
		fs = append(fs, func() {
			defer growDone.Store(true)
			for n := P0; n < Pmax && !f.stop.Load(); n++ {
				for range 20 {
					runtime.Gosched()
				}
				got, err := b.AddPartitions(topic, 1)
				if err != nil || got != n+1 {
					f.fail("AddPartitions: %d %v", got, err)
					return
				}
			}
		})
	} else {
		growDone.Store(true)
	}
	// Noise: assignor flips on g (one member: nothing moves, the snapshot
	// changes), churn in the other group.
	fs = append(fs, func() {
		as := []engine.Assignor{engine.Range, engine.Sticky, engine.RoundRobin}
		for i := 0; !stop.Load() && !f.stop.Load(); i++ {
			if ok, err := b.SetAssignor(topic, "g", as[i%3]); !ok || err != nil {
				f.fail("SetAssignor: %v %v", ok, err)
			}
			if i%2 == 0 {
				b.Join(topic, "other", "o2")
			} else {
				b.Leave(topic, "other", "o2")
			}
			runtime.Gosched()
		}
	})
	fs = append(fs, func() {
		for !stop.Load() && !f.stop.Load() {
			for _, m := range []string{"o1", "o2"} {
				recs, _ := b.Poll(topic, "other", m, 64)
				for _, r := range recs {
					b.Ack(topic, "other", m, r.Partition, r.Offset)
				}
			}
			runtime.Gosched()
		}
	})
	fs = append(fs, cxDescriber(b, topic, int64(capacity), 0, true, &f, &stop))
	var polls, records atomic.Int64
	fs = append(fs, func() {
		rng := rand.New(rand.NewPCG(7, uint64(Pmax)))
		var next [engine.MaxPartitionCount]int64
		var snap [engine.MaxPartitionCount]int64
		deadline := time.Now().Add(cxDur())
		for !f.stop.Load() && (time.Now().Before(deadline) || !growDone.Load()) {
			max := int32(64)
			if rng.IntN(2) == 0 {
				max = 1 + rng.Int32N(4)
			}
			for p := range snap {
				snap[p] = pubDone[p].Load()
			}
			recs, err := b.Poll(topic, "g", "m", max)
			if err != nil {
				f.fail("Poll: %v", err)
				break
			}
			polls.Add(1)
			if len(recs) > int(max) {
				f.fail("poll(%d) returned %d", max, len(recs))
			}
			var got [engine.MaxPartitionCount]bool
			highest := int32(-1)
			for i, r := range recs {
				if i > 0 && r.Partition <= recs[i-1].Partition {
					f.fail("poll result not ascending: %+v", recs)
				}
				if r.Offset != next[r.Partition] || r.Payload != cxPayload(r.Partition, r.Offset) || r.Attempt != 1 {
					f.fail("p%d: polled off %d payload %q attempt %d, want off %d", r.Partition, r.Offset, r.Payload, r.Attempt, next[r.Partition])
				}
				got[r.Partition] = true
				highest = r.Partition
			}
			bound := int32(engine.MaxPartitionCount)
			if len(recs) == int(max) {
				bound = highest
			}
			for p := range bound {
				if snap[p] > next[p] && !got[p] {
					f.fail("poll(max %d) skipped p%d: record %d published before the poll began, nothing in flight; result partitions %v", max, p, next[p], cxParts(recs))
				}
			}
			// A record the poll returned from q was published after a
			// record of p < q (≤ bound) had been: the poll cannot have seen
			// q's without p's (one atomic snapshot).
			tmu.Lock()
			for _, r := range recs {
				s, ok := startTick[[2]int64{int64(r.Partition), r.Offset}]
				if !ok {
					f.fail("p%d off %d: no start tick", r.Partition, r.Offset)
					continue
				}
				for p := range min(r.Partition, bound) {
					if e, ok := endTick[[2]int64{int64(p), next[p]}]; ok && e < s && !got[p] {
						f.fail("poll(max %d) returned p%d off %d (publish began at tick %d) but not p%d off %d (published by tick %d): not one snapshot; result %v", max, r.Partition, r.Offset, s, p, next[p], e, cxParts(recs))
					}
				}
			}
			tmu.Unlock()
			for _, r := range recs {
				ok, err := b.Ack(topic, "g", "m", r.Partition, r.Offset)
				if !ok || err != nil {
					f.fail("Ack p%d %d: %v %v", r.Partition, r.Offset, ok, err)
				}
				next[r.Partition]++
				records.Add(1)
			}
			if len(recs) == 0 {
				runtime.Gosched()
			}
		}
		stop.Store(true)
	})
	hRun(t, hDeadline, fs...)
	f.report(t)
	if n, _ := b.PartitionCount(topic); n != Pmax {
		t.Fatalf("partition count %d, want %d", n, Pmax)
	}
	t.Logf("%d polls, %d records", polls.Load(), records.Load())
}

func cxParts(recs []engine.Record) []int32 {
	ps := make([]int32, len(recs))
	for i, r := range recs {
		ps[i] = r.Partition
	}
	return ps
}

// ---------------------------------------------------------------------------

// TestCursorHostileSameMemberManyGoroutines: four goroutines poll (random
// maxRecords) and settle as the same member of one group over 6
// partitions, with sole publishers. No rebalance, no timeout, so: a record
// is never held by two goroutines at once; every Ack and Retry of a held
// record succeeds; a record is given only after an Ack of its predecessor
// began and never after its own Ack returned; the attempts of each record
// are exactly 1, 2, …, n in delivery order; at the end every offset was
// acked exactly once with its payload.
func TestCursorHostileSameMemberManyGoroutines(t *testing.T) {
	const topic, P = "same", int32(6)
	b, err := hNew(2)
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, P)
	b.Join(topic, "g", "m")
	type key struct {
		p   int32
		off int64
	}
	var f hFailures
	var stop atomic.Bool
	var mu sync.Mutex
	held := map[key]bool{}
	attempts := map[key][]int32{}
	acks := map[key]int{}
	var ackStarted, ackReturned [P]atomic.Int64
	for p := range P {
		ackStarted[p].Store(-1)
		ackReturned[p].Store(-1)
	}
	var fs []func()
	for w := range int32(2) {
		var mine []int32
		for p := w; p < P; p += 2 {
			mine = append(mine, p)
		}
		fs = append(fs, cxPublisher(b, topic, mine, &f, &stop))
	}
	for w := range 4 {
		fs = append(fs, func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for !stop.Load() && !f.stop.Load() {
				recs, err := b.Poll(topic, "g", "m", 1+rng.Int32N(P))
				if err != nil {
					f.fail("Poll: %v", err)
					return
				}
				mu.Lock()
				for _, r := range recs {
					k := key{r.Partition, r.Offset}
					if held[k] {
						f.fail("p%d off %d given to two goroutines at once", k.p, k.off)
					}
					held[k] = true
					attempts[k] = append(attempts[k], r.Attempt)
					if r.Payload != cxPayload(k.p, k.off) {
						f.fail("p%d off %d payload %q", k.p, k.off, r.Payload)
					}
					if r.Offset <= ackReturned[k.p].Load() {
						f.fail("p%d off %d given after its ack returned", k.p, k.off)
					}
					if r.Offset > 0 && ackStarted[k.p].Load() < r.Offset-1 {
						f.fail("p%d off %d given before the ack of %d began", k.p, k.off, k.off-1)
					}
				}
				mu.Unlock()
				if len(recs) == 0 {
					runtime.Gosched()
				}
				for _, r := range recs {
					k := key{r.Partition, r.Offset}
					retry := rng.IntN(4) == 0
					mu.Lock()
					delete(held, k)
					mu.Unlock()
					var ok bool
					if retry {
						ok, err = b.Retry(topic, "g", "m", k.p, k.off)
					} else {
						cxMax(&ackStarted[k.p], k.off)
						ok, err = b.Ack(topic, "g", "m", k.p, k.off)
					}
					if !ok || err != nil {
						f.fail("settle (retry %v) p%d off %d of a held record: %v %v", retry, k.p, k.off, ok, err)
						return
					}
					if !retry {
						cxMax(&ackReturned[k.p], k.off)
						mu.Lock()
						acks[k]++
						mu.Unlock()
					}
				}
			}
		})
	}
	fs = append(fs, cxDescriber(b, topic, 2, 0, true, &f, &stop))
	fs = append(fs, func() { time.Sleep(cxDur()); stop.Store(true) })
	hRun(t, hDeadline, fs...)
	f.report(t)
	for {
		recs, _ := b.Poll(topic, "g", "m", 64)
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			k := key{r.Partition, r.Offset}
			attempts[k] = append(attempts[k], r.Attempt)
			if ok, _ := b.Ack(topic, "g", "m", k.p, k.off); !ok {
				t.Fatalf("drain ack %v", k)
			}
			acks[k]++
		}
	}
	total := 0
	for p := range P {
		end, _ := b.LogEndOffset(topic, p)
		for off := range end {
			k := key{p, off}
			if acks[k] != 1 {
				t.Fatalf("p%d off %d acked %d times", p, off, acks[k])
			}
			for i, a := range attempts[k] {
				if a != int32(i+1) {
					t.Fatalf("p%d off %d: attempts in delivery order %v, want 1..n", p, off, attempts[k])
				}
			}
			total++
		}
		if start, _ := b.LogStartOffset(topic, p); start != end {
			t.Fatalf("p%d: drained, but log [%d,%d)", p, start, end)
		}
	}
	if len(acks) != total {
		t.Fatalf("%d records acked, %d published", len(acks), total)
	}
	t.Logf("%d records", total)
}

// ---------------------------------------------------------------------------

// TestCursorHostileAdminChurn: four partitions (growing to eight) of
// capacity 3, with and without a replay window; sole publishers; stable
// groups with two members each consuming; racing them: SetAssignor flips
// (moving partitions between the members), Seek of stable groups forward
// and back to offsets read just before, transient groups created, joined,
// left and deleted (names reused), AddPartitions. Checked: every delivered
// record has its published payload; every Describe and Snapshot is
// self-consistent and monotonic; a transient group's committed offsets
// right after CreateGroup lie between the log start read before and the
// log end read after; CreateGroup and DeleteGroup return true exactly as
// expected. At the end (quiet): retention exact, and exactly capacity −
// (end − least committed) publishes fit on every partition.
func TestCursorHostileAdminChurn(t *testing.T) {
	for _, w := range []int32{0, 2} {
		t.Run(fmt.Sprintf("W%d", w), func(t *testing.T) { cxAdminChurn(t, w) })
	}
}

func cxAdminChurn(t *testing.T, window int32) {
	const topic, capacity = "adm", int32(3)
	b, err := hNew(capacity, engine.WithReplayWindow(window))
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, 4)
	stable := []string{"s0", "s1", "s2", "s3"}
	for _, g := range stable {
		b.Join(topic, g, "a")
		b.Join(topic, g, "b")
	}
	var f hFailures
	var stop atomic.Bool
	var delivered atomic.Int64
	var fs []func()
	for w := range int32(2) {
		fs = append(fs, func() {
			var next [engine.MaxPartitionCount]int64
			for !stop.Load() && !f.stop.Load() {
				n, _ := b.PartitionCount(topic)
				for p := w; p < n; p += 2 {
					off, err := b.Publish(topic, p, cxPayload(p, next[p]))
					if err != nil || off != -1 && off != next[p] {
						f.fail("p%d: publish %d %v, want %d", p, off, err, next[p])
						return
					}
					if off >= 0 {
						next[p]++
					}
				}
				runtime.Gosched()
			}
		})
	}
	for _, g := range stable {
		for _, m := range []string{"a", "b"} {
			fs = append(fs, func() {
				for !stop.Load() && !f.stop.Load() {
					recs, err := b.Poll(topic, g, m, 64)
					if err != nil {
						f.fail("Poll: %v", err)
						return
					}
					for i, r := range recs {
						if r.Payload != cxPayload(r.Partition, r.Offset) {
							f.fail("%s/%s: p%d off %d payload %q (a reused or trimmed slot?)", g, m, r.Partition, r.Offset, r.Payload)
						}
						if i > 0 && r.Partition <= recs[i-1].Partition {
							f.fail("poll not ascending: %v", cxParts(recs))
						}
						if _, err := b.Ack(topic, g, m, r.Partition, r.Offset); err != nil {
							f.fail("Ack: %v", err)
						}
						delivered.Add(1)
					}
					if len(recs) == 0 {
						runtime.Gosched()
					}
				}
			})
		}
	}
	// SetAssignor flips on stable groups: with two members, Range and
	// RoundRobin move partitions (cancelling in-flight deliveries).
	fs = append(fs, func() {
		as := []engine.Assignor{engine.Range, engine.RoundRobin, engine.Sticky}
		for i := 0; !stop.Load() && !f.stop.Load(); i++ {
			if ok, err := b.SetAssignor(topic, stable[i%len(stable)], as[i%3]); !ok || err != nil {
				f.fail("SetAssignor: %v %v", ok, err)
			}
			runtime.Gosched()
		}
	})
	// Seeks of stable groups.
	fs = append(fs, func() {
		rng := rand.New(rand.NewPCG(3, uint64(window)))
		for !stop.Load() && !f.stop.Load() {
			n, _ := b.PartitionCount(topic)
			p := rng.Int32N(n)
			start, _ := b.LogStartOffset(topic, p)
			end, _ := b.LogEndOffset(topic, p)
			off := start + rng.Int64N(end-start+1)
			ok, err := b.Seek(topic, stable[rng.IntN(len(stable))], p, off)
			if err != nil && !errors.Is(err, engine.ErrOffsetOutOfRange) || err == nil && !ok {
				f.fail("Seek p%d %d: %v %v", p, off, ok, err)
			}
			runtime.Gosched()
		}
	})
	// Transient groups.
	fs = append(fs, func() {
		for i := 0; !stop.Load() && !f.stop.Load(); i++ {
			name := fmt.Sprintf("t%d", i%3)
			n, _ := b.PartitionCount(topic)
			starts := make([]int64, n)
			for p := range n {
				starts[p], _ = b.LogStartOffset(topic, p)
			}
			if ok, err := b.CreateGroup(topic, name, engine.Sticky); !ok || err != nil {
				f.fail("CreateGroup %s: %v %v", name, ok, err)
				return
			}
			for p := range n {
				c, err := b.Committed(topic, name, p)
				end, _ := b.LogEndOffset(topic, p)
				if err != nil || c < starts[p] || c > end {
					f.fail("new group %s p%d committed %d (%v): log start before %d, end after %d", name, p, c, err, starts[p], end)
				}
			}
			if i%2 == 0 {
				b.Join(topic, name, "x")
				b.Join(topic, name, "y")
				recs, _ := b.Poll(topic, name, "x", 64)
				for _, r := range recs {
					if r.Payload != cxPayload(r.Partition, r.Offset) {
						f.fail("%s: p%d off %d payload %q", name, r.Partition, r.Offset, r.Payload)
					}
					b.Ack(topic, name, "x", r.Partition, r.Offset)
				}
				if _, err := b.DeleteGroup(topic, name); !errors.Is(err, engine.ErrGroupNotEmpty) {
					f.fail("DeleteGroup of a group with members: %v", err)
				}
				b.Leave(topic, name, "x")
				b.Leave(topic, name, "y")
			}
			if ok, err := b.DeleteGroup(topic, name); !ok || err != nil {
				f.fail("DeleteGroup %s: %v %v", name, ok, err)
				return
			}
			runtime.Gosched()
		}
	})
	fs = append(fs, func() {
		for n := int32(4); n < 8 && !stop.Load() && !f.stop.Load(); n++ {
			time.Sleep(cxDur() / 6)
			if got, err := b.AddPartitions(topic, 1); got != n+1 || err != nil {
				f.fail("AddPartitions: %d %v", got, err)
			}
		}
	})
	fs = append(fs, cxDescriber(b, topic, int64(capacity), int64(window), true, &f, &stop))
	fs = append(fs, func() { time.Sleep(cxDur()); stop.Store(true) })
	hRun(t, hDeadline, fs...)
	f.report(t)
	d, _ := b.Describe(topic)
	if err := cxCheckDesc(d, int64(capacity), int64(window)); err != nil {
		t.Fatal(err)
	}
	if len(d.Groups) != len(stable) {
		t.Fatalf("groups %v left", d.Groups)
	}
	for p := range d.Partitions {
		low := int64(math.MaxInt64)
		for _, g := range d.Groups {
			low = min(low, g.Partitions[p].Committed)
		}
		// With a window the log start is not low; cxFill wants log start
		// = low after filling, which holds: the fill evicts every fully
		// committed record it needs room for, and ends full at [low, low+C).
		if int64(capacity)-(d.Partitions[p].LogEndOffset-low) >= 0 {
			cxFill(t, b, topic, int32(p), low)
		}
	}
	t.Logf("%d records delivered", delivered.Load())
}

// ---------------------------------------------------------------------------

// TestCursorHostileAckTimeout: a test clock advanced by a goroutine, an ack
// timeout of 100 ns; group g: one member polled by three goroutines that
// ack at once, ack late, retry or drop their records; group h: two members
// with a third joining and leaving (rebalances). Checked: a record's
// attempts over all its deliveries to a group are exactly {1..n} (two
// redeliveries of one expiry would repeat a number); each record is
// committed by exactly one successful Ack; a record is given only after an
// Ack of its predecessor began and never after its own Ack returned true;
// payloads match. At the end every offset of every partition was committed
// once per group.
func TestCursorHostileAckTimeout(t *testing.T) {
	const topic, P = "tmo", int32(3)
	var clk atomic.Int64
	clk.Store(1_000_000_000_000)
	b, err := hNew(2, engine.WithClock(func() time.Time { return time.Unix(0, clk.Load()) }), engine.WithAckTimeout(100*time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, P)
	b.Join(topic, "g", "m")
	b.Join(topic, "h", "h1")
	b.Join(topic, "h", "h2")
	type key struct {
		g   string
		p   int32
		off int64
	}
	type gp struct {
		g string
		p int32
	}
	var f hFailures
	var stop atomic.Bool
	var mu sync.Mutex
	attempts := map[key][]int32{}
	commits := map[key]int{}
	ackStarted := map[gp]*atomic.Int64{}
	ackReturned := map[gp]*atomic.Int64{}
	for _, g := range []string{"g", "h"} {
		for p := range P {
			ackStarted[gp{g, p}], ackReturned[gp{g, p}] = new(atomic.Int64), new(atomic.Int64)
			ackStarted[gp{g, p}].Store(-1)
			ackReturned[gp{g, p}].Store(-1)
		}
	}
	// returned reads, before a poll, the highest offset per partition whose
	// Ack had returned true: a poll must not give any of those again.
	returned := func(g string) (r [P]int64) {
		for p := range P {
			r[p] = ackReturned[gp{g, p}].Load()
		}
		return r
	}
	got := func(g string, before [P]int64, recs []engine.Record) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			k := key{g, r.Partition, r.Offset}
			attempts[k] = append(attempts[k], r.Attempt)
			if r.Payload != cxPayload(r.Partition, r.Offset) {
				f.fail("%v: payload %q", k, r.Payload)
			}
			if r.Offset <= before[r.Partition] {
				f.fail("%v given (attempt %d) by a poll begun after its Ack returned true", k, r.Attempt)
			}
			if s := ackStarted[gp{g, r.Partition}].Load(); r.Offset > 0 && s < r.Offset-1 {
				f.fail("%v given before any Ack of %d began", k, r.Offset-1)
			}
		}
	}
	ack := func(g, m string, r engine.Record) {
		k := key{g, r.Partition, r.Offset}
		cxMax(ackStarted[gp{g, r.Partition}], r.Offset)
		ok, err := b.Ack(topic, g, m, r.Partition, r.Offset)
		if err != nil {
			f.fail("Ack: %v", err)
		}
		if ok {
			cxMax(ackReturned[gp{g, r.Partition}], r.Offset)
			mu.Lock()
			commits[k]++
			if commits[k] > 1 {
				f.fail("%v committed by %d successful Acks", k, commits[k])
			}
			mu.Unlock()
		}
	}
	var fs []func()
	fs = append(fs, cxPublisher(b, topic, cxPartitions(P), &f, &stop))
	fs = append(fs, func() {
		rng := rand.New(rand.NewPCG(1, 1))
		for !stop.Load() && !f.stop.Load() {
			clk.Add(rng.Int64N(40))
			runtime.Gosched()
		}
	})
	worker := func(g, m string, seed uint64) func() {
		return func() {
			rng := rand.New(rand.NewPCG(seed, 5))
			var late []engine.Record
			for !stop.Load() && !f.stop.Load() {
				before := returned(g)
				recs, err := b.Poll(topic, g, m, 1+rng.Int32N(P))
				if err != nil {
					f.fail("Poll: %v", err)
					return
				}
				got(g, before, recs)
				for _, r := range recs {
					switch rng.IntN(6) {
					case 0: // drop: left to time out
					case 1:
						late = append(late, r)
					case 2:
						b.Retry(topic, g, m, r.Partition, r.Offset)
					default:
						ack(g, m, r)
					}
				}
				if len(late) > 3 || len(recs) == 0 && len(late) > 0 {
					for _, r := range late {
						ack(g, m, r)
					}
					late = late[:0]
				}
				runtime.Gosched()
			}
		}
	}
	for i := range 3 {
		fs = append(fs, worker("g", "m", uint64(i)))
	}
	fs = append(fs, worker("h", "h1", 10), worker("h", "h2", 11), worker("h", "h3", 12))
	fs = append(fs, func() {
		for i := 0; !stop.Load() && !f.stop.Load(); i++ {
			if i%2 == 0 {
				b.Join(topic, "h", "h3")
			} else {
				b.Leave(topic, "h", "h3")
			}
			for range 10 {
				runtime.Gosched()
			}
		}
	})
	fs = append(fs, cxDescriber(b, topic, 2, 0, true, &f, &stop))
	fs = append(fs, func() { time.Sleep(cxDur()); stop.Store(true) })
	hRun(t, hDeadline, fs...)
	f.report(t)
	// Drain: the clock jumps past every timeout before each poll.
	b.Leave(topic, "h", "h3")
	for _, gm := range [][2]string{{"g", "m"}, {"h", "h1"}, {"h", "h2"}} {
		for {
			clk.Add(1000)
			before := returned(gm[0])
			recs, _ := b.Poll(topic, gm[0], gm[1], 64)
			if len(recs) == 0 {
				break
			}
			got(gm[0], before, recs)
			for _, r := range recs {
				ack(gm[0], gm[1], r)
			}
		}
	}
	f.report(t)
	total := 0
	for _, g := range []string{"g", "h"} {
		for p := range P {
			end, _ := b.LogEndOffset(topic, p)
			for off := range end {
				k := key{g, p, off}
				if commits[k] != 1 {
					t.Fatalf("%v committed %d times", k, commits[k])
				}
				as := slices.Clone(attempts[k])
				slices.Sort(as)
				for i, a := range as {
					if a != int32(i+1) {
						t.Fatalf("%v: attempts %v, want each of 1..%d once", k, attempts[k], len(as))
					}
				}
				total++
			}
		}
	}
	for p := range P {
		start, _ := b.LogStartOffset(topic, p)
		end, _ := b.LogEndOffset(topic, p)
		if start != end {
			t.Fatalf("p%d: drained but log [%d,%d)", p, start, end)
		}
	}
	t.Logf("%d group-records committed", total)
}

// ---------------------------------------------------------------------------

// TestCursorHostileSeekRacingAcks: eight groups on one partition of
// capacity 2 (window 0 and 1), one consumer each, one goroutine seeking
// random groups to random offsets in [log start, log end]. Checked: payloads
// (a Seek re-places the cursor's slot; a forward Seek of the least group
// trims); an Ack of a record polled before a Seek of its group began, called
// after that Seek returned true, returns false (the Seek cancelled the
// delivery); a poll that begins after a Seek to X returned true, with no
// other Seek of the group begun before the poll returned, gives an offset
// ≥ X; Describe and Snapshot self-consistent throughout; at the end (quiet)
// exactly capacity − (end − least committed) publishes fit.
func TestCursorHostileSeekRacingAcks(t *testing.T) {
	for _, w := range []int32{0, 1} {
		t.Run(fmt.Sprintf("W%d", w), func(t *testing.T) { cxSeek(t, w) })
	}
}

func cxSeek(t *testing.T, window int32) {
	const topic, G, capacity = "seek", 8, int32(2)
	b, names := cxGroupsOnOnePartition(t, topic, "k%d", G, capacity, window)
	// Per group, written only by the seeker: seeks begun and finished
	// (whatever the outcome), and the last one that returned true.
	type okSeek struct {
		seq, target int64
	}
	type seekState struct {
		begun, finished atomic.Int64
		lastOK          atomic.Pointer[okSeek]
	}
	seeks := make([]*seekState, G)
	for g := range seeks {
		seeks[g] = new(seekState)
		seeks[g].lastOK.Store(&okSeek{})
	}
	var f hFailures
	var stop atomic.Bool
	var nOK, nCheckedAck atomic.Int64
	var fs []func()
	fs = append(fs, func() {
		var next int64
		for !stop.Load() && !f.stop.Load() {
			off, err := b.Publish(topic, 0, cxPayload(0, next))
			if err != nil || off != -1 && off != next {
				f.fail("publish %d %v, want %d", off, err, next)
				return
			}
			if off >= 0 {
				next++
			}
			runtime.Gosched()
		}
	})
	fs = append(fs, func() {
		rng := rand.New(rand.NewPCG(4, uint64(window)))
		for !stop.Load() && !f.stop.Load() {
			g := rng.IntN(G)
			start, _ := b.LogStartOffset(topic, 0)
			end, _ := b.LogEndOffset(topic, 0)
			off := start + rng.Int64N(end-start+1)
			s := seeks[g]
			n := s.begun.Add(1)
			ok, err := b.Seek(topic, names[g], 0, off)
			switch {
			case err == nil && ok:
				s.lastOK.Store(&okSeek{seq: n, target: off})
				nOK.Add(1)
			case errors.Is(err, engine.ErrOffsetOutOfRange):
			default:
				f.fail("Seek %s %d: %v %v", names[g], off, ok, err)
				return
			}
			s.finished.Store(n)
			for range 3 {
				runtime.Gosched()
			}
		}
	})
	for g := range G {
		fs = append(fs, func() {
			s := seeks[g]
			for !stop.Load() && !f.stop.Load() {
				finishedBefore := s.finished.Load()
				begunBefore := s.begun.Load()
				last := s.lastOK.Load()
				recs, err := b.Poll(topic, names[g], "m", 1)
				if err != nil {
					f.fail("Poll: %v", err)
					return
				}
				begunAfter := s.begun.Load()
				if len(recs) == 0 {
					runtime.Gosched()
					continue
				}
				r := recs[0]
				if r.Payload != cxPayload(0, r.Offset) {
					f.fail("%s: off %d payload %q", names[g], r.Offset, r.Payload)
				}
				if finishedBefore == begunBefore && begunAfter == begunBefore && last.seq > 0 && r.Offset < last.target {
					f.fail("%s: polled off %d after Seek #%d to %d returned, no Seek since", names[g], r.Offset, last.seq, last.target)
				}
				runtime.Gosched()
				lastNow := s.lastOK.Load()
				ok, err := b.Ack(topic, names[g], "m", 0, r.Offset)
				if err != nil {
					f.fail("Ack: %v", err)
				}
				// A Seek that began after the poll returned and returned
				// true before the Ack was called cancelled the delivery.
				if lastNow.seq > begunAfter {
					nCheckedAck.Add(1)
					if ok {
						f.fail("%s: Ack of off %d returned true after Seek #%d (begun after the poll returned) to %d returned true", names[g], r.Offset, lastNow.seq, lastNow.target)
					}
				}
			}
		})
	}
	fs = append(fs, cxDescriber(b, topic, int64(capacity), int64(window), true, &f, &stop))
	fs = append(fs, func() { time.Sleep(cxDur()); stop.Store(true) })
	hRun(t, hDeadline, fs...)
	f.report(t)
	d, _ := b.Describe(topic)
	if err := cxCheckDesc(d, int64(capacity), int64(window)); err != nil {
		t.Fatal(err)
	}
	low := int64(math.MaxInt64)
	for _, g := range d.Groups {
		low = min(low, g.Partitions[0].Committed)
	}
	cxFill(t, b, topic, 0, low)
	t.Logf("%d seeks, %d acks after a seek checked", nOK.Load(), nCheckedAck.Load())
}

// ---------------------------------------------------------------------------

// TestCursorHostileRebalanceCancels: a group of four partitions with
// members a and b consuming (one goroutine each), a member z that never
// polls, and one goroutine flipping the assignor between Range and
// RoundRobin and making c join and leave (c never polls either). The test
// computes each assignment itself (members sorted bytewise). Checked: an
// Ack by a or b of a record polled before a rebalance began that moved its
// partition away, called after that rebalance returned, returns false;
// Acks and Retries by z or c (who never hold anything) always return false;
// every delivered record is at the next offset not yet committed, with
// attempts 1..n over its deliveries; at the end each offset was committed
// exactly once.
func TestCursorHostileRebalanceCancels(t *testing.T) {
	const topic, P = "reb", int32(4)
	b, err := hNew(2)
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, P)
	for _, m := range []string{"a", "b", "z"} {
		b.Join(topic, "g", m)
	}
	// owners computes the assignment of P partitions over members.
	owners := func(range_ bool, members []string) [P]string {
		var o [P]string
		n := int32(len(members))
		for p := range P {
			if range_ {
				// Range: the first P mod n members take ⌈P/n⌉.
				q, r := P/n, P%n
				i, start := int32(0), int32(0)
				for ; ; i++ {
					size := q
					if i < r {
						size++
					}
					if p < start+size {
						break
					}
					start += size
				}
				o[p] = members[i]
			} else {
				o[p] = members[p%n]
			}
		}
		return o
	}
	type reb struct {
		seq   int64
		owner [P]string
	}
	// history[i] is the assignment after rebalance #i (#0: the initial one).
	var hmu sync.Mutex
	history := []reb{{0, owners(false, []string{"a", "b", "z"})}}
	var begun, finished atomic.Int64
	var f hFailures
	var stop atomic.Bool
	var mu sync.Mutex
	attempts := map[[2]int64][]int32{}
	commits := map[[2]int64]int{}
	var committedTo [P]atomic.Int64 // highest offset whose Ack returned true
	for p := range P {
		committedTo[p].Store(-1)
	}
	var fs []func()
	fs = append(fs, cxPublisher(b, topic, cxPartitions(P), &f, &stop))
	fs = append(fs, func() {
		rangeOn, withC := false, false
		for i := 0; !stop.Load() && !f.stop.Load(); i++ {
			n := begun.Add(1)
			var err error
			switch i % 3 {
			case 0, 1:
				rangeOn = !rangeOn
				a := engine.RoundRobin
				if rangeOn {
					a = engine.Range
				}
				_, err = b.SetAssignor(topic, "g", a)
			case 2:
				withC = !withC
				if withC {
					_, err = b.Join(topic, "g", "c")
				} else {
					_, err = b.Leave(topic, "g", "c")
				}
			}
			if err != nil {
				f.fail("rebalance: %v", err)
				return
			}
			members := []string{"a", "b", "z"}
			if withC {
				members = []string{"a", "b", "c", "z"}
			}
			o := owners(rangeOn, members)
			d, _ := b.Describe(topic)
			for p := range P {
				if got := d.Groups[0].Partitions[p].Owner; got != o[p] {
					f.fail("after rebalance #%d: p%d owner %q, computed %q", n, p, got, o[p])
				}
			}
			hmu.Lock()
			history = append(history, reb{n, o})
			hmu.Unlock()
			finished.Store(n)
			for range 5 {
				runtime.Gosched()
			}
		}
	})
	// movedAway reports whether a rebalance numbered in (after, upto] left
	// p with an owner other than m.
	movedAway := func(m string, p int32, after, upto int64) bool {
		hmu.Lock()
		defer hmu.Unlock()
		for _, h := range history {
			if h.seq > after && h.seq <= upto && h.owner[p] != m {
				return true
			}
		}
		return false
	}
	var checked atomic.Int64
	for _, m := range []string{"a", "b"} {
		fs = append(fs, func() {
			rng := rand.New(rand.NewPCG(uint64(m[0]), 2))
			for !stop.Load() && !f.stop.Load() {
				var before [P]int64
				for p := range P {
					before[p] = committedTo[p].Load()
				}
				recs, err := b.Poll(topic, "g", m, 4)
				if err != nil {
					f.fail("Poll: %v", err)
					return
				}
				after := begun.Load()
				mu.Lock()
				for _, r := range recs {
					k := [2]int64{int64(r.Partition), r.Offset}
					attempts[k] = append(attempts[k], r.Attempt)
					if r.Payload != cxPayload(r.Partition, r.Offset) {
						f.fail("%v payload %q", k, r.Payload)
					}
					if r.Offset <= before[r.Partition] {
						f.fail("%v delivered to %s by a poll begun after it was committed", k, m)
					}
				}
				mu.Unlock()
				if len(recs) == 0 {
					runtime.Gosched()
					continue
				}
				for range rng.IntN(4) {
					runtime.Gosched()
				}
				for _, r := range recs {
					upto := finished.Load()
					var ok bool
					if rng.IntN(5) == 0 {
						ok, err = b.Retry(topic, "g", m, r.Partition, r.Offset)
					} else {
						ok, err = b.Ack(topic, "g", m, r.Partition, r.Offset)
						if ok {
							cxMax(&committedTo[r.Partition], r.Offset)
							mu.Lock()
							commits[[2]int64{int64(r.Partition), r.Offset}]++
							mu.Unlock()
						}
					}
					if err != nil {
						f.fail("settle: %v", err)
					}
					if upto > after && movedAway(m, r.Partition, after, upto) {
						checked.Add(1)
						if ok {
							f.fail("%s settled p%d off %d after a rebalance (begun after its poll, returned before the call) moved p%d away", m, r.Partition, r.Offset, r.Partition)
						}
					}
				}
			}
		})
	}
	// z and c never poll: nothing of theirs is ever in flight.
	fs = append(fs, func() {
		rng := rand.New(rand.NewPCG(9, 9))
		for !stop.Load() && !f.stop.Load() {
			p := rng.Int32N(P)
			start, _ := b.LogStartOffset(topic, p) // then end: end ≥ start
			end, _ := b.LogEndOffset(topic, p)
			off := start + rng.Int64N(end-start+1)
			for _, m := range []string{"z", "c"} {
				if ok, _ := b.Ack(topic, "g", m, p, off); ok {
					f.fail("Ack by %s, who never polled, of p%d off %d succeeded", m, p, off)
				}
				if ok, _ := b.Retry(topic, "g", m, p, off); ok {
					f.fail("Retry by %s, who never polled, of p%d off %d succeeded", m, p, off)
				}
			}
			runtime.Gosched()
		}
	})
	fs = append(fs, cxDescriber(b, topic, 2, 0, true, &f, &stop))
	fs = append(fs, func() { time.Sleep(cxDur()); stop.Store(true) })
	hRun(t, hDeadline, fs...)
	f.report(t)
	b.Leave(topic, "g", "z")
	b.Leave(topic, "g", "c")
	b.Leave(topic, "g", "b")
	for {
		recs, _ := b.Poll(topic, "g", "a", 64)
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			k := [2]int64{int64(r.Partition), r.Offset}
			attempts[k] = append(attempts[k], r.Attempt)
			if ok, _ := b.Ack(topic, "g", "a", r.Partition, r.Offset); !ok {
				t.Fatalf("drain ack %v", k)
			}
			commits[k]++
		}
	}
	for p := range P {
		end, _ := b.LogEndOffset(topic, p)
		for off := range end {
			k := [2]int64{int64(p), off}
			if commits[k] != 1 {
				t.Fatalf("%v committed %d times", k, commits[k])
			}
			as := slices.Clone(attempts[k])
			slices.Sort(as)
			for i, a := range as {
				if a != int32(i+1) {
					t.Fatalf("%v: attempts %v, want each of 1..%d once", k, attempts[k], len(as))
				}
			}
		}
	}
	t.Logf("%d settles after a moving rebalance checked", checked.Load())
}
