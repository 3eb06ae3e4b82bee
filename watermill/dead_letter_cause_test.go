package tributarywm_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// TestDeadLetterCause: a router handler's error does not reach the
// adapter (Watermill's Nack carries none), so the group's dead letter
// says only that the handler nacked it, as docs/watermill.md states;
// Watermill's PoisonQueue middleware, with Retry inside it, keeps the
// handler's error in the poisoned message's metadata, and the original is
// acked before the group's dead-letter policy is reached.
func TestDeadLetterCause(t *testing.T) {
	errBad := errors.New("order 7: total is negative")
	run := func(t *testing.T, c *tributary.Cluster, mws ...message.HandlerMiddleware) *atomic.Int32 {
		t.Helper()
		pub := newPublisher(t, c, tributarywm.PublisherConfig{})
		require.NoError(t, pub.Publish("orders", message.NewMessage("u7", []byte("order 7"))))
		sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "billing", NackResendSleep: tributarywm.NoSleep,
			DeadLetterTopic: "orders_dlq", MaxAttempts: 3})
		router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
		require.NoError(t, err)
		router.AddMiddleware(mws...)
		var calls atomic.Int32
		router.AddConsumerHandler("bill", "orders", sub, func(*message.Message) error {
			calls.Add(1)
			return errBad
		})
		done := make(chan error, 1)
		go func() { done <- router.Run(context.Background()) }()
		<-router.Running()
		t.Cleanup(func() { router.Close(); <-done })
		return &calls
	}

	t.Run("group dead letter", func(t *testing.T) {
		c := newCluster(t, 10)
		calls := run(t, c)
		dlq := waitForTopic(t, c, "orders_dlq")
		m := waitForMessage(t, dlq)
		got := map[string]string{}
		for _, h := range m.Headers {
			got[h.Key] = h.Value
		}
		require.Equal(t, "3", got[tributary.HeaderDeadLetterAttempts])
		require.Equal(t, "u7", got[tributarywm.HeaderUUID], "the dead letter keeps the UUID the router's log names")
		require.Equal(t, int32(3), calls.Load())
		cause := got[tributary.HeaderDeadLetterError]
		require.NotContains(t, cause, errBad.Error())
		doc, err := os.ReadFile("../docs/watermill.md")
		require.NoError(t, err)
		quoted := "`" + tributary.HeaderDeadLetterError + ": " + cause + "`"
		require.True(t, strings.Contains(strings.Join(strings.Fields(string(doc)), " "), quoted),
			"docs/watermill.md does not quote the dead letter's error header %s", quoted)
	})

	t.Run("PoisonQueue", func(t *testing.T) {
		c := newCluster(t, 10)
		wmPub := newPublisher(t, c, tributarywm.PublisherConfig{})
		poison, err := middleware.PoisonQueue(wmPub, "orders_poison")
		require.NoError(t, err)
		retry := middleware.Retry{MaxRetries: 1}
		calls := run(t, c, poison, retry.Middleware)
		m := waitForMessage(t, waitForTopic(t, c, "orders_poison"))
		got := map[string]string{}
		for _, h := range m.Headers {
			got[h.Key] = h.Value
		}
		require.Equal(t, errBad.Error(), got[middleware.ReasonForPoisonedKey])
		require.Equal(t, "orders", got[middleware.PoisonedTopicKey])
		require.Equal(t, "bill", got[middleware.PoisonedHandlerKey])
		require.Equal(t, int32(2), calls.Load(), "the attempt and Retry's one retry")
		eventually(t, "billing commits the poisoned message", func() bool {
			d, err := c.Describe("orders")
			return err == nil && len(d.Groups) == 1 && d.Groups[0].Partitions[0].Committed == 1
		})
		s, err := waitForTopic(t, c, "orders_dlq").Snapshot()
		require.NoError(t, err)
		require.Empty(t, s.Messages[0], "the group's dead-letter topic holds nothing")
	})
}

// waitForTopic returns topic name of c once it exists.
func waitForTopic(t *testing.T, c *tributary.Cluster, name string) *tributary.Topic[[]byte] {
	t.Helper()
	var topic *tributary.Topic[[]byte]
	eventually(t, "topic "+name, func() bool {
		var err error
		topic, err = tributary.OpenTopic(c, name, tributary.Bytes())
		return err == nil
	})
	return topic
}

// waitForMessage returns the first message of topic's partition 0 once it
// has one.
func waitForMessage(t *testing.T, topic *tributary.Topic[[]byte]) tributary.Message[[]byte] {
	t.Helper()
	var m tributary.Message[[]byte]
	eventually(t, "a message on "+topic.Name(), func() bool {
		s, err := topic.Snapshot()
		if err != nil || len(s.Messages[0]) == 0 {
			return false
		}
		m = s.Messages[0][0]
		return true
	})
	return m
}
