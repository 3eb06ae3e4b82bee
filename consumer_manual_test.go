package tributary_test

// The manual calls: TryPollPartition, Nack with and without a dead-letter
// topic, and a topic's Snapshot.

import (
	"context"
	"errors"
	"testing"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// TryPollPartition reserves only the partition asked for, and only when the
// consumer owns it and nothing is in flight there.
func TestTryPollPartition(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "orders", 3, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	for p := range int32(3) {
		sendOK(t, pr, tp, tributary.Message[string]{Partition: p, Value: "a"})
		sendOK(t, pr, tp, tributary.Message[string]{Partition: p, Value: "b"})
	}
	c1 := testConsumer(t, tp, "g", "c1")
	c2 := testConsumer(t, tp, "g", "c2") // RoundRobin: c1 owns 0 and 2, c2 owns 1

	m, ok, err := c1.TryPollPartition(2)
	if err != nil || !ok || m.Partition != 2 || m.Offset != 0 || m.Value != "a" || m.Attempt != 1 {
		t.Fatalf("TryPollPartition(2) = (%+v, %v, %v), want partition 2 offset 0 \"a\" attempt 1", m, ok, err)
	}
	d, err := tp.Describe()
	if err != nil {
		t.Fatal(err)
	}
	for _, gp := range d.Groups[0].Partitions {
		if w := gp.Partition == 2; gp.InFlight != w || (gp.Attempts == 1) != w {
			t.Fatalf("partition %d: in flight %v, attempts %d; only partition 2 should be reserved", gp.Partition, gp.InFlight, gp.Attempts)
		}
	}
	if _, ok, err := c1.TryPollPartition(2); ok || err != nil {
		t.Fatalf("second TryPollPartition(2) with offset 0 in flight = (%v, %v), want nothing", ok, err)
	}
	if _, ok, err := c1.TryPollPartition(1); ok || err != nil {
		t.Fatalf("TryPollPartition of c2's partition = (%v, %v), want nothing", ok, err)
	}
	if _, ok, err := c2.TryPollPartition(1); !ok || err != nil {
		t.Fatalf("c2.TryPollPartition(1) = (%v, %v), want its record", ok, err)
	}
	if err := c1.Retry(m); err != nil {
		t.Fatal(err)
	}
	if m, ok, _ := c1.TryPollPartition(2); !ok || m.Offset != 0 || m.Attempt != 2 {
		t.Fatalf("after Retry: (%+v, %v), want offset 0 attempt 2", m, ok)
	} else if err := c1.Ack(m); err != nil {
		t.Fatal(err)
	}
	if m, ok, _ := c1.TryPollPartition(2); !ok || m.Offset != 1 || m.Value != "b" {
		t.Fatalf("after Ack: (%+v, %v), want offset 1 \"b\"", m, ok)
	}
	for _, p := range []int32{-1, 3} {
		if _, _, err := c1.TryPollPartition(p); !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Fatalf("TryPollPartition(%d) error %v, want ErrInvalidArgument", p, err)
		}
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c2.TryPollPartition(1); !errors.Is(err, tributary.ErrClosed) {
		t.Fatalf("TryPollPartition after Close: %v, want ErrClosed", err)
	}
}

// Nack retries until the maximum attempts, then dead-letters and acks.
func TestNack(t *testing.T) {
	ctx := context.Background()
	c := testCluster(t, 10)
	tp := testTopic(t, c, "orders", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Key: "k", Value: "bad"})
	sendOK(t, pr, tp, tributary.Message[string]{Value: "good"})
	cons := testConsumer(t, tp, "g", "c1", tributary.WithDeadLetter("orders-dlq", 2))
	if dl, max := cons.DeadLetter(); dl != "orders-dlq" || max != 2 || cons.Group() != "g" {
		t.Fatalf("DeadLetter() = %q, %d; Group() = %q", dl, max, cons.Group())
	}
	cause := errors.New("boom")
	for attempt, wdead := range []bool{false, true} {
		m, ok, err := cons.TryPollPartition(0)
		if !ok || err != nil || m.Value != "bad" || m.Attempt != int32(attempt+1) {
			t.Fatalf("poll %d: (%+v, %v, %v)", attempt+1, m, ok, err)
		}
		dead, err := cons.Nack(ctx, m, cause)
		if err != nil || dead != wdead {
			t.Fatalf("Nack at attempt %d = (%v, %v), want (%v, nil)", m.Attempt, dead, err, wdead)
		}
		if _, err := cons.Nack(ctx, m, cause); !errors.Is(err, tributary.ErrNotInFlight) {
			t.Fatalf("second Nack of the same delivery: %v, want ErrNotInFlight", err)
		}
	}
	if m, ok, _ := cons.TryPollPartition(0); !ok || m.Value != "good" {
		t.Fatalf("after the dead letter the group should be at \"good\", got (%+v, %v)", m, ok)
	}
	dlq, err := tributary.OpenTopic(c, "orders-dlq", tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := dlq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Messages[0]) != 1 {
		t.Fatalf("dead-letter topic holds %d messages, want 1", len(s.Messages[0]))
	}
	dm := s.Messages[0][0]
	want := map[string]string{
		tributary.HeaderDeadLetterTopic: "orders", tributary.HeaderDeadLetterGroup: "g",
		tributary.HeaderDeadLetterPartition: "0", tributary.HeaderDeadLetterOffset: "0",
		tributary.HeaderDeadLetterAttempts: "2", tributary.HeaderDeadLetterError: "boom",
	}
	got := map[string]string{}
	for _, h := range dm.Headers {
		got[h.Key] = h.Value
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("dead letter header %s = %q, want %q (all: %v)", k, got[k], v, dm.Headers)
		}
	}
	if dm.Value != "bad" || dm.Key != "k" {
		t.Errorf("dead letter = %q key %q, want \"bad\" key \"k\"", dm.Value, dm.Key)
	}
	if _, err := cons.Nack(nil, tributary.Message[string]{}, cause); !errors.Is(err, tributary.ErrInvalidArgument) { //nolint:staticcheck // nil ctx on purpose
		t.Fatalf("Nack(nil ctx): %v", err)
	}
}

// Nack without a dead-letter topic is Retry.
func TestNackWithoutDeadLetter(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "orders", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "x"})
	cons := testConsumer(t, tp, "g", "c1")
	for attempt := int32(1); attempt <= 3; attempt++ {
		m, ok, _ := cons.TryPollPartition(0)
		if !ok || m.Attempt != attempt {
			t.Fatalf("poll: (%+v, %v), want attempt %d", m, ok, attempt)
		}
		if dead, err := cons.Nack(context.Background(), m, errors.New("no")); dead || err != nil {
			t.Fatalf("Nack = (%v, %v), want (false, nil)", dead, err)
		}
	}
}

// Snapshot returns every retained message, decoded, with the description of
// the same instant, and delivers nothing.
func TestTopicSnapshot(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "orders", 2, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 1, Key: "k", Value: "a", Headers: []tributary.Header{{Key: "h", Value: "v"}}})
	sendOK(t, pr, tp, tributary.Message[string]{Partition: 1, Value: "b"})
	publishRaw(t, c, "orders", 0, engine.Message{Payload: "raw"}) // no payload-type header: still a String
	cons := testConsumer(t, tp, "g", "c1")
	s, err := tp.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Messages) != 2 || len(s.Messages[0]) != 1 || len(s.Messages[1]) != 2 {
		t.Fatalf("Snapshot messages per partition: %v", s.Messages)
	}
	m := s.Messages[1][0]
	if m.ID != "1-0" || m.Value != "a" || m.Key != "k" || len(m.Headers) != 1 || m.Headers[0] != (tributary.Header{Key: "h", Value: "v"}) || m.Attempt != 0 {
		t.Fatalf("Snapshot message = %+v", m)
	}
	if s.Messages[0][0].Value != "raw" || s.Messages[1][1].Offset != 1 {
		t.Fatalf("Snapshot = %+v", s.Messages)
	}
	if s.Partitions[1].LogEndOffset != 2 || len(s.Groups) != 1 || s.Groups[0].Partitions[1].InFlight {
		t.Fatalf("Snapshot description = %+v", s.TopicDescription)
	}
	if m, ok, _ := cons.TryPollPartition(1); !ok || m.Attempt != 1 {
		t.Fatalf("a snapshot must not count as a delivery: first poll gave attempt %d", m.Attempt)
	}
	if _, err := tributary.OpenTopic(c, "orders", tributary.String()); err != nil {
		t.Fatal(err)
	}
}
