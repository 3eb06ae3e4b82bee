package tribotel_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/f91dcac0/tributary"
	tribotel "github.com/f91dcac0/tributary/otel"
)

// harness is one cluster instrumented on SDK providers that record
// in memory: a manual metric reader and a span recorder.
type harness struct {
	t      *testing.T
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	inst   *tribotel.Instrumentation
	c      *tributary.Cluster
	topic  *tributary.Topic[string]
	prod   *tributary.Producer[string]
}

// newHarness makes a cluster of the given capacity with topic "orders"
// of partitions partitions and a RoundRobin producer "p", and adds
// wrap(inst.Hooks()) to it (wrap nil: the hooks as they are) and the
// gauges' callback.
func newHarness(t *testing.T, capacity int32, partitions int32, wrap func(tributary.Hooks) tributary.Hooks, opts ...tribotel.Option) *harness {
	t.Helper()
	h := &harness{t: t, reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = h.tp.Shutdown(context.Background())
	})
	h.inst = tribotel.New(append([]tribotel.Option{tribotel.WithMeterProvider(mp), tribotel.WithTracerProvider(h.tp)}, opts...)...)
	c, err := tributary.NewCluster(capacity)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	t.Cleanup(func() { _ = c.Close() })
	hooks := h.inst.Hooks()
	if wrap != nil {
		hooks = wrap(hooks)
	}
	c.AddHooks(hooks)
	reg, err := h.inst.Observe(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Unregister() })
	if h.topic, err = tributary.CreateTopic(c, "orders", partitions, tributary.String()); err != nil {
		t.Fatal(err)
	}
	if h.prod, err = tributary.NewProducer[string](c, "p", tributary.RoundRobin()); err != nil {
		t.Fatal(err)
	}
	return h
}

// send sends values under a span "request" of the harness's tracer and
// returns the messages as stored and the request span's context.
func (h *harness) send(values ...string) ([]tributary.Message[string], trace.SpanContext) {
	h.t.Helper()
	ctx, span := h.tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	var sent []tributary.Message[string]
	for _, v := range values {
		m, err := h.prod.Send(ctx, h.topic, tributary.Message[string]{Key: "k-" + v, Value: v})
		if err != nil {
			h.t.Fatal(err)
		}
		sent = append(sent, m)
	}
	return sent, span.SpanContext()
}

// handled is what a handler saw of one call.
type handled struct {
	msg  tributary.Message[string]
	span trace.SpanContext // trace.SpanFromContext(ctx) in the handler
}

// consume runs consumer "c1" of group on the topic with handler until
// the group has committed every record (lag 0, nothing in flight) and the
// handler was called at least calls times, then stops Run and returns
// what each call saw, in order.
func (h *harness) consume(group string, calls int, handler func(ctx context.Context, m tributary.Message[string]) error, opts ...tributary.ConsumerOption) []handled {
	h.t.Helper()
	cons, err := tributary.NewConsumer(h.topic, group, "c1", opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []handled
	)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- cons.Run(ctx, func(ctx context.Context, m tributary.Message[string]) error {
			mu.Lock()
			seen = append(seen, handled{msg: m, span: trace.SpanFromContext(ctx).SpanContext()})
			mu.Unlock()
			return handler(ctx, m)
		})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= calls && h.settled(group) {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			h.t.Fatalf("consume: %d handler calls of %d, group not settled, after 10 s", n, calls)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		h.t.Fatalf("Run: %v", err)
	}
	if err := cons.Close(); err != nil && !errors.Is(err, tributary.ErrClosed) {
		h.t.Fatalf("Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(seen)
}

// settled reports whether group has committed every record of the topic.
func (h *harness) settled(group string) bool {
	d, err := h.c.Describe(h.topic.Name())
	if err != nil {
		h.t.Fatal(err)
	}
	for _, g := range d.Groups {
		if g.Group != group {
			continue
		}
		for _, p := range g.Partitions {
			if p.Lag != 0 || p.InFlight {
				return false
			}
		}
		return true
	}
	return false
}

// ended returns the recorded ended spans named name.
func (h *harness) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// attr returns the value of span s's attribute k, and whether it has it.
func attr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// collect reads the metrics now and returns every series by instrument
// name, then by its attributes (series' key): a counter's sum, a
// histogram's count, a gauge's value.
func (h *harness) collect() map[string]map[string]float64 {
	h.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			s := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					s[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					s[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					s[key(p.Attributes)] = float64(p.Count)
				}
			default:
				h.t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
			out[m.Name] = s
		}
	}
	return out
}

// key is a series' attributes, sorted, "k=v k=v", without
// messaging.system when it is "tributary" (so a series without it, or
// with another, differs from every wanted one).
func key(set attribute.Set) string {
	var parts []string
	if v, ok := set.Value("messaging.system"); !ok || v.AsString() != tribotel.System {
		parts = append(parts, "messaging.system="+v.Emit())
	}
	for _, kv := range set.ToSlice() {
		if kv.Key != "messaging.system" {
			parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
		}
	}
	return strings.Join(parts, " ")
}

// series is the key of the attributes kvs ("k=v" each).
func series(kvs ...string) string {
	slices.Sort(kvs)
	return strings.Join(kvs, " ")
}

// diffSeries says how got differs from want, "" when equal.
func diffSeries(name string, got, want map[string]float64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			fmt.Fprintf(&b, "%s{%s}: got %v (present %v), want %v\n", name, k, g, ok, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "%s{%s}: got %v, want no such series\n", name, k, got[k])
		}
	}
	return b.String()
}
