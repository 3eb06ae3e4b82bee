package jetstream_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// HJSSelfFence: one Member, used from two goroutines (a BackendMember is
// for concurrent use; the typed consumer's heartbeat loop and Run share
// one). Its own Rejoin must never fence it.
func TestHJSSelfFenceRejoinVsHeartbeat(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 10})
	bt := topic(t, b, "t", 4)
	m := member(t, bt, "g", "a")
	must(m.Join()).of(t)
	var stop atomic.Bool
	var fencedBy atomic.Value
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < 100000 && !stop.Load(); i++ {
			if _, err := m.Heartbeat(); err != nil {
				if errors.Is(err, tributary.ErrFenced) {
					fencedBy.Store("heartbeat: " + err.Error())
				}
				return
			}
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	rounds := 0
	for ; rounds < 300 && time.Now().Before(deadline) && fencedBy.Load() == nil; rounds++ {
		if _, err := m.Rejoin(); err != nil {
			fencedBy.Store("rejoin: " + err.Error())
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if f := fencedBy.Load(); f != nil {
		t.Fatalf("after %d Rejoins of the one Member, it fenced itself: %v", rounds, f)
	}
}

// The same, deterministically: a Heartbeat of the Member that lands after
// its own Rejoin's group write reached the server, before the reply came
// back (SetLossy's written=true call is that window; the hook loses nothing).
func TestHJSSelfFenceInCommitWindow(t *testing.T) {
	for _, expired := range []bool{false, true} {
		t.Run(map[bool]string{false: "member", true: "expired"}[expired], func(t *testing.T) {
			clk := &fakeClock{now: time.Unix(1000, 0)}
			b, _ := start(t, jetstream.Config{Capacity: 10, SessionTimeout: tributary.MinSessionTimeout, Clock: clk.Now})
			bt := topic(t, b, "t", 2)
			pub(t, bt, 0, "x")
			m := member(t, bt, "g", "a")
			other := member(t, bt, "g", "z")
			must(m.Join()).of(t)
			must(other.Join()).of(t)
			if expired {
				clk.Add(2 * tributary.MinSessionTimeout)
				must(other.Heartbeat()).of(t) // expires a
				if ok := must(m.Heartbeat()).of(t); ok {
					t.Fatal("a not expired")
				}
			}
			var hbErr atomic.Value
			var once atomic.Bool
			jetstream.SetLossy(b, func(key string, written bool) bool {
				if written && key == "group.t.g" && once.CompareAndSwap(false, true) {
					_, err := m.Heartbeat()
					hbErr.Store([]error{err})
				}
				return false
			})
			_, rerr := m.Rejoin()
			jetstream.SetLossy(b, nil)
			hb := hbErr.Load()
			if hb == nil {
				t.Fatal("hook not run")
			}
			_, perr := m.TryPoll(nil, 4)
			d := must(b.Describe("t")).of(t)
			if herr := hb.([]error)[0]; herr != nil || rerr != nil || perr != nil {
				t.Fatalf("Rejoin = %v; Heartbeat of the same Member during it = %v; TryPoll after = %v; members now %v (nobody can consume as a)",
					rerr, herr, perr, d.Groups[0].Members)
			}
		})
	}
	_ = strings.HasPrefix
}
