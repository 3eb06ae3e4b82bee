package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// The ends of a blocked Poll and a blocked Publish (wait.go's block)
// other than a wake-up: ctx, the Backend's Close and the server going away
// each end both calls with their error, none left waiting.

// blockedPair starts, on a backend of capacity 1 whose one partition is
// full and whose member has its one record in flight, a Poll of that
// member and a Publish to the partition, both blocked; it returns their
// results' channels once both have had time to block.
func blockedPair(ctx context.Context, t *testing.T, b *jetstream.Backend) (polled, published <-chan error) {
	t.Helper()
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	pub(t, bt, 0, "a")
	wantRecs(t, poll(t, m, 1), rec{0, 0, "a", 1})
	pc, uc := make(chan error, 1), make(chan error, 1)
	go func() { _, err := m.Poll(ctx, nil, nil, 1); pc <- err }()
	go func() { _, err := bt.Publish(ctx, nil, 0, engine.Message{Payload: "b"}); uc <- err }()
	time.Sleep(200 * time.Millisecond)
	for name, ch := range map[string]chan error{"Poll": pc, "Publish": uc} {
		select {
		case err := <-ch:
			t.Fatalf("%s returned %v, want it blocked", name, err)
		default:
		}
	}
	return pc, uc
}

// ended waits up to within for each call's error and checks it.
func ended(t *testing.T, within time.Duration, want func(error) bool, calls map[string]<-chan error) {
	t.Helper()
	deadline := time.After(within)
	for name, ch := range calls {
		select {
		case err := <-ch:
			if !want(err) {
				t.Errorf("%s: %v", name, err)
			}
		case <-deadline:
			t.Fatalf("%s still blocked %v after its end", name, within)
		}
	}
}

func TestBlockedCallsEndWithContext(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 1})
	ctx, cancel := context.WithCancel(context.Background())
	pc, uc := blockedPair(ctx, t, b)
	cancel()
	ended(t, fallbackBound, func(err error) bool { return errors.Is(err, context.Canceled) },
		map[string]<-chan error{"Poll": pc, "Publish": uc})
}

func TestBlockedCallsEndWhenBackendCloses(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 1})
	pc, uc := blockedPair(context.Background(), t, b)
	b.Close()
	ended(t, fallbackBound, func(err error) bool { return errors.Is(err, tributary.ErrClosed) },
		map[string]<-chan error{"Poll": pc, "Publish": uc})
}

// With the server gone no wake-up comes: each call tries again after its
// fallback wait (2 s) and that try fails after RequestTimeout.
func TestBlockedCallsEndWhenServerGoes(t *testing.T) {
	b, srv := start(t, jetstream.Config{Capacity: 1, RequestTimeout: 500 * time.Millisecond})
	pc, uc := blockedPair(context.Background(), t, b)
	srv.Shutdown()
	ended(t, 10*time.Second, func(err error) bool { return errors.Is(err, jetstream.ErrUnavailable) },
		map[string]<-chan error{"Poll": pc, "Publish": uc})
}

// A blocked Poll wakes on its own partitions' publishes and cursors and
// on its group's key, not on another member's: four members of one group,
// each on a Backend (a connection) of its own with no fallback re-check
// (SetPollWait: an hour) and owning one partition of four, block in Poll;
// then 20 records are published to partition 0 and its owner polls and
// acks each. The other three members' connections send nothing meanwhile,
// where a wake-up per publish and per Ack on the topic would make each of
// them read the state again for most of the 40. Then the owner of
// partition 0 leaves: the blocked member that gets partition 0 returns the
// record published there next, woken by it (it subscribes again when its
// assignment changes; else it would wait for the hour).
func TestBlockedPollWakesOnlyForItsPartitions(t *testing.T) {
	b0, srv := start(t, jetstream.Config{Capacity: 64})
	bt0 := topic(t, b0, "t", 4)
	backends := []*jetstream.Backend{b0}
	topics := []tributary.BackendTopic{bt0}
	for range 3 {
		b, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 64})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		bt, _, err := b.OpenTopic("t")
		if err != nil {
			t.Fatal(err)
		}
		backends, topics = append(backends, b), append(topics, bt)
	}
	members := make([]tributary.BackendMember, 4)
	for i, b := range backends {
		jetstream.SetPollWait(b, time.Hour)
		members[i] = member(t, topics[i], "g", fmt.Sprintf("m%d", i))
		must(members[i].Join()).of(t)
	}
	first := -1 // the owner of partition 0
	for i, m := range members {
		if a := m.Assignment(); len(a) != 1 {
			t.Fatalf("set-up: member %d owns %v, want one partition", i, a)
		} else if a[0] == 0 {
			first = i
		}
	}
	ctx := guard(t)
	polled := make(chan []engine.Record, 3)
	for i, m := range members {
		if i != first {
			go func() {
				rs, err := m.Poll(ctx, nil, nil, 1)
				if err != nil && ctx.Err() == nil {
					t.Errorf("member %d's Poll: %v", i, err)
				}
				polled <- rs
			}()
		}
	}
	time.Sleep(200 * time.Millisecond) // blocked
	before := make([]uint64, 4)
	for i, b := range backends {
		before[i] = jetstream.Requests(b)
	}
	o := members[first]
	for range 20 {
		pub(t, bt0, 0, "x")
		rs, err := o.Poll(ctx, nil, nil, 1)
		if err != nil || len(rs) != 1 {
			t.Fatalf("owner's Poll = %v, %v", recs(rs), err)
		}
		ok, err := o.Ack(0, rs[0].Offset)
		wantBool(t, "owner's Ack", ok, err, true)
	}
	time.Sleep(100 * time.Millisecond)
	for i, b := range backends {
		if n := jetstream.Requests(b) - before[i]; i != first && n > 0 {
			t.Errorf("member %d (partitions %v, blocked in Poll) sent %d requests while 20 records were published to and acked on partition 0", i, members[i].Assignment(), n)
		}
	}
	if ok, err := o.Leave(); err != nil || !ok {
		t.Fatalf("Leave = %v, %v", ok, err)
	}
	// Past the Leave's wake-ups and their repeats (wakeSettle: 20, 100
	// and 500 ms after): only the new subscription can wake the new owner.
	time.Sleep(time.Second)
	pub(t, bt0, 0, "y")
	select {
	case rs := <-polled:
		if len(rs) != 1 || rs[0].Partition != 0 || rs[0].Payload != "y" {
			t.Fatalf("the new owner's Poll = %v, want record 20 of partition 0", recs(rs))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no blocked member returned the record published to its new partition within 10 s")
	}
}
