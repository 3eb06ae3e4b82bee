package tribotel_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/f91dcac0/tributary"
	tribotel "github.com/f91dcac0/tributary/otel"
)

// appendOnly is a broken carrier: Set appends even when the key is there.
type appendOnly struct{ tribotel.HeaderCarrier }

func (c *appendOnly) Set(key, value string) {
	c.HeaderCarrier = append(c.HeaderCarrier, tributary.Header{Key: key, Value: value})
}

// checkReinject injects two span contexts in turn into headers that hold
// a user header: the second must replace the first, the user's stay, and
// Extract must return the second.
func checkReinject(newCarrier func([]tributary.Header) (propagation.TextMapCarrier, func() []tributary.Header)) error {
	prop := propagation.TraceContext{}
	first := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1}, SpanID: [8]byte{1}, TraceFlags: trace.FlagsSampled})
	second := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{2}, SpanID: [8]byte{2}, TraceFlags: trace.FlagsSampled})
	c, headers := newCarrier([]tributary.Header{{Key: "user", Value: "u"}})
	prop.Inject(trace.ContextWithSpanContext(context.Background(), first), c)
	prop.Inject(trace.ContextWithSpanContext(context.Background(), second), c)
	h := headers()
	if got, want := len(h), 2; got != want {
		return fmt.Errorf("headers %v: %d, want %d (user, traceparent)", h, got, want)
	}
	if h[0] != (tributary.Header{Key: "user", Value: "u"}) {
		return fmt.Errorf("headers %v: the user's header changed", h)
	}
	if got := trace.SpanContextFromContext(prop.Extract(context.Background(), c)); !got.Equal(second.WithRemote(true)) {
		return fmt.Errorf("extracted %v, want %v", got, second)
	}
	if got := c.Keys(); !slices.Equal(got, []string{"user", "traceparent"}) {
		return fmt.Errorf("Keys %v", got)
	}
	return nil
}

func TestHeaderCarrierReplaces(t *testing.T) {
	if err := checkReinject(func(h []tributary.Header) (propagation.TextMapCarrier, func() []tributary.Header) {
		c := tribotel.HeaderCarrier(h)
		return &c, func() []tributary.Header { return c }
	}); err != nil {
		t.Errorf("HeaderCarrier: %v", err)
	}
	if err := checkReinject(func(h []tributary.Header) (propagation.TextMapCarrier, func() []tributary.Header) {
		c := &appendOnly{h}
		return c, func() []tributary.Header { return c.HeaderCarrier }
	}); err == nil {
		t.Errorf("an append-only carrier passed checkReinject")
	}
	var empty tribotel.HeaderCarrier
	if got := empty.Get("traceparent"); got != "" {
		t.Errorf("Get on no headers: %q", got)
	}
}

// TestDefaultPropagator: without a global propagator, New injects W3C
// trace context and baggage; with one, New uses it.
func TestDefaultPropagator(t *testing.T) {
	// The API's initial global propagator delegates to the first one set,
	// for good: restoring it would keep Baggage. An empty composite
	// (no fields) is what the other tests expect of the global one.
	defer otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	if got := tribotel.New().Propagator().Fields(); !slices.Contains(got, "traceparent") || !slices.Contains(got, "baggage") {
		t.Errorf("default propagator's fields %v, want traceparent and baggage", got)
	}
	otel.SetTextMapPropagator(propagation.Baggage{})
	if got := tribotel.New().Propagator().Fields(); !slices.Equal(got, []string{"baggage"}) {
		t.Errorf("with the global Baggage propagator: fields %v", got)
	}
	if got := tribotel.New(tribotel.WithPropagator(propagation.TraceContext{})).Propagator().Fields(); slices.Contains(got, "baggage") {
		t.Errorf("WithPropagator(TraceContext): fields %v", got)
	}
}

// TestBaggageReachesHandler: baggage of the sender's context arrives in
// the handler's context with the default propagator, and not with a
// propagator of trace context alone (the variant the check must catch).
func TestBaggageReachesHandler(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []tribotel.Option
		wgot string
	}{
		{name: "default propagator", wgot: "eu"},
		{name: "trace context only", opts: []tribotel.Option{tribotel.WithPropagator(propagation.TraceContext{})}, wgot: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 1000, 1, nil, tt.opts...)
			region, _ := baggage.NewMember("region", "eu")
			bag, _ := baggage.New(region)
			ctx := baggage.ContextWithBaggage(context.Background(), bag)
			if _, err := h.prod.Send(ctx, h.topic, tributary.Message[string]{Value: "a"}); err != nil {
				t.Fatal(err)
			}
			var got string
			h.consume("g", 1, func(ctx context.Context, _ tributary.Message[string]) error {
				got = baggage.FromContext(ctx).Member("region").Value()
				return nil
			})
			if got != tt.wgot {
				t.Errorf("handler's baggage region %q, want %q", got, tt.wgot)
			}
		})
	}
}

// TestSendReplacesStaleTraceparent: a message sent with a traceparent of
// its own (forwarded from another record) is published with the send
// span's alone, and the caller's headers are left as they were.
func TestSendReplacesStaleTraceparent(t *testing.T) {
	h := newHarness(t, 1000, 1, nil)
	stale := "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"
	headers := []tributary.Header{{Key: "traceparent", Value: stale}, {Key: "user", Value: "u"}}
	if _, err := h.prod.Send(context.Background(), h.topic, tributary.Message[string]{Value: "a", Headers: headers}); err != nil {
		t.Fatal(err)
	}
	if headers[0].Value != stale {
		t.Errorf("the caller's traceparent changed to %q", headers[0].Value)
	}
	seen := h.consume("g", 1, func(context.Context, tributary.Message[string]) error { return nil })
	if err := checkHeadersCarry(h, seen); err != nil {
		t.Error(err)
	}
	n := 0
	for _, hd := range seen[0].msg.Headers {
		if hd.Key == "traceparent" {
			n++
		}
	}
	if n != 1 || len(seen[0].msg.Headers) != 2 {
		t.Errorf("published headers %v: want one traceparent and the user's", seen[0].msg.Headers)
	}
}
