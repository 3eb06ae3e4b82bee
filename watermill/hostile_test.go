package tributarywm_test

// Hostile tests of the Watermill adapter: races, hostile inputs, semantics
// and resource use. Each test asserts a real outcome; a test that records a
// bug fails (see the comment above it).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

func hEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", wait, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hDescribe(t *testing.T, c *tributary.Cluster, topic string) engine.TopicDescription {
	t.Helper()
	d, err := c.Describe(topic)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func hGroup(d engine.TopicDescription, group string) (engine.GroupDescription, bool) {
	for _, g := range d.Groups {
		if g.Group == group {
			return g, true
		}
	}
	return engine.GroupDescription{}, false
}

func hMsg(payload string) *message.Message {
	return message.NewMessage(watermill.NewUUID(), []byte(payload))
}

func hDelivery(t *testing.T, m *message.Message) tributarywm.Delivery {
	t.Helper()
	d, ok := tributarywm.DeliveryFromContext(m.Context())
	if !ok {
		t.Fatal("message context carries no Delivery")
	}
	return d
}

func hDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(wait):
		t.Fatalf("message context not cancelled within %v %s", wait, what)
	}
}

// ---------------------------------------------------------------------
// Hostile inputs and configuration.

func TestHostileConfigValidation(t *testing.T) {
	c := newCluster(t, 10)
	for _, n := range []int32{-1, 65, 1 << 30} {
		if _, err := tributarywm.NewPublisher(c, tributarywm.PublisherConfig{Partitions: n}, nil); !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Errorf("NewPublisher Partitions %d: err %v, want ErrInvalidArgument", n, err)
		}
		if _, err := tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{Partitions: n}, nil); !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Errorf("NewSubscriber Partitions %d: err %v, want ErrInvalidArgument", n, err)
		}
	}
	bad := []tributarywm.SubscriberConfig{
		{NackResendSleep: -2},
		{NackResendSleep: -time.Hour},
		{ConsumerGroup: "a.b"},
		{ConsumerGroup: strings.Repeat("g", 65)},
		{ConsumerGroup: "grüppe"},
		{ConsumerGroup: "g", Ephemeral: true},
	}
	for _, cfg := range bad {
		if _, err := tributarywm.NewSubscriber(c, cfg, nil); !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Errorf("NewSubscriber %+v: err %v, want ErrInvalidArgument", cfg, err)
		}
	}
	if _, err := tributarywm.NewPublisher(nil, tributarywm.PublisherConfig{}, nil); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Errorf("NewPublisher(nil): %v", err)
	}
	if _, err := tributarywm.NewSubscriber(nil, tributarywm.SubscriberConfig{}, nil); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Errorf("NewSubscriber(nil): %v", err)
	}
	// Valid edges.
	for _, cfg := range []tributarywm.SubscriberConfig{{NackResendSleep: tributarywm.NoSleep}, {Partitions: 64}, {Ephemeral: true}} {
		s, err := tributarywm.NewSubscriber(c, cfg, nil)
		if err != nil {
			t.Errorf("NewSubscriber %+v: %v", cfg, err)
			continue
		}
		s.Close()
	}
	if len(c.Topics()) != 0 {
		t.Errorf("constructors created topics: %v", c.Topics())
	}
}

func TestHostileTopicNames(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	eph := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	for _, name := range []string{"", "a.b", "a b", "../x", "ü", strings.Repeat("t", 65), "t\x00", " t"} {
		if err := pub.Publish(name, hMsg("x")); !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Errorf("Publish %q: err %v, want ErrInvalidArgument", name, err)
		}
		for _, s := range []*tributarywm.Subscriber{sub, eph} {
			ch, err := s.Subscribe(context.Background(), name)
			if !errors.Is(err, tributary.ErrInvalidArgument) || ch != nil {
				t.Errorf("Subscribe %q: ch %v err %v, want ErrInvalidArgument", name, ch, err)
			}
			if err := s.SubscribeInitialize(name); !errors.Is(err, tributary.ErrInvalidArgument) {
				t.Errorf("SubscribeInitialize %q: err %v, want ErrInvalidArgument", name, err)
			}
		}
	}
	if got := c.Topics(); len(got) != 0 {
		t.Fatalf("invalid names created topics %q", got)
	}
	long := strings.Repeat("t", 64)
	if err := pub.Publish(long, hMsg("x")); err != nil {
		t.Fatalf("Publish to a 64-byte name: %v", err)
	}
	ch, err := sub.Subscribe(context.Background(), long)
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	m.Ack()
}

// A topic the typed library created with another codec is refused
// everywhere, and a refused ephemeral Subscribe leaves no group behind.
func TestHostileForeignCodecTopic(t *testing.T) {
	c := newCluster(t, 10)
	if _, err := tributary.CreateTopic(c, "strings", 2, tributary.String()); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("strings", hMsg("x")); !errors.Is(err, tributary.ErrTypeMismatch) {
		t.Errorf("Publish: %v, want ErrTypeMismatch", err)
	}
	for _, cfg := range []tributarywm.SubscriberConfig{{}, {Ephemeral: true}} {
		s := newSubscriber(t, c, cfg)
		if _, err := s.Subscribe(context.Background(), "strings"); !errors.Is(err, tributary.ErrTypeMismatch) {
			t.Errorf("Subscribe %+v: %v, want ErrTypeMismatch", cfg, err)
		}
		if err := s.SubscribeInitialize("strings"); !errors.Is(err, tributary.ErrTypeMismatch) {
			t.Errorf("SubscribeInitialize %+v: %v, want ErrTypeMismatch", cfg, err)
		}
	}
	d := hDescribe(t, c, "strings")
	if len(d.Groups) != 0 || d.Partitions[0].LogEndOffset != 0 || d.Partitions[1].LogEndOffset != 0 {
		t.Fatalf("refused calls changed the topic: %+v", d)
	}
}

// A topic created by the typed library with the Bytes codec is usable, and
// messages without the UUID header get the message ID as UUID.
func TestHostileTypedBytesTopicInterop(t *testing.T) {
	c := newCluster(t, 10)
	tp, err := tributary.CreateTopic(c, "raw", 1, tributary.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	prod, err := tributary.NewProducer[[]byte](c, "typed", tributary.RoundRobin())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Send(context.Background(), tp, tributary.Message[[]byte]{Value: []byte("v"), Headers: []tributary.Header{{Key: "k", Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	ch, err := sub.Subscribe(context.Background(), "raw")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	if m.UUID != "0-0" || string(m.Payload) != "v" || m.Metadata.Get("k") != "1" || len(m.Metadata) != 1 {
		t.Fatalf("got uuid %q payload %q metadata %v", m.UUID, m.Payload, m.Metadata)
	}
	m.Ack()
}

// Reserved metadata keys are refused, and Publish stops at the first bad
// message: the ones before it are published, the rest are not.
func TestHostileReservedMetadata(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	for _, key := range []string{tributarywm.HeaderUUID, tributary.HeaderPayloadType} {
		bad := hMsg("bad")
		bad.Metadata.Set(key, "x")
		err := pub.Publish("reserved", hMsg("ok1"), bad, hMsg("ok2"))
		if !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Errorf("metadata %q: err %v, want ErrInvalidArgument", key, err)
		}
	}
	d := hDescribe(t, c, "reserved")
	if got := d.Partitions[0].LogEndOffset; got != 2 {
		t.Fatalf("published %d records, want 2 (ok1 before each bad message, nothing after)", got)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{NackResendSleep: tributarywm.NoSleep})
	ch, err := sub.Subscribe(context.Background(), "reserved")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		m := receive(t, ch)
		if string(m.Payload) != "ok1" {
			t.Fatalf("message %d: payload %q, want ok1", i, m.Payload)
		}
		m.Ack()
	}
}

// Odd but valid messages round-trip: nil payload, binary payload, empty and
// unicode metadata, the payload-type header stripped, the payload copied.
func TestHostileOddMessagesRoundTrip(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	nilMsg := message.NewMessage(watermill.NewUUID(), nil)
	bin := []byte{0, 0xff, 0xfe, '\n', 0}
	binMsg := message.NewMessage(watermill.NewUUID(), bin)
	binMsg.Metadata.Set("", "empty key")
	binMsg.Metadata.Set("ключ", "значение\x00")
	binMsg.Metadata.Set("empty", "")
	if err := pub.Publish("odd", nilMsg, binMsg); err != nil {
		t.Fatal(err)
	}
	bin[0] = 'X' // the publisher must have copied it
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	ch, err := sub.Subscribe(context.Background(), "odd")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	if m.UUID != nilMsg.UUID || len(m.Payload) != 0 || len(m.Metadata) != 0 {
		t.Errorf("nil payload: uuid %q payload %q metadata %v", m.UUID, m.Payload, m.Metadata)
	}
	m.Ack()
	m = receive(t, ch)
	if m.UUID != binMsg.UUID || string(m.Payload) != "\x00\xff\xfe\n\x00" {
		t.Errorf("binary: uuid %q payload %q", m.UUID, m.Payload)
	}
	want := map[string]string{"": "empty key", "ключ": "значение\x00", "empty": ""}
	if len(m.Metadata) != len(want) {
		t.Errorf("metadata %q, want %q", m.Metadata, want)
	}
	for k, v := range want {
		if got, ok := m.Metadata[k]; !ok || got != v {
			t.Errorf("metadata[%q] = %q, %v; want %q", k, got, ok, v)
		}
	}
	m.Ack()
}

// A message whose UUID is "" comes back with the UUID "": the package doc
// says the UUID travels in HeaderUUID, and toWatermill tells a header with
// the value "" from an absent header (which falls back to
// "<partition>-<offset>").
func TestHostileEmptyUUIDRoundTrip(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("empty-uuid", message.NewMessage("", []byte("p"))); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	ch, err := sub.Subscribe(context.Background(), "empty-uuid")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	m.Ack()
	if m.UUID != "" {
		t.Errorf("published UUID \"\", received UUID %q: the empty UUID header was replaced by the message ID", m.UUID)
	}
}

func TestHostileMaxMessageBytes(t *testing.T) {
	c := newCluster(t, 10, engine.WithMaxMessageBytes(200))
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("max", hMsg(strings.Repeat("x", 201))); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Fatalf("oversized payload: %v, want ErrInvalidArgument", err)
	}
	big := hMsg("x")
	big.Metadata.Set("m", strings.Repeat("y", 300))
	if err := pub.Publish("max", big); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Fatalf("oversized metadata: %v, want ErrInvalidArgument", err)
	}
	if got := hDescribe(t, c, "max").Partitions[0].LogEndOffset; got != 0 {
		t.Fatalf("oversized messages published %d records", got)
	}
	if err := pub.Publish("max", hMsg(strings.Repeat("x", 50))); err != nil {
		t.Fatalf("small message: %v", err)
	}
}

// A PartitionKey that errors, or panics, fails that message only (with
// tributary.ErrPartitioner) and leaves the publisher usable.
func TestHostilePartitionKeyFailures(t *testing.T) {
	c := newCluster(t, 10)
	boom := errors.New("boom")
	var mode atomic.Int32
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 4, PartitionKey: func(_ string, m *message.Message) (string, error) {
		switch mode.Load() {
		case 1:
			return "", boom
		case 2:
			panic("partition key panic")
		}
		return m.Metadata.Get("k"), nil
	}})
	mode.Store(1)
	if err := pub.Publish("pk", hMsg("a")); !errors.Is(err, boom) || !errors.Is(err, tributary.ErrPartitioner) {
		t.Fatalf("PartitionKey error: %v", err)
	}
	mode.Store(2)
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("a panicking PartitionKey panicked Publish: %v", p)
			}
		}()
		err := pub.Publish("pk", hMsg("b"))
		if !errors.Is(err, tributary.ErrPartitioner) || !strings.Contains(err.Error(), "PartitionKey panicked: partition key panic") {
			t.Errorf("Publish with a panicking PartitionKey: %v, want ErrPartitioner saying it panicked", err)
		}
	}()
	mode.Store(0)
	m := hMsg("c")
	m.Metadata.Set("k", "key")
	if err := pub.Publish("pk", m); err != nil {
		t.Fatalf("publisher unusable after PartitionKey panic: %v", err)
	}
	var total int64
	for _, p := range hDescribe(t, c, "pk").Partitions {
		total += p.LogEndOffset
	}
	if total != 1 {
		t.Fatalf("%d records published, want 1", total)
	}
}

// Subscribe(nil, topic) returns ErrInvalidArgument before it joins the
// group: it leaves no member (which would hold partitions and retention
// for ever), no registration in the cluster and no ephemeral group behind,
// and does not panic ("cannot create context from nil parent").
func TestHostileSubscribeNilContext(t *testing.T) {
	for _, eph := range []bool{false, true} {
		t.Run(fmt.Sprintf("ephemeral=%v", eph), func(t *testing.T) {
			c := newCluster(t, 10)
			sub := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: eph})
			var (
				ch       <-chan *message.Message
				err      error
				panicked any
			)
			func() {
				defer func() { panicked = recover() }()
				//lint:ignore SA1012 hostile input
				ch, err = sub.Subscribe(nil, "nilctx") //nolint:staticcheck
			}()
			if panicked != nil {
				t.Errorf("Subscribe(nil ctx) panicked: %v (want ErrInvalidArgument)", panicked)
			} else if err == nil {
				closedWithin(t, ch)
				t.Errorf("Subscribe(nil ctx) succeeded, want ErrInvalidArgument")
			} else if !errors.Is(err, tributary.ErrInvalidArgument) {
				t.Errorf("Subscribe(nil ctx): %v, want ErrInvalidArgument", err)
			}
			if got := c.Consumers(); len(got) != 0 {
				t.Errorf("consumers left registered after Subscribe(nil): %v", got)
			}
			d, err := c.Describe("nilctx")
			if err != nil { // a refused Subscribe need not create the topic
				if !errors.Is(err, tributary.ErrInvalidArgument) {
					t.Fatal(err)
				}
				return
			}
			for _, g := range d.Groups {
				if len(g.Members) != 0 {
					t.Errorf("group %q keeps members %v after Subscribe(nil)", g.Group, g.Members)
				}
				if eph {
					t.Errorf("ephemeral group %q left behind after Subscribe(nil)", g.Group)
				}
			}
		})
	}
}

// ---------------------------------------------------------------------
// Semantics.

func TestHostileDeliveryAndNackNoSleep(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 3, PartitionKey: func(_ string, m *message.Message) (string, error) {
		return "same-key", nil
	}})
	for i := 0; i < 3; i++ {
		if err := pub.Publish("dlv", hMsg(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	part := tributary.Murmur2("same-key") & 0x7fffffff % 3
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g", NackResendSleep: tributarywm.NoSleep})
	ch, err := sub.Subscribe(context.Background(), "dlv")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	d := hDelivery(t, m)
	if string(m.Payload) != "0" || d.Topic != "dlv" || d.Partition != part || d.Offset != 0 || d.Attempt != 1 || d.Key != "same-key" || d.Group != "g" || d.Member == "" || d.Time.IsZero() {
		t.Fatalf("first delivery %q %+v", m.Payload, d)
	}
	quiet(t, ch, 100*time.Millisecond) // one in flight per partition
	m.Nack()
	hDone(t, m.Context(), "after Nack (NoSleep)")
	for attempt := int32(2); attempt <= 4; attempt++ {
		m = receive(t, ch)
		d = hDelivery(t, m)
		if string(m.Payload) != "0" || d.Offset != 0 || d.Attempt != attempt {
			t.Fatalf("redelivery: %q %+v, want offset 0 attempt %d", m.Payload, d, attempt)
		}
		if attempt < 4 {
			m.Nack()
		}
	}
	if m.Ack() != true {
		t.Fatal("Ack false")
	}
	hDone(t, m.Context(), "after Ack")
	for i := 1; i < 3; i++ {
		m = receive(t, ch)
		d = hDelivery(t, m)
		if string(m.Payload) != strconv.Itoa(i) || d.Offset != int64(i) || d.Attempt != 1 {
			t.Fatalf("after ack: %q %+v, want offset %d attempt 1", m.Payload, d, i)
		}
		m.Ack()
	}
	hEventually(t, "group g commits 3", func() bool {
		g, _ := hGroup(hDescribe(t, c, "dlv"), "g")
		return g.Partitions[part].Committed == 3
	})
}

// A Nack keeps the partition for NackResendSleep, then redelivers.
func TestHostileNackResendSleep(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("sleep", hMsg("a"), hMsg("b")); err != nil {
		t.Fatal(err)
	}
	const sleep = 700 * time.Millisecond
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{NackResendSleep: sleep})
	ch, err := sub.Subscribe(context.Background(), "sleep")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	start := time.Now()
	m.Nack()
	quiet(t, ch, 200*time.Millisecond)
	m2 := receive(t, ch)
	if el := time.Since(start); el < sleep {
		t.Fatalf("redelivered after %v, before NackResendSleep %v", el, sleep)
	}
	if string(m2.Payload) != "a" || hDelivery(t, m2).Attempt != 2 {
		t.Fatalf("redelivery %q %+v", m2.Payload, hDelivery(t, m2))
	}
	m2.Ack()
	m3 := receive(t, ch)
	if string(m3.Payload) != "b" {
		t.Fatalf("next %q", m3.Payload)
	}
	m3.Ack()
}

// The package doc (and deliver's doc) promise that a message's context "is
// cancelled once the message is acked or nacked": subscription.deliver
// cancels it as soon as the Nack arrives, before NackResendSleep and the
// Retry, so work a handler derived from msg.Context() stops at the Nack
// rather than up to NackResendSleep later.
func TestHostileNackCancelsMessageContext(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("nackctx", hMsg("a")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{NackResendSleep: time.Minute})
	ch, err := sub.Subscribe(context.Background(), "nackctx")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	m.Nack()
	select {
	case <-m.Context().Done():
	case <-time.After(3 * time.Second):
		t.Errorf("message context still live 3s after Nack (NackResendSleep 1m): doc says it is cancelled once nacked")
	}
}

// Ack after Nack, double Ack and Ack/Nack after the subscription ended do
// nothing harmful: a nacked message is redelivered; a message held when the
// subscription closed goes to the group's next subscription.
func TestHostileAckMisuse(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("misuse", hMsg("a"), hMsg("b")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{NackResendSleep: tributarywm.NoSleep})
	ch, err := sub.Subscribe(context.Background(), "misuse")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	m.Nack()
	if m.Ack() {
		t.Fatal("Ack after Nack returned true")
	}
	m = receive(t, ch)
	if string(m.Payload) != "a" || hDelivery(t, m).Attempt != 2 {
		t.Fatalf("after Nack+Ack: %q attempt %d, want a again", m.Payload, hDelivery(t, m).Attempt)
	}
	m.Ack()
	m.Ack()
	m.Nack()
	m = receive(t, ch)
	if string(m.Payload) != "b" {
		t.Fatalf("after double Ack: %q", m.Payload)
	}
	// Hold "b" unacked and close the subscriber; then ack it late.
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	hDone(t, m.Context(), "after Subscriber.Close")
	closedWithin(t, ch)
	m.Ack()
	if _, err := sub.Subscribe(context.Background(), "misuse"); !errors.Is(err, tributarywm.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
	if err := sub.SubscribeInitialize("misuse"); !errors.Is(err, tributarywm.ErrClosed) {
		t.Fatalf("SubscribeInitialize after Close: %v", err)
	}
	sub2 := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	ch2, err := sub2.Subscribe(context.Background(), "misuse")
	if err != nil {
		t.Fatal(err)
	}
	m = receive(t, ch2)
	if string(m.Payload) != "b" || hDelivery(t, m).Attempt != 2 {
		t.Fatalf("late Ack after Close committed? got %q attempt %d, want b attempt 2", m.Payload, hDelivery(t, m).Attempt)
	}
	m.Ack()
}

// SubscribeInitialize creates the group, which then keeps every message
// even while another group acks them all.
func TestHostileSubscribeInitializeRetains(t *testing.T) {
	c := newCluster(t, 5)
	late := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "late"})
	if err := late.SubscribeInitialize("init"); err != nil {
		t.Fatal(err)
	}
	if err := late.SubscribeInitialize("init"); err != nil { // idempotent
		t.Fatal(err)
	}
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	early := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "early"})
	ech, err := early.Subscribe(context.Background(), "init")
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for i := 0; i < 5; i++ {
		m := hMsg(strconv.Itoa(i))
		uuids = append(uuids, m.UUID)
		if err := pub.Publish("init", m); err != nil {
			t.Fatal(err)
		}
		receive(t, ech).Ack()
	}
	lch, err := late.Subscribe(context.Background(), "init")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		m := receive(t, lch)
		if m.UUID != uuids[i] {
			t.Fatalf("late group message %d: %s, want %s", i, m.UUID, uuids[i])
		}
		m.Ack()
	}
}

// Ephemeral subscriptions delete their group however they end (ctx,
// Subscriber.Close, Cluster.Close), and read from the log start.
func TestHostileEphemeralGroupLifecycle(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("eph", hMsg("old")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	groups := func() int { return len(hDescribe(t, c, "eph").Groups) }

	ctx, cancel := context.WithCancel(context.Background())
	ch, err := sub.Subscribe(ctx, "eph")
	if err != nil {
		t.Fatal(err)
	}
	if groups() != 1 {
		t.Fatalf("%d groups, want 1", groups())
	}
	m := receive(t, ch) // held, never acked
	if string(m.Payload) != "old" {
		t.Fatalf("payload %q", m.Payload)
	}
	cancel()
	closedWithin(t, ch)
	hDone(t, m.Context(), "after ctx cancel")
	if n := groups(); n != 0 {
		t.Fatalf("after ctx cancel: %d groups, want 0: %+v", n, hDescribe(t, c, "eph").Groups)
	}

	// Two at once, then Subscriber.Close.
	ch1, err := sub.Subscribe(context.Background(), "eph")
	if err != nil {
		t.Fatal(err)
	}
	ch2, err := sub.Subscribe(context.Background(), "eph")
	if err != nil {
		t.Fatal(err)
	}
	if groups() != 2 {
		t.Fatalf("%d groups, want 2", groups())
	}
	receive(t, ch1).Ack()
	receive(t, ch2) // each group gets "old"
	sub.Close()
	closedWithin(t, ch1)
	closedWithin(t, ch2)
	if n := groups(); n != 0 {
		t.Fatalf("after Subscriber.Close: %d groups, want 0", n)
	}

	// Cluster.Close.
	sub3 := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	ch3, err := sub3.Subscribe(context.Background(), "eph")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	closedWithin(t, ch3)
	if n := groups(); n != 0 {
		t.Fatalf("after Cluster.Close: %d groups, want 0", n)
	}
}

// A subscription whose ctx ends leaves its group; its held message goes to
// the next member.
func TestHostileCancelLeavesGroup(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("leave", hMsg("a")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g"})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := sub.Subscribe(ctx, "leave")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	member := hDelivery(t, m).Member
	g, _ := hGroup(hDescribe(t, c, "leave"), "g")
	if len(g.Members) != 1 || g.Members[0] != member {
		t.Fatalf("members %v, want [%s]", g.Members, member)
	}
	cancel()
	closedWithin(t, ch)
	g, _ = hGroup(hDescribe(t, c, "leave"), "g")
	if len(g.Members) != 0 || g.Partitions[0].InFlight {
		t.Fatalf("after cancel: %+v", g)
	}
	m.Ack() // too late: nothing
	ch2, err := sub.Subscribe(context.Background(), "leave")
	if err != nil {
		t.Fatal(err)
	}
	m2 := receive(t, ch2)
	if m2.UUID != m.UUID || hDelivery(t, m2).Attempt != 2 {
		t.Fatalf("redelivery %s attempt %d", m2.UUID, hDelivery(t, m2).Attempt)
	}
	m2.Ack()
}

// A message held by a subscription that loses its partition in a
// rebalance is delivered again to the new owner; the old owner's Ack is
// refused; nothing is lost.
func TestHostileHeldMessageSurvivesRebalance(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 2})
	a, b := hMsg("a"), hMsg("b")
	if err := pub.Publish("reb", a, b); err != nil { // round-robin: p0, p1
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g"})
	chA, err := sub.Subscribe(context.Background(), "reb")
	if err != nil {
		t.Fatal(err)
	}
	held := map[int32]*message.Message{}
	for i := 0; i < 2; i++ {
		m := receive(t, chA)
		held[hDelivery(t, m).Partition] = m
	}
	if len(held) != 2 {
		t.Fatalf("A holds partitions %v", held)
	}
	chB, err := sub.Subscribe(context.Background(), "reb")
	if err != nil {
		t.Fatal(err)
	}
	mb := receive(t, chB)
	db := hDelivery(t, mb)
	old := held[db.Partition]
	if mb.UUID != old.UUID || db.Attempt != 2 {
		t.Fatalf("B got %s attempt %d on p%d, want %s attempt 2", mb.UUID, db.Attempt, db.Partition, old.UUID)
	}
	// A acks both; wait until both settles ran (their contexts end).
	for _, m := range held {
		m.Ack()
		hDone(t, m.Context(), "after A's Ack")
	}
	g, _ := hGroup(hDescribe(t, c, "reb"), "g")
	lost := g.Partitions[db.Partition]
	if lost.Committed != 0 || !lost.InFlight || lost.Owner != db.Member {
		t.Fatalf("A's stale Ack changed B's partition: %+v", lost)
	}
	kept := g.Partitions[1-db.Partition]
	if kept.Committed != 1 {
		t.Fatalf("A's valid Ack not committed: %+v", kept)
	}
	mb.Ack()
	hEventually(t, "B's ack commits", func() bool {
		g, _ := hGroup(hDescribe(t, c, "reb"), "g")
		return g.Partitions[db.Partition].Committed == 1
	})
	quiet(t, chA, 100*time.Millisecond)
	quiet(t, chB, 100*time.Millisecond)
}

// ---------------------------------------------------------------------
// Races.

// Subscribe racing Subscriber.Close: each Subscribe either fails with
// ErrClosed or returns a channel that is closed once Close returns; no
// member is left in the group.
func TestHostileSubscribeRacesClose(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 4})
	for i := 0; i < 8; i++ {
		if err := pub.Publish("race", hMsg("m")); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 20; round++ {
		for _, eph := range []bool{false, true} {
			sub, err := tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{Ephemeral: eph}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			chans := make(chan (<-chan *message.Message), 64)
			errs := make(chan error, 64)
			for i := 0; i < 16; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ch, err := sub.Subscribe(context.Background(), "race")
					if err != nil {
						errs <- err
						return
					}
					chans <- ch
				}()
			}
			if round%2 == 0 {
				runtime.Gosched()
			}
			closed := make(chan struct{})
			go func() { sub.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(wait):
				t.Fatal("Subscriber.Close hangs")
			}
			wg.Wait()
			close(chans)
			close(errs)
			for err := range errs {
				if !errors.Is(err, tributarywm.ErrClosed) {
					t.Fatalf("Subscribe racing Close: %v, want ErrClosed", err)
				}
			}
			for ch := range chans {
				for m := range ch { // must already be closed: drains, never blocks
					_ = m
					t.Fatal("message delivered after Close returned")
				}
			}
			d := hDescribe(t, c, "race")
			for _, g := range d.Groups {
				if len(g.Members) != 0 {
					t.Fatalf("round %d: group %s keeps members %v", round, g.Group, g.Members)
				}
				if eph && strings.HasPrefix(g.Group, "wm-eph-") {
					t.Fatalf("round %d: ephemeral group %s left", round, g.Group)
				}
			}
		}
	}
}

// Cluster.Close while subscriptions run (held messages, unread channels):
// every channel closes, Subscriber.Close does not hang.
func TestHostileClusterCloseEndsSubscriptions(t *testing.T) {
	c := newCluster(t, 100)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 4})
	for i := 0; i < 40; i++ {
		if err := pub.Publish("cc", hMsg("m")); err != nil {
			t.Fatal(err)
		}
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	eph := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	var chans []<-chan *message.Message
	for i := 0; i < 4; i++ {
		for _, s := range []*tributarywm.Subscriber{sub, eph} {
			ch, err := s.Subscribe(context.Background(), "cc")
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, ch)
		}
	}
	receive(t, chans[0]) // held, unacked; the others never read
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Cluster.Close hangs")
	}
	for _, ch := range chans {
		closedWithin(t, ch)
	}
	done = make(chan struct{})
	go func() { sub.Close(); eph.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Subscriber.Close after Cluster.Close hangs")
	}
	if _, err := sub.Subscribe(context.Background(), "cc"); !errors.Is(err, tributarywm.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
	if err := pub.Publish("cc", hMsg("x")); err == nil {
		t.Fatal("Publish after Cluster.Close succeeded")
	}
}

// A subscription whose consumer never reads its channel: Close must not
// hang.
func TestHostileUnreadChannelClose(t *testing.T) {
	c := newCluster(t, 100)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 8})
	for i := 0; i < 64; i++ {
		if err := pub.Publish("unread", hMsg("m")); err != nil {
			t.Fatal(err)
		}
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	for i := 0; i < 3; i++ {
		if _, err := sub.Subscribe(context.Background(), "unread"); err != nil {
			t.Fatal(err)
		}
	}
	hEventually(t, "all 8 partitions in flight", func() bool {
		g, _ := hGroup(hDescribe(t, c, "unread"), tributarywm.DefaultConsumerGroup)
		n := 0
		for _, p := range g.Partitions {
			if p.InFlight {
				n++
			}
		}
		return n == 8
	})
	done := make(chan struct{})
	go func() { sub.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Subscriber.Close hangs with unread channels")
	}
	g, _ := hGroup(hDescribe(t, c, "unread"), tributarywm.DefaultConsumerGroup)
	if len(g.Members) != 0 {
		t.Fatalf("members left: %v", g.Members)
	}
}

// A publish blocked on a full partition returns ErrClosed promptly on
// Publisher.Close; one whose message context ends returns that error.
func TestHostileBlockedPublishEndsOnClose(t *testing.T) {
	c := newCluster(t, 2)
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	if err := sub.SubscribeInitialize("full"); err != nil { // retention: nothing is removed
		t.Fatal(err)
	}
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("full", hMsg("1"), hMsg("2")); err != nil {
		t.Fatal(err)
	}
	// Message context cancelled while blocked.
	ctx, cancel := context.WithCancel(context.Background())
	m := hMsg("ctx")
	m.SetContext(ctx)
	res := make(chan error, 1)
	go func() { res <- pub.Publish("full", m) }()
	hNoResult(t, res, 100*time.Millisecond)
	cancel()
	if err := hResult(t, res); !errors.Is(err, context.Canceled) {
		t.Fatalf("publish with cancelled ctx: %v", err)
	}
	// Several publishes blocked, then Close.
	const n = 8
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { errs <- pub.Publish("full", hMsg("blocked")) }()
	}
	hNoResult(t, errs, 100*time.Millisecond)
	pub.Close()
	for i := 0; i < n; i++ {
		if err := hResult(t, errs); !errors.Is(err, tributarywm.ErrClosed) {
			t.Fatalf("blocked publish on Close: %v, want ErrClosed", err)
		}
	}
	if got := hDescribe(t, c, "full").Partitions[0].LogEndOffset; got != 2 {
		t.Fatalf("log end %d, want 2", got)
	}
	if err := pub.Publish("full", hMsg("after")); !errors.Is(err, tributarywm.ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
}

func hResult(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(wait):
		t.Fatal("Publish did not return within", wait)
	}
	return nil
}

func hNoResult(t *testing.T, ch <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("Publish on a full partition returned early: %v", err)
	case <-time.After(d):
	}
}

// A Publish racing Publisher.Close fails with an error that
// errors.Is(err, tributarywm.ErrClosed), as the doc invites callers to
// test, on the TrySend path too: Publish checks p.closing once at the top,
// and a TrySend that fails because Close has since closed the producer
// must still read as ErrClosed. The race is made deterministic here by
// closing from inside PartitionKey, which runs between the check and
// TrySend.
func TestHostilePublishRacingCloseErrClosed(t *testing.T) {
	c := newCluster(t, 100)
	var pub *tributarywm.Publisher
	pub = newPublisher(t, c, tributarywm.PublisherConfig{PartitionKey: func(_ string, m *message.Message) (string, error) {
		if string(m.Payload) == "close" {
			pub.Close()
		}
		return "", nil
	}})
	err := pub.Publish("racing", hMsg("ok"), hMsg("close"), hMsg("never"))
	if !errors.Is(err, tributarywm.ErrClosed) {
		t.Errorf("Publish racing Close: %v, want tributarywm.ErrClosed", err)
	}
	if got := hDescribe(t, c, "racing").Partitions[0].LogEndOffset; got != 1 {
		t.Errorf("log end %d, want 1", got)
	}
}

// Stochastic version of the above: many publishers, Close in the middle.
// Every error must be tributarywm.ErrClosed (as in the test above).
func TestHostilePublishRacingCloseStochastic(t *testing.T) {
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
				err := pub.Publish("stoch", hMsg("m"))
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
	hEventually(t, "some publishes", func() bool { return published.Load() > 50 })
	pub.Close()
	wg.Wait()
	close(bad)
	for err := range bad {
		t.Errorf("Publish racing Close: %v, want tributarywm.ErrClosed", err)
	}
	var total int64
	for _, p := range hDescribe(t, c, "stoch").Partitions {
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
func TestHostileClusterCloseEndsBlockedPublish(t *testing.T) {
	c := newCluster(t, 1)
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	if err := sub.SubscribeInitialize("cfull"); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("cfull", hMsg("1")); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- pub.Publish("cfull", hMsg("blocked")) }()
	hNoResult(t, res, 100*time.Millisecond)
	c.Close()
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("blocked Publish succeeded after Cluster.Close")
		}
	case <-time.After(3 * time.Second):
		t.Error("a Publish blocked on a full partition is still blocked 3s after Cluster.Close closed its producer")
		pub.Close() // release it (no leak)
		if err := hResult(t, res); !errors.Is(err, tributarywm.ErrClosed) {
			t.Fatalf("after Publisher.Close: %v", err)
		}
	}
}

// Many subscriptions join and leave one group while messages flow (with
// random Nacks and cancellations racing acks). Every published UUID must
// reach the group, and per key, first deliveries keep publish order.
func TestHostileRebalanceStorm(t *testing.T) {
	c := newCluster(t, 1000)
	const (
		topic = "storm"
		keys  = 16
		total = 1200
	)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 8, PartitionKey: func(_ string, m *message.Message) (string, error) {
		return m.Metadata.Get("key"), nil
	}})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "storm", NackResendSleep: tributarywm.NoSleep})
	if err := sub.SubscribeInitialize(topic); err != nil {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		seen     = map[string]bool{}
		last     = map[string]int{}
		disorder []string
		allDone  = make(chan struct{})
	)
	record := func(m *message.Message) {
		mu.Lock()
		defer mu.Unlock()
		if seen[m.UUID] {
			return
		}
		seen[m.UUID] = true
		key := m.Metadata.Get("key")
		seq, _ := strconv.Atoi(m.Metadata.Get("seq"))
		if prev, ok := last[key]; ok && seq <= prev && len(disorder) < 10 {
			disorder = append(disorder, fmt.Sprintf("key %s: seq %d first delivered after seq %d", key, seq, prev))
		}
		if prev, ok := last[key]; !ok || seq > prev {
			last[key] = seq
		}
		if len(seen) == total {
			close(allDone)
		}
	}
	consume := func(ch <-chan *message.Message, rng *rand.Rand, cancel func()) {
		for m := range ch {
			record(m)
			switch r := rng.IntN(20); {
			case r == 0:
				m.Nack()
			case r == 1 && cancel != nil:
				// Cancel racing the ack.
				go cancel()
				m.Ack()
			default:
				m.Ack()
			}
		}
	}

	var wg sync.WaitGroup
	stableCtx, stableCancel := context.WithCancel(context.Background())
	defer stableCancel()
	ch, err := sub.Subscribe(stableCtx, topic)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); consume(ch, rand.New(rand.NewPCG(1, 2)), nil) }()

	stop := make(chan struct{})
	var cycles atomic.Int64 // churn subscriptions started
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithCancel(context.Background())
				ch, err := sub.Subscribe(ctx, topic)
				if err != nil {
					cancel()
					return
				}
				cycles.Add(1)
				done := make(chan struct{})
				crng := rand.New(rand.NewPCG(rng.Uint64(), 11))
				go func() { defer close(done); consume(ch, crng, cancel) }()
				select {
				case <-time.After(time.Duration(1+rng.IntN(30)) * time.Millisecond):
				case <-stop:
				}
				cancel()
				<-done
			}
		}()
	}

	pubErr := make(chan error, 1)
	go func() {
		for i := 0; i < total; i++ {
			// Interleave: at least one churn subscription per 8 messages,
			// so the group rebalances all along the flow.
			for cycles.Load() < int64(i/8) {
				time.Sleep(time.Millisecond)
			}
			m := hMsg("p")
			k := strconv.Itoa(i % keys)
			m.Metadata.Set("key", k)
			m.Metadata.Set("seq", strconv.Itoa(i))
			if err := pub.Publish(topic, m); err != nil {
				pubErr <- err
				return
			}
		}
		pubErr <- nil
	}()
	if err := <-pubErr; err != nil {
		close(stop)
		stableCancel()
		wg.Wait()
		t.Fatal(err)
	}
	select {
	case <-allDone:
	case <-time.After(60 * time.Second):
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		t.Errorf("only %d of %d messages reached the group", n, total)
	}
	close(stop)
	stableCancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, d := range disorder {
		t.Error(d)
	}
	t.Logf("%d churn subscriptions during the flow", cycles.Load())
	g, _ := hGroup(hDescribe(t, c, topic), "storm")
	if len(g.Members) != 0 {
		t.Errorf("members left after all subscriptions ended: %v", g.Members)
	}
}

// ---------------------------------------------------------------------
// Resources.

// Thousands of Subscribe / end cycles: goroutines return to the baseline,
// no member or ephemeral group is left.
func TestHostileSubscribeCycles(t *testing.T) {
	c := newCluster(t, 100)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 4})
	for i := 0; i < 20; i++ {
		if err := pub.Publish("cycles", hMsg("m")); err != nil {
			t.Fatal(err)
		}
	}
	named := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "cyc", NackResendSleep: time.Hour})
	eph := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true, NackResendSleep: time.Hour})
	base := runtime.NumGoroutine()
	n := 1000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		s := named
		if i%2 == 1 {
			s = eph
		}
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := s.Subscribe(ctx, "cycles")
		if err != nil {
			t.Fatal(err)
		}
		switch i % 4 {
		case 0: // read one and nack it (the nack sleeps an hour)
			if m := receive(t, ch); m != nil {
				m.Nack()
			}
		case 1: // read one and hold it
			receive(t, ch)
		}
		cancel()
		closedWithin(t, ch)
	}
	hEventually(t, fmt.Sprintf("goroutines back to %d", base), func() bool {
		return runtime.NumGoroutine() <= base+2
	})
	d := hDescribe(t, c, "cycles")
	if len(d.Groups) != 1 || d.Groups[0].Group != "cyc" || len(d.Groups[0].Members) != 0 {
		t.Fatalf("groups after cycles: %+v", d.Groups)
	}
	if got := c.Consumers(); len(got) != 0 {
		t.Fatalf("consumers left: %d", len(got))
	}
}

// Subscriber.Close called by a handler while it holds a message must not
// deadlock (Close waits for the subscription, which waits for nothing the
// handler holds).
func TestHostileCloseFromHandler(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("inside", hMsg("a")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	ch, err := sub.Subscribe(context.Background(), "inside")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	done := make(chan struct{})
	go func() { sub.Close(); m.Ack(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Subscriber.Close from a handler holding a message hangs")
	}
	closedWithin(t, ch)
	g, _ := hGroup(hDescribe(t, c, "inside"), tributarywm.DefaultConsumerGroup)
	if g.Partitions[0].Committed != 0 {
		t.Fatalf("Ack after Close committed: %+v", g.Partitions[0])
	}
}

// With engine.WithAckTimeout, a message the application has not taken from
// the channel (or has not settled) is reserved again at every ack-timeout
// expiry (SPEC rule 22: "the owner's next Poll delivers it again"). A
// subscription keeps at most one pending copy per partition:
// subscription.hold skips a re-reservation of a record already pending in
// a deliver goroutine, so a handler stalled for T does not hold
// T/ackTimeout goroutines and copies and then receive them all as a burst
// of duplicates.
func TestHostileAckTimeoutPilesUpCopies(t *testing.T) {
	c := newCluster(t, 10, engine.WithAckTimeout(5*time.Millisecond))
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("ackto", hMsg("a")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	base := runtime.NumGoroutine()
	ch, err := sub.Subscribe(context.Background(), "ackto")
	if err != nil {
		t.Fatal(err)
	}
	hEventually(t, "the message is reserved", func() bool {
		g, _ := hGroup(hDescribe(t, c, "ackto"), tributarywm.DefaultConsumerGroup)
		return g.Partitions[0].Attempts >= 1
	})
	time.Sleep(time.Second) // the application is slow to read (not a speed assertion)
	g, _ := hGroup(hDescribe(t, c, "ackto"), tributarywm.DefaultConsumerGroup)
	extra := runtime.NumGoroutine() - base
	t.Logf("after 1s unread: attempts %d, %d goroutines over the baseline", g.Partitions[0].Attempts, extra)
	if extra > 10 {
		t.Errorf("one unread message holds %d goroutines after 1s (ack timeout 5ms): copies pile up", extra)
	}
	// Drain what is queued: how many copies of one message arrive at once?
	copies := 0
	for {
		select {
		case m := <-ch:
			copies++
			if copies == 1 {
				m.Ack()
			}
			continue
		case <-time.After(200 * time.Millisecond):
		}
		break
	}
	if copies > 2 {
		t.Errorf("%d copies of one message were queued for the handler", copies)
	}
}

// An admin closing the subscription's consumer from outside
// (Cluster.CloseConsumer) ends the subscription: its channel closes and
// Subscriber.Close still returns; the held message goes to the next member.
func TestHostileExternalCloseConsumer(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("ext", hMsg("a")); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	ch, err := sub.Subscribe(context.Background(), "ext")
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	d := hDelivery(t, m)
	if _, err := c.DeleteGroup("ext", d.Group); !errors.Is(err, tributary.ErrGroupNotEmpty) {
		t.Fatalf("DeleteGroup of a live ephemeral group: %v", err)
	}
	if err := c.CloseConsumer(d.Member); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, ch)
	hDone(t, m.Context(), "after the consumer was closed")
	if n := len(hDescribe(t, c, "ext").Groups); n != 0 {
		t.Fatalf("ephemeral group not deleted after CloseConsumer: %d groups", n)
	}
	done := make(chan struct{})
	go func() { sub.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Subscriber.Close hangs after CloseConsumer")
	}
}
