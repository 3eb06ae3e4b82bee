package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
	"github.com/nats-io/nats-server/v2/server"
)

// A typed consumer's Run rides out a server restart: calls made during it
// fail with ErrUnavailable (which wraps tributary.ErrUnavailable), Run
// waits and goes on, and every message sent is handled, in order per
// partition, none lost (a message whose ack was lost may be handled
// twice). Before Run waited on ErrUnavailable it returned the error and
// left its group.
func TestConsumerRunSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a server")
	}
	b, srv := start(t, jetstream.Config{Capacity: 1000, RequestTimeout: time.Second})
	c := must(tributary.NewClusterOn(b)).of(t)
	defer c.Close()
	tp := must(tributary.CreateTopic(c, "orders", 2, tributary.JSON[int]())).of(t)
	p := must(tributary.NewProducer[int](c, "p", tributary.RoundRobin())).of(t)
	cons := must(tributary.NewConsumer(tp, "g", "c1")).of(t)

	const n = 60
	var (
		mu   sync.Mutex
		seen = map[int]int{}
		last = map[int32]int{0: -1, 1: -1} // per partition: the last value handled
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(ctx, func(_ context.Context, m tributary.Message[int]) error {
			mu.Lock()
			defer mu.Unlock()
			if m.Value < last[m.Partition] {
				t.Errorf("partition %d: %d after %d", m.Partition, m.Value, last[m.Partition])
			}
			last[m.Partition] = m.Value
			seen[m.Value]++
			if len(seen) == n {
				cancel()
			}
			return nil
		})
	}()
	send := func(v int) {
		for {
			_, err := p.Send(ctx, tp, tributary.Message[int]{Value: v})
			if err == nil {
				return
			}
			if !errors.Is(err, tributary.ErrUnavailable) || ctx.Err() != nil {
				t.Fatalf("Send(%d): %v", v, err)
			}
			time.Sleep(50 * time.Millisecond) // the producer's caller retries
		}
	}
	for v := range n / 2 {
		send(v)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for v := n / 2; v < n; v++ {
		send(v)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled once all %d were handled", err, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Fatalf("%d of %d messages handled", len(seen), n)
	}
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	t.Logf("%d messages handled across a restart, %d twice", n, dups)
}

// Open on a NATS server that runs without JetStream fails at once with
// ErrUnavailable and says what to check.
func TestOpenServerWithoutJetStream(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("server not ready")
	}
	_, err = jetstream.Open(jetstream.Config{URL: s.ClientURL(), Capacity: 10, RequestTimeout: 2 * time.Second})
	if !errors.Is(err, jetstream.ErrUnavailable) || !strings.Contains(err.Error(), "nats-server -js") {
		t.Fatalf("Open on a server without JetStream: %v; want ErrUnavailable naming nats-server -js", err)
	}
}
