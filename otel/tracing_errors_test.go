package tribotel_test

// Tests of the spans at their edges: a handler error whose Error method
// panics, and a forwarded message whose stale tracestate must not survive
// the send.

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/codes"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// nilError's Error dereferences its receiver: a nil *nilError returned
// as an error (the classic typed nil) panics in Error.
type nilError struct{ msg string }

func (e *nilError) Error() string { return e.msg }

// TestHandlerErrorWhoseErrorPanics: a handler that returns a
// typed nil error fails its record (the library recovers the panic of
// its Error when it writes the dead letter); the process span's end must
// not crash Run on it, and records the failure with a fixed text.
func TestHandlerErrorWhoseErrorPanics(t *testing.T) {
	h := newHarness(t, 10, 1, nil)
	if _, err := h.c.CreateGroup("orders", "g", engine.RoundRobin, tributary.WithDeadLetter("orders-dlq", 1)); err != nil {
		t.Fatal(err)
	}
	h.send("a")
	h.consume("g", 1, func(context.Context, tributary.Message[string]) error {
		var e *nilError
		return e
	})
	spans := h.ended("process orders")
	if len(spans) != 1 {
		t.Fatalf("%d process spans, want 1", len(spans))
	}
	if s := spans[0].Status(); s.Code != codes.Error || s.Description != "*tribotel_test.nilError with a panicking Error method" {
		t.Errorf("process span status %+v", s)
	}
}

// TestSendDropsStaleTracestate: a message forwarded with another
// record's traceparent and tracestate is published with the send span's
// traceparent and not the other trace's tracestate (W3C: a tracestate
// belongs to the traceparent it came with); the consumer's link carries
// the send span's (empty) trace state.
func TestSendDropsStaleTracestate(t *testing.T) {
	h := newHarness(t, 1000, 1, nil)
	headers := []tributary.Header{
		{Key: "traceparent", Value: "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"},
		{Key: "tracestate", Value: "vendor=stale"},
		{Key: "user", Value: "u"},
	}
	if _, err := h.prod.Send(context.Background(), h.topic, tributary.Message[string]{Value: "a", Headers: headers}); err != nil {
		t.Fatal(err)
	}
	if headers[1].Value != "vendor=stale" {
		t.Errorf("the caller's tracestate changed to %q", headers[1].Value)
	}
	seen := h.consume("g", 1, func(context.Context, tributary.Message[string]) error { return nil })
	for _, hd := range seen[0].msg.Headers {
		if hd.Key == "tracestate" {
			t.Errorf("published headers %v: the forwarded tracestate stays with the send's traceparent", seen[0].msg.Headers)
		}
	}
	proc := h.ended("process orders")
	if len(proc) != 1 || len(proc[0].Links()) != 1 {
		t.Fatalf("process spans %d, want 1 with one link", len(proc))
	}
	if ts := proc[0].Links()[0].SpanContext.TraceState(); ts.Len() != 0 {
		t.Errorf("process span's link trace state %q, want the send span's (empty)", ts.String())
	}
}
