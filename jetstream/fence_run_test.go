package jetstream_test

import (
	"context"
	"errors"
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
