package tributary_test

import (
	"context"
	"errors"
	"runtime"
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
