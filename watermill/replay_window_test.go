package tributarywm_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// TestPublishKeepsUpWithReplayWindow: on a cluster whose replay window is
// its capacity, a Publisher sends 3,000 messages to a one-partition topic
// while a subscription acks each: Publish waits on the full partition and
// each ack, which makes the oldest kept message evictable (SPEC rule 21)
// without removing it, wakes it. Each Publish is bounded by wait (a no-hang
// bound); the subscription receives every message in order.
func TestPublishKeepsUpWithReplayWindow(t *testing.T) {
	for _, capacity := range []int32{1000, 10} {
		t.Run(fmt.Sprintf("capacity and window %d", capacity), func(t *testing.T) {
			const n = 3000
			c := newCluster(t, capacity, engine.WithReplayWindow(capacity))
			pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 1})
			sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "billing"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			require.NoError(t, sub.SubscribeInitialize("orders"))
			ch, err := sub.Subscribe(ctx, "orders")
			require.NoError(t, err)
			got := make(chan string, n)
			go func() {
				for m := range ch {
					got <- string(m.Payload)
					m.Ack()
				}
			}()
			for i := range n {
				m := message.NewMessage(strconv.Itoa(i), []byte(strconv.Itoa(i)))
				pctx, pcancel := context.WithTimeout(context.Background(), wait)
				m.SetContext(pctx)
				err := pub.Publish("orders", m)
				pcancel()
				require.NoError(t, err, "Publish %d of %d (%d received)", i, n, len(got))
			}
			for i := range n {
				select {
				case p := <-got:
					require.Equal(t, strconv.Itoa(i), p)
				case <-time.After(wait):
					t.Fatalf("message %d not received", i)
				}
			}
		})
	}
}
