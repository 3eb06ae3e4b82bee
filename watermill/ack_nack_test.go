package tributarywm_test

// Ack and Nack: one delivery per partition at a time, a Nack without sleep
// and with NackResendSleep, the message context cancelled at the Nack, and
// Acks and Nacks out of order or after the subscription ended.

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

func TestDeliveryAndNackNoSleep(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 3, PartitionKey: func(_ string, m *message.Message) (string, error) {
		return "same-key", nil
	}})
	for i := 0; i < 3; i++ {
		if err := pub.Publish("dlv", newMsg(strconv.Itoa(i))); err != nil {
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
	d := deliveryOf(t, m)
	if string(m.Payload) != "0" || d.Topic != "dlv" || d.Partition != part || d.Offset != 0 || d.Attempt != 1 || d.Key != "same-key" || d.Group != "g" || d.Member == "" || d.Time.IsZero() {
		t.Fatalf("first delivery %q %+v", m.Payload, d)
	}
	quiet(t, ch, 100*time.Millisecond) // one in flight per partition
	m.Nack()
	ctxDone(t, m.Context(), "after Nack (NoSleep)")
	for attempt := int32(2); attempt <= 4; attempt++ {
		m = receive(t, ch)
		d = deliveryOf(t, m)
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
	ctxDone(t, m.Context(), "after Ack")
	for i := 1; i < 3; i++ {
		m = receive(t, ch)
		d = deliveryOf(t, m)
		if string(m.Payload) != strconv.Itoa(i) || d.Offset != int64(i) || d.Attempt != 1 {
			t.Fatalf("after ack: %q %+v, want offset %d attempt 1", m.Payload, d, i)
		}
		m.Ack()
	}
	eventually(t, "group g commits 3", func() bool {
		g, _ := groupOf(describe(t, c, "dlv"), "g")
		return g.Partitions[part].Committed == 3
	})
}

// A Nack keeps the partition for NackResendSleep, then redelivers.
func TestNackResendSleep(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("sleep", newMsg("a"), newMsg("b")); err != nil {
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
	if string(m2.Payload) != "a" || deliveryOf(t, m2).Attempt != 2 {
		t.Fatalf("redelivery %q %+v", m2.Payload, deliveryOf(t, m2))
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
func TestNackCancelsMessageContext(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("nackctx", newMsg("a")); err != nil {
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
func TestAckMisuse(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("misuse", newMsg("a"), newMsg("b")); err != nil {
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
	if string(m.Payload) != "a" || deliveryOf(t, m).Attempt != 2 {
		t.Fatalf("after Nack+Ack: %q attempt %d, want a again", m.Payload, deliveryOf(t, m).Attempt)
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
	ctxDone(t, m.Context(), "after Subscriber.Close")
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
	if string(m.Payload) != "b" || deliveryOf(t, m).Attempt != 2 {
		t.Fatalf("late Ack after Close committed? got %q attempt %d, want b attempt 2", m.Payload, deliveryOf(t, m).Attempt)
	}
	m.Ack()
}
