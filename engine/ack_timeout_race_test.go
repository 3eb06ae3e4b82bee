package engine_test

// The ack timeout (rule 22) under races: a clock advanced by a goroutine,
// deliveries that expire while their owner acks, retries or drops them, and
// rebalances: each expiry redelivers once, with the next attempt, and each
// record is committed exactly once per group.

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// TestCursorAckTimeout: a test clock advanced by a goroutine, an ack
// timeout of 100 ns; group g: one member polled by three goroutines that
// ack at once, ack late, retry or drop their records; group h: two members
// with a third joining and leaving (rebalances). Checked: a record's
// attempts over all its deliveries to a group are exactly {1..n} (two
// redeliveries of one expiry would repeat a number); each record is
// committed by exactly one successful Ack; a record is given only after an
// Ack of its predecessor began and never after its own Ack returned true;
// payloads match. At the end every offset of every partition was committed
// once per group.
func TestCursorAckTimeout(t *testing.T) {
	const topic, P = "tmo", int32(3)
	clk := testclock.New()
	b, err := hNew(2, engine.WithClock(clk.Now), engine.WithAckTimeout(100*time.Nanosecond))
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
			clk.Advance(time.Duration(rng.Int64N(40)))
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
	cxStorm(t, fs, b, topic, 2, 0, true, &f, &stop)
	// Drain: the clock jumps past every timeout before each poll.
	b.Leave(topic, "h", "h3")
	for _, gm := range [][2]string{{"g", "m"}, {"h", "h1"}, {"h", "h2"}} {
		for {
			clk.Advance(1000)
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
