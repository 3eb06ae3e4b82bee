package tribotel_test

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

// TestHostile24HandlerErrorWhoseErrorPanics: a handler that returns a
// typed nil error fails its record (the library recovers the panic of
// its Error when it writes the dead letter); the process span's end must
// not crash Run on it, and records the failure with a fixed text.
func TestHostile24HandlerErrorWhoseErrorPanics(t *testing.T) {
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
