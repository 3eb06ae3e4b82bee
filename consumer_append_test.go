package tributary_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// Tests of the buffer-reusing polls (AppendPoll, TryAppendPoll), the
// iterator (Messages), the time a Send reports, and the allocation bounds
// of the typed round trip.

// TestAppendPollAppends: AppendPoll and TryAppendPoll keep what dst held,
// append the messages polled, and give dst back unchanged when there is
// nothing or an error.
func TestAppendPollAppends(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 2, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "m")
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "a"})
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 1, Value: "b"})

	keep := tributary.Message[string]{ID: "kept"}
	dst := make([]tributary.Message[string], 1, 8)
	dst[0] = keep
	out, err := cons.AppendPoll(guardCtx(t), dst, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || &out[0] != &dst[0] || out[0].ID != "kept" || out[1].Value != "a" || out[2].Value != "b" ||
		out[1].ID != "0-0" || out[2].ID != "1-0" || out[1].PayloadType != "String" {
		t.Fatalf("AppendPoll = %+v", out)
	}
	// Nothing deliverable: dst back as it was.
	out2, err := cons.TryAppendPoll(out, 2)
	if err != nil || len(out2) != 3 || &out2[0] != &out[0] {
		t.Fatalf("TryAppendPoll with nothing = %d messages, %v", len(out2), err)
	}
	for _, m := range out[1:] {
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	// Reusing the buffer overwrites its messages, not the IDs they held.
	earlier := out[1].ID
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 1, Value: "c"})
	out3, err := cons.TryAppendPoll(out[:1], 2)
	if err != nil || len(out3) != 2 || out3[1].Value != "c" || out3[1].ID != "1-1" || earlier != "0-0" {
		t.Fatalf("TryAppendPoll = %+v, %v (earlier ID %q)", out3, err, earlier)
	}
	if _, err := cons.AppendPoll(guardCtx(t), nil, 0); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Fatalf("AppendPoll(max 0) = %v", err)
	}
	if got, err := cons.TryAppendPoll(dst[:1], 65); !errors.Is(err, tributary.ErrInvalidArgument) || len(got) != 1 {
		t.Fatalf("TryAppendPoll(max 65) = %d, %v", len(got), err)
	}
	//nolint:staticcheck // a nil Context is the case under test
	if _, err := cons.AppendPoll(nil, nil, 1); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Fatalf("AppendPoll(nil ctx) = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := cons.AppendPoll(ctx, dst[:1], 1); !errors.Is(err, context.Canceled) || len(got) != 1 {
		t.Fatalf("AppendPoll(cancelled) = %d, %v", len(got), err)
	}
	cons.Close()
	if got, err := cons.AppendPoll(guardCtx(t), dst[:1], 1); !errors.Is(err, tributary.ErrClosed) || len(got) != 1 {
		t.Fatalf("AppendPoll(closed) = %d, %v", len(got), err)
	}
}

// TestSendReportsTheRecordTime: a Send of a zero Time reports the time the
// broker stamped on the record (its clock, WithClock here), which the
// consumer receives; a Time of the caller's is kept.
func TestSendReportsTheRecordTime(t *testing.T) {
	at := time.Unix(5000, 0)
	c := testCluster(t, 10, engine.WithClock(testclock.At(at).Now))
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "m")
	own := time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)
	s1 := sendOK(t, pr, tp, tributary.Message[string]{Value: "a"})
	s2 := sendOK(t, pr, tp, tributary.Message[string]{Value: "b", Time: own})
	if !s1.Time.Equal(at) || !s2.Time.Equal(own) {
		t.Fatalf("sent times %v, %v; want %v, %v", s1.Time, s2.Time, at, own)
	}
	for _, want := range []time.Time{at, own} {
		m := pollOK(t, cons, 1)[0]
		if !m.Time.Equal(want) {
			t.Fatalf("received %v, want %v", m.Time, want)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMessagesIterates: the iterator yields every message in order, each
// in flight until the body acks it; a break releases the messages polled
// but not yielded (delivered again at once, Attempt + 1); a cancelled ctx
// yields its error once and ends the loop.
func TestMessagesIterates(t *testing.T) {
	_, cons := onePerPartition(t, 4, letters)
	var got []string
	for m, err := range cons.Messages(guardCtx(t)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Value)
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
		if len(got) == 2 {
			break // c and d were polled with a and b: released
		}
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("yielded %v", got)
	}
	ms, err := cons.TryPoll(4)
	if err != nil || len(ms) != 2 || ms[0].Value != "c" || ms[1].Value != "d" || ms[0].Attempt != 2 || ms[1].Attempt != 2 {
		t.Fatalf("after the break TryPoll = %+v, %v; want c and d released, attempt 2", ms, err)
	}
	for _, m := range ms {
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	n := 0
	for m, err := range cons.Messages(ctx) {
		n++
		if !errors.Is(err, context.Canceled) || m.ID != "" {
			t.Fatalf("step %d: %+v, %v; want the zero Message and context.Canceled", n, m, err)
		}
	}
	if n != 1 {
		t.Fatalf("%d steps after cancel, want 1", n)
	}
	cons.Close()
	for _, err := range cons.Messages(guardCtx(t)) {
		if !errors.Is(err, tributary.ErrClosed) {
			t.Fatalf("closed: %v", err)
		}
	}
}

// TestTypedRoundTripAllocations: the String codec's round trip allocates
// one message slice in TryPoll and nothing else (the IDs come from a
// shared block: AllocsPerRun's integer average shows 0), and nothing with
// a reused buffer; publishing allocates nothing. The same with Hooks added
// whose funcs are all nil, and with hooks of every per-record event that
// do nothing (Hooks cost nothing by themselves: an unset hook is a nil
// check).
func TestTypedRoundTripAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, hc := range []struct {
		name  string
		hooks []tributary.Hooks
	}{
		{"no hooks", nil},
		{"empty Hooks", []tributary.Hooks{{}}},
		{"per-record hooks", []tributary.Hooks{{
			// done is one func for every send: a closure made per send
			// would be the hook's own allocation.
			OnSend:    func(context.Context, *tributary.SendInfo) func(int64, error) { return sentNoop },
			OnDeliver: func(tributary.Delivery) {},
			OnAck:     func(tributary.Delivery) {},
			OnRetry:   func(tributary.Delivery, time.Duration) {},
		}}},
	} {
		t.Run(hc.name, func(t *testing.T) {
			c := testCluster(t, 1000)
			for _, h := range hc.hooks {
				c.AddHooks(h)
			}
			fresh, reused := roundTripAllocs(t, c)
			if fresh > 1 || reused > 0 {
				t.Fatalf("allocations per round trip: TryPoll %v (want ≤ 1), TryAppendPoll %v (want 0)", fresh, reused)
			}
		})
	}
}

// sentNoop is the per-record hooks' OnSend done func.
func sentNoop(int64, error) {}

// roundTripAllocs returns the allocations of a TrySend, TryPoll(1) and
// Ack round trip on c, and of one whose poll is TryAppendPoll into a
// reused slice.
func roundTripAllocs(t *testing.T, c *tributary.Cluster) (fresh, reused float64) {
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "m")
	msg := tributary.Message[string]{Value: "x"}
	roundTrip := func(poll func() []tributary.Message[string]) {
		if _, err := pr.TrySend(tp, msg); err != nil {
			t.Fatal(err)
		}
		ms := poll()
		if len(ms) != 1 {
			t.Fatalf("polled %d", len(ms))
		}
		if err := cons.Ack(ms[0]); err != nil {
			t.Fatal(err)
		}
	}
	fresh = testing.AllocsPerRun(2000, func() {
		roundTrip(func() []tributary.Message[string] {
			ms, err := cons.TryPoll(1)
			if err != nil {
				t.Fatal(err)
			}
			return ms
		})
	})
	var buf []tributary.Message[string]
	reused = testing.AllocsPerRun(2000, func() {
		roundTrip(func() []tributary.Message[string] {
			var err error
			if buf, err = cons.TryAppendPoll(buf[:0], 1); err != nil {
				t.Fatal(err)
			}
			return buf
		})
	})
	return fresh, reused
}

// TestMessagesLoopHeartbeats: a range loop over Messages whose body works
// for three session timeouts of the broker clock keeps the consumer's
// partitions (the consumer heartbeats while the loop runs, as under Run),
// and its message is acked; after the loop ends nothing heartbeats.
func TestMessagesLoopHeartbeats(t *testing.T) {
	c, clock := liveCluster(t)
	tp := testTopic(t, c, "orders", 2, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "slow"})
	cons := testConsumer(t, tp, "g", "slow")
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		for m, err := range cons.Messages(guardCtx(t)) {
			if err != nil {
				done <- err
				return
			}
			close(started)
			<-release
			done <- cons.Ack(m)
			return
		}
	}()
	select {
	case <-started:
	case <-time.After(guard):
		t.Fatal("the loop's body did not start")
	}
	for range 6 { // three session timeouts
		clock.Advance(liveSession / 2)
		awaitHeartbeats(t, c, clock, "orders", "g", "slow")
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Ack after the slow body: %v", err)
		}
	case <-time.After(guard):
		t.Fatal("the loop did not end")
	}
	if s := cons.Stats(); s.Expired != 0 || s.Heartbeats == 0 {
		t.Fatalf("stats %+v: want heartbeats and no expiry", s)
	}
	if g := groupDesc(t, c, "orders", "g"); g.Partitions[0].Committed != 1 || g.Partitions[0].Owner != "slow" {
		t.Fatalf("group %+v: want slow owning partition 0, its record committed", g)
	}
}
