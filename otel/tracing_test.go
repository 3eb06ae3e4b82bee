package tribotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/f91dcac0/tributary"
	tribotel "github.com/f91dcac0/tributary/otel"
)

// Broken variants of the hooks, each of which one of the checks below
// must catch.

// dropTraceHeaders publishes the headers without what OnSend appended
// (a carrier that drops the header).
func dropTraceHeaders(h tributary.Hooks) tributary.Hooks {
	send := h.OnSend
	h.OnSend = func(ctx context.Context, s *tributary.SendInfo) func(int64, error) {
		n := len(s.Headers)
		done := send(ctx, s)
		s.Headers = s.Headers[:n]
		return done
	}
	return h
}

// keepHandlerContext gives the handler its context without the span.
func keepHandlerContext(h tributary.Hooks) tributary.Hooks {
	process := h.OnProcess
	h.OnProcess = func(ctx context.Context, d tributary.Delivery) (context.Context, func(error, time.Duration)) {
		_, end := process(ctx, d)
		return ctx, end
	}
	return h
}

// ignoreHandlerError ends the process span as if the handler succeeded.
func ignoreHandlerError(h tributary.Hooks) tributary.Hooks {
	process := h.OnProcess
	h.OnProcess = func(ctx context.Context, d tributary.Delivery) (context.Context, func(error, time.Duration)) {
		ctx, end := process(ctx, d)
		return ctx, func(_ error, elapsed time.Duration) { end(nil, elapsed) }
	}
	return h
}

// sendSpanOf returns the ended send span of the message with ID id.
func sendSpanOf(h *harness, id string) (sdktrace.ReadOnlySpan, error) {
	for _, s := range h.ended("send orders") {
		if v, ok := attr(s, "messaging.message.id"); ok && v.AsString() == id {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no span %q with messaging.message.id %q", "send orders", id)
}

// checkProducerSpans: each sent message has a send span of kind Producer,
// a child of the request span, with its offset and no error.
func checkProducerSpans(h *harness, sent []tributary.Message[string], request trace.SpanContext) error {
	if got := len(h.ended("send orders")); got != len(sent) {
		return fmt.Errorf("%d send spans, want %d", got, len(sent))
	}
	for _, m := range sent {
		s, err := sendSpanOf(h, m.ID)
		if err != nil {
			return err
		}
		if s.SpanKind() != trace.SpanKindProducer {
			return fmt.Errorf("send span of %s: kind %v, want Producer", m.ID, s.SpanKind())
		}
		if s.Parent().SpanID() != request.SpanID() || s.SpanContext().TraceID() != request.TraceID() {
			return fmt.Errorf("send span of %s: parent %v, want the request span %v", m.ID, s.Parent().SpanID(), request.SpanID())
		}
		if v, ok := attr(s, tribotel.AttrOffset); !ok || v.AsInt64() != m.Offset {
			return fmt.Errorf("send span of %s: offset %v (%v), want %d", m.ID, v.AsInt64(), ok, m.Offset)
		}
		if s.Status().Code != codes.Unset {
			return fmt.Errorf("send span of %s: status %v", m.ID, s.Status())
		}
	}
	return nil
}

// checkHeadersCarry: each handled message's headers carry the W3C
// traceparent of its send span.
func checkHeadersCarry(h *harness, seen []handled) error {
	for _, c := range seen {
		s, err := sendSpanOf(h, c.msg.ID)
		if err != nil {
			return err
		}
		sc := s.SpanContext()
		want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		if got := (*tribotel.HeaderCarrier)(&c.msg.Headers).Get("traceparent"); got != want {
			return fmt.Errorf("message %s: traceparent %q, want %q", c.msg.ID, got, want)
		}
	}
	return nil
}

// checkHandlerSpan: the span of each handler's context is an ended
// process span of kind Consumer for that message.
func checkHandlerSpan(h *harness, seen []handled) error {
	for _, c := range seen {
		var found sdktrace.ReadOnlySpan
		for _, s := range h.ended("process orders") {
			if s.SpanContext().Equal(c.span) {
				found = s
			}
		}
		if found == nil {
			return fmt.Errorf("message %s: the handler's span %v is no process span", c.msg.ID, c.span)
		}
		if found.SpanKind() != trace.SpanKindConsumer {
			return fmt.Errorf("message %s: process span kind %v, want Consumer", c.msg.ID, found.SpanKind())
		}
		if v, _ := attr(found, "messaging.message.id"); v.AsString() != c.msg.ID {
			return fmt.Errorf("handler of %s got the span of %s", c.msg.ID, v.AsString())
		}
	}
	return nil
}

// checkLinks: each process span links to its message's send span; its
// parent is the send span when producerParent, else none (a new trace).
func checkLinks(h *harness, producerParent bool) error {
	spans := h.ended("process orders")
	if len(spans) == 0 {
		return errors.New("no process spans")
	}
	for _, p := range spans {
		id, _ := attr(p, "messaging.message.id")
		s, err := sendSpanOf(h, id.AsString())
		if err != nil {
			return err
		}
		links := p.Links()
		if len(links) != 1 || !links[0].SpanContext.Equal(s.SpanContext().WithRemote(true)) {
			return fmt.Errorf("process span of %s: links %v, want one to the send span %v", id.AsString(), links, s.SpanContext())
		}
		switch {
		case producerParent && (p.Parent().SpanID() != s.SpanContext().SpanID() || p.SpanContext().TraceID() != s.SpanContext().TraceID()):
			return fmt.Errorf("process span of %s: parent %v, want the send span %v", id.AsString(), p.Parent(), s.SpanContext())
		case !producerParent && (p.Parent().IsValid() || p.SpanContext().TraceID() == s.SpanContext().TraceID()):
			return fmt.Errorf("process span of %s: parent %v in trace %v, want a new root", id.AsString(), p.Parent(), p.SpanContext().TraceID())
		}
	}
	return nil
}

// TestTraceSendToProcess sends two records under a request span and
// handles them with Run: the checks above pass on the hooks as they are,
// and each broken variant fails the check that covers it, and only that.
func TestTraceSendToProcess(t *testing.T) {
	tests := []struct {
		name           string
		wrap           func(tributary.Hooks) tributary.Hooks
		opts           []tribotel.Option
		producerParent bool
		wfail          []string // the checks that must fail
	}{
		{name: "linked"},
		{name: "child of producer", opts: []tribotel.Option{tribotel.WithProducerParent()}, producerParent: true},
		{name: "child check on linked spans", producerParent: true, wfail: []string{"links"}},
		{name: "headers dropped", wrap: dropTraceHeaders, wfail: []string{"headers", "links"}},
		{name: "handler context without span", wrap: keepHandlerContext, wfail: []string{"handler span"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 1000, 2, tt.wrap, tt.opts...)
			sent, request := h.send("a", "b")
			seen := h.consume("g", 2, func(context.Context, tributary.Message[string]) error { return nil })
			checks := []struct {
				name string
				err  error
			}{
				{"producer spans", checkProducerSpans(h, sent, request)},
				{"headers", checkHeadersCarry(h, seen)},
				{"handler span", checkHandlerSpan(h, seen)},
				{"links", checkLinks(h, tt.producerParent)},
			}
			for _, c := range checks {
				wfail := false
				for _, f := range tt.wfail {
					wfail = wfail || f == c.name
				}
				switch {
				case wfail && c.err == nil:
					t.Errorf("check %q passed, want it to fail", c.name)
				case !wfail && c.err != nil:
					t.Errorf("check %q: %v", c.name, c.err)
				}
			}
		})
	}
}

// checkErrorStatus: each process span of a first attempt (whose handler
// failed) has status Error with the handler's error and its error.type;
// those of the second attempt are Unset.
func checkErrorStatus(h *harness, wfailed int) error {
	failed := 0
	for _, p := range h.ended("process orders") {
		attempt, _ := attr(p, tribotel.AttrAttempt)
		et, hasType := attr(p, "error.type")
		switch attempt.AsInt64() {
		case 1:
			failed++
			if p.Status().Code != codes.Error || p.Status().Description != "first try fails" || !hasType || et.AsString() == "" {
				return fmt.Errorf("first attempt's span: status %v, error.type %q (%v), want Error %q", p.Status(), et.AsString(), hasType, "first try fails")
			}
		default:
			if p.Status().Code != codes.Unset || hasType {
				return fmt.Errorf("attempt %d's span: status %v, error.type %q, want Unset and none", attempt.AsInt64(), p.Status(), et.AsString())
			}
		}
	}
	if failed != wfailed {
		return fmt.Errorf("%d spans of failed attempts, want %d", failed, wfailed)
	}
	return nil
}

// TestTraceHandlerError: a handler that fails each record's first attempt
// leaves a process span with status Error per record; ending the span
// without the error is caught.
func TestTraceHandlerError(t *testing.T) {
	for _, tt := range []struct {
		name  string
		wrap  func(tributary.Hooks) tributary.Hooks
		wfail bool
	}{
		{name: "as is"},
		{name: "error ignored", wrap: ignoreHandlerError, wfail: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 1000, 2, tt.wrap)
			h.send("a", "b")
			h.consume("g", 4, failFirst, tributary.WithBackoff(time.Millisecond, time.Millisecond))
			err := checkErrorStatus(h, 2)
			if tt.wfail != (err != nil) {
				t.Errorf("checkErrorStatus: %v, want failure %v", err, tt.wfail)
			}
		})
	}
}

// failFirst fails each record's first attempt.
func failFirst(_ context.Context, m tributary.Message[string]) error {
	if m.Attempt == 1 {
		return errors.New("first try fails")
	}
	return nil
}

// TestTraceSendError: a TrySend to a full partition ends its send span
// with status Error and error.type partition_full.
func TestTraceSendError(t *testing.T) {
	h := newHarness(t, 1, 1, nil)
	if _, err := h.prod.TrySend(h.topic, tributary.Message[string]{Value: "fits"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.prod.TrySend(h.topic, tributary.Message[string]{Value: "full"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("TrySend: %v, want ErrPartitionFull", err)
	}
	spans := h.ended("send orders")
	if len(spans) != 2 {
		t.Fatalf("%d send spans, want 2", len(spans))
	}
	s := spans[1]
	if et, _ := attr(s, "error.type"); s.Status().Code != codes.Error || et.AsString() != "partition_full" {
		t.Errorf("failed send's span: status %v, error.type %q; want Error, partition_full", s.Status(), et.AsString())
	}
	if _, ok := attr(s, "messaging.message.id"); ok {
		t.Errorf("failed send's span has a messaging.message.id")
	}
}
