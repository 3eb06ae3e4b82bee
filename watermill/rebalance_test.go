package tributarywm_test

// Rebalances under a running subscription: a held message survives losing
// its partition, storms of joining and leaving subscriptions keep per-key
// order and lose nothing, partitions taken away and given back during a
// NackResendSleep or while deliveries are pending drain, and a torture of
// churn, Nacks, Seeks and ack timeouts ends with the topic drained.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// A message held by a subscription that loses its partition in a
// rebalance is delivered again to the new owner; the old owner's Ack is
// refused; nothing is lost.
func TestHeldMessageSurvivesRebalance(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 2})
	a, b := newMsg("a"), newMsg("b")
	if err := pub.Publish("reb", a, b); err != nil { // round-robin: p0, p1
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g"})
	chA, err := sub.Subscribe(context.Background(), "reb")
	if err != nil {
		t.Fatal(err)
	}
	held := map[int32]*message.Message{}
	for i := 0; i < 2; i++ {
		m := receive(t, chA)
		held[deliveryOf(t, m).Partition] = m
	}
	if len(held) != 2 {
		t.Fatalf("A holds partitions %v", held)
	}
	chB, err := sub.Subscribe(context.Background(), "reb")
	if err != nil {
		t.Fatal(err)
	}
	mb := receive(t, chB)
	db := deliveryOf(t, mb)
	old := held[db.Partition]
	if mb.UUID != old.UUID || db.Attempt != 2 {
		t.Fatalf("B got %s attempt %d on p%d, want %s attempt 2", mb.UUID, db.Attempt, db.Partition, old.UUID)
	}
	// A acks both; wait until both settles ran (their contexts end).
	for _, m := range held {
		m.Ack()
		ctxDone(t, m.Context(), "after A's Ack")
	}
	g, _ := groupOf(describe(t, c, "reb"), "g")
	lost := g.Partitions[db.Partition]
	if lost.Committed != 0 || !lost.InFlight || lost.Owner != db.Member {
		t.Fatalf("A's stale Ack changed B's partition: %+v", lost)
	}
	kept := g.Partitions[1-db.Partition]
	if kept.Committed != 1 {
		t.Fatalf("A's valid Ack not committed: %+v", kept)
	}
	mb.Ack()
	eventually(t, "B's ack commits", func() bool {
		g, _ := groupOf(describe(t, c, "reb"), "g")
		return g.Partitions[db.Partition].Committed == 1
	})
	quiet(t, chA, 100*time.Millisecond)
	quiet(t, chB, 100*time.Millisecond)
}

// Many subscriptions join and leave one group while messages flow (with
// random Nacks and cancellations racing acks). Every published UUID must
// reach the group, and per key, first deliveries keep publish order.
func TestRebalanceStorm(t *testing.T) {
	c := newCluster(t, 1000)
	const (
		topic = "storm"
		keys  = 16
		total = 1200
	)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 8, PartitionKey: func(_ string, m *message.Message) (string, error) {
		return m.Metadata.Get("key"), nil
	}})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "storm", NackResendSleep: tributarywm.NoSleep})
	if err := sub.SubscribeInitialize(topic); err != nil {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		seen     = map[string]bool{}
		last     = map[string]int{}
		disorder []string
		allDone  = make(chan struct{})
	)
	record := func(m *message.Message) {
		mu.Lock()
		defer mu.Unlock()
		if seen[m.UUID] {
			return
		}
		seen[m.UUID] = true
		key := m.Metadata.Get("key")
		seq, _ := strconv.Atoi(m.Metadata.Get("seq"))
		if prev, ok := last[key]; ok && seq <= prev && len(disorder) < 10 {
			disorder = append(disorder, fmt.Sprintf("key %s: seq %d first delivered after seq %d", key, seq, prev))
		}
		if prev, ok := last[key]; !ok || seq > prev {
			last[key] = seq
		}
		if len(seen) == total {
			close(allDone)
		}
	}
	consume := func(ch <-chan *message.Message, rng *rand.Rand, cancel func()) {
		for m := range ch {
			record(m)
			switch r := rng.IntN(20); {
			case r == 0:
				m.Nack()
			case r == 1 && cancel != nil:
				// Cancel racing the ack.
				go cancel()
				m.Ack()
			default:
				m.Ack()
			}
		}
	}

	var wg sync.WaitGroup
	stableCtx, stableCancel := context.WithCancel(context.Background())
	defer stableCancel()
	ch, err := sub.Subscribe(stableCtx, topic)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); consume(ch, rand.New(rand.NewPCG(1, 2)), nil) }()

	stop := make(chan struct{})
	var cycles atomic.Int64 // churn subscriptions started
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithCancel(context.Background())
				ch, err := sub.Subscribe(ctx, topic)
				if err != nil {
					cancel()
					return
				}
				cycles.Add(1)
				done := make(chan struct{})
				crng := rand.New(rand.NewPCG(rng.Uint64(), 11))
				go func() { defer close(done); consume(ch, crng, cancel) }()
				select {
				case <-time.After(time.Duration(1+rng.IntN(30)) * time.Millisecond):
				case <-stop:
				}
				cancel()
				<-done
			}
		}()
	}

	pubErr := make(chan error, 1)
	go func() {
		for i := 0; i < total; i++ {
			// Interleave: at least one churn subscription per 8 messages,
			// so the group rebalances all along the flow.
			for cycles.Load() < int64(i/8) {
				time.Sleep(time.Millisecond)
			}
			m := newMsg("p")
			k := strconv.Itoa(i % keys)
			m.Metadata.Set("key", k)
			m.Metadata.Set("seq", strconv.Itoa(i))
			if err := pub.Publish(topic, m); err != nil {
				pubErr <- err
				return
			}
		}
		pubErr <- nil
	}()
	if err := <-pubErr; err != nil {
		close(stop)
		stableCancel()
		wg.Wait()
		t.Fatal(err)
	}
	select {
	case <-allDone:
	case <-time.After(60 * time.Second):
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		t.Errorf("only %d of %d messages reached the group", n, total)
	}
	close(stop)
	stableCancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, d := range disorder {
		t.Error(d)
	}
	t.Logf("%d churn subscriptions during the flow", cycles.Load())
	g, _ := groupOf(describe(t, c, topic), "storm")
	if len(g.Members) != 0 {
		t.Errorf("members left after all subscriptions ended: %v", g.Members)
	}
}

// A message nacked with a NackResendSleep whose partition is taken away
// during the sleep (a second subscription joins) and given back (it
// leaves), with and without the second subscription reading it: the
// partition goes on and nothing stays in flight.
func TestRebalanceDuringNackSleep(t *testing.T) {
	for _, mode := range []string{"b-never-reads", "b-holds", "b-acks", "b-nacks"} {
		t.Run(mode, func(t *testing.T) {
			c := newCluster(t, 100)
			const topic = "rbns"
			pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 1})
			sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g", NackResendSleep: 400 * time.Millisecond, Assignor: antiSticky{}})
			if err := sub.SubscribeInitialize(topic); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 4; i++ {
				if err := pub.Publish(topic, newMsg(fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
			}
			chA, err := sub.Subscribe(context.Background(), topic)
			if err != nil {
				t.Fatal(err)
			}
			m := receive(t, chA)
			a := deliveryOf(t, m).Member
			m.Nack() // A sleeps 400ms holding the partition
			time.Sleep(20 * time.Millisecond)
			// Take the partition from A: a second member of the group (the
			// assignor moves every partition away from its previous owner).
			bctx, bcancel := context.WithCancel(context.Background())
			chB, err := sub.Subscribe(bctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if g, _ := groupOf(describe(t, c, topic), "g"); g.Partitions[0].Owner == a {
				t.Fatalf("B did not take the partition: %+v", g.Partitions)
			}
			switch mode {
			case "b-holds":
				receive(t, chB)
			case "b-acks":
				receive(t, chB).Ack()
			case "b-nacks":
				receive(t, chB).Nack()
			}
			bcancel()
			closedWithin(t, chB)
			// The partition is A's again, possibly before A's sleep ends.
			waitDrained(t, c, topic, "g", wait, chA)
		})
	}
}

// A flapping rebalance: while one subscription holds (reads, or leaves
// unread) messages of its partitions, other subscriptions of the group join
// and leave without ever reading, so the partitions go away and come back
// while the deliveries are pending. Everything must drain through the
// stable subscription.
func TestPartitionComesBack(t *testing.T) {
	c := newCluster(t, 100)
	const topic = "flap"
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 4})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g", Partitions: 4, NackResendSleep: 50 * time.Millisecond})
	if err := sub.SubscribeInitialize(topic); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		if err := pub.Publish(topic, newMsg(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var held []*message.Message
	for i := 0; i < 2; i++ {
		held = append(held, receive(t, ch)) // two with the handler, two unread
	}
	for round := 0; round < 30; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		other, err := sub.Subscribe(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if round%3 == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
		closedWithin(t, other)
		switch round {
		case 10:
			held[0].Ack()
		case 20:
			held[1].Nack()
		}
	}
	waitDrained(t, c, topic, "g", wait, ch)
}

// Torture: one stable subscription and churning ones in one group, random
// Nacks with a short NackResendSleep, admin Seeks (to the committed offset
// or back into the replay window) and, in one variant, an ack timeout.
// Then the churn stops and the stable subscription must drain the topic:
// a record left in flight with nobody delivering it would block its
// partition for ever (without an ack timeout).
func TestTorture(t *testing.T) {
	for _, ackTimeout := range []time.Duration{0, 15 * time.Millisecond} {
		t.Run(fmt.Sprintf("acktimeout=%v", ackTimeout), func(t *testing.T) {
			opts := []engine.Option{engine.WithReplayWindow(50)}
			if ackTimeout > 0 {
				opts = append(opts, engine.WithAckTimeout(ackTimeout))
			}
			c := newCluster(t, 1000, opts...)
			const (
				topic = "tort"
				parts = 6
			)
			total := 1500
			if testing.Short() {
				total = 600
			}
			pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: parts})
			sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g", Partitions: parts, NackResendSleep: 2 * time.Millisecond})
			if err := sub.SubscribeInitialize(topic); err != nil {
				t.Fatal(err)
			}
			var seen sync.Map
			var seenN atomic.Int64
			consume := func(ch <-chan *message.Message, rng *rand.Rand) {
				var hw sync.WaitGroup
				defer hw.Wait()
				for m := range ch {
					if _, dup := seen.LoadOrStore(m.UUID, true); !dup {
						seenN.Add(1)
					}
					r := rng.IntN(20)
					hw.Add(1)
					go func() {
						defer hw.Done()
						switch {
						case r == 0:
							m.Nack()
						case r == 1:
							time.Sleep(time.Duration(1+r) * 5 * time.Millisecond)
							m.Ack()
						default:
							m.Ack()
						}
					}()
				}
			}
			stableCtx, stableCancel := context.WithCancel(context.Background())
			defer stableCancel()
			stable, err := sub.Subscribe(stableCtx, topic)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); consume(stable, rand.New(rand.NewPCG(1, 1))) }()
			stop := make(chan struct{})
			for w := 0; w < 2; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 9))
					for {
						select {
						case <-stop:
							return
						default:
						}
						ctx, cancel := context.WithCancel(context.Background())
						ch, err := sub.Subscribe(ctx, topic)
						if err != nil {
							cancel()
							return
						}
						done := make(chan struct{})
						seed := rng.Uint64()
						go func() { defer close(done); consume(ch, rand.New(rand.NewPCG(seed, 3))) }()
						time.Sleep(time.Duration(1+rng.IntN(20)) * time.Millisecond)
						cancel()
						<-done
					}
				}()
			}
			wg.Add(1)
			go func() { // the admin
				defer wg.Done()
				rng := rand.New(rand.NewPCG(7, 7))
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Duration(1+rng.IntN(10)) * time.Millisecond):
					}
					d, err := c.Describe(topic)
					if err != nil {
						return
					}
					g, ok := groupOf(d, "g")
					if !ok {
						continue
					}
					p := int32(rng.IntN(parts))
					to := g.Partitions[p].Committed
					if rng.IntN(2) == 0 {
						to -= int64(rng.IntN(3))
					}
					if start := d.Partitions[p].LogStartOffset; to < start {
						to = start
					}
					_, err = c.Seek(topic, "g", p, to)
					if err != nil && !errors.Is(err, tributary.ErrOffsetOutOfRange) {
						t.Errorf("Seek: %v", err)
						return
					}
				}
			}()
			for i := 0; i < total; i++ {
				if err := pub.Publish(topic, newMsg(fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
				if i%20 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			eventually(t, "every message seen once", func() bool { return seenN.Load() == int64(total) })
			close(stop)
			// The churn and the admin stop; the stable subscription must
			// drain what is left.
			deadline := time.Now().Add(wait)
			for {
				d := describe(t, c, topic)
				g, _ := groupOf(d, "g")
				done := true
				for p, gp := range g.Partitions {
					if gp.Committed != d.Partitions[p].LogEndOffset || gp.InFlight {
						done = false
					}
				}
				if done && len(g.Members) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("the stable subscription did not drain within %v (a record stuck in flight?): members %v, %+v", wait, g.Members, g.Partitions)
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			stableCancel()
			wg.Wait()
		})
	}
}
