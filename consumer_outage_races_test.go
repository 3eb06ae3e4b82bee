package tributary_test

// Outages against Run and the polls: an Ack failing as ctx is cancelled,
// retry timers and Goexit during a Retry outage, Close during an outage,
// a session that expires during one, Messages loops meeting one, and a
// consumer dropped mid-batch whose successor gets its records.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// outageSetup is a one-partition-per-record topic on an outageBackend,
// with n records sent.
func outageSetup(t *testing.T, partitions int32) (*outageBackend, *tributary.Cluster, *tributary.Topic[string]) {
	t.Helper()
	inner := testCluster(t, 10)
	b := &outageBackend{Backend: inner.Backend()}
	c, err := tributary.NewClusterOn(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tp := testTopic(t, c, "t", partitions, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	for p := range partitions {
		sendOK(t, pr, tp, tributary.Message[string]{Partition: p, Value: digits(p)})
	}
	return b, c, tp
}

// TestMessagesReleaseDuringOutage: a Messages loop that breaks after its
// first message while Retry fails with ErrUnavailable cannot release the
// batch's rest; they must come again once the backend answers (to a
// TryPoll of the same consumer), not stay in flight to nobody.
func TestMessagesReleaseDuringOutage(t *testing.T) {
	b, _, tp := outageSetup(t, 4)
	cons := testConsumer(t, tp, "g", "m", tributary.WithBatch(4))
	var held tributary.Message[string]
	for m, err := range cons.Messages(guardCtx(t)) {
		if err != nil {
			t.Fatal(err)
		}
		held = m
		b.retryDown.Store(true)
		break
	}
	b.retryDown.Store(false)
	if b.retries.Load() == 0 {
		t.Fatal("no Retry failed: the outage was not exercised")
	}
	if err := cons.Ack(held); err != nil {
		t.Fatal(err)
	}
	ms, err := cons.TryPoll(4)
	if err != nil {
		t.Fatal(err)
	}
	// The release that met the outage is made by this poll, first.
	if len(ms) != 3 {
		t.Fatalf("after the outage TryPoll = %d messages, want the 3 the loop did not yield", len(ms))
	}
	for _, m := range ms {
		if m.Attempt != 2 {
			t.Fatalf("released %+v, want attempt 2", m)
		}
	}
}

// TestMessagesPollOutageYieldsTheError: a Messages loop whose poll hits an
// outage yields the error (wrapping ErrUnavailable) and ends, keeping
// nothing in flight: the records come after the outage.
func TestMessagesPollOutageYieldsTheError(t *testing.T) {
	b, _, tp := outageSetup(t, 2)
	cons := testConsumer(t, tp, "g", "m", tributary.WithBatch(2))
	b.pollDown.Store(true)
	steps := 0
	for _, err := range cons.Messages(guardCtx(t)) {
		steps++
		if !errors.Is(err, tributary.ErrUnavailable) {
			t.Fatalf("step %d: %v, want ErrUnavailable", steps, err)
		}
	}
	if steps != 1 {
		t.Fatalf("%d steps, want 1", steps)
	}
	b.pollDown.Store(false)
	dst := make([]tributary.Message[string], 1, 8)
	dst, err := cons.AppendPoll(guardCtx(t), dst, 2)
	if err != nil || len(dst) != 3 {
		t.Fatalf("AppendPoll after the outage: %d, %v; want the 1 kept + 2", len(dst), err)
	}
	b.pollDown.Store(true)
	out, err := cons.AppendPoll(guardCtx(t), dst[:1], 2)
	if !errors.Is(err, tributary.ErrUnavailable) || len(out) != 1 {
		t.Fatalf("AppendPoll in an outage = %d, %v; want dst unchanged and ErrUnavailable", len(out), err)
	}
}

// TestRunAckOutageAtCancel: ctx is cancelled while the handler's Ack
// fails with ErrUnavailable. Run returns within the stop grace (plus the
// guard), and the record, unacked, is delivered again to the next member
// of the group once the backend answers.
func TestRunAckOutageAtCancel(t *testing.T) {
	b, c, tp := outageSetup(t, 1)
	cons, err := tributary.NewConsumer(tp, "g", "m", tributary.WithStopGrace(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(ctx, func(context.Context, tributary.Message[string]) error {
			b.ackDown.Store(true)
			cancel()
			return nil
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) && err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(guard):
		t.Fatal("Run did not return after cancel during an ack outage")
	}
	b.ackDown.Store(false)
	if got := committedAll(t, c, "g"); got[0] != 0 {
		t.Fatalf("committed %v: the ack was lost but is counted", got)
	}
	next := testConsumer(t, tp, "g", "m2")
	ms := pollOK(t, next, 1)
	if len(ms) != 1 || ms[0].Attempt != 2 {
		t.Fatalf("successor got %+v, want the record again, attempt 2", ms)
	}
}

// TestRunOutageDuringHandlerAndRetryTimer: an outage of polls, acks and
// retries starts while the handler runs (failing its first attempt) and
// ends later; every record is handled until acked, none lost.
func TestRunOutageDuringHandlerAndRetryTimer(t *testing.T) {
	b, c, tp := outageSetup(t, 3)
	cons, err := tributary.NewConsumer(tp, "g", "m", tributary.WithBackoff(time.Millisecond, time.Millisecond), tributary.WithBatch(3))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	acked := map[int32]bool{}
	err = cons.Run(ctx, func(_ context.Context, m tributary.Message[string]) error {
		if m.Attempt == 1 {
			b.pollDown.Store(true)
			b.ackDown.Store(true)
			b.retryDown.Store(true)
			time.AfterFunc(150*time.Millisecond, func() {
				b.pollDown.Store(false)
				b.ackDown.Store(false)
				b.retryDown.Store(false)
			})
			return fmt.Errorf("attempt 1 of %d fails", m.Partition)
		}
		acked[m.Partition] = true
		if len(acked) == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v (acked %v)", err, acked)
	}
	if got := committedAll(t, c, "g"); got[0]+got[1]+got[2] < 2 {
		// the last Ack races with cancel: at least the other two are committed
		t.Fatalf("committed %v", got)
	}
}

// TestRunCloseDuringOutage: Close while Run waits out a poll outage makes
// Run return nil promptly; TestMain's goleak checks no goroutine is left.
func TestRunCloseDuringOutage(t *testing.T) {
	b, _, tp := outageSetup(t, 1)
	b.pollDown.Store(true)
	cons, err := tributary.NewConsumer(tp, "g", "m")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(context.Background(), func(context.Context, tributary.Message[string]) error { return nil })
	}()
	for b.polls.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	cons.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after Close = %v, want nil", err)
		}
	case <-time.After(guard):
		t.Fatal("Run did not return after Close during an outage")
	}
}

// TestRunGoexitDuringRetryOutage: a handler that calls runtime.Goexit
// while Retry is down: its record is retried once the backend answers
// and then acked.
func TestRunGoexitDuringRetryOutage(t *testing.T) {
	b, c, tp := outageSetup(t, 1)
	cons, err := tributary.NewConsumer(tp, "g", "m", tributary.WithBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	err = cons.Run(ctx, func(_ context.Context, m tributary.Message[string]) error {
		if m.Attempt == 1 {
			b.retryDown.Store(true)
			time.AfterFunc(150*time.Millisecond, func() { b.retryDown.Store(false) })
			runtime.Goexit()
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if b.retries.Load() == 0 {
		t.Fatal("no Retry failed")
	}
	if got := committedAll(t, c, "g"); got[0] != 1 {
		t.Fatalf("committed %v, want 1", got)
	}
}

// TestAbandonedConsumerSuccessorGetsInFlight: a consumer dropped without
// Close, its records polled and its Run still running on a ctx never
// cancelled, is superseded by a NewConsumer of its name: the successor
// gets every in-flight record again, and the old Run ends fenced.
func TestAbandonedConsumerSuccessorGetsInFlight(t *testing.T) {
	_, _, tp := outageSetup(t, 3)
	old, err := tributary.NewConsumer(tp, "g", "m", tributary.WithBatch(3))
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{}, 3)
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- old.Run(context.Background(), func(context.Context, tributary.Message[string]) error {
			held <- struct{}{}
			<-release
			return nil
		})
	}()
	<-held // one record in the handler, two more polled behind it
	old = nil
	succ := testConsumer(t, tp, "g", "m", tributary.WithBatch(3))
	ms := pollOK(t, succ, 3)
	if len(ms) != 3 {
		t.Fatalf("successor got %d records, want the 3 in flight to its predecessor", len(ms))
	}
	close(release)
	select {
	case err := <-done:
		if !errors.Is(err, tributary.ErrFenced) {
			t.Fatalf("old Run = %v, want ErrFenced", err)
		}
	case <-time.After(guard):
		t.Fatal("old Run did not end once fenced")
	}
	for _, m := range ms {
		if err := succ.Ack(m); err != nil {
			t.Fatalf("successor's Ack: %v", err)
		}
	}
}

// sessionDownBackend is a backend whose members' Poll, Heartbeat and Ack
// fail with ErrUnavailable while down is set.
// While hbDown is set Heartbeat fails too; with hbAfterExpiry, hbDown is
// cleared 300 ms after a Poll first finds the member expired (ErrClosed),
// so the consumer's rejoin meets the outage.
type sessionDownBackend struct {
	tributary.Backend
	down, hbDown  atomic.Bool
	hbAfterExpiry bool
	expiredSeen   atomic.Bool
	fails         atomic.Int64
}

func (b *sessionDownBackend) OpenTopic(topic string) (tributary.BackendTopic, string, error) {
	t, pt, err := b.Backend.OpenTopic(topic)
	if err != nil {
		return nil, pt, err
	}
	return sessionDownTopic{t, b}, pt, nil
}

type sessionDownTopic struct {
	tributary.BackendTopic
	b *sessionDownBackend
}

func (t sessionDownTopic) Member(group, member string) (tributary.BackendMember, error) {
	m, err := t.BackendTopic.Member(group, member)
	if err != nil {
		return nil, err
	}
	return sessionDownMember{m, t.b}, nil
}

type sessionDownMember struct {
	tributary.BackendMember
	b *sessionDownBackend
}

func (m sessionDownMember) Poll(ctx context.Context, stop <-chan struct{}, dst []engine.Record, max int32) ([]engine.Record, error) {
	if m.b.down.Load() {
		m.b.fails.Add(1)
		time.Sleep(time.Millisecond)
		return dst, errDown
	}
	recs, err := m.BackendMember.Poll(ctx, stop, dst, max)
	if errors.Is(err, tributary.ErrClosed) && m.b.hbAfterExpiry && m.b.expiredSeen.CompareAndSwap(false, true) {
		time.AfterFunc(300*time.Millisecond, func() { m.b.hbDown.Store(false) })
	}
	return recs, err
}

func (m sessionDownMember) Heartbeat() (bool, error) {
	if m.b.down.Load() || m.b.hbDown.Load() {
		m.b.fails.Add(1)
		return false, errDown
	}
	return m.BackendMember.Heartbeat()
}

func (m sessionDownMember) Ack(p int32, off int64) (bool, error) {
	if m.b.down.Load() {
		m.b.fails.Add(1)
		return false, errDown
	}
	return m.BackendMember.Ack(p, off)
}

// TestRunSessionExpiresDuringOutage: the consumer's session expires while
// the backend is unreachable (its heartbeats, its handler's Ack and its
// polls all fail). Once the backend answers, Run finds itself expired,
// joins again and goes on: the record whose ack was lost comes again
// (attempt 2) and the next one is handled; Run does not end with an error.
// In "rejoin meets the outage" the heartbeats stay down after the polls
// come back, so Run's rejoin (drive's, which heartbeats first) fails with
// ErrUnavailable: it must be waited out as a poll's is, not end Run.
func TestRunSessionExpiresDuringOutage(t *testing.T) {
	t.Run("all back at once", func(t *testing.T) { sessionExpiresDuringOutage(t, false) })
	t.Run("rejoin meets the outage", func(t *testing.T) { sessionExpiresDuringOutage(t, true) })
}

func sessionExpiresDuringOutage(t *testing.T, hbAfterExpiry bool) {
	clock := testclock.New()
	inner := testCluster(t, 100, engine.WithClock(clock.Now), engine.WithSessionTimeout(liveSession))
	b := &sessionDownBackend{Backend: inner.Backend(), hbAfterExpiry: hbAfterExpiry}
	c, err := tributary.NewClusterOn(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tp := testTopic(t, c, "orders", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "a"})
	sendOK(t, pr, tp, tributary.Message[string]{Value: "b"})
	cons, err := tributary.NewConsumer(tp, "g", "m", tributary.WithBatch(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	var h handled
	done := runAsync(ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
		h.add(m)
		if m.Offset == 0 && m.Attempt == 1 {
			b.down.Store(true)
			b.hbDown.Store(hbAfterExpiry)
			clock.Advance(2 * liveSession)
			time.AfterFunc(200*time.Millisecond, func() { b.down.Store(false) })
		}
		if m.Offset == 1 {
			cancel()
		}
		return nil
	})
	err = awaitDone(t, done, 2*guard, "Run")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled after handling both (handled %v)", err, h.get())
	}
	got := h.get()
	if b.fails.Load() == 0 {
		t.Fatal("the outage was not exercised")
	}
	if !slices.Contains(got, "0/1 b #1") {
		t.Fatalf("handled %v: b never handled", got)
	}
	if s := cons.Stats(); s.Expired == 0 || !slices.Contains(got, "0/0 a #2") {
		t.Fatalf("handled %v; stats %+v: want an expiry, a rejoin and a again (#2)", got, s)
	}
}
