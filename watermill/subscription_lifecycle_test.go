package tributarywm_test

// A subscription's life in its group: SubscribeInitialize's group holds
// retention, ephemeral groups are deleted however they end, a subscription
// whose ctx ends or whose consumer is closed from outside leaves its group
// and hands its held message on, thousands of Subscribe cycles leave
// nothing behind, and Subscribe on a closed cluster fails cleanly.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/f91dcac0/tributary"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// SubscribeInitialize creates the group, which then keeps every message
// even while another group acks them all.
func TestSubscribeInitializeRetains(t *testing.T) {
	c := newCluster(t, 5)
	late := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "late"})
	if err := late.SubscribeInitialize("init"); err != nil {
		t.Fatal(err)
	}
	if err := late.SubscribeInitialize("init"); err != nil { // idempotent
		t.Fatal(err)
	}
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	early := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "early"})
	ech, err := early.Subscribe(context.Background(), "init")
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for i := 0; i < 5; i++ {
		m := newMsg(strconv.Itoa(i))
		uuids = append(uuids, m.UUID)
		if err := pub.Publish("init", m); err != nil {
			t.Fatal(err)
		}
		receive(t, ech).Ack()
	}
	lch, err := late.Subscribe(context.Background(), "init")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		m := receive(t, lch)
		if m.UUID != uuids[i] {
			t.Fatalf("late group message %d: %s, want %s", i, m.UUID, uuids[i])
		}
		m.Ack()
	}
}

// Ephemeral subscriptions delete their group however they end (ctx,
// Subscriber.Close, Cluster.Close), and read from the log start.
func TestEphemeralGroupLifecycle(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("eph", newMsg("old")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	groups := func() int { return len(describe(t, c, "eph").Groups) }

	ctx, cancel := context.WithCancel(context.Background())
	ch, err := sub.Subscribe(ctx, "eph")
	if err != nil {
		t.Fatal(err)
	}
	if groups() != 1 {
		t.Fatalf("%d groups, want 1", groups())
	}
	m := receive(t, ch) // held, never acked
	if string(m.Payload) != "old" {
		t.Fatalf("payload %q", m.Payload)
	}
	cancel()
	closedWithin(t, ch)
	ctxDone(t, m.Context(), "after ctx cancel")
	if n := groups(); n != 0 {
		t.Fatalf("after ctx cancel: %d groups, want 0: %+v", n, describe(t, c, "eph").Groups)
	}

	// Two at once, then Subscriber.Close.
	ch1, err := sub.Subscribe(context.Background(), "eph")
	if err != nil {
		t.Fatal(err)
	}
	ch2, err := sub.Subscribe(context.Background(), "eph")
	if err != nil {
		t.Fatal(err)
	}
	if groups() != 2 {
		t.Fatalf("%d groups, want 2", groups())
	}
	receive(t, ch1).Ack()
	receive(t, ch2) // each group gets "old"
	sub.Close()
	closedWithin(t, ch1)
	closedWithin(t, ch2)
	if n := groups(); n != 0 {
		t.Fatalf("after Subscriber.Close: %d groups, want 0", n)
	}

	// Cluster.Close.
	sub3 := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	ch3, err := sub3.Subscribe(context.Background(), "eph")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	closedWithin(t, ch3)
	if n := groups(); n != 0 {
		t.Fatalf("after Cluster.Close: %d groups, want 0", n)
	}
}

// A subscription whose ctx ends leaves its group; its held message goes to
// the next member.
func TestCancelLeavesGroup(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("leave", newMsg("a")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g"})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := sub.Subscribe(ctx, "leave")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	member := deliveryOf(t, m).Member
	g, _ := groupOf(describe(t, c, "leave"), "g")
	if len(g.Members) != 1 || g.Members[0] != member {
		t.Fatalf("members %v, want [%s]", g.Members, member)
	}
	cancel()
	closedWithin(t, ch)
	g, _ = groupOf(describe(t, c, "leave"), "g")
	if len(g.Members) != 0 || g.Partitions[0].InFlight {
		t.Fatalf("after cancel: %+v", g)
	}
	m.Ack() // too late: nothing
	ch2, err := sub.Subscribe(context.Background(), "leave")
	if err != nil {
		t.Fatal(err)
	}
	m2 := receive(t, ch2)
	if m2.UUID != m.UUID || deliveryOf(t, m2).Attempt != 2 {
		t.Fatalf("redelivery %s attempt %d", m2.UUID, deliveryOf(t, m2).Attempt)
	}
	m2.Ack()
}

// Thousands of Subscribe / end cycles: goroutines return to the baseline,
// no member or ephemeral group is left.
func TestSubscribeCycles(t *testing.T) {
	c := newCluster(t, 100)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 4})
	for i := 0; i < 20; i++ {
		if err := pub.Publish("cycles", newMsg("m")); err != nil {
			t.Fatal(err)
		}
	}
	named := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "cyc", NackResendSleep: time.Hour})
	eph := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true, NackResendSleep: time.Hour})
	base := runtime.NumGoroutine()
	n := 1000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		s := named
		if i%2 == 1 {
			s = eph
		}
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := s.Subscribe(ctx, "cycles")
		if err != nil {
			t.Fatal(err)
		}
		switch i % 4 {
		case 0: // read one and nack it (the nack sleeps an hour)
			if m := receive(t, ch); m != nil {
				m.Nack()
			}
		case 1: // read one and hold it
			receive(t, ch)
		}
		cancel()
		closedWithin(t, ch)
	}
	eventually(t, fmt.Sprintf("goroutines back to %d", base), func() bool {
		return runtime.NumGoroutine() <= base+2
	})
	d := describe(t, c, "cycles")
	if len(d.Groups) != 1 || d.Groups[0].Group != "cyc" || len(d.Groups[0].Members) != 0 {
		t.Fatalf("groups after cycles: %+v", d.Groups)
	}
	if got := c.Consumers(); len(got) != 0 {
		t.Fatalf("consumers left: %d", len(got))
	}
}

// An admin closing the subscription's consumer from outside
// (Cluster.CloseConsumer) ends the subscription: its channel closes and
// Subscriber.Close still returns; the held message goes to the next member.
func TestExternalCloseConsumer(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("ext", newMsg("a")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	ch, err := sub.Subscribe(context.Background(), "ext")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	d := deliveryOf(t, m)
	if _, err := c.DeleteGroup("ext", d.Group); !errors.Is(err, tributary.ErrGroupNotEmpty) {
		t.Fatalf("DeleteGroup of a live ephemeral group: %v", err)
	}
	if err := c.CloseConsumer(d.Member); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, ch)
	ctxDone(t, m.Context(), "after the consumer was closed")
	if n := len(describe(t, c, "ext").Groups); n != 0 {
		t.Fatalf("ephemeral group not deleted after CloseConsumer: %d groups", n)
	}
	done := make(chan struct{})
	go func() { sub.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Subscriber.Close hangs after CloseConsumer")
	}
}

// Subscribe on a cluster that is closed (the Subscriber itself open):
// it fails with ErrClosed, and leaves behind neither a goroutine, nor a
// member, nor (Ephemeral) a group.
func TestSubscribeOnClosedCluster(t *testing.T) {
	for _, eph := range []bool{false, true} {
		t.Run(fmt.Sprintf("ephemeral=%v", eph), func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			c, err := tributary.NewCluster(10)
			if err != nil {
				t.Fatal(err)
			}
			sub, err := tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{Ephemeral: eph}, nil)
			if err != nil {
				t.Fatal(err)
			}
			const topic = "ccsub"
			if err := sub.SubscribeInitialize(topic); err != nil {
				t.Fatal(err)
			}
			before := describe(t, c, topic)
			c.Close()
			ch, err := sub.Subscribe(context.Background(), topic)
			if err == nil {
				select {
				case _, ok := <-ch:
					if ok {
						t.Fatal("message from a subscription on a closed cluster")
					}
				case <-time.After(wait):
					t.Fatal("Subscribe on a closed cluster succeeded and its channel stays open")
				}
				t.Error("Subscribe on a closed cluster succeeded (its channel closed at once)")
			} else if !errors.Is(err, tributarywm.ErrClosed) {
				t.Errorf("Subscribe on a closed cluster: %v, want ErrClosed", err)
			}
			after := describe(t, c, topic)
			if len(after.Groups) != len(before.Groups) {
				t.Errorf("groups before %d, after the refused Subscribe %d: %+v", len(before.Groups), len(after.Groups), after.Groups)
			}
			for _, g := range after.Groups {
				if len(g.Members) != 0 {
					t.Errorf("group %s keeps members %v", g.Group, g.Members)
				}
			}
			sub.Close()
		})
	}
}
