package tributarywm_test

// The helpers of this package's tests: a cluster, publisher and subscriber
// closed with their test, waits for messages, descriptions and conditions
// bounded by wait, and the checkers of a subscription's hand-offs.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

const wait = 10 * time.Second // the longest any test waits for an event that must come

// newCluster returns a cluster of capacity records per partition, closed at
// the test's end.
func newCluster(t *testing.T, capacity int32, opts ...engine.Option) *tributary.Cluster {
	t.Helper()
	c, err := tributary.NewCluster(capacity, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// newPublisher returns a publisher on c, closed at the test's end.
func newPublisher(t *testing.T, c *tributary.Cluster, cfg tributarywm.PublisherConfig) *tributarywm.Publisher {
	t.Helper()
	p, err := tributarywm.NewPublisher(c, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// newSubscriber returns a subscriber on c, closed at the test's end.
func newSubscriber(t *testing.T, c *tributary.Cluster, cfg tributarywm.SubscriberConfig) *tributarywm.Subscriber {
	t.Helper()
	s, err := tributarywm.NewSubscriber(c, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// receive returns the next message of ch, failing the test after wait.
func receive(t *testing.T, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		require.True(t, ok, "channel closed")
		return m
	case <-time.After(wait):
		t.Fatal("no message")
		return nil
	}
}

// quiet fails the test if ch delivers a message within d.
func quiet(t *testing.T, ch <-chan *message.Message, d time.Duration) {
	t.Helper()
	select {
	case m, ok := <-ch:
		if ok {
			t.Fatalf("unexpected message %s (payload %q)", m.UUID, m.Payload)
		}
		t.Fatal("channel closed")
	case <-time.After(d):
	}
}

// closedWithin drains ch until it is closed, failing the test after wait.
func closedWithin(t *testing.T, ch <-chan *message.Message) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel not closed")
		}
	}
}

// eventually waits until cond holds, polling every 5 ms, failing the test
// after wait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", wait, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// describe returns topic's description, failing the test on error.
func describe(t *testing.T, c *tributary.Cluster, topic string) engine.TopicDescription {
	t.Helper()
	d, err := c.Describe(topic)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// groupOf returns group's description in d; false when d has no such
// group.
func groupOf(d engine.TopicDescription, group string) (engine.GroupDescription, bool) {
	for _, g := range d.Groups {
		if g.Group == group {
			return g, true
		}
	}
	return engine.GroupDescription{}, false
}

// newMsg returns a message of payload with a fresh UUID.
func newMsg(payload string) *message.Message {
	return message.NewMessage(watermill.NewUUID(), []byte(payload))
}

// deliveryOf returns the Delivery that m's context carries, failing the
// test when it carries none.
func deliveryOf(t *testing.T, m *message.Message) tributarywm.Delivery {
	t.Helper()
	d, ok := tributarywm.DeliveryFromContext(m.Context())
	if !ok {
		t.Fatal("message context carries no Delivery")
	}
	return d
}

// ctxDone fails the test unless ctx (a message's context) is cancelled
// within wait; what names the event that should have cancelled it.
func ctxDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(wait):
		t.Fatalf("message context not cancelled within %v %s", wait, what)
	}
}

// resultWithin returns the error of an asynchronous Publish from ch,
// failing the test when none comes within wait.
func resultWithin(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(wait):
		t.Fatal("Publish did not return within", wait)
	}
	return nil
}

// noResultFor fails the test when an asynchronous Publish on a full
// partition returns on ch within d.
func noResultFor(t *testing.T, ch <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("Publish on a full partition returned early: %v", err)
	case <-time.After(d):
	}
}

// waitDrained waits until group has committed every record of topic and has
// nothing in flight, acking whatever arrives on chans meanwhile. A record
// left in flight to a subscription with no goroutine delivering it keeps
// its partition blocked for ever (no ack timeout): the wait then fails.
func waitDrained(t *testing.T, c *tributary.Cluster, topic, group string, limit time.Duration, chans ...<-chan *message.Message) {
	t.Helper()
	merged := make(chan *message.Message)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case m, ok := <-ch:
					if !ok {
						return
					}
					select {
					case merged <- m:
					case <-stop:
						m.Ack()
						return
					}
				case <-stop:
					return
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case m := <-merged:
			m.Ack()
			continue
		case <-tick.C:
		}
		d := describe(t, c, topic)
		g, ok := groupOf(d, group)
		if !ok {
			t.Fatalf("group %s gone", group)
		}
		done := true
		for p, gp := range g.Partitions {
			if gp.Committed != d.Partitions[p].LogEndOffset || gp.InFlight {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not drained within %v (a record stuck in flight?): %+v; log %+v", group, limit, g.Partitions, d.Partitions)
		}
	}
}

// handOffChecker checks, per partition of one subscription with no rebalance,
// no Seek and no ack timeout, SPEC rule 10 as the handler sees it: a
// delivery arrives only when the partition's previous one is settled, at
// the offset after the last acked one (or the nacked one again, attempt
// + 1).
type handOffChecker struct {
	mu       sync.Mutex
	out      map[int32]bool  // a delivery is unsettled
	next     map[int32]int64 // the offset the next delivery must have
	attempt  map[int32]int32 // the attempt of the last delivery
	nacked   map[int32]bool  // the last delivery was nacked
	acked    int
	problems []string
}

func newHandOffChecker() *handOffChecker {
	return &handOffChecker{out: map[int32]bool{}, next: map[int32]int64{}, attempt: map[int32]int32{}, nacked: map[int32]bool{}}
}

func (k *handOffChecker) problem(format string, args ...any) {
	if len(k.problems) < 20 {
		k.problems = append(k.problems, fmt.Sprintf(format, args...))
	}
}

func (k *handOffChecker) delivered(d tributarywm.Delivery) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := d.Partition
	if k.out[p] {
		k.problem("p%d: offset %d (attempt %d) delivered while the partition's previous delivery is unsettled", p, d.Offset, d.Attempt)
	}
	k.out[p] = true
	if d.Offset != k.next[p] {
		k.problem("p%d: offset %d (attempt %d) delivered, want offset %d", p, d.Offset, d.Attempt, k.next[p])
	}
	want := int32(1)
	if k.nacked[p] {
		want = k.attempt[p] + 1
	}
	if d.Attempt != want {
		k.problem("p%d offset %d: attempt %d, want %d", p, d.Offset, d.Attempt, want)
	}
	k.attempt[p] = d.Attempt
}

// settling records the handler's decision before it calls Ack or Nack.
func (k *handOffChecker) settling(d tributarywm.Delivery, ack bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.out[d.Partition] = false
	k.nacked[d.Partition] = !ack
	if ack {
		k.next[d.Partition] = d.Offset + 1
		k.acked++
	}
}

// antiSticky gives each partition to a member other than its previous
// owner when the group has one.
type antiSticky struct{}

func (antiSticky) Name() string { return "anti-sticky" }

func (antiSticky) Assign(members, previous []string) []string {
	owner := make([]string, len(previous))
	for p := range owner {
		owner[p] = members[0]
		for _, m := range members {
			if m != previous[p] {
				owner[p] = m
				break
			}
		}
	}
	return owner
}

// members returns the member count of group on topic; -1 when the group
// does not exist.
func members(t *testing.T, c *tributary.Cluster, topic, group string) int {
	t.Helper()
	g, ok := groupOf(describe(t, c, topic), group)
	if !ok {
		return -1
	}
	return len(g.Members)
}
