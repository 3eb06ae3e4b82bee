package jetstream_test

// The benchmarks below compare this package's Backend with the in-process
// engine's (tributary.NewCluster(capacity).Backend()) in the same run:
//
//	memory                 the in-process engine
//	jetstream-1            one embedded server (StartServer), in-process
//	                       connection (Config.Server); RoundTrip has one
//	                       sub-benchmark per Storage, Throughput uses
//	                       FileStorage (the default), Throughput16
//	                       MemoryStorage
//	jetstream-3            StartCluster(3), Replicas 3, FileStorage
//	                       (Throughput16: MemoryStorage), a connection
//	                       over the loopback URLs of all nodes
//
// A variant's server and Backend are started once, outside the timer, on
// the first round (b.N) of its benchmark and shut down after its last; each
// round uses a fresh topic. A JetStream variant opens a second Backend on
// the same servers, its producers' (benchBackend.producers): Throughput16
// publishes through it, so that the first one's connection carries only
// the consumers' requests, which it counts. Every benchmark is skipped
// under -short, and make test runs none (it passes no -bench).

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

// benchCapacity is each partition's capacity in the benchmarks.
const benchCapacity = 1000

// benchBackend is one variant's backend, started on first use.
type benchBackend struct {
	name string
	// start starts the variant: be, the producers' backend pub (nil: be
	// itself), and what stops both.
	start func(dir string) (be, pub tributary.Backend, stop func(), err error)
	dir   string // the store directory, under the top-level benchmark's

	started bool
	be, pub tributary.Backend
	stop    func()
	err     error
}

// get returns the backend, starting it on the first call; b.Fatal if it
// could not start.
func (v *benchBackend) get(b *testing.B) tributary.Backend {
	b.Helper()
	if !v.started {
		v.started = true
		v.be, v.pub, v.stop, v.err = v.start(v.dir)
	}
	if v.err != nil {
		b.Fatalf("starting %s: %v", v.name, v.err)
	}
	return v.be
}

// producers returns the producers' backend: a second Backend on the same
// servers for a JetStream variant, the same one for the memory variant.
func (v *benchBackend) producers(b *testing.B) tributary.Backend {
	b.Helper()
	be := v.get(b)
	if v.pub != nil {
		return v.pub
	}
	return be
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
func variant(b *testing.B, name string, start func(dir string) (tributary.Backend, tributary.Backend, func(), error)) *benchBackend {
	v := &benchBackend{name: name, start: start, dir: filepath.Join(b.TempDir(), "store")}
	b.Cleanup(v.shutdown)
	return v
}

func startMemory(string) (tributary.Backend, tributary.Backend, func(), error) {
	c, err := tributary.NewCluster(benchCapacity)
	if err != nil {
		return nil, nil, nil, err
	}
	return c.Backend(), nil, func() { c.Close() }, nil
}

// openPair opens two Backends with cfg, the second the producers'; stop
// closes both, then calls shutdown (the servers').
func openPair(cfg jetstream.Config, shutdown func()) (tributary.Backend, tributary.Backend, func(), error) {
	be, err := jetstream.Open(cfg)
	if err != nil {
		shutdown()
		return nil, nil, nil, err
	}
	pub, err := jetstream.Open(cfg)
	if err != nil {
		be.Close()
		shutdown()
		return nil, nil, nil, err
	}
	return be, pub, func() { pub.Close(); be.Close(); shutdown() }, nil
}

func startJetStream1(storage jetstream.Storage) func(dir string) (tributary.Backend, tributary.Backend, func(), error) {
	return func(dir string) (tributary.Backend, tributary.Backend, func(), error) {
		srv, err := jetstream.StartServer(dir)
		if err != nil {
			return nil, nil, nil, err
		}
		return openPair(jetstream.Config{Server: srv, Capacity: benchCapacity, Storage: storage}, srv.Shutdown)
	}
}

func startJetStream3(storage jetstream.Storage) func(dir string) (tributary.Backend, tributary.Backend, func(), error) {
	return func(dir string) (tributary.Backend, tributary.Backend, func(), error) {
		cl, err := jetstream.StartCluster(3, dir)
		if err != nil {
			return nil, nil, nil, err
		}
		return openPair(jetstream.Config{
			URL:            strings.Join(cl.URLs(), ","),
			Capacity:       benchCapacity,
			Replicas:       3,
			Storage:        storage,
			RequestTimeout: 10 * time.Second,
		}, cl.Shutdown)
	}
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
	runVariant(b, variant(b, "jetstream-3", startJetStream3(jetstream.FileStorage)), roundTrip)
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
// acking; 2 producers publish b.N records with the waiting Publish, through
// the same Backend. The round ends when b.N records are acked. Record k
// goes to partition k%4 from producer k%2, so partition p holds k = p, p+4,
// p+8, … in order: its offset o must carry payload 4o+p, and each partition
// must be delivered in offset order, each record once (no rebalance or ack
// timeout happens).
func BenchmarkBackendThroughput(b *testing.B) {
	if testing.Short() {
		b.Skip("starts NATS servers")
	}
	for _, v := range []*benchBackend{
		variant(b, "memory", startMemory),
		variant(b, "jetstream-1", startJetStream1(jetstream.FileStorage)),
		variant(b, "jetstream-3", startJetStream3(jetstream.FileStorage)),
	} {
		b.Run(v.name, func(b *testing.B) {
			b.Run("consumers=4", func(b *testing.B) {
				be := v.get(b)
				throughput(b, be, be, 4, 4, 2)
			})
		})
		v.shutdown()
	}
}

// BenchmarkBackendThroughput16 is BenchmarkBackendThroughput on a topic of
// 16 partitions, memory storage, with 1 consumer (one member owning all 16
// partitions, its blocking Poll max 16) and with 16 (one partition each),
// 2 producers publishing through the variant's second Backend; the same
// checks. Its baseline on raw nats.go is BenchmarkRawThroughput16; run both
// in one command to compare them in the same run (a benchtime in seconds,
// not a count: on one server raw nats.go acks about 20 times as many
// records a second; about 3 minutes on 2 cores):
// go test -run '^$' -bench 'Throughput16' -benchtime 3s -count 3 -timeout 30m ./jetstream/
//
// Besides records/s it reports req/record, the messages the consumers'
// connection sent (nats.Conn.Stats' OutMsgs: polls and acks, no publish)
// per record acked, and with 1 consumer how its Polls went (it is alone on
// that connection, and acks before polling again): req/Poll, the requests
// of one Poll call, and records/Poll. A Poll that finds nothing waits and
// polls again, so its requests include its empty polls (an empty poll of
// 16 partitions is 33 requests: TestRequestsPerCall).
func BenchmarkBackendThroughput16(b *testing.B) {
	if testing.Short() {
		b.Skip("starts NATS servers")
	}
	for _, v := range []*benchBackend{
		variant(b, "jetstream-1", startJetStream1(jetstream.MemoryStorage)),
		variant(b, "jetstream-3", startJetStream3(jetstream.MemoryStorage)),
	} {
		b.Run(v.name, func(b *testing.B) {
			for _, c := range []int{1, 16} {
				b.Run("consumers="+strconv.Itoa(c), func(b *testing.B) {
					throughput(b, v.get(b), v.producers(b), 16, c, 2)
				})
			}
		})
		v.shutdown()
	}
}

// stallLimit fails a throughput round that acks nothing for this long.
const stallLimit = 30 * time.Second

// tpRound is the shared state of one throughput round (the backend's or
// raw nats.go's) of n records: its context, ended when n records are
// acked or on the first failure, and the count of records acked.
type tpRound struct {
	n      int64
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{} // closed on failure: unblocks Publish

	failOnce sync.Once
	failErr  error
	acked    atomic.Int64
	watched  chan struct{} // closed when the watchdog has returned
}

func newTPRound(n int) *tpRound {
	ctx, cancel := context.WithCancel(context.Background())
	return &tpRound{n: int64(n), ctx: ctx, cancel: cancel, stop: make(chan struct{}), watched: make(chan struct{})}
}

// fail ends the round with err, the first failure kept.
func (r *tpRound) fail(err error) {
	r.failOnce.Do(func() {
		r.failErr = err
		close(r.stop)
		r.cancel()
	})
}

// ack counts one record acked; the n-th ends the round.
func (r *tpRound) ack() {
	if r.acked.Add(1) == r.n {
		r.cancel() // done: the other consumers' polls return
	}
}

// watch starts the watchdog, which fails the round when no record is
// acked for stallLimit (a lost record would leave the consumers waiting
// forever), and returns when the round ends.
func (r *tpRound) watch() {
	go func() {
		defer close(r.watched)
		last, since := int64(-1), time.Now()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-r.ctx.Done():
				return
			case <-t.C:
				if a := r.acked.Load(); a != last {
					last, since = a, time.Now()
				} else if time.Since(since) > stallLimit {
					r.fail(fmt.Errorf("no ack for %v: %d of %d acked", stallLimit, a, r.n))
					return
				}
			}
		}
	}()
}

// published checks producer j's publish of record k to partition p: err
// nil and the offset (or sequence) got equal to want, else it fails the
// round (an error after the round ended is not a failure) and returns
// false. what names the figure, "offset" or "seq".
func (r *tpRound) published(j, k, p int, err error, got, want int64, what string) bool {
	if err != nil {
		if r.ctx.Err() == nil {
			r.fail(fmt.Errorf("producer %d Publish #%d: %w", j, k, err))
		}
		return false
	}
	if got != want {
		r.fail(fmt.Errorf("producer %d Publish #%d to %d = %s %d, want %d", j, k, p, what, got, want))
		return false
	}
	return true
}

// end runs the watchdog until the round's goroutines (wg) have returned,
// stops b's timer, checks the round (finish) and reports its rate.
func (r *tpRound) end(b *testing.B, wg *sync.WaitGroup) {
	b.Helper()
	r.watch()
	wg.Wait()
	b.StopTimer()
	r.finish(b)
	reportRate(b, int(r.n))
}

// finish ends the round (its goroutines have returned), waits for the
// watchdog and fails b on a failure or a count of acks other than n.
func (r *tpRound) finish(b *testing.B) {
	b.Helper()
	r.cancel()
	<-r.watched
	if r.failErr != nil {
		b.Fatal(r.failErr)
	}
	if a := r.acked.Load(); a != r.n {
		b.Fatalf("acked %d records, want %d", a, r.n)
	}
}

// throughput is one round of BenchmarkBackendThroughput(16): a topic of
// parts partitions, consumers members (each owning parts/consumers
// partitions) polling with the blocking Poll, max parts, on be, and
// producers producers publishing on pub (be itself or a second Backend on
// the same servers) b.N records, record k to partition k%parts from
// producer k%producers. consumers and producers divide parts, so each
// partition has one producer: its offset o holds payload parts·o+p.
func throughput(b *testing.B, be, pub tributary.Backend, parts, consumers, producers int) {
	if parts%consumers != 0 || parts%producers != 0 {
		b.Fatalf("%d consumers or %d producers do not divide %d partitions", consumers, producers, parts)
	}
	name := nextTopic("tp")
	bt := benchTopic(b, be, name, int32(parts))
	pt := bt
	if pub != be {
		var err error
		if pt, _, err = pub.OpenTopic(name); err != nil {
			b.Fatal(err)
		}
	}
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
	for i, m := range members { // round-robin: parts/consumers partitions each
		if a := m.Assignment(); len(a) != parts/consumers {
			b.Fatalf("m%d owns %v, want %d partitions", i, a, parts/consumers)
		}
	}
	// With a second Backend for the producers, be's connection carries
	// the consumers' requests alone: count them.
	jb, _ := be.(*jetstream.Backend)
	count := jb != nil && pub != be
	// With 1 consumer: its Poll calls, their requests and their records.
	var polls, pollReq, polled int64
	var before uint64
	if count {
		before = jetstream.Requests(jb)
	}

	n := b.N
	r := newTPRound(n)
	defer r.cancel()
	var wg sync.WaitGroup
	b.ResetTimer()
	for i, m := range members {
		wg.Go(func() {
			next := make([]int64, parts) // next offset expected per partition
			dst := make([]engine.Record, 0, parts)
			for {
				var req uint64
				if count && consumers == 1 {
					req = jetstream.Requests(jb)
				}
				rs, err := m.Poll(r.ctx, r.stop, dst[:0], int32(parts))
				if count && consumers == 1 { // alone on be's connection
					polls++
					pollReq += int64(jetstream.Requests(jb) - req)
					polled += int64(len(rs))
				}
				if err != nil {
					if r.ctx.Err() == nil {
						r.fail(fmt.Errorf("m%d Poll: %w", i, err))
					}
					return
				}
				for _, rec := range rs {
					p := rec.Partition
					if p < 0 || int(p) >= parts {
						r.fail(fmt.Errorf("m%d got partition %d of %d", i, p, parts))
						return
					}
					want := strconv.FormatInt(int64(parts)*next[p]+int64(p), 10)
					if rec.Topic != name || rec.Offset != next[p] || rec.Payload != want || rec.Attempt != 1 {
						r.fail(fmt.Errorf("m%d got %s %d/%d %q #%d; want %s %d/%d %q #1",
							i, rec.Topic, p, rec.Offset, rec.Payload, rec.Attempt, name, p, next[p], want))
						return
					}
					next[p]++
					if ok, err := m.Ack(p, rec.Offset); err != nil || !ok {
						r.fail(fmt.Errorf("m%d Ack %d/%d = %v, %v", i, p, rec.Offset, ok, err))
						return
					}
					r.ack()
				}
			}
		})
	}
	for j := range producers {
		wg.Go(func() {
			for k := j; k < n; k += producers {
				p := int32(k % parts)
				want := int64(k / parts)
				off, err := pt.Publish(r.ctx, r.stop, p, engine.Message{Payload: strconv.Itoa(k)})
				if !r.published(j, k, int(p), err, off, want, "offset") {
					return
				}
			}
		})
	}
	r.end(b, &wg)
	if count {
		b.ReportMetric(float64(jetstream.Requests(jb)-before)/float64(n), "req/record")
	}
	if count && consumers == 1 && polls > 0 {
		b.ReportMetric(float64(pollReq)/float64(polls), "req/Poll")
		b.ReportMetric(float64(polled)/float64(polls), "records/Poll")
	}
}
