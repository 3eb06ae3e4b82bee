package jetstream_test

import (
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// A Member's own Rejoin whose group write took effect but whose reply was
// lost (ErrUnavailable, as in a server restart) must not leave the Member
// fenced by its own token: retrying (what the typed consumer's rejoin
// does after an outage) must work, since no other incarnation exists.
func TestHJSLostReplyOfOwnRejoin(t *testing.T) {
	for _, expired := range []bool{false, true} {
		t.Run(map[bool]string{false: "member", true: "expired"}[expired], func(t *testing.T) {
			clk := &fakeClock{now: time.Unix(1000, 0)}
			b, _ := start(t, jetstream.Config{Capacity: 10, SessionTimeout: tributary.MinSessionTimeout, Clock: clk.Now})
			bt := topic(t, b, "t", 2)
			m := member(t, bt, "g", "a")
			other := member(t, bt, "g", "z")
			must(m.Join()).of(t)
			must(other.Join()).of(t)
			if expired {
				clk.Add(2 * tributary.MinSessionTimeout)
				must(other.Heartbeat()).of(t)
			}
			var once atomic.Bool
			jetstream.SetLossy(b, func(key string, written bool) bool {
				return written && key == "group.t.g" && once.CompareAndSwap(false, true)
			})
			_, err1 := m.Rejoin()
			jetstream.SetLossy(b, nil)
			_, err2 := m.Rejoin()
			_, err3 := m.TryPoll(nil, 4)
			if err2 != nil || err3 != nil {
				t.Fatalf("Rejoin with its reply lost = %v; Rejoin again = %v; TryPoll = %v; members %v",
					err1, err2, err3, must(b.Describe("t")).of(t).Groups[0].Members)
			}
		})
	}
}
