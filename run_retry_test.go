package tributary_test

// Run's retries: a handler that releases its own message with Retry gets it
// again, and a delayed retry of a failed delivery never cancels a later
// delivery of the same record that the ack timeout brought back.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// A handler that releases its own message with Retry and returns nil: Run's
// ack is a no-op and the record comes again (Attempt 2).
func TestHandlerRetriesItsOwnMessage(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "x"})
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	attempts := make(chan int32, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
		attempts <- m.Attempt
		if m.Attempt == 1 {
			return cons.Retry(m)
		}
		return nil
	})
	assert.Equal(t, int32(1), <-attempts)
	assert.Equal(t, int32(2), <-attempts)
	waitFor(t, "ack", func() bool { return groupDesc(t, c, "in", "g").Partitions[0].Committed == 1 })
	cancel()
	<-done
	assert.Len(t, attempts, 0)
}

// Run's delayed Retry of a failed delivery must not cancel a later delivery
// of the same record: with an ack timeout shorter than the backoff, the
// record comes back by the ack timeout, the handler succeeds, and its ack
// must stick — the handler runs twice, not three times.
func TestStaleRetryTimerDoesNotCancelLaterDelivery(t *testing.T) {
	c := testCluster(t, 10, engine.WithAckTimeout(20*time.Millisecond))
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "x"})
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithBackoff(100*time.Millisecond, 100*time.Millisecond))
	require.NoError(t, err)
	var calls atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, cons, func(context.Context, tributary.Message[string]) error {
		if calls.Add(1) == 1 {
			return errors.New("first attempt fails")
		}
		time.Sleep(150 * time.Millisecond) // still running when the first failure's retry timer fires
		return nil
	})
	waitFor(t, "acked", func() bool { return groupDesc(t, c, "in", "g").Partitions[0].Committed == 1 })
	cancel()
	<-done
	assert.Equal(t, int32(2), calls.Load(), "handler calls: the successful second attempt's ack was cancelled by the first attempt's retry timer")
	assert.Equal(t, int64(1), cons.Stats().Acked)
}
