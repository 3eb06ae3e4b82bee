package tributary_test

// Run with handlers that misbehave: a handler that ends its goroutine,
// panics while ending it, blocks past the stop grace ignoring ctx, closes
// its own consumer, publishes into its own full topic or calls anything
// on the cluster; and what an idle Run keeps alive.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// committed returns group's committed offset and in-flight flag on
// partition 0 of topic.
func committed(t *testing.T, c *tributary.Cluster, topic, group string) (int64, bool) {
	t.Helper()
	for _, g := range describeTopic(t, c, topic).Groups {
		if g.Group == group {
			return g.Partitions[0].Committed, g.Partitions[0].InFlight
		}
	}
	t.Fatalf("no group %q on %q", group, topic)
	return 0, false
}

// runGuarded runs cons.Run with h on ctx and fails the test unless Run
// returns within guard.
func runGuarded[T any](t *testing.T, ctx context.Context, cons *tributary.Consumer[T], h tributary.Handler[T]) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx, h) }()
	select {
	case err := <-done:
		return err
	case <-time.After(guard):
		t.Fatal("Run did not return")
		return nil
	}
}

// TestRunHandlerGoexitsEveryAttempt: a handler that ends its goroutine on
// every attempt but the last has each attempt retried (a new worker each
// time), and its record acked by the attempt that returns; then a cancel
// ends Run with ctx's error and nothing left behind (goleak).
func TestRunHandlerGoexitsEveryAttempt(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "m", tributary.WithBackoff(time.Millisecond, time.Millisecond))
	sendOK(t, pr, tp, tributary.Message[string]{Value: "x"})
	const exits = 20
	ctx, cancel := context.WithCancel(guardCtx(t))
	var attempts []int32
	err := runGuarded(t, ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
		attempts = append(attempts, m.Attempt)
		if m.Attempt <= exits {
			runtime.Goexit()
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if len(attempts) != exits+1 || attempts[exits] != exits+1 {
		t.Fatalf("attempts %v, want 1..%d", attempts, exits+1)
	}
	if off, inFlight := committed(t, c, "t", "g"); off != 1 || inFlight {
		t.Fatalf("committed %d (in flight %v), want 1: the last attempt's nil acks it", off, inFlight)
	}
	if s := cons.Stats(); s.Retried != exits || s.Acked != 1 {
		t.Fatalf("stats %+v, want %d retried, 1 acked", s, exits)
	}
}

// TestRunCancelAsHandlerReturns: a handler that cancels Run's context and
// returns nil, at once or from another goroutine racing with its return,
// has its record acked (it returned within the stop grace), every time.
func TestRunCancelAsHandlerReturns(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	const rounds = 200
	for i := range rounds {
		sendOK(t, pr, tp, tributary.Message[string]{Value: "x"})
		cons, err := tributary.NewConsumer(tp, "g", fmt.Sprintf("m%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(guardCtx(t))
		err = runGuarded(t, ctx, cons, func(context.Context, tributary.Message[string]) error {
			if i%2 == 0 {
				cancel()
			} else {
				go cancel()
			}
			return nil
		})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: Run = %v", i, err)
		}
		if off, inFlight := committed(t, c, "t", "g"); off != int64(i+1) || inFlight {
			t.Fatalf("round %d: committed %d (in flight %v), want %d: the handler's nil was not applied", i, off, inFlight, i+1)
		}
	}
}

// TestRunGraceZeroAbandonsABlockedHandler: with a stop grace of 0 a
// handler that ignores its context is abandoned at once: Run returns,
// the record is not acked (the group's next consumer gets it, Attempt 2),
// and the handler's goroutine ends when the handler returns (goleak).
func TestRunGraceZeroAbandonsABlockedHandler(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "m", tributary.WithStopGrace(0))
	sendOK(t, pr, tp, tributary.Message[string]{Value: "x"})
	ctx, cancel := context.WithCancel(guardCtx(t))
	release := make(chan struct{})
	returned := make(chan struct{})
	err := runGuarded(t, ctx, cons, func(context.Context, tributary.Message[string]) error {
		defer close(returned)
		cancel()
		<-release
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	next := testConsumer(t, tp, "g", "n")
	ms := pollOK(t, next, 1)
	if len(ms) != 1 || ms[0].Attempt != 2 {
		t.Fatalf("next consumer got %+v, want the record again, Attempt 2", ms)
	}
	close(release)
	<-returned
	// The abandoned handler's nil must not ack the record now held by next.
	time.Sleep(10 * time.Millisecond)
	if err := next.Ack(ms[0]); err != nil {
		t.Fatalf("next's Ack: %v (the abandoned handler's result was applied)", err)
	}
}

// TestRunHandlerClosesTheConsumer: a handler that closes its own consumer
// ends Run with nil and has nothing applied, panicking, erring or
// returning nil, round after round.
func TestRunHandlerClosesTheConsumer(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "x"})
	for i := range 30 {
		cons, err := tributary.NewConsumer(tp, "g", fmt.Sprintf("m%d", i), tributary.WithBackoff(time.Millisecond, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var got int32
		err = runGuarded(t, guardCtx(t), cons, func(_ context.Context, m tributary.Message[string]) error {
			got = m.Attempt
			cons.Close()
			switch i % 4 {
			case 0:
				panic("closed")
			case 1:
				return errors.New("closed")
			case 2:
				runtime.Goexit()
			}
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: Run = %v, want nil after Close", i, err)
		}
		if got != int32(i+1) {
			t.Fatalf("round %d: handler saw attempt %d, want %d (nothing applied before)", i, got, i+1)
		}
		if off, _ := committed(t, c, "t", "g"); off != 0 {
			t.Fatalf("round %d: committed %d, want 0", i, off)
		}
	}
}

// TestRunMixedFailuresDeadLetter: attempts that panic, end their
// goroutine and return an error all count toward the dead-letter limit;
// the dead letter carries its payload type and attempt count.
func TestRunMixedFailuresDeadLetter(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "m", tributary.WithDeadLetter("dlq", 3), tributary.WithBackoff(time.Millisecond, time.Millisecond))
	sendOK(t, pr, tp, tributary.Message[string]{Value: "x"})
	dlq, err := tributary.OpenTopic(c, "dlq", tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	audit := testConsumer(t, dlq, "audit", "a")
	ctx, cancel := context.WithCancel(guardCtx(t))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(ctx, func(_ context.Context, m tributary.Message[string]) error {
			switch m.Attempt {
			case 1:
				panic("one")
			case 2:
				runtime.Goexit()
			}
			return errors.New("three")
		})
	}()
	dl := pollOK(t, audit, 1)[0]
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	attempts := ""
	for _, h := range dl.Headers {
		if h.Key == tributary.HeaderDeadLetterAttempts {
			attempts = h.Value
		}
	}
	if dl.Value != "x" || dl.PayloadType != "String" || attempts != "3" {
		t.Fatalf("dead letter %+v, want x, String, attempts 3", dl)
	}
}

// heapAfterGC is the live heap after two collections, in bytes.
func heapAfterGC() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestIdleConsumersHoldNoPayload: once a consumer has acked a large
// record and the broker has removed it, nothing of the consumer's keeps
// the payload alive while it waits for more: not a Run waiting in its
// poll (its kept record buffer), nor a consumer between polls (AppendPoll
// and TryAppendPoll keep theirs cleared).
func TestIdleConsumersHoldNoPayload(t *testing.T) {
	const size = 32 << 20
	for _, how := range []string{"Run", "AppendPoll", "TryAppendPoll", "Messages"} {
		t.Run(how, func(t *testing.T) {
			c := testCluster(t, 10)
			tp := testTopic(t, c, "t", 1, tributary.Bytes())
			pr := testProducer[[]byte](t, c, "p", tributary.Manual())
			cons := testConsumer(t, tp, "g", "m")
			base := heapAfterGC()
			big := make([]byte, size)
			sendOK(t, pr, tp, tributary.Message[[]byte]{Value: big})
			big = nil
			ctx, cancel := context.WithCancel(guardCtx(t))
			defer cancel()
			acked := make(chan struct{})
			done := make(chan error, 1)
			switch how {
			case "Run":
				go func() {
					done <- cons.Run(ctx, func(context.Context, tributary.Message[[]byte]) error {
						defer close(acked)
						return nil
					})
				}()
			case "Messages":
				go func() {
					for m, err := range cons.Messages(ctx) {
						if err != nil {
							break
						}
						if err := cons.Ack(m); err != nil {
							t.Error(err)
						}
						close(acked)
					}
					done <- nil
				}()
			default:
				var buf []tributary.Message[[]byte]
				var err error
				if how == "AppendPoll" {
					buf, err = cons.AppendPoll(ctx, buf, 1)
				} else {
					buf, err = cons.TryAppendPoll(buf, 1)
				}
				if err != nil || len(buf) != 1 {
					t.Fatalf("poll: %d, %v", len(buf), err)
				}
				if err := cons.Ack(buf[0]); err != nil {
					t.Fatal(err)
				}
				clear(buf)
				close(acked)
				done <- nil
			}
			<-acked
			// The record is acked: the broker has let it go. Wait for
			// the commit and for the consumer to be back in its poll,
			// then measure.
			deadline := time.Now().Add(guard)
			for {
				time.Sleep(5 * time.Millisecond)
				if d := describeTopic(t, c, "t"); d.Groups[0].Partitions[0].Committed == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("not acked")
				}
			}
			if how == "Run" || how == "Messages" {
				// Back in its poll, blocked: the clear before the poll
				// is done (a wait is counted only after it).
				waitFor(t, how+" blocked in its poll again", func() bool { return cons.Stats().Waits >= 1 })
			}
			if held := heapAfterGC() - base; held > size/2 {
				t.Errorf("%s: %d MiB still live after the %d MiB record was acked and removed", how, held>>20, size>>20)
			}
			cancel()
			<-done
		})
	}
}

// TestRunHandlerPanicsThenGoexits: a handler whose panic is followed by a
// deferred runtime.Goexit, and one whose Goexit is followed by a deferred
// panic, each fail their attempt: Run goes on with the next attempt, and a
// cancel ends it.
func TestRunHandlerPanicsThenGoexits(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "m", tributary.WithBackoff(time.Millisecond, time.Millisecond))
	sendOK(t, pr, tp, tributary.Message[string]{Value: "x"})
	ctx, cancel := context.WithCancel(guardCtx(t))
	var attempts []int32
	err := runGuarded(t, ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
		attempts = append(attempts, m.Attempt)
		switch m.Attempt {
		case 1:
			defer runtime.Goexit()
			panic("then Goexit")
		case 2:
			defer func() { panic("after Goexit") }()
			runtime.Goexit()
		case 3:
			defer func() { recover(); runtime.Goexit() }()
			panic("recovered, then Goexit")
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if len(attempts) != 4 {
		t.Fatalf("attempts %v, want 1..4", attempts)
	}
	if off, _ := committed(t, c, "t", "g"); off != 1 {
		t.Fatalf("committed %d, want 1", off)
	}
}

// A handler that blocks for ever, ignoring ctx, does not block Run's
// cancel: Run abandons it after the stop grace, the consumer leaves its
// group, and the handler's late nil acks nothing.
func TestHandlerIgnoringCtxDoesNotBlockCancel(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "x"})
	// It blocks for ever: Run abandons it after the stop grace.
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithStopGrace(100*time.Millisecond))
	require.NoError(t, err)

	entered := make(chan struct{})
	release := make(chan struct{})
	handlerDone := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, cons, func(context.Context, tributary.Message[string]) error {
		defer close(handlerDone)
		close(entered)
		<-release // ignores ctx
		return nil
	})
	<-entered
	start := time.Now()
	cancel()
	err = awaitDone(t, done, time.Second, "Run with a handler ignoring ctx")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), time.Second)

	g := groupDesc(t, c, "in", "g")
	assert.Empty(t, g.Members, "the consumer left its group")
	assert.Equal(t, int64(0), g.Partitions[0].Committed, "the abandoned record was not acked")
	assert.False(t, g.Partitions[0].InFlight, "leaving released the delivery")
	assert.Empty(t, c.Consumers())

	close(release)
	<-handlerDone
	// The abandoned handler's late nil must not ack the record.
	time.Sleep(10 * time.Millisecond)
	assert.Equal(t, int64(0), groupDesc(t, c, "in", "g").Partitions[0].Committed)
}

// A handler that publishes into its own full topic: TrySend fails with
// ErrPartitionFull at once, a blocking Send waits without locking up the
// cluster or another group, and Run's cancel ends it with nothing published.
func TestHandlerSendsIntoOwnFullTopic(t *testing.T) {
	c := testCluster(t, 2)
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "a"})
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "b"}) // full
	ca, err := tributary.NewConsumer(in, "A", "a1")
	require.NoError(t, err)
	cb, err := tributary.NewConsumer(in, "B", "b1")
	require.NoError(t, err)

	trySendErr := make(chan error, 1)
	sending := make(chan struct{})
	sendErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, ca, func(hctx context.Context, m tributary.Message[string]) error {
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
	require.ErrorIs(t, awaitDone(t, trySendErr, guard, "handler's TrySend"), tributary.ErrPartitionFull)
	<-sending

	// Group B keeps consuming while A's handler waits for room.
	for i, want := range []string{"a", "b"} {
		m := pollOne(t, cb)
		assert.Equal(t, want, m.Value, "B's record %d", i)
		require.NoError(t, cb.Ack(m))
	}
	_, err = c.Describe("in") // the cluster is not locked up
	require.NoError(t, err)
	stillPending(t, sendErr, 50*time.Millisecond, "the handler's Send into a full partition")

	start := time.Now()
	cancel()
	assert.ErrorIs(t, awaitDone(t, done, time.Second, "Run"), context.Canceled)
	assert.Less(t, time.Since(start), time.Second)
	assert.ErrorIs(t, awaitDone(t, sendErr, guard, "the handler's Send"), context.Canceled)
	assert.Equal(t, int64(2), logEndOf(t, c, "in", 0), "nothing published by the cancelled Send")
	require.NoError(t, cb.Close())
}

// A handler that closes its own consumer mid-delivery: Run returns nil, the
// record is not acked, and the new owner of the partition gets it again
// (Attempt 2).
func TestHandlerClosesOwnConsumerRecordRedelivered(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "x"})
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "y"})
	m1, err := tributary.NewConsumer(in, "g", "m1") // owns partition 0 (first in byte order)
	require.NoError(t, err)
	m2, err := tributary.NewConsumer(in, "g", "m2")
	require.NoError(t, err)
	require.Equal(t, []int32{0}, m1.Assignment())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var m1Seen []string
	done1 := runAsync(ctx, m1, func(_ context.Context, m tributary.Message[string]) error {
		m1Seen = append(m1Seen, m.Value)
		return m1.Close() // leaves mid-delivery; then "succeeds"
	})
	assert.NoError(t, awaitDone(t, done1, time.Second, "Run of a consumer its handler closed"))
	assert.Equal(t, []string{"x"}, m1Seen)
	assert.Equal(t, int64(0), m1.Stats().Acked)

	got := make(chan tributary.Message[string], 2)
	done2 := runAsync(ctx, m2, func(_ context.Context, m tributary.Message[string]) error {
		got <- m
		return nil
	})
	first := <-got
	assert.Equal(t, "x", first.Value, "the in-flight record is redelivered to the new owner")
	assert.Equal(t, int32(2), first.Attempt)
	assert.Equal(t, "y", (<-got).Value)
	waitFor(t, "m2 acks both", func() bool { return groupDesc(t, c, "in", "g").Partitions[0].Committed == 2 })
	require.NoError(t, m2.Close())
	assert.NoError(t, awaitDone(t, done2, guard, "Run"))
}

// A handler that calls anything on the cluster (its own Ack, Retry and Seek,
// topics and partitions created, assignors set, consumers of its own group
// opened and closed, sends into a full partition) neither deadlocks Run
// nor gets an error other than the documented ones.
func TestHandlerCallsTheCluster(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 2, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	const n = 6
	for i := range n {
		sendOK(t, p, in, tributary.Message[string]{Partition: int32(i % 2), Value: "v" + strconv.Itoa(i)})
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
	done := runAsync(ctx, cons, func(hctx context.Context, m tributary.Message[string]) error {
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
	deadline := time.After(guard)
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
	assert.ErrorIs(t, awaitDone(t, done, guard, "Run"), context.Canceled)
	s := cons.Stats()
	assert.Zero(t, s.Retried, "every handler call returned nil")
	assert.Zero(t, s.Acked, "the handler acked each message itself: Run's ack is a no-op")
	require.NoError(t, other.Close())
}
