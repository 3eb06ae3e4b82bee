package jetstream_test

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

// TestHostile23RestartSnapshots: TestFaultNodeRestart's invariants on one
// server (Replicas 1: snapshot reads, deferred purges) with a small
// capacity (publishers wait for room, purges happen at fills), restarted
// twice under load. Every offset a Publish returned is acked once per
// group, no two members hold a (group, partition) at once, and the run
// does not stall.
func TestHostile23RestartSnapshots(t *testing.T) {
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

// TestHostile23CloseAndShutdownDuringReads: polls and acks run in loops
// (snapshot reads in flight) while the server is shut down, and then while
// the Backend is closed: every call returns within hangBound of the
// request timeout, with ErrUnavailable or ErrClosed.
func TestHostile23CloseAndShutdownDuringReads(t *testing.T) {
	for _, how := range []string{"shutdown", "close"} {
		t.Run(how, func(t *testing.T) {
			rt := 500 * time.Millisecond
			b, srv := start(t, jetstream.Config{Capacity: 100, Storage: jetstream.MemoryStorage, RequestTimeout: rt})
			bt := topic(t, b, "t", 8)
			for p := range int32(8) {
				for i := range 5 {
					pub(t, bt, p, fmt.Sprint(i))
				}
			}
			var ms []tributary.BackendMember
			for i := range 4 {
				m := member(t, bt, fmt.Sprintf("g%d", i%2), fmt.Sprintf("m%d", i))
				must(m.Join()).of(t)
				ms = append(ms, m)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			var worst time.Duration
			for _, m := range ms {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						st := time.Now()
						rs, err := m.TryPoll(nil, 8)
						for _, r := range rs {
							m.Retry(r.Partition, r.Offset)
						}
						el := time.Since(st)
						mu.Lock()
						worst = max(worst, el)
						mu.Unlock()
						if err != nil && !errors.Is(err, jetstream.ErrUnavailable) && !errors.Is(err, tributary.ErrClosed) && !errors.Is(err, jetstream.ErrContention) {
							t.Errorf("poll: %v", err)
							return
						}
					}
				})
			}
			time.Sleep(300 * time.Millisecond)
			if how == "shutdown" {
				srv.Shutdown()
			} else {
				b.Close()
			}
			time.Sleep(3 * rt)
			close(stop)
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(hangBound(rt)):
				t.Fatalf("calls still running %v after the %s", hangBound(rt), how)
			}
			t.Logf("worst call %v", worst)
			if worst > hangBound(rt) {
				t.Errorf("a call took %v, over %v", worst, hangBound(rt))
			}
			b.Close()
		})
	}
}
