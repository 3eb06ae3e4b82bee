package tributarywm_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/subscriber"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// benchPartitions is the partition count of the benchmarks' Tributary
// topics (capacity 1,000 records each, so at most 16,000 unacked messages
// before Publish waits).
const benchPartitions = 16

// BenchmarkSubscriber is Watermill's own Pub/Sub benchmark,
// tests.BenchSubscriber: one goroutine publishes b.N messages
// (message.NewMessage("1", nil)) to a fresh topic, one subscription
// bulk-reads and acks them (subscriber.BulkRead); the op is one message,
// timed from just after Subscribe until the last one is read. Sub-benchmarks,
// in run order:
//
//   - gochannel: gochannel.GoChannel with OutputChannelBuffer b.N, not
//     persistent, exactly as Watermill's own BenchmarkSubscriber in
//     pubsub/gochannel/pubsub_bench_test.go;
//   - tributary: a Publisher and a Subscriber of this package on
//     tributary.NewCluster(1000), topic of 16 partitions (both configs),
//     messages round-robin (no PartitionKey), the subscriber in
//     DefaultConsumerGroup with NackResendSleep NoSleep (nothing is nacked).
//
// Both report msgs/s and allocations (BenchSubscriber's own, such as
// BulkRead's timer per message, count for both). tributary also reports
// rate-x-gochannel: its msgs/s over gochannel's in gochannel's last
// reported run (below 1: slower). Under -count N, Go runs each
// sub-benchmark N times before the next, so every tributary row is divided
// by gochannel's N-th row; compare medians for a steadier ratio. Each
// sub-benchmark closes its Pub/Sub (and cluster) after every run.
func BenchmarkSubscriber(b *testing.B) {
	benchPair(b, func(b *testing.B, newPubSub tests.BenchmarkPubSubConstructor) {
		tests.BenchSubscriber(b, newPubSub)
	})
}

// BenchmarkSubscriberParallelPublish is BenchmarkSubscriber with the b.N
// messages published by 4 goroutines (b.N/4 each, the remainder by the
// first) instead of one, still read and acked by one subscription: what
// concurrent Publish calls cost each Pub/Sub (GoChannel's per-topic lock;
// Tributary's producer and partition locks). Same configurations and
// metrics.
func BenchmarkSubscriberParallelPublish(b *testing.B) {
	benchPair(b, func(b *testing.B, newPubSub tests.BenchmarkPubSubConstructor) {
		benchSubscriberParallel(b, 4, newPubSub)
	})
}

// benchPair runs bench on GoChannel, then on this package, and reports
// msgs/s for both and the ratio of the second to the first.
func benchPair(b *testing.B, bench func(*testing.B, tests.BenchmarkPubSubConstructor)) {
	var goChannelRate float64 // msgs/s of gochannel's last (reported) run
	b.Run("gochannel", func(b *testing.B) {
		b.ReportAllocs()
		bench(b, func(n int) (message.Publisher, message.Subscriber) { return newGoChannelBench(b, n) })
		goChannelRate = reportRate(b)
	})
	b.Run("tributary", func(b *testing.B) {
		b.ReportAllocs()
		bench(b, func(int) (message.Publisher, message.Subscriber) { return newTributaryBench(b) })
		if rate := reportRate(b); goChannelRate > 0 {
			b.ReportMetric(rate/goChannelRate, "rate-x-gochannel")
		}
	})
}

// reportRate stops the timer and reports b.N over the time since the
// harness's ResetTimer, in msgs/s.
func reportRate(b *testing.B) float64 {
	b.StopTimer()
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "msgs/s")
	return rate
}

// newGoChannelBench is Watermill's gochannel BenchmarkSubscriber
// configuration, closed when the run ends.
func newGoChannelBench(b *testing.B, n int) (message.Publisher, message.Subscriber) {
	pubSub := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: int64(n)}, watermill.NopLogger{})
	b.Cleanup(func() {
		if err := pubSub.Close(); err != nil {
			b.Error(err)
		}
	})
	return pubSub, pubSub
}

// newTributaryBench returns this package's publisher and subscriber on a
// fresh cluster of capacity 1,000, all closed when the run ends (the
// publisher first, so that a Publish still waiting for room returns).
func newTributaryBench(b *testing.B) (message.Publisher, message.Subscriber) {
	cluster, err := tributary.NewCluster(engine.MaxCapacity)
	if err != nil {
		b.Fatal(err)
	}
	pub, err := tributarywm.NewPublisher(cluster, tributarywm.PublisherConfig{Partitions: benchPartitions}, nil)
	if err != nil {
		b.Fatal(errors.Join(err, cluster.Close()))
	}
	sub, err := tributarywm.NewSubscriber(cluster, tributarywm.SubscriberConfig{
		Partitions: benchPartitions, NackResendSleep: tributarywm.NoSleep,
	}, nil)
	if err != nil {
		b.Fatal(errors.Join(err, pub.Close(), cluster.Close()))
	}
	b.Cleanup(func() {
		if err := errors.Join(pub.Close(), sub.Close(), cluster.Close()); err != nil {
			b.Error(err)
		}
	})
	return pub, sub
}

// benchSubscriberParallel is tests.BenchSubscriber with publishers
// publishing goroutines; a publish error fails the benchmark instead of
// panicking. It waits for its publishers before it returns.
func benchSubscriberParallel(b *testing.B, publishers int, newPubSub tests.BenchmarkPubSubConstructor) {
	pub, sub := newPubSub(b.N)
	topic := "topic-" + watermill.NewUUID()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	messages, err := sub.Subscribe(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		failed  atomic.Bool
		pubErrs = make(chan error, publishers)
	)
	for p := range publishers {
		n := b.N / publishers
		if p == 0 {
			n += b.N % publishers
		}
		wg.Go(func() {
			for range n {
				if failed.Load() {
					return
				}
				if err := pub.Publish(topic, message.NewMessage("1", nil)); err != nil {
					failed.Store(true)
					pubErrs <- fmt.Errorf("publisher %d: %w", p, err)
					return
				}
			}
		})
	}
	b.ResetTimer()
	got, all := subscriber.BulkRead(messages, b.N, time.Minute)
	b.StopTimer()
	if !all {
		failed.Store(true)
		// Unblock a publisher waiting for room in a full partition.
		if err := pub.Close(); err != nil {
			b.Error(err)
		}
	}
	wg.Wait()
	close(pubErrs)
	for err := range pubErrs {
		b.Error(err)
	}
	if !all {
		b.Fatalf("not all messages received, have %d, expected %d", len(got), b.N)
	}
}
