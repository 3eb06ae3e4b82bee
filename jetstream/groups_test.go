package jetstream_test

// Groups across processes: a group's configuration (start, failure
// policy) lives on its group key, so every process sharing the server
// reads the same one; RemoveMember works from any process; a dead
// process's in-flight delivery is freed by RemoveMember or its restart; a
// member's hint of its partitions does not outlive a rebalance made
// elsewhere. Each test opens two Backends on one server, each with its own
// connection (and a Cluster of its own for the typed library): two
// processes.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/jetstream"
)

type item struct {
	ID int `json:"id"`
}

// TestGroupPolicyAcrossProcesses: the failure policy one process gave a
// group is read by a consumer of another, which dead-letters what keeps
// failing without any option of its own; a consumer there with another
// policy is refused.
func TestGroupPolicyAcrossProcesses(t *testing.T) {
	c1, c2 := twoProcesses(t)
	ctx := guard(t)
	orders1 := must(tributary.CreateTopic(c1, "orders", 2, tributary.JSON[item]())).of(t)
	backoff := tributary.WithBackoff(time.Millisecond, 2*time.Millisecond)
	ok := must(c1.CreateGroup("orders", "billing", engine.RoundRobin, tributary.WithDeadLetter("orders-dlq", 2), backoff)).of(t)
	if !ok {
		t.Fatal("CreateGroup: false")
	}
	want := tributary.GroupConfig{DeadLetter: "orders-dlq", MaxAttempts: 2, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	got, ok, err := c2.GroupConfig("orders", "billing")
	if err != nil || !ok || got != want {
		t.Fatalf("GroupConfig in the second process: %+v, %v, %v; want %+v", got, ok, err, want)
	}
	orders2 := must(tributary.OpenTopic(c2, "orders", tributary.JSON[item]())).of(t)
	if _, err := tributary.NewConsumer(orders2, "billing", "x", tributary.WithDeadLetter("orders-dlq", 5)); !errors.Is(err, tributary.ErrPolicyMismatch) {
		t.Fatalf("NewConsumer with another policy: %v, want ErrPolicyMismatch", err)
	}
	f1 := must(tributary.NewConsumer(orders1, "billing", "f1", tributary.WithDeadLetter("orders-dlq", 2), backoff)).of(t)
	f2 := must(tributary.NewConsumer(orders2, "billing", "f2")).of(t)
	if f2.GroupConfig() != want {
		t.Fatalf("f2 follows %+v, want %+v", f2.GroupConfig(), want)
	}
	p := must(tributary.NewProducer[item](c1, "p", tributary.Manual())).of(t)
	for part := range int32(2) {
		must(p.Send(ctx, orders1, tributary.Message[item]{Partition: part, Value: item{ID: int(part)}})).of(t)
	}
	fail := func(context.Context, tributary.Message[item]) error { return errors.New("declined") }
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	for _, f := range []*tributary.Consumer[item]{f1, f2} {
		go func() { done <- f.Run(runCtx, fail) }()
	}
	waitUntil(t, ctx, "both records dead-lettered", func() bool {
		d, err := c1.Describe("orders")
		if err != nil || len(d.Groups) != 1 {
			return false
		}
		return d.Groups[0].Partitions[0].Committed == 1 && d.Groups[0].Partitions[1].Committed == 1
	})
	stop()
	for range 2 {
		<-done
	}
	if a, b := f1.Stats().DeadLettered, f2.Stats().DeadLettered; a != 1 || b != 1 {
		t.Fatalf("dead-lettered: f1 %d, f2 %d; want 1 each", a, b)
	}
	d := must(c2.Describe("orders-dlq")).of(t)
	n := int64(0)
	for _, part := range d.Partitions {
		n += part.LogEndOffset - part.LogStartOffset
	}
	if n != 2 {
		t.Fatalf("the dead-letter topic holds %d records, want 2", n)
	}
}

// TestStartLatestAcrossProcesses: a group one process creates at the log
// end is delivered, to a consumer of another process, only what is
// published after the creation returned.
func TestStartLatestAcrossProcesses(t *testing.T) {
	c1, c2 := twoProcesses(t)
	ctx := guard(t)
	orders2 := must(tributary.CreateTopic(c2, "orders", 2, tributary.JSON[item]())).of(t)
	must(c2.CreateGroup("orders", "keep", engine.RoundRobin)).of(t) // holds retention
	p := must(tributary.NewProducer[item](c2, "p", tributary.Manual())).of(t)
	for i := range 3 {
		must(p.Send(ctx, orders2, tributary.Message[item]{Partition: int32(i % 2), Value: item{ID: i}})).of(t)
	}
	if !must(c1.CreateGroup("orders", "late", engine.Range, tributary.WithStart(engine.StartLatest))).of(t) {
		t.Fatal("CreateGroup: false")
	}
	cfg, _, err := c2.GroupConfig("orders", "late")
	if err != nil || cfg.Start != engine.StartLatest {
		t.Fatalf("GroupConfig in the second process: %+v, %v", cfg, err)
	}
	d := must(c2.Describe("orders")).of(t)
	for _, g := range d.Groups {
		if g.Group != "late" {
			continue
		}
		for part, gp := range g.Partitions {
			if gp.Committed != d.Partitions[part].LogEndOffset || gp.Lag != 0 {
				t.Fatalf("partition %d: committed %d, lag %d; want the log end %d", part, gp.Committed, gp.Lag, d.Partitions[part].LogEndOffset)
			}
		}
	}
	if d.Partitions[0].LogStartOffset != 0 {
		t.Fatalf("log start %d: keep still needs every record", d.Partitions[0].LogStartOffset)
	}
	cons := must(tributary.NewConsumer(orders2, "late", "m")).of(t)
	if ms := must(cons.TryPoll(64)).of(t); len(ms) != 0 {
		t.Fatalf("the latest group got %d records published before it", len(ms))
	}
	must(p.Send(ctx, orders2, tributary.Message[item]{Partition: 1, Value: item{ID: 99}})).of(t)
	ms := must(cons.Poll(ctx, 64)).of(t)
	if len(ms) != 1 || ms[0].Value.ID != 99 || ms[0].Offset != 1 {
		t.Fatalf("Poll: %+v, want the one record published after", ms)
	}
}

// TestRemoveMemberAcrossProcesses: one process removes a member of
// another: the member's Run ends with ErrClosed there, its partitions go
// to the remaining member, and the name may join again.
func TestRemoveMemberAcrossProcesses(t *testing.T) {
	c1, c2 := twoProcesses(t)
	ctx := guard(t)
	orders1 := must(tributary.CreateTopic(c1, "orders", 2, tributary.JSON[item]())).of(t)
	orders2 := must(tributary.OpenTopic(c2, "orders", tributary.JSON[item]())).of(t)
	a := must(tributary.NewConsumer(orders1, "g", "a")).of(t)
	b := must(tributary.NewConsumer(orders2, "g", "b")).of(t)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, func(context.Context, tributary.Message[item]) error { return nil }) }()
	ok, err := c2.RemoveMember("orders", "g", "a")
	if err != nil || !ok {
		t.Fatalf("RemoveMember: %v, %v", ok, err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, tributary.ErrClosed) {
			t.Fatalf("Run of the removed member: %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("Run of the removed member did not end")
	}
	if got := b.Assignment(); len(got) != 2 {
		t.Fatalf("b owns %v, want both partitions", got)
	}
	if ok, err := c2.RemoveMember("orders", "g", "a"); err != nil || ok {
		t.Fatalf("RemoveMember of a removed member: %v, %v; want false", ok, err)
	}
	if _, err := c2.RemoveMember("nope", "g", "a"); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Fatalf("RemoveMember on an unknown topic: %v", err)
	}
	a2 := must(tributary.NewConsumer(orders1, "g", "a")).of(t)
	if got := a2.Assignment(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("a joined again owns %v, want [0]", got)
	}
}

// TestDeadMemberInFlight: a process that dies (its connection closes, no
// Leave) holding an in-flight delivery leaves it in flight to the dead
// member, ack timeout or not (rule 22: only the owner's next Poll
// redelivers it). Another process's RemoveMember frees it for the others,
// attempt 2; a restart under the same member name rejoins with the same
// partitions (rule 25: the dead incarnation fenced, its delivery
// cancelled) and gets it, attempt 2 — at once, ack timeout or not
// (TestConsumerCrashResumesAtOnce sets none).
func TestDeadMemberInFlight(t *testing.T) {
	for _, tt := range []struct {
		name    string
		recover func(t *testing.T, c *tributary.Cluster, clk *testclock.Clock) *tributary.Consumer[item]
	}{
		{"RemoveMember from another process", func(t *testing.T, c *tributary.Cluster, _ *testclock.Clock) *tributary.Consumer[item] {
			if ok, err := c.RemoveMember("orders", "g", "w1"); err != nil || !ok {
				t.Fatalf("RemoveMember: %v, %v", ok, err)
			}
			return must(tributary.NewConsumer(must(tributary.OpenTopic(c, "orders", tributary.JSON[item]())).of(t), "g", "w2")).of(t)
		}},
		{"restart under the same name", func(t *testing.T, c *tributary.Cluster, clk *testclock.Clock) *tributary.Consumer[item] {
			w1 := must(tributary.NewConsumer(must(tributary.OpenTopic(c, "orders", tributary.JSON[item]())).of(t), "g", "w1")).of(t)
			if got := w1.Assignment(); len(got) != 1 || got[0] != 0 {
				t.Fatalf("w1 rejoined owns %v, want [0]", got)
			}
			return w1
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := testclock.New()
			cfg := jetstream.Config{Capacity: 20, Storage: jetstream.MemoryStorage, AckTimeout: 2 * time.Second, Clock: clk.Now}
			b1, srv := start(t, cfg)
			c1 := must(tributary.NewClusterOn(b1)).of(t)
			orders := must(tributary.CreateTopic(c1, "orders", 1, tributary.JSON[item]())).of(t)
			p := must(tributary.NewProducer[item](c1, "p", tributary.RoundRobin())).of(t)
			must(p.TrySend(orders, tributary.Message[item]{Value: item{ID: 1}})).of(t)
			w1 := must(tributary.NewConsumer(orders, "g", "w1")).of(t)
			if ms := must(w1.TryPoll(1)).of(t); len(ms) != 1 || ms[0].Attempt != 1 {
				t.Fatalf("w1 polled %+v, want the record, attempt 1", ms)
			}
			b1.Close() // the process dies: no Leave, the delivery stays reserved

			cfg.Server = srv
			b2 := must(jetstream.Open(cfg)).of(t)
			t.Cleanup(func() { b2.Close() })
			c2 := must(tributary.NewClusterOn(b2)).of(t)
			t.Cleanup(func() { c2.Close() })
			clk.Advance(3 * cfg.AckTimeout)
			d := must(c2.Describe("orders")).of(t)
			if gp := d.Groups[0].Partitions[0]; !gp.InFlight || gp.Owner != "w1" {
				t.Fatalf("after 3 ack timeouts the dead member's delivery is %+v, want in flight to w1", gp)
			}
			c := tt.recover(t, c2, clk)
			ms := must(c.TryPoll(1)).of(t)
			if len(ms) != 1 || ms[0].Offset != 0 || ms[0].Attempt != 2 {
				t.Fatalf("after recovery %s polled %+v, want offset 0, attempt 2", c.Name(), ms)
			}
			if err := c.Ack(ms[0]); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOwnedHintStale: m1's Member.owned hint is the partitions
// it owned at its last poll. After a rebalance (from another Backend)
// moves partitions, m1's first TryPoll must deliver from exactly the
// partitions it owns now: one newly owned at once, none no longer owned.
func TestOwnedHintStale(t *testing.T) {
	b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 100, Storage: jetstream.MemoryStorage})
	const parts = 8
	bt1 := topic(t, b1, "t", parts)
	bt2 := must2(b2.OpenTopic("t")).of(t)
	m1 := member(t, bt1, "g", "m1")
	must(m1.Join()).of(t)
	for round := range 12 {
		for p := int32(0); p < parts; p++ {
			pub(t, bt1, p, fmt.Sprint(round))
		}
		// Change the membership from b2: m2 joins or leaves.
		m2 := must(bt2.Member("g", "m2")).of(t)
		if round%2 == 0 {
			must(m2.Join()).of(t)
		} else {
			must(m2.Leave()).of(t)
		}
		d := must(b2.Describe("t")).of(t)
		own := map[int32]bool{}
		for _, gp := range d.Groups[0].Partitions {
			if gp.Owner == "m1" {
				own[gp.Partition] = true
			}
		}
		rs := must(m1.TryPoll(nil, parts)).of(t)
		got := map[int32]bool{}
		for _, r := range rs {
			got[r.Partition] = true
			if !own[r.Partition] {
				t.Errorf("round %d: m1 delivered from partition %d, which it no longer owns (owns %v)", round, r.Partition, own)
			}
		}
		for p := range own {
			if !got[p] {
				t.Errorf("round %d: m1 delivered nothing from partition %d, which it owns and which has a record", round, p)
			}
		}
		for _, r := range rs {
			if ok, err := m1.Retry(r.Partition, r.Offset); !ok || err != nil {
				t.Errorf("Retry: %v %v", ok, err)
			}
		}
	}
}
