package tributarywm_test

// The adapter's mapping and semantics: UUID, metadata, payload and delivery
// context round-trip, bad input and config refused, one message in flight
// per partition, Nack and NackResendSleep, groups, ephemeral groups,
// SubscribeInitialize's retention, the assignor, Publish on a full
// partition, Close and Cluster.Close, and the logged partition count.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

func TestRoundTripKeepsUUIDMetadataPayloadAndDelivery(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{
		Partitions:   4,
		PartitionKey: func(_ string, m *message.Message) (string, error) { return m.Metadata.Get("key"), nil },
	})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "billing"})
	msg := message.NewMessage("uuid-1", []byte("payload"))
	msg.Metadata.Set("key", "customer-7")
	msg.Metadata.Set("b", "2")
	msg.Metadata.Set("a", "")
	require.NoError(t, pub.Publish("orders", msg))
	msg.Payload[0] = 'X' // the broker has its own copy

	ch, err := sub.Subscribe(context.Background(), "orders")
	require.NoError(t, err)
	got := receive(t, ch)
	assert.Equal(t, "uuid-1", got.UUID)
	assert.Equal(t, "payload", string(got.Payload))
	assert.Equal(t, message.Metadata{"key": "customer-7", "b": "2", "a": ""}, got.Metadata)
	d, ok := tributarywm.DeliveryFromContext(got.Context())
	require.True(t, ok)
	wpart := (tributary.Murmur2("customer-7") & 0x7fffffff) % 4
	assert.Equal(t, tributarywm.Delivery{
		Topic: "orders", Partition: wpart, Offset: 0, Attempt: 1, Key: "customer-7",
		Time: d.Time, Group: "billing", Member: d.Member,
	}, d)
	assert.False(t, d.Time.IsZero())
	require.True(t, got.Ack())
	select {
	case <-got.Context().Done():
	case <-time.After(wait):
		t.Fatal("message context not cancelled after Ack")
	}

	snap, err := mustTopic(t, c, "orders").Snapshot()
	require.NoError(t, err)
	require.Len(t, snap.Messages[wpart], 0, "acked by the only group: removed")
}

// mustTopic opens the adapter's Bytes topic name.
func mustTopic(t *testing.T, c *tributary.Cluster, name string) *tributary.Topic[[]byte] {
	t.Helper()
	tp, err := tributary.OpenTopic(c, name, tributary.Bytes())
	require.NoError(t, err)
	return tp
}

func TestHeadersStoredInKeyOrderAfterUUID(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	msg := message.NewMessage("u", nil)
	for _, k := range []string{"z", "m", "a"} {
		msg.Metadata.Set(k, k+k)
	}
	require.NoError(t, pub.Publish("t", msg))
	snap, err := mustTopic(t, c, "t").Snapshot()
	require.NoError(t, err)
	require.Len(t, snap.Messages[0], 1)
	assert.Equal(t, []tributary.Header{{Key: tributarywm.HeaderUUID, Value: "u"}, {Key: "a", Value: "aa"}, {Key: "m", Value: "mm"}, {Key: "z", Value: "zz"}},
		snap.Messages[0][0].Headers)
	assert.Equal(t, "", snap.Messages[0][0].Payload, "nil payload stored empty")
}

func TestTypedProducerMessageGetsItsIDAsUUID(t *testing.T) {
	c := newCluster(t, 10)
	tp, err := tributary.CreateTopic(c, "raw", 1, tributary.Bytes())
	require.NoError(t, err)
	prod, err := tributary.NewProducer[[]byte](c, "p", tributary.RoundRobin())
	require.NoError(t, err)
	sent, err := prod.TrySend(tp, tributary.Message[[]byte]{Value: []byte("v"), Headers: []tributary.Header{{Key: "h", Value: "1"}}})
	require.NoError(t, err)
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	ch, err := sub.Subscribe(context.Background(), "raw")
	require.NoError(t, err)
	got := receive(t, ch)
	assert.Equal(t, sent.ID, got.UUID)
	assert.Equal(t, message.Metadata{"h": "1"}, got.Metadata)
	got.Ack()
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	c := newCluster(t, 10)
	_, err := tributary.CreateTopic(c, "strings", 1, tributary.String())
	require.NoError(t, err)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})

	for _, name := range []string{"", "orders.created", "ünïcode", string(make([]byte, 65))} {
		err := pub.Publish(name, message.NewMessage("u", nil))
		assert.ErrorIs(t, err, tributary.ErrInvalidArgument, "publish to %q", name)
		_, err = sub.Subscribe(context.Background(), name)
		assert.ErrorIs(t, err, tributary.ErrInvalidArgument, "subscribe to %q", name)
		assert.ErrorIs(t, sub.SubscribeInitialize(name), tributary.ErrInvalidArgument, "initialize %q", name)
	}
	assert.ErrorIs(t, pub.Publish("strings", message.NewMessage("u", nil)), tributary.ErrTypeMismatch)
	_, err = sub.Subscribe(context.Background(), "strings")
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)

	reserved := message.NewMessage("u", nil)
	reserved.Metadata.Set(tributarywm.HeaderUUID, "x")
	assert.ErrorIs(t, pub.Publish("ok", reserved), tributary.ErrInvalidArgument)
	reserved = message.NewMessage("u", nil)
	reserved.Metadata.Set(tributary.HeaderPayloadType, "x")
	assert.ErrorIs(t, pub.Publish("ok", reserved), tributary.ErrInvalidArgument)

	keyErr := errors.New("no key")
	bad := newPublisher(t, c, tributarywm.PublisherConfig{PartitionKey: func(string, *message.Message) (string, error) { return "", keyErr }})
	assert.ErrorIs(t, bad.Publish("ok", message.NewMessage("u", nil)), keyErr)

	//lint:ignore SA1012 a nil context on purpose: Subscribe must refuse it
	_, err = sub.Subscribe(nil, "ok")
	assert.ErrorIs(t, err, tributary.ErrInvalidArgument)

	// Nothing was published to "ok", and only "ok" and "strings" exist.
	assert.Equal(t, []string{"ok", "strings"}, c.Topics())
	snap, err := mustTopic(t, c, "ok").Snapshot()
	require.NoError(t, err)
	assert.Empty(t, snap.Messages[0])
}

func TestConfigErrors(t *testing.T) {
	c := newCluster(t, 10)
	for _, p := range []int32{-1, 65} {
		_, err := tributarywm.NewPublisher(c, tributarywm.PublisherConfig{Partitions: p}, nil)
		assert.ErrorIs(t, err, tributary.ErrInvalidArgument, "publisher partitions %d", p)
		_, err = tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{Partitions: p}, nil)
		assert.ErrorIs(t, err, tributary.ErrInvalidArgument, "subscriber partitions %d", p)
	}
	for _, cfg := range []tributarywm.SubscriberConfig{
		{ConsumerGroup: "bad group"},
		{ConsumerGroup: "g", Ephemeral: true},
		{NackResendSleep: -2},
	} {
		_, err := tributarywm.NewSubscriber(c, cfg, nil)
		assert.ErrorIs(t, err, tributary.ErrInvalidArgument, "%+v", cfg)
	}
	_, err := tributarywm.NewPublisher(nil, tributarywm.PublisherConfig{}, nil)
	assert.ErrorIs(t, err, tributary.ErrInvalidArgument)
	_, err = tributarywm.NewSubscriber(nil, tributarywm.SubscriberConfig{}, nil)
	assert.ErrorIs(t, err, tributary.ErrInvalidArgument)
	assert.Empty(t, c.Producers(), "refused publishers register nothing")
}

// A partition holds its next message until the handed-out one is acked;
// another partition's message flows meanwhile.
func TestOneMessageInFlightPerPartition(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{
		Partitions:   2,
		PartitionKey: func(_ string, m *message.Message) (string, error) { return string(m.Payload), nil },
	})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	// Two keys that hash to different partitions of 2.
	k0, k1 := keyFor(0, 2), keyFor(1, 2)
	for _, k := range []string{k0, k0, k1} {
		require.NoError(t, pub.Publish("t", message.NewMessage(k+"-"+fmt.Sprint(time.Now().UnixNano()), []byte(k))))
	}
	ch, err := sub.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	a, b := receive(t, ch), receive(t, ch)
	assert.ElementsMatch(t, []string{k0, k1}, []string{string(a.Payload), string(b.Payload)}, "one message of each partition")
	quiet(t, ch, 200*time.Millisecond) // partition 0's second message waits for its ack
	first0 := a
	if string(b.Payload) == k0 {
		first0 = b
	}
	first0.Ack()
	second := receive(t, ch)
	assert.Equal(t, k0, string(second.Payload))
	d, _ := tributarywm.DeliveryFromContext(second.Context())
	assert.Equal(t, int64(1), d.Offset)
}

// keyFor returns a key that tributary.KeyHash sends to partition p of n.
func keyFor(p, n int32) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		if (tributary.Murmur2(k)&0x7fffffff)%n == p {
			return k
		}
	}
}

func TestNackRedeliversWithNextAttempt(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{NackResendSleep: tributarywm.NoSleep})
	require.NoError(t, pub.Publish("t", message.NewMessage("u1", []byte("a")), message.NewMessage("u2", []byte("b"))))
	ch, err := sub.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	for attempt := int32(1); attempt <= 3; attempt++ {
		m := receive(t, ch)
		require.Equal(t, "u1", m.UUID, "the nacked message comes back before the next one")
		d, _ := tributarywm.DeliveryFromContext(m.Context())
		require.Equal(t, attempt, d.Attempt)
		m.Nack()
		select {
		case <-m.Context().Done():
		case <-time.After(wait):
			t.Fatal("message context not cancelled after Nack")
		}
	}
	m := receive(t, ch)
	require.Equal(t, "u1", m.UUID)
	m.Ack()
	assert.Equal(t, "u2", receive(t, ch).UUID)
}

// With a NackResendSleep the partition stays held: the message comes back
// no sooner than the sleep.
func TestNackResendSleepHoldsThePartition(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	const sleep = 300 * time.Millisecond
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{NackResendSleep: sleep})
	require.NoError(t, pub.Publish("t", message.NewMessage("u1", nil)))
	ch, err := sub.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	m := receive(t, ch)
	nacked := time.Now()
	m.Nack()
	again := receive(t, ch)
	assert.Equal(t, "u1", again.UUID)
	assert.GreaterOrEqual(t, time.Since(nacked), sleep)
}

func TestGroupsShareAndEachGroupSeesAll(t *testing.T) {
	c := newCluster(t, 100)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 4})
	// The first Subscribe creates the topic: with its Partitions.
	g1a := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g1", Partitions: 4})
	g1b := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g1"})
	g2 := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g2"})
	cha, err := g1a.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	chb, err := g1b.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	ch2, err := g2.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	const n = 40
	for i := range n {
		require.NoError(t, pub.Publish("t", message.NewMessage(fmt.Sprint(i), nil)))
	}
	seen1, seen2 := map[string]string{}, map[string]bool{}
	members := map[string]bool{}
	deadline := time.After(wait)
	for len(seen1) < n || len(seen2) < n {
		var m *message.Message
		var who string
		select {
		case m = <-cha:
			who = "a"
		case m = <-chb:
			who = "b"
		case m = <-ch2:
			seen2[m.UUID] = true
			m.Ack()
			continue
		case <-deadline:
			t.Fatalf("group g1 got %d, g2 got %d of %d", len(seen1), len(seen2), n)
		}
		prev, dup := seen1[m.UUID]
		require.False(t, dup, "g1 got %s twice (from %s and %s)", m.UUID, prev, who)
		seen1[m.UUID] = who
		members[who] = true
		d, _ := tributarywm.DeliveryFromContext(m.Context())
		assert.Equal(t, "g1", d.Group)
		m.Ack()
	}
	assert.Len(t, members, 2, "both members of g1 got partitions: %v", seen1)
	desc, err := c.Describe("t")
	require.NoError(t, err)
	for _, g := range desc.Groups {
		assert.Len(t, g.Members, map[string]int{"g1": 2, "g2": 1}[g.Group], g.Group)
	}
}

func TestSubscriptionEndLeavesGroupAndClosesChannel(t *testing.T) {
	c := newCluster(t, 10)
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g"})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := sub.Subscribe(ctx, "t")
	require.NoError(t, err)
	ch2, err := sub.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	require.Equal(t, 2, members(t, c, "t", "g"))
	cancel()
	closedWithin(t, ch)
	require.Equal(t, 1, members(t, c, "t", "g"), "the cancelled subscription left")
	require.NoError(t, sub.Close())
	closedWithin(t, ch2)
	require.Equal(t, 0, members(t, c, "t", "g"))
	require.NoError(t, sub.Close(), "second Close")
	_, err = sub.Subscribe(context.Background(), "t")
	assert.ErrorIs(t, err, tributarywm.ErrClosed)
	assert.ErrorIs(t, sub.SubscribeInitialize("t"), tributarywm.ErrClosed)
}

func TestCloseCancelsHandedOutMessagesAndRedelivers(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	require.NoError(t, pub.Publish("t", message.NewMessage("u1", nil)))
	ch, err := sub.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	m := receive(t, ch)
	require.NoError(t, sub.Close())
	select {
	case <-m.Context().Done():
	default:
		t.Fatal("handed-out message's context not cancelled by Close")
	}
	m.Ack() // too late: does nothing

	again := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	ch, err = again.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	m = receive(t, ch)
	assert.Equal(t, "u1", m.UUID)
	d, _ := tributarywm.DeliveryFromContext(m.Context())
	assert.Equal(t, int32(2), d.Attempt)
}

func TestEphemeralReadsFromLogStartAndDeletesItsGroup(t *testing.T) {
	c := newCluster(t, 10, engine.WithReplayWindow(10))
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	durable := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "durable"})
	dch, err := durable.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	require.NoError(t, pub.Publish("t", message.NewMessage("u1", nil), message.NewMessage("u2", nil)))
	receive(t, dch).Ack()
	receive(t, dch).Ack() // fully committed: kept only as the replay window

	eph := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := eph.Subscribe(ctx, "t")
	require.NoError(t, err)
	var got []string
	for range 2 {
		m := receive(t, ch)
		got = append(got, m.UUID)
		d, _ := tributarywm.DeliveryFromContext(m.Context())
		assert.Contains(t, d.Group, "wm-eph-")
		m.Ack()
	}
	assert.Equal(t, []string{"u1", "u2"}, got)
	d, err := c.Describe("t")
	require.NoError(t, err)
	require.Len(t, d.Groups, 2)
	cancel()
	closedWithin(t, ch)
	d, err = c.Describe("t")
	require.NoError(t, err)
	names := []string{}
	for _, g := range d.Groups {
		names = append(names, g.Group)
	}
	assert.Equal(t, []string{"durable"}, names, "the ephemeral group is deleted")
}

// SubscribeInitialize creates the group, so it holds retention before its
// first Subscribe: another group's acks do not remove its messages.
func TestSubscribeInitializeHoldsRetention(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	late := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "late"})
	require.NoError(t, late.SubscribeInitialize("t"))
	early := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "early"})
	ech, err := early.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	require.NoError(t, pub.Publish("t", message.NewMessage("u1", nil)))
	receive(t, ech).Ack()
	lch, err := late.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	assert.Equal(t, "u1", receive(t, lch).UUID)
}

func TestSubscriberAssignorIsUsedForNewGroups(t *testing.T) {
	c := newCluster(t, 10)
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g", Assignor: engine.Sticky, Partitions: 3})
	require.NoError(t, sub.SubscribeInitialize("t"))
	d, err := c.Describe("t")
	require.NoError(t, err)
	require.Len(t, d.Groups, 1)
	assert.Equal(t, engine.Sticky.Name(), d.Groups[0].Assignor)
	assert.Len(t, d.Partitions, 3)
}

// A full partition makes Publish wait; an ack frees room and the publish
// completes. A message context that ends, or Close, ends the wait with
// nothing published.
func TestPublishWaitsOnFullPartition(t *testing.T) {
	c := newCluster(t, 2)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	require.NoError(t, sub.SubscribeInitialize("t"))
	require.NoError(t, pub.Publish("t", message.NewMessage("u1", nil), message.NewMessage("u2", nil)))

	timed := message.NewMessage("u3", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	timed.SetContext(ctx)
	assert.ErrorIs(t, pub.Publish("t", timed), context.DeadlineExceeded)

	closing := newPublisher(t, c, tributarywm.PublisherConfig{})
	done := make(chan error, 1)
	go func() { done <- closing.Publish("t", message.NewMessage("u4", nil)) }()
	time.Sleep(50 * time.Millisecond) // let it reach the wait (either way the result is ErrClosed)
	require.NoError(t, closing.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, tributarywm.ErrClosed)
	case <-time.After(wait):
		t.Fatal("Close did not end a waiting Publish")
	}
	assert.ErrorIs(t, closing.Publish("t", message.NewMessage("u5", nil)), tributarywm.ErrClosed)

	go func() { done <- pub.Publish("t", message.NewMessage("u6", nil)) }()
	ch, err := sub.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	var got []string
	for len(got) < 3 {
		m := receive(t, ch)
		got = append(got, m.UUID)
		m.Ack()
	}
	require.NoError(t, <-done)
	assert.Equal(t, []string{"u1", "u2", "u6"}, got, "u3, u4 and u5 were never published")
}

func TestDeliveryFromContextOfOtherContexts(t *testing.T) {
	_, ok := tributarywm.DeliveryFromContext(context.Background())
	assert.False(t, ok)
	m := message.NewMessage("u", nil)
	_, ok = tributarywm.DeliveryFromContext(m.Context())
	assert.False(t, ok)
}

func TestClusterCloseEndsSubscriptions(t *testing.T) {
	c := newCluster(t, 10)
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	ch, err := sub.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	require.NoError(t, c.Close())
	closedWithin(t, ch)
	require.NoError(t, sub.Close())
}

func TestNilMessageRefused(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	err := pub.Publish("t", message.NewMessage("u1", nil), nil, message.NewMessage("u3", nil))
	require.ErrorIs(t, err, tributary.ErrInvalidArgument)
	snap, err := mustTopic(t, c, "t").Snapshot()
	require.NoError(t, err)
	require.Len(t, snap.Messages[0], 1, "the message before the nil one is published, the one after is not")
}

// A topic keeps the partition count of whoever created it; a publisher
// configured with another count logs it once.
func TestPartitionCountOfExistingTopicIsLogged(t *testing.T) {
	c := newCluster(t, 10)
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	require.NoError(t, sub.SubscribeInitialize("t")) // 1 partition
	logs := &captureLogger{}
	pub, err := tributarywm.NewPublisher(c, tributarywm.PublisherConfig{Partitions: 4}, logs)
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.Publish("t", message.NewMessage("u1", nil)))
	require.NoError(t, pub.Publish("t", message.NewMessage("u2", nil)))
	assert.Equal(t, 1, logs.count("Topic exists with another partition count"), "logged once")
	d, err := c.Describe("t")
	require.NoError(t, err)
	assert.Len(t, d.Partitions, 1)
}

// captureLogger is a watermill.LoggerAdapter that keeps Info messages.
type captureLogger struct {
	mu   sync.Mutex
	info []string
}

func (l *captureLogger) Error(string, error, watermill.LogFields) {}
func (l *captureLogger) Info(msg string, _ watermill.LogFields) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info = append(l.info, msg)
}
func (l *captureLogger) Debug(string, watermill.LogFields)                {}
func (l *captureLogger) Trace(string, watermill.LogFields)                {}
func (l *captureLogger) With(watermill.LogFields) watermill.LoggerAdapter { return l }

func (l *captureLogger) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.info {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}
