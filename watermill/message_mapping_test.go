package tributarywm_test

// The mapping between Watermill messages and Tributary records at its
// edges: topics of the typed library (another codec refused, Bytes usable),
// odd but valid messages and an empty UUID round-trip unchanged.

import (
	"context"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// A topic the typed library created with another codec is refused
// everywhere, and a refused ephemeral Subscribe leaves no group behind.
func TestForeignCodecTopic(t *testing.T) {
	c := newCluster(t, 10)
	if _, err := tributary.CreateTopic(c, "strings", 2, tributary.String()); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("strings", newMsg("x")); !errors.Is(err, tributary.ErrTypeMismatch) {
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
	d := describe(t, c, "strings")
	if len(d.Groups) != 0 || d.Partitions[0].LogEndOffset != 0 || d.Partitions[1].LogEndOffset != 0 {
		t.Fatalf("refused calls changed the topic: %+v", d)
	}
}

// A topic created by the typed library with the Bytes codec is usable, and
// messages without the UUID header get the message ID as UUID.
func TestTypedBytesTopicInterop(t *testing.T) {
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

// Odd but valid messages round-trip: nil payload, binary payload, empty and
// unicode metadata, the payload-type header stripped, the payload copied.
func TestOddMessagesRoundTrip(t *testing.T) {
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
func TestEmptyUUIDRoundTrip(t *testing.T) {
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
