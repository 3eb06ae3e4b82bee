package tributary_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// Hostile tests: handlers that panic, block, publish into their own full
// topic, close their own consumer or call the cluster; full dead-letter
// topics; payloads that do not decode; races; nil and out-of-range inputs.
// Each test must finish quickly and leave no goroutine behind.

const hxGuard = 5 * time.Second // generous bound on anything that must happen "promptly"

// hxCluster returns a new cluster; the test closes it.
func hxCluster(t *testing.T, capacity int32, opts ...engine.Option) *tributary.Cluster {
	t.Helper()
	c, err := tributary.NewCluster(capacity, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// hxTopic creates a String topic.
func hxTopic(t *testing.T, c *tributary.Cluster, name string, partitions int32) *tributary.Topic[string] {
	t.Helper()
	tp, err := tributary.CreateTopic(c, name, partitions, tributary.String())
	require.NoError(t, err)
	return tp
}

// hxProducer returns a Manual producer of strings.
func hxProducer(t *testing.T, c *tributary.Cluster, name string) *tributary.Producer[string] {
	t.Helper()
	p, err := tributary.NewProducer[string](c, name, tributary.Manual())
	require.NoError(t, err)
	return p
}

// hxSend publishes v to partition of tp at once, failing the test when the
// partition is full.
func hxSend(t *testing.T, p *tributary.Producer[string], tp *tributary.Topic[string], partition int32, v string) tributary.Message[string] {
	t.Helper()
	m, err := p.TrySend(tp, tributary.Message[string]{Partition: partition, Value: v})
	require.NoError(t, err)
	return m
}

// hxRun runs c.Run on a goroutine; the channel gets its result.
func hxRun[T any](ctx context.Context, c *tributary.Consumer[T], h tributary.Handler[T]) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, h) }()
	return done
}

// hxDone waits up to guard for a result on done.
func hxDone(t *testing.T, done <-chan error, guard time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(guard):
		t.Fatalf("%s did not return within %v", what, guard)
		return nil
	}
}

// hxNotDone checks that nothing arrives on done for d.
func hxNotDone[E any](t *testing.T, done <-chan E, d time.Duration, what string) {
	t.Helper()
	select {
	case v := <-done:
		t.Fatalf("%s returned (%v), want still blocked after %v", what, v, d)
	case <-time.After(d):
	}
}

// hxEventually waits up to hxGuard for cond.
func hxEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hxGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// hxGroup returns group's description on topic.
func hxGroup(t *testing.T, c *tributary.Cluster, topic, group string) engine.GroupDescription {
	t.Helper()
	d, err := c.Describe(topic)
	require.NoError(t, err)
	for _, g := range d.Groups {
		if g.Group == group {
			return g
		}
	}
	t.Fatalf("topic %q has no group %q: %+v", topic, group, d.Groups)
	return engine.GroupDescription{}
}

// hxLogEnd returns partition's log end offset.
func hxLogEnd(t *testing.T, c *tributary.Cluster, topic string, partition int32) int64 {
	t.Helper()
	d, err := c.Describe(topic)
	require.NoError(t, err)
	return d.Partitions[partition].LogEndOffset
}

// hxHeader returns the value of header key.
func hxHeader(h []tributary.Header, key string) string {
	for _, x := range h {
		if x.Key == key {
			return x.Value
		}
	}
	return ""
}

// hxPollOne polls c for one message, within hxGuard.
func hxPollOne[T any](t *testing.T, c *tributary.Consumer[T]) tributary.Message[T] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hxGuard)
	defer cancel()
	ms, err := c.Poll(ctx, 1)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	return ms[0]
}

// hxNoPanic runs f and fails the test, instead of crashing, if f panics.
func hxNoPanic(t *testing.T, name string, f func() error) error {
	t.Helper()
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("%s panicked: %v", name, p)
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		err = f()
	}()
	return err
}

// ---- 1. A handler that panics ----

func TestHostileHandlerPanicIsRetriedThenDeadLettered(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "bad")
	hxSend(t, p, in, 0, "good")
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithDeadLetter("in-dlq", 3), tributary.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)

	var badCalls atomic.Int32
	good := make(chan tributary.Message[string], 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := hxRun(ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
		if m.Value == "bad" {
			badCalls.Add(1)
			panic("kaboom " + strconv.Itoa(int(m.Attempt)))
		}
		good <- m
		return nil
	})
	select {
	case m := <-good:
		assert.Equal(t, int64(1), m.Offset)
	case err := <-done:
		t.Fatalf("Run returned %v before handling the good record", err)
	case <-time.After(hxGuard):
		t.Fatal("the good record after a panicking one was never handled")
	}
	cancel()
	assert.ErrorIs(t, hxDone(t, done, hxGuard, "Run"), context.Canceled)

	assert.Equal(t, int32(3), badCalls.Load(), "handler calls for the panicking record")
	s := cons.Stats()
	assert.Equal(t, int64(2), s.Retried)
	assert.Equal(t, int64(1), s.DeadLettered)
	assert.Equal(t, int64(1), s.Acked)

	dlq, err := tributary.OpenTopic(c, "in-dlq", tributary.String())
	require.NoError(t, err)
	dc, err := tributary.NewConsumer(dlq, "dlq-readers", "r1")
	require.NoError(t, err)
	dm := hxPollOne(t, dc)
	assert.Equal(t, "bad", dm.Value)
	assert.Contains(t, hxHeader(dm.Headers, tributary.HeaderDeadLetterError), "kaboom 3")
	assert.Equal(t, "3", hxHeader(dm.Headers, tributary.HeaderDeadLetterAttempts))
	assert.Equal(t, "in", hxHeader(dm.Headers, tributary.HeaderDeadLetterTopic))
	assert.Equal(t, "0", hxHeader(dm.Headers, tributary.HeaderDeadLetterOffset))
	require.NoError(t, dc.Close())
}

// A panic's dead letter must still fit a cluster with a message size limit
// that the original record fits with room to spare: the error header must
// not carry an unbounded stack trace.
func TestHostileHandlerPanicDeadLetterFitsMaxMessageBytes(t *testing.T) {
	c := hxCluster(t, 10, engine.WithMaxMessageBytes(1024))
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "bad")
	hxSend(t, p, in, 0, "good")
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithDeadLetter("in-dlq", 2), tributary.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	good := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := hxRun(ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
		if m.Value == "bad" {
			panic("kaboom")
		}
		good <- struct{}{}
		return nil
	})
	returned := false
	select {
	case <-good:
	case err := <-done:
		returned = true
		t.Errorf("Run returned %v: the panic's dead letter did not fit a 1024-byte limit", err)
	case <-time.After(hxGuard):
		t.Error("the good record was never handled")
	}
	cancel()
	if !returned {
		<-done
	}
}

// ---- 2. A handler that blocks for ever, ignoring ctx ----

func TestHostileHandlerIgnoringCtxDoesNotBlockCancel(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "x")
	// It blocks for ever: Run abandons it after the stop grace.
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithStopGrace(100*time.Millisecond))
	require.NoError(t, err)

	entered := make(chan struct{})
	release := make(chan struct{})
	handlerDone := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := hxRun(ctx, cons, func(context.Context, tributary.Message[string]) error {
		defer close(handlerDone)
		close(entered)
		<-release // ignores ctx
		return nil
	})
	<-entered
	start := time.Now()
	cancel()
	err = hxDone(t, done, time.Second, "Run with a handler ignoring ctx")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), time.Second)

	g := hxGroup(t, c, "in", "g")
	assert.Empty(t, g.Members, "the consumer left its group")
	assert.Equal(t, int64(0), g.Partitions[0].Committed, "the abandoned record was not acked")
	assert.False(t, g.Partitions[0].InFlight, "leaving released the delivery")
	assert.Empty(t, c.Consumers())

	close(release)
	<-handlerDone
	// The abandoned handler's late nil must not ack the record.
	time.Sleep(10 * time.Millisecond)
	assert.Equal(t, int64(0), hxGroup(t, c, "in", "g").Partitions[0].Committed)
}

// ---- 3. A handler that publishes into its own full topic ----

func TestHostileHandlerSendsIntoOwnFullTopic(t *testing.T) {
	c := hxCluster(t, 2)
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "a")
	hxSend(t, p, in, 0, "b") // full
	ca, err := tributary.NewConsumer(in, "A", "a1")
	require.NoError(t, err)
	cb, err := tributary.NewConsumer(in, "B", "b1")
	require.NoError(t, err)

	trySendErr := make(chan error, 1)
	sending := make(chan struct{})
	sendErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := hxRun(ctx, ca, func(hctx context.Context, m tributary.Message[string]) error {
		start := time.Now()
		_, err := p.TrySend(in, tributary.Message[string]{Value: "from-handler"})
		if time.Since(start) > 100*time.Millisecond {
			err = fmt.Errorf("TrySend took %v: %w", time.Since(start), err)
		}
		trySendErr <- err
		close(sending)
		_, err = p.Send(hctx, in, tributary.Message[string]{Value: "from-handler"})
		sendErr <- err
		return err
	})
	require.ErrorIs(t, hxDone(t, trySendErr, hxGuard, "handler's TrySend"), tributary.ErrPartitionFull)
	<-sending

	// Group B keeps consuming while A's handler waits for room.
	for i, want := range []string{"a", "b"} {
		m := hxPollOne(t, cb)
		assert.Equal(t, want, m.Value, "B's record %d", i)
		require.NoError(t, cb.Ack(m))
	}
	_, err = c.Describe("in") // the cluster is not locked up
	require.NoError(t, err)
	hxNotDone(t, sendErr, 50*time.Millisecond, "the handler's Send into a full partition")

	start := time.Now()
	cancel()
	assert.ErrorIs(t, hxDone(t, done, time.Second, "Run"), context.Canceled)
	assert.Less(t, time.Since(start), time.Second)
	assert.ErrorIs(t, hxDone(t, sendErr, hxGuard, "the handler's Send"), context.Canceled)
	assert.Equal(t, int64(2), hxLogEnd(t, c, "in", 0), "nothing published by the cancelled Send")
	require.NoError(t, cb.Close())
}

// ---- 4. A handler that closes its own consumer ----

func TestHostileHandlerClosesOwnConsumerRecordRedelivered(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "x")
	hxSend(t, p, in, 0, "y")
	m1, err := tributary.NewConsumer(in, "g", "m1") // owns partition 0 (first in byte order)
	require.NoError(t, err)
	m2, err := tributary.NewConsumer(in, "g", "m2")
	require.NoError(t, err)
	require.Equal(t, []int32{0}, m1.Assignment())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var m1Seen []string
	done1 := hxRun(ctx, m1, func(_ context.Context, m tributary.Message[string]) error {
		m1Seen = append(m1Seen, m.Value)
		return m1.Close() // leaves mid-delivery; then "succeeds"
	})
	assert.NoError(t, hxDone(t, done1, time.Second, "Run of a consumer its handler closed"))
	assert.Equal(t, []string{"x"}, m1Seen)
	assert.Equal(t, int64(0), m1.Stats().Acked)

	got := make(chan tributary.Message[string], 2)
	done2 := hxRun(ctx, m2, func(_ context.Context, m tributary.Message[string]) error {
		got <- m
		return nil
	})
	first := <-got
	assert.Equal(t, "x", first.Value, "the in-flight record is redelivered to the new owner")
	assert.Equal(t, int32(2), first.Attempt)
	assert.Equal(t, "y", (<-got).Value)
	hxEventually(t, "m2 acks both", func() bool { return hxGroup(t, c, "in", "g").Partitions[0].Committed == 2 })
	require.NoError(t, m2.Close())
	assert.NoError(t, hxDone(t, done2, hxGuard, "Run"))
}

// ---- 5. A handler calling anything on the cluster ----

func TestHostileHandlerCallsTheCluster(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 2)
	p := hxProducer(t, c, "p")
	const n = 6
	for i := range n {
		hxSend(t, p, in, int32(i%2), "v"+strconv.Itoa(i))
	}
	// Batch 1: a rebalance made by the handler cancels the deliveries of the
	// rest of a batch, which would make its own Ack of them fail.
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithBatch(1), tributary.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	other, err := tributary.NewConsumer(in, "g", "zz-other")
	require.NoError(t, err)

	var calls atomic.Int32
	handled := make(chan string, 3*n)
	ctx, cancel := context.WithCancel(context.Background())
	done := hxRun(ctx, cons, func(hctx context.Context, m tributary.Message[string]) error {
		i := calls.Add(1)
		var errs []error
		check := func(what string, err error) {
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
			}
		}
		check("Ack own", cons.Ack(m))
		if err := cons.Retry(m); !errors.Is(err, tributary.ErrNotInFlight) {
			check("Retry after Ack", fmt.Errorf("got %v, want ErrNotInFlight", err))
		}
		check("Seek own group", cons.Seek(m.Partition, m.Offset+1))
		_, err := tributary.CreateTopic(c, "side-"+strconv.Itoa(int(i)), 1, tributary.String())
		check("CreateTopic", err)
		_, err = c.Describe("in")
		check("Describe", err)
		if i == 1 {
			_, err = c.AddPartitions("in", 1)
			check("AddPartitions", err)
		}
		_, err = c.SetAssignor("in", "g", []engine.Assignor{engine.RoundRobin, engine.Range, engine.Sticky}[i%3])
		check("SetAssignor", err)
		tmp, err := tributary.NewConsumer(in, "g", "tmp"+strconv.Itoa(int(i)))
		check("NewConsumer", err)
		if tmp != nil {
			check("Close other", tmp.Close())
		}
		if i == 2 {
			check("CloseConsumer", c.CloseConsumer("zz-other"))
		}
		if m.Value != "side" {
			_, err = p.TrySend(in, tributary.Message[string]{Partition: 0, Value: "side"})
			if !errors.Is(err, tributary.ErrPartitionFull) {
				check("TrySend", err)
			}
		}
		_, err = tributary.OpenTopic(c, "in", tributary.String())
		check("OpenTopic", err)
		handled <- m.Value
		// After the test cancels Run, Run closes the consumer without waiting
		// for a handler that ignores hctx: its calls may then find it closed.
		// The close comes after the cancel, so checking hctx afterwards
		// excuses exactly those calls.
		if hctx.Err() != nil {
			return nil
		}
		if err := errors.Join(errs...); err != nil {
			t.Errorf("handler call %d (%s, attempt %d): %v", i, m.ID, m.Attempt, err)
			return err
		}
		return nil
	})
	seen := map[string]bool{}
	deadline := time.After(hxGuard)
	for len(seen) < n {
		select {
		case v := <-handled:
			if v != "side" {
				seen[v] = true
			}
		case err := <-done:
			t.Fatalf("Run returned %v after %d records", err, len(seen))
		case <-deadline:
			t.Fatalf("deadlock? handled %d of %d records", len(seen), n)
		}
	}
	cancel()
	assert.ErrorIs(t, hxDone(t, done, hxGuard, "Run"), context.Canceled)
	s := cons.Stats()
	assert.Zero(t, s.Retried, "every handler call returned nil")
	assert.Zero(t, s.Acked, "the handler acked each message itself: Run's ack is a no-op")
	require.NoError(t, other.Close())
}

// A handler that releases its own message with Retry and returns nil: Run's
// ack is a no-op and the record comes again (Attempt 2).
func TestHostileHandlerRetriesItsOwnMessage(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "x")
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	attempts := make(chan int32, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := hxRun(ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
		attempts <- m.Attempt
		if m.Attempt == 1 {
			return cons.Retry(m)
		}
		return nil
	})
	assert.Equal(t, int32(1), <-attempts)
	assert.Equal(t, int32(2), <-attempts)
	hxEventually(t, "ack", func() bool { return hxGroup(t, c, "in", "g").Partitions[0].Committed == 1 })
	cancel()
	<-done
	assert.Len(t, attempts, 0)
}

// ---- 6. Context cancelled during a blocking Send ----

func TestHostileSendCancelledWhileBlocked(t *testing.T) {
	c := hxCluster(t, 1)
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "a") // full; no group, so nothing is ever removed

	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := p.Send(ctx, in, tributary.Message[string]{Value: "b"})
		res <- err
	}()
	hxNotDone(t, res, 30*time.Millisecond, "Send into a full partition")
	start := time.Now()
	cancel()
	assert.ErrorIs(t, hxDone(t, res, time.Second, "cancelled Send"), context.Canceled)
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, int64(1), hxLogEnd(t, c, "in", 0), "nothing published")

	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	_, err := p.Send(dctx, in, tributary.Message[string]{Value: "c"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = p.Send(ctx, in, tributary.Message[string]{Value: "d"}) // already cancelled
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(1), hxLogEnd(t, c, "in", 0), "nothing published")
}

// ---- 7. A full dead-letter topic ----

func TestHostileDeadLetterTopicFull(t *testing.T) {
	c := hxCluster(t, 1)
	in := hxTopic(t, c, "in", 1)
	dlq := hxTopic(t, c, "in-dlq", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, dlq, 0, "filler") // full, no group on it yet
	hxSend(t, p, in, 0, "poison")

	fail := func(context.Context, tributary.Message[string]) error { return errors.New("always fails") }
	opts := []tributary.ConsumerOption{tributary.WithDeadLetter("in-dlq", 1), tributary.WithBackoff(time.Millisecond, time.Millisecond)}

	// First Run: waits for room, then is cancelled: the record stays.
	// Cancelled while it waits: it waits the stop grace more, then returns.
	m1, err := tributary.NewConsumer(in, "g", "m1", append(opts, tributary.WithStopGrace(100*time.Millisecond))...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := hxRun(ctx, m1, fail)
	hxEventually(t, "the record in flight", func() bool { return m1.Stats().Handled == 1 })
	hxNotDone(t, done, 50*time.Millisecond, "Run waiting for dead-letter room")
	g := hxGroup(t, c, "in", "g")
	assert.Equal(t, int64(0), g.Partitions[0].Committed, "not acked while the dead-letter topic is full")
	assert.True(t, g.Partitions[0].InFlight, "still in flight while Run waits")
	assert.Zero(t, m1.Stats().DeadLettered)
	cancel()
	assert.ErrorIs(t, hxDone(t, done, time.Second, "Run waiting for dead-letter room"), context.Canceled)
	g = hxGroup(t, c, "in", "g")
	assert.Equal(t, int64(0), g.Partitions[0].Committed, "cancelled: not acked")
	assert.Empty(t, g.Members)
	assert.Equal(t, int64(1), hxLogEnd(t, c, "in-dlq", 0), "nothing dead-lettered")

	// Second Run: the record comes again; consuming the DLQ makes room.
	m2, err := tributary.NewConsumer(in, "g", "m2", opts...)
	require.NoError(t, err)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done2 := hxRun(ctx2, m2, fail)
	hxEventually(t, "the record redelivered", func() bool { return m2.Stats().Handled == 1 })
	hxNotDone(t, done2, 30*time.Millisecond, "Run waiting for dead-letter room")
	reader, err := tributary.NewConsumer(dlq, "readers", "r1")
	require.NoError(t, err)
	f := hxPollOne(t, reader)
	require.Equal(t, "filler", f.Value)
	require.NoError(t, reader.Ack(f))
	d := hxPollOne(t, reader)
	assert.Equal(t, "poison", d.Value)
	assert.Equal(t, "2", hxHeader(d.Headers, tributary.HeaderDeadLetterAttempts))
	require.NoError(t, reader.Ack(d))
	hxEventually(t, "origin committed past the poison record", func() bool {
		return hxGroup(t, c, "in", "g").Partitions[0].Committed == 1
	})
	assert.Equal(t, int64(1), m2.Stats().DeadLettered)
	cancel2()
	assert.ErrorIs(t, hxDone(t, done2, hxGuard, "Run"), context.Canceled)
	require.NoError(t, reader.Close())
}

// ---- 8. Type mismatch ----

type hxOtherString string

type hxFakeStringCodec struct{}

func (hxFakeStringCodec) Name() string                           { return "String" }
func (hxFakeStringCodec) Encode(v hxOtherString) (string, error) { return string(v), nil }
func (hxFakeStringCodec) Decode(p string) (hxOtherString, error) { return hxOtherString(p), nil }

func TestHostileTypeMismatch(t *testing.T) {
	c := hxCluster(t, 10)
	hxTopic(t, c, "s", 2)
	_, err := tributary.CreateTopic(c, "n", 1, tributary.Integer[int]())
	require.NoError(t, err)
	p := hxProducer(t, c, "p")
	_, err = tributary.NewConsumer(hxOpen(t, c, "s"), "g", "m1")
	require.NoError(t, err)
	before, err := c.Describe("s")
	require.NoError(t, err)
	topics := c.Topics()

	_, err = tributary.OpenTopic(c, "s", tributary.Integer[int]())
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)
	_, err = tributary.OpenTopic(c, "s", tributary.JSON[string]())
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)
	_, err = tributary.OpenTopic[hxOtherString](c, "s", hxFakeStringCodec{}) // same codec name, another Go type
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)
	_, err = tributary.OpenTopic[string](c, "n", nil) // JSON:string vs Integer:int
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)
	_, err = tributary.CreateTopic(c, "s", 2, tributary.Integer[int]())
	assert.ErrorIs(t, err, tributary.ErrExists)

	_, err = tributary.LookupProducer[int](c, "p")
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)
	got, err := tributary.LookupProducer[string](c, "p")
	require.NoError(t, err)
	assert.Same(t, p, got)
	_, err = tributary.LookupConsumer[int](c, "m1")
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)

	// A dead-letter topic of another type.
	s, err := tributary.OpenTopic(c, "s", tributary.String())
	require.NoError(t, err)
	_, err = tributary.NewConsumer(s, "g", "m2", tributary.WithDeadLetter("n", 3))
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)

	after, err := c.Describe("s")
	require.NoError(t, err)
	assert.Equal(t, before, after, "a mismatch changes nothing")
	assert.Equal(t, topics, c.Topics())
	assert.Equal(t, []string{"m1"}, c.Consumers())
	assert.Equal(t, []string{"p"}, c.Producers())
	require.NoError(t, c.Close())
}

func hxOpen(t *testing.T, c *tributary.Cluster, name string) *tributary.Topic[string] {
	t.Helper()
	tp, err := tributary.OpenTopic(c, name, tributary.String())
	require.NoError(t, err)
	return tp
}

// ---- 9. Payloads that do not decode ----

func hxPublishRaw(t *testing.T, c *tributary.Cluster, topic string, partition int32, payload string) {
	t.Helper()
	bt, _, err := c.Backend().OpenTopic(topic)
	require.NoError(t, err)
	_, err = bt.TryPublish(partition, engine.Message{Payload: payload})
	require.NoError(t, err)
}

func TestHostileDecodeErrorGoesToDeadLetter(t *testing.T) {
	c := hxCluster(t, 10)
	nums, err := tributary.CreateTopic(c, "nums", 1, tributary.Integer[int]())
	require.NoError(t, err)
	p, err := tributary.NewProducer[int](c, "p", tributary.Manual())
	require.NoError(t, err)
	plain, err := tributary.NewConsumer(nums, "plain", "q1") // holds retention for the check below
	require.NoError(t, err)
	hxPublishRaw(t, c, "nums", 0, "not-a-number")
	_, err = p.TrySend(nums, tributary.Message[int]{Value: 7})
	require.NoError(t, err)

	cons, err := tributary.NewConsumer(nums, "g", "m1", tributary.WithDeadLetter("nums-dlq", 5))
	require.NoError(t, err)
	got := make(chan tributary.Message[int], 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := hxRun(ctx, cons, func(_ context.Context, m tributary.Message[int]) error {
		got <- m
		return nil
	})
	select {
	case m := <-got:
		assert.Equal(t, 7, m.Value, "the handler never sees the bad payload")
		assert.Equal(t, int64(1), m.Offset)
	case <-time.After(hxGuard):
		t.Fatal("the good record after a bad payload was never handled: the partition is blocked")
	}
	hxEventually(t, "both acked", func() bool { return hxGroup(t, c, "nums", "g").Partitions[0].Committed == 2 })
	cancel()
	<-done
	s := cons.Stats()
	assert.Equal(t, int64(1), s.DeadLettered)
	assert.Equal(t, int64(1), s.Handled)

	dlq, err := tributary.OpenTopic(c, "nums-dlq", tributary.Integer[int]())
	require.NoError(t, err)
	r, err := tributary.NewConsumer(dlq, "readers", "r1")
	require.NoError(t, err)
	d := hxPollOne(t, r)
	assert.Equal(t, "not-a-number", d.Payload)
	assert.ErrorIs(t, d.Err, tributary.ErrDecode, "the dead letter still does not decode")
	assert.Contains(t, hxHeader(d.Headers, tributary.HeaderDeadLetterError), tributary.ErrDecode.Error())
	assert.Equal(t, "1", hxHeader(d.Headers, tributary.HeaderDeadLetterAttempts))

	// Without a dead-letter topic Poll hands it over with Err set.
	ms, err := plain.TryPoll(2)
	require.NoError(t, err)
	require.Len(t, ms, 1) // one partition: one in flight
	assert.ErrorIs(t, ms[0].Err, tributary.ErrDecode)
	assert.Zero(t, ms[0].Value)
	assert.Equal(t, "not-a-number", ms[0].Payload)
	require.NoError(t, plain.Ack(ms[0]))
	m := hxPollOne(t, plain)
	assert.NoError(t, m.Err)
	assert.Equal(t, 7, m.Value)
	require.NoError(t, c.Close())
}

// ---- 10. The bug-report cases ----

func TestHostileMaxAttemptsThenDeadLetterAndMoveOn(t *testing.T) {
	const maxAttempts = 4
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "poison")
	hxSend(t, p, in, 0, "fine")
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithDeadLetter("dlq", maxAttempts), tributary.WithBackoff(time.Millisecond, 2*time.Millisecond))
	require.NoError(t, err)
	var attempts []int32
	var mu sync.Mutex
	fine := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := hxRun(ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
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
	case <-time.After(hxGuard):
		t.Fatal("the partition never moved on to the next record")
	}
	hxEventually(t, "both committed", func() bool { return hxGroup(t, c, "in", "g").Partitions[0].Committed == 2 })
	cancel()
	<-done
	mu.Lock()
	assert.Equal(t, []int32{1, 2, 3, 4}, attempts, "handler called exactly maxAttempts times")
	mu.Unlock()
	assert.Equal(t, int64(1), hxLogEnd(t, c, "dlq", 0))
}

func TestHostileAckTimeoutWakesBlockedPollOfSameMember(t *testing.T) {
	c := hxCluster(t, 10, engine.WithAckTimeout(50*time.Millisecond))
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "x")
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	first := hxPollOne(t, cons)
	require.Equal(t, int32(1), first.Attempt)
	start := time.Now()
	again := hxPollOne(t, cons) // blocks: nothing published, the record is in flight
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
	assert.Equal(t, first.ID, again.ID)
	assert.Equal(t, int32(2), again.Attempt)
	assert.Positive(t, cons.Stats().Wakeups)
	require.NoError(t, cons.Ack(again))
	require.NoError(t, cons.Close())
}

// ---- 11. Races and hostile inputs ----

func TestHostileRaces(t *testing.T) {
	const parts = 4
	c := hxCluster(t, 20)
	in := hxTopic(t, c, "in", parts)
	_, err := c.CreateGroup("in", "ga", engine.RoundRobin)
	require.NoError(t, err)
	p, err := tributary.NewProducer[string](c, "p", tributary.RoundRobin())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var acked sync.Map // "group/partition/offset" → true; group ga is never sought
	var doubleAcks, sent atomic.Int64
	go1 := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("panic: %v", r)
				}
			}()
			f()
		}()
	}
	for i := range 3 { // producers
		go1(func() {
			for ctx.Err() == nil {
				var err error
				if i == 0 {
					_, err = p.TrySend(in, tributary.Message[string]{Value: "t"})
				} else {
					sctx, scancel := context.WithTimeout(ctx, 5*time.Millisecond)
					_, err = p.Send(sctx, in, tributary.Message[string]{Value: "s"})
					scancel()
				}
				if err == nil {
					sent.Add(1)
				} else if !errors.Is(err, tributary.ErrPartitionFull) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					t.Errorf("send: %v", err)
				}
			}
		})
	}
	consume := func(group string, name string, seek bool) {
		go1(func() {
			for ctx.Err() == nil {
				cons, err := tributary.NewConsumer(in, group, name)
				if err != nil {
					t.Errorf("NewConsumer %s: %v", name, err)
					return
				}
				for j := 0; j < 5 && ctx.Err() == nil; j++ {
					pctx, pcancel := context.WithTimeout(ctx, 5*time.Millisecond)
					ms, err := cons.Poll(pctx, int32(1+rand.IntN(4)))
					pcancel()
					if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						t.Errorf("Poll: %v", err)
					}
					for _, m := range ms {
						if rand.IntN(5) == 0 {
							cons.Retry(m) //nolint:errcheck // a rebalance may have cancelled it
							continue
						}
						if cons.Ack(m) == nil {
							key := group + "/" + m.ID
							if _, dup := acked.LoadOrStore(key, true); dup && !seek {
								doubleAcks.Add(1)
								t.Errorf("%s acked twice", key)
							}
						}
					}
					if seek && len(ms) > 0 {
						m := ms[0]
						err := cons.Seek(m.Partition, max(0, m.Offset-int64(rand.IntN(3))))
						if err != nil && !errors.Is(err, tributary.ErrOffsetOutOfRange) {
							t.Errorf("Seek: %v", err)
						}
					}
				}
				if err := cons.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
		})
	}
	for i := range 3 {
		consume("ga", "a"+strconv.Itoa(i), false)
	}
	consume("gb", "b0", true)
	consume("gb", "b1", true)
	go1(func() { // assignors
		as := []engine.Assignor{engine.RoundRobin, engine.Range, engine.Sticky}
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := c.SetAssignor("in", "ga", as[i%3]); err != nil {
				t.Errorf("SetAssignor: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	})
	go1(func() { // a Run that fails, panics and succeeds, closed from outside now and then
		for ctx.Err() == nil {
			cons, err := tributary.NewConsumer(in, "gc", "runner", tributary.WithBackoff(time.Millisecond, time.Millisecond), tributary.WithDeadLetter("in-dlq", 2))
			if errors.Is(err, tributary.ErrClosed) {
				continue // closed from outside while joining
			}
			if err != nil {
				t.Errorf("NewConsumer runner: %v", err)
				return
			}
			rctx, rcancel := context.WithTimeout(ctx, 30*time.Millisecond)
			err = cons.Run(rctx, func(_ context.Context, m tributary.Message[string]) error {
				switch rand.IntN(10) {
				case 0:
					panic("random panic")
				case 1:
					return errors.New("random failure")
				case 2:
					go c.CloseConsumer("runner") //nolint:errcheck // racing Close
				}
				return nil
			})
			rcancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		}
	})
	go1(func() { // the dead-letter topic is drained so Run never waits for ever
		for ctx.Err() == nil {
			dlq, err := tributary.OpenTopic(c, "in-dlq", tributary.String())
			if err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
			dc, err := tributary.NewConsumer(dlq, "drain", "d0")
			if err != nil {
				t.Errorf("drain: %v", err)
				return
			}
			for ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Millisecond)
				ms, _ := dc.Poll(pctx, 8)
				pcancel()
				for _, m := range ms {
					dc.Ack(m) //nolint:errcheck
				}
			}
			dc.Close()
		}
	})
	go1(func() { // Describe: lag never negative, committed within the log
		for ctx.Err() == nil {
			d, err := c.Describe("in")
			if err != nil {
				t.Errorf("Describe: %v", err)
				return
			}
			for _, g := range d.Groups {
				for _, gp := range g.Partitions {
					part := d.Partitions[gp.Partition]
					if gp.Lag < 0 || gp.Committed < part.LogStartOffset || gp.Committed > part.LogEndOffset {
						t.Errorf("group %s partition %d: %+v outside log %+v", g.Group, gp.Partition, gp, part)
					}
				}
			}
		}
	})
	wg.Wait()
	// Every consumer closed: no group may keep a member.
	d, err := c.Describe("in")
	require.NoError(t, err)
	for _, g := range d.Groups {
		assert.Empty(t, g.Members, "group %s keeps members after every consumer closed", g.Group)
	}
	assert.Zero(t, doubleAcks.Load())
	assert.Positive(t, sent.Load())
	assert.Empty(t, c.Consumers())
	require.NoError(t, c.Close())
}

func TestHostileInputs(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 2)
	p := hxProducer(t, c, "p")
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	var nilTopic *tributary.Topic[string]
	var nilCtx context.Context
	bg := context.Background()

	invalid := []struct {
		name string
		f    func() error
	}{
		{"Send nil ctx", func() error { _, err := p.Send(nilCtx, in, tributary.Message[string]{}); return err }},
		{"Send nil topic", func() error { _, err := p.Send(bg, nilTopic, tributary.Message[string]{}); return err }},
		{"TrySend nil topic", func() error { _, err := p.TrySend(nilTopic, tributary.Message[string]{}); return err }},
		{"Send partition -1", func() error { _, err := p.TrySend(in, tributary.Message[string]{Partition: -1}); return err }},
		{"Send partition 2", func() error { _, err := p.TrySend(in, tributary.Message[string]{Partition: 2}); return err }},
		{"Send reserved header", func() error {
			_, err := p.TrySend(in, tributary.Message[string]{Headers: []tributary.Header{{Key: tributary.HeaderPayloadType, Value: "x"}}})
			return err
		}},
		{"Poll nil ctx", func() error { _, err := cons.Poll(nilCtx, 1); return err }},
		{"Poll max 0", func() error { _, err := cons.Poll(bg, 0); return err }},
		{"Poll max 65", func() error { _, err := cons.Poll(bg, 65); return err }},
		{"TryPoll max 0", func() error { _, err := cons.TryPoll(0); return err }},
		{"TryPoll max -1", func() error { _, err := cons.TryPoll(-1); return err }},
		{"Run nil handler", func() error { return cons.Run(bg, nil) }},
		{"Run nil ctx", func() error {
			return cons.Run(nilCtx, func(context.Context, tributary.Message[string]) error { return nil })
		}},
		{"NewConsumer nil topic", func() error { _, err := tributary.NewConsumer(nilTopic, "g", "x1"); return err }},
		{"NewConsumer empty group", func() error { _, err := tributary.NewConsumer(in, "", "x1"); return err }},
		{"NewConsumer empty name", func() error { _, err := tributary.NewConsumer(in, "g", ""); return err }},
		{"NewConsumer bad name", func() error { _, err := tributary.NewConsumer(in, "g", "a b"); return err }},
		{"NewConsumer long name", func() error { _, err := tributary.NewConsumer(in, "g", strings.Repeat("a", 65)); return err }},
		{"NewConsumer batch 65", func() error { _, err := tributary.NewConsumer(in, "g", "x1", tributary.WithBatch(65)); return err }},
		{"NewConsumer batch 0", func() error { _, err := tributary.NewConsumer(in, "g", "x1", tributary.WithBatch(0)); return err }},
		{"NewConsumer maxAttempts 0", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithDeadLetter("dlq", 0))
			return err
		}},
		{"NewConsumer maxAttempts 1001", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithDeadLetter("dlq", 1001))
			return err
		}},
		{"NewConsumer dlq bad name", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithDeadLetter("bad name", 3))
			return err
		}},
		{"NewConsumer dlq is itself", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithDeadLetter("in", 3))
			return err
		}},
		{"NewConsumer backoff 0", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithBackoff(0, time.Second))
			return err
		}},
		{"NewConsumer backoff max<initial", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithBackoff(time.Second, time.Millisecond))
			return err
		}},
		{"NewConsumer nil option", func() error { _, err := tributary.NewConsumer(in, "g", "x1", nil); return err }},
		{"NewConsumer duplicate name", func() error { _, err := tributary.NewConsumer(in, "other", "m1"); return err }},
		{"NewProducer nil partitioner", func() error { _, err := tributary.NewProducer[string](c, "p2", nil); return err }},
		{"NewProducer empty name", func() error { _, err := tributary.NewProducer[string](c, "", tributary.Manual()); return err }},
		{"NewProducer duplicate", func() error { _, err := tributary.NewProducer[string](c, "p", tributary.Manual()); return err }},
		{"CreateTopic empty", func() error { _, err := tributary.CreateTopic(c, "", 1, tributary.String()); return err }},
		{"CreateTopic bad name", func() error { _, err := tributary.CreateTopic(c, "a/b", 1, tributary.String()); return err }},
		{"CreateTopic 0 partitions", func() error { _, err := tributary.CreateTopic(c, "t0", 0, tributary.String()); return err }},
		{"CreateTopic 65 partitions", func() error { _, err := tributary.CreateTopic(c, "t65", 65, tributary.String()); return err }},
		{"OpenTopic unknown", func() error { _, err := tributary.OpenTopic(c, "nope", tributary.String()); return err }},
		{"OpenTopic empty", func() error { _, err := tributary.OpenTopic(c, "", tributary.String()); return err }},
		{"AddPartitions 0", func() error { _, err := c.AddPartitions("in", 0); return err }},
		{"AddPartitions 63", func() error { _, err := c.AddPartitions("in", 63); return err }},
		{"Seek negative", func() error { _, err := c.Seek("in", "g", 0, -1); return err }},
		{"Seek past end", func() error { _, err := c.Seek("in", "g", 0, 99); return err }},
		{"Consumer.Seek partition 9", func() error { return cons.Seek(9, 0) }},
		{"SetAssignor nil", func() error { _, err := c.SetAssignor("in", "g", nil); return err }},
		{"CreateGroup nil assignor", func() error { _, err := c.CreateGroup("in", "g2", nil); return err }},
		{"Ack zero message", func() error { return cons.Ack(tributary.Message[string]{}) }},
		{"Ack partition -1", func() error { return cons.Ack(tributary.Message[string]{Partition: -1}) }},
		{"Retry offset -1", func() error { return cons.Retry(tributary.Message[string]{Offset: -1}) }},
		{"CloseConsumer unknown", func() error { return c.CloseConsumer("nobody") }},
		{"LookupProducer unknown", func() error { _, err := tributary.LookupProducer[string](c, "nobody"); return err }},
		{"NewClusterOn nil", func() error { _, err := tributary.NewClusterOn(nil); return err }},
		{"NewCluster capacity 0", func() error { _, err := tributary.NewCluster(0); return err }},
		{"NewCluster capacity 16777217", func() error { _, err := tributary.NewCluster(tributary.MaxCapacity + 1); return err }},
	}
	before, err := c.Describe("in")
	require.NoError(t, err)
	topics := c.Topics()
	for _, tc := range invalid {
		err := hxNoPanic(t, tc.name, tc.f)
		assert.Error(t, err, tc.name)
	}
	after, err := c.Describe("in")
	require.NoError(t, err)
	// An Ack of a zero message names a valid partition and offset: the
	// engine refuses it (not in flight) as a valid call, which refreshes
	// the member's session (SPEC rule 24). Last-seen instants aside,
	// nothing changed.
	for _, d := range []*engine.TopicDescription{&before, &after} {
		for i := range d.Groups {
			d.Groups[i].LastSeen = nil
		}
	}
	assert.Equal(t, before, after, "invalid calls changed the topic")
	assert.Equal(t, topics, c.Topics(), "invalid calls created topics")
	assert.Equal(t, []string{"m1"}, c.Consumers())
	assert.Equal(t, []string{"p"}, c.Producers())
	require.NoError(t, c.Close())
}

// ---- 12. A stalled consumer never delays another group ----

func TestHostileStalledGroupDoesNotDelayAnother(t *testing.T) {
	const n = 50
	c := hxCluster(t, n)
	in := hxTopic(t, c, "in", 2)
	// A's handler ignores its context: Run abandons it after the stop grace.
	ca, err := tributary.NewConsumer(in, "A", "a1", tributary.WithStopGrace(100*time.Millisecond))
	require.NoError(t, err)
	cb, err := tributary.NewConsumer(in, "B", "b1")
	require.NoError(t, err)
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	doneA := hxRun(ctx, ca, func(context.Context, tributary.Message[string]) error {
		<-release
		return nil
	})
	var got atomic.Int32
	all := make(chan struct{})
	doneB := hxRun(ctx, cb, func(context.Context, tributary.Message[string]) error {
		if got.Add(1) == n {
			close(all)
		}
		return nil
	})
	p := hxProducer(t, c, "p")
	for i := range n {
		hxSend(t, p, in, int32(i%2), strconv.Itoa(i))
	}
	select {
	case <-all:
	case <-time.After(hxGuard):
		t.Fatalf("group B got %d of %d records while group A stalled", got.Load(), n)
	}
	cancel()
	assert.ErrorIs(t, hxDone(t, doneA, time.Second, "stalled Run"), context.Canceled)
	assert.ErrorIs(t, hxDone(t, doneB, time.Second, "Run"), context.Canceled)
	close(release)
}

// ---- Found while attacking ----

// Cluster.Close documents that it closes every producer: later sends return
// ErrClosed.
func TestHostileClusterCloseClosesProducers(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	require.NoError(t, c.Close())
	_, err := p.TrySend(in, tributary.Message[string]{Value: "after close"})
	assert.ErrorIs(t, err, tributary.ErrClosed, "TrySend after Cluster.Close")
	_, err = p.Send(context.Background(), in, tributary.Message[string]{Value: "after close"})
	assert.ErrorIs(t, err, tributary.ErrClosed, "Send after Cluster.Close")
	assert.Empty(t, c.Producers(), "Close closes every producer")
}

// A closed consumer's Ack must not ack a delivery of a new consumer that
// took the same name (an abandoned handler acking late, say): Ack documents
// ErrNotInFlight when "the consumer left".
func TestHostileStaleAckAfterCloseAndRejoin(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "x")
	old, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	m := hxPollOne(t, old)
	require.NoError(t, old.Close())
	fresh, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	m2 := hxPollOne(t, fresh)
	require.Equal(t, m.ID, m2.ID)

	assert.ErrorIs(t, old.Ack(m), tributary.ErrNotInFlight, "a closed consumer's Ack")
	assert.NoError(t, fresh.Ack(m2), "the new consumer's delivery is still its own")
	require.NoError(t, fresh.Close())
}

// A NewConsumer that fails changes nothing: in particular it creates no
// dead-letter topic.
func TestHostileFailedNewConsumerCreatesNoDeadLetterTopic(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 1)
	_, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	topics := c.Topics()
	_, err = tributary.NewConsumer(in, "other", "m1", tributary.WithDeadLetter("fresh-dlq", 3))
	require.ErrorIs(t, err, tributary.ErrExists)
	assert.Equal(t, topics, c.Topics(), "a NewConsumer that returned ErrExists created a topic")
	require.NoError(t, c.Close())
}

// A consumer closed while NewConsumer is between registering and joining
// must not stay in its group: a closed consumer that owns partitions blocks
// them (and retention) for ever.
func TestHostileCloseRacingNewConsumerLeavesNoMember(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 1)
	for i := range 3000 {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c.CloseConsumer("z") == nil {
					return
				}
			}
		}()
		cons, err := tributary.NewConsumer(in, "g", "z")
		close(stop)
		wg.Wait()
		if err != nil {
			// Closed while joining: NewConsumer says so and leaves.
			require.ErrorIs(t, err, tributary.ErrClosed)
		} else {
			require.NoError(t, cons.Close())
		}
		if g := hxGroup(t, c, "in", "g"); len(g.Members) != 0 {
			t.Fatalf("round %d: closed consumer still a member of its group: %v (owner of partition 0: %q)", i, g.Members, g.Partitions[0].Owner)
		}
	}
}

// Run's delayed Retry of a failed delivery must not cancel a later delivery
// of the same record: with an ack timeout shorter than the backoff, the
// record comes back by the ack timeout, the handler succeeds, and its ack
// must stick — the handler runs twice, not three times.
func TestHostileStaleRetryTimerDoesNotCancelLaterDelivery(t *testing.T) {
	c := hxCluster(t, 10, engine.WithAckTimeout(20*time.Millisecond))
	in := hxTopic(t, c, "in", 1)
	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 0, "x")
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithBackoff(100*time.Millisecond, 100*time.Millisecond))
	require.NoError(t, err)
	var calls atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := hxRun(ctx, cons, func(context.Context, tributary.Message[string]) error {
		if calls.Add(1) == 1 {
			return errors.New("first attempt fails")
		}
		time.Sleep(150 * time.Millisecond) // still running when the first failure's retry timer fires
		return nil
	})
	hxEventually(t, "acked", func() bool { return hxGroup(t, c, "in", "g").Partitions[0].Committed == 1 })
	cancel()
	<-done
	assert.Equal(t, int32(2), calls.Load(), "handler calls: the successful second attempt's ack was cancelled by the first attempt's retry timer")
	assert.Equal(t, int64(1), cons.Stats().Acked)
}
