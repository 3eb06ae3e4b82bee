package tributary_test

import (
	"context"
	"errors"
	"testing"

	"github.com/f91dcac0/tributary"
)

// The Message a handler gets is its own: changing its headers in place
// (or appending to them) does not change the record Run dead-letters,
// which is the record as it was consumed.
func TestHandlerChangingItsMessageDoesNotChangeTheDeadLetter(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "v", Headers: []tributary.Header{{Key: "trace", Value: "t1"}}})
	cons := testConsumer(t, tp, "g", "c1", tributary.WithDeadLetter("dlq", 1))
	ctx, cancel := context.WithCancel(guardCtx(t))
	defer cancel()
	done := goResult(func() (struct{}, error) {
		return struct{}{}, cons.Run(ctx, func(_ context.Context, m tributary.Message[string]) error {
			m.Headers[0] = tributary.Header{Key: tributary.HeaderPayloadType, Value: "Forged"}
			return errors.New("failed")
		})
	})
	waitFor(t, "the dead letter", func() bool { return cons.Stats().DeadLettered == 1 })
	cancel()
	awaitResult(t, "Run", done)
	dlq, err := tributary.OpenTopic(c, "dlq", tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := dlq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	d := snap.Messages[0][0]
	if len(d.Headers) == 0 || d.Headers[0] != (tributary.Header{Key: "trace", Value: "t1"}) || d.PayloadType != "String" {
		t.Fatalf("dead letter headers %v, payload type %q: want the consumed record's trace=t1 first, payload type String", d.Headers, d.PayloadType)
	}
}
