package tributary_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// TestMain fails the package when any test or example leaves a goroutine
// running: consumers, blocked polls, waiting sends and Run's workers must
// all stop with their test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

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
