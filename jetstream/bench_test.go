package jetstream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// The benchmarks below compare this package's Backend with the in-process
// engine's (tributary.NewCluster(capacity).Backend()) in the same run:
//
//	memory                 the in-process engine
//	jetstream-1            one embedded server (StartServer), in-process
//	                       connection (Config.Server); RoundTrip has one
//	                       sub-benchmark per Storage, Throughput uses
//	                       FileStorage (the default)
//	jetstream-3            StartCluster(3), Replicas 3, FileStorage, a
//	                       connection over the loopback URLs of all nodes
//
// A variant's server and Backend are started once, outside the timer, on
// the first round (b.N) of its benchmark and shut down after its last; each
// round uses a fresh topic. Both benchmarks are skipped under -short.

// benchCapacity is each partition's capacity in the benchmarks.
const benchCapacity = 1000

// benchBackend is one variant's backend, started on first use.
type benchBackend struct {
	name  string
	start func(dir string) (tributary.Backend, func(), error)
	dir   string // the store directory, under the top-level benchmark's

	started bool
	be      tributary.Backend
	stop    func()
	err     error
}

// get returns the backend, starting it on the first call; b.Fatal if it
// could not start.
func (v *benchBackend) get(b *testing.B) tributary.Backend {
	b.Helper()
	if !v.started {
		v.started = true
		v.be, v.stop, v.err = v.start(v.dir)
	}
	if v.err != nil {
		b.Fatalf("starting %s: %v", v.name, v.err)
	}
	return v.be
}

// shutdown closes the backend and stops its servers, if started.
func (v *benchBackend) shutdown() {
	if v.stop != nil {
		v.stop()
		v.stop = nil
	}
}

// variant returns the backend called name, its store under a directory of
// b (the top-level benchmark), shut down when b ends at the latest.
func variant(b *testing.B, name string, start func(dir string) (tributary.Backend, func(), error)) *benchBackend {
	v := &benchBackend{name: name, start: start, dir: filepath.Join(b.TempDir(), "store")}
	b.Cleanup(v.shutdown)
	return v
}

func startMemory(string) (tributary.Backend, func(), error) {
	c, err := tributary.NewCluster(benchCapacity)
	if err != nil {
		return nil, nil, err
	}
	return c.Backend(), func() { c.Close() }, nil
}

func startJetStream1(storage jetstream.Storage) func(dir string) (tributary.Backend, func(), error) {
	return func(dir string) (tributary.Backend, func(), error) {
		srv, err := jetstream.StartServer(dir)
		if err != nil {
			return nil, nil, err
		}
		be, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: benchCapacity, Storage: storage})
		if err != nil {
			srv.Shutdown()
			return nil, nil, err
		}
		return be, func() { be.Close(); srv.Shutdown() }, nil
	}
}

func startJetStream3(dir string) (tributary.Backend, func(), error) {
	cl, err := jetstream.StartCluster(3, dir)
	if err != nil {
		return nil, nil, err
	}
	be, err := jetstream.Open(jetstream.Config{
		URL:            strings.Join(cl.URLs(), ","),
		Capacity:       benchCapacity,
		Replicas:       3,
		RequestTimeout: 10 * time.Second,
	})
	if err != nil {
		cl.Shutdown()
		return nil, nil, err
	}
	return be, func() { be.Close(); cl.Shutdown() }, nil
}

// runVariant runs body on v's backend as sub-benchmark v.name (the
// backend started on its first round), then shuts v down.
func runVariant(b *testing.B, v *benchBackend, body func(*testing.B, tributary.Backend)) {
	b.Run(v.name, func(b *testing.B) { body(b, v.get(b)) })
	v.shutdown()
}

// topicSeq numbers the benchmarks' topics: each round has a fresh one.
var topicSeq atomic.Int64

func nextTopic(prefix string) string {
	return prefix + strconv.FormatInt(topicSeq.Add(1), 10)
}

// benchTopic creates topic name with parts partitions and group "g" on it.
func benchTopic(b *testing.B, be tributary.Backend, name string, parts int32) tributary.BackendTopic {
	b.Helper()
	if ok, err := be.CreateTopic(name, parts, "string"); err != nil || !ok {
		b.Fatalf("CreateTopic(%q) = %v, %v", name, ok, err)
	}
	bt, _, err := be.OpenTopic(name)
	if err != nil {
		b.Fatal(err)
	}
	if ok, err := be.CreateGroup(name, "g", engine.RoundRobin); err != nil || !ok {
		b.Fatalf("CreateGroup(%q, g) = %v, %v", name, ok, err)
	}
	return bt
}

// reportRate reports ns/record and records/s for n records over the timed
// part of the round.
func reportRate(b *testing.B, n int) {
	el := b.Elapsed()
	if n == 0 || el <= 0 {
		return
	}
	b.ReportMetric(float64(el.Nanoseconds())/float64(n), "ns/record")
	b.ReportMetric(float64(n)/el.Seconds(), "records/s")
}

// BenchmarkBackendRoundTrip: one goroutine publishes one record
// (TryPublish), polls it (TryPoll, max 1) and acks it, on a 1-partition
// topic, checking each result.
func BenchmarkBackendRoundTrip(b *testing.B) {
	if testing.Short() {
		b.Skip("starts NATS servers")
	}
	runVariant(b, variant(b, "memory", startMemory), roundTrip)
	b.Run("jetstream-1", func(b *testing.B) {
		runVariant(b, variant(b, "storage=memory", startJetStream1(jetstream.MemoryStorage)), roundTrip)
		runVariant(b, variant(b, "storage=file", startJetStream1(jetstream.FileStorage)), roundTrip)
	})
	runVariant(b, variant(b, "jetstream-3", startJetStream3), roundTrip)
}

// roundTrip is one round of BenchmarkBackendRoundTrip.
func roundTrip(b *testing.B, be tributary.Backend) {
	name := nextTopic("rt")
	bt := benchTopic(b, be, name, 1)
	m, err := bt.Member("g", "m")
	if err != nil {
		b.Fatal(err)
	}
	if a, err := m.Join(); err != nil || len(a) != 1 || a[0] != 0 {
		b.Fatalf("Join = %v, %v; want [0]", a, err)
	}
	dst := make([]engine.Record, 0, 1)
	b.ResetTimer()
	for i := range b.N {
		off := int64(i)
		payload := "r" + strconv.Itoa(i)
		got, err := bt.TryPublish(0, engine.Message{Payload: payload})
		if err != nil || got != off {
			b.Fatalf("TryPublish #%d = %d, %v; want offset %d", i, got, err, off)
		}
		rs, err := m.TryPoll(dst[:0], 1)
		if err != nil {
			b.Fatalf("TryPoll #%d: %v", i, err)
		}
		if len(rs) != 1 {
			b.Fatalf("TryPoll #%d: %d records, want 1", i, len(rs))
		}
		if r := rs[0]; r.Topic != name || r.Partition != 0 || r.Offset != off || r.Payload != payload || r.Attempt != 1 {
			b.Fatalf("TryPoll #%d = %s %d/%d %q #%d; want %s 0/%d %q #1",
				i, r.Topic, r.Partition, r.Offset, r.Payload, r.Attempt, name, off, payload)
		}
		if ok, err := m.Ack(0, off); err != nil || !ok {
			b.Fatalf("Ack #%d = %v, %v", i, ok, err)
		}
	}
	b.StopTimer()
	reportRate(b, b.N)
}

// BenchmarkBackendThroughput: a topic of 4 partitions, one group of 4
// members, each in its own goroutine polling (the blocking Poll, max 4) and
// acking; 2 producers publish b.N records with the waiting Publish. The
// round ends when b.N records are acked. Record k goes to partition k%4
// from producer k%2, so partition p holds k = p, p+4, p+8, … in order: its
// offset o must carry payload 4o+p, and each partition must be delivered
// in offset order, each record once (no rebalance or ack timeout happens).
func BenchmarkBackendThroughput(b *testing.B) {
	if testing.Short() {
		b.Skip("starts NATS servers")
	}
	for _, v := range []*benchBackend{
		variant(b, "memory", startMemory),
		variant(b, "jetstream-1", startJetStream1(jetstream.FileStorage)),
		variant(b, "jetstream-3", startJetStream3),
	} {
		b.Run(v.name, func(b *testing.B) {
			b.Run("consumers=4", func(b *testing.B) { throughput(b, v.get(b), 4, 2) })
		})
		v.shutdown()
	}
}

// stallLimit fails a throughput round that acks nothing for this long.
const stallLimit = 30 * time.Second

// throughput is one round of BenchmarkBackendThroughput with consumers
// members (and partitions) and producers producers.
func throughput(b *testing.B, be tributary.Backend, consumers, producers int) {
	parts := int32(consumers)
	name := nextTopic("tp")
	bt := benchTopic(b, be, name, parts)
	members := make([]tributary.BackendMember, consumers)
	for i := range members {
		m, err := bt.Member("g", "m"+strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Join(); err != nil {
			b.Fatalf("Join m%d: %v", i, err)
		}
		members[i] = m
	}
	for i, m := range members { // round-robin: one partition each
		if a := m.Assignment(); len(a) != 1 {
			b.Fatalf("m%d owns %v, want one partition", i, a)
		}
	}

	n := b.N
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{}) // closed on failure: unblocks Publish
	var (
		failOnce sync.Once
		failErr  error
		acked    atomic.Int64
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		failOnce.Do(func() {
			failErr = err
			close(stop)
			cancel()
		})
	}

	b.ResetTimer()
	for i, m := range members {
		wg.Go(func() {
			next := make([]int64, parts) // next offset expected per partition
			dst := make([]engine.Record, 0, 4)
			for {
				rs, err := m.Poll(ctx, stop, dst[:0], 4)
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("m%d Poll: %w", i, err))
					}
					return
				}
				for _, r := range rs {
					p := r.Partition
					if p < 0 || p >= parts {
						fail(fmt.Errorf("m%d got partition %d of %d", i, p, parts))
						return
					}
					want := strconv.FormatInt(int64(parts)*next[p]+int64(p), 10)
					if r.Topic != name || r.Offset != next[p] || r.Payload != want || r.Attempt != 1 {
						fail(fmt.Errorf("m%d got %s %d/%d %q #%d; want %s %d/%d %q #1",
							i, r.Topic, p, r.Offset, r.Payload, r.Attempt, name, p, next[p], want))
						return
					}
					next[p]++
					if ok, err := m.Ack(p, r.Offset); err != nil || !ok {
						fail(fmt.Errorf("m%d Ack %d/%d = %v, %v", i, p, r.Offset, ok, err))
						return
					}
					if acked.Add(1) == int64(n) {
						cancel() // done: the other consumers' Polls return
					}
				}
			}
		})
	}
	for j := range producers {
		wg.Go(func() {
			for k := j; k < n; k += producers {
				p := int32(k % consumers)
				want := int64(k / consumers)
				off, err := bt.Publish(ctx, stop, p, engine.Message{Payload: strconv.Itoa(k)})
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("producer %d Publish #%d: %w", j, k, err))
					}
					return
				}
				if off != want {
					fail(fmt.Errorf("producer %d Publish #%d to %d = offset %d, want %d", j, k, p, off, want))
					return
				}
			}
		})
	}
	// Watchdog: a lost record would leave the consumers waiting forever.
	done := make(chan struct{})
	go func() {
		defer close(done)
		last, since := int64(-1), time.Now()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if a := acked.Load(); a != last {
					last, since = a, time.Now()
				} else if time.Since(since) > stallLimit {
					fail(fmt.Errorf("no ack for %v: %d of %d acked", stallLimit, a, n))
					return
				}
			}
		}
	}()
	wg.Wait()
	b.StopTimer()
	cancel()
	<-done
	if failErr != nil {
		b.Fatal(failErr)
	}
	if a := acked.Load(); a != int64(n) {
		b.Fatalf("acked %d records, want %d", a, n)
	}
	reportRate(b, n)
}
