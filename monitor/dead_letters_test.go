package monitor

// The Monitor's dead letters: the records its OnDeadLetter hook saw, with
// their cause as text (cut, valid UTF-8), and a cause whose Error panics.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// TestDeadLetters: the OnDeadLetter hook keeps the newest WithDeadLetters
// dead letters, newest first, with their origin and cause, and counts all.
func TestDeadLetters(t *testing.T) {
	c := testCluster(t)
	orders, _ := tributary.CreateTopic(c, "orders", 1, tributary.String())
	p, _ := tributary.NewProducer[string](c, "web", tributary.Manual())
	if _, err := c.CreateGroup("orders", "fraud", engine.RoundRobin,
		tributary.WithDeadLetter("orders-dlq", 2), tributary.WithBackoff(time.Millisecond, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	m := testMonitor(t, c, WithDeadLetters(2))
	cons, err := tributary.NewConsumer(orders, "fraud", "f1")
	if err != nil {
		t.Fatal(err)
	}
	send(t, p, orders, 0, 3)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(ctx, func(ctx context.Context, m tributary.Message[string]) error {
			return errors.New("card declined")
		})
	}()
	deadline := time.Now().Add(guard)
	for getState(t, m, "?history=0").DeadLettersTotal < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("dead letters %+v after the guard, want 3", getState(t, m, "").DeadLetters)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	cons.Close()
	st := getState(t, m, "?history=0")
	if len(st.DeadLetters) != 2 || st.DeadLettersTotal != 3 {
		t.Fatalf("%d dead letters kept of %d, want 2 of 3", len(st.DeadLetters), st.DeadLettersTotal)
	}
	for i, woff := range []int64{2, 1} { // newest first
		d := st.DeadLetters[i]
		if d.Topic != "orders" || d.Group != "fraud" || d.Member != "f1" || d.Partition != 0 || d.Offset != woff ||
			d.Attempt != 2 || d.DeadLetterTopic != "orders-dlq" || d.Cause != "card declined" || d.Time.IsZero() {
			t.Errorf("dead letter %d: %+v, want orders/fraud/f1 p0 offset %d attempt 2 to orders-dlq, card declined", i, d, woff)
		}
	}
	m.Close()
	if _, err := p.TrySend(orders, tributary.Message[string]{Value: "late"}); err != nil {
		t.Fatal(err)
	}
}

// TestCauseText: a long cause is cut at MaxCauseBytes, on a rune boundary.
func TestCauseText(t *testing.T) {
	long := strings.Repeat("é", MaxCauseBytes) // 2 bytes each
	got := causeText(errors.New(long))
	if len(got) > MaxCauseBytes+len("…") || !strings.HasSuffix(got, "…") || !utf8Valid(got) {
		t.Errorf("causeText of %d bytes: %d bytes %q…", len(long), len(got), got[:10])
	}
	if causeText(nil) != "" {
		t.Error("causeText(nil) not empty")
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// nilError's Error dereferences its receiver: a nil *nilError returned
// as an error (the classic typed nil) panics in Error.
type nilError struct{ msg string }

func (e *nilError) Error() string { return e.msg }

// TestCauseWhoseErrorPanics: a handler that returns a typed nil
// error is dead-lettered by the library (which recovers its Error's
// panic); the Monitor's OnDeadLetter hook must not crash Run on it.
func TestCauseWhoseErrorPanics(t *testing.T) {
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
