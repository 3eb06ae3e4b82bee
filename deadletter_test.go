package tributary_test

// Dead letters: a record that fails MaxAttempts times, or whose payload does
// not decode, goes to the group's dead-letter topic and the group moves on;
// a full dead-letter topic holds the record back instead of losing it; a
// NewConsumer that fails creates no dead-letter topic.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// A full dead-letter topic holds the failed record back: Run waits for room
// without acking it, a cancel leaves it in the group, and once the
// dead-letter topic is consumed the record is dead-lettered and acked.
func TestDeadLetterTopicFull(t *testing.T) {
	c := testCluster(t, 1)
	in := testTopic(t, c, "in", 1, tributary.String())
	dlq := testTopic(t, c, "in-dlq", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, dlq, tributary.Message[string]{Partition: 0, Value: "filler"}) // full, no group on it yet
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "poison"})

	fail := func(context.Context, tributary.Message[string]) error { return errors.New("always fails") }
	opts := []tributary.ConsumerOption{tributary.WithDeadLetter("in-dlq", 1), tributary.WithBackoff(time.Millisecond, time.Millisecond)}

	// First Run: waits for room, then is cancelled: the record stays.
	// Cancelled while it waits: it waits the stop grace more, then returns.
	m1, err := tributary.NewConsumer(in, "g", "m1", append(opts, tributary.WithStopGrace(100*time.Millisecond))...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, m1, fail)
	waitFor(t, "the record in flight", func() bool { return m1.Stats().Handled == 1 })
	stillPending(t, done, 50*time.Millisecond, "Run waiting for dead-letter room")
	g := groupDesc(t, c, "in", "g")
	assert.Equal(t, int64(0), g.Partitions[0].Committed, "not acked while the dead-letter topic is full")
	assert.True(t, g.Partitions[0].InFlight, "still in flight while Run waits")
	assert.Zero(t, m1.Stats().DeadLettered)
	cancel()
	assert.ErrorIs(t, awaitDone(t, done, time.Second, "Run waiting for dead-letter room"), context.Canceled)
	g = groupDesc(t, c, "in", "g")
	assert.Equal(t, int64(0), g.Partitions[0].Committed, "cancelled: not acked")
	assert.Empty(t, g.Members)
	assert.Equal(t, int64(1), logEndOf(t, c, "in-dlq", 0), "nothing dead-lettered")

	// Second Run: the record comes again; consuming the DLQ makes room.
	m2, err := tributary.NewConsumer(in, "g", "m2", opts...)
	require.NoError(t, err)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done2 := runAsync(ctx2, m2, fail)
	waitFor(t, "the record redelivered", func() bool { return m2.Stats().Handled == 1 })
	stillPending(t, done2, 30*time.Millisecond, "Run waiting for dead-letter room")
	reader, err := tributary.NewConsumer(dlq, "readers", "r1")
	require.NoError(t, err)
	f := pollOne(t, reader)
	require.Equal(t, "filler", f.Value)
	require.NoError(t, reader.Ack(f))
	d := pollOne(t, reader)
	assert.Equal(t, "poison", d.Value)
	assert.Equal(t, "2", headerOf(d.Headers, tributary.HeaderDeadLetterAttempts))
	require.NoError(t, reader.Ack(d))
	waitFor(t, "origin committed past the poison record", func() bool {
		return groupDesc(t, c, "in", "g").Partitions[0].Committed == 1
	})
	assert.Equal(t, int64(1), m2.Stats().DeadLettered)
	cancel2()
	assert.ErrorIs(t, awaitDone(t, done2, guard, "Run"), context.Canceled)
	require.NoError(t, reader.Close())
}

// A payload that does not decode goes to the dead-letter topic without
// reaching the handler, and the next record of its partition is handled.
func TestDecodeErrorGoesToDeadLetter(t *testing.T) {
	c := testCluster(t, 10)
	nums, err := tributary.CreateTopic(c, "nums", 1, tributary.Integer[int]())
	require.NoError(t, err)
	p, err := tributary.NewProducer[int](c, "p", tributary.Manual())
	require.NoError(t, err)
	plain, err := tributary.NewConsumer(nums, "plain", "q1") // holds retention for the check below
	require.NoError(t, err)
	publishRaw(t, c, "nums", 0, engine.Message{Payload: "not-a-number"})
	_, err = p.TrySend(nums, tributary.Message[int]{Value: 7})
	require.NoError(t, err)

	cons, err := tributary.NewConsumer(nums, "g", "m1", tributary.WithDeadLetter("nums-dlq", 5))
	require.NoError(t, err)
	got := make(chan tributary.Message[int], 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, cons, func(_ context.Context, m tributary.Message[int]) error {
		got <- m
		return nil
	})
	select {
	case m := <-got:
		assert.Equal(t, 7, m.Value, "the handler never sees the bad payload")
		assert.Equal(t, int64(1), m.Offset)
	case <-time.After(guard):
		t.Fatal("the good record after a bad payload was never handled: the partition is blocked")
	}
	waitFor(t, "both acked", func() bool { return groupDesc(t, c, "nums", "g").Partitions[0].Committed == 2 })
	cancel()
	<-done
	s := cons.Stats()
	assert.Equal(t, int64(1), s.DeadLettered)
	assert.Equal(t, int64(1), s.Handled)

	dlq, err := tributary.OpenTopic(c, "nums-dlq", tributary.Integer[int]())
	require.NoError(t, err)
	r, err := tributary.NewConsumer(dlq, "readers", "r1")
	require.NoError(t, err)
	d := pollOne(t, r)
	assert.Equal(t, "not-a-number", d.Payload)
	assert.ErrorIs(t, d.Err, tributary.ErrDecode, "the dead letter still does not decode")
	assert.Contains(t, headerOf(d.Headers, tributary.HeaderDeadLetterError), tributary.ErrDecode.Error())
	assert.Equal(t, "1", headerOf(d.Headers, tributary.HeaderDeadLetterAttempts))

	// Without a dead-letter topic Poll hands it over with Err set.
	ms, err := plain.TryPoll(2)
	require.NoError(t, err)
	require.Len(t, ms, 1) // one partition: one in flight
	assert.ErrorIs(t, ms[0].Err, tributary.ErrDecode)
	assert.Zero(t, ms[0].Value)
	assert.Equal(t, "not-a-number", ms[0].Payload)
	require.NoError(t, plain.Ack(ms[0]))
	m := pollOne(t, plain)
	assert.NoError(t, m.Err)
	assert.Equal(t, 7, m.Value)
	require.NoError(t, c.Close())
}

// A record whose handler always fails is handled exactly MaxAttempts times,
// then dead-lettered, and its partition moves on to the next record.
func TestMaxAttemptsThenDeadLetterAndMoveOn(t *testing.T) {
	const maxAttempts = 4
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "poison"})
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "fine"})
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithDeadLetter("dlq", maxAttempts), tributary.WithBackoff(time.Millisecond, 2*time.Millisecond))
	require.NoError(t, err)
	var attempts []int32
	var mu sync.Mutex
	fine := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
		if m.Value == "poison" {
			mu.Lock()
			attempts = append(attempts, m.Attempt)
			mu.Unlock()
			return errors.New("poison")
		}
		close(fine)
		return nil
	})
	select {
	case <-fine:
	case <-time.After(guard):
		t.Fatal("the partition never moved on to the next record")
	}
	waitFor(t, "both committed", func() bool { return groupDesc(t, c, "in", "g").Partitions[0].Committed == 2 })
	cancel()
	<-done
	mu.Lock()
	assert.Equal(t, []int32{1, 2, 3, 4}, attempts, "handler called exactly maxAttempts times")
	mu.Unlock()
	assert.Equal(t, int64(1), logEndOf(t, c, "dlq", 0))
}

// A NewConsumer that fails changes nothing: in particular it creates no
// dead-letter topic.
func TestFailedNewConsumerCreatesNoDeadLetterTopic(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 1, tributary.String())
	_, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	topics := c.Topics()
	_, err = tributary.NewConsumer(in, "other", "m1", tributary.WithDeadLetter("fresh-dlq", 3))
	require.ErrorIs(t, err, tributary.ErrExists)
	assert.Equal(t, topics, c.Topics(), "a NewConsumer that returned ErrExists created a topic")
	require.NoError(t, c.Close())
}
