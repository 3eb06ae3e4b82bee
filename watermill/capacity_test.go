package tributarywm_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// TestCapacityBeyondOneThousand: on a cluster of capacity 5,000 (beyond
// engine rule 1's 1,000; the typed library takes up to 16,777,216) a
// Publisher stores 3,000 messages before any subscription exists, none
// refused, and a subscription that starts afterwards receives all of them
// from the first, in order.
func TestCapacityBeyondOneThousand(t *testing.T) {
	const n = 3000
	c := newCluster(t, 5000)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 1})
	for i := range n {
		m := message.NewMessage(strconv.Itoa(i), []byte(strconv.Itoa(i)))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m.SetContext(ctx) // a full partition would make Publish wait, and fail on this context
		err := pub.Publish("orders", m)
		cancel()
		require.NoError(t, err, "Publish %d", i)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "late"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := sub.Subscribe(ctx, "orders")
	require.NoError(t, err)
	for i := range n {
		m := receive(t, ch)
		require.Equal(t, strconv.Itoa(i), string(m.Payload))
		m.Ack()
	}
}
