package jetstream_test

// Consumer.Run over a real TCP connection: a handler's result is applied
// when Run's context ends while it runs.

import (
	"context"
	"errors"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// Consumer.Run over a real TCP connection (the server's client URL, not
// the in-process connection): a handler that ends Run's context and then
// returns has its result applied every time, as on the in-memory backend:
// nil acks the record (the committed offset moves past it), an error
// dead-letters it. Over TCP the Ack's replies arrive later than in-process,
// so a Run whose outcome depended on whether it saw the context end or the
// result first would fail here.
func TestRunSettlesHandlerAfterCancelOverTCP(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	iterations := 30
	if testing.Short() {
		iterations = 10
	}
	tests := []struct {
		name  string
		h     func(ctx context.Context, cancel context.CancelFunc) error
		dlq   bool
		wdead bool
	}{
		{"cancel, return nil", func(_ context.Context, cancel context.CancelFunc) error {
			cancel()
			return nil
		}, false, false},
		{"cancel, finish after ctx ended, return nil", func(ctx context.Context, cancel context.CancelFunc) error {
			cancel()
			<-ctx.Done()
			time.Sleep(time.Millisecond)
			return nil
		}, false, false},
		{"cancel, return an error, dead letter", func(ctx context.Context, cancel context.CancelFunc) error {
			cancel()
			<-ctx.Done()
			return errors.New("refused")
		}, true, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := jetstream.Open(jetstream.Config{URL: srv.ClientURL(), Prefix: "R" + string(rune('a'+i)), Capacity: 100, Storage: jetstream.MemoryStorage})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			c := must(tributary.NewClusterOn(b)).of(t)
			defer c.Close()
			tp := must(tributary.CreateTopic(c, "orders", 1, tributary.JSON[int]())).of(t)
			pr := must(tributary.NewProducer[int](c, "p", tributary.Manual())).of(t)
			var opts []tributary.ConsumerOption
			if tt.dlq {
				opts = append(opts, tributary.WithDeadLetter("dlq", 1))
			}
			for n := range iterations {
				if _, err := pr.TrySend(tp, tributary.Message[int]{Value: n}); err != nil {
					t.Fatal(err)
				}
				cons := must(tributary.NewConsumer(tp, "g", "c1", opts...)).of(t)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := cons.Run(ctx, func(hctx context.Context, _ tributary.Message[int]) error { return tt.h(hctx, cancel) })
				cancel()
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("iteration %d: Run = %v, want context.Canceled", n, err)
				}
				d := must(b.Describe("orders")).of(t)
				if p := d.Groups[0].Partitions[0]; p.Committed != int64(n+1) || p.InFlight {
					t.Fatalf("iteration %d: partition %+v, want committed %d, nothing in flight", n, p, n+1)
				}
			}
			if tt.wdead {
				d := must(b.Describe("dlq")).of(t)
				if end := d.Partitions[0].LogEndOffset; end != int64(iterations) {
					t.Fatalf("dead-letter topic holds %d records, want %d", end, iterations)
				}
			}
		})
	}
}
