package tribotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// Series keys of the topic "orders".
func dest(p string) []string {
	return []string{"messaging.destination.name=orders", "messaging.destination.partition.id=" + p}
}

func grp(g, p string) []string { return append(dest(p), "messaging.consumer.group.name="+g) }

func op(attrs []string, name, typ string) []string {
	return append(attrs, "messaging.operation.name="+name, "messaging.operation.type="+typ)
}

func k(parts ...[]string) string {
	var all []string
	for _, p := range parts {
		all = append(all, p...)
	}
	return series(all...)
}

func one(s ...string) []string { return s }

// noDeliverCount drops OnDeliver: deliveries go uncounted.
func noDeliverCount(h tributary.Hooks) tributary.Hooks {
	h.OnDeliver = nil
	return h
}

// checkMetrics compares every instrument of want with got, and reports
// the instruments whose series differ.
func checkMetrics(t *testing.T, stage string, got, want map[string]map[string]float64) (differ []string) {
	t.Helper()
	for name, w := range want {
		if d := diffSeries(name, got[name], w); d != "" {
			differ = append(differ, name)
			t.Logf("%s:\n%s", stage, d)
		}
	}
	return differ
}

// TestMetricsCounts sends four records round-robin over two partitions,
// holds one in flight to a second group "manual", consumes them all in
// group "g", and compares every series of every instrument exactly before
// and after; an instrumentation that counts no deliveries differs in
// messaging.client.consumed.messages only.
func TestMetricsCounts(t *testing.T) {
	for _, tt := range []struct {
		name    string
		wrap    func(tributary.Hooks) tributary.Hooks
		wdiffer []string
	}{
		{name: "as is"},
		{name: "deliveries not counted", wrap: noDeliverCount, wdiffer: []string{"messaging.client.consumed.messages"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 1000, 2, tt.wrap)
			if _, err := h.c.CreateGroup("orders", "g", engine.RoundRobin); err != nil {
				t.Fatal(err)
			}
			h.send("a", "b", "c", "d")
			manual, err := tributary.NewConsumer(h.topic, "manual", "m1")
			if err != nil {
				t.Fatal(err)
			}
			held, err := manual.TryPoll(1)
			if err != nil || len(held) != 1 {
				t.Fatalf("TryPoll: %v, %v", held, err)
			}
			hp := "0"
			if held[0].Partition == 1 {
				hp = "1"
			}
			inFlight := map[string]float64{k(grp("g", "0")): 0, k(grp("g", "1")): 0, k(grp("manual", "0")): 0, k(grp("manual", "1")): 0}
			inFlight[k(grp("manual", hp))] = 1
			sent := map[string]float64{k(op(dest("0"), "send", "send")): 2, k(op(dest("1"), "send", "send")): 2}
			before := map[string]map[string]float64{
				"messaging.client.sent.messages":                   sent,
				"messaging.client.operation.duration":              sent,
				"messaging.client.consumed.messages":               {k(op(grp("manual", hp), "receive", "receive")): 1},
				"messaging.tributary.partition.retained":           {k(dest("0")): 2, k(dest("1")): 2},
				"messaging.tributary.consumer.lag":                 {k(grp("g", "0")): 2, k(grp("g", "1")): 2, k(grp("manual", "0")): 2, k(grp("manual", "1")): 2},
				"messaging.tributary.consumer.in_flight":           inFlight,
				"messaging.tributary.consumer.partitions.assigned": {k(one("messaging.destination.name=orders", "messaging.consumer.group.name=manual")): 2},
			}
			differ := checkMetrics(t, "before", h.collect(), before)

			h.consume("g", 4, func(context.Context, tributary.Message[string]) error { return nil })
			if err := manual.Close(); err != nil {
				t.Fatal(err)
			}
			consumed := map[string]float64{k(op(grp("g", "0"), "receive", "receive")): 2, k(op(grp("g", "1"), "receive", "receive")): 2}
			consumed[k(op(grp("manual", hp), "receive", "receive"))] = 1
			members := map[string]float64{
				k(one("messaging.destination.name=orders", "messaging.consumer.group.name=g")):      2,
				k(one("messaging.destination.name=orders", "messaging.consumer.group.name=manual")): 2,
			}
			after := map[string]map[string]float64{
				"messaging.client.sent.messages":      sent,
				"messaging.client.operation.duration": sent,
				"messaging.client.consumed.messages":  consumed,
				"messaging.process.duration":          {k(op(grp("g", "0"), "process", "process")): 2, k(op(grp("g", "1"), "process", "process")): 2},
				"messaging.tributary.consumer.acks":   {k(op(grp("g", "0"), "ack", "settle")): 2, k(op(grp("g", "1"), "ack", "settle")): 2},
				// "manual" never committed: the partitions retain their records.
				"messaging.tributary.partition.retained":           {k(dest("0")): 2, k(dest("1")): 2},
				"messaging.tributary.consumer.lag":                 {k(grp("g", "0")): 0, k(grp("g", "1")): 0, k(grp("manual", "0")): 2, k(grp("manual", "1")): 2},
				"messaging.tributary.consumer.in_flight":           {k(grp("g", "0")): 0, k(grp("g", "1")): 0, k(grp("manual", "0")): 0, k(grp("manual", "1")): 0},
				"messaging.tributary.consumer.partitions.assigned": members,
				"messaging.tributary.consumer.partitions.revoked":  members,
			}
			differ = append(differ, checkMetrics(t, "after", h.collect(), after)...)
			if !equalSets(differ, tt.wdiffer) {
				t.Errorf("instruments that differ: %v, want %v", differ, tt.wdiffer)
			}
		})
	}
}

// equalSets reports whether a and b hold the same names (the instruments
// that differ may be reported once per stage).
func equalSets(a, b []string) bool {
	in := func(s string, l []string) bool {
		for _, x := range l {
			if x == s {
				return true
			}
		}
		return false
	}
	for _, x := range a {
		if !in(x, b) {
			return false
		}
	}
	for _, x := range b {
		if !in(x, a) {
			return false
		}
	}
	return true
}

// TestMetricsRetryAndDeadLetter: a handler that always fails, two attempts
// allowed: two deliveries and processings with error.type, one retry, one
// dead letter, one ack (the dead letter's).
func TestMetricsRetryAndDeadLetter(t *testing.T) {
	h := newHarness(t, 1000, 1, nil)
	h.send("a")
	h.consume("g", 2, func(context.Context, tributary.Message[string]) error { return errors.New("always fails") },
		tributary.WithDeadLetter("orders-dlq", 2), tributary.WithBackoff(time.Millisecond, time.Millisecond))
	failed := "error.type=*errors.errorString"
	want := map[string]map[string]float64{
		"messaging.client.sent.messages":            {k(op(dest("0"), "send", "send")): 1},
		"messaging.client.consumed.messages":        {k(op(grp("g", "0"), "receive", "receive")): 2},
		"messaging.process.duration":                {k(op(grp("g", "0"), "process", "process"), one(failed)): 2},
		"messaging.tributary.consumer.retries":      {k(op(grp("g", "0"), "retry", "settle")): 1},
		"messaging.tributary.consumer.acks":         {k(op(grp("g", "0"), "ack", "settle")): 1},
		"messaging.tributary.consumer.dead_letters": {k(grp("g", "0"), one("messaging.tributary.dead_letter.topic=orders-dlq", failed)): 1},
	}
	if d := checkMetrics(t, "after", h.collect(), want); len(d) != 0 {
		t.Errorf("instruments that differ: %v", d)
	}
}

// TestMetricsSendFailures: a TrySend to a full partition and a Send that
// waits for room until its context ends are counted with their
// error.type, and the wait once.
func TestMetricsSendFailures(t *testing.T) {
	h := newHarness(t, 1, 1, nil)
	if _, err := h.prod.TrySend(h.topic, tributary.Message[string]{Value: "fits"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.prod.TrySend(h.topic, tributary.Message[string]{Value: "full"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("TrySend: %v, want ErrPartitionFull", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := h.prod.Send(ctx, h.topic, tributary.Message[string]{Value: "waits"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send: %v, want context.DeadlineExceeded", err)
	}
	sent := map[string]float64{
		k(op(dest("0"), "send", "send")):                                      1,
		k(op(dest("0"), "send", "send"), one("error.type=partition_full")):    1,
		k(op(dest("0"), "send", "send"), one("error.type=deadline_exceeded")): 1,
	}
	want := map[string]map[string]float64{
		"messaging.client.sent.messages":      sent,
		"messaging.client.operation.duration": sent,
		"messaging.tributary.producer.waits":  {k(dest("0")): 1},
	}
	if d := checkMetrics(t, "after", h.collect(), want); len(d) != 0 {
		t.Errorf("instruments that differ: %v", d)
	}
}
