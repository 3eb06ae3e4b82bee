package jetstream_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestHostile23SmallCapacityWakeups: capacity 1..3 with every replay
// window, two groups acking at different speeds (g1 two members, g2 one
// slow member), two producers blocked in Publish whose fallback re-check
// is an hour (only wake-ups end a wait: the Acks' cursor writes, since an
// Ack's deferred purge sends no room notice). Every published offset is
// acked exactly once per group, in offset order per partition, and the
// run never stalls.
func TestHostile23SmallCapacityWakeups(t *testing.T) {
	type cfg struct{ capacity, window int32 }
	var cfgs []cfg
	for c := int32(1); c <= 3; c++ {
		for w := int32(0); w <= c; w++ {
			cfgs = append(cfgs, cfg{c, w})
		}
	}
	for _, c := range cfgs {
		t.Run(fmt.Sprintf("cap%d-win%d", c.capacity, c.window), func(t *testing.T) {
			b, _ := start(t, jetstream.Config{Capacity: c.capacity, ReplayWindow: c.window, Storage: jetstream.MemoryStorage, AckTimeout: 5 * time.Second})
			jetstream.SetRoomWait(b, time.Hour)
			const parts, perProducer = 2, 25
			bt := topic(t, b, "t", parts)
			for _, g := range []string{"g1", "g2"} {
				ok, err := b.CreateGroup("t", g, engine.RoundRobin)
				wantBool(t, "CreateGroup", ok, err, true)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			var mu sync.Mutex
			next := map[string]int64{} // "g/p" → next offset to ack
			var errs []string
			bad := func(f string, a ...any) {
				mu.Lock()
				if len(errs) < 10 {
					errs = append(errs, fmt.Sprintf(f, a...))
				}
				mu.Unlock()
			}
			type mem struct {
				g, m string
				slow bool
			}
			mems := []mem{{"g1", "a", false}, {"g1", "b", false}, {"g2", "c", true}}
			handles := map[mem]tributary.BackendMember{}
			for _, x := range mems {
				handles[x] = member(t, bt, x.g, x.m)
				must(handles[x].Join()).of(t)
			}
			var wg, producing sync.WaitGroup
			for pi := range 2 {
				producing.Add(1)
				wg.Go(func() {
					defer producing.Done()
					for i := range perProducer {
						p := int32((pi + i) % parts)
						if _, err := bt.Publish(ctx, nil, p, engine.Message{Payload: fmt.Sprint(pi, i)}); err != nil {
							bad("publish %d/%d: %v", pi, i, err)
							return
						}
					}
				})
			}
			for _, x := range mems {
				m := handles[x]
				wg.Go(func() {
					for ctx.Err() == nil {
						rs, err := m.Poll(ctx, nil, nil, 2)
						if err != nil {
							if ctx.Err() == nil {
								bad("%s/%s poll: %v", x.g, x.m, err)
							}
							return
						}
						for _, r := range rs {
							if x.slow {
								time.Sleep(2 * time.Millisecond)
							}
							ok, err := m.Ack(r.Partition, r.Offset)
							if err != nil || !ok {
								bad("%s/%s Ack(%d,%d) = %v, %v", x.g, x.m, r.Partition, r.Offset, ok, err)
								continue
							}
							k := fmt.Sprintf("%s/%d", x.g, r.Partition)
							mu.Lock()
							if next[k] != r.Offset {
								errs = append(errs, fmt.Sprintf("%s acked %d, want %d", k, r.Offset, next[k]))
							}
							next[k] = r.Offset + 1
							mu.Unlock()
						}
					}
				})
			}
			producing.Wait()
			total := func() int64 {
				mu.Lock()
				defer mu.Unlock()
				var n int64
				for _, v := range next {
					n += v
				}
				return n
			}
			for total() < 2*2*perProducer && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			stalled := ctx.Err() != nil
			cancel()
			wg.Wait()
			for _, e := range errs {
				t.Error(e)
			}
			if stalled {
				d, _ := b.Describe("t")
				t.Fatalf("stalled: acked %v; %+v", next, d)
			}
		})
	}
}
