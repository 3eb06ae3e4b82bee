package tributary_test

// Every exported call that takes a *Cluster, *Topic, Codec, Partitioner,
// Handler, Context or option refuses nil with ErrInvalidArgument and
// changes nothing — a Codec or Partitioner given as a typed nil in its
// interface included (a nil Codec itself means JSON, as documented).
// Out-of-range, empty and badly formed arguments, and names that are
// unknown or taken, are refused with an error, never a panic, and change
// nothing.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

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

func TestInputs(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 2, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	var nilTopic *tributary.Topic[string]
	var nilCtx context.Context
	bg := context.Background()

	invalid := []struct {
		name string
		f    func() error
	}{
		{"Send nil ctx", func() error { _, err := p.Send(nilCtx, in, tributary.Message[string]{}); return err }},
		{"Send nil topic", func() error { _, err := p.Send(bg, nilTopic, tributary.Message[string]{}); return err }},
		{"TrySend nil topic", func() error { _, err := p.TrySend(nilTopic, tributary.Message[string]{}); return err }},
		{"Send partition -1", func() error { _, err := p.TrySend(in, tributary.Message[string]{Partition: -1}); return err }},
		{"Send partition 2", func() error { _, err := p.TrySend(in, tributary.Message[string]{Partition: 2}); return err }},
		{"Send reserved header", func() error {
			_, err := p.TrySend(in, tributary.Message[string]{Headers: []tributary.Header{{Key: tributary.HeaderPayloadType, Value: "x"}}})
			return err
		}},
		{"Poll nil ctx", func() error { _, err := cons.Poll(nilCtx, 1); return err }},
		{"Poll max 0", func() error { _, err := cons.Poll(bg, 0); return err }},
		{"Poll max 65", func() error { _, err := cons.Poll(bg, 65); return err }},
		{"TryPoll max 0", func() error { _, err := cons.TryPoll(0); return err }},
		{"TryPoll max -1", func() error { _, err := cons.TryPoll(-1); return err }},
		{"Run nil handler", func() error { return cons.Run(bg, nil) }},
		{"Run nil ctx", func() error {
			return cons.Run(nilCtx, func(context.Context, tributary.Message[string]) error { return nil })
		}},
		{"NewConsumer nil topic", func() error { _, err := tributary.NewConsumer(nilTopic, "g", "x1"); return err }},
		{"NewConsumer empty group", func() error { _, err := tributary.NewConsumer(in, "", "x1"); return err }},
		{"NewConsumer empty name", func() error { _, err := tributary.NewConsumer(in, "g", ""); return err }},
		{"NewConsumer bad name", func() error { _, err := tributary.NewConsumer(in, "g", "a b"); return err }},
		{"NewConsumer long name", func() error { _, err := tributary.NewConsumer(in, "g", strings.Repeat("a", 65)); return err }},
		{"NewConsumer batch 65", func() error { _, err := tributary.NewConsumer(in, "g", "x1", tributary.WithBatch(65)); return err }},
		{"NewConsumer batch 0", func() error { _, err := tributary.NewConsumer(in, "g", "x1", tributary.WithBatch(0)); return err }},
		{"NewConsumer maxAttempts 0", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithDeadLetter("dlq", 0))
			return err
		}},
		{"NewConsumer maxAttempts 1001", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithDeadLetter("dlq", 1001))
			return err
		}},
		{"NewConsumer dlq bad name", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithDeadLetter("bad name", 3))
			return err
		}},
		{"NewConsumer dlq is itself", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithDeadLetter("in", 3))
			return err
		}},
		{"NewConsumer backoff 0", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithBackoff(0, time.Second))
			return err
		}},
		{"NewConsumer backoff max<initial", func() error {
			_, err := tributary.NewConsumer(in, "g", "x1", tributary.WithBackoff(time.Second, time.Millisecond))
			return err
		}},
		{"NewConsumer nil option", func() error { _, err := tributary.NewConsumer(in, "g", "x1", nil); return err }},
		{"NewConsumer duplicate name", func() error { _, err := tributary.NewConsumer(in, "other", "m1"); return err }},
		{"NewProducer nil partitioner", func() error { _, err := tributary.NewProducer[string](c, "p2", nil); return err }},
		{"NewProducer empty name", func() error { _, err := tributary.NewProducer[string](c, "", tributary.Manual()); return err }},
		{"NewProducer duplicate", func() error { _, err := tributary.NewProducer[string](c, "p", tributary.Manual()); return err }},
		{"CreateTopic empty", func() error { _, err := tributary.CreateTopic(c, "", 1, tributary.String()); return err }},
		{"CreateTopic bad name", func() error { _, err := tributary.CreateTopic(c, "a/b", 1, tributary.String()); return err }},
		{"CreateTopic 0 partitions", func() error { _, err := tributary.CreateTopic(c, "t0", 0, tributary.String()); return err }},
		{"CreateTopic 65 partitions", func() error { _, err := tributary.CreateTopic(c, "t65", 65, tributary.String()); return err }},
		{"OpenTopic unknown", func() error { _, err := tributary.OpenTopic(c, "nope", tributary.String()); return err }},
		{"OpenTopic empty", func() error { _, err := tributary.OpenTopic(c, "", tributary.String()); return err }},
		{"AddPartitions 0", func() error { _, err := c.AddPartitions("in", 0); return err }},
		{"AddPartitions 63", func() error { _, err := c.AddPartitions("in", 63); return err }},
		{"Seek negative", func() error { _, err := c.Seek("in", "g", 0, -1); return err }},
		{"Seek past end", func() error { _, err := c.Seek("in", "g", 0, 99); return err }},
		{"Consumer.Seek partition 9", func() error { return cons.Seek(9, 0) }},
		{"SetAssignor nil", func() error { _, err := c.SetAssignor("in", "g", nil); return err }},
		{"CreateGroup nil assignor", func() error { _, err := c.CreateGroup("in", "g2", nil); return err }},
		{"Ack zero message", func() error { return cons.Ack(tributary.Message[string]{}) }},
		{"Ack partition -1", func() error { return cons.Ack(tributary.Message[string]{Partition: -1}) }},
		{"Retry offset -1", func() error { return cons.Retry(tributary.Message[string]{Offset: -1}) }},
		{"CloseConsumer unknown", func() error { return c.CloseConsumer("nobody") }},
		{"LookupProducer unknown", func() error { _, err := tributary.LookupProducer[string](c, "nobody"); return err }},
		{"NewClusterOn nil", func() error { _, err := tributary.NewClusterOn(nil); return err }},
		{"NewCluster capacity 0", func() error { _, err := tributary.NewCluster(0); return err }},
		{"NewCluster capacity 16777217", func() error { _, err := tributary.NewCluster(tributary.MaxCapacity + 1); return err }},
	}
	before, err := c.Describe("in")
	require.NoError(t, err)
	topics := c.Topics()
	for _, tc := range invalid {
		err := noPanic(t, tc.name, tc.f)
		assert.Error(t, err, tc.name)
	}
	after, err := c.Describe("in")
	require.NoError(t, err)
	// An Ack of a zero message names a valid partition and offset: the
	// engine refuses it (not in flight) as a valid call, which refreshes
	// the member's session (SPEC rule 24). Last-seen instants aside,
	// nothing changed.
	for _, d := range []*engine.TopicDescription{&before, &after} {
		for i := range d.Groups {
			d.Groups[i].LastSeen = nil
		}
	}
	assert.Equal(t, before, after, "invalid calls changed the topic")
	assert.Equal(t, topics, c.Topics(), "invalid calls created topics")
	assert.Equal(t, []string{"m1"}, c.Consumers())
	assert.Equal(t, []string{"p"}, c.Producers())
	require.NoError(t, c.Close())
}
