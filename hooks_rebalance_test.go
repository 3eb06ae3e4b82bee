package tributary_test

// The rebalance hooks (OnAssigned, OnRevoked, OnExpired): hooks that close
// the consumer they are told of do not deadlock it, a fenced consumer is told
// its partitions are revoked, and once every consumer is closed each
// member's assigned partitions were all revoked.

import (
	"fmt"
	"sync"
	"testing"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// TestRevokedHookClosesConsumer: an OnRevoked hook that closes
// the consumer it is told of (or the cluster) while that consumer is
// closing: Close must not wait for itself.
func TestRevokedHookClosesConsumer(t *testing.T) {
	for _, closeCluster := range []bool{false, true} {
		c := testCluster(t, 10)
		tp := testTopic(t, c, "orders", 2, tributary.String())
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
		within(t, "Close with an OnRevoked that closes", func() { m.Close() })
	}
}

// TestExpiredHookClosesConsumer: OnExpired and the OnRevoked
// and OnAssigned of the rejoin that follows an expiry may close the
// consumer (Hooks: called without locks held). The cluster is not closed
// when the poll deadlocks: its Close would wait for it too.
func TestExpiredHookClosesConsumer(t *testing.T) {
	for _, which := range []string{"expired", "revoked", "assigned"} {
		clock := testclock.New()
		c, err := tributary.NewCluster(10, engine.WithClock(clock.Now), engine.WithSessionTimeout(liveSession))
		if err != nil {
			t.Fatal(err)
		}
		tp := testTopic(t, c, "orders", 1, tributary.String())
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
		within(t, "TryPoll with an On"+which+" that closes", func() { cm.TryPoll(1) }) //nolint:errcheck // may be ErrClosed
		c.Close()
	}
}

// TestFencedConsumerRevoked: a consumer fenced by RemoveMember
// or by a newer consumer of its name has lost its partitions: OnRevoked
// tells of them, so that the hooks' assigned minus revoked is what the
// open consumers hold.
func TestFencedConsumerRevoked(t *testing.T) {
	for _, how := range []string{"RemoveMember", "successor"} {
		c := testCluster(t, 10)
		tp := testTopic(t, c, "orders", 2, tributary.String())
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

// TestRebalanceHooksBalanced: consumers that poll on goroutines
// of their own while others join, leave, are removed or superseded:
// once all are closed, every member's OnAssigned partitions were all
// revoked (counted per member name: the hooks of two incarnations of a
// name, or of a poll and a Close, may come in either order).
func TestRebalanceHooksBalanced(t *testing.T) {
	c := testCluster(t, 1000)
	tp := testTopic(t, c, "orders", 4, tributary.String())
	var mu sync.Mutex
	held := map[string]int{} // assigned minus revoked
	c.AddHooks(tributary.Hooks{
		OnAssigned: func(r tributary.Rebalance) { mu.Lock(); held[r.Member] += len(r.Partitions); mu.Unlock() },
		OnRevoked:  func(r tributary.Rebalance) { mu.Lock(); held[r.Member] -= len(r.Partitions); mu.Unlock() },
	})
	p := testProducer[string](t, c, "p", tributary.Manual())
	for i := range 40 {
		sendOK(t, p, tp, tributary.Message[string]{Partition: int32(i % 4), Value: "v"})
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
