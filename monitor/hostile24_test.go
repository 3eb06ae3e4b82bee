package monitor

import (
	"context"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// nilError's Error dereferences its receiver: a nil *nilError returned
// as an error (the classic typed nil) panics in Error.
type nilError struct{ msg string }

func (e *nilError) Error() string { return e.msg }

// TestHostile24CauseWhoseErrorPanics: a handler that returns a typed nil
// error is dead-lettered by the library (which recovers its Error's
// panic); the Monitor's OnDeadLetter hook must not crash Run on it.
func TestHostile24CauseWhoseErrorPanics(t *testing.T) {
	c := testCluster(t)
	orders, _ := tributary.CreateTopic(c, "orders", 1, tributary.String())
	p, _ := tributary.NewProducer[string](c, "web", tributary.Manual())
	if _, err := c.CreateGroup("orders", "g", engine.RoundRobin, tributary.WithDeadLetter("orders-dlq", 1)); err != nil {
		t.Fatal(err)
	}
	m := testMonitor(t, c)
	cons, err := tributary.NewConsumer(orders, "g", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	send(t, p, orders, 0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(ctx, func(context.Context, tributary.Message[string]) error {
			var e *nilError
			return e
		})
	}()
	for getState(t, m, "?history=0").DeadLettersTotal < 1 {
		if ctx.Err() != nil {
			t.Fatal("no dead letter after the guard")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if got := getState(t, m, "?history=0").DeadLetters[0].Cause; got != "*monitor.nilError with a panicking Error method" {
		t.Errorf("cause %q", got)
	}
}
