package tributary_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// TestSendKeepsUpWithReplayWindow: one partition, a consumer running Run
// that acks every message, and a producer whose Send waits (a deadline of
// guard per message, a no-hang bound) on the full partition: every one of
// 3,000 messages is sent and consumed in order whatever the replay window,
// a window equal to the capacity included. There the partition is full of
// records the window keeps, and each ack makes the oldest of them
// evictable (SPEC rule 21) without removing anything: the waiting Send
// must wake on it.
func TestSendKeepsUpWithReplayWindow(t *testing.T) {
	for _, tt := range []struct{ capacity, window int32 }{{1000, 1000}, {10, 10}, {1000, 999}, {1, 1}, {10, 0}} {
		t.Run(fmt.Sprintf("capacity %d window %d", tt.capacity, tt.window), func(t *testing.T) {
			const n = 3000
			c := testCluster(t, tt.capacity, engine.WithReplayWindow(tt.window))
			tp := testTopic[purchase](t, c, "orders", 1, nil)
			pr := testProducer[purchase](t, c, "p", tributary.Manual())
			cons := testConsumer(t, tp, "billing", "c1")
			ctx, cancel := context.WithCancel(context.Background())
			got := make(chan int64, n)
			done := make(chan error, 1)
			go func() {
				done <- cons.Run(ctx, func(_ context.Context, m tributary.Message[purchase]) error {
					got <- m.Offset
					return nil
				})
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil && err != context.Canceled {
					t.Errorf("Run: %v", err)
				}
			}()
			for i := range n {
				sctx, scancel := context.WithTimeout(context.Background(), guard)
				m, err := pr.Send(sctx, tp, tributary.Message[purchase]{Value: purchase{ID: i}})
				scancel()
				if err != nil {
					t.Fatalf("Send %d of %d: %v (the handler has seen %d)", i, n, err, len(got))
				}
				if m.Offset != int64(i) {
					t.Fatalf("Send %d got offset %d", i, m.Offset)
				}
			}
			for i := range int64(n) {
				select {
				case off := <-got:
					if off != i {
						t.Fatalf("consumed offset %d, want %d", off, i)
					}
				case <-time.After(guard):
					t.Fatalf("offset %d not consumed within %v", i, guard)
				}
			}
		})
	}
}
