package tributary_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
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
