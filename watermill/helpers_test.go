package tributarywm_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// The helpers of this package's tests.

const wait = 10 * time.Second // the longest any test waits for an event that must come

// newCluster returns a cluster of capacity records per partition, closed at
// the test's end.
func newCluster(t *testing.T, capacity int32, opts ...engine.Option) *tributary.Cluster {
	t.Helper()
	c, err := tributary.NewCluster(capacity, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func newPublisher(t *testing.T, c *tributary.Cluster, cfg tributarywm.PublisherConfig) *tributarywm.Publisher {
	t.Helper()
	p, err := tributarywm.NewPublisher(c, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

func newSubscriber(t *testing.T, c *tributary.Cluster, cfg tributarywm.SubscriberConfig) *tributarywm.Subscriber {
	t.Helper()
	s, err := tributarywm.NewSubscriber(c, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// receive returns the next message of ch, failing the test after wait.
func receive(t *testing.T, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		require.True(t, ok, "channel closed")
		return m
	case <-time.After(wait):
		t.Fatal("no message")
		return nil
	}
}

// quiet fails the test if ch delivers a message within d.
func quiet(t *testing.T, ch <-chan *message.Message, d time.Duration) {
	t.Helper()
	select {
	case m, ok := <-ch:
		if ok {
			t.Fatalf("unexpected message %s (payload %q)", m.UUID, m.Payload)
		}
		t.Fatal("channel closed")
	case <-time.After(d):
	}
}

func closedWithin(t *testing.T, ch <-chan *message.Message) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel not closed")
		}
	}
}
