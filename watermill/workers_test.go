package tributarywm_test

// The per-partition workers of a subscription: deliveries of a partition
// are one at a time and in order while the workers' TryPollPartition races
// the run loop's Poll, and the number of workers stays bounded.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// One subscription, 8 partitions, a concurrent handler (one goroutine per
// message, random delays, random Nacks) while messages are published: each
// partition's deliveries are strictly one at a time and in order (no
// record delivered twice, none skipped), and every message is acked (none
// stuck). The worker's TryPollPartition after each ack races the run loop's
// Poll throughout.
func TestWorkerHandOffInvariant(t *testing.T) {
	for _, sleep := range []time.Duration{tributarywm.NoSleep, time.Millisecond} {
		t.Run(fmt.Sprintf("sleep=%v", sleep), func(t *testing.T) {
			c := newCluster(t, 1000)
			const (
				topic = "handoff"
				parts = 8
			)
			total := 3000
			if testing.Short() {
				total = 1200
			}
			pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: parts})
			sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g", Partitions: parts, NackResendSleep: sleep})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch, err := sub.Subscribe(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			pubErr := make(chan error, 1)
			go func() {
				for i := 0; i < total; i++ {
					if err := pub.Publish(topic, newMsg(fmt.Sprint(i))); err != nil {
						pubErr <- err
						return
					}
					if i%50 == 0 {
						runtime.Gosched()
					}
				}
				pubErr <- nil
			}()
			k := newHandOffChecker()
			var handlers sync.WaitGroup
			rng := rand.New(rand.NewPCG(3, 4))
			deadline := time.After(90 * time.Second)
		loop:
			for {
				k.mu.Lock()
				n := k.acked
				k.mu.Unlock()
				if n == total {
					break
				}
				select {
				case m := <-ch:
					d := deliveryOf(t, m)
					k.delivered(d)
					r := rng.IntN(100)
					handlers.Add(1)
					go func() {
						defer handlers.Done()
						switch {
						case r < 10:
							k.settling(d, false)
							m.Nack()
						case r < 30:
							time.Sleep(time.Duration(r%3) * time.Millisecond)
							k.settling(d, true)
							m.Ack()
						default:
							k.settling(d, true)
							m.Ack()
						}
					}()
				case <-time.After(time.Second):
					// Nothing for a second: ok while the publisher
					// is still going; the deadline catches a stall.
				case <-deadline:
					break loop
				}
			}
			handlers.Wait()
			if err := <-pubErr; err != nil {
				t.Fatal(err)
			}
			k.mu.Lock()
			defer k.mu.Unlock()
			for _, p := range k.problems {
				t.Error(p)
			}
			if k.acked != total {
				g, _ := groupOf(describe(t, c, topic), "g")
				t.Fatalf("%d of %d messages acked within 90s (stuck?): %+v", k.acked, total, g.Partitions)
			}
			quiet(t, ch, 100*time.Millisecond)
		})
	}
}

// The workers of one subscription: 64 partitions, the handler holds one
// message of each and acks them all at once, many times. The run loop's
// Poll races 64 workers' TryPollPartition; every miss starts a worker that
// then lives as long as the subscription. The goroutines must stay bounded
// (a worker per partition delivering, plus at most one per partition
// between its ack and its next record), not grow with the rounds.
func TestWorkerCountBounded(t *testing.T) {
	c := newCluster(t, 1000)
	const (
		topic  = "workers"
		parts  = 64
		rounds = 15
	)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: parts})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g", Partitions: parts})
	if err := sub.SubscribeInitialize(topic); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < parts*rounds; i++ {
		if err := pub.Publish(topic, newMsg("m")); err != nil {
			t.Fatal(err)
		}
	}
	base := runtime.NumGoroutine()
	ch, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	peak := 0
	for r := 0; r < rounds; r++ {
		batch := make([]*message.Message, 0, parts)
		for len(batch) < parts {
			batch = append(batch, receive(t, ch))
		}
		var wg sync.WaitGroup
		for _, m := range batch {
			wg.Add(1)
			go func() { defer wg.Done(); m.Ack() }()
		}
		wg.Wait()
		if n := runtime.NumGoroutine() - base; n > peak {
			peak = n
		}
	}
	time.Sleep(100 * time.Millisecond)
	n := runtime.NumGoroutine() - base
	t.Logf("goroutines over the baseline: %d at the end, peak %d (partitions %d)", n, peak, parts)
	if n > 2*parts+8 {
		t.Errorf("one subscription of %d partitions keeps %d goroutines", parts, n)
	}
}
