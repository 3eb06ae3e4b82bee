package tributary_test

// Member liveness under races and fencing (SPEC rules 24–25,
// docs/library.md "Joining again" and "Fencing"): a consumer's joins again
// after an expiry never race its Close or each other, a heartbeat that
// finds it expired joins at once, and a superseded consumer can neither
// seek, run nor commit for its successor.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// TestHeartbeatRejoinsWhileHandlerRuns: docs/library.md "Joining again":
// a consumer that finds itself expired — a heartbeat answers false — joins
// the group again at once. Here Run's heartbeat loop finds it expired while
// its handler is mid-record (a stalled process), and joins before the
// handler returns.
func TestHeartbeatRejoinsWhileHandlerRuns(t *testing.T) {
	c, clock := liveCluster(t)
	tp := testTopic(t, c, "orders", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	r := testConsumer(t, tp, "g", "r")
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	done := runAsync(guardCtx(t), r, func(ctx context.Context, m tributary.Message[string]) error {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "x"})
	<-started
	clock.Advance(liveSession) // a pause as long as the session timeout
	// The loop's next heartbeat (every 100 ms of real time) finds r
	// expired and joins again, the handler still running.
	waitFor(t, "r to join again while its handler runs", func() bool {
		return r.Stats().Expired >= 1 && slices.Contains(groupDesc(t, c, "orders", "g").Members, "r")
	})
	close(release)
	waitFor(t, "rejoin after handler", func() bool { return r.Stats().Expired >= 1 })
	t.Logf("after handler returned: members %v, Stats %+v", groupDesc(t, c, "orders", "g").Members, r.Stats())
	r.Close()
	awaitDone(t, done, guard, "Run")
}

// TestSupersededConsumerCannotSeekOrRun: docs/library.md "Fencing": a
// NewConsumer of the same topic, group and name on any Cluster of the same
// Backend supersedes the older consumer; every call of the superseded one
// returns an error wrapping ErrFenced and ErrClosed.
func TestSupersededConsumerCannotSeekOrRun(t *testing.T) {
	a, _ := liveCluster(t)
	b, err := tributary.NewClusterOn(a.Backend())
	if err != nil {
		t.Fatal(err)
	}
	tpA := testTopic(t, a, "orders", 1, tributary.String())
	tpB, err := tributary.OpenTopic(b, "orders", tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	pr := testProducer[string](t, a, "p", tributary.Manual())
	for i := 0; i < 3; i++ {
		sendOK(t, pr, tpA, tributary.Message[string]{Partition: 0, Value: "v"})
	}
	old := testConsumer(t, tpA, "g", "x")
	for i := 0; i < 2; i++ {
		ms, err := old.TryPoll(1)
		if err != nil || len(ms) != 1 {
			t.Fatalf("%v %v", ms, err)
		}
		if err := old.Ack(ms[0]); err != nil {
			t.Fatal(err)
		}
	}
	succ := testConsumer(t, tpB, "g", "x") // supersedes old
	_ = succ
	err = old.Seek(0, 3) // skip the successor's next record
	t.Logf("old.Seek after being superseded: %v", err)
	gp := groupDesc(t, a, "orders", "g").Partitions[0]
	if !errors.Is(err, tributary.ErrFenced) || gp.Committed != 2 {
		t.Errorf("superseded consumer's Seek: err %v (want ErrFenced), group committed now %d (was 2)", err, gp.Committed)
	}
	// once it knows it is fenced
	_, perr := old.TryPoll(1)
	err = old.Seek(0, 3)
	t.Logf("TryPoll: %v; Seek after: %v", perr, err)
	if !errors.Is(err, tributary.ErrFenced) {
		t.Errorf("fenced consumer's Seek: %v, want ErrFenced", err)
	}
	rerr := old.Run(context.Background(), func(context.Context, tributary.Message[string]) error { return nil })
	t.Logf("Run on fenced: %v", rerr)
	if !errors.Is(rerr, tributary.ErrFenced) {
		t.Errorf("fenced consumer's Run: %v, want ErrFenced", rerr)
	}
	herr := old.Heartbeat()
	cerr := old.Close()
	t.Logf("Heartbeat %v Close %v members %v", herr, cerr, groupDesc(t, a, "orders", "g").Members)
	if m := groupDesc(t, a, "orders", "g").Members; !slices.Equal(m, []string{"x"}) {
		t.Errorf("members %v", m)
	}
}

// TestCloseRacingRunRejoinLeaves: Close leaves the group; a Run whose poll
// finds the consumer expired joins again. If the two race, the consumer
// must not stay a member after Close and Run have both returned.
func TestCloseRacingRunRejoinLeaves(t *testing.T) {
	c, clock := liveCluster(t)
	tp := testTopic(t, c, "orders", 1, tributary.String())
	ghosts := 0
	for i := 0; i < 300 && ghosts == 0; i++ {
		name := "r" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		r := testConsumer(t, tp, "g", name)
		done := runAsync(guardCtx(t), r, func(context.Context, tributary.Message[string]) error { return nil })
		waitPollBlocked(t, r, 1)
		clock.Advance(liveSession)
		go c.Describe("orders") // expires r, waking its poll
		if i%3 == 1 {
			time.Sleep(time.Duration(i%7) * 10 * time.Microsecond)
		}
		r.Close()
		awaitDone(t, done, guard, "Run")
		if m := groupDesc(t, c, "orders", "g").Members; slices.Contains(m, name) {
			t.Errorf("iteration %d: %s is a member after Close and Run returned: %v; Stats %+v", i, name, m, r.Stats())
			ghosts++
		}
	}
}

// TestCloseRacingTryPollRejoinLeaves: as above with TryPoll (which heartbeats
// and joins again when it finds the consumer expired) racing Close.
func TestCloseRacingTryPollRejoinLeaves(t *testing.T) {
	c, clock := liveCluster(t)
	tp := testTopic(t, c, "orders", 1, tributary.String())
	for i := 0; i < 3000; i++ {
		name := fmt.Sprintf("r%d", i)
		r, err := tributary.NewConsumer(tp, "g", name)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(liveSession)
		var wg sync.WaitGroup
		wg.Add(2)
		start := make(chan struct{})
		go func() { defer wg.Done(); <-start; r.TryPoll(1) }()
		go func() { defer wg.Done(); <-start; r.Close() }()
		close(start)
		wg.Wait()
		if m := groupDesc(t, c, "orders", "g").Members; slices.Contains(m, name) {
			t.Fatalf("iteration %d: %s is a member after Close returned and TryPoll returned: %v; Stats %+v", i, name, m, r.Stats())
		}
	}
}

// TestRemoveThenNewConsumerFencesTheOld: RemoveMember, then at once NewConsumer of
// the name; the removed one is fenced, the new one consumes.
func TestRemoveThenNewConsumerFencesTheOld(t *testing.T) {
	c, _ := liveCluster(t)
	tp := testTopic(t, c, "orders", 2, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "a"})
	old := testConsumer(t, tp, "g", "x")
	ms, _ := old.TryPoll(2)
	if len(ms) != 1 {
		t.Fatal(ms)
	}
	runDone := runAsync(guardCtx(t), old, func(context.Context, tributary.Message[string]) error { return nil })
	waitPollBlocked(t, old, 1)
	if ok, err := c.RemoveMember("orders", "g", "x"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	nw, err := tributary.NewConsumer(tp, "g", "x")
	if err != nil {
		t.Fatalf("NewConsumer after RemoveMember: %v", err)
	}
	defer nw.Close()
	rerr := awaitDone(t, runDone, guard, "old Run")
	aerr := old.Ack(ms[0])
	cerr := old.Close()
	t.Logf("old Run %v, Ack %v, Close %v", rerr, aerr, cerr)
	if !errors.Is(rerr, tributary.ErrFenced) || !errors.Is(aerr, tributary.ErrFenced) || !errors.Is(aerr, tributary.ErrNotInFlight) {
		t.Errorf("old Run %v, Ack %v", rerr, aerr)
	}
	got, err := nw.TryPoll(2)
	if err != nil || len(got) != 1 || got[0].Attempt != 2 {
		t.Errorf("new consumer: %+v %v", got, err)
	}
	if m := groupDesc(t, c, "orders", "g").Members; !slices.Equal(m, []string{"x"}) {
		t.Errorf("members %v", m)
	}
}

// TestSupersededRunEndsFenced: a Run of a consumer superseded by a
// NewConsumer on another cluster of the backend ends with ErrFenced and
// takes nothing from the successor.
func TestSupersededRunEndsFenced(t *testing.T) {
	a, _ := liveCluster(t)
	b, _ := tributary.NewClusterOn(a.Backend())
	defer b.Close()
	tpA := testTopic(t, a, "orders", 1, tributary.String())
	tpB, _ := tributary.OpenTopic(b, "orders", tributary.String())
	pr := testProducer[string](t, a, "p", tributary.Manual())
	old := testConsumer(t, tpA, "g", "x")
	var h handled
	done := runAsync(guardCtx(t), old, func(_ context.Context, m tributary.Message[string]) error { h.add(m); return nil })
	waitPollBlocked(t, old, 1)
	succ := testConsumer(t, tpB, "g", "x")
	sendOK(t, pr, tpA, tributary.Message[string]{Partition: 0, Value: "v"})
	start := time.Now()
	err := awaitDone(t, done, guard, "old Run")
	t.Logf("old Run ended after %v: %v; old handled %v", time.Since(start), err, h.get())
	if !errors.Is(err, tributary.ErrFenced) {
		t.Errorf("old Run: %v", err)
	}
	ms, err := succ.TryPoll(1)
	if err != nil || len(ms) != 1 || len(h.get()) != 0 {
		t.Errorf("successor's TryPoll: %v, %v (the old Run handled %v): want the record, the old Run none", ms, err, h.get())
	}
}

// TestSupersededAckDoesNotCommit: the old incarnation's late Ack of a
// record the successor now holds (same member name) must not commit it.
func TestSupersededAckDoesNotCommit(t *testing.T) {
	a, _ := liveCluster(t)
	b, _ := tributary.NewClusterOn(a.Backend())
	defer b.Close()
	tpA := testTopic(t, a, "orders", 1, tributary.String())
	tpB, _ := tributary.OpenTopic(b, "orders", tributary.String())
	pr := testProducer[string](t, a, "p", tributary.Manual())
	sendOK(t, pr, tpA, tributary.Message[string]{Partition: 0, Value: "v"})
	old := testConsumer(t, tpA, "g", "x")
	ms, _ := old.TryPoll(1)
	succ := testConsumer(t, tpB, "g", "x")
	ms2, _ := succ.TryPoll(1)
	err := old.Ack(ms[0])
	rerr := old.Retry(ms[0])
	gp := groupDesc(t, a, "orders", "g").Partitions[0]
	t.Logf("old Ack %v Retry %v; successor got %d (attempt %d); group %+v", err, rerr, len(ms2), ms2[0].Attempt, gp)
	if err == nil || gp.Committed != 0 || !gp.InFlight {
		t.Errorf("old incarnation's Ack took effect: %v %+v", err, gp)
	}
	if !errors.Is(err, tributary.ErrNotInFlight) || !errors.Is(err, tributary.ErrFenced) {
		t.Errorf("superseded consumer's first Ack: %v; docs/library.md: ErrFenced and ErrClosed (an Ack, ErrNotInFlight too)", err)
	}
	if err := succ.Ack(ms2[0]); err != nil {
		t.Errorf("successor Ack: %v", err)
	}
}

// slowRejoin wraps a backend so that a member's Rejoin, while delay is on,
// first waits 50ms (a networked backend's round trip); with once, only
// the first Rejoin after delay was set waits, and clears it.
type slowRejoin struct {
	tributary.Backend
	delay   *atomic.Bool
	entered chan struct{}
	once    bool
}

func (b slowRejoin) OpenTopic(topic string) (tributary.BackendTopic, string, error) {
	t, pt, err := b.Backend.OpenTopic(topic)
	if err != nil {
		return t, pt, err
	}
	return slowTopic{t, b}, pt, nil
}

type slowTopic struct {
	tributary.BackendTopic
	b slowRejoin
}

func (t slowTopic) Member(group, member string) (tributary.BackendMember, error) {
	m, err := t.BackendTopic.Member(group, member)
	if err != nil {
		return m, err
	}
	return slowMember{m, t.b}, nil
}

type slowMember struct {
	tributary.BackendMember
	b slowRejoin
}

func (m slowMember) Rejoin() ([]int32, error) {
	if m.b.once && m.b.delay.CompareAndSwap(true, false) || !m.b.once && m.b.delay.Load() {
		m.b.entered <- struct{}{}
		time.Sleep(50 * time.Millisecond)
	}
	return m.BackendMember.Rejoin()
}

// slowCluster is a cluster on a fake clock with session timeout
// liveSession whose members' Rejoin is slowed by sb (once: only the first
// after sb.delay is set).
func slowCluster(t *testing.T, once bool) (*tributary.Cluster, *testclock.Clock, slowRejoin) {
	t.Helper()
	clock := testclock.New()
	be, err := tributary.NewEngineBackend(100, engine.WithClock(clock.Now), engine.WithSessionTimeout(liveSession))
	if err != nil {
		t.Fatal(err)
	}
	sb := slowRejoin{be, new(atomic.Bool), make(chan struct{}, 1), once}
	c, err := tributary.NewClusterOn(sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, clock, sb
}

// TestCloseDuringSlowRejoinLeaves: a TryPoll finds the consumer expired
// and joins again; Close runs while that join is on its way. Once both
// have returned the closed consumer is no member of its group (a member
// left behind would hold its partitions, on a fake clock for ever).
func TestCloseDuringSlowRejoinLeaves(t *testing.T) {
	c, clock, sb := slowCluster(t, false)
	tp := testTopic(t, c, "orders", 2, tributary.String())
	r := testConsumer(t, tp, "g", "r")
	clock.Advance(liveSession)
	sb.delay.Store(true)
	done := make(chan error, 1)
	go func() { _, err := r.TryPoll(1); done <- err }()
	<-sb.entered // TryPoll found r expired and is joining again
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("TryPoll: %v", <-done)
	g := groupDesc(t, c, "orders", "g")
	t.Logf("after Close: members %v partitions %+v; Stats %+v; Consumers %v", g.Members, g.Partitions, r.Stats(), c.Consumers())
	if slices.Contains(g.Members, "r") {
		t.Errorf("closed consumer r is a member of g after Close: %v", g.Members)
	}
}

// TestCloseDuringRunSlowRejoinLeaves: as above, with Run: its poll finds
// the consumer expired and joins again while Close runs.
func TestCloseDuringRunSlowRejoinLeaves(t *testing.T) {
	c, clock, sb := slowCluster(t, false)
	tp := testTopic(t, c, "orders", 2, tributary.String())
	r := testConsumer(t, tp, "g", "r")
	done := runAsync(guardCtx(t), r, func(context.Context, tributary.Message[string]) error { return nil })
	// Let Run block in its poll (waitPollBlocked cannot see it: Stats.Waits
	// is the engine member's, which sb wraps); if it has not, its first
	// poll finds r expired all the same.
	time.Sleep(50 * time.Millisecond)
	sb.delay.Store(true)
	clock.Advance(liveSession)
	c.Describe("orders") // expires r; its Run's poll wakes and joins again
	<-sb.entered
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Run: %v", awaitDone(t, done, guard, "Run"))
	g := groupDesc(t, c, "orders", "g")
	t.Logf("after Close and Run returned: members %v; Stats %+v", g.Members, r.Stats())
	if slices.Contains(g.Members, "r") {
		t.Errorf("closed consumer r is a member of g after Close and Run returned: %v", g.Members)
	}
}

// TestConcurrentRejoinsKeepOwnDelivery: two calls of one consumer
// (Heartbeat and TryPoll; the consumer is safe for concurrent use) both
// find it expired; only one joins again, so the delivery the consumer takes
// meanwhile stays its own and its Ack succeeds (a second Rejoin, of a
// member by then, would cancel it: SPEC rule 25).
func TestConcurrentRejoinsKeepOwnDelivery(t *testing.T) {
	c, clock, ob := slowCluster(t, true)
	tp := testTopic(t, c, "orders", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "v"})
	r := testConsumer(t, tp, "g", "r")
	clock.Advance(liveSession)
	ob.delay.Store(true)
	hb := make(chan error, 1)
	go func() { hb <- r.Heartbeat() }()
	<-ob.entered // Heartbeat found r expired; its join is on its way
	ms, err := r.TryPoll(1)
	if err != nil || len(ms) != 1 {
		t.Fatalf("TryPoll: %v %v", ms, err)
	}
	t.Logf("Heartbeat: %v", <-hb)
	aerr := r.Ack(ms[0])
	again, _ := r.TryPoll(1)
	t.Logf("Ack of the record just polled: %v; next TryPoll %d (attempt %v); Stats %+v", aerr, len(again), func() any {
		if len(again) > 0 {
			return again[0].Attempt
		}
		return nil
	}(), r.Stats())
	if aerr != nil {
		t.Errorf("the consumer's own second rejoin cancelled the delivery it had just taken: Ack %v", aerr)
	}
}

// TestSessionTimeoutBelowMinimumRefused: the typed library's engine
// backend refuses a session timeout under MinSessionTimeout (its
// consumers would find themselves expired at every call and join again
// without end), with ErrInvalidArgument, and takes MinSessionTimeout.
func TestSessionTimeoutBelowMinimumRefused(t *testing.T) {
	for _, d := range []time.Duration{time.Nanosecond, tributary.MinSessionTimeout - time.Nanosecond} {
		if _, err := tributary.NewCluster(10, engine.WithSessionTimeout(d)); !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Errorf("NewCluster with session timeout %v: %v, want ErrInvalidArgument", d, err)
		}
		if _, err := tributary.NewEngineBackend(10, engine.WithSessionTimeout(d)); !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Errorf("NewEngineBackend with session timeout %v: %v, want ErrInvalidArgument", d, err)
		}
	}
	c, err := tributary.NewCluster(10, engine.WithSessionTimeout(tributary.MinSessionTimeout))
	if err != nil {
		t.Fatalf("NewCluster with MinSessionTimeout: %v", err)
	}
	c.Close()
}
