package jetstream_test

import (
	"context"
	"fmt"
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
