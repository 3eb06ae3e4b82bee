package jetstream_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// A zombie (process A's Member of "a") keeps polling and acking while
// process B rejoins as "a" over and over with fresh Members that poll and
// ack too, and records are published meanwhile. Every ack that returns
// true must be the next offset of its partition (exactly once, in order);
// at the end the last incarnation gets the rest; the zombie is fenced;
// counts: no Ack of the current incarnation refused for a record it was
// just delivered and nobody else touched.
func TestHJSZombieVsRejoins(t *testing.T) {
	b1, b2, _ := hjsTwo(t, jetstream.Config{Capacity: 1000})
	const parts, per = 3, 40
	bt1 := topic(t, b1, "t", parts)
	bt2 := must2(b2.OpenTopic("t")).of(t)
	zombie := member(t, bt1, "g", "a")
	must(zombie.Join()).of(t)

	var mu sync.Mutex
	next := make([]int64, parts)
	acked := func(who string, p int32, off int64) {
		mu.Lock()
		defer mu.Unlock()
		if next[p] != off {
			t.Errorf("%s acked %d/%d, want %d/%d next", who, p, off, p, next[p])
		}
		next[p] = off + 1
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var refused atomic.Int32
	wg.Go(func() { // publisher
		for i := 0; i < per; i++ {
			for p := int32(0); p < parts; p++ {
				if _, err := bt1.TryPublish(p, engineMsg(fmt.Sprint(i))); err != nil {
					t.Error(err)
					return
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	wg.Go(func() { // zombie
		for i := 0; i < 5000 && !stop.Load(); i++ {
			rs, err := zombie.TryPoll(nil, 3)
			if errors.Is(err, tributary.ErrFenced) {
				return
			}
			for _, r := range rs {
				ok, err := zombie.Ack(r.Partition, r.Offset)
				if errors.Is(err, tributary.ErrFenced) {
					return
				}
				if ok {
					acked("zombie", r.Partition, r.Offset)
				}
			}
		}
	})
	var last tributary.BackendMember
	for round := 0; round < 25; round++ {
		m := member(t, bt2, "g", "a")
		if _, err := m.Rejoin(); err != nil {
			t.Fatalf("round %d Rejoin: %v", round, err)
		}
		last = m
		for range 3 {
			rs, err := m.TryPoll(nil, 3)
			if err != nil {
				t.Fatalf("round %d TryPoll: %v", round, err)
			}
			for _, r := range rs {
				ok, err := m.Ack(r.Partition, r.Offset)
				if err != nil {
					t.Fatalf("round %d Ack: %v", round, err)
				}
				if ok {
					acked("current", r.Partition, r.Offset)
				} else {
					refused.Add(1)
				}
			}
		}
	}
	wg.Wait()
	stop.Store(true)
	if _, err := zombie.TryPoll(nil, 1); !errors.Is(err, tributary.ErrFenced) {
		t.Errorf("zombie TryPoll = %v, want ErrFenced", err)
	}
	for range 400 {
		rs, err := last.TryPoll(nil, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			ok, err := last.Ack(r.Partition, r.Offset)
			if err != nil || !ok {
				t.Fatalf("last Ack %d/%d = %v, %v", r.Partition, r.Offset, ok, err)
			}
			acked("last", r.Partition, r.Offset)
		}
		mu.Lock()
		done := next[0] == per && next[1] == per && next[2] == per
		mu.Unlock()
		if done {
			break
		}
	}
	mu.Lock()
	t.Logf("next %v; acks of the then-current incarnation refused: %d", next, refused.Load())
	for p := range parts {
		if next[p] != per {
			t.Errorf("partition %d: %d of %d acked", p, next[p], per)
		}
	}
	mu.Unlock()
	d := must(b2.Describe("t")).of(t).Groups[0]
	for _, p := range d.Partitions {
		if p.Committed != per || p.InFlight {
			t.Errorf("%+v", p)
		}
	}
}

func engineMsg(s string) engineMessage { return engineMessage{Payload: s} }

type engineMessage = engine.Message
