package tributary_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/backendtest"
	"github.com/f91dcac0/tributary/engine"
)

// Hostile tests of the hooks (hooks.go): hooks that call back into the
// consumer they are told of, and the balance of OnAssigned and OnRevoked.

// hx24Within fails the test when f does not return within hxGuard: a
// hook calling back into the library must not deadlock it.
func hx24Within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(hxGuard):
		t.Fatalf("%s: deadlocked (still running after %v)", what, hxGuard)
	}
}

// TestHostile24RevokedHookClosesConsumer: an OnRevoked hook that closes
// the consumer it is told of (or the cluster) while that consumer is
// closing: Close must not wait for itself.
func TestHostile24RevokedHookClosesConsumer(t *testing.T) {
	for _, closeCluster := range []bool{false, true} {
		c := hxCluster(t, 10)
		tp := hxTopic(t, c, "orders", 2)
		var mu sync.Mutex
		consumers := map[string]*tributary.Consumer[string]{}
		c.AddHooks(tributary.Hooks{OnRevoked: func(r tributary.Rebalance) {
			mu.Lock()
			m := consumers[r.Member]
			mu.Unlock()
			if closeCluster {
				c.Close()
			} else if m != nil {
				m.Close() //nolint:errcheck // closing already
			}
		}})
		m, err := tributary.NewConsumer(tp, "g", "m")
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		consumers["m"] = m
		mu.Unlock()
		hx24Within(t, "Close with an OnRevoked that closes", func() { m.Close() })
	}
}

// TestHostile24ExpiredHookClosesConsumer: OnExpired and the OnRevoked
// and OnAssigned of the rejoin that follows an expiry may close the
// consumer (Hooks: called without locks held). The cluster is not closed
// when the poll deadlocks: its Close would wait for it too.
func TestHostile24ExpiredHookClosesConsumer(t *testing.T) {
	for _, which := range []string{"expired", "revoked", "assigned"} {
		clock := backendtest.NewFakeClock()
		c, err := tributary.NewCluster(10, engine.WithClock(clock.Now), engine.WithSessionTimeout(liveSession))
		if err != nil {
			t.Fatal(err)
		}
		tp := hxTopic(t, c, "orders", 1)
		var mu sync.Mutex
		var m *tributary.Consumer[string]
		var expired bool
		hook := func(event string) {
			mu.Lock()
			expired = expired || event == "expired"
			cm := m
			do := expired && event == which && cm != nil
			mu.Unlock()
			if do {
				cm.Close() //nolint:errcheck // the test checks it returns
			}
		}
		c.AddHooks(tributary.Hooks{
			OnExpired:  func(tributary.MemberRef) { hook("expired") },
			OnRevoked:  func(tributary.Rebalance) { hook("revoked") },
			OnAssigned: func(tributary.Rebalance) { hook("assigned") },
		})
		cm, err := tributary.NewConsumer(tp, "g", "m")
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		m = cm
		mu.Unlock()
		clock.Advance(liveSession)
		hx24Within(t, "TryPoll with an On"+which+" that closes", func() { cm.TryPoll(1) }) //nolint:errcheck // may be ErrClosed
		c.Close()
	}
}

// TestHostile24FencedConsumerRevoked: a consumer fenced by RemoveMember
// or by a newer consumer of its name has lost its partitions: OnRevoked
// tells of them, so that the hooks' assigned minus revoked is what the
// open consumers hold.
func TestHostile24FencedConsumerRevoked(t *testing.T) {
	for _, how := range []string{"RemoveMember", "successor"} {
		c := hxCluster(t, 10)
		tp := hxTopic(t, c, "orders", 2)
		var mu sync.Mutex
		held := map[string]int{} // member: partitions assigned minus revoked
		c.AddHooks(tributary.Hooks{
			OnAssigned: func(r tributary.Rebalance) { mu.Lock(); held[r.Member] += len(r.Partitions); mu.Unlock() },
			OnRevoked:  func(r tributary.Rebalance) { mu.Lock(); held[r.Member] -= len(r.Partitions); mu.Unlock() },
		})
		m, err := tributary.NewConsumer(tp, "g", "m")
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		switch how {
		case "RemoveMember":
			if ok, err := c.RemoveMember("orders", "g", "m"); !ok || err != nil {
				t.Fatalf("RemoveMember: %v, %v", ok, err)
			}
		case "successor":
			if _, err := tributary.NewConsumer(tp, "g", "m"); err != nil {
				t.Fatal(err)
			}
			want = 2
		}
		m.Close() //nolint:errcheck // fenced
		mu.Lock()
		got := held["m"]
		mu.Unlock()
		if got != want {
			t.Errorf("%s: member m holds %d partitions by its hooks, want %d", how, got, want)
		}
	}
}

// TestHostile24ProcessEndOnGoexit: a handler that calls runtime.Goexit
// (t.FailNow in a handler) fails its record; OnProcess's end is called
// once, with an error, not as a success.
func TestHostile24ProcessEndOnGoexit(t *testing.T) {
	c := hxCluster(t, 10)
	tp := hxTopic(t, c, "orders", 1)
	var mu sync.Mutex
	var ends []error
	c.AddHooks(tributary.Hooks{OnProcess: func(ctx context.Context, d tributary.Delivery) (context.Context, func(error, time.Duration)) {
		return ctx, func(err error, _ time.Duration) {
			mu.Lock()
			ends = append(ends, err)
			mu.Unlock()
		}
	}})
	hxSend(t, hxProducer(t, c, "p"), tp, 0, "v")
	m, err := tributary.NewConsumer(tp, "g", "m", tributary.WithBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hxGuard)
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

// TestHostile24SendDoneOncePerSend: every send that reaches OnSend gets
// its done exactly once, with the send's error, on every path: a
// publish, TrySend on a full partition, Send cancelled or its producer
// or cluster closed while it waits for room, a record over
// WithMaxMessageBytes; the sends refused before it (closed producer, bad
// partition, reserved header) get neither.
func TestHostile24SendDoneOncePerSend(t *testing.T) {
	c := hxCluster(t, 1, engine.WithMaxMessageBytes(64))
	tp := hxTopic(t, c, "orders", 1)
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
	p := hxProducer(t, c, "p")
	hxSend(t, p, tp, 0, "fills")
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
		pc := hxProducer(t, c, "p-"+closer)
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

// TestHostile24ReentrantHooks: hooks that call back into the library —
// OnDeliver acking its own delivery by hand and sending, OnAck adding
// hooks, OnSend describing the topic — and AddHooks racing with traffic
// (run under -race) neither deadlock nor lose an event.
func TestHostile24ReentrantHooks(t *testing.T) {
	c := hxCluster(t, 1000)
	tp := hxTopic(t, c, "orders", 2)
	out := hxTopic(t, c, "out", 1)
	p := hxProducer(t, c, "p")
	fwd := hxProducer(t, c, "fwd")
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
		hxSend(t, p, tp, int32(i%2), "v")
	}
	got := 0
	hx24Within(t, "poll and ack from hooks", func() {
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

// TestHostile24RebalanceHooksBalanced: consumers that poll on goroutines
// of their own while others join, leave, are removed or superseded:
// once all are closed, every member's OnAssigned partitions were all
// revoked (counted per member name: the hooks of two incarnations of a
// name, or of a poll and a Close, may come in either order).
func TestHostile24RebalanceHooksBalanced(t *testing.T) {
	c := hxCluster(t, 1000)
	tp := hxTopic(t, c, "orders", 4)
	var mu sync.Mutex
	held := map[string]int{} // assigned minus revoked
	c.AddHooks(tributary.Hooks{
		OnAssigned: func(r tributary.Rebalance) { mu.Lock(); held[r.Member] += len(r.Partitions); mu.Unlock() },
		OnRevoked:  func(r tributary.Rebalance) { mu.Lock(); held[r.Member] -= len(r.Partitions); mu.Unlock() },
	})
	p := hxProducer(t, c, "p")
	for i := range 40 {
		hxSend(t, p, tp, int32(i%4), "v")
	}
	var wg sync.WaitGroup
	var all []*tributary.Consumer[string]
	var allMu sync.Mutex
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				name := fmt.Sprintf("m%d", (w*15+i)%6)
				m, err := tributary.NewConsumer(tp, "g", name)
				if err != nil {
					continue // ErrExists and the like, racing
				}
				allMu.Lock()
				all = append(all, m)
				allMu.Unlock()
				for range 3 {
					msgs, err := m.TryPoll(2)
					if err != nil {
						break
					}
					for _, msg := range msgs {
						m.Retry(msg) //nolint:errcheck // may have moved
					}
				}
				switch i % 3 {
				case 0:
					m.Close() //nolint:errcheck // racing
				case 1:
					c.RemoveMember("orders", "g", name) //nolint:errcheck // racing
				}
			}
		}()
	}
	wg.Wait()
	for _, m := range all {
		m.Close() //nolint:errcheck // closed already, some
	}
	mu.Lock()
	defer mu.Unlock()
	for member, n := range held {
		if n != 0 {
			t.Errorf("%s: %d partitions assigned minus revoked by the hooks, want 0", member, n)
		}
	}
}

// TestHostile24SendHookReservedHeader: an OnSend hook that adds the
// reserved HeaderPayloadType header (Hooks: it must not) makes the send
// fail with ErrInvalidArgument, as the same header in the Message does,
// instead of publishing a record whose consumers read the hook's value
// as its payload type.
func TestHostile24SendHookReservedHeader(t *testing.T) {
	c := hxCluster(t, 10)
	tp := hxTopic(t, c, "orders", 1)
	var doneErr error
	c.AddHooks(tributary.Hooks{OnSend: func(_ context.Context, s *tributary.SendInfo) func(int64, error) {
		s.Headers = append(s.Headers, tributary.Header{Key: tributary.HeaderPayloadType, Value: "JSON:other"})
		return func(_ int64, err error) { doneErr = err }
	}})
	p := hxProducer(t, c, "p")
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
