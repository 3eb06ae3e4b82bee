package jetstream_test

// Fencing of a typed consumer's Run: a consumer superseded by another
// process's NewConsumer of its name ends with ErrFenced, and of two created
// at once exactly one is left running; the survivor handles every record.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestRunOfSupersededConsumerEnds: two processes (two Backends on one
// server) run a consumer of the same name; the second NewConsumer
// supersedes the first, whose Run ends with an error wrapping ErrFenced
// (and ErrClosed), and the second gets every record, none acked twice.
func TestRunOfSupersededConsumerEnds(t *testing.T) {
	b1, srv := start(t, jetstream.Config{Capacity: 100, RequestTimeout: 5 * time.Second})
	b2, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 100, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	c1 := must(tributary.NewClusterOn(b1)).of(t)
	defer c1.Close()
	c2 := must(tributary.NewClusterOn(b2)).of(t)
	defer c2.Close()
	tp1 := must(tributary.CreateTopic(c1, "orders", 2, tributary.JSON[int]())).of(t)
	p := must(tributary.NewProducer[int](c1, "p", tributary.RoundRobin())).of(t)
	first := must(tributary.NewConsumer(tp1, "g", "w")).of(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := make(chan struct{})
	ended := make(chan error, 1)
	var firstAcked []int
	go func() {
		ended <- first.Run(ctx, func(_ context.Context, m tributary.Message[int]) error {
			firstAcked = append(firstAcked, m.Value)
			if m.Value == 3 {
				close(started)
			}
			return nil
		})
	}()
	for v := range 4 {
		must(p.TrySend(tp1, tributary.Message[int]{Value: v})).of(t)
	}
	<-started
	tp2 := must(tributary.OpenTopic(c2, "orders", tributary.JSON[int]())).of(t)
	second := must(tributary.NewConsumer(tp2, "g", "w")).of(t)
	select {
	case err := <-ended:
		if !errors.Is(err, tributary.ErrFenced) || !errors.Is(err, tributary.ErrClosed) {
			t.Fatalf("the superseded consumer's Run = %v, want ErrFenced and ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the superseded consumer's Run did not end within 10 s")
	}
	for v := 4; v < 8; v++ {
		must(p.TrySend(tp1, tributary.Message[int]{Value: v})).of(t)
	}
	got := map[int]bool{}
	err = second.Run(ctx, func(_ context.Context, m tributary.Message[int]) error {
		got[m.Value] = true // 3 may come again: the Rejoin cancelled its unacked delivery
		if got[4] && got[5] && got[6] && got[7] {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("second Run = %v", err)
	}
	for v := 4; v < 8; v++ {
		if !got[v] {
			t.Errorf("value %d not handled by the second consumer: %v", v, got)
		}
	}
	t.Logf("first handled %v before it was superseded; the second handled %v", firstAcked, got)
}

// Two processes create a consumer of one name at the same instant, then
// both Run. Exactly one must be left running; the other's NewConsumer or
// Run ends with ErrFenced; the survivor handles every message.
func TestTypedConcurrentNewConsumer(t *testing.T) {
	for round := 0; round < 6; round++ {
		b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 1000})
		c1 := must(tributary.NewClusterOn(b1)).of(t)
		c2 := must(tributary.NewClusterOn(b2)).of(t)
		tp1 := must(tributary.CreateTopic(c1, "orders", 8, tributary.JSON[int]())).of(t)
		tp2 := must(tributary.OpenTopic(c2, "orders", tributary.JSON[int]())).of(t)
		p := must(tributary.NewProducer[int](c1, "p", tributary.RoundRobin())).of(t)
		for v := range 40 {
			must(p.TrySend(tp1, tributary.Message[int]{Value: v})).of(t)
		}
		var cs [2]*tributary.Consumer[int]
		var errs [2]error
		var wg sync.WaitGroup
		for i, tp := range []*tributary.Topic[int]{tp1, tp2} {
			wg.Go(func() { cs[i], errs[i] = tributary.NewConsumer(tp, "g", "w") })
		}
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var mu sync.Mutex
		seen := map[int]int{}
		runErr := [2]error{}
		for i := range 2 {
			if errs[i] != nil {
				if !errors.Is(errs[i], tributary.ErrFenced) {
					t.Fatalf("round %d NewConsumer %d: %v", round, i, errs[i])
				}
				continue
			}
			wg.Go(func() {
				runErr[i] = cs[i].Run(ctx, func(_ context.Context, m tributary.Message[int]) error {
					mu.Lock()
					seen[m.Value]++
					if len(seen) == 40 {
						cancel()
					}
					mu.Unlock()
					return nil
				})
			})
		}
		wg.Wait()
		cancel()
		fenced, canceled := 0, 0
		for i := range 2 {
			switch err := runErr[i]; {
			case errs[i] != nil || errors.Is(err, tributary.ErrFenced):
				fenced++
			case errors.Is(err, context.Canceled):
				canceled++
			default:
				t.Errorf("round %d consumer %d: Run = %v", round, i, err)
			}
		}
		dups := 0
		for _, n := range seen {
			dups += n - 1
		}
		if fenced != 1 || canceled != 1 || len(seen) != 40 {
			t.Errorf("round %d: fenced %d, cancelled %d, handled %d of 40 (%d twice); NewConsumer errs %v, Run %v", round, fenced, canceled, len(seen), dups, errs, runErr)
		} else if dups > 0 {
			t.Logf("round %d: %d handled twice", round, dups)
		}
		c1.Close()
		c2.Close()
	}
}
