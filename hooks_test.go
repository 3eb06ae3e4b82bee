package tributary_test

// The library's Hooks (hooks.go): the events of Run, of the manual polls and
// of sends in the order they come, several hooks in order, LogHooks' lines;
// OnProcess's end once per record (a handler's Goexit included), OnSend's
// done once per send on every path, hooks that call back into the library,
// and a hook that adds the reserved payload-type header.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
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

// BenchmarkHooks is the String round trip (TrySend, TryPoll, Ack) with no
// hooks, with Hooks whose funcs are all nil, with LogHooks at Info (a
// production logger: nothing per record is logged) and with hooks of
// every per-record event that do nothing: what the hooks themselves cost.
// Compare the sub-benchmarks of one run (go test -bench Hooks -count 5,
// benchstat), not runs of different days.
func BenchmarkHooks(b *testing.B) {
	info := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	noop := tributary.Hooks{
		OnSend:    func(context.Context, *tributary.SendInfo) func(int64, error) { return nil },
		OnDeliver: func(tributary.Delivery) {},
		OnAck:     func(tributary.Delivery) {},
	}
	for _, bc := range []struct {
		name  string
		hooks []tributary.Hooks
	}{
		{"none", nil},
		{"empty", []tributary.Hooks{{}}},
		{"LogHooks-info", []tributary.Hooks{tributary.LogHooks(info)}},
		{"noop-per-record", []tributary.Hooks{noop}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := testCluster(b, 1000)
			for _, h := range bc.hooks {
				c.AddHooks(h)
			}
			tp := testTopic(b, c, "t", 1, tributary.String())
			pr := testProducer[string](b, c, "p", tributary.Manual())
			cons := testConsumer(b, tp, "g", "m")
			msg := tributary.Message[string]{Value: "x"}
			var buf []tributary.Message[string]
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pr.TrySend(tp, msg); err != nil {
					b.Fatal(err)
				}
				var err error
				if buf, err = cons.TryAppendPoll(buf[:0], 1); err != nil || len(buf) != 1 {
					b.Fatal(len(buf), err)
				}
				if err := cons.Ack(buf[0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestProcessEndOnGoexit: a handler that calls runtime.Goexit
// (t.FailNow in a handler) fails its record; OnProcess's end is called
// once, with an error, not as a success.
func TestProcessEndOnGoexit(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "orders", 1, tributary.String())
	var mu sync.Mutex
	var ends []error
	c.AddHooks(tributary.Hooks{OnProcess: func(ctx context.Context, d tributary.Delivery) (context.Context, func(error, time.Duration)) {
		return ctx, func(err error, _ time.Duration) {
			mu.Lock()
			ends = append(ends, err)
			mu.Unlock()
		}
	}})
	sendOK(t, testProducer[string](t, c, "p", tributary.Manual()), tp, tributary.Message[string]{Partition: 0, Value: "v"})
	m, err := tributary.NewConsumer(tp, "g", "m", tributary.WithBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	err = m.Run(ctx, func(_ context.Context, msg tributary.Message[string]) error {
		if msg.Attempt == 1 {
			runtime.Goexit()
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ends) != 2 || ends[0] == nil || ends[1] != nil {
		t.Fatalf("end funcs called with %v, want [an error, <nil>]", ends)
	}
}

// TestSendDoneOncePerSend: every send that reaches OnSend gets
// its done exactly once, with the send's error, on every path: a
// publish, TrySend on a full partition, Send cancelled or its producer
// or cluster closed while it waits for room, a record over
// WithMaxMessageBytes; the sends refused before it (closed producer, bad
// partition, reserved header) get neither.
func TestSendDoneOncePerSend(t *testing.T) {
	c := testCluster(t, 1, engine.WithMaxMessageBytes(64))
	tp := testTopic(t, c, "orders", 1, tributary.String())
	var mu sync.Mutex
	var starts, dones int
	var errs []error
	c.AddHooks(tributary.Hooks{OnSend: func(context.Context, *tributary.SendInfo) func(int64, error) {
		mu.Lock()
		starts++
		mu.Unlock()
		return func(off int64, err error) {
			mu.Lock()
			dones++
			errs = append(errs, err)
			mu.Unlock()
			if (err == nil) != (off >= 0) {
				t.Errorf("done(%d, %v)", off, err)
			}
		}
	}})
	check := func(what string, wantStarts int, wantErr error) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if starts != wantStarts || dones != wantStarts {
			t.Fatalf("%s: %d OnSend, %d done, want %d of each", what, starts, dones, wantStarts)
		}
		if wantErr != nil && !errors.Is(errs[len(errs)-1], wantErr) {
			t.Fatalf("%s: done's error %v, want %v", what, errs[len(errs)-1], wantErr)
		}
	}
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, tp, tributary.Message[string]{Partition: 0, Value: "fills"})
	check("publish", 1, nil)
	if _, err := p.TrySend(tp, tributary.Message[string]{Value: "full"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatal(err)
	}
	check("TrySend full", 2, tributary.ErrPartitionFull)
	if _, err := p.TrySend(tp, tributary.Message[string]{Value: strings.Repeat("x", 100)}); err == nil {
		t.Fatal("a record over WithMaxMessageBytes was published")
	}
	check("too big", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Send(ctx, tp, tributary.Message[string]{Value: "waits"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	check("Send cancelled waiting", 4, context.DeadlineExceeded)
	for _, closer := range []string{"producer", "cluster"} {
		pc := testProducer[string](t, c, "p-"+closer, tributary.Manual())
		sent := make(chan error, 1)
		go func() {
			_, err := pc.Send(context.Background(), tp, tributary.Message[string]{Value: "waits"})
			sent <- err
		}()
		for {
			mu.Lock()
			n := starts
			mu.Unlock()
			if n == 5 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if closer == "producer" {
			pc.Close() //nolint:errcheck // the Send's error is checked
		} else {
			c.Close()
		}
		if err := <-sent; !errors.Is(err, tributary.ErrClosed) {
			t.Fatalf("Send while its %s closes: %v", closer, err)
		}
		check("Send while its "+closer+" closes", 5, tributary.ErrClosed)
		mu.Lock()
		starts, dones = 4, 4
		mu.Unlock()
	}
	// Refused before OnSend.
	if _, err := p.TrySend(tp, tributary.Message[string]{Partition: 7, Value: "v"}); err == nil {
		t.Fatal("partition 7 accepted")
	}
	if _, err := p.TrySend(tp, tributary.Message[string]{Value: "v", Headers: []tributary.Header{{Key: tributary.HeaderPayloadType, Value: "x"}}}); err == nil {
		t.Fatal("reserved header accepted")
	}
	check("refused", 4, nil)
}

// TestReentrantHooks: hooks that call back into the library —
// OnDeliver acking its own delivery by hand and sending, OnAck adding
// hooks, OnSend describing the topic — and AddHooks racing with traffic
// (run under -race) neither deadlock nor lose an event.
func TestReentrantHooks(t *testing.T) {
	c := testCluster(t, 1000)
	tp := testTopic(t, c, "orders", 2, tributary.String())
	out := testTopic(t, c, "out", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	fwd := testProducer[string](t, c, "fwd", tributary.Manual())
	var m *tributary.Consumer[string]
	var mu sync.Mutex
	var acks, added int
	c.AddHooks(tributary.Hooks{
		OnSend: func(_ context.Context, s *tributary.SendInfo) func(int64, error) {
			if _, err := c.Describe(s.Topic); err != nil {
				t.Error(err)
			}
			return nil
		},
		OnDeliver: func(d tributary.Delivery) {
			if d.Topic != "orders" {
				return
			}
			if _, err := fwd.TrySend(out, tributary.Message[string]{Value: d.ID}); err != nil {
				t.Error(err)
			}
		},
		OnAck: func(tributary.Delivery) {
			mu.Lock()
			acks++
			mu.Unlock()
			c.AddHooks(tributary.Hooks{OnAck: func(tributary.Delivery) { mu.Lock(); added++; mu.Unlock() }})
		},
	})
	var err error
	if m, err = tributary.NewConsumer(tp, "g", "m"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // AddHooks racing with the traffic
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				c.AddHooks(tributary.Hooks{OnDeliver: func(tributary.Delivery) {}})
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	const n = 50
	for i := range n {
		sendOK(t, p, tp, tributary.Message[string]{Partition: int32(i % 2), Value: "v"})
	}
	got := 0
	within(t, "poll and ack from hooks", func() {
		for got < n {
			msgs, err := m.TryPoll(10)
			if err != nil {
				t.Error(err)
				return
			}
			for _, msg := range msgs {
				if err := m.Ack(msg); err != nil {
					t.Error(err)
				}
				got++
			}
		}
	})
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if acks != n || added == 0 {
		t.Errorf("%d OnAck, %d by the hooks added from OnAck; want %d and some", acks, added, n)
	}
	if d, err := c.Describe("out"); err != nil || d.Partitions[0].LogEndOffset != n {
		t.Errorf("out: %+v, %v; want %d records forwarded by OnDeliver", d.Partitions, err, n)
	}
}

// TestSendHookReservedHeader: an OnSend hook that adds the
// reserved HeaderPayloadType header (Hooks: it must not) makes the send
// fail with ErrInvalidArgument, as the same header in the Message does,
// instead of publishing a record whose consumers read the hook's value
// as its payload type.
func TestSendHookReservedHeader(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "orders", 1, tributary.String())
	var doneErr error
	c.AddHooks(tributary.Hooks{OnSend: func(_ context.Context, s *tributary.SendInfo) func(int64, error) {
		s.Headers = append(s.Headers, tributary.Header{Key: tributary.HeaderPayloadType, Value: "JSON:other"})
		return func(_ int64, err error) { doneErr = err }
	}})
	p := testProducer[string](t, c, "p", tributary.Manual())
	if _, err := p.TrySend(tp, tributary.Message[string]{Value: "v"}); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Errorf("TrySend with a hook adding %s: %v, want ErrInvalidArgument", tributary.HeaderPayloadType, err)
	}
	if !errors.Is(doneErr, tributary.ErrInvalidArgument) {
		t.Errorf("done's error %v, want ErrInvalidArgument", doneErr)
	}
	if d, err := c.Describe("orders"); err != nil || d.Partitions[0].LogEndOffset != 0 {
		t.Errorf("orders: %+v, %v; want nothing published", d.Partitions, err)
	}
}
