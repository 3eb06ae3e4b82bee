package tributarywm_test

// Bad input and configuration: invalid publisher and subscriber configs,
// topic names, reserved metadata keys, messages over the size bound and
// PartitionKey failures are refused with the documented error, fail only
// the message concerned and leave nothing behind; Subscribe with a nil
// context joins nothing.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

func TestConfigValidation(t *testing.T) {
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

func TestTopicNames(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{})
	eph := newSubscriber(t, c, tributarywm.SubscriberConfig{Ephemeral: true})
	for _, name := range []string{"", "a.b", "a b", "../x", "ü", strings.Repeat("t", 65), "t\x00", " t"} {
		if err := pub.Publish(name, newMsg("x")); !errors.Is(err, tributary.ErrInvalidArgument) {
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
	if err := pub.Publish(long, newMsg("x")); err != nil {
		t.Fatalf("Publish to a 64-byte name: %v", err)
	}
	ch, err := sub.Subscribe(context.Background(), long)
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, ch)
	m.Ack()
}

// Reserved metadata keys are refused, and Publish stops at the first bad
// message: the ones before it are published, the rest are not.
func TestReservedMetadata(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	for _, key := range []string{tributarywm.HeaderUUID, tributary.HeaderPayloadType} {
		bad := newMsg("bad")
		bad.Metadata.Set(key, "x")
		err := pub.Publish("reserved", newMsg("ok1"), bad, newMsg("ok2"))
		if !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Errorf("metadata %q: err %v, want ErrInvalidArgument", key, err)
		}
	}
	d := describe(t, c, "reserved")
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

func TestMaxMessageBytes(t *testing.T) {
	c := newCluster(t, 10, engine.WithMaxMessageBytes(200))
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	if err := pub.Publish("max", newMsg(strings.Repeat("x", 201))); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Fatalf("oversized payload: %v, want ErrInvalidArgument", err)
	}
	big := newMsg("x")
	big.Metadata.Set("m", strings.Repeat("y", 300))
	if err := pub.Publish("max", big); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Fatalf("oversized metadata: %v, want ErrInvalidArgument", err)
	}
	if got := describe(t, c, "max").Partitions[0].LogEndOffset; got != 0 {
		t.Fatalf("oversized messages published %d records", got)
	}
	if err := pub.Publish("max", newMsg(strings.Repeat("x", 50))); err != nil {
		t.Fatalf("small message: %v", err)
	}
}

// A PartitionKey that errors, or panics, fails that message only (with
// tributary.ErrPartitioner) and leaves the publisher usable.
func TestPartitionKeyFailures(t *testing.T) {
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
	if err := pub.Publish("pk", newMsg("a")); !errors.Is(err, boom) || !errors.Is(err, tributary.ErrPartitioner) {
		t.Fatalf("PartitionKey error: %v", err)
	}
	mode.Store(2)
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("a panicking PartitionKey panicked Publish: %v", p)
			}
		}()
		err := pub.Publish("pk", newMsg("b"))
		if !errors.Is(err, tributary.ErrPartitioner) || !strings.Contains(err.Error(), "PartitionKey panicked: partition key panic") {
			t.Errorf("Publish with a panicking PartitionKey: %v, want ErrPartitioner saying it panicked", err)
		}
	}()
	mode.Store(0)
	m := newMsg("c")
	m.Metadata.Set("k", "key")
	if err := pub.Publish("pk", m); err != nil {
		t.Fatalf("publisher unusable after PartitionKey panic: %v", err)
	}
	var total int64
	for _, p := range describe(t, c, "pk").Partitions {
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
func TestSubscribeNilContext(t *testing.T) {
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
				//lint:ignore SA1012 a nil context on purpose
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
