package tributary_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
)

// The library writes the text of errors users give it (a handler's
// result, Nack's cause) into dead letters; a user error whose Error method
// panics — typically a typed nil whose Error dereferences its receiver —
// must give a fixed text naming its type, not crash Run or Nack.

// derefError is an error whose Error dereferences its receiver: a nil
// *derefError returned as an error panics in Error.
type derefError struct{ msg string }

func (e *derefError) Error() string { return e.msg }

// typedNil returns a nil *derefError as a non-nil error, the classic Go
// mistake.
func typedNil() error {
	var e *derefError
	return e
}

// panickyError's Error panics even on a real value.
type panickyError struct{}

func (panickyError) Error() string { panic("Error boom") }

const typedNilText = "*tributary_test.derefError with a panicking Error method"

func TestRunDeadLettersAHandlerErrorWhoseErrorPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"typed nil", typedNil(), typedNilText},
		{"panicking Error", panickyError{}, "tributary_test.panickyError with a panicking Error method"},
		{"joined with a panicking Error", errors.Join(errors.New("while billing"), panickyError{}), "*errors.joinError with a panicking Error method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster(t, 10)
			tp := testTopic(t, c, "t", 1, tributary.String())
			pr := testProducer[string](t, c, "p", tributary.Manual())
			sendOK(t, pr, tp, tributary.Message[string]{Value: "bad"})
			sendOK(t, pr, tp, tributary.Message[string]{Value: "good"})
			cons := testConsumer(t, tp, "g", "c1", tributary.WithDeadLetter("dlq", 2), tributary.WithBackoff(time.Millisecond, time.Millisecond))
			ctx, cancel := context.WithCancel(guardCtx(t))
			defer cancel()
			done := goResult(func() (struct{}, error) {
				return struct{}{}, cons.Run(ctx, func(_ context.Context, m tributary.Message[string]) error {
					if m.Value == "bad" {
						return tc.err
					}
					cancel()
					return nil
				})
			})
			r := awaitResult(t, "Run", done)
			checkErr(t, "Run", r.err, context.Canceled)
			dlq, err := tributary.OpenTopic(c, "dlq", tributary.String())
			if err != nil {
				t.Fatal(err)
			}
			snap, err := dlq.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Messages[0]) != 1 {
				t.Fatalf("dead-letter topic holds %d records, want 1", len(snap.Messages[0]))
			}
			if got := headerOf(snap.Messages[0][0].Headers, tributary.HeaderDeadLetterError); got != tc.want {
				t.Fatalf("dead letter error header %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNackDeadLettersACauseWhoseErrorPanics(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "bad"})
	cons := testConsumer(t, tp, "g", "c1", tributary.WithDeadLetter("dlq", 1))
	m, ok, err := cons.TryPollPartition(0)
	if err != nil || !ok {
		t.Fatalf("TryPollPartition: %v, %v", ok, err)
	}
	dead, err := cons.Nack(guardCtx(t), m, typedNil())
	if err != nil || !dead {
		t.Fatalf("Nack with a typed-nil cause = %v, %v; want dead-lettered", dead, err)
	}
	dlq, err := tributary.OpenTopic(c, "dlq", tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := dlq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got := headerOf(snap.Messages[0][0].Headers, tributary.HeaderDeadLetterError); got != typedNilText {
		t.Fatalf("dead letter error header %q, want %q", got, typedNilText)
	}
}
