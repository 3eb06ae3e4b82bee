package jetstream_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestHostile23RejoinAttemptsUnique: two processes rejoin member "a" of
// g over and over on 64 partitions, each new incarnation polling (with
// its Member.owned hint going stale as the other process's Rejoins run)
// and acking some of what it got, retrying others. Two deliveries of the
// same record with the same Attempt mean one delivery was handed out
// twice (a stolen or duplicated reservation); a Member that was told it
// is fenced must never return records again; and an Ack refused while
// the Member is still current (Heartbeat true) means its delivery was
// taken from it.
func TestHostile23RejoinAttemptsUnique(t *testing.T) {
	b1, b2, _ := hjsTwo(t, jetstream.Config{Capacity: 1000, Storage: jetstream.MemoryStorage})
	const parts = 64
	bt1 := topic(t, b1, "t", parts)
	for i := range 3 {
		for p := int32(0); p < parts; p++ {
			pub(t, bt1, p, fmt.Sprint(i))
		}
	}
	bt2 := must2(b2.OpenTopic("t")).of(t)
	var mu sync.Mutex
	seen := map[string]string{} // "p/off/attempt" → who
	var errs []string
	bad := func(format string, args ...any) {
		mu.Lock()
		if len(errs) < 10 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(8 * time.Second)
	for who, bt := range []tributary.BackendTopic{bt1, bt2} {
		wg.Go(func() {
			for round := 0; round < 400 && time.Now().Before(deadline); round++ {
				m, ok, stop := rejoined(t, bt)
				if stop {
					return
				}
				if !ok {
					continue
				}
				fenced := false
				for k := range 3 {
					rs, err := m.TryPoll(nil, parts)
					if fenced && len(rs) > 0 {
						bad("proc %d round %d: fenced Member returned %d records", who, round, len(rs))
					}
					if errors.Is(err, tributary.ErrFenced) {
						fenced = true
					}
					for _, r := range rs {
						key := fmt.Sprintf("%d/%d/%d", r.Partition, r.Offset, r.Attempt)
						me := fmt.Sprintf("proc %d round %d poll %d", who, round, k)
						mu.Lock()
						prev, dup := seen[key]
						seen[key] = me
						mu.Unlock()
						if dup {
							bad("%s delivered %s, already delivered with that attempt to %s", me, key, prev)
						}
						var ok bool
						if (r.Offset+int64(round))%3 == 0 {
							ok, err = m.Retry(r.Partition, r.Offset)
						} else {
							ok, err = m.Ack(r.Partition, r.Offset)
						}
						if err == nil && !ok {
							if hb, err := m.Heartbeat(); err == nil && hb {
								bad("%s: settle(%d,%d) refused while the Member is current", me, r.Partition, r.Offset)
							}
						}
					}
				}
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	t.Logf("%d deliveries", len(seen))
}

// TestHostile23OwnedHintStale: m1's Member.owned hint is the partitions
// it owned at its last poll. After a rebalance (from another Backend)
// moves partitions, m1's first TryPoll must deliver from exactly the
// partitions it owns now: one newly owned at once, none no longer owned.
func TestHostile23OwnedHintStale(t *testing.T) {
	b1, b2, _ := hjsTwo(t, jetstream.Config{Capacity: 100, Storage: jetstream.MemoryStorage})
	const parts = 8
	bt1 := topic(t, b1, "t", parts)
	bt2 := must2(b2.OpenTopic("t")).of(t)
	m1 := member(t, bt1, "g", "m1")
	must(m1.Join()).of(t)
	for round := range 12 {
		for p := int32(0); p < parts; p++ {
			pub(t, bt1, p, fmt.Sprint(round))
		}
		// Change the membership from b2: m2 joins or leaves.
		m2 := must(bt2.Member("g", "m2")).of(t)
		if round%2 == 0 {
			must(m2.Join()).of(t)
		} else {
			must(m2.Leave()).of(t)
		}
		d := must(b2.Describe("t")).of(t)
		own := map[int32]bool{}
		for _, gp := range d.Groups[0].Partitions {
			if gp.Owner == "m1" {
				own[gp.Partition] = true
			}
		}
		rs := must(m1.TryPoll(nil, parts)).of(t)
		got := map[int32]bool{}
		for _, r := range rs {
			got[r.Partition] = true
			if !own[r.Partition] {
				t.Errorf("round %d: m1 delivered from partition %d, which it no longer owns (owns %v)", round, r.Partition, own)
			}
		}
		for p := range own {
			if !got[p] {
				t.Errorf("round %d: m1 delivered nothing from partition %d, which it owns and which has a record", round, p)
			}
		}
		for _, r := range rs {
			if ok, err := m1.Retry(r.Partition, r.Offset); !ok || err != nil {
				t.Errorf("Retry: %v %v", ok, err)
			}
		}
	}
}
