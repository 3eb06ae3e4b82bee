package jetstream_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// Rejoins of "a" (process B) race RemoveMember("a"), a third member's
// Join/Leave, AddPartitions and Seek (process A). Afterwards a fresh
// Rejoin of "a" with "c" gone gets every record of every partition,
// each acked once, nothing left in flight.
func TestHJSRejoinVsAdmin(t *testing.T) {
	b1, b2, _ := hjsTwo(t, jetstream.Config{Capacity: 1000})
	bt1 := topic(t, b1, "t", 2)
	bt2 := must2(b2.OpenTopic("t")).of(t)
	for i := 0; i < 5; i++ {
		pub(t, bt1, 0, fmt.Sprint(i))
		pub(t, bt1, 1, fmt.Sprint(i))
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 30 {
			m, _ := bt2.Member("g", "a")
			if _, err := m.Rejoin(); err != nil && !errors.Is(err, tributary.ErrFenced) {
				t.Errorf("Rejoin: %v", err)
			}
			m.TryPoll(nil, 4)
		}
	})
	wg.Go(func() {
		for i := range 30 {
			switch i % 5 {
			case 0:
				if _, err := b1.RemoveMember("t", "g", "a"); err != nil {
					t.Errorf("RemoveMember: %v", err)
				}
			case 1:
				c, _ := bt1.Member("g", "c")
				c.Join()
				c.TryPoll(nil, 4)
			case 2:
				c, _ := bt1.Member("g", "c")
				c.Leave()
			case 3:
				if i < 20 {
					if _, err := b1.AddPartitions("t", 1); err != nil {
						t.Errorf("AddPartitions: %v", err)
					}
				}
			case 4:
				if _, err := b1.Seek("t", "g", 0, 0); err != nil {
					t.Errorf("Seek: %v", err)
				}
			}
		}
	})
	wg.Wait()
	b1.RemoveMember("t", "g", "c")
	final := member(t, bt2, "g", "a")
	parts := must(final.Rejoin()).of(t)
	d := must(b1.Describe("t")).of(t)
	total := 0
	for _, p := range d.Groups[0].Partitions {
		total += int(p.Lag)
	}
	got := 0
	for range 100 {
		rs, err := final.TryPoll(nil, 8)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			ok, err := final.Ack(r.Partition, r.Offset)
			if err != nil || !ok {
				t.Fatalf("Ack %d/%d = %v, %v", r.Partition, r.Offset, ok, err)
			}
			got++
		}
		if got == total {
			break
		}
	}
	d = must(b1.Describe("t")).of(t)
	for _, p := range d.Groups[0].Partitions {
		if p.Lag != 0 || p.InFlight || p.Owner != "a" {
			t.Errorf("left: %+v", p)
		}
	}
	t.Logf("partitions %v, %d records consumed; members %v", parts, got, d.Groups[0].Members)
}
