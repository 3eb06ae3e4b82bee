package jetstream_test

// Blocking Poll and Publish: a Poll waits without busy polling and wakes on
// a publish; a Publish waits for room and is woken by the Ack or commit
// that makes it, also at capacities of 1 to 3 where only wake-ups end the
// waits.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/backendtest"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestPublishWakesOnCommit runs the suite's BlockingPublishWhileGroupsAck
// check with the fallback of a blocked Publish lengthened to an hour, so
// that only its wake-ups can end a wait: a commit that makes the oldest
// record of a full partition fully committed, purging nothing when the
// replay window covers it (a window equal to the capacity), must wake the
// producer as a purge does.
func TestPublishWakesOnCommit(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	var check backendtest.Check
	for _, c := range backendtest.Checks() {
		if c.Name == "BlockingPublishWhileGroupsAck" {
			check = c
		}
	}
	if check.Run == nil {
		t.Fatal("no check BlockingPublishWhileGroupsAck in backendtest.Checks")
	}
	n := 0
	check.Run(t, func(cfg backendtest.Config) tributary.Backend {
		n++
		b, err := jetstream.Open(jetstream.Config{
			Server: srv, Prefix: fmt.Sprintf("W%d", n), Storage: jetstream.MemoryStorage,
			Capacity: cfg.Capacity, ReplayWindow: cfg.ReplayWindow,
		})
		if err != nil {
			t.Fatal(err)
		}
		jetstream.SetRoomWait(b, time.Hour)
		t.Cleanup(func() { b.Close() })
		return b
	})
}

// Poll blocks without busy polling, wakes on a publish, and ends on ctx,
// stop and leaving.
func TestPollWaits(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	done := make(chan []engine.Record)
	go func() {
		rs, err := m.Poll(context.Background(), nil, nil, 5)
		if err != nil {
			t.Error(err)
		}
		done <- rs
	}()
	time.Sleep(100 * time.Millisecond)
	pub(t, bt, 0, "a")
	select {
	case rs := <-done:
		wantRecs(t, recs(rs), rec{0, 0, "a", 1})
	case <-time.After(fallbackBound):
		t.Fatal("Poll not woken by a publish")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Poll(ctx, nil, nil, 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if _, err := m.Poll(context.Background(), stop, nil, 5); !errors.Is(err, tributary.ErrClosed) {
		t.Fatalf("stop: %v", err)
	}
	must(m.Leave()).of(t)
	if _, err := m.Poll(context.Background(), nil, nil, 5); !errors.Is(err, tributary.ErrClosed) {
		t.Fatalf("left: %v", err)
	}
}

// fallbackBound is below the package's 2 s fallback wake-up: a wake-up
// that came sooner came from the broker.
const fallbackBound = 1500 * time.Millisecond

// Publish waits for room and is woken by the Ack that makes it (its cursor
// write: the Ack defers the purge to the publish).
func TestPublishWaitsForRoom(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 1})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	pub(t, bt, 0, "a")
	done := make(chan int64)
	go func() {
		off, err := bt.Publish(context.Background(), nil, 0, engine.Message{Payload: "b"})
		if err != nil {
			t.Error(err)
		}
		done <- off
	}()
	time.Sleep(100 * time.Millisecond)
	poll(t, m, 1)
	ok, err := m.Ack(0, 0)
	wantBool(t, "Ack", ok, err, true)
	select {
	case off := <-done:
		if off != 1 {
			t.Fatalf("offset %d", off)
		}
	case <-time.After(fallbackBound):
		t.Fatal("Publish not woken by the Ack")
	}
	stop := make(chan struct{})
	close(stop)
	if _, err := bt.Publish(context.Background(), stop, 0, engine.Message{}); !errors.Is(err, tributary.ErrClosed) {
		t.Fatalf("stop: %v", err)
	}
}

// TestSmallCapacityWakeups: capacity 1..3 with every replay
// window, two groups acking at different speeds (g1 two members, g2 one
// slow member), two producers blocked in Publish whose fallback re-check
// is an hour (only wake-ups end a wait: the Acks' cursor writes, since an
// Ack's deferred purge sends no room notice). Every published offset is
// acked exactly once per group, in offset order per partition, and the
// run never stalls.
func TestSmallCapacityWakeups(t *testing.T) {
	type cfg struct{ capacity, window int32 }
	var cfgs []cfg
	for c := int32(1); c <= 3; c++ {
		for w := int32(0); w <= c; w++ {
			cfgs = append(cfgs, cfg{c, w})
		}
	}
	for _, c := range cfgs {
		t.Run(fmt.Sprintf("cap%d-win%d", c.capacity, c.window), func(t *testing.T) {
			b, _ := start(t, jetstream.Config{Capacity: c.capacity, ReplayWindow: c.window, Storage: jetstream.MemoryStorage, AckTimeout: 5 * time.Second})
			jetstream.SetRoomWait(b, time.Hour)
			const parts, perProducer = 2, 25
			bt := topic(t, b, "t", parts)
			for _, g := range []string{"g1", "g2"} {
				ok, err := b.CreateGroup("t", g, engine.RoundRobin)
				wantBool(t, "CreateGroup", ok, err, true)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			var mu sync.Mutex
			next := map[string]int64{} // "g/p" → next offset to ack
			var errs []string
			bad := func(f string, a ...any) {
				mu.Lock()
				if len(errs) < 10 {
					errs = append(errs, fmt.Sprintf(f, a...))
				}
				mu.Unlock()
			}
			type mem struct {
				g, m string
				slow bool
			}
			mems := []mem{{"g1", "a", false}, {"g1", "b", false}, {"g2", "c", true}}
			handles := map[mem]tributary.BackendMember{}
			for _, x := range mems {
				handles[x] = member(t, bt, x.g, x.m)
				must(handles[x].Join()).of(t)
			}
			var wg, producing sync.WaitGroup
			for pi := range 2 {
				producing.Add(1)
				wg.Go(func() {
					defer producing.Done()
					for i := range perProducer {
						p := int32((pi + i) % parts)
						if _, err := bt.Publish(ctx, nil, p, engine.Message{Payload: fmt.Sprint(pi, i)}); err != nil {
							bad("publish %d/%d: %v", pi, i, err)
							return
						}
					}
				})
			}
			for _, x := range mems {
				m := handles[x]
				wg.Go(func() {
					for ctx.Err() == nil {
						rs, err := m.Poll(ctx, nil, nil, 2)
						if err != nil {
							if ctx.Err() == nil {
								bad("%s/%s poll: %v", x.g, x.m, err)
							}
							return
						}
						for _, r := range rs {
							if x.slow {
								time.Sleep(2 * time.Millisecond)
							}
							ok, err := m.Ack(r.Partition, r.Offset)
							if err != nil || !ok {
								bad("%s/%s Ack(%d,%d) = %v, %v", x.g, x.m, r.Partition, r.Offset, ok, err)
								continue
							}
							k := fmt.Sprintf("%s/%d", x.g, r.Partition)
							mu.Lock()
							if next[k] != r.Offset {
								errs = append(errs, fmt.Sprintf("%s acked %d, want %d", k, r.Offset, next[k]))
							}
							next[k] = r.Offset + 1
							mu.Unlock()
						}
					}
				})
			}
			producing.Wait()
			total := func() int64 {
				mu.Lock()
				defer mu.Unlock()
				var n int64
				for _, v := range next {
					n += v
				}
				return n
			}
			for total() < 2*2*perProducer && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			stalled := ctx.Err() != nil
			cancel()
			wg.Wait()
			for _, e := range errs {
				t.Error(e)
			}
			if stalled {
				d, _ := b.Describe("t")
				t.Fatalf("stalled: acked %v; %+v", next, d)
			}
		})
	}
}
