package engine_test

// Polls racing publishes and each other on lock-free cursors: a poll skips
// no partition whose record was published before it began, and goroutines
// polling and settling as one member never hold a record twice, with
// attempts 1, 2, … n in delivery order. Every check is an exact
// expectation derived from the contract, never a timing assertion.

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// TestCursorPollNoSkip: one member owns every partition of its group;
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
func TestCursorPollNoSkip(t *testing.T) {
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
	runAll(t, hDeadline, fs...)
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

// TestCursorSameMemberManyGoroutines: four goroutines poll (random
// maxRecords) and settle as the same member of one group over 6
// partitions, with sole publishers. No rebalance, no timeout, so: a record
// is never held by two goroutines at once; every Ack and Retry of a held
// record succeeds; a record is given only after an Ack of its predecessor
// began and never after its own Ack returned; the attempts of each record
// are exactly 1, 2, …, n in delivery order; at the end every offset was
// acked exactly once with its payload.
func TestCursorSameMemberManyGoroutines(t *testing.T) {
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
	cxStorm(t, fs, b, topic, 2, 0, true, &f, &stop)
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
