package jetstream_test

// Typed messages on JetStream: the payload type and time of a message
// sent, received and dead-lettered.

import (
	"context"
	"errors"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestTypedPayloadTypeAndTime: on JetStream, whose records carry no
// payload-type header, a typed message sent and received reports the
// topic's payload type, and the Time Send returned is the one received;
// a dead letter (Nack) reports its own HeaderPayloadType, stripped from
// its headers, and keeps the record's time; the Messages iterator and
// AppendPoll see the same.
func TestTypedPayloadTypeAndTime(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 100})
	c, err := tributary.NewClusterOn(b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type order struct {
		ID int `json:"id"`
	}
	codec := tributary.JSON[order]()
	orders := must(tributary.CreateTopic(c, "orders", 2, codec)).of(t)
	if _, err := c.CreateGroup("orders", "billing", engine.RoundRobin, tributary.WithDeadLetter("orders-dlq", 1)); err != nil {
		t.Fatal(err)
	}
	p := must(tributary.NewProducer[order](c, "web", tributary.Manual())).of(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	own := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	s1 := must(p.Send(ctx, orders, tributary.Message[order]{Partition: 0, Value: order{ID: 1},
		Headers: []tributary.Header{{Key: "h", Value: "v"}}})).of(t)
	s2 := must(p.Send(ctx, orders, tributary.Message[order]{Partition: 1, Value: order{ID: 2}, Time: own})).of(t)
	if s1.PayloadType != codec.Name() || s1.Time.IsZero() || !s2.Time.Equal(own) || s1.ID != "0-0" || s2.ID != "1-0" {
		t.Fatalf("sent %+v, %+v", s1, s2)
	}
	cons := must(tributary.NewConsumer(orders, "billing", "billing-1")).of(t)
	var got []tributary.Message[order]
	for m, err := range cons.Messages(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
		if len(got) == 2 {
			break
		}
	}
	for _, m := range got {
		want := s1
		if m.Partition == 1 {
			want = s2
		}
		if m.PayloadType != codec.Name() || !m.Time.Equal(want.Time) || m.Value != want.Value || m.ID != want.ID || m.Payload != want.Payload {
			t.Fatalf("received %+v, sent %+v", m, want)
		}
		if m.Partition == 0 && (len(m.Headers) != 1 || m.Headers[0] != (tributary.Header{Key: "h", Value: "v"})) {
			t.Fatalf("received headers %v", m.Headers)
		}
		if dl, err := cons.Nack(ctx, m, errors.New("boom")); err != nil || !dl {
			t.Fatalf("Nack = %v, %v", dl, err)
		}
	}
	dlq := must(tributary.OpenTopic(c, "orders-dlq", codec)).of(t)
	dc := must(tributary.NewConsumer(dlq, "audit", "audit-1")).of(t)
	var dls []tributary.Message[order]
	for len(dls) < 2 {
		dls = must(dc.AppendPoll(ctx, dls, 2)).of(t)
	}
	for _, m := range dls {
		want := s1
		if m.Value.ID == 2 {
			want = s2
		}
		if m.PayloadType != codec.Name() || !m.Time.Equal(want.Time) {
			t.Fatalf("dead letter %+v; want payload type %q, time %v", m, codec.Name(), want.Time)
		}
		for _, h := range m.Headers {
			if h.Key == tributary.HeaderPayloadType {
				t.Fatalf("dead letter's headers keep %s: %v", h.Key, m.Headers)
			}
		}
	}
}
