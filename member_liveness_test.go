package tributary_test

// Member liveness in the typed library (SPEC rules 24–25, docs/library.md):
// Run heartbeats, expired consumers join again, NewConsumer is a new
// incarnation (Rejoin), and superseded or removed consumers are fenced.
// The broker runs on a testclock.Clock (liveCluster), moved only by the
// tests, so that no expiry depends on how fast the machine is: a test
// moves the clock by half a session timeout at a time, and only after it
// has seen every consumer that should be alive heartbeat at the clock's
// reading.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
)

// handled is what a Run handler saw: "partition/offset value #attempt".
type handled struct {
	mu   sync.Mutex
	seen []string
}

func (h *handled) add(m tributary.Message[string]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, fmt.Sprintf("%d/%d %s #%d", m.Partition, m.Offset, m.Value, m.Attempt))
}

func (h *handled) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

// TestAbandonedConsumerExpires: a consumer that takes deliveries and is
// abandoned (never closed, never called again) expires after the session
// timeout; the group's other member, kept alive by its Run's heartbeats,
// then gets its partition and the deliveries it held (Attempt 2) and
// handles every record, all within one session timeout and a half of the
// broker clock.
func TestAbandonedConsumerExpires(t *testing.T) {
	c, clock := liveCluster(t)
	tp := testTopic(t, c, "orders", 2, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	for _, v := range []struct {
		p int32
		s string
	}{{0, "a"}, {0, "b"}, {1, "c"}, {1, "d"}} {
		sendOK(t, pr, tp, tributary.Message[string]{Partition: v.p, Value: v.s})
	}
	gone, err := tributary.NewConsumer(tp, "g", "gone")
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := gone.TryPoll(2); err != nil || len(ms) != 2 {
		t.Fatalf("TryPoll of the consumer to abandon: %v, %v", ms, err)
	}
	// gone is abandoned from here on (the cluster's Close closes it).
	live := testConsumer(t, tp, "g", "live")
	var h handled
	done := runAsync(guardCtx(t), live, func(_ context.Context, m tributary.Message[string]) error {
		h.add(m)
		return nil
	})
	for step := 0; step < 3; step++ { // 1.5 session timeouts of the broker clock
		clock.Advance(liveSession / 2)
		awaitHeartbeats(t, c, clock, "orders", "g", "live")
	}
	waitFor(t, "live to handle every record", func() bool { return len(h.get()) == 4 })
	got := h.get()
	slices.Sort(got)
	if want := []string{"0/0 a #2", "0/1 b #1", "1/0 c #2", "1/1 d #1"}; !slices.Equal(got, want) {
		t.Fatalf("live handled %v, want %v (gone's deliveries again, Attempt 2)", got, want)
	}
	if g := groupDesc(t, c, "orders", "g"); !slices.Equal(g.Members, []string{"live"}) {
		t.Fatalf("members %v, want [live]: gone expired", g.Members)
	}
	if s := live.Stats(); s.Heartbeats == 0 || s.Expired != 0 {
		t.Fatalf("live's stats %+v: want heartbeats and no expiry", s)
	}
	live.Close()
	if err := awaitDone(t, done, guard, "live's Run"); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestSlowHandlerKeepsPartitions: a handler that runs for three session
// timeouts of the broker clock keeps its consumer's partitions (Run
// heartbeats while it runs), while another member of the group waits; its
// record is handled once and acked.
func TestSlowHandlerKeepsPartitions(t *testing.T) {
	c, clock := liveCluster(t)
	tp := testTopic(t, c, "orders", 2, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "slow"})
	slow := testConsumer(t, tp, "g", "slow")
	idle := testConsumer(t, tp, "g", "waiting") // sorts after slow: slow owns partition 0
	started, release := make(chan struct{}), make(chan struct{})
	var n, idleN int
	var mu sync.Mutex
	slowDone := runAsync(guardCtx(t), slow, func(ctx context.Context, m tributary.Message[string]) error {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			close(started)
			<-release
		}
		return nil
	})
	idleDone := runAsync(guardCtx(t), idle, func(context.Context, tributary.Message[string]) error {
		mu.Lock()
		idleN++
		mu.Unlock()
		return nil
	})
	select {
	case <-started:
	case <-time.After(guard):
		t.Fatal("the slow handler did not start")
	}
	for step := 0; step < 6; step++ { // three session timeouts
		clock.Advance(liveSession / 2)
		awaitHeartbeats(t, c, clock, "orders", "g", "slow", "waiting")
	}
	close(release)
	waitFor(t, "the slow record acked", func() bool { return slow.Stats().Acked == 1 })
	g := groupDesc(t, c, "orders", "g")
	if !slices.Equal(g.Members, []string{"slow", "waiting"}) || g.Partitions[0].Owner != "slow" || g.Partitions[0].Committed != 1 {
		t.Fatalf("group %+v: want slow still owning partition 0, its record committed", g)
	}
	mu.Lock()
	if n != 1 || idleN != 0 {
		t.Fatalf("handler calls: slow %d, waiting %d; want 1 and 0", n, idleN)
	}
	mu.Unlock()
	if s := slow.Stats(); s.Expired != 0 || s.Handled != 1 || s.Heartbeats == 0 {
		t.Fatalf("slow's stats %+v: want one record handled, heartbeats, no expiry", s)
	}
	slow.Close()
	idle.Close()
	for _, d := range []<-chan error{slowDone, idleDone} {
		if err := awaitDone(t, d, guard, "Run"); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
}

// TestRestartedIncarnationGetsDeliveriesAtOnce: a process restarted under
// the same consumer name (here a second Cluster on the same backend) while
// its predecessor still holds deliveries gets them at once, Attempt 2,
// with no rebalance; the predecessor is fenced: its calls fail with
// ErrFenced, and its Close leaves its successor in the group.
func TestRestartedIncarnationGetsDeliveriesAtOnce(t *testing.T) {
	for _, same := range []bool{false, true} {
		name := map[bool]string{false: "other-cluster", true: "same-cluster"}[same]
		t.Run(name, func(t *testing.T) { testRestartedIncarnation(t, same) })
	}
}

// testRestartedIncarnation is TestRestartedIncarnationGetsDeliveriesAtOnce
// with the new incarnation made on the old one's Cluster (same) or on
// another Cluster of its Backend.
func testRestartedIncarnation(t *testing.T, same bool) {
	c1 := testCluster(t, 10)
	tp := testTopic(t, c1, "orders", 2, tributary.String())
	pr := testProducer[string](t, c1, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "a"})
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 1, Value: "b"})
	old, err := tributary.NewConsumer(tp, "g", "m")
	if err != nil {
		t.Fatal(err)
	}
	held, err := old.TryPoll(2)
	if err != nil || len(held) != 2 {
		t.Fatalf("the first incarnation's TryPoll: %v, %v", held, err)
	}

	c2, tp2 := c1, tp
	if !same {
		c2, err = tributary.NewClusterOn(c1.Backend())
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		tp2, err = tributary.OpenTopic(c2, "orders", tributary.String())
		if err != nil {
			t.Fatal(err)
		}
	}
	next := testConsumer(t, tp2, "g", "m")
	ms, err := next.TryPoll(2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%d/%d %s #%d", m.Partition, m.Offset, m.Value, m.Attempt))
	}
	if want := []string{"0/0 a #2", "1/0 b #2"}; !slices.Equal(got, want) {
		t.Fatalf("the restarted incarnation's first TryPoll: %v, want %v at once", got, want)
	}

	fenced := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, tributary.ErrFenced) || !errors.Is(err, tributary.ErrClosed) {
			t.Fatalf("%s of the old incarnation: %v, want ErrFenced and ErrClosed", what, err)
		}
	}
	_, err = old.TryPoll(2)
	fenced("TryPoll", err)
	err = old.Ack(held[0])
	fenced("Ack", err)
	if !errors.Is(err, tributary.ErrNotInFlight) {
		t.Fatalf("Ack of the old incarnation: %v, want ErrNotInFlight too", err)
	}
	_, err = old.Poll(guardCtx(t), 1)
	fenced("Poll", err)
	if slices.Contains(c1.Consumers(), "m") != same {
		t.Fatalf("consumers of the old incarnation's cluster: %v", c1.Consumers())
	}
	if err := old.Close(); err != nil {
		t.Fatalf("Close of the old incarnation: %v", err)
	}
	if g := groupDesc(t, c1, "orders", "g"); !slices.Equal(g.Members, []string{"m"}) {
		t.Fatalf("members after the old incarnation's Close: %v, want [m]", g.Members)
	}
	for _, m := range ms {
		if err := next.Ack(m); err != nil {
			t.Fatalf("the successor's Ack: %v", err)
		}
	}
}

// TestExpiredManualConsumerRejoins: a consumer driven by hand that lets its
// session run out finds itself expired at its next poll, joins again, gets
// its cancelled delivery (Attempt 2) and says so in ConsumerStats.Expired;
// a blocked Poll that finds the same joins again and waits on.
func TestExpiredManualConsumerRejoins(t *testing.T) {
	c, clock := liveCluster(t)
	tp := testTopic(t, c, "orders", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "a"})
	m := testConsumer(t, tp, "g", "m")
	first, err := m.TryPoll(1)
	if err != nil || len(first) != 1 || first[0].Attempt != 1 {
		t.Fatalf("TryPoll: %v, %v", first, err)
	}
	clock.Advance(liveSession)
	if err := m.Ack(first[0]); !errors.Is(err, tributary.ErrNotInFlight) {
		t.Fatalf("Ack after the session ran out: %v, want ErrNotInFlight (the Ack expired it)", err)
	}
	if s := m.Stats(); s.Expired != 0 {
		t.Fatalf("Expired %d before a poll", s.Expired)
	}
	again, err := m.TryPoll(1)
	if err != nil || len(again) != 1 || again[0].Attempt != 2 || again[0].Offset != 0 {
		t.Fatalf("TryPoll after expiring: %v, %v; want offset 0, Attempt 2", again, err)
	}
	if s := m.Stats(); s.Expired != 1 {
		t.Fatalf("Expired %d, want 1", s.Expired)
	}
	if err := m.Ack(again[0]); err != nil {
		t.Fatal(err)
	}

	// A blocked Poll: the consumer expires before it, finds out, joins
	// again and waits for the next record.
	clock.Advance(liveSession)
	polled := goResult(func() ([]tributary.Message[string], error) { return m.Poll(guardCtx(t), 1) })
	waitFor(t, "the Poll to join again", func() bool { return m.Stats().Expired == 2 })
	waitPollBlocked(t, m, 1)
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "b"})
	r := awaitResult(t, "Poll", polled)
	if r.err != nil || len(r.v) != 1 || r.v[0].Value != "b" {
		t.Fatalf("Poll: %v, %v; want b", r.v, r.err)
	}
	if g := groupDesc(t, c, "orders", "g"); !slices.Equal(g.Members, []string{"m"}) {
		t.Fatalf("members %v, want [m]", g.Members)
	}
}

// TestRemovedConsumerIsFenced: a consumer removed by RemoveMember while
// its handler runs is fenced: Run returns ErrFenced (and ErrClosed), the
// consumer is closed, and a new consumer of the same name joins and gets
// the record; the removed one's Close leaves the new one in the group.
// Whether the removal comes from the consumer's own Cluster or from
// another Cluster on the same backend.
func TestRemovedConsumerIsFenced(t *testing.T) {
	for _, via := range []string{"own cluster", "other cluster"} {
		t.Run(via, func(t *testing.T) {
			c1 := testCluster(t, 10)
			tp := testTopic(t, c1, "orders", 1, tributary.String())
			pr := testProducer[string](t, c1, "p", tributary.Manual())
			sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "a"})
			sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "b"})
			c2, err := tributary.NewClusterOn(c1.Backend())
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			admin, successorOn := c1, c1
			if via == "other cluster" {
				admin, successorOn = c2, c2
			}
			old, err := tributary.NewConsumer(tp, "g", "m")
			if err != nil {
				t.Fatal(err)
			}
			started, release := make(chan struct{}), make(chan struct{})
			var oldSeen handled
			oldDone := runAsync(context.Background(), old, func(_ context.Context, m tributary.Message[string]) error {
				oldSeen.add(m)
				if m.Offset == 0 {
					close(started)
					<-release
				}
				return nil
			})
			<-started
			ok, err := admin.RemoveMember("orders", "g", "m")
			if err != nil || !ok {
				t.Fatalf("RemoveMember: %v, %v", ok, err)
			}
			stp, err := tributary.OpenTopic(successorOn, "orders", tributary.String())
			if err != nil {
				t.Fatal(err)
			}
			next := testConsumer(t, stp, "g", "m")
			close(release)
			err = awaitDone(t, oldDone, guard, "the removed consumer's Run")
			if !errors.Is(err, tributary.ErrFenced) || !errors.Is(err, tributary.ErrClosed) {
				t.Fatalf("Run of the removed consumer: %v, want ErrFenced and ErrClosed", err)
			}
			if got := oldSeen.get(); !slices.Equal(got, []string{"0/0 a #1"}) {
				t.Fatalf("the removed consumer handled %v, want only its first record", got)
			}
			if err := old.Close(); err != nil {
				t.Fatalf("Close of the removed consumer: %v", err)
			}
			if g := groupDesc(t, c1, "orders", "g"); !slices.Equal(g.Members, []string{"m"}) {
				t.Fatalf("members after the removed consumer's Close: %v, want [m]", g.Members)
			}
			for _, want := range []string{"0/0 a #2", "0/1 b #1"} {
				ms, err := next.TryPoll(1)
				if err != nil || len(ms) != 1 {
					t.Fatalf("the successor's TryPoll: %v, %v", ms, err)
				}
				if got := fmt.Sprintf("%d/%d %s #%d", ms[0].Partition, ms[0].Offset, ms[0].Value, ms[0].Attempt); got != want {
					t.Fatalf("the successor got %s, want %s", got, want)
				}
				if err := next.Ack(ms[0]); err != nil {
					t.Fatalf("the successor's Ack: %v", err)
				}
			}
		})
	}
}

// TestRunRejoinsAfterExpiry: a running consumer whose session ran out (the
// broker clock jumped a whole session timeout, as a stalled process sees
// it) finds out at its next heartbeat, joins again, says so in
// ConsumerStats.Expired, and goes on handling records.
func TestRunRejoinsAfterExpiry(t *testing.T) {
	c, clock := liveCluster(t)
	tp := testTopic(t, c, "orders", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	r := testConsumer(t, tp, "g", "r")
	var h handled
	done := runAsync(guardCtx(t), r, func(_ context.Context, m tributary.Message[string]) error {
		h.add(m)
		return nil
	})
	waitPollBlocked(t, r, 1)
	clock.Advance(liveSession)
	waitFor(t, "Run to find r expired and join again", func() bool { return r.Stats().Expired == 1 })
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "after"})
	waitFor(t, "the record handled", func() bool { return len(h.get()) == 1 })
	if got := h.get(); got[0] != "0/0 after #1" {
		t.Fatalf("handled %v", got)
	}
	if g := groupDesc(t, c, "orders", "g"); !slices.Equal(g.Members, []string{"r"}) {
		t.Fatalf("members %v, want [r]", g.Members)
	}
	r.Close()
	if err := awaitDone(t, done, guard, "Run"); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestReturnedPollSendsNoHeartbeat: heartbeats keep a consumer alive only
// while a Run or a blocked Poll of its own goes on (docs/library.md); once
// a Poll has returned, the consumer sends nothing, so that an abandoned
// consumer expires one session timeout after its last call, not a
// heartbeat interval later.
func TestReturnedPollSendsNoHeartbeat(t *testing.T) {
	c, _ := liveCluster(t)
	tp := testTopic(t, c, "orders", 2, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 0, Value: "a"})
	cons := testConsumer(t, tp, "g", "m")
	ms, err := cons.Poll(guardCtx(t), 1)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Poll: %v, %v", ms, err)
	}
	before, _ := lastSeen(t, c, "orders", "g", "m")
	// Three heartbeat intervals of real time: a tick that heartbeated
	// for the returned Poll would have come.
	time.Sleep(3 * tributary.HeartbeatInterval(liveSession))
	if s := cons.Stats(); s.Heartbeats != 0 {
		t.Fatalf("%d heartbeats after the Poll returned, want 0", s.Heartbeats)
	}
	if after, _ := lastSeen(t, c, "orders", "g", "m"); !after.Equal(before) {
		t.Fatalf("last seen moved from %v to %v with no call", before, after)
	}
}
