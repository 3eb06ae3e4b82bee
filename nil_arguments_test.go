package tributary_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/f91dcac0/tributary"
)

// Every exported call that takes a *Cluster, *Topic, Codec, Partitioner,
// Handler, Context or option refuses nil with ErrInvalidArgument and
// changes nothing — a Codec or Partitioner given as a typed nil in its
// interface included (a nil Codec itself means JSON, as documented).

// ptrCodec is a Codec implemented on a pointer; a nil *ptrCodec is a
// typed nil.
type ptrCodec struct{ name string }

func (c *ptrCodec) Name() string                  { return c.name }
func (*ptrCodec) Encode(v string) (string, error) { return v, nil }
func (*ptrCodec) Decode(p string) (string, error) { return p, nil }

// mapCodec is a Codec implemented on a map type; its nil map is a typed nil.
type mapCodec map[string]string

func (c mapCodec) Name() string                  { return c["name"] }
func (mapCodec) Encode(v string) (string, error) { return v, nil }
func (mapCodec) Decode(p string) (string, error) { return p, nil }

// funcPartitioner is a Partitioner implemented on a func type; a nil one
// panics when called.
type funcPartitioner func(key string, partitions int32) int32

func (funcPartitioner) Name() string { return "Func" }
func (f funcPartitioner) Partition(key string, _, partitions int32) (int32, error) {
	return f(key, partitions), nil
}

// ptrPartitioner is a Partitioner on a pointer whose methods read it.
type ptrPartitioner struct{ to int32 }

func (*ptrPartitioner) Name() string { return "Ptr" }
func (p *ptrPartitioner) Partition(string, int32, int32) (int32, error) {
	return p.to, nil
}

func TestNilArgumentsAreRefused(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "c1")
	sendOK(t, pr, tp, tributary.Message[string]{Value: "v"})
	var (
		nilCluster *tributary.Cluster
		nilCtx     context.Context
		nilPtrC    *ptrCodec
		nilMapC    mapCodec
		nilFuncP   funcPartitioner
		nilPtrP    *ptrPartitioner
		zeroTopic  tributary.Topic[string]
		zeroClust  tributary.Cluster
		m          = tributary.Message[string]{Value: "x"}
	)
	calls := []struct {
		name string
		f    func() error
	}{
		{"CreateTopic nil Cluster", func() error { _, err := tributary.CreateTopic[string](nilCluster, "x", 1, nil); return err }},
		{"CreateTopic zero Cluster", func() error { _, err := tributary.CreateTopic[string](&zeroClust, "x", 1, nil); return err }},
		{"CreateTopic typed-nil pointer codec", func() error { _, err := tributary.CreateTopic[string](c, "x", 1, nilPtrC); return err }},
		{"CreateTopic typed-nil map codec", func() error { _, err := tributary.CreateTopic[string](c, "x", 1, nilMapC); return err }},
		{"OpenTopic nil Cluster", func() error { _, err := tributary.OpenTopic[string](nilCluster, "t", nil); return err }},
		{"OpenTopic typed-nil codec", func() error { _, err := tributary.OpenTopic[string](c, "t", nilPtrC); return err }},
		{"OpenOrCreateTopic nil Cluster", func() error {
			_, err := tributary.OpenOrCreateTopic[string](nilCluster, "x", 1, nil)
			return err
		}},
		{"OpenOrCreateTopic typed-nil codec", func() error { _, err := tributary.OpenOrCreateTopic[string](c, "x", 1, nilPtrC); return err }},
		{"NewProducer nil Cluster", func() error { _, err := tributary.NewProducer[string](nilCluster, "x", tributary.Manual()); return err }},
		{"NewProducer typed-nil func partitioner", func() error { _, err := tributary.NewProducer[string](c, "x", nilFuncP); return err }},
		{"NewProducer typed-nil pointer partitioner", func() error { _, err := tributary.NewProducer[string](c, "x", nilPtrP); return err }},
		{"LookupProducer nil Cluster", func() error { _, err := tributary.LookupProducer[string](nilCluster, "p"); return err }},
		{"LookupConsumer nil Cluster", func() error { _, err := tributary.LookupConsumer[string](nilCluster, "c1"); return err }},
		{"Send zero Topic", func() error { _, err := pr.Send(guardCtx(t), &zeroTopic, m); return err }},
		{"TrySend zero Topic", func() error { _, err := pr.TrySend(&zeroTopic, m); return err }},
		{"NewConsumer zero Topic", func() error { _, err := tributary.NewConsumer(&zeroTopic, "g", "x"); return err }},
		{"Nack nil Context", func() error {
			ms, err := cons.TryPoll(1)
			if err != nil || len(ms) != 1 {
				t.Fatalf("TryPoll: %v, %v", ms, err)
			}
			defer cons.Retry(ms[0]) //nolint:errcheck // the message goes back
			_, err = cons.Nack(nilCtx, ms[0], context.Canceled)
			return err
		}},
		{"Nack nil cause", func() error { _, err := cons.Nack(guardCtx(t), m, nil); return err }},
	}
	topics, producers, consumers := c.Topics(), c.Producers(), c.Consumers()
	before := describeTopic(t, c, "t")
	for _, tc := range calls {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", tc.name, p)
				}
			}()
			err = tc.f()
		}()
		checkErrNoFatal(t, tc.name, err, tributary.ErrInvalidArgument)
	}
	if got := c.Topics(); !slices.Equal(got, topics) {
		t.Errorf("topics %v after refused calls, want %v", got, topics)
	}
	if got := c.Producers(); !slices.Equal(got, producers) {
		t.Errorf("producers %v after refused calls, want %v", got, producers)
	}
	if got := c.Consumers(); !slices.Equal(got, consumers) {
		t.Errorf("consumers %v after refused calls, want %v", got, consumers)
	}
	after := describeTopic(t, c, "t")
	if after.Partitions[0] != before.Partitions[0] {
		t.Errorf("partition %+v after refused calls, want %+v", after.Partitions[0], before.Partitions[0])
	}
	// A nil Codec itself is JSON, as documented.
	j, err := tributary.CreateTopic[string](c, "j", 1, nil)
	if err != nil || j.PayloadType() != "JSON:string" {
		t.Fatalf("CreateTopic with a nil codec: %v, %v; want a JSON:string topic", j, err)
	}
}

// checkErrNoFatal is checkErr reporting with Errorf, so a table goes on.
func checkErrNoFatal(t testing.TB, what string, err, werr error) {
	t.Helper()
	if !errors.Is(err, werr) {
		t.Errorf("%s: error %v, want %v", what, err, werr)
	}
}
