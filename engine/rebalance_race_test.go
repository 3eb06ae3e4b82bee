package engine_test

// Rebalances racing deliveries (rule 9): an Ack of a record whose partition
// a rebalance moved away, called after that rebalance returned, is false;
// members that hold nothing never settle anything; every offset is
// committed exactly once.

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/f91dcac0/tributary/engine"
)

// TestCursorRebalanceCancels: a group of four partitions with
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
func TestCursorRebalanceCancels(t *testing.T) {
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
	cxStorm(t, fs, b, topic, 2, 0, true, &f, &stop)
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
