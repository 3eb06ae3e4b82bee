package engine_test

// What the broker returns belongs to the caller (SPEC section 1): records,
// partition slices and AppendPoll buffers a caller overwrites or reuses
// while the broker keeps running, and AppendPoll appending to a buffer that
// already holds records exactly what the model's Poll returns.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// TestCallerScribblesResults: consumers overwrite every record and
// partition slice the broker returns (and hand them to another goroutine
// that keeps overwriting them), reuse AppendPoll buffers, and the broker
// must neither see the writes (the race detector would flag shared memory)
// nor deliver anything but what was published.
func TestCallerScribblesResults(t *testing.T) {
	const topic, P = "W", int32(4)
	b, err := hNew(16)
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, P)
	for _, g := range []string{"g1", "g2"} {
		// Both groups exist before the first publish, so both start at 0.
		if _, err := b.Join(topic, g, "a"); err != nil {
			t.Fatal(err)
		}
	}
	f := &hFailures{}
	l := hNewLedger(f)
	var done atomic.Bool
	trash := make(chan []engine.Record, 16)
	trashParts := make(chan []int32, 16)
	scribbler := func() {
		for {
			select {
			case recs, ok := <-trash:
				if !ok {
					return
				}
				for k := 0; k < 3; k++ {
					for i := range recs {
						recs[i] = engine.Record{Topic: "evil", Partition: -7, Offset: -9, Payload: "garbage"}
					}
					recs = append(recs[:cap(recs)], engine.Record{})[:0]
				}
			case parts := <-trashParts:
				for i := range parts {
					parts[i] = -1
				}
			}
		}
	}
	consumer := func(g, m string, appendPoll bool, seed uint64) func() {
		return func() {
			rng := rand.New(rand.NewPCG(seed, 4))
			var buf []engine.Record
			for !f.stop.Load() && !done.Load() {
				parts, err := b.Join(topic, g, m)
				if err != nil {
					f.fail("Join: %v", err)
					return
				}
				for i := range parts {
					parts[i] = 63
				}
				parts = append(parts, 5, 6, 7)
				trashParts <- parts
				// Others join and leave concurrently, so the share may differ,
				// but it is a round-robin share of [0,P): nothing scribbled.
				again, _ := b.Join(topic, g, m)
				if len(again) == 0 || again[0] < 0 || again[len(again)-1] >= P {
					f.fail("Join twice after scribbling: %v", again)
				}
				for i := 1; i < len(again); i++ {
					if again[i]-again[i-1] != again[1]-again[0] {
						f.fail("Join twice after scribbling: %v", again)
					}
				}
				var recs []engine.Record
				if appendPoll {
					buf, err = b.AppendPoll(buf[:0], topic, g, m, 64)
					recs = buf
				} else {
					recs, err = b.Poll(topic, g, m, 64)
				}
				if err != nil {
					f.fail("Poll: %v", err)
					return
				}
				l.polled(g, recs)
				type key struct {
					p   int32
					off int64
				}
				keys := make([]key, len(recs))
				for i, r := range recs {
					if r.Topic != topic || r.Payload != fmt.Sprintf("%d:%d", r.Partition, r.Offset) {
						f.fail("%s got %+v", g, r)
					}
					keys[i] = key{r.Partition, r.Offset}
					recs[i].Payload, recs[i].Offset, recs[i].Partition = "scribbled", 1<<40, 0
				}
				if !appendPoll {
					trash <- recs
				}
				for _, k := range keys {
					if rng.IntN(4) == 0 {
						b.Retry(topic, g, m, k.p, k.off)
					} else if ok, _ := b.Ack(topic, g, m, k.p, k.off); ok {
						l.acked(g, k.p, k.off)
					}
				}
				if rng.IntN(8) == 0 {
					b.Leave(topic, g, m)
				}
			}
		}
	}
	var consumersDone sync.WaitGroup
	consumersDone.Add(4)
	wrap := func(fn func()) func() { return func() { defer consumersDone.Done(); fn() } }
	runAll(t, hDeadline,
		wrap(consumer("g1", "a", false, 1)), wrap(consumer("g1", "b", true, 2)),
		wrap(consumer("g2", "a", true, 3)), wrap(consumer("g2", "c", false, 4)),
		scribbler,
		hPublisher(b, topic, []int32{0, 1, 2, 3}, l, f, &done),
		func() {
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) && !f.stop.Load() && l.nAck.Load() < 3000 {
				time.Sleep(time.Millisecond)
			}
			done.Store(true)
			consumersDone.Wait()
			close(trash)
		})
	f.report(t)
	if l.nAck.Load() < 50 {
		t.Fatalf("only %d acks before the drain", l.nAck.Load())
	}
	hDrainVerify(t, b, topic, P, map[string][]int64{"g1": make([]int64, P), "g2": make([]int64, P)}, []string{"a", "b", "c"}, l)
}

// TestAppendPollMatchesModelPoll: AppendPoll into a caller's buffer
// that already holds records (with and without spare capacity) must leave
// those records as they are, append exactly what the model's Poll returns
// (maxRecords counting only the new ones), and on an invalid call return
// the buffer unchanged and change nothing. New with a nil Option is an
// invalid argument, not a panic.
func TestAppendPollMatchesModelPoll(t *testing.T) {
	if _, err := hNew(5, nil); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("New(5, nil): %v, want ErrInvalidArgument", err)
	}
	h := hNewPair(t, 4)
	h.do(hC("t", 5))
	h.do(hJ("t", "g", "a"))
	h.do(hJ("t", "g", "b"))
	rng := rand.New(rand.NewPCG(3, 4))
	sentinel := engine.Record{Topic: "keep", Partition: 99, Offset: -5, Payload: "\x00mine"}
	for i := range 400 {
		if rng.IntN(2) == 0 {
			h.do(hPub("t", int32(rng.IntN(5)), fmt.Sprint(i)))
		}
		m := []string{"a", "b", "é", ""}[rng.IntN(4)]
		n := []int32{1, 2, 3, 64, 0, 65}[rng.IntN(6)]
		pre := rng.IntN(3)
		dst := make([]engine.Record, pre, pre+rng.IntN(3))
		for j := range dst {
			dst[j] = sentinel
		}
		before := hProbe(h.b, []string{"t"}, []string{"g"})
		out, err := h.b.AppendPoll(dst, "t", "g", m, n)
		want := hModel(h.m, hQ("t", "g", m, n))
		if len(out) < pre || (pre > 0 && &out[0] != &dst[0] && len(out) <= cap(dst)) {
			t.Fatalf("AppendPoll lost or moved the caller's prefix: len %d, pre %d", len(out), pre)
		}
		for j := 0; j < pre; j++ {
			if !reflect.DeepEqual(out[j], sentinel) {
				t.Fatalf("AppendPoll changed the caller's record %d: %+v", j, out[j])
			}
		}
		got := hFinish(hOut{Recs: slices.Clone(out[pre:])}, err, engine.ErrInvalidArgument)
		if want.Err == "" && len(want.Recs) == 0 && len(got.Recs) == 0 {
			got.Recs = want.Recs // AppendPoll may leave a nil dst nil
		}
		if !hSame(got, want) {
			t.Fatalf("AppendPoll(%d records, %q, %d): %s, model Poll: %s", pre, m, n, hOutString(got), hOutString(want))
		}
		if err != nil {
			if len(out) != pre {
				t.Fatalf("failed AppendPoll returned %d records, want the %d given", len(out), pre)
			}
			if after := hProbe(h.b, []string{"t"}, []string{"g"}); after != before {
				t.Fatalf("failed AppendPoll changed state:\n%s\n%s", before, after)
			}
		}
		for _, r := range want.Recs {
			if rng.IntN(3) > 0 {
				h.do(hA("t", "g", m, r.Partition, r.Offset))
			}
		}
		if i%50 == 0 {
			h.same(nil, []string{"g"})
		}
	}
	h.same(nil, []string{"g"})
}
