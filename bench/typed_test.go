package bench_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/bench"
	"github.com/f91dcac0/tributary/bench/cputime"
	"github.com/f91dcac0/tributary/bench/typed"
	"github.com/f91dcac0/tributary/engine"
)

// This file measures the typed library (package tributary, the module root)
// against the engine it runs on and against plain channels, each baseline in
// the same run:
//
//	go test -run '^$' -bench 'TypedRoundTrip|ConsumerThroughput' -benchtime 1s -count 3 ./bench/
//
// BenchmarkTypedCPU runs the loops of package bench/typed, the ones
// brokerbench -cputime interleaves, as Go benchmarks.
//
// Ratios to a baseline are reported as metrics ("x-chan", "x-engine", …)
// computed against the baseline sub-benchmark that ran just before, in the
// same invocation; a filter that skips the baseline omits them.

// typedRecord is the payload of the typed-json round trip.
type typedRecord struct {
	ID   int
	Name string
}

// roundTripNs holds the ns/op of the last completed run of each baseline
// sub-benchmark of BenchmarkTypedRoundTrip, by name. The benchmark framework
// runs a sub-benchmark several times while it sizes b.N; the last run is the
// one it reports, and the one kept here.
var roundTripNs = map[string]float64{}

// nsPerOp returns b's elapsed nanoseconds per op.
func nsPerOp(b *testing.B) float64 {
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// reportRatios records ns/op as base and reports its ratio to every named
// baseline measured earlier in this run, as metric "x-<baseline>".
func reportRatios(b *testing.B, self string, baselines ...string) {
	ns := nsPerOp(b)
	roundTripNs[self] = ns
	for _, base := range baselines {
		if d := roundTripNs[base]; d > 0 {
			b.ReportMetric(ns/d, "x-"+base)
		}
	}
}

// BenchmarkTypedRoundTrip: one goroutine publishes one record, polls it
// (max 1) and acks it, per op, on a one-partition topic with one group of
// one member:
//
//   - channel: a buffered chan string, send then receive (the floor);
//   - engine: engine.Broker by names: Publish, Poll(1) (a new slice per
//     poll), Ack;
//   - engine-append: by names, AppendPoll into a reused buffer (the
//     engine's allocation-free path, as BenchmarkRoundTrip/engine);
//   - engine-handle: TopicHandle.PublishMessage, MemberHandle.AppendPoll
//     into a reused buffer, MemberHandle.Ack (no name lookups);
//   - typed-string: Producer[string].TrySend (Manual partitioner) on a
//     String() topic, Consumer.TryPoll(1), Consumer.Ack;
//   - typed-json: the same with JSON[typedRecord]().
//
// Each reports x-chan (ns/op over channel's); the handle and typed
// variants also x-engine (over engine's) and x-engine-append.
func BenchmarkTypedRoundTrip(b *testing.B) {
	b.Run("channel", func(b *testing.B) {
		b.ReportAllocs()
		ch := make(chan string, bench.Capacity)
		n := 0
		for b.Loop() {
			ch <- bench.Payload
			if <-ch != "" {
				n++
			}
		}
		if n != b.N {
			b.Fatalf("received %d, want %d", n, b.N)
		}
		reportRatios(b, "chan")
	})
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		e := newRoundTripEngine(b)
		for b.Loop() {
			off, err := e.Publish("t", 0, bench.Payload)
			if err != nil || off < 0 {
				b.Fatalf("Publish = %d, %v", off, err)
			}
			recs, err := e.Poll("t", "g", "m", 1)
			if err != nil || len(recs) != 1 || recs[0].Offset != off {
				b.Fatalf("Poll = %v, %v; want offset %d", recs, err, off)
			}
			if ok, err := e.Ack("t", "g", "m", 0, off); err != nil || !ok {
				b.Fatalf("Ack(0, %d) = %v, %v", off, ok, err)
			}
		}
		reportRatios(b, "engine", "chan")
	})
	b.Run("engine-append", func(b *testing.B) {
		b.ReportAllocs()
		e := newRoundTripEngine(b)
		buf := make([]engine.Record, 0, 1)
		for b.Loop() {
			off, err := e.Publish("t", 0, bench.Payload)
			if err != nil || off < 0 {
				b.Fatalf("Publish = %d, %v", off, err)
			}
			buf, err = e.AppendPoll(buf[:0], "t", "g", "m", 1)
			if err != nil || len(buf) != 1 || buf[0].Offset != off {
				b.Fatalf("AppendPoll = %v, %v; want offset %d", buf, err, off)
			}
			if ok, err := e.Ack("t", "g", "m", 0, off); err != nil || !ok {
				b.Fatalf("Ack(0, %d) = %v, %v", off, ok, err)
			}
		}
		reportRatios(b, "engine-append", "chan", "engine")
	})
	b.Run("engine-handle", func(b *testing.B) {
		b.ReportAllocs()
		e := newRoundTripEngine(b)
		th, err := e.Topic("t")
		require.NoError(b, err)
		mh, err := th.Member("g", "m")
		require.NoError(b, err)
		buf := make([]engine.Record, 0, 1)
		msg := engine.Message{Payload: bench.Payload}
		for b.Loop() {
			off, err := th.PublishMessage(0, msg)
			if err != nil || off < 0 {
				b.Fatalf("PublishMessage = %d, %v", off, err)
			}
			buf, err = mh.AppendPoll(buf[:0], 1)
			if err != nil || len(buf) != 1 || buf[0].Offset != off {
				b.Fatalf("AppendPoll = %v, %v; want offset %d", buf, err, off)
			}
			if ok, err := mh.Ack(0, off); err != nil || !ok {
				b.Fatalf("Ack(0, %d) = %v, %v", off, ok, err)
			}
		}
		reportRatios(b, "engine-handle", "chan", "engine", "engine-append")
	})
	b.Run("typed-string", func(b *testing.B) {
		typedRoundTrip(b, "typed-string", tributary.String(), bench.Payload)
	})
	b.Run("typed-json", func(b *testing.B) {
		typedRoundTrip(b, "typed-json", tributary.JSON[typedRecord](), typedRecord{ID: 42, Name: bench.Payload})
	})
}

// newRoundTripEngine returns an engine with topic "t" of one partition and
// member "m" of group "g".
func newRoundTripEngine(b *testing.B) *engine.Broker {
	b.Helper()
	e, err := engine.New(bench.Capacity)
	require.NoError(b, err)
	_, err = e.Create("t", 1)
	require.NoError(b, err)
	_, err = e.Join("t", "g", "m")
	require.NoError(b, err)
	return e
}

// typedRoundTrip times TrySend → TryPoll(1) → Ack of v on a one-partition
// topic of codec.
func typedRoundTrip[T any](b *testing.B, name string, codec tributary.Codec[T], v T) {
	b.ReportAllocs()
	c, err := tributary.NewCluster(bench.Capacity)
	require.NoError(b, err)
	defer c.Close()
	t, err := tributary.CreateTopic(c, "t", 1, codec)
	require.NoError(b, err)
	p, err := tributary.NewProducer[T](c, "p", tributary.Manual())
	require.NoError(b, err)
	cons, err := tributary.NewConsumer(t, "g", "m")
	require.NoError(b, err)
	msg := tributary.Message[T]{Value: v}
	for b.Loop() {
		sent, err := p.TrySend(t, msg)
		if err != nil {
			b.Fatalf("TrySend: %v", err)
		}
		ms, err := cons.TryPoll(1)
		if err != nil || len(ms) != 1 || ms[0].Offset != sent.Offset || ms[0].Err != nil {
			b.Fatalf("TryPoll = %v, %v; want offset %d", ms, err, sent.Offset)
		}
		if err := cons.Ack(ms[0]); err != nil {
			b.Fatalf("Ack: %v", err)
		}
	}
	reportRatios(b, name, "chan", "engine", "engine-append")
}

// Shape of BenchmarkConsumerThroughput.
const (
	throughputPartitions = 16                                    // partitions of the typed topic
	throughputBuffer     = throughputPartitions * bench.Capacity // the fan-out channel's buffer: the topic's total capacity
	throughputMaxWait    = time.Minute                           // a run that handles nothing for this long fails
)

// BenchmarkConsumerThroughput: one producer goroutine sends b.N records and
// consumers=N goroutines consume them; the op is one record, timed from the
// first send until the last record is handled, in records/s (and ns/op):
//
//   - channel: one chan string buffered to 16,000 (the typed topic's total
//     capacity); the producer sends, N goroutines range over the channel and
//     count each record;
//   - typed: a String() topic of 16 partitions of capacity 1,000, one group
//     of N Consumers each in Consumer.Run (default batch 16) with a handler
//     that counts; the producer (RoundRobin) uses Producer.Send, which waits
//     for room in a full partition. With N = 1 one consumer owns all 16
//     partitions; with 16, one each.
//
// typed reports x-chan, its ns/op over channel's in the same run. Every
// sub-benchmark stops all its goroutines (cancel, then wait) before it
// returns.
func BenchmarkConsumerThroughput(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("consumers=%d", n), func(b *testing.B) {
			var chanNs float64
			b.Run("channel", func(b *testing.B) {
				b.ReportAllocs()
				b.ResetTimer()
				if err := fanOutChannel(b.N, n); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				chanNs = nsPerOp(b)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
			b.Run("typed", func(b *testing.B) {
				b.ReportAllocs()
				run, err := newTypedThroughput(n)
				if err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				err = run.deliver(b.N)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
				if chanNs > 0 {
					b.ReportMetric(nsPerOp(b)/chanNs, "x-chan")
				}
			})
		})
	}
}

// fanOutChannel sends records values on one buffered channel read by
// readers goroutines and returns when every record has been counted and
// every reader has returned.
func fanOutChannel(records, readers int) error {
	ch := make(chan string, throughputBuffer)
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
		ch <- bench.Payload
	}
	close(ch)
	wg.Wait()
	if got := count.Load(); got != int64(records) {
		return fmt.Errorf("channel fan-out: counted %d records, want %d", got, records)
	}
	return nil
}

// typedThroughput is one BenchmarkConsumerThroughput/typed run: a cluster
// with the topic, the producer and the group's consumers, all joined, none
// running yet.
type typedThroughput struct {
	c         *tributary.Cluster
	t         *tributary.Topic[string]
	p         *tributary.Producer[string]
	consumers []*tributary.Consumer[string]
}

// newTypedThroughput builds the cluster of a run with consumers members in
// the group; the rebalances happen here, before the timer starts.
func newTypedThroughput(consumers int) (*typedThroughput, error) {
	c, err := tributary.NewCluster(bench.Capacity)
	if err != nil {
		return nil, err
	}
	r := &typedThroughput{c: c}
	if r.t, err = tributary.CreateTopic(c, "t", throughputPartitions, tributary.String()); err != nil {
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

// deliver starts one Run per consumer, sends records records and returns
// when the handlers have counted them all, after cancelling the Runs and
// the producer and waiting for every goroutine it started; then it closes
// the cluster. An error from a Run or the producer, or no progress for
// throughputMaxWait, fails it.
func (r *typedThroughput) deliver(records int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer r.c.Close()
	var handled atomic.Int64
	all := make(chan struct{})
	handler := func(context.Context, tributary.Message[string]) error {
		if handled.Add(1) == int64(records) {
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
		msg := tributary.Message[string]{Value: bench.Payload}
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
		err = waitHandled(all, &handled, errs)
	}
	cancel()
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if got := handled.Load(); err == nil && got != int64(records) {
		err = fmt.Errorf("typed: handled %d records, want %d", got, records)
	}
	return err
}

// waitHandled waits until all is closed, an error arrives, or handled stops
// growing for throughputMaxWait.
func waitHandled(all <-chan struct{}, handled *atomic.Int64, errs <-chan error) error {
	tick := time.NewTicker(throughputMaxWait)
	defer tick.Stop()
	last := int64(-1)
	for {
		select {
		case <-all:
			return nil
		case err := <-errs:
			return err
		case <-tick.C:
			n := handled.Load()
			if n == last {
				return fmt.Errorf("typed: no progress for %v at %d records handled", throughputMaxWait, n)
			}
			last = n
		}
	}
}

// TestConsumerThroughputHarness runs both throughput harnesses on a few
// records and checks that each delivers every record exactly once and
// leaves no goroutine behind, so the benchmark times what it says it does.
func TestConsumerThroughputHarness(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, n := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("consumers=%d", n), func(t *testing.T) {
			for _, records := range []int{0, 1, 3 * throughputBuffer / 2} {
				require.NoError(t, fanOutChannel(records, n))
				run, err := newTypedThroughput(n)
				require.NoError(t, err)
				require.NoError(t, run.deliver(records))
				var acked int64
				for _, c := range run.consumers {
					acked += c.Stats().Acked
				}
				// The last handler may finish just as the harness cancels
				// Run, which then abandons it unacked: at most one per consumer.
				require.LessOrEqual(t, acked, int64(records), "acked over all consumers")
				require.GreaterOrEqual(t, acked, int64(records-n), "acked over all consumers")
			}
		})
	}
}

// BenchmarkTypedCPU runs every loop of every bench/typed family for b.N
// ops at the family's GOMAXPROCS, reporting, besides ns/op (wall), the
// process CPU time per unit inside the loop's timed windows as
// "cpu-ns/record". brokerbench -cputime runs the same loops interleaved and
// pairs their chunks; this is the go test -bench view of one loop alone:
//
//	go test -run '^$' -bench 'TypedCPU' -benchtime 200000x ./bench/
func BenchmarkTypedCPU(b *testing.B) {
	for _, f := range typed.Families() {
		for _, l := range f.Loops {
			b.Run(f.Name+"/"+l.Name, func(b *testing.B) {
				if f.Procs > 0 {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(f.Procs))
				}
				in, err := l.Start()
				require.NoError(b, err)
				if in.Stop != nil {
					defer func() { require.NoError(b, in.Stop()) }()
				}
				b.ReportAllocs()
				m := cputime.NewMeter(nil)
				b.ResetTimer()
				units, err := in.Run(m, b.N)
				b.StopTimer()
				require.NoError(b, err)
				b.ReportMetric(float64(m.CPU.Nanoseconds())/float64(units), "cpu-ns/"+f.Unit)
				b.ReportMetric(float64(units)/m.Wall.Seconds(), bench.Plural(f.Unit)+"/s")
			})
		}
	}
}
