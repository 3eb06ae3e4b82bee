package jetstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// Two consumers (different names) of one group, a session timeout, and
// server restarts: sessions run out during the outage, the consumers
// expire each other and rejoin. Neither is superseded by anybody, so no
// Run may end fenced, and every message is handled.
func TestHJSRestartWithSessions(t *testing.T) {
	b, srv := start(t, jetstream.Config{Capacity: 1000, RequestTimeout: time.Second, SessionTimeout: 150 * time.Millisecond})
	c := must(tributary.NewClusterOn(b)).of(t)
	defer c.Close()
	tp := must(tributary.CreateTopic(c, "orders", 16, tributary.JSON[int]())).of(t)
	p := must(tributary.NewProducer[int](c, "p", tributary.RoundRobin())).of(t)
	const n = 120
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	runErrs := make([]error, 2)
	for i, name := range []string{"w1", "w2"} {
		cons := must(tributary.NewConsumer(tp, "g", name)).of(t)
		wg.Go(func() {
			runErrs[i] = cons.Run(ctx, func(_ context.Context, m tributary.Message[int]) error {
				mu.Lock()
				seen[m.Value]++
				if len(seen) == n {
					cancel()
				}
				mu.Unlock()
				return nil
			})
			if errors.Is(runErrs[i], tributary.ErrFenced) {
				t.Errorf("%s: Run = %v (expired %d times)", name, runErrs[i], cons.Stats().Expired)
			}
		})
	}
	send := func(v int) {
		for ctx.Err() == nil {
			if _, err := p.Send(ctx, tp, tributary.Message[int]{Value: v}); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for v := range n {
		send(v)
		if v%30 == 15 {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Errorf("%d of %d handled; Runs: %v", len(seen), n, runErrs)
	}
}
