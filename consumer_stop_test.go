package tributary_test

// How Run stops: it settles a handler that returns after the cancel, rides
// out an Ack outage after it, waits for a handler within the stop grace,
// and WithStopGrace's invalid values.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
)

// runOnce runs a new consumer c1 of group g on tp with h until Run returns,
// and returns Run's error.
func runOnce(t *testing.T, tp *tributary.Topic[purchase], h func(ctx context.Context, cancel context.CancelFunc, m tributary.Message[purchase]) error, opts ...tributary.ConsumerOption) error {
	t.Helper()
	cons := testConsumer(t, tp, "g", "c1", opts...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := goResult(func() (struct{}, error) {
		return struct{}{}, cons.Run(ctx, func(hctx context.Context, m tributary.Message[purchase]) error {
			return h(hctx, cancel, m)
		})
	})
	return awaitResult(t, "Run", done).err
}

// A handler that ends Run's context and then returns has its result
// applied, every time: nil acks (the committed offset moves past the
// record), an error dead-letters or retries as at any other time. Many
// iterations, since Run may see the context end or the result first and
// each order must settle the record the same way.
func TestRunSettlesHandlerAfterCancel(t *testing.T) {
	const iterations = 200
	tests := []struct {
		name       string
		h          func(ctx context.Context, cancel context.CancelFunc, m tributary.Message[purchase]) error
		opts       []tributary.ConsumerOption
		wcommitted bool // the record is acked
		wdead      bool // and was dead-lettered
	}{
		{"cancel, return nil", func(_ context.Context, cancel context.CancelFunc, _ tributary.Message[purchase]) error {
			cancel()
			return nil
		}, nil, true, false},
		{"cancel, finish after ctx ended, return nil", func(ctx context.Context, cancel context.CancelFunc, _ tributary.Message[purchase]) error {
			cancel()
			<-ctx.Done()
			time.Sleep(time.Millisecond) // the work under way completes
			return nil
		}, nil, true, false},
		{"cancel, return an error, dead letter after 1 attempt", func(ctx context.Context, cancel context.CancelFunc, _ tributary.Message[purchase]) error {
			cancel()
			<-ctx.Done()
			time.Sleep(time.Millisecond)
			return errors.New("refused")
		}, []tributary.ConsumerOption{tributary.WithDeadLetter("dlq", 1)}, true, true},
		{"cancel, return an error, retried", func(ctx context.Context, cancel context.CancelFunc, _ tributary.Message[purchase]) error {
			cancel()
			<-ctx.Done()
			return errors.New("refused")
		}, []tributary.ConsumerOption{tributary.WithBackoff(time.Minute, time.Minute)}, false, false}, // the leave releases it, not the backoff
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCluster(t, 1000)
			tp := testTopic[purchase](t, c, "orders", 1, nil)
			pr := testProducer[purchase](t, c, "p", tributary.Manual())
			want := int64(0)
			for i := range iterations {
				sendOK(t, pr, tp, tributary.Message[purchase]{Value: purchase{ID: i}})
				checkErr(t, "Run", runOnce(t, tp, tt.h, tt.opts...), context.Canceled)
				if tt.wcommitted {
					want++
				}
				g := groupDesc(t, c, "orders", "g")
				if p := g.Partitions[0]; p.Committed != want || p.InFlight {
					t.Fatalf("iteration %d: partition %+v, want committed %d, nothing in flight", i, p, want)
				}
			}
			if tt.wdead {
				if end := logEndOf(t, c, "dlq", 0); end != iterations {
					t.Fatalf("dead-letter topic holds %d records, want %d", end, iterations)
				}
			}
			if !tt.wcommitted {
				if p := groupDesc(t, c, "orders", "g").Partitions[0]; p.Attempts != iterations {
					t.Fatalf("partition %+v: want %d attempts (each Run's failure counted)", p, iterations)
				}
			}
		})
	}
}

// The Ack of a handler that returned nil as Run's context ended is not
// cancelled with it: it rides out an outage of the backend within the
// grace.
func TestRunAckAfterCancelRidesOutAnOutage(t *testing.T) {
	inner := testCluster(t, 100)
	b := &outageBackend{Backend: inner.Backend()}
	c, err := tributary.NewClusterOn(b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[purchase]{})
	err = runOnce(t, tp, func(_ context.Context, cancel context.CancelFunc, _ tributary.Message[purchase]) error {
		cancel()
		b.ackDown.Store(true)
		time.AfterFunc(100*time.Millisecond, func() { b.ackDown.Store(false) })
		return nil
	})
	checkErr(t, "Run", err, context.Canceled)
	if b.acks.Load() == 0 {
		t.Fatal("no ack failed: the outage was not exercised")
	}
	if p := groupDesc(t, c, "orders", "g").Partitions[0]; p.Committed != 1 {
		t.Fatalf("partition %+v: want the record acked through the outage", p)
	}
}

// A handler that ignores its context but returns within the grace is
// waited for, with the default grace too: Run has not returned while it
// runs, and its record is acked.
func TestRunWaitsForHandlerWithinGrace(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []tributary.ConsumerOption
	}{
		{"default grace", nil},
		{"one minute", []tributary.ConsumerOption{tributary.WithStopGrace(time.Minute)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := testCluster(t, 10)
			tp := testTopic[purchase](t, c, "orders", 1, nil)
			pr := testProducer[purchase](t, c, "p", tributary.Manual())
			cons := testConsumer(t, tp, "g", "c1", tt.opts...)
			sendOK(t, pr, tp, tributary.Message[purchase]{})
			entered, release := make(chan struct{}), make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := goResult(func() (struct{}, error) {
				return struct{}{}, cons.Run(ctx, func(context.Context, tributary.Message[purchase]) error {
					close(entered)
					<-release // ignores ctx
					return nil
				})
			})
			<-entered
			cancel()
			select {
			case r := <-done: // shows the bug within 50 ms; a correct Run never gets here
				close(release)
				t.Fatalf("Run returned %v while its handler was running within the grace", r.err)
			case <-time.After(50 * time.Millisecond):
			}
			close(release)
			checkErr(t, "Run", awaitResult(t, "Run after its handler returned", done).err, context.Canceled)
			if p := groupDesc(t, c, "orders", "g").Partitions[0]; p.Committed != 1 {
				t.Fatalf("partition %+v: want the record acked", p)
			}
		})
	}
}

// A stop grace must not be negative; a refused NewConsumer joins nothing.
func TestWithStopGraceInvalid(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	_, err := tributary.NewConsumer(tp, "g", "c1", tributary.WithStopGrace(-time.Nanosecond))
	checkErr(t, "NewConsumer(WithStopGrace(-1ns))", err, tributary.ErrInvalidArgument)
	if d := describeTopic(t, c, "orders"); len(d.Groups) != 0 {
		t.Fatalf("groups %+v after a refused NewConsumer", d.Groups)
	}
	if _, err := tributary.NewConsumer(tp, "g", "c1", tributary.WithStopGrace(0)); err != nil {
		t.Fatalf("NewConsumer(WithStopGrace(0)): %v", err)
	}
}
