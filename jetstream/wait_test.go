package jetstream_test

import (
	"context"
	"errors"
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
