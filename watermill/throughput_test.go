package tributarywm_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"go.uber.org/goleak"

	"github.com/f91dcac0/tributary"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// Shape of the run, as BenchmarkConsumerThroughput in package bench.
const (
	partitions = 16                    // partitions of the Tributary topic
	capacity   = 1000                  // records per partition
	inFlight   = partitions * capacity // the channel's buffer; GoChannel's output buffer and in-flight credit
	payload    = "payload-0123456789abcdef"
	maxWait    = time.Minute // a run that handles nothing for this long fails
)

// BenchmarkThroughput: one producer goroutine sends b.N records and
// consumers=N handler goroutines consume them; the op is one record, timed
// from the first send until the last record is handled (and acked), in
// records/s. Sub-benchmarks, in run order:
//
//   - channel: one chan string buffered to 16,000; N goroutines range over
//     it and count;
//   - tributary: a String() topic of 16 partitions of capacity 1,000, one
//     consumer group of N Consumers each in Consumer.Run with a handler
//     that counts; the producer (RoundRobin) uses Producer.Send, which
//     waits for room in a full partition;
//   - tributarywm: the same topic (16 partitions of capacity 1,000, but of
//     payload type Bytes) through this package: one Publisher (round-robin,
//     its Publish waits for room in a full partition) and N subscriptions
//     of one Subscriber, all in one consumer group, each read by one
//     goroutine that counts and Acks; message UUIDs as gochannel's;
//   - gochannel: one gochannel.GoChannel (OutputChannelBuffer 16,000, not
//     persistent), ONE Subscribe of the topic read by N handler goroutines
//     that count and Ack each message. GoChannel has no consumer groups:
//     every subscriber receives every message, so N subscribers would be N
//     copies, not N-way sharing; one subscription with N readers is the
//     work-sharing equivalent. Publish never blocks (it starts a goroutine
//     per message, and one per subscriber, that lives until the ack), so
//     the producer holds one of 16,000 credits per unacked message, the
//     bound a Tributary topic of 16 × 1,000 records imposes; a handler
//     returns the credit after Ack. Message UUIDs are strconv.Itoa(i), not
//     watermill.NewUUID(), to time the Pub/Sub rather than the UUID.
//
// tributary, tributarywm and gochannel report x-chan, their ns/op over
// channel's in the same run (under -count N, over channel's N-th row: Go
// runs each sub-benchmark N times before the next). Each sub-benchmark
// stops all its goroutines before it returns.
func BenchmarkThroughput(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("consumers=%d", n), func(b *testing.B) {
			var chanNs float64 // channel's ns/op in its last (reported) run
			report := func(b *testing.B, baseline bool) {
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if baseline {
					chanNs = ns
				} else if chanNs > 0 {
					b.ReportMetric(ns/chanNs, "x-chan")
				}
			}
			for _, c := range []struct {
				name  string
				setup func(consumers int) (deliver func(records int) error, err error) // untimed
			}{
				{"channel", func(n int) (func(int) error, error) {
					return func(records int) error { return fanOutChannel(records, n) }, nil
				}},
				{"tributary", func(n int) (func(int) error, error) {
					r, err := newTributary(n)
					if err != nil {
						return nil, err
					}
					return r.deliver, nil
				}},
				{"tributarywm", func(n int) (func(int) error, error) {
					r, err := newAdapter(n)
					if err != nil {
						return nil, err
					}
					return r.deliver, nil
				}},
				{"gochannel", func(n int) (func(int) error, error) {
					return func(records int) error { return goChannel(records, n) }, nil
				}},
			} {
				b.Run(c.name, func(b *testing.B) {
					b.ReportAllocs()
					deliver, err := c.setup(n)
					if err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					err = deliver(b.N)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					report(b, c.name == "channel")
				})
			}
		})
	}
}

// fanOutChannel sends records values on one buffered channel read by
// readers goroutines and returns when all are counted and the readers have
// returned.
func fanOutChannel(records, readers int) error {
	ch := make(chan string, inFlight)
	var count atomic.Int64
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for s := range ch {
				if s != "" {
					count.Add(1)
				}
			}
		})
	}
	for range records {
		ch <- payload
	}
	close(ch)
	wg.Wait()
	if got := count.Load(); got != int64(records) {
		return fmt.Errorf("channel: counted %d records, want %d", got, records)
	}
	return nil
}

// goChannel publishes records messages to one GoChannel subscription read
// by readers goroutines and returns when all are counted and acked, the
// subscription is cancelled, the Pub/Sub closed and the readers returned.
func goChannel(records, readers int) error {
	pubSub := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: inFlight}, watermill.NopLogger{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs, err := pubSub.Subscribe(ctx, "t")
	if err != nil {
		return err
	}
	credits := make(chan struct{}, inFlight)
	var count atomic.Int64
	all := make(chan struct{})
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for m := range msgs {
				if len(m.Payload) != 0 && count.Add(1) == int64(records) {
					close(all)
				}
				m.Ack()
				<-credits
			}
		})
	}
	body := message.Payload(payload)
	var pubErr error
	for i := range records {
		credits <- struct{}{}
		if pubErr = pubSub.Publish("t", message.NewMessage(strconv.Itoa(i), body)); pubErr != nil {
			break
		}
	}
	if pubErr == nil && records > 0 {
		pubErr = waitCount(all, &count)
	}
	cancel()
	closeErr := pubSub.Close() // waits for the subscription to end; closes msgs
	wg.Wait()
	if err := errors.Join(pubErr, closeErr); err != nil {
		return err
	}
	if got := count.Load(); got != int64(records) {
		return fmt.Errorf("gochannel: counted %d records, want %d", got, records)
	}
	return nil
}

// waitCount waits until all is closed or count stops growing for maxWait.
func waitCount(all <-chan struct{}, count *atomic.Int64) error {
	tick := time.NewTicker(maxWait)
	defer tick.Stop()
	last := int64(-1)
	for {
		select {
		case <-all:
			return nil
		case <-tick.C:
			n := count.Load()
			if n == last {
				return fmt.Errorf("no progress for %v at %d records", maxWait, n)
			}
			last = n
		}
	}
}

// tributaryRun is a cluster with the topic, a producer and the group's
// consumers, all joined, none running yet.
type tributaryRun struct {
	c         *tributary.Cluster
	t         *tributary.Topic[string]
	p         *tributary.Producer[string]
	consumers []*tributary.Consumer[string]
}

// newTributary builds a run with consumers members in the group; the
// rebalances happen here, before the timer starts.
func newTributary(consumers int) (*tributaryRun, error) {
	c, err := tributary.NewCluster(capacity)
	if err != nil {
		return nil, err
	}
	r := &tributaryRun{c: c}
	if r.t, err = tributary.CreateTopic(c, "t", partitions, tributary.String()); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if r.p, err = tributary.NewProducer[string](c, "p", tributary.RoundRobin()); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	for i := range consumers {
		cons, err := tributary.NewConsumer(r.t, "g", fmt.Sprintf("c%02d", i))
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		r.consumers = append(r.consumers, cons)
	}
	return r, nil
}

// deliver runs the consumers, sends records records and returns once the
// handlers have counted them all, the Runs and the producer are cancelled
// and waited for, and the cluster is closed.
func (r *tributaryRun) deliver(records int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer r.c.Close()
	var count atomic.Int64
	all := make(chan struct{})
	handler := func(_ context.Context, m tributary.Message[string]) error {
		if m.Value != "" && count.Add(1) == int64(records) {
			close(all)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(r.consumers)+1)
	for _, cons := range r.consumers {
		wg.Go(func() {
			if err := cons.Run(ctx, handler); err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("consumer %s: Run: %w", cons.Name(), err)
			}
		})
	}
	wg.Go(func() {
		msg := tributary.Message[string]{Value: payload}
		for i := range records {
			if _, err := r.p.Send(ctx, r.t, msg); err != nil {
				if !errors.Is(err, context.Canceled) {
					errs <- fmt.Errorf("Send %d of %d: %w", i, records, err)
				}
				return
			}
		}
	})
	var err error
	if records > 0 {
		done := make(chan error, 1)
		go func() { done <- waitCount(all, &count) }()
		select {
		case err = <-done:
		case err = <-errs:
		}
	}
	cancel()
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if got := count.Load(); err == nil && got != int64(records) {
		err = fmt.Errorf("tributary: counted %d records, want %d", got, records)
	}
	return err
}

// adapterRun is a cluster with the topic, this package's publisher and
// the group's subscriptions, all joined, none read yet.
type adapterRun struct {
	c      *tributary.Cluster
	pub    *tributarywm.Publisher
	sub    *tributarywm.Subscriber
	chans  []<-chan *message.Message
	cancel context.CancelFunc // ends the subscriptions
}

// newAdapter builds a run with subscriptions members in group "g" of a
// topic of 16 partitions; the rebalances happen here, before the timer
// starts.
func newAdapter(subscriptions int) (*adapterRun, error) {
	c, err := tributary.NewCluster(capacity)
	if err != nil {
		return nil, err
	}
	r := &adapterRun{c: c}
	if r.pub, err = tributarywm.NewPublisher(c, tributarywm.PublisherConfig{Partitions: partitions}, nil); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	r.sub, err = tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{
		ConsumerGroup: "g", Partitions: partitions, NackResendSleep: tributarywm.NoSleep,
	}, nil)
	if err != nil {
		return nil, errors.Join(err, r.pub.Close(), c.Close())
	}
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(context.Background())
	for range subscriptions {
		ch, err := r.sub.Subscribe(ctx, "t")
		if err != nil {
			r.cancel()
			return nil, errors.Join(err, r.sub.Close(), r.pub.Close(), c.Close())
		}
		r.chans = append(r.chans, ch)
	}
	return r, nil
}

// deliver reads every subscription in a goroutine of its own, publishes
// records messages and returns once the readers have counted them all, the
// subscriptions have ended, the readers and the publishing goroutine have
// returned, and the Pub/Sub and cluster are closed.
func (r *adapterRun) deliver(records int) error {
	var count atomic.Int64
	all := make(chan struct{})
	var readers sync.WaitGroup
	for _, ch := range r.chans {
		readers.Go(func() {
			for m := range ch {
				if len(m.Payload) != 0 && count.Add(1) == int64(records) {
					close(all)
				}
				m.Ack()
			}
		})
	}
	errs := make(chan error, 1)
	var publisher sync.WaitGroup
	publisher.Go(func() {
		body := message.Payload(payload)
		for i := range records {
			if err := r.pub.Publish("t", message.NewMessage(strconv.Itoa(i), body)); err != nil {
				if !errors.Is(err, tributarywm.ErrClosed) { // closed below after a failure
					errs <- fmt.Errorf("Publish %d of %d: %w", i, records, err)
				}
				return
			}
		}
	})
	var err error
	if records > 0 {
		done := make(chan error, 1)
		go func() { done <- waitCount(all, &count) }()
		select {
		case err = <-done:
		case err = <-errs:
		}
	}
	r.cancel()
	// The publisher first: its Close ends a Publish waiting for room.
	closeErr := errors.Join(r.pub.Close(), r.sub.Close(), r.c.Close())
	readers.Wait()
	publisher.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if got := count.Load(); err == nil && got != int64(records) {
		err = fmt.Errorf("tributarywm: counted %d records, want %d", got, records)
	}
	return errors.Join(err, closeErr)
}

// TestHarness runs the four harnesses on a few records: each must count
// every record exactly once and leave no goroutine behind.
func TestHarness(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, n := range []int{1, 4, 16} {
		for _, records := range []int{0, 1, 3 * inFlight / 2} {
			if err := fanOutChannel(records, n); err != nil {
				t.Fatal(err)
			}
			r, err := newTributary(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.deliver(records); err != nil {
				t.Fatal(err)
			}
			a, err := newAdapter(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.deliver(records); err != nil {
				t.Fatalf("tributarywm: consumers=%d records=%d: %v", n, records, err)
			}
			if err := goChannel(records, n); err != nil {
				t.Fatalf("consumers=%d records=%d: %v", n, records, err)
			}
		}
	}
}
