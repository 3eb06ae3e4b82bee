package jetstream_test

// The Backend's lifecycle: a server that is not reachable, calls after
// Close, Close racing busy goroutines, and a server shut down under load
// or during snapshot reads. Every call ends soon (within hangBound of the
// request timeout) with ErrUnavailable or ErrClosed; blocked calls end; no
// goroutine is left behind.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
	"github.com/nats-io/nats.go"
)

func TestUnreachable(t *testing.T) {
	start := time.Now()
	_, err := jetstream.Open(jetstream.Config{URL: "nats://127.0.0.1:1", Capacity: 1, ConnectTimeout: 500 * time.Millisecond})
	if !errors.Is(err, jetstream.ErrUnavailable) || !errors.Is(err, tributary.ErrUnavailable) {
		t.Fatalf("Open: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Open took %v", d)
	}
	// Both sentinels are in the chain; the text says it once.
	if msg := err.Error(); !strings.HasPrefix(msg, "tributary/jetstream: server unavailable: connecting to nats://127.0.0.1:1: ") ||
		strings.Count(msg, "unavailable") != 1 || strings.Count(msg, "tributary") != 1 {
		t.Errorf("Open's error repeats itself: %q", msg)
	}
}

// Calls after Close: an error (tributary.ErrClosed), no hang, no panic;
// Close twice is a no-op; blocked Poll and Publish end with ErrClosed.
func TestAfterClose(t *testing.T) {
	b, srv := start(t, jetstream.Config{Storage: jetstream.MemoryStorage, Capacity: 1, RequestTimeout: time.Second})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	pub(t, bt, 0, "x")
	other, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 1, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ot, _, err := other.OpenTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	// Blocked calls: a Poll of another group member with nothing to poll,
	// a Publish to a full partition.
	idle := member(t, ot, "g2", "m")
	must(idle.Join()).of(t)
	wantRecs(t, poll(t, idle, 1), rec{0, 0, "x", 1}) // now in flight
	m2 := member(t, bt, "g2", "m")
	errs := make(chan error, 2)
	go func() { _, err := m2.Poll(context.Background(), nil, nil, 1); errs <- err }()
	go func() { _, err := bt.Publish(context.Background(), nil, 0, engine.Message{}); errs <- err }()
	time.Sleep(300 * time.Millisecond)
	begin := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, tributary.ErrClosed) {
				t.Errorf("blocked call after Close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("blocked call did not end after Close")
		}
	}
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, tributary.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", what, err)
		}
	}
	_, err = b.CreateTopic("u", 1, "")
	closed("CreateTopic", err)
	_, _, err = b.OpenTopic("t")
	closed("OpenTopic", err)
	if ts := b.Topics(); len(ts) != 0 {
		t.Errorf("Topics after Close = %v", ts)
	}
	_, err = b.CreateGroup("t", "g3", engine.RoundRobin)
	closed("CreateGroup", err)
	_, err = b.DeleteGroup("t", "g3")
	closed("DeleteGroup", err)
	_, err = b.SetAssignor("t", "g", engine.Range)
	closed("SetAssignor", err)
	_, err = b.AddPartitions("t", 1)
	closed("AddPartitions", err)
	_, err = b.Seek("t", "g", 0, 0)
	closed("Seek", err)
	_, err = b.Describe("t")
	closed("Describe", err)
	_, err = b.Snapshot("t")
	closed("Snapshot", err)
	_, err = bt.TryPublish(0, engine.Message{})
	closed("TryPublish", err)
	_, err = bt.Publish(context.Background(), nil, 0, engine.Message{})
	closed("Publish", err)
	_, err = m.Join()
	closed("Join", err)
	_, err = m.Leave()
	closed("Leave", err)
	if a := m.Assignment(); len(a) != 0 {
		t.Errorf("Assignment after Close = %v", a)
	}
	_, err = m.TryPoll(nil, 1)
	closed("TryPoll", err)
	_, err = m.Poll(context.Background(), nil, nil, 1)
	closed("Poll", err)
	_, err = m.TryPollPartition(nil, 0)
	closed("TryPollPartition", err)
	_, err = m.Ack(0, 0)
	closed("Ack", err)
	_, err = m.Retry(0, 0)
	closed("Retry", err)
	_ = bt.Partitions()
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("calls after Close took %v", d)
	}
	// Invalid arguments are still invalid after Close.
	_, err = b.CreateTopic("bad name", 1, "")
	wantInvalid(t, "CreateTopic bad name after Close", err)
	// The other Backend is unaffected.
	ok, err := idle.Ack(0, 0)
	wantBool(t, "other backend's Ack", ok, err, true)
}

// Close racing busy goroutines (server up): no panic, every call ends with
// an error soon after, blocked calls end with ErrClosed.
func TestCloseUnderLoad(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage, Capacity: 4, RequestTimeout: time.Second})
	bt := topic(t, b, "t", 2)
	var wg sync.WaitGroup
	var closedAt atomic.Int64
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := bt.Member("g", fmt.Sprint("m", w%3))
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; ; i++ {
				var err error
				afterClose := closedAt.Load() != 0 // this op starts after Close
				switch (w + i) % 5 {
				case 0:
					_, err = bt.TryPublish(int32(i%2), engine.Message{Payload: "x"})
				case 1:
					_, err = m.Join()
				case 2:
					var rs []engine.Record
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
					rs, err = m.Poll(ctx, nil, nil, 2)
					cancel()
					for _, r := range rs {
						m.Ack(r.Partition, r.Offset) //nolint:errcheck
					}
				case 3:
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
					_, err = bt.Publish(ctx, nil, 0, engine.Message{})
					cancel()
				case 4:
					_, err = b.Describe("t")
				}
				if afterClose {
					if err == nil || errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("worker %d op %d after Close: %v", w, (w+i)%5, err)
					} else if !errors.Is(err, tributary.ErrClosed) {
						t.Errorf("worker %d op %d after Close: %v, want ErrClosed", w, (w+i)%5, err)
					}
					return
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	b.Close()
	closedAt.Store(time.Now().UnixNano()) // ops that start from here on must fail
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("workers did not stop after Close")
	}
}

// The server shuts down under load: every call fails within about
// RequestTimeout (no hang), blocked calls end, Close works, and no
// goroutine is left behind.
func TestServerShutdownUnderLoad(t *testing.T) {
	const rt = 500 * time.Millisecond
	b, srv := start(t, jetstream.Config{Storage: jetstream.MemoryStorage, Capacity: 5, RequestTimeout: rt, ConnectTimeout: rt})
	bt := topic(t, b, "t", 2)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var down atomic.Bool
	slow := func(what string, begin time.Time) {
		if d := time.Since(begin); down.Load() && d > hangBound(rt) {
			t.Errorf("%s took %v with the server down", what, d)
		}
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				begin := time.Now()
				switch w {
				case 0:
					bt.TryPublish(int32(w%2), engine.Message{Payload: "x"}) //nolint:errcheck
					slow("TryPublish", begin)
				case 1:
					pctx, pc := context.WithTimeout(ctx, 3*rt)
					rs, _ := m.Poll(pctx, nil, nil, 2)
					pc()
					slow("Poll", begin)
					for _, r := range rs {
						begin := time.Now()
						m.Ack(r.Partition, r.Offset) //nolint:errcheck
						slow("Ack", begin)
					}
				case 2:
					pctx, pc := context.WithTimeout(ctx, 3*rt)
					bt.Publish(pctx, nil, 1, engine.Message{Payload: "y"}) //nolint:errcheck
					pc()
					slow("Publish", begin)
				case 3:
					member(t, bt, "g", "z").Join() //nolint:errcheck
					slow("Join", begin)
					b.Describe("t") //nolint:errcheck
					slow("Describe", begin)
				}
				if down.Load() {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	srv.Shutdown()
	down.Store(true)
	begin := time.Now()
	calls := map[string]func() error{
		"CreateTopic": func() error { _, err := b.CreateTopic("u", 1, ""); return err },
		"TryPublish":  func() error { _, err := bt.TryPublish(0, engine.Message{}); return err },
		"TryPoll":     func() error { _, err := m.TryPoll(nil, 1); return err },
		"Ack":         func() error { _, err := m.Ack(0, 0); return err },
		"Seek":        func() error { _, err := b.Seek("t", "g", 0, 0); return err },
		"Snapshot":    func() error { _, err := b.Snapshot("t"); return err },
		"Leave":       func() error { _, err := m.Leave(); return err },
		"AddParts":    func() error { _, err := b.AddPartitions("t", 1); return err },
	}
	for name, f := range calls {
		c := time.Now()
		if err := f(); !errors.Is(err, jetstream.ErrUnavailable) {
			t.Errorf("%s with the server down: %v, want ErrUnavailable", name, err)
		}
		if d := time.Since(c); d > hangBound(rt) {
			t.Errorf("%s with the server down took %v", name, d)
		}
	}
	_ = b.Topics()
	_ = m.Assignment()
	t.Logf("calls with the server down: %v", time.Since(begin))
	time.Sleep(2 * rt)
	closeStart := time.Now()
	b.Close()
	cancel()
	wg.Wait()
	if d := time.Since(closeStart); d > hangBound(rt) {
		t.Errorf("workers took %v to stop after Close", d)
	}
}

// TestCloseAndShutdownDuringReads: polls and acks run in loops
// (snapshot reads in flight) while the server is shut down, and then while
// the Backend is closed: every call returns within hangBound of the
// request timeout, with ErrUnavailable or ErrClosed.
func TestCloseAndShutdownDuringReads(t *testing.T) {
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

// nats.go answers ErrConnectionClosed also for a flush cut short by a
// disconnect (a blocked Poll's or Publish's subscribe-and-flush during a
// server restart: TestRestartSnapshots's producers saw a Publish fail
// ErrClosed so, about once in 60 runs): on an open Backend it is
// ErrUnavailable (the caller tries again), and only once the Backend is
// closed ErrClosed.
func TestConnectionClosedErrorWhileOpen(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	if err := jetstream.Fail(b, nats.ErrConnectionClosed); !errors.Is(err, jetstream.ErrUnavailable) || errors.Is(err, tributary.ErrClosed) {
		t.Fatalf("ErrConnectionClosed on an open Backend = %v, want ErrUnavailable, not ErrClosed", err)
	}
	b.Close()
	if err := jetstream.Fail(b, nats.ErrConnectionClosed); !errors.Is(err, tributary.ErrClosed) {
		t.Fatalf("ErrConnectionClosed on a closed Backend = %v, want ErrClosed", err)
	}
}
