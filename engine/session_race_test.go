package engine_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// TestLivenessConcurrent races Heartbeat, Poll, Ack, Retry, Rejoin, Join
// and Leave of many members (by name and through handles) with publishes
// and a test clock that keeps advancing past the session timeout, so that
// members expire while others call. A checker describes the topic
// throughout and the test once more at the end, requiring of every
// description: each group's owners are exactly what its assignor gives
// its members (RoundRobin: partition p to member p mod n; Sticky: balanced),
// so one member per partition, and a member; no owner and nothing in
// flight in a group without members; a delivery in flight only to an
// owner; one last-seen instant per member, none older than the session
// timeout before the clock (Describe expires first) nor later than the
// clock. At the end every group's committed offsets add up to its
// successful acks. Run it under -race.
func TestLivenessConcurrent(t *testing.T) {
	const (
		partitions = 5
		session    = 10 * time.Second
	)
	ops := 5000
	if raceEnabled {
		ops = 1500
	}
	clock := testclock.New()
	b, err := engine.New(40, engine.WithClock(clock.Now), engine.WithSessionTimeout(session))
	require.NoError(t, err)
	_, err = b.Create("t", partitions)
	require.NoError(t, err)
	_, err = b.CreateGroup("t", "g", engine.RoundRobin)
	require.NoError(t, err)
	_, err = b.CreateGroup("t", "h", engine.Sticky)
	require.NoError(t, err)
	th, err := b.Topic("t")
	require.NoError(t, err)
	groups := []string{"g", "h"}
	var acked [2]atomic.Int64 // successful acks per group
	var expired atomic.Int64  // heartbeats that found their member gone

	var stop atomic.Bool
	var bad atomic.Pointer[string]
	failf := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		bad.CompareAndSwap(nil, &msg)
		stop.Store(true)
	}
	check := func(d engine.TopicDescription, before, after int64) {
		for gi, gd := range d.Groups {
			if gd.Group != groups[gi] {
				failf("groups %v", d.Groups)
				return
			}
			if len(gd.LastSeen) != len(gd.Members) {
				failf("%s: %d members, %d last-seen instants", gd.Group, len(gd.Members), len(gd.LastSeen))
				return
			}
			for i, m := range gd.Members {
				seen := gd.LastSeen[i].UnixNano()
				if seen <= before-int64(session) || seen > after {
					failf("%s: member %s last seen at %v, clock in [%v, %v] during Describe, timeout %v",
						gd.Group, m, time.Duration(seen-testclock.Epoch.UnixNano()),
						time.Duration(before-testclock.Epoch.UnixNano()), time.Duration(after-testclock.Epoch.UnixNano()), session)
					return
				}
			}
			count := map[string]int{}
			for p, gp := range gd.Partitions {
				if gp.InFlight && (gp.Owner == "" || gp.Attempts < 1) {
					failf("%s: partition %d in flight to %q, attempts %d", gd.Group, p, gp.Owner, gp.Attempts)
					return
				}
				if gp.Lag < 0 {
					failf("%s: partition %d lag %d", gd.Group, p, gp.Lag)
					return
				}
				if len(gd.Members) == 0 {
					if gp.Owner != "" {
						failf("%s: no members, partition %d owned by %q", gd.Group, p, gp.Owner)
						return
					}
					continue
				}
				if !slices.Contains(gd.Members, gp.Owner) {
					failf("%s: partition %d owned by %q, not one of %v", gd.Group, p, gp.Owner, gd.Members)
					return
				}
				if gd.Group == "g" && gp.Owner != gd.Members[p%len(gd.Members)] {
					failf("g: partition %d owned by %q, RoundRobin over %v gives %q", p, gp.Owner, gd.Members, gd.Members[p%len(gd.Members)])
					return
				}
				count[gp.Owner]++
			}
			if gd.Group == "h" {
				for _, m := range gd.Members {
					if n := count[m]; n < partitions/len(gd.Members) || n > (partitions+len(gd.Members)-1)/len(gd.Members) {
						failf("h: Sticky gives %s %d of %d partitions among %v", m, n, partitions, gd.Members)
						return
					}
				}
			}
		}
	}

	var wg sync.WaitGroup
	// The clock: it moves on by up to 3 s at a time, so that members that
	// stall for a few of its steps expire.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 1))
		for !stop.Load() {
			clock.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
			time.Sleep(50 * time.Microsecond)
		}
	})
	// The checker.
	wg.Go(func() {
		for !stop.Load() {
			before := clock.Now().UnixNano()
			d, err := b.Describe("t")
			if err != nil {
				failf("Describe: %v", err)
				return
			}
			check(d, before, clock.Now().UnixNano())
			time.Sleep(100 * time.Microsecond)
		}
	})
	// The producer: it keeps every partition holding records.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(2, 2))
		for !stop.Load() {
			if _, err := b.Publish("t", int32(rng.IntN(partitions)), "x"); err != nil {
				failf("Publish: %v", err)
				return
			}
			time.Sleep(20 * time.Microsecond)
		}
	})
	var members sync.WaitGroup
	for w := range 8 {
		gi := w % 2
		group, member := groups[gi], fmt.Sprintf("m%d", w/2)
		handles := w%4 >= 2
		members.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			h, err := th.Member(group, member)
			if err != nil {
				failf("Member: %v", err)
				return
			}
			call := func(name string, byName func() (bool, error), byHandle func() (bool, error)) bool {
				f := byName
				if handles {
					f = byHandle
				}
				ok, err := f()
				if err != nil {
					failf("%s %s/%s: %v", name, group, member, err)
				}
				return ok
			}
			var buf []engine.Record
			for range ops {
				if stop.Load() {
					return
				}
				switch x := rng.IntN(100); {
				case x < 45:
					var rs []engine.Record
					if handles {
						rs, err = h.AppendPoll(buf[:0], 4)
						buf = rs
					} else {
						rs, err = b.Poll("t", group, member, 4)
					}
					if err != nil {
						failf("Poll: %v", err)
						return
					}
					for _, r := range rs {
						if rng.IntN(4) == 0 {
							call("Retry", func() (bool, error) { return b.Retry("t", group, member, r.Partition, r.Offset) },
								func() (bool, error) { return h.Retry(r.Partition, r.Offset) })
						} else if call("Ack", func() (bool, error) { return b.Ack("t", group, member, r.Partition, r.Offset) },
							func() (bool, error) { return h.Ack(r.Partition, r.Offset) }) {
							acked[gi].Add(1)
						}
					}
				case x < 65:
					if !call("Heartbeat", func() (bool, error) { return b.Heartbeat("t", group, member) }, h.Heartbeat) {
						expired.Add(1)
						if _, err := b.Join("t", group, member); err != nil { // expired: join again
							failf("Join: %v", err)
							return
						}
					}
				case x < 75:
					if handles {
						_, err = h.Rejoin()
					} else {
						_, err = b.Rejoin("t", group, member)
					}
					if err != nil {
						failf("Rejoin: %v", err)
						return
					}
				case x < 85:
					if handles {
						_, err = h.Join()
					} else {
						_, err = b.Join("t", group, member)
					}
					if err != nil {
						failf("Join: %v", err)
						return
					}
				case x < 90:
					call("Leave", func() (bool, error) { return b.Leave("t", group, member) }, h.Leave)
				default:
					time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond) // stall: the clock may expire it
				}
			}
		})
	}
	members.Wait()
	stop.Store(true)
	wg.Wait()
	if msg := bad.Load(); msg != nil {
		t.Fatal(*msg)
	}
	before := clock.Now().UnixNano()
	d, err := b.Describe("t")
	require.NoError(t, err)
	check(d, before, clock.Now().UnixNano())
	if msg := bad.Load(); msg != nil {
		t.Fatal(*msg)
	}
	for gi, gd := range d.Groups {
		var committed int64
		for _, gp := range gd.Partitions {
			committed += gp.Committed
		}
		require.Equal(t, acked[gi].Load(), committed, "group %s: committed offsets vs successful acks", gd.Group)
		t.Logf("group %s: %d acks, members at the end %v", gd.Group, committed, gd.Members)
	}
	t.Logf("%d heartbeats found their member gone (expired or left)", expired.Load())
	require.Positive(t, acked[0].Load()+acked[1].Load(), "no ack succeeded: the test checks nothing")
	require.Positive(t, expired.Load(), "no member was found gone: the test checks no expiry")
}
