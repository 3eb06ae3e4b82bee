package tributary_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
)

// hookLog records the events of a cluster's Hooks as lines such as
// "ack orders/0@1 g/c1 attempt 1", in the order they came.
type hookLog struct {
	mu     sync.Mutex // guards events
	events []string
}

func (l *hookLog) add(format string, args ...any) {
	l.mu.Lock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// with returns the recorded events that start with prefix.
func (l *hookLog) with(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// ctxKey is the key of the context value the recording OnProcess sets.
type ctxKey struct{}

// hooks returns Hooks recording every event in l. OnSend adds the header
// "trace: <topic>-<n>"; OnProcess gives the handler a context holding
// the delivery's ID under ctxKey.
func (l *hookLog) hooks() tributary.Hooks {
	var n int
	var mu sync.Mutex
	rec := func(d tributary.Delivery) string {
		return fmt.Sprintf("%s/%d@%d %s/%s attempt %d", d.Topic, d.Partition, d.Offset, d.Group, d.Member, d.Attempt)
	}
	return tributary.Hooks{
		OnSend: func(ctx context.Context, s *tributary.SendInfo) func(int64, error) {
			mu.Lock()
			n++
			v := fmt.Sprintf("%s-%d", s.Topic, n)
			mu.Unlock()
			s.Headers = append(s.Headers, tributary.Header{Key: "trace", Value: v})
			return func(off int64, err error) { l.add("sent %s/%d@%d %v", s.Topic, s.Partition, off, err) }
		},
		OnWaitForRoom: func(topic string, p int32) { l.add("wait %s/%d", topic, p) },
		OnDeliver:     func(d tributary.Delivery) { l.add("deliver %s", rec(d)) },
		OnProcess: func(ctx context.Context, d tributary.Delivery) (context.Context, func(error, time.Duration)) {
			l.add("process %s", rec(d))
			return context.WithValue(ctx, ctxKey{}, d.ID), func(err error, _ time.Duration) { l.add("processed %s %v", rec(d), err) }
		},
		OnAck:   func(d tributary.Delivery) { l.add("ack %s", rec(d)) },
		OnRetry: func(d tributary.Delivery, b time.Duration) { l.add("retry %s %v", rec(d), b) },
		OnDeadLetter: func(d tributary.Delivery, topic string, cause error) {
			l.add("dlq %s to %s: %v", rec(d), topic, cause)
		},
		OnAssigned: func(r tributary.Rebalance) { l.add("assigned %s %s/%s %v", r.Topic, r.Group, r.Member, r.Partitions) },
		OnRevoked:  func(r tributary.Rebalance) { l.add("revoked %s %s/%s %v", r.Topic, r.Group, r.Member, r.Partitions) },
		OnExpired:  func(m tributary.MemberRef) { l.add("expired %s %s/%s", m.Topic, m.Group, m.Member) },
		OnOutage:   func(o tributary.Outage) { l.add("outage %v", o.Ended) },
	}
}

// TestHooksRun: a producer and a running consumer whose handler fails
// one record once and another for good (dead-lettered after 2 attempts)
// make exactly the events Hooks documents: each send with its header
// added and seen by the handler, each delivery, each handler call around
// the handler with the context OnProcess returned, the acks, the retries
// with their backoff, the dead letter, and the consumer's assignment when
// it joins, when a second consumer takes a partition, and when it closes.
func TestHooksRun(t *testing.T) {
	c := testCluster(t, 100)
	var log hookLog
	c.AddHooks(log.hooks())
	tp := testTopic(t, c, "orders", 2, tributary.String())
	testTopic(t, c, "orders-dlq", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons, err := tributary.NewConsumer(tp, "g", "c1",
		tributary.WithDeadLetter("orders-dlq", 2), tributary.WithBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if got := log.with("assigned"); !slices.Equal(got, []string{"assigned orders g/c1 [0 1]"}) {
		t.Fatalf("after joining: %q", got)
	}
	for i, v := range []string{"ok", "flaky", "poison"} {
		sendOK(t, pr, tp, tributary.Message[string]{Partition: int32(i % 2), Value: v, Headers: []tributary.Header{{Key: "k", Value: v}}})
	}
	var (
		mu      sync.Mutex
		seen    = map[string][]string{} // value → the trace headers and context IDs the handler saw
		flakyN  int
		handled = make(chan struct{}, 16)
	)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(ctx, func(hctx context.Context, m tributary.Message[string]) error {
			mu.Lock()
			defer mu.Unlock()
			defer func() { handled <- struct{}{} }()
			var trace string
			for _, h := range m.Headers {
				if h.Key == "trace" {
					trace = h.Value
				}
			}
			id, _ := hctx.Value(ctxKey{}).(string)
			seen[m.Value] = append(seen[m.Value], trace+" "+id)
			switch m.Value {
			case "flaky":
				if flakyN++; flakyN == 1 {
					return errors.New("once")
				}
			case "poison":
				return errors.New("never")
			}
			return nil
		})
	}()
	// ok 1, flaky 2, poison 2 handler calls.
	for range 5 {
		select {
		case <-handled:
		case <-time.After(guard):
			t.Fatal("the handler was not called five times")
		}
	}
	waitFor(t, "three acks (ok, flaky, the dead letter)", func() bool { return len(log.with("ack")) == 3 })

	if got, want := log.with("sent"), []string{"sent orders/0@0 <nil>", "sent orders/1@0 <nil>", "sent orders/0@1 <nil>"}; !slices.Equal(got, want) {
		t.Errorf("sent: %q, want %q", got, want)
	}
	mu.Lock()
	want := map[string][]string{
		"ok":     {"orders-1 0-0"},
		"flaky":  {"orders-2 1-0", "orders-2 1-0"},
		"poison": {"orders-3 0-1", "orders-3 0-1"},
	}
	for v, w := range want {
		if !slices.Equal(seen[v], w) {
			t.Errorf("handler saw %s with trace and context ID %q, want %q", v, seen[v], w)
		}
	}
	mu.Unlock()
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"deliver", []string{"deliver orders/0@0 g/c1 attempt 1", "deliver orders/0@1 g/c1 attempt 1", "deliver orders/0@1 g/c1 attempt 2",
			"deliver orders/1@0 g/c1 attempt 1", "deliver orders/1@0 g/c1 attempt 2"}},
		{"processed", []string{"processed orders/0@0 g/c1 attempt 1 <nil>", "processed orders/0@1 g/c1 attempt 1 never",
			"processed orders/0@1 g/c1 attempt 2 never", "processed orders/1@0 g/c1 attempt 1 once", "processed orders/1@0 g/c1 attempt 2 <nil>"}},
		{"ack", []string{"ack orders/0@0 g/c1 attempt 1", "ack orders/0@1 g/c1 attempt 2", "ack orders/1@0 g/c1 attempt 2"}},
		{"retry", []string{"retry orders/0@1 g/c1 attempt 1 1ms", "retry orders/1@0 g/c1 attempt 1 1ms"}},
		{"dlq", []string{"dlq orders/0@1 g/c1 attempt 2 to orders-dlq: never"}},
	} {
		got := log.with(c.prefix)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s events: %q, want %q", c.prefix, got, c.want)
		}
	}
	if n := len(log.with("process ")); n != 5 {
		t.Errorf("%d OnProcess calls, want 5", n)
	}

	// A second consumer takes partition 1; c1 sees it revoked at its next
	// poll, which a record on partition 0 makes.
	c2, err := tributary.NewConsumer(tp, "g", "c2", tributary.WithDeadLetter("orders-dlq", 2), tributary.WithBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "ok"})
	waitFor(t, "c1's revocation", func() bool { return len(log.with("revoked orders g/c1")) == 1 })
	if got := log.with("revoked"); !slices.Equal(got, []string{"revoked orders g/c1 [1]"}) {
		t.Errorf("revoked: %q", got)
	}
	if got := log.with("assigned orders g/c2"); !slices.Equal(got, []string{"assigned orders g/c2 [1]"}) {
		t.Errorf("c2 assigned: %q", got)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if got := log.with("revoked orders g/c1"); !slices.Equal(got, []string{"revoked orders g/c1 [1]", "revoked orders g/c1 [0]"}) {
		t.Errorf("c1 revoked after Run ended: %q", got)
	}
	c2.Close()
}

// TestHooksManualAndWait: Poll, Ack, Retry and Nack by hand call
// OnDeliver, OnAck, OnRetry (backoff 0) and OnDeadLetter; a Send to a
// full partition calls OnWaitForRoom once before it waits, and its done
// func when the ack made room; TrySend to a full partition calls done
// with offset −1 and ErrPartitionFull.
func TestHooksManualAndWait(t *testing.T) {
	c := testCluster(t, 1)
	var log hookLog
	c.AddHooks(log.hooks())
	tp := testTopic(t, c, "orders", 1, tributary.String())
	testTopic(t, c, "dlq", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	m, err := tributary.NewConsumer(tp, "g", "m", tributary.WithDeadLetter("dlq", 2))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sendOK(t, pr, tp, tributary.Message[string]{Value: "a"})
	if _, err := pr.TrySend(tp, tributary.Message[string]{Value: "b"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("TrySend to a full partition: %v", err)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := pr.Send(context.Background(), tp, tributary.Message[string]{Value: "c"})
		sent <- err
	}()
	waitFor(t, "OnWaitForRoom", func() bool { return len(log.with("wait")) == 1 })
	got, err := m.TryPoll(1)
	if err != nil || len(got) != 1 {
		t.Fatalf("TryPoll: %v, %v", got, err)
	}
	if err := m.Retry(got[0]); err != nil {
		t.Fatal(err)
	}
	got, err = m.TryPoll(1)
	if err != nil || len(got) != 1 {
		t.Fatalf("TryPoll: %v, %v", got, err)
	}
	if dl, err := m.Nack(context.Background(), got[0], errors.New("bad")); err != nil || !dl {
		t.Fatalf("Nack: %v, %v", dl, err)
	}
	if err := <-sent; err != nil {
		t.Fatalf("Send: %v", err)
	}
	got, err = m.TryPoll(1)
	if err != nil || len(got) != 1 {
		t.Fatalf("TryPoll: %v, %v", got, err)
	}
	if err := m.Ack(got[0]); err != nil {
		t.Fatal(err)
	}
	if err := m.Ack(got[0]); !errors.Is(err, tributary.ErrNotInFlight) {
		t.Fatalf("second Ack: %v", err)
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"sent", []string{"sent orders/0@0 <nil>", "sent orders/0@-1 tributary: partition full: topic \"orders\" partition 0", "sent orders/0@1 <nil>"}},
		{"wait", []string{"wait orders/0"}},
		{"deliver", []string{"deliver orders/0@0 g/m attempt 1", "deliver orders/0@0 g/m attempt 2", "deliver orders/0@1 g/m attempt 1"}},
		{"retry", []string{"retry orders/0@0 g/m attempt 1 0s"}},
		{"dlq", []string{"dlq orders/0@0 g/m attempt 2 to dlq: bad"}},
		{"ack", []string{"ack orders/0@0 g/m attempt 2", "ack orders/0@1 g/m attempt 1"}},
		{"process", nil},
	} {
		if got := log.with(c.prefix); !slices.Equal(got, c.want) {
			t.Errorf("%s events: %q, want %q", c.prefix, got, c.want)
		}
	}
}

// TestHooksExpired: a consumer whose session ran out finds it at its next
// poll: OnExpired, its partitions revoked, then assigned again as it
// joins again.
func TestHooksExpired(t *testing.T) {
	c, clock := liveCluster(t)
	var log hookLog
	c.AddHooks(log.hooks())
	tp := testTopic(t, c, "orders", 1, tributary.String())
	m := testConsumer(t, tp, "g", "m")
	clock.Advance(liveSession)
	if got, err := m.TryPoll(1); err != nil || len(got) != 0 {
		t.Fatalf("TryPoll: %v, %v", got, err)
	}
	if s := m.Stats(); s.Expired != 1 {
		t.Fatalf("Expired %d, want 1", s.Expired)
	}
	want := []string{"assigned orders g/m [0]", "expired orders g/m", "revoked orders g/m [0]", "assigned orders g/m [0]"}
	log.mu.Lock()
	got := slices.Clone(log.events)
	log.mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// TestHooksSeveralInOrder: two Hooks added to a cluster are called in the
// order added; OnProcess contexts nest (the second gets the first's),
// and their end funcs run in reverse.
func TestHooksSeveralInOrder(t *testing.T) {
	c := testCluster(t, 10)
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	for _, name := range []string{"first", "second"} {
		c.AddHooks(tributary.Hooks{
			OnSend: func(context.Context, *tributary.SendInfo) func(int64, error) {
				note("send " + name)
				return func(int64, error) { note("sent " + name) }
			},
			OnProcess: func(ctx context.Context, _ tributary.Delivery) (context.Context, func(error, time.Duration)) {
				prev, _ := ctx.Value(ctxKey{}).(string)
				note("process " + name + " after " + prev)
				return context.WithValue(ctx, ctxKey{}, name), func(error, time.Duration) { note("end " + name) }
			},
		})
	}
	tp := testTopic(t, c, "orders", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "a"})
	cons := testConsumer(t, tp, "g", "m")
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	var inHandler string
	err := cons.Run(ctx, func(hctx context.Context, _ tributary.Message[string]) error {
		mu.Lock()
		inHandler, _ = hctx.Value(ctxKey{}).(string)
		mu.Unlock()
		cons.Close()
		return nil
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Run returned at the Close, its worker still ending the handler's
	// step.
	waitFor(t, "the end funcs", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 8 })
	want := []string{"send first", "send second", "sent second", "sent first",
		"process first after ", "process second after first", "end second", "end first"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, want) || inHandler != "second" {
		t.Fatalf("order %q, handler context %q; want %q, second", order, inHandler, want)
	}
}

// TestLogHooks: LogHooks logs a rebalance at Info, a dead letter at Warn
// and per-record events at Debug only, and a nil logger gives empty
// Hooks.
func TestLogHooks(t *testing.T) {
	if h := tributary.LogHooks(nil); h.OnSend != nil || h.OnDeliver != nil || h.OnAssigned != nil {
		t.Fatal("LogHooks(nil) has hooks")
	}
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		c := testCluster(t, 10)
		c.AddHooks(tributary.LogHooks(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))))
		tp := testTopic(t, c, "orders", 1, tributary.String())
		testTopic(t, c, "dlq", 1, tributary.String())
		pr := testProducer[string](t, c, "p", tributary.Manual())
		sendOK(t, pr, tp, tributary.Message[string]{Value: "a"})
		m, err := tributary.NewConsumer(tp, "g", "m", tributary.WithDeadLetter("dlq", 1))
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.TryPoll(1)
		if err != nil || len(got) != 1 {
			t.Fatalf("TryPoll: %v, %v", got, err)
		}
		if _, err := m.Nack(context.Background(), got[0], errors.New("bad")); err != nil {
			t.Fatal(err)
		}
		m.Close()
		out := buf.String()
		for _, want := range []string{
			`level=INFO msg="tributary: partitions assigned" topic=orders group=g member=m partitions=[0]`,
			`level=WARN msg="tributary: dead letter" topic=orders group=g member=m partition=0 offset=0 attempt=1 dead_letter_topic=dlq error=bad`,
			`level=INFO msg="tributary: partitions revoked" topic=orders group=g member=m partitions=[0]`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("level %v: log lacks %q:\n%s", level, want, out)
			}
		}
		debug := strings.Contains(out, "level=DEBUG")
		if debug != (level == slog.LevelDebug) {
			t.Errorf("level %v: Debug records logged %v:\n%s", level, debug, out)
		}
		if level == slog.LevelDebug {
			for _, want := range []string{`msg="tributary: sent" producer=p topic=orders partition=0 offset=0`, `msg="tributary: delivered"`, `msg="tributary: acked"`} {
				if !strings.Contains(out, want) {
					t.Errorf("debug log lacks %q:\n%s", want, out)
				}
			}
		}
	}
}
