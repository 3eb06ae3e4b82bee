package jetstream_test

// Server restarts: the file store keeps committed offsets and log starts,
// a typed consumer's Run rides out the outage (also with sessions running
// out during it, fencing nobody), restarts under load keep
// TestFaultNodeRestart's invariants on one server.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// A typed consumer's Run rides out a server restart: calls made during it
// fail with ErrUnavailable (which wraps tributary.ErrUnavailable), Run
// waits and goes on, and every message sent is handled, in order per
// partition, none lost (a message whose ack was lost may be handled
// twice). A Run that returned on ErrUnavailable would leave its group and
// fail here.
func TestConsumerRunSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a server")
	}
	b, srv := start(t, jetstream.Config{Capacity: 1000, RequestTimeout: time.Second})
	c := must(tributary.NewClusterOn(b)).of(t)
	defer c.Close()
	tp := must(tributary.CreateTopic(c, "orders", 2, tributary.JSON[int]())).of(t)
	p := must(tributary.NewProducer[int](c, "p", tributary.RoundRobin())).of(t)
	cons := must(tributary.NewConsumer(tp, "g", "c1")).of(t)

	const n = 60
	var (
		mu   sync.Mutex
		seen = map[int]int{}
		last = map[int32]int{0: -1, 1: -1} // per partition: the last value handled
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(ctx, func(_ context.Context, m tributary.Message[int]) error {
			mu.Lock()
			defer mu.Unlock()
			if m.Value < last[m.Partition] {
				t.Errorf("partition %d: %d after %d", m.Partition, m.Value, last[m.Partition])
			}
			last[m.Partition] = m.Value
			seen[m.Value]++
			if len(seen) == n {
				cancel()
			}
			return nil
		})
	}()
	send := func(v int) {
		for {
			_, err := p.Send(ctx, tp, tributary.Message[int]{Value: v})
			if err == nil {
				return
			}
			if !errors.Is(err, tributary.ErrUnavailable) || ctx.Err() != nil {
				t.Fatalf("Send(%d): %v", v, err)
			}
			time.Sleep(50 * time.Millisecond) // the producer's caller retries
		}
	}
	for v := range n / 2 {
		send(v)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for v := n / 2; v < n; v++ {
		send(v)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled once all %d were handled", err, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Fatalf("%d of %d messages handled", len(seen), n)
	}
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	t.Logf("%d messages handled across a restart, %d twice", n, dups)
}

// A server restart keeps streams and committed offsets; the backend
// reconnects and keeps working.
func TestServerRestart(t *testing.T) {
	b, srv := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 1)
	for _, s := range []string{"a", "b", "c"} {
		pub(t, bt, 0, s)
	}
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	poll(t, m, 1)
	ok, err := m.Ack(0, 0)
	wantBool(t, "Ack", ok, err, true)
	wantRecs(t, poll(t, m, 1), rec{0, 1, "b", 1})
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// Calls during the reconnect may fail with ErrUnavailable; retry a while.
	var rs []rec
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err = m.Retry(0, 1)
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantBool(t, "Retry after restart", ok, nil, true)
	rs = poll(t, m, 1)
	wantRecs(t, rs, rec{0, 1, "b", 2})
	ok, err = m.Ack(0, 1)
	wantBool(t, "Ack after restart", ok, err, true)
	if off := pub(t, bt, 0, "d"); off != 3 {
		t.Fatalf("offset %d", off)
	}
	d := must(b.Describe("t")).of(t)
	if p, g := d.Partitions[0], d.Groups[0].Partitions[0]; p.LogStartOffset != 2 || p.LogEndOffset != 4 || g.Committed != 2 {
		t.Fatalf("after restart: %+v %+v", p, g)
	}
}

// TestRestartSnapshots: TestFaultNodeRestart's invariants on one
// server (Replicas 1: snapshot reads, deferred purges) with a small
// capacity (publishers wait for room, purges happen at fills), restarted
// twice under load. Every offset a Publish returned is acked once per
// group, no two members hold a (group, partition) at once, and the run
// does not stall.
func TestRestartSnapshots(t *testing.T) {
	b, srv := start(t, jetstream.Config{Capacity: 4, AckTimeout: 2 * time.Second, RequestTimeout: time.Second})
	const parts, perProducer = 4, 60
	bt := topic(t, b, "t", parts)
	groups, members, handles := faultMembers(t, bt)
	h := newHolds()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pmu sync.Mutex
	published := map[string]bool{}
	var wg, producing sync.WaitGroup
	for pi := range 2 {
		producing.Add(1)
		wg.Go(func() {
			defer producing.Done()
			for i := range perProducer {
				p := int32((pi + i) % parts)
				var off int64
				var err error
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
					pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
					off, err = bt.Publish(pctx, nil, p, engine.Message{Payload: fmt.Sprintf("p%d.%d", pi, i)})
					pcancel()
					if err == nil || !(errors.Is(err, jetstream.ErrUnavailable) || errors.Is(err, jetstream.ErrContention) || errors.Is(err, context.DeadlineExceeded)) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err != nil {
					h.fail("publish: %v", err)
					return
				}
				pmu.Lock()
				if published[fmt.Sprintf("%d/%d", p, off)] {
					h.fail("offset %d/%d published twice", p, off)
				}
				published[fmt.Sprintf("%d/%d", p, off)] = true
				pmu.Unlock()
			}
		})
	}
	for _, g := range groups {
		for _, name := range members {
			wg.Go(func() { faultConsumer(ctx, h, g, name, handles[g+"/"+name], parts, 5*time.Millisecond) })
		}
	}
	for round := range 2 {
		for n := h.nacked.Load(); h.nacked.Load() < n+20; time.Sleep(5 * time.Millisecond) {
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		t.Logf("restart %d after %d acks", round, h.nacked.Load())
	}
	producing.Wait()
	checkFaultRun(t, b, h, groups, &pmu, published, 2*perProducer, 10*time.Second, cancel, &wg)
}

// Two consumers (different names) of one group, a session timeout, and
// server restarts: sessions run out during the outage, the consumers
// expire each other and rejoin. Neither is superseded by anybody, so no
// Run may end fenced, and every message is handled.
func TestRestartWithSessions(t *testing.T) {
	b, srv := start(t, jetstream.Config{Capacity: 1000, RequestTimeout: time.Second, SessionTimeout: 150 * time.Millisecond})
	c := must(tributary.NewClusterOn(b)).of(t)
	defer c.Close()
	tp := must(tributary.CreateTopic(c, "orders", 16, tributary.JSON[int]())).of(t)
	p := must(tributary.NewProducer[int](c, "p", tributary.RoundRobin())).of(t)
	const n = 120
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	runErrs := make([]error, 2)
	for i, name := range []string{"w1", "w2"} {
		cons := must(tributary.NewConsumer(tp, "g", name)).of(t)
		wg.Go(func() {
			runErrs[i] = cons.Run(ctx, func(_ context.Context, m tributary.Message[int]) error {
				mu.Lock()
				seen[m.Value]++
				if len(seen) == n {
					cancel()
				}
				mu.Unlock()
				return nil
			})
			if errors.Is(runErrs[i], tributary.ErrFenced) {
				t.Errorf("%s: Run = %v (expired %d times)", name, runErrs[i], cons.Stats().Expired)
			}
		})
	}
	send := func(v int) {
		for ctx.Err() == nil {
			if _, err := p.Send(ctx, tp, tributary.Message[int]{Value: v}); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for v := range n {
		send(v)
		if v%30 == 15 {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Errorf("%d of %d handled; Runs: %v", len(seen), n, runErrs)
	}
}
