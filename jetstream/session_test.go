package jetstream_test

// Rule 24 as this backend keeps it: session timeouts on a test clock, and a
// typed consumer whose session expires rejoins and is never fenced.

import (
	"context"
	"errors"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestSessionTimeout: rule 24 as this backend keeps it (weakened: a
// member's last-seen instant is refreshed by its Join, Rejoin and
// Heartbeat; members are expired by their group's Heartbeats, Joins and
// Rejoins). Session timeout 10 s on a test clock: a joins at 0 s, b at 1 s;
// a polls p0. At 9 s b's Heartbeat expires nobody (a seen 9 s before); at
// 10 s it expires a (seen 10 s before: exactly d): b owns both partitions,
// a's delivery is cancelled and goes to b with Attempt 2; Describe's
// LastSeen shows b's heartbeat. a is expired, not fenced: its Ack and
// Heartbeat are false with no error, its poll gets nothing, and its Rejoin
// takes it back. A Poll alone refreshes nothing (the weakening): b, polling
// without heartbeats, is expired by a's Heartbeat d after b's last one.
func TestSessionTimeout(t *testing.T) {
	const d = 10 * time.Second
	clk := testclock.New()
	b, _ := start(t, jetstream.Config{Capacity: 10, SessionTimeout: d, Clock: clk.Now})
	if got := b.SessionTimeout(); got != d {
		t.Fatalf("SessionTimeout() = %v, want %v", got, d)
	}
	bt := topic(t, b, "t", 2)
	pub(t, bt, 0, "x")
	pub(t, bt, 1, "y")
	member := func(name string) interface {
		Join() ([]int32, error)
		Rejoin() ([]int32, error)
		Heartbeat() (bool, error)
		TryPoll([]engine.Record, int32) ([]engine.Record, error)
		Ack(int32, int64) (bool, error)
	} {
		m, err := bt.Member("g", name)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ma, mb := member("a"), member("b")
	t0 := clk.Now()
	if _, err := ma.Join(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if parts, err := mb.Join(); err != nil || len(parts) != 1 || parts[0] != 1 {
		t.Fatalf("b's Join = %v, %v; want [1]", parts, err)
	}
	if recs, err := ma.TryPoll(nil, 4); err != nil || len(recs) != 1 || recs[0].Partition != 0 {
		t.Fatalf("a's poll = %+v, %v", recs, err)
	}
	members := func() ([]string, []time.Time) {
		t.Helper()
		desc, err := b.Describe("t")
		if err != nil {
			t.Fatal(err)
		}
		return desc.Groups[0].Members, desc.Groups[0].LastSeen
	}
	clk.Advance(8 * time.Second) // 9 s
	ok, err := mb.Heartbeat()
	wantBool(t, "b's Heartbeat at 9 s", ok, err, true)
	if ms, seen := members(); len(ms) != 2 || !seen[0].Equal(t0) || !seen[1].Equal(clk.Now()) {
		t.Fatalf("at 9 s: members %v last seen %v; want a (0 s) and b (9 s)", ms, seen)
	}
	clk.Advance(time.Second) // 10 s: a seen exactly d before
	ok, err = mb.Heartbeat()
	wantBool(t, "b's Heartbeat at 10 s", ok, err, true)
	if ms, seen := members(); len(ms) != 1 || ms[0] != "b" || !seen[0].Equal(clk.Now()) {
		t.Fatalf("at 10 s: members %v last seen %v; want b alone (10 s)", ms, seen)
	}
	recs, err := mb.TryPoll(nil, 4)
	if err != nil || len(recs) != 2 || recs[0].Partition != 0 || recs[0].Attempt != 2 || recs[1].Attempt != 1 {
		t.Fatalf("b's poll after a expired = %+v, %v; want p0 (Attempt 2) and p1", recs, err)
	}
	ok, err = ma.Ack(0, 0)
	wantBool(t, "the expired member's Ack", ok, err, false)
	ok, err = ma.Heartbeat()
	wantBool(t, "the expired member's Heartbeat", ok, err, false)
	if recs, err := ma.TryPoll(nil, 4); len(recs) != 0 {
		t.Fatalf("the expired member's poll = %+v, %v; want nothing", recs, err)
	}
	if parts, err := ma.Rejoin(); err != nil || len(parts) != 1 {
		t.Fatalf("the expired member's Rejoin = %v, %v; want one partition", parts, err)
	}
	for p := int32(0); p < 2; p++ { // b's deliveries: the one it keeps, the one it lost to a
		mb.Ack(p, 0) //nolint:errcheck // either may have moved
	}

	clk.Advance(d - time.Second) // b last seen at 10 s; it polls, it does not heartbeat
	mb.TryPoll(nil, 4)           //nolint:errcheck // a refresh or not, the point
	ok, err = ma.Heartbeat()
	wantBool(t, "a's Heartbeat at 19 s", ok, err, true)
	if ms, _ := members(); len(ms) != 2 {
		t.Fatalf("at 19 s: members %v; want a and b", ms)
	}
	clk.Advance(time.Second) // 20 s: b seen d before, polls notwithstanding
	ok, err = ma.Heartbeat()
	wantBool(t, "a's Heartbeat at 20 s", ok, err, true)
	if ms, _ := members(); len(ms) != 1 || ms[0] != "a" {
		t.Fatalf("at 20 s: members %v; want a alone (b's polls refresh nothing)", ms)
	}
}

// A typed consumer on a backend with a session timeout whose session
// expires (another member's Heartbeat expires it) rejoins and goes on
// (ConsumerStats.Expired); it is the only incarnation of its name, so its
// Run must never end fenced.
func TestExpiredConsumerFencesItself(t *testing.T) {
	clk := testclock.New()
	const session = 30 * time.Millisecond
	b, _ := start(t, jetstream.Config{Capacity: 100, SessionTimeout: session, Clock: clk.Now, RequestTimeout: 5 * time.Second})
	c := must(tributary.NewClusterOn(b)).of(t)
	defer c.Close()
	tp := must(tributary.CreateTopic(c, "orders", 64, tributary.JSON[int]())).of(t)
	cons := must(tributary.NewConsumer(tp, "g", "w")).of(t)
	bt, _, err := b.OpenTopic("orders")
	if err != nil {
		t.Fatal(err)
	}
	z := member(t, bt, "g", "z")
	must(z.Join()).of(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		ended <- cons.Run(ctx, func(context.Context, tributary.Message[int]) error { return nil })
	}()
	deadline := time.Now().Add(40 * time.Second)
	for round := 0; round < 40 && time.Now().Before(deadline); round++ {
		before := cons.Stats().Expired
		clk.Advance(4 * session)
		if _, err := z.Heartbeat(); err != nil {
			t.Fatal(err)
		}
		for w := time.Now().Add(3 * time.Second); time.Now().Before(w) && cons.Stats().Expired == before; {
			select {
			case err := <-ended:
				t.Fatalf("round %d (%d expiries so far): the only consumer of its name: Run = %v", round, before, err)
			case <-time.After(5 * time.Millisecond):
			}
		}
		time.Sleep(50 * time.Millisecond) // heartbeats tick meanwhile
		select {
		case err := <-ended:
			t.Fatalf("round %d (%d expiries): the only consumer of its name: Run = %v", round, cons.Stats().Expired, err)
		default:
		}
	}
	cancel()
	err = <-ended
	if errors.Is(err, tributary.ErrFenced) {
		t.Fatalf("Run = %v", err)
	}
	t.Logf("expired %d times, Run = %v", cons.Stats().Expired, err)
}
