package jetstream_test

// The baseline of the benchmarks: a round trip (publish, fetch, AckSync) on
// plain JetStream streams, its throughput, and its requests per round trip.

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

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/f91dcac0/tributary/jetstream"
)

// rawPartition is the baseline of the same semantics on raw nats.go: one
// stream for one partition and a durable pull consumer for one group,
// AckExplicit with MaxAckPending 1 (one delivery in flight, as rule 10),
// fetched one at a time and acked with AckSync (DoubleAck), as the
// backend's Ack waits for its commit.
type rawPartition struct {
	nc   *nats.Conn
	js   njs.JetStream
	subj string
	cons njs.Consumer
}

// newRawPartition makes stream name (storage st) and its consumer "g" on
// srv, over an in-process connection as the backend's.
func newRawPartition(tb testing.TB, srv *jetstream.Server, name string, st njs.StorageType) *rawPartition {
	tb.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := njs.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subj := "raw." + name
	s, err := js.CreateStream(ctx, njs.StreamConfig{Name: "RAW_" + name, Subjects: []string{subj}, Storage: st, MaxMsgs: 1000})
	if err != nil {
		tb.Fatal(err)
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, njs.ConsumerConfig{Durable: "g", AckPolicy: njs.AckExplicitPolicy, MaxAckPending: 1, AckWait: time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	return &rawPartition{nc: nc, js: js, subj: subj, cons: cons}
}

// roundTrip publishes payload, fetches it and acks it (AckSync): the
// baseline of TryPublish, TryPoll(1) and Ack.
func (r *rawPartition) roundTrip(payload string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.js.Publish(ctx, r.subj, []byte(payload)); err != nil {
		return fmt.Errorf("Publish: %w", err)
	}
	batch, err := r.cons.Fetch(1, njs.FetchMaxWait(5*time.Second))
	if err != nil {
		return fmt.Errorf("Fetch: %w", err)
	}
	got := 0
	for m := range batch.Messages() {
		got++
		if string(m.Data()) != payload {
			return fmt.Errorf("fetched %q, want %q", m.Data(), payload)
		}
		if err := m.DoubleAck(ctx); err != nil {
			return fmt.Errorf("AckSync: %w", err)
		}
	}
	if got != 1 || batch.Error() != nil {
		return fmt.Errorf("Fetch(1): %d messages, %v", got, batch.Error())
	}
	return nil
}

// BenchmarkRawRoundTrip is BenchmarkBackendRoundTrip's baseline on raw
// nats.go (rawPartition), on one embedded server with each storage; run
// both in one command to compare them in the same run:
// go test -run '^$' -bench 'BackendRoundTrip/jetstream-1|RawRoundTrip' ./jetstream/
func BenchmarkRawRoundTrip(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a NATS server")
	}
	srv, err := jetstream.StartServer(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	for _, st := range []struct {
		name string
		t    njs.StorageType
	}{{"storage=memory", njs.MemoryStorage}, {"storage=file", njs.FileStorage}} {
		b.Run(st.name, func(b *testing.B) {
			r := newRawPartition(b, srv, nextTopic("raw"), st.t)
			b.ResetTimer()
			for i := range b.N {
				if err := r.roundTrip(fmt.Sprint("r", i)); err != nil {
					b.Fatalf("round trip #%d: %v", i, err)
				}
			}
			b.StopTimer()
			reportRate(b, b.N)
		})
	}
}

// TestRawRequestsPerRoundTrip counts the baseline's messages per round
// trip (nats.Conn.Stats): a publish, a fetch request and an AckSync, 3,
// against TestRequestsPerCall's 17 for the backend.
func TestRawRequestsPerRoundTrip(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	r := newRawPartition(t, srv, "count", njs.MemoryStorage)
	var n uint64
	for i := range 3 {
		before := r.nc.Stats().OutMsgs
		if err := r.roundTrip(fmt.Sprint("r", i)); err != nil {
			t.Fatal(err)
		}
		n = r.nc.Stats().OutMsgs - before
	}
	t.Logf("raw nats.go round trip: %d messages sent", n)
	if n != 3 {
		t.Errorf("raw round trip sent %d messages, want 3 (publish, fetch, AckSync)", n)
	}
}

// rawServers is one raw baseline's servers, started on first use (outside
// the timer) and shut down after the variant's last round: one embedded
// server reached in-process, or a 3-node cluster reached over its
// loopback URLs; two connections, the consumers' and the producers'.
type rawServers struct {
	name     string
	replicas int
	start    func(dir string) (dial func() (*nats.Conn, error), stop func(), err error)
	dir      string

	started  bool
	sub, pub *nats.Conn
	stop     func()
	err      error
}

// get starts the servers and the connections on the first call; b.Fatal
// if they could not start.
func (v *rawServers) get(b *testing.B) {
	b.Helper()
	if !v.started {
		v.started = true
		var dial func() (*nats.Conn, error)
		dial, v.stop, v.err = v.start(v.dir)
		if v.err == nil {
			v.sub, v.err = dial()
		}
		if v.err == nil {
			v.pub, v.err = dial()
		}
	}
	if v.err != nil {
		b.Fatalf("starting %s: %v", v.name, v.err)
	}
}

// shutdown closes the connections and stops the servers, if started.
func (v *rawServers) shutdown() {
	for _, nc := range []*nats.Conn{v.pub, v.sub} {
		if nc != nil {
			nc.Close()
		}
	}
	v.pub, v.sub = nil, nil
	if v.stop != nil {
		v.stop()
		v.stop = nil
	}
}

// rawConnOpts are the raw connections' options: as the backend's, no
// callback after Close and no printing of asynchronous errors.
var rawConnOpts = []nats.Option{
	nats.Timeout(5 * time.Second),
	nats.NoCallbacksAfterClientClose(),
	nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
}

func startRaw1(dir string) (func() (*nats.Conn, error), func(), error) {
	srv, err := jetstream.StartServer(dir)
	if err != nil {
		return nil, nil, err
	}
	dial := func() (*nats.Conn, error) {
		return nats.Connect("", append([]nats.Option{nats.InProcessServer(srv)}, rawConnOpts...)...)
	}
	return dial, srv.Shutdown, nil
}

func startRaw3(dir string) (func() (*nats.Conn, error), func(), error) {
	cl, err := jetstream.StartCluster(3, dir)
	if err != nil {
		return nil, nil, err
	}
	dial := func() (*nats.Conn, error) {
		return nats.Connect(strings.Join(cl.URLs(), ","), rawConnOpts...)
	}
	return dial, cl.Shutdown, nil
}

// rawIdleWait is how long the round-robin consumer of rawThroughput waits
// on one stream after a pass over its streams found nothing.
const rawIdleWait = 5 * time.Millisecond

// BenchmarkRawThroughput16 is BenchmarkBackendThroughput16's baseline on
// raw nats.go, with rawPartition's semantics: 16 streams (one per
// partition, memory storage, no limit: at most b.N records each), each
// with one durable pull consumer "g", AckExplicit, MaxAckPending 1, AckWait
// a minute; every record fetched alone (Fetch(1)), checked (payload, stream
// sequence in order, delivered once) and acked with DoubleAck (AckSync).
// 2 producers publish b.N records (js.Publish, waiting for the PubAck),
// record k to stream k%16 from producer k%2, on the producers'
// connection. consumers=16: one goroutine per stream, each blocking in
// Fetch(1) until a record or the round's end. consumers=1: one goroutine
// serves the 16 consumers in turn, one request at a time, as the backend's
// member owning 16 partitions polls them: a FetchNoWait(1) of each (the
// server answers at once, with the record or with none), and after a pass
// that found nothing a Fetch(1) waiting at most rawIdleWait (5 ms) on the
// next stream of the turn, so an idle consumer does not spin on the CPUs
// the producers need; it reports the passes that found nothing
// (empty-passes, per round). Both report req/record, the messages the
// consumers' connection sent per record (fetch requests and acks).
// Variants: jetstream-1, one embedded server reached in-process;
// jetstream-3, StartCluster(3) reached over its loopback URLs, Replicas 3.
// Run it beside the backend's:
// go test -run '^$' -bench 'Throughput16' -benchtime 3s -count 3 -timeout 30m ./jetstream/
func BenchmarkRawThroughput16(b *testing.B) {
	if testing.Short() {
		b.Skip("starts NATS servers")
	}
	for _, v := range []*rawServers{
		{name: "jetstream-1", replicas: 1, start: startRaw1, dir: filepath.Join(b.TempDir(), "store")},
		{name: "jetstream-3", replicas: 3, start: startRaw3, dir: filepath.Join(b.TempDir(), "store")},
	} {
		b.Cleanup(v.shutdown)
		b.Run(v.name, func(b *testing.B) {
			for _, c := range []int{1, 16} {
				b.Run("consumers="+strconv.Itoa(c), func(b *testing.B) {
					v.get(b)
					rawThroughput(b, v, 16, c, 2)
				})
			}
		})
		v.shutdown()
	}
}

// rawThroughput is one round of BenchmarkRawThroughput16: parts streams,
// consumers goroutines (each serving parts/consumers of them), producers
// producers, b.N records; the streams are deleted after the round.
func rawThroughput(b *testing.B, v *rawServers, parts, consumers, producers int) {
	if parts%consumers != 0 || parts%producers != 0 {
		b.Fatalf("%d consumers or %d producers do not divide %d partitions", consumers, producers, parts)
	}
	sjs, err := njs.New(v.sub)
	if err != nil {
		b.Fatal(err)
	}
	pjs, err := njs.New(v.pub)
	if err != nil {
		b.Fatal(err)
	}
	name := nextTopic("RAWTP")
	subjs := make([]string, parts)
	cons := make([]njs.Consumer, parts)
	setup, cancelSetup := context.WithTimeout(context.Background(), time.Minute)
	defer cancelSetup()
	for p := range parts {
		stream := fmt.Sprintf("%s_%d", name, p)
		subjs[p] = fmt.Sprintf("rawtp.%s.%d", name, p)
		s, err := sjs.CreateStream(setup, njs.StreamConfig{Name: stream, Subjects: []string{subjs[p]}, Storage: njs.MemoryStorage, Replicas: v.replicas})
		if err != nil {
			b.Fatalf("stream %s: %v", stream, err)
		}
		defer func() { // after the round, outside the timer
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := sjs.DeleteStream(ctx, stream); err != nil {
				b.Errorf("deleting stream %s: %v", stream, err)
			}
		}()
		if cons[p], err = s.CreateOrUpdateConsumer(setup, njs.ConsumerConfig{Durable: "g", AckPolicy: njs.AckExplicitPolicy, MaxAckPending: 1, AckWait: time.Minute}); err != nil {
			b.Fatalf("consumer of %s: %v", stream, err)
		}
	}

	n := b.N
	r := newTPRound(n)
	defer r.cancel()
	next := make([]int64, parts) // next offset expected per stream, each one goroutine's
	// take checks m, fetched from stream p, and acks it.
	take := func(p int, m njs.Msg) error {
		want := strconv.FormatInt(int64(parts)*next[p]+int64(p), 10)
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("stream %d: metadata: %w", p, err)
		}
		if string(m.Data()) != want || md.Sequence.Stream != uint64(next[p])+1 || md.NumDelivered != 1 {
			return fmt.Errorf("stream %d: got %q seq %d #%d, want %q seq %d #1", p, m.Data(), md.Sequence.Stream, md.NumDelivered, want, next[p]+1)
		}
		next[p]++
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		defer cancel()
		if err := m.DoubleAck(ctx); err != nil {
			return fmt.Errorf("stream %d: AckSync of seq %d: %w", p, md.Sequence.Stream, err)
		}
		r.ack()
		return nil
	}
	// drain takes batch's messages, from stream p; true if it had one.
	drain := func(p int, batch njs.MessageBatch) (bool, error) {
		got := false
		for m := range batch.Messages() {
			got = true
			if err := take(p, m); err != nil {
				return got, err
			}
		}
		if err := batch.Error(); err != nil && r.ctx.Err() == nil {
			return got, fmt.Errorf("stream %d: Fetch: %w", p, err)
		}
		return got, nil
	}
	var emptyPasses atomic.Int64
	before := v.sub.Stats().OutMsgs
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range consumers {
		wg.Go(func() {
			var mine []int // the streams this goroutine serves
			for p := i; p < parts; p += consumers {
				mine = append(mine, p)
			}
			for turn := 0; r.ctx.Err() == nil; {
				var err error
				if len(mine) == 1 {
					var batch njs.MessageBatch
					if batch, err = cons[mine[0]].Fetch(1, njs.FetchContext(r.ctx)); err == nil {
						_, err = drain(mine[0], batch)
					}
				} else {
					found := false
					for _, p := range mine {
						var batch njs.MessageBatch
						var got bool
						if batch, err = cons[p].FetchNoWait(1); err == nil {
							got, err = drain(p, batch)
						}
						if found = found || got; err != nil || r.ctx.Err() != nil {
							break
						}
					}
					if err == nil && !found && r.ctx.Err() == nil {
						emptyPasses.Add(1)
						p := mine[turn%len(mine)]
						turn++
						var batch njs.MessageBatch
						if batch, err = cons[p].Fetch(1, njs.FetchMaxWait(rawIdleWait)); err == nil {
							_, err = drain(p, batch)
						}
					}
				}
				if err != nil {
					if r.ctx.Err() == nil {
						r.fail(fmt.Errorf("consumer %d: %w", i, err))
					}
					return
				}
			}
		})
	}
	for j := range producers {
		wg.Go(func() {
			for k := j; k < n; k += producers {
				p := k % parts
				ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
				ack, err := pjs.Publish(ctx, subjs[p], []byte(strconv.Itoa(k)))
				cancel()
				var seq int64
				if err == nil {
					seq = int64(ack.Sequence)
				}
				if !r.published(j, k, p, err, seq, int64(k/parts)+1, "seq") {
					return
				}
			}
		})
	}
	r.end(b, &wg)
	b.ReportMetric(float64(v.sub.Stats().OutMsgs-before)/float64(n), "req/record")
	if consumers < parts {
		b.ReportMetric(float64(emptyPasses.Load()), "empty-passes")
	}
}
