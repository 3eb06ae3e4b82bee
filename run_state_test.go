package tributary

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Tests of Consumer.Run's hand-off between its own goroutine (wait) and
// the worker that polls, runs the handler and settles (runner.state).
// Each case returns "" when Run behaved, else what went wrong;
// run_faults_test.go shows each caught on a broken variant (runFault).

// stateGuard bounds every wait in these cases; a failure guard, never a
// speed assertion.
const stateGuard = 5 * time.Second

// stateCase is one case: the fault it catches and the check.
type stateCase struct {
	name  string
	fault runFault
	run   func() string
}

// stateCases are the cases of TestRunState and TestRunFaultsCaught.
var stateCases = []stateCase{
	{"abandoned handler's error is not applied", runFaultApplyAbandoned, func() string { return abandonedResult(false) }},
	{"abandoned handler's Goexit is not applied", runFaultApplyAbandoned, func() string { return abandonedResult(true) }},
	{"cancel while settling waits for the ack", runFaultAbandonSettling, cancelWhileSettling},
	{"handler that closed its consumer has nothing applied", runFaultApplyClosed, closedByHandler},
}

// TestRunState runs every state case on the correct Run.
func TestRunState(t *testing.T) {
	for _, k := range stateCases {
		t.Run(k.name, func(t *testing.T) {
			if msg := k.run(); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// stateFixture is a cluster on b (nil: a new in-memory one) with a String
// topic "t" of one partition holding one record, and consumer c1 of
// group g.
type stateFixture struct {
	c    *Cluster
	tp   *Topic[string]
	cons *Consumer[string]
}

func newStateFixture(b Backend, opts ...ConsumerOption) (*stateFixture, error) {
	var c *Cluster
	var err error
	if b == nil {
		c, err = NewCluster(10)
	} else {
		c, err = NewClusterOn(b)
	}
	if err != nil {
		return nil, err
	}
	f := &stateFixture{c: c}
	if f.tp, err = OpenOrCreateTopic(c, "t", 1, String()); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	p, err := NewProducer[string](c, "p", Manual())
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if _, err := p.Send(context.Background(), f.tp, Message[string]{Value: "v"}); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if f.cons, err = NewConsumer(f.tp, "g", "c1", opts...); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return f, nil
}

// committed is group g's committed offset of partition 0.
func (f *stateFixture) committed() (int64, error) {
	d, err := f.tp.Describe()
	if err != nil {
		return 0, err
	}
	for _, g := range d.Groups {
		if g.Group == "g" {
			return g.Partitions[0].Committed, nil
		}
	}
	return 0, errors.New("group g not found")
}

// runResult starts Run and returns a channel of its result.
func runResult(ctx context.Context, cons *Consumer[string], h Handler[string]) <-chan error {
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx, h) }()
	return done
}

// awaitRun waits for Run's result, at most stateGuard.
func awaitRun(done <-chan error) (error, bool) {
	select {
	case err := <-done:
		return err, true
	case <-time.After(stateGuard):
		return nil, false
	}
}

// abandonedResult: a handler that ignores ctx past the stop grace is
// abandoned; when it then returns an error (or, with goexit, ends its
// goroutine) nothing is applied: no retry is counted, and its goroutine
// ends there.
func abandonedResult(goexit bool) string {
	f, err := newStateFixture(nil, WithStopGrace(time.Millisecond), WithBackoff(time.Minute, time.Minute))
	if err != nil {
		return err.Error()
	}
	defer f.c.Close()
	ignore := goleak.IgnoreCurrent()
	entered, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runResult(ctx, f.cons, func(context.Context, Message[string]) error {
		close(entered)
		<-release // ignores ctx
		if goexit {
			runtime.Goexit()
		}
		return errors.New("failed")
	})
	<-entered
	cancel()
	err, ok := awaitRun(done)
	close(release)
	if !ok {
		return "Run did not return after its stop grace"
	}
	if !errors.Is(err, context.Canceled) {
		return fmt.Sprintf("Run = %v, want context.Canceled", err)
	}
	if err := goleak.Find(ignore); err != nil {
		return fmt.Sprintf("the abandoned handler's goroutine went on: %v", err)
	}
	if s := f.cons.Stats(); s.Handled != 1 || s.Retried != 0 || s.Acked != 0 {
		return fmt.Sprintf("stats %+v after the abandoned handler returned: want 1 handled, its result not applied", s)
	}
	return ""
}

// cancelWhileSettling: Run's context ends (stop grace 0) while the worker
// acks a record whose handler returned nil: Run waits for that Ack (one
// backend request) before it leaves the group, so the record is
// committed.
func cancelWhileSettling() string {
	inner, err := NewCluster(10)
	if err != nil {
		return err.Error()
	}
	defer inner.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &ackHookBackend{Backend: inner.Backend(), before: func() {
		cancel()
		time.Sleep(20 * time.Millisecond) // a slow network: Run sees ctx end meanwhile
	}}
	f, err := newStateFixture(b, WithStopGrace(0))
	if err != nil {
		return err.Error()
	}
	defer f.c.Close()
	err, ok := awaitRun(runResult(ctx, f.cons, func(context.Context, Message[string]) error { return nil }))
	if !ok {
		return "Run did not return"
	}
	if !errors.Is(err, context.Canceled) {
		return fmt.Sprintf("Run = %v, want context.Canceled", err)
	}
	if off, err := f.committed(); err != nil || off != 1 {
		return fmt.Sprintf("committed offset %d (%v) after Run returned: want 1, the record acked before Run left", off, err)
	}
	if s := f.cons.Stats(); s.Acked != 1 {
		return fmt.Sprintf("stats %+v: want the record acked", s)
	}
	return ""
}

// closedByHandler: a handler that closes its own consumer and returns an
// error has nothing applied (no retry counted, no dead letter), and Run
// returns nil; many iterations, since whether Run or the worker sees the
// handler end first varies.
func closedByHandler() string {
	for i := range 50 {
		f, err := newStateFixture(nil, WithDeadLetter("dlq", 1))
		if err != nil {
			return err.Error()
		}
		done := runResult(context.Background(), f.cons, func(_ context.Context, m Message[string]) error {
			f.cons.Close() //nolint:errcheck // the first Close
			return errors.New("failed")
		})
		err, ok := awaitRun(done)
		s := f.cons.Stats()
		f.c.Close()
		switch {
		case !ok:
			return "Run did not return after its handler closed the consumer"
		case err != nil:
			return fmt.Sprintf("iteration %d: Run = %v, want nil", i, err)
		case s.Retried != 0 || s.DeadLettered != 0:
			return fmt.Sprintf("iteration %d: stats %+v: the result of a handler that closed its consumer was applied", i, s)
		}
	}
	return ""
}

// ackHookBackend is a Backend whose members call before ahead of every Ack.
type ackHookBackend struct {
	Backend
	before func()
}

func (b *ackHookBackend) OpenTopic(topic string) (BackendTopic, string, error) {
	t, pt, err := b.Backend.OpenTopic(topic)
	if err != nil {
		return nil, pt, err
	}
	return ackHookTopic{t, b}, pt, nil
}

type ackHookTopic struct {
	BackendTopic
	b *ackHookBackend
}

func (t ackHookTopic) Member(group, member string) (BackendMember, error) {
	m, err := t.BackendTopic.Member(group, member)
	if err != nil {
		return nil, err
	}
	return ackHookMember{m, t.b}, nil
}

type ackHookMember struct {
	BackendMember
	b *ackHookBackend
}

func (m ackHookMember) Ack(p int32, off int64) (bool, error) {
	m.b.before()
	return m.BackendMember.Ack(p, off)
}
