package tributarywm_test

// Closing while subscriptions run: Subscribe racing Subscriber.Close,
// Cluster.Close, a channel nobody reads, Close from a handler holding a
// message, and every order of closing the cluster, subscriber and
// publisher: each Close returns, every channel closes, nothing is
// delivered after Close and no goroutine is left.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.uber.org/goleak"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// Subscribe racing Subscriber.Close: each Subscribe either fails with
// ErrClosed or returns a channel that is closed once Close returns; no
// member is left in the group.
func TestSubscribeRacesClose(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 4})
	for i := 0; i < 8; i++ {
		if err := pub.Publish("race", newMsg("m")); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 20; round++ {
		for _, eph := range []bool{false, true} {
			sub, err := tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{Ephemeral: eph}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			chans := make(chan (<-chan *message.Message), 64)
			errs := make(chan error, 64)
			for i := 0; i < 16; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ch, err := sub.Subscribe(context.Background(), "race")
					if err != nil {
						errs <- err
						return
					}
					chans <- ch
				}()
			}
			if round%2 == 0 {
				runtime.Gosched()
			}
			closed := make(chan struct{})
			go func() { sub.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(wait):
				t.Fatal("Subscriber.Close hangs")
			}
			wg.Wait()
			close(chans)
			close(errs)
			for err := range errs {
				if !errors.Is(err, tributarywm.ErrClosed) {
					t.Fatalf("Subscribe racing Close: %v, want ErrClosed", err)
				}
			}
			for ch := range chans {
				for m := range ch { // must already be closed: drains, never blocks
					_ = m
					t.Fatal("message delivered after Close returned")
				}
			}
			d := describe(t, c, "race")
			for _, g := range d.Groups {
				if len(g.Members) != 0 {
					t.Fatalf("round %d: group %s keeps members %v", round, g.Group, g.Members)
				}
				if eph && strings.HasPrefix(g.Group, "wm-eph-") {
					t.Fatalf("round %d: ephemeral group %s left", round, g.Group)
				}
			}
		}
	}
}

// Cluster.Close while subscriptions run (held messages, unread channels):
// every channel closes, Subscriber.Close does not hang.
func TestClusterCloseEndsBusySubscriptions(t *testing.T) {
	c := newCluster(t, 100)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 4})
	for i := 0; i < 40; i++ {
		if err := pub.Publish("cc", newMsg("m")); err != nil {
			t.Fatal(err)
		}
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	eph := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	var chans []<-chan *message.Message
	for i := 0; i < 4; i++ {
		for _, s := range []*tributarywm.Subscriber{sub, eph} {
			ch, err := s.Subscribe(context.Background(), "cc")
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, ch)
		}
	}
	receive(t, chans[0]) // held, unacked; the others never read
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Cluster.Close hangs")
	}
	for _, ch := range chans {
		closedWithin(t, ch)
	}
	done = make(chan struct{})
	go func() { sub.Close(); eph.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Subscriber.Close after Cluster.Close hangs")
	}
	if _, err := sub.Subscribe(context.Background(), "cc"); !errors.Is(err, tributarywm.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
	if err := pub.Publish("cc", newMsg("x")); err == nil {
		t.Fatal("Publish after Cluster.Close succeeded")
	}
}

// A subscription whose consumer never reads its channel: Close must not
// hang.
func TestUnreadChannelClose(t *testing.T) {
	c := newCluster(t, 100)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 8})
	for i := 0; i < 64; i++ {
		if err := pub.Publish("unread", newMsg("m")); err != nil {
			t.Fatal(err)
		}
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	for i := 0; i < 3; i++ {
		if _, err := sub.Subscribe(context.Background(), "unread"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "all 8 partitions in flight", func() bool {
		g, _ := groupOf(describe(t, c, "unread"), tributarywm.DefaultConsumerGroup)
		n := 0
		for _, p := range g.Partitions {
			if p.InFlight {
				n++
			}
		}
		return n == 8
	})
	done := make(chan struct{})
	go func() { sub.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Subscriber.Close hangs with unread channels")
	}
	g, _ := groupOf(describe(t, c, "unread"), tributarywm.DefaultConsumerGroup)
	if len(g.Members) != 0 {
		t.Fatalf("members left: %v", g.Members)
	}
}

// Subscriber.Close called by a handler while it holds a message must not
// deadlock (Close waits for the subscription, which waits for nothing the
// handler holds).
func TestCloseFromHandler(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("inside", newMsg("a")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	ch, err := sub.Subscribe(context.Background(), "inside")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	done := make(chan struct{})
	go func() { sub.Close(); m.Ack(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Subscriber.Close from a handler holding a message hangs")
	}
	closedWithin(t, ch)
	g, _ := groupOf(describe(t, c, "inside"), tributarywm.DefaultConsumerGroup)
	if g.Partitions[0].Committed != 0 {
		t.Fatalf("Ack after Close committed: %+v", g.Partitions[0])
	}
}

// Close orders with messages out in every state (unread, with the
// handler, nacked and sleeping, their acks racing): cluster first, then
// the subscriber and publisher; the subscriber first; all three at once
// from several goroutines. Each Close returns, every channel closes, no
// goroutine of the adapter is left (goleak), and nothing is delivered
// after Subscriber.Close returned.
func TestCloseOrders(t *testing.T) {
	orders := []string{"cluster-sub-pub", "sub-cluster-pub", "pub-sub-cluster", "all-at-once", "cancel-and-close"}
	for _, order := range orders {
		for _, eph := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ephemeral=%v", order, eph), func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				c, err := tributary.NewCluster(20, engine.WithAckTimeout(50*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				pub, err := tributarywm.NewPublisher(c, tributarywm.PublisherConfig{Partitions: 4}, nil)
				if err != nil {
					t.Fatal(err)
				}
				sub, err := tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{Ephemeral: eph, Partitions: 4, NackResendSleep: time.Hour}, nil)
				if err != nil {
					t.Fatal(err)
				}
				const topic = "closeorder"
				if err := sub.SubscribeInitialize(topic); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 40; i++ {
					if err := pub.Publish(topic, newMsg("m")); err != nil {
						t.Fatal(err)
					}
				}
				// A publisher that ends up blocked on a full partition
				// (capacity 20 x 4 = 80; the group holds what it has not
				// acked). It publishes until a call fails: channel 1's acks
				// free room on its partitions and an ephemeral group's
				// deletion frees all of it, so only the closes end it.
				blocked := make(chan error, 1)
				go func() {
					var err error
					for err == nil {
						err = pub.Publish(topic, newMsg("x"))
					}
					blocked <- err
				}()
				ctxs := make([]context.CancelFunc, 0, 3)
				var chans []<-chan *message.Message
				for i := 0; i < 3; i++ {
					ctx, cancel := context.WithCancel(context.Background())
					ctxs = append(ctxs, cancel)
					ch, err := sub.Subscribe(ctx, topic)
					if err != nil {
						t.Fatal(err)
					}
					chans = append(chans, ch)
				}
				// ch 0: one nacked (sleeping an hour); ch 2: one with the
				// handler, the rest unread; ch 1: acks racing the closes.
				m1 := receive(t, chans[0])
				m1.Nack()
				m2 := receive(t, chans[2])
				var readers sync.WaitGroup
				readers.Add(1)
				go func() {
					defer readers.Done()
					for m := range chans[1] {
						m.Ack()
					}
				}()
				closed := make(chan struct{})
				var closeWG sync.WaitGroup
				do := func(f func()) { closeWG.Add(1); go func() { defer closeWG.Done(); f() }() }
				subClose := func() { sub.Close() }
				pubClose := func() { pub.Close() }
				clClose := func() { c.Close() }
				switch order {
				case "cluster-sub-pub":
					clClose()
					subClose()
					pubClose()
				case "sub-cluster-pub":
					subClose()
					clClose()
					pubClose()
				case "pub-sub-cluster":
					pubClose()
					subClose()
					clClose()
				case "all-at-once":
					for i := 0; i < 3; i++ {
						do(subClose)
						do(pubClose)
						do(clClose)
					}
					do(func() { m2.Ack() })
				case "cancel-and-close":
					for _, cancel := range ctxs {
						do(cancel)
					}
					do(subClose)
					do(func() { m2.Nack() })
					do(subClose)
					do(pubClose)
				}
				go func() { closeWG.Wait(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(wait):
					t.Fatal("closes hang")
				}
				if order == "cancel-and-close" {
					sub.Close()
					pub.Close()
				}
				// Subscriber.Close has returned: every channel is closed.
				for i, ch := range chans {
					if i == 1 {
						continue
					}
					select {
					case m, ok := <-ch:
						if ok {
							t.Fatalf("channel %d delivered %s after Subscriber.Close returned", i, m.UUID)
						}
					case <-time.After(wait):
						t.Fatalf("channel %d open after Subscriber.Close returned", i)
					}
				}
				readers.Wait()
				select {
				case err := <-blocked:
					if !errors.Is(err, tributarywm.ErrClosed) && !errors.Is(err, tributary.ErrClosed) {
						t.Fatalf("the blocked Publish ended with %v, want ErrClosed", err)
					}
				case <-time.After(wait):
					if order != "cancel-and-close" { // no cluster close there; Publisher.Close ends it
						t.Fatal("blocked Publish not ended by the closes")
					}
					t.Fatal("blocked Publish not ended by Publisher.Close")
				}
				for _, cancel := range ctxs {
					cancel()
				}
				ctxDone(t, m1.Context(), "after the closes")
				ctxDone(t, m2.Context(), "after the closes")
				m1.Ack()
				m2.Ack()
				if _, err := sub.Subscribe(context.Background(), topic); !errors.Is(err, tributarywm.ErrClosed) {
					t.Fatalf("Subscribe after the closes: %v, want ErrClosed", err)
				}
				c.Close()
			})
		}
	}
}
