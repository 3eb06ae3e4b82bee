package jetstream_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestRejoinRace: two processes (Backends on one server) rejoin one member
// name over and over at once, each with a fresh Member per round, while
// the latest of each polls. Afterwards the Member that rejoined last is
// the member: its poll and acks work and it gets every record, each
// committed once, none left in flight; every earlier Member is fenced.
func TestRejoinRace(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	open := func() *jetstream.Backend {
		b, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 64, RequestTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b1, b2 := open(), open()
	bt1 := topic(t, b1, "t", 3)
	for p := int32(0); p < 3; p++ {
		pub(t, bt1, p, "x")
		pub(t, bt1, p, "y")
	}
	bt2, _, err := b2.OpenTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 15
	var (
		mu  sync.Mutex
		all []tributary.BackendMember
	)
	var wg sync.WaitGroup
	for _, bt := range []tributary.BackendTopic{bt1, bt2} {
		wg.Go(func() {
			for range rounds {
				m, err := bt.Member("g", "a")
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := m.Rejoin(); err != nil && !errors.Is(err, tributary.ErrFenced) {
					t.Errorf("Rejoin: %v", err)
					return
				}
				mu.Lock()
				all = append(all, m)
				mu.Unlock()
				if _, err := m.TryPoll(nil, 3); err != nil && !errors.Is(err, tributary.ErrFenced) {
					t.Errorf("TryPoll: %v", err)
				}
			}
		})
	}
	wg.Wait()
	final, err := bt1.Member("g", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := final.Rejoin(); err != nil {
		t.Fatalf("final Rejoin: %v", err)
	}
	for _, m := range all {
		if _, err := m.TryPoll(nil, 1); !errors.Is(err, tributary.ErrFenced) {
			t.Errorf("an earlier incarnation's TryPoll = %v, want ErrFenced", err)
		}
	}
	got := 0
	for range 20 {
		recs, err := final.TryPoll(nil, 3)
		if err != nil {
			t.Fatalf("final TryPoll: %v", err)
		}
		for _, r := range recs {
			ok, err := final.Ack(r.Partition, r.Offset)
			wantBool(t, "final Ack", ok, err, true)
			got++
		}
		if got == 6 {
			break
		}
	}
	d, err := b2.Describe("t")
	if err != nil {
		t.Fatal(err)
	}
	g := d.Groups[0]
	for _, p := range g.Partitions {
		if p.Committed != 2 || p.InFlight {
			t.Errorf("partition %+v: want committed 2, nothing in flight", p)
		}
	}
	if got != 6 || len(g.Members) != 1 {
		t.Fatalf("the final incarnation acked %d of 6; members %v", got, g.Members)
	}
}
