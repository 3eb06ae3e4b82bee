package tributary_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
)

// TestMessagesBodyPanicReleasesTheRest: a loop body that panics on the
// first message of a batch ends the loop with the panic; the messages
// polled with it and not yielded are released (delivered again at once,
// Attempt 2), and the one the body had is still in flight to it.
func TestMessagesBodyPanicReleasesTheRest(t *testing.T) {
	_, cons := onePerPartition(t, 4, digits)
	var held tributary.Message[string]
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the body's panic", p)
			}
		}()
		for m, err := range cons.Messages(guardCtx(t)) {
			if err != nil {
				t.Fatal(err)
			}
			held = m
			panic("boom")
		}
	}()
	ms, err := cons.TryPoll(4)
	if err != nil || len(ms) != 3 {
		t.Fatalf("after the panic TryPoll = %+v, %v; want the 3 messages not yielded", ms, err)
	}
	for _, m := range ms {
		if m.Attempt != 2 || m.Partition == held.Partition {
			t.Fatalf("released %+v; the body held %s", m, held.ID)
		}
	}
	if err := cons.Ack(held); err != nil {
		t.Fatalf("Ack of the message the body held: %v", err)
	}
}

// TestMessagesBodyRetriesThenBreaks: a body that Retries its message and
// breaks leaves nothing in flight: its message and the batch's rest come
// again, each once.
func TestMessagesBodyRetriesThenBreaks(t *testing.T) {
	_, cons := onePerPartition(t, 4, digits)
	for m, err := range cons.Messages(guardCtx(t)) {
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.Retry(m); err != nil {
			t.Fatal(err)
		}
		break
	}
	ms, err := cons.TryPoll(4)
	if err != nil || len(ms) != 4 {
		t.Fatalf("TryPoll = %d messages, %v; want all 4 again", len(ms), err)
	}
	for _, m := range ms {
		if m.Attempt != 2 {
			t.Fatalf("%s attempt %d, want 2", m.ID, m.Attempt)
		}
	}
}

// TestMessagesBodyClosesTheConsumer: a body that closes the consumer gets
// ErrClosed at the next step, once, and the loop ends, although the batch
// it polled had more: those were released by the close, and yielding them
// would hand the body messages that are no longer its own (another
// consumer of the group gets all of them at once).
func TestMessagesBodyClosesTheConsumer(t *testing.T) {
	tp, cons := onePerPartition(t, 4, digits)
	steps, errs := 0, 0
	for _, err := range cons.Messages(guardCtx(t)) {
		steps++
		if err != nil {
			if !errors.Is(err, tributary.ErrClosed) {
				t.Fatalf("step %d: %v, want ErrClosed", steps, err)
			}
			errs++
			continue
		}
		cons.Close()
	}
	// The close came after the first message: the other three, polled
	// with it, were released by the close and belong to the group's next
	// consumer; the next step is ErrClosed, as a Poll would be.
	if errs != 1 || steps != 2 {
		t.Fatalf("%d steps, %d errors; want 2 steps, the last ErrClosed", steps, errs)
	}
	other := testConsumer(t, tp, "g", "o", tributary.WithBatch(4))
	if ms, err := other.TryPoll(4); err != nil || len(ms) != 4 {
		t.Fatalf("the group's next consumer TryPoll = %d, %v; want 4", len(ms), err)
	}
}

// TestConcurrentPollsOnOneConsumer: many goroutines poll one consumer at
// once, by TryPoll, TryAppendPoll, AppendPoll and Messages loops, each
// reusing and then scribbling over its own buffer, while a producer sends:
// every message is received once, its ID, payload, key and headers those
// of its record (no buffer or ID block is shared between polls); run under
// -race.
func TestConcurrentPollsOnOneConsumer(t *testing.T) {
	const parts, perPart = 8, 300
	c := testCluster(t, 64)
	tp := testTopic(t, c, "t", parts, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "m", tributary.WithBatch(parts))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range perPart {
			for p := range int32(parts) {
				v := fmt.Sprintf("%d-%d", p, i)
				m := tributary.Message[string]{Partition: p, Key: "k" + v, Value: v, Headers: []tributary.Header{{Key: "h", Value: v}}}
				if _, err := pr.Send(ctx, tp, m); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()

	var seen sync.Map
	var count atomic.Int64
	check := func(m tributary.Message[string]) bool {
		want := fmt.Sprintf("%d-%d", m.Partition, m.Offset)
		if m.Err != nil || m.ID != want || m.Value != want || m.Payload != want || m.Key != "k"+want ||
			len(m.Headers) != 1 || m.Headers[0].Value != want || m.PayloadType != "String" {
			t.Errorf("message %+v: want every field of %s", m, want)
			return false
		}
		if _, dup := seen.LoadOrStore(want, m.ID); dup {
			t.Errorf("%s received twice", want)
			return false
		}
		if err := cons.Ack(m); err != nil {
			t.Errorf("Ack %s: %v", want, err)
			return false
		}
		count.Add(1)
		return true
	}
	scribble := func(ms []tributary.Message[string]) {
		for i := range ms {
			ms[i].ID, ms[i].Payload, ms[i].Value = "x", "x", "x"
			if len(ms[i].Headers) > 0 {
				ms[i].Headers[0].Value = "x"
				ms[i].Headers = append(ms[i].Headers, tributary.Header{Key: "y"})
			}
		}
	}
	done := func() bool { return count.Load() >= parts*perPart || ctx.Err() != nil }
	pollers := []func(){
		func() { // TryPoll
			for !done() {
				ms, err := cons.TryPoll(parts)
				if err != nil {
					t.Error(err)
					return
				}
				for _, m := range ms {
					check(m)
				}
				scribble(ms)
			}
		},
		func() { // TryAppendPoll, one buffer
			var buf []tributary.Message[string]
			for !done() {
				var err error
				if buf, err = cons.TryAppendPoll(buf[:0], 3); err != nil {
					t.Error(err)
					return
				}
				for _, m := range buf {
					check(m)
				}
				scribble(buf)
			}
		},
		func() { // AppendPoll, one buffer, bounded waits
			var buf []tributary.Message[string]
			for !done() {
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Millisecond)
				var err error
				buf, err = cons.AppendPoll(pctx, buf[:0], 2)
				pcancel()
				if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Error(err)
					return
				}
				for _, m := range buf {
					check(m)
				}
				scribble(buf)
			}
		},
		func() { // a Messages loop
			lctx, lcancel := context.WithCancel(ctx)
			defer lcancel()
			for m, err := range cons.Messages(lctx) {
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Error(err)
					}
					return
				}
				check(m)
				scribble([]tributary.Message[string]{m})
				if done() {
					lcancel()
				}
			}
		},
	}
	for _, f := range append(pollers, pollers...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	// A Messages loop ends only at its next step: wake the waiting ones.
	for !done() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	if n := count.Load(); n != parts*perPart {
		t.Fatalf("received %d messages, want %d", n, parts*perPart)
	}
}

// TestMessagesSameIteratorAgainAfterBreak: one iterator value ranged
// again after a break starts afresh: it polls, and yields what the first
// loop released and everything after, none twice.
func TestMessagesSameIteratorAgainAfterBreak(t *testing.T) {
	_, cons := onePerPartition(t, 4, digits)
	seq := cons.Messages(guardCtx(t))
	got := map[string]int{}
	for round := range 3 {
		for m, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			got[m.Value]++
			if err := cons.Ack(m); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			break
		}
	}
	if len(got) != 3 {
		t.Fatalf("three loops of one message each got %v, want three distinct values", got)
	}
	for _, n := range got {
		if n != 1 {
			t.Fatalf("got %v: a value twice", got)
		}
	}
}

// TestMessagesStopsAtCancelMidBatch: a body that cancels the loop's ctx
// gets no further message of the batch: the next step yields ctx's error
// and the rest are released (delivered again at once, Attempt 2).
func TestMessagesStopsAtCancelMidBatch(t *testing.T) {
	_, cons := onePerPartition(t, 3, letters)
	ctx, cancel := context.WithCancel(guardCtx(t))
	defer cancel()
	var got []string
	var errs []error
	for m, err := range cons.Messages(ctx) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, m.Value)
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	if len(got) != 1 || got[0] != "a" || len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("yielded %v then errors %v; want a, then context.Canceled once", got, errs)
	}
	ms, err := cons.TryPoll(3)
	if err != nil || len(ms) != 2 || ms[0].Attempt != 2 || ms[1].Attempt != 2 {
		t.Fatalf("after the cancel TryPoll = %+v, %v; want b and c released, attempt 2", ms, err)
	}
}

// onePerPartition is the iterator tests' setup: a String topic "t" of n
// partitions on a cluster of capacity 10, one message on each partition p
// (sent by a Manual producer, its value name(p): digits gives "0", "1", …,
// letters "a", "b", …), and consumer "m" of group "g" polling batches of n.
func onePerPartition(t *testing.T, n int32, name func(p int32) string) (*tributary.Topic[string], *tributary.Consumer[string]) {
	t.Helper()
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", n, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "m", tributary.WithBatch(n))
	for p := range n {
		sendOK(t, pr, tp, tributary.Message[string]{Partition: p, Value: name(p)})
	}
	return tp, cons
}

func digits(p int32) string  { return strconv.Itoa(int(p)) }
func letters(p int32) string { return string(rune('a' + p)) }
