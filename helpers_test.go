package tributary_test

// The helpers of this package's tests: a cluster, topics, producers and
// consumers closed with their test, sends and polls that fail the test on
// error, waits bounded by guard, the asynchronous calls' results, Run on a
// goroutine, and the liveness tests' cluster on a testclock.Clock with the
// waits for its members' heartbeats.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// guard bounds every wait in these tests. It is a failure guard, never a
// speed assertion: a correct library finishes each wait in microseconds.
const guard = 5 * time.Second

// purchase is the payload type most tests send.
type purchase struct {
	ID   int    `json:"id"`
	Item string `json:"item"`
}

// purchaseType is JSON[purchase]()'s Name: the payload type of a purchase topic.
const purchaseType = "JSON:tributary_test.purchase"

// testCluster returns a cluster closed when the test ends.
func testCluster(t testing.TB, capacity int32, opts ...engine.Option) *tributary.Cluster {
	t.Helper()
	c, err := tributary.NewCluster(capacity, opts...)
	if err != nil {
		t.Fatalf("NewCluster(%d): %v", capacity, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testTopic creates topic name of T (nil codec: JSON).
func testTopic[T any](t testing.TB, c *tributary.Cluster, name string, partitions int32, codec tributary.Codec[T]) *tributary.Topic[T] {
	t.Helper()
	tp, err := tributary.CreateTopic(c, name, partitions, codec)
	if err != nil {
		t.Fatalf("CreateTopic(%q, %d): %v", name, partitions, err)
	}
	return tp
}

// testProducer makes producer name of T.
func testProducer[T any](t testing.TB, c *tributary.Cluster, name string, p tributary.Partitioner) *tributary.Producer[T] {
	t.Helper()
	pr, err := tributary.NewProducer[T](c, name, p)
	if err != nil {
		t.Fatalf("NewProducer(%q): %v", name, err)
	}
	return pr
}

// testConsumer makes consumer name of group on tp, closed when the test ends.
func testConsumer[T any](t testing.TB, tp *tributary.Topic[T], group, name string, opts ...tributary.ConsumerOption) *tributary.Consumer[T] {
	t.Helper()
	cons, err := tributary.NewConsumer(tp, group, name, opts...)
	if err != nil {
		t.Fatalf("NewConsumer(%q, %q): %v", group, name, err)
	}
	t.Cleanup(func() { cons.Close() })
	return cons
}

// sendOK sends v to partition p of tp with a Manual producer's semantics
// through pr, failing the test on error.
func sendOK[T any](t testing.TB, pr *tributary.Producer[T], tp *tributary.Topic[T], m tributary.Message[T]) tributary.Message[T] {
	t.Helper()
	out, err := pr.TrySend(tp, m)
	if err != nil {
		t.Fatalf("TrySend(%s, %+v): %v", tp.Name(), m, err)
	}
	return out
}

// guardCtx is a context that ends after guard, or with the test.
func guardCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

// pollOK polls cons with the guard's context; it fails on error.
func pollOK[T any](t testing.TB, cons *tributary.Consumer[T], max int32) []tributary.Message[T] {
	t.Helper()
	ms, err := cons.Poll(guardCtx(t), max)
	if err != nil {
		t.Fatalf("Poll(%d) by %s: %v", max, cons.Name(), err)
	}
	return ms
}

// describe returns the description of topic.
func describeTopic(t testing.TB, c *tributary.Cluster, topic string) engine.TopicDescription {
	t.Helper()
	d, err := c.Describe(topic)
	if err != nil {
		t.Fatalf("Describe(%q): %v", topic, err)
	}
	return d
}

// logEnd returns the log end offset of partition p of topic.
func logEndOf(t testing.TB, c *tributary.Cluster, topic string, p int32) int64 {
	t.Helper()
	return describeTopic(t, c, topic).Partitions[p].LogEndOffset
}

// groupOf returns group's description on topic; it fails when absent.
func groupDesc(t testing.TB, c *tributary.Cluster, topic, group string) engine.GroupDescription {
	t.Helper()
	for _, g := range describeTopic(t, c, topic).Groups {
		if g.Group == group {
			return g
		}
	}
	t.Fatalf("Describe(%q): no group %q", topic, group)
	return engine.GroupDescription{}
}

// eventually waits until cond holds, failing after guard.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", guard, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitPollBlocked waits until cons has blocked in a poll at least n times.
func waitPollBlocked[T any](t testing.TB, cons *tributary.Consumer[T], n int64) {
	t.Helper()
	waitFor(t, cons.Name()+" blocked in Poll", func() bool { return cons.Stats().Waits >= n })
}

// result is one asynchronous call's outcome.
type callResult[V any] struct {
	v   V
	err error
}

// async runs f on a goroutine and returns the channel its result arrives on.
func goResult[V any](f func() (V, error)) <-chan callResult[V] {
	ch := make(chan callResult[V], 1)
	go func() {
		v, err := f()
		ch <- callResult[V]{v, err}
	}()
	return ch
}

// await returns the result from ch, failing after guard.
func awaitResult[V any](t testing.TB, what string, ch <-chan callResult[V]) callResult[V] {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(guard):
		t.Fatalf("timed out after %v waiting for %s", guard, what)
		return callResult[V]{}
	}
}

// stillBlocked fails when ch already has a result: the call should be blocked.
// It gives the call a moment to (wrongly) complete first.
func stillBlocked[V any](t testing.TB, what string, ch <-chan callResult[V]) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned (%v, %v), want it still blocked", what, r.v, r.err)
	case <-time.After(20 * time.Millisecond):
	}
}

// wantErr fails unless errors.Is(err, werr) (werr nil: err must be nil).
func checkErr(t testing.TB, what string, err, werr error) {
	t.Helper()
	if werr == nil {
		if err != nil {
			t.Fatalf("%s: %v, want no error", what, err)
		}
		return
	}
	if !errors.Is(err, werr) {
		t.Fatalf("%s: error %v, want %v", what, err, werr)
	}
}

// runAsync runs c.Run on a goroutine; the channel gets its result.
func runAsync[T any](ctx context.Context, c *tributary.Consumer[T], h tributary.Handler[T]) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, h) }()
	return done
}

// awaitDone waits up to limit for a result on done.
func awaitDone(t *testing.T, done <-chan error, limit time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("%s did not return within %v", what, limit)
		return nil
	}
}

// stillPending checks that nothing arrives on done for d.
func stillPending[E any](t *testing.T, done <-chan E, d time.Duration, what string) {
	t.Helper()
	select {
	case v := <-done:
		t.Fatalf("%s returned (%v), want still blocked after %v", what, v, d)
	case <-time.After(d):
	}
}

// pollOne polls c for one message, within guard.
func pollOne[T any](t *testing.T, c *tributary.Consumer[T]) tributary.Message[T] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	ms, err := c.Poll(ctx, 1)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	return ms[0]
}

// noPanic runs f and fails the test, instead of crashing, if f panics.
func noPanic(t *testing.T, name string, f func() error) error {
	t.Helper()
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("%s panicked: %v", name, p)
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		err = f()
	}()
	return err
}

// within fails the test when f does not return within guard: a
// hook calling back into the library must not deadlock it.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatalf("%s: deadlocked (still running after %v)", what, guard)
	}
}

// headerOf is the value of header key in h, "" when absent.
func headerOf(h []tributary.Header, key string) string {
	for _, x := range h {
		if x.Key == key {
			return x.Value
		}
	}
	return ""
}

// publishRaw publishes m to topic through the backend, bypassing the codec
// and the payload-type header.
func publishRaw(t testing.TB, c *tributary.Cluster, topic string, p int32, m engine.Message) int64 {
	t.Helper()
	bt, _, err := c.Backend().OpenTopic(topic)
	if err != nil {
		t.Fatal(err)
	}
	off, err := bt.TryPublish(p, m)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// liveSession is the session timeout of these tests, on the fake clock. Its
// heartbeat interval (HeartbeatInterval: a third of it) is real time.
const liveSession = 300 * time.Millisecond

// liveCluster is a cluster on a fake clock with session timeout
// liveSession.
func liveCluster(t *testing.T) (*tributary.Cluster, *testclock.Clock) {
	t.Helper()
	clock := testclock.New()
	return testCluster(t, 100, engine.WithClock(clock.Now), engine.WithSessionTimeout(liveSession)), clock
}

// lastSeen returns member's last-seen instant in group of topic, and
// whether it is a member.
func lastSeen(t *testing.T, c *tributary.Cluster, topic, group, member string) (time.Time, bool) {
	t.Helper()
	g := groupDesc(t, c, topic, group)
	i := slices.Index(g.Members, member)
	if i < 0 {
		return time.Time{}, false
	}
	if len(g.LastSeen) != len(g.Members) {
		t.Fatalf("LastSeen %v for members %v", g.LastSeen, g.Members)
	}
	return g.LastSeen[i], true
}

// awaitHeartbeats waits until each member has been seen at the clock's
// reading: a heartbeat (or another call of its own) since the clock last
// moved. It fails when one is not a member.
func awaitHeartbeats(t *testing.T, c *tributary.Cluster, clock *testclock.Clock, topic, group string, members ...string) {
	t.Helper()
	now := clock.Now()
	for _, m := range members {
		waitFor(t, fmt.Sprintf("%s to heartbeat at %v", m, now), func() bool {
			seen, ok := lastSeen(t, c, topic, group, m)
			if !ok {
				t.Fatalf("%s is no longer a member of %s", m, group)
			}
			return !seen.Before(now)
		})
	}
}

// fastRetry keeps Run's retries quick in tests.
var fastRetry = tributary.WithBackoff(time.Millisecond, 4*time.Millisecond)

// runConsumer runs cons.Run(ctx, h) on a goroutine; the returned function
// cancels it and returns Run's error.
func runConsumer[T any](t testing.TB, cons *tributary.Consumer[T], h tributary.Handler[T]) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := goResult(func() (struct{}, error) { return struct{}{}, cons.Run(ctx, h) })
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = awaitResult(t, "Run after cancel", done).err
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// committedAll is the group g's committed offset of every partition of topic t.
func committedAll(t *testing.T, c *tributary.Cluster, g string) []int64 {
	t.Helper()
	d, err := c.Describe("t")
	if err != nil {
		t.Fatal(err)
	}
	for _, gr := range d.Groups {
		if gr.Group == g {
			out := make([]int64, len(gr.Partitions))
			for i, p := range gr.Partitions {
				out[i] = p.Committed
			}
			return out
		}
	}
	return nil
}
