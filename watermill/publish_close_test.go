package tributarywm_test

// A Publish blocked on a full partition or racing Close: it ends with
// ErrClosed on Publisher.Close or Cluster.Close, with its context's error
// when that ends, and every error of a Publish racing Close is ErrClosed.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// A publish blocked on a full partition returns ErrClosed promptly on
// Publisher.Close; one whose message context ends returns that error.
func TestBlockedPublishEndsOnClose(t *testing.T) {
	c := newCluster(t, 2)
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	if err := sub.SubscribeInitialize("full"); err != nil { // retention: nothing is removed
		t.Fatal(err)
	}
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("full", newMsg("1"), newMsg("2")); err != nil {
		t.Fatal(err)
	}
	// Message context cancelled while blocked.
	ctx, cancel := context.WithCancel(context.Background())
	m := newMsg("ctx")
	m.SetContext(ctx)
	res := make(chan error, 1)
	go func() { res <- pub.Publish("full", m) }()
	noResultFor(t, res, 100*time.Millisecond)
	cancel()
	if err := resultWithin(t, res); !errors.Is(err, context.Canceled) {
		t.Fatalf("publish with cancelled ctx: %v", err)
	}
	// Several publishes blocked, then Close.
	const n = 8
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { errs <- pub.Publish("full", newMsg("blocked")) }()
	}
	noResultFor(t, errs, 100*time.Millisecond)
	pub.Close()
	for i := 0; i < n; i++ {
		if err := resultWithin(t, errs); !errors.Is(err, tributarywm.ErrClosed) {
			t.Fatalf("blocked publish on Close: %v, want ErrClosed", err)
		}
	}
	if got := describe(t, c, "full").Partitions[0].LogEndOffset; got != 2 {
		t.Fatalf("log end %d, want 2", got)
	}
	if err := pub.Publish("full", newMsg("after")); !errors.Is(err, tributarywm.ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
}

// A Publish racing Publisher.Close fails with an error that
// errors.Is(err, tributarywm.ErrClosed), as the doc invites callers to
// test, on the TrySend path too: Publish checks p.closing once at the top,
// and a TrySend that fails because Close has since closed the producer
// must still read as ErrClosed. The race is made deterministic here by
// closing from inside PartitionKey, which runs between the check and
// TrySend.
func TestPublishRacingCloseErrClosed(t *testing.T) {
	c := newCluster(t, 100)
	var pub *tributarywm.Publisher
	pub = newPublisher(t, c, tributarywm.PublisherConfig{PartitionKey: func(_ string, m *message.Message) (string, error) {
		if string(m.Payload) == "close" {
			pub.Close()
		}
		return "", nil
	}})
	err := pub.Publish("racing", newMsg("ok"), newMsg("close"), newMsg("never"))
	if !errors.Is(err, tributarywm.ErrClosed) {
		t.Errorf("Publish racing Close: %v, want tributarywm.ErrClosed", err)
	}
	if got := describe(t, c, "racing").Partitions[0].LogEndOffset; got != 1 {
		t.Errorf("log end %d, want 1", got)
	}
}

// TestPublishRacingCloseErrClosed's race left to the scheduler: many
// publishers, Close in the middle. Every error must be tributarywm.ErrClosed.
func TestPublishRacingCloseStochastic(t *testing.T) {
	c := newCluster(t, 1000)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 8})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	if err := sub.SubscribeInitialize("stoch"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var published atomic.Int64
	bad := make(chan error, 16)
	start := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				err := pub.Publish("stoch", newMsg("m"))
				if err == nil {
					published.Add(1)
					continue
				}
				if !errors.Is(err, tributarywm.ErrClosed) {
					select {
					case bad <- err:
					default:
					}
				}
				return
			}
		}()
	}
	close(start)
	eventually(t, "some publishes", func() bool { return published.Load() > 50 })
	pub.Close()
	wg.Wait()
	close(bad)
	for err := range bad {
		t.Errorf("Publish racing Close: %v, want tributarywm.ErrClosed", err)
	}
	var total int64
	for _, p := range describe(t, c, "stoch").Partitions {
		total += p.LogEndOffset
	}
	if total != published.Load() {
		t.Errorf("log holds %d records, Publish reported %d successes", total, published.Load())
	}
}

// Cluster.Close ends a Publish blocked on a full partition: it closes the
// publisher's producer, and Producer.Close ends a waiting Send. (After
// Cluster.Close no consumer can be created, so nothing would ever ack to
// make room.)
func TestClusterCloseEndsBlockedPublish(t *testing.T) {
	c := newCluster(t, 1)
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	if err := sub.SubscribeInitialize("cfull"); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("cfull", newMsg("1")); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- pub.Publish("cfull", newMsg("blocked")) }()
	noResultFor(t, res, 100*time.Millisecond)
	c.Close()
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("blocked Publish succeeded after Cluster.Close")
		}
	case <-time.After(3 * time.Second):
		t.Error("a Publish blocked on a full partition is still blocked 3s after Cluster.Close closed its producer")
		pub.Close() // release it (no leak)
		if err := resultWithin(t, res); !errors.Is(err, tributarywm.ErrClosed) {
			t.Fatalf("after Publisher.Close: %v", err)
		}
	}
}
