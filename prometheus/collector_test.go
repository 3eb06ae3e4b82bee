package tribprom_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tribprom "github.com/f91dcac0/tributary/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Both the typed library's cluster and every backend are sources.
var (
	_ tribprom.Source = (*tributary.Cluster)(nil)
	_ tribprom.Source = tributary.Backend(nil)
)

// knownCluster builds a cluster of capacity 10 in this state:
//
//	orders (2 partitions): p0 holds a b c (offsets 0–2), p1 holds d e (0–1)
//	  billing, members b1 (owns p0) and b2 (owns p1):
//	    p0: acked 0, offset 1 in flight to b1 (attempt 1)
//	    p1: offset 0 delivered, retried, delivered again: in flight to b2 (attempt 2)
//	  audit, member a1 (owns both): acked p0/0 and p1/0, nothing in flight
//	  idle, created after that with no members: starts at the log starts
//	payments (1 partition): holds x (offset 0), no groups
//
// so p0's offset 0, acked by billing and audit, is removed (log start 1,
// SPEC rule 13) and p1's is not (billing has not committed it).
type known struct {
	c              *tributary.Cluster
	b1, b2         *tributary.Consumer[string]
	b1Held, b2Held tributary.Message[string] // billing's in-flight records
}

func knownCluster(t *testing.T) known {
	t.Helper()
	c, err := tributary.NewCluster(10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	orders, err := tributary.CreateTopic(c, "orders", 2, tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	payments, err := tributary.CreateTopic(c, "payments", 1, tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	prod, err := tributary.NewProducer[string](c, "web", tributary.Manual())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	send := func(topic *tributary.Topic[string], partition int32, values ...string) {
		t.Helper()
		for _, v := range values {
			if _, err := prod.TrySend(topic, tributary.Message[string]{Partition: partition, Value: v}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(orders, 0, "a", "b", "c")
	send(orders, 1, "d", "e")
	send(payments, 0, "x")

	b1 := newConsumer(t, orders, "billing", "b1")
	b2 := newConsumer(t, orders, "billing", "b2")
	a1 := newConsumer(t, orders, "audit", "a1")

	ack(t, b1, pollOne(t, b1, 0, 0))
	b1Held := pollOne(t, b1, 0, 1)
	retry(t, b2, pollOne(t, b2, 1, 0))
	b2Held := pollOne(t, b2, 1, 0)
	if b2Held.Attempt != 2 {
		t.Fatalf("b2's redelivery of 1/0: attempt %d, want 2", b2Held.Attempt)
	}
	ack(t, a1, pollOne(t, a1, 0, 0))
	ack(t, a1, pollOne(t, a1, 1, 0))

	if _, err := c.CreateGroup("orders", "idle", engine.RoundRobin); err != nil {
		t.Fatal(err)
	}
	return known{c: c, b1: b1, b2: b2, b1Held: b1Held, b2Held: b2Held}
}

func newConsumer(t *testing.T, topic *tributary.Topic[string], group, name string) *tributary.Consumer[string] {
	t.Helper()
	cons, err := tributary.NewConsumer(topic, group, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	return cons
}

// pollOne polls partition and checks it delivers offset.
func pollOne(t *testing.T, cons *tributary.Consumer[string], partition int32, offset int64) tributary.Message[string] {
	t.Helper()
	m, ok, err := cons.TryPollPartition(partition)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || m.Offset != offset {
		t.Fatalf("%s polled partition %d: %v %v, want offset %d", cons.Name(), partition, ok, m, offset)
	}
	return m
}

func ack(t *testing.T, cons *tributary.Consumer[string], m tributary.Message[string]) {
	t.Helper()
	if err := cons.Ack(m); err != nil {
		t.Fatal(err)
	}
}

func retry(t *testing.T, cons *tributary.Consumer[string], m tributary.Message[string]) {
	t.Helper()
	if err := cons.Retry(m); err != nil {
		t.Fatal(err)
	}
}

// knownExposition is what the collector exports of knownCluster.
const knownExposition = `
# HELP tributary_describe_errors_total Describe calls of a topic that failed, over the collector's life.
# TYPE tributary_describe_errors_total counter
tributary_describe_errors_total 0
# HELP tributary_group_lag Records of the topic the consumer group has not committed: the sum of its partition lags.
# TYPE tributary_group_lag gauge
tributary_group_lag{group="audit",topic="orders"} 3
tributary_group_lag{group="billing",topic="orders"} 4
tributary_group_lag{group="idle",topic="orders"} 4
# HELP tributary_group_members Number of members of the consumer group.
# TYPE tributary_group_members gauge
tributary_group_members{group="audit",topic="orders"} 1
tributary_group_members{group="billing",topic="orders"} 2
tributary_group_members{group="idle",topic="orders"} 0
# HELP tributary_group_partition_committed_offset The next offset the consumer group will be given on the partition.
# TYPE tributary_group_partition_committed_offset gauge
tributary_group_partition_committed_offset{group="audit",partition="0",topic="orders"} 1
tributary_group_partition_committed_offset{group="audit",partition="1",topic="orders"} 1
tributary_group_partition_committed_offset{group="billing",partition="0",topic="orders"} 1
tributary_group_partition_committed_offset{group="billing",partition="1",topic="orders"} 0
tributary_group_partition_committed_offset{group="idle",partition="0",topic="orders"} 1
tributary_group_partition_committed_offset{group="idle",partition="1",topic="orders"} 0
# HELP tributary_group_partition_delivery_attempts Deliveries so far of the record at the group's committed offset (0: not yet delivered).
# TYPE tributary_group_partition_delivery_attempts gauge
tributary_group_partition_delivery_attempts{group="audit",partition="0",topic="orders"} 0
tributary_group_partition_delivery_attempts{group="audit",partition="1",topic="orders"} 0
tributary_group_partition_delivery_attempts{group="billing",partition="0",topic="orders"} 1
tributary_group_partition_delivery_attempts{group="billing",partition="1",topic="orders"} 2
tributary_group_partition_delivery_attempts{group="idle",partition="0",topic="orders"} 0
tributary_group_partition_delivery_attempts{group="idle",partition="1",topic="orders"} 0
# HELP tributary_group_partition_in_flight 1 when the record at the group's committed offset is delivered and awaits its ack, else 0.
# TYPE tributary_group_partition_in_flight gauge
tributary_group_partition_in_flight{group="audit",partition="0",topic="orders"} 0
tributary_group_partition_in_flight{group="audit",partition="1",topic="orders"} 0
tributary_group_partition_in_flight{group="billing",partition="0",topic="orders"} 1
tributary_group_partition_in_flight{group="billing",partition="1",topic="orders"} 1
tributary_group_partition_in_flight{group="idle",partition="0",topic="orders"} 0
tributary_group_partition_in_flight{group="idle",partition="1",topic="orders"} 0
# HELP tributary_group_partition_lag Records of the partition the consumer group has not committed (log end offset minus committed offset).
# TYPE tributary_group_partition_lag gauge
tributary_group_partition_lag{group="audit",partition="0",topic="orders"} 2
tributary_group_partition_lag{group="audit",partition="1",topic="orders"} 1
tributary_group_partition_lag{group="billing",partition="0",topic="orders"} 2
tributary_group_partition_lag{group="billing",partition="1",topic="orders"} 2
tributary_group_partition_lag{group="idle",partition="0",topic="orders"} 2
tributary_group_partition_lag{group="idle",partition="1",topic="orders"} 2
# HELP tributary_group_partition_owner_info The member owning the partition in the consumer group; always 1. Absent when the group has no members.
# TYPE tributary_group_partition_owner_info gauge
tributary_group_partition_owner_info{group="audit",member="a1",partition="0",topic="orders"} 1
tributary_group_partition_owner_info{group="audit",member="a1",partition="1",topic="orders"} 1
tributary_group_partition_owner_info{group="billing",member="b1",partition="0",topic="orders"} 1
tributary_group_partition_owner_info{group="billing",member="b2",partition="1",topic="orders"} 1
# HELP tributary_partition_log_end_offset Offset the partition's next successful publish gets.
# TYPE tributary_partition_log_end_offset gauge
tributary_partition_log_end_offset{partition="0",topic="orders"} 3
tributary_partition_log_end_offset{partition="1",topic="orders"} 2
tributary_partition_log_end_offset{partition="0",topic="payments"} 1
# HELP tributary_partition_log_start_offset Offset of the partition's oldest retained record; the log end offset when it retains none.
# TYPE tributary_partition_log_start_offset gauge
tributary_partition_log_start_offset{partition="0",topic="orders"} 1
tributary_partition_log_start_offset{partition="1",topic="orders"} 0
tributary_partition_log_start_offset{partition="0",topic="payments"} 0
# HELP tributary_partition_retained_records Records the partition retains (log end offset minus log start offset): those not yet acknowledged by every group, and a replay window's.
# TYPE tributary_partition_retained_records gauge
tributary_partition_retained_records{partition="0",topic="orders"} 2
tributary_partition_retained_records{partition="1",topic="orders"} 2
tributary_partition_retained_records{partition="0",topic="payments"} 1
# HELP tributary_topic_partitions Number of partitions of the topic.
# TYPE tributary_topic_partitions gauge
tributary_topic_partitions{topic="orders"} 2
tributary_topic_partitions{topic="payments"} 1
# HELP tributary_topic_up 1 when the last scrape read the topic's snapshot (Describe succeeded), 0 when Describe failed.
# TYPE tributary_topic_up gauge
tributary_topic_up{topic="orders"} 1
tributary_topic_up{topic="payments"} 1
`

// The whole exposition of a cluster in a known state, value for value:
// offsets, retention, lag, in-flight, attempts and owners (SPEC rules 13, 23).
func TestCollectKnownState(t *testing.T) {
	c := knownCluster(t).c
	for _, tc := range []struct {
		name string
		src  tribprom.Source
	}{
		{"Cluster", c},
		{"Backend", c.Backend()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := testutil.CollectAndCompare(tribprom.NewCollector(tc.src), strings.NewReader(knownExposition)); err != nil {
				t.Error(err)
			}
		})
	}
}

// Each scrape reads the cluster anew: billing acking its two in-flight
// records moves its committed offsets and lag and clears in-flight and
// attempts (SPEC rules 11, 16); deleting the idle group stops it counting
// for retention (rule 17), so p1's offset 0, now committed by every group,
// is removed (rule 13) and p1's log start moves to 1.
func TestCollectFollowsAcks(t *testing.T) {
	k := knownCluster(t)
	col := tribprom.NewCollector(k.c)
	if err := testutil.CollectAndCompare(col, strings.NewReader(knownExposition)); err != nil {
		t.Fatal(err)
	}
	ack(t, k.b1, k.b1Held)
	ack(t, k.b2, k.b2Held)
	if _, err := k.c.DeleteGroup("orders", "idle"); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP tributary_group_lag Records of the topic the consumer group has not committed: the sum of its partition lags.
# TYPE tributary_group_lag gauge
tributary_group_lag{group="audit",topic="orders"} 3
tributary_group_lag{group="billing",topic="orders"} 2
# HELP tributary_group_partition_committed_offset The next offset the consumer group will be given on the partition.
# TYPE tributary_group_partition_committed_offset gauge
tributary_group_partition_committed_offset{group="audit",partition="0",topic="orders"} 1
tributary_group_partition_committed_offset{group="audit",partition="1",topic="orders"} 1
tributary_group_partition_committed_offset{group="billing",partition="0",topic="orders"} 2
tributary_group_partition_committed_offset{group="billing",partition="1",topic="orders"} 1
# HELP tributary_group_partition_delivery_attempts Deliveries so far of the record at the group's committed offset (0: not yet delivered).
# TYPE tributary_group_partition_delivery_attempts gauge
tributary_group_partition_delivery_attempts{group="audit",partition="0",topic="orders"} 0
tributary_group_partition_delivery_attempts{group="audit",partition="1",topic="orders"} 0
tributary_group_partition_delivery_attempts{group="billing",partition="0",topic="orders"} 0
tributary_group_partition_delivery_attempts{group="billing",partition="1",topic="orders"} 0
# HELP tributary_group_partition_in_flight 1 when the record at the group's committed offset is delivered and awaits its ack, else 0.
# TYPE tributary_group_partition_in_flight gauge
tributary_group_partition_in_flight{group="audit",partition="0",topic="orders"} 0
tributary_group_partition_in_flight{group="audit",partition="1",topic="orders"} 0
tributary_group_partition_in_flight{group="billing",partition="0",topic="orders"} 0
tributary_group_partition_in_flight{group="billing",partition="1",topic="orders"} 0
# HELP tributary_group_partition_lag Records of the partition the consumer group has not committed (log end offset minus committed offset).
# TYPE tributary_group_partition_lag gauge
tributary_group_partition_lag{group="audit",partition="0",topic="orders"} 2
tributary_group_partition_lag{group="audit",partition="1",topic="orders"} 1
tributary_group_partition_lag{group="billing",partition="0",topic="orders"} 1
tributary_group_partition_lag{group="billing",partition="1",topic="orders"} 1
# HELP tributary_partition_log_start_offset Offset of the partition's oldest retained record; the log end offset when it retains none.
# TYPE tributary_partition_log_start_offset gauge
tributary_partition_log_start_offset{partition="0",topic="orders"} 1
tributary_partition_log_start_offset{partition="1",topic="orders"} 1
tributary_partition_log_start_offset{partition="0",topic="payments"} 0
# HELP tributary_partition_retained_records Records the partition retains (log end offset minus log start offset): those not yet acknowledged by every group, and a replay window's.
# TYPE tributary_partition_retained_records gauge
tributary_partition_retained_records{partition="0",topic="orders"} 2
tributary_partition_retained_records{partition="1",topic="orders"} 1
tributary_partition_retained_records{partition="0",topic="payments"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want),
		"tributary_group_lag", "tributary_group_partition_committed_offset",
		"tributary_group_partition_delivery_attempts", "tributary_group_partition_in_flight",
		"tributary_group_partition_lag", "tributary_partition_log_start_offset",
		"tributary_partition_retained_records"); err != nil {
		t.Error(err)
	}
}

// errSource is a Source whose Describe fails for the topics in fail and
// otherwise asks inner.
type errSource struct {
	inner tribprom.Source
	fail  map[string]bool
}

var errBroken = errors.New("backend unavailable")

func (s errSource) Topics() []string { return s.inner.Topics() }

func (s errSource) Describe(topic string) (engine.TopicDescription, error) {
	if s.fail[topic] {
		return engine.TopicDescription{}, fmt.Errorf("describe %q: %w", topic, errBroken)
	}
	return s.inner.Describe(topic)
}

// A topic whose Describe fails gets topic_up 0 and no other series; the
// failure is counted across scrapes and logged; the other topics are
// exported in full.
func TestCollectDescribeError(t *testing.T) {
	c := knownCluster(t).c
	var logs bytes.Buffer
	col := tribprom.NewCollector(errSource{c, map[string]bool{"orders": true}},
		tribprom.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	for scrape := 1; scrape <= 2; scrape++ {
		want := fmt.Sprintf(`
# HELP tributary_describe_errors_total Describe calls of a topic that failed, over the collector's life.
# TYPE tributary_describe_errors_total counter
tributary_describe_errors_total %d
# HELP tributary_partition_log_end_offset Offset the partition's next successful publish gets.
# TYPE tributary_partition_log_end_offset gauge
tributary_partition_log_end_offset{partition="0",topic="payments"} 1
# HELP tributary_topic_partitions Number of partitions of the topic.
# TYPE tributary_topic_partitions gauge
tributary_topic_partitions{topic="payments"} 1
# HELP tributary_topic_up 1 when the last scrape read the topic's snapshot (Describe succeeded), 0 when Describe failed.
# TYPE tributary_topic_up gauge
tributary_topic_up{topic="orders"} 0
tributary_topic_up{topic="payments"} 1
`, scrape)
		if err := testutil.CollectAndCompare(col, strings.NewReader(want),
			"tributary_describe_errors_total", "tributary_partition_log_end_offset",
			"tributary_topic_partitions", "tributary_topic_up"); err != nil {
			t.Errorf("scrape %d: %v", scrape, err)
		}
	}
	// Nothing else of the failed topic: no group series at all (only orders has groups).
	if n := testutil.CollectAndCount(col, "tributary_group_partition_lag", "tributary_group_members"); n != 0 {
		t.Errorf("%d group series of a topic whose Describe failed, want 0", n)
	}
	if got := strings.Count(logs.String(), `msg="tributary: describe failed" topic=orders err="describe \"orders\": backend unavailable"`); got != 3 {
		t.Errorf("%d Warn records of the failure after 3 scrapes, want 3; log:\n%s", got, logs.String())
	}
	if strings.Contains(logs.String(), "payments") {
		t.Errorf("the topic that did not fail was logged:\n%s", logs.String())
	}
}
