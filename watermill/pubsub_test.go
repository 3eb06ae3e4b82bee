package tributarywm_test

// Watermill's universal Pub/Sub suite (tests.TestPubSub) on the adapter in
// three configurations and, without -short, its stress test of each.

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// suitePartitions is the partition count of the suite's topics: 16
// partitions of capacity 1,000 hold the 10,000 messages TestPublisherClose
// publishes before anyone subscribes.
const suitePartitions = 16

// suite is one configuration of Watermill's universal test suite: the
// cluster options, the publisher's partition key, the subscribers' mode,
// and the features that configuration claims.
type suite struct {
	features     tests.Features
	capacity     int32 // the cluster's capacity per partition; 0: 1,000
	clusterOpts  []engine.Option
	partitionKey func(topic string, msg *message.Message) (string, error)
	ephemeral    bool
}

// run runs tests.TestPubSub (or, with stress, tests.TestPubSubStressTest)
// on a fresh cluster of the suite's capacity, closed when the test ends.
func (s suite) run(t *testing.T, stress bool) {
	capacity := s.capacity
	if capacity == 0 {
		capacity = 1000
	}
	cluster, err := tributary.NewCluster(capacity, s.clusterOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Close() })
	newPubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		logger := watermill.NopLogger{}
		pub, err := tributarywm.NewPublisher(cluster, tributarywm.PublisherConfig{
			Partitions: suitePartitions, PartitionKey: s.partitionKey,
		}, logger)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := tributarywm.NewSubscriber(cluster, tributarywm.SubscriberConfig{
			ConsumerGroup: group, Ephemeral: s.ephemeral && group == "", Partitions: suitePartitions,
			NackResendSleep: tributarywm.NoSleep,
		}, logger)
		if err != nil {
			t.Fatal(err)
		}
		return pub, sub
	}
	constructor := func(t *testing.T) (message.Publisher, message.Subscriber) { return newPubSub(t, "") }
	if stress {
		tests.TestPubSubStressTest(t, s.features, constructor, newPubSub)
		return
	}
	tests.TestPubSub(t, s.features, constructor, newPubSub)
}

// Three configurations, as Watermill's Kafka adapter runs the suite:
//
//   - groups: every subscriber without a group joins DefaultConsumerGroup;
//     messages go round-robin over 16 partitions. Order is not claimed (no
//     key), nor old messages for new subscribers (they join one group).
//   - ordered: the suite's ordering key is the payload (its "message type"),
//     so messages of one type share a partition; per-key order and "no ack
//     blocks the partition" are claimed. The full-size tests publish 5,000
//     and 10,000 messages of ONE payload, so into one partition, before
//     anyone subscribes: the cluster's capacity is 16,384 records per
//     partition (beyond engine rule 1's 1,000: docs/contract.md, the typed library's capacity).
//   - ephemeral: every subscriber without a group reads through a group of
//     its own from the log start, and the cluster keeps a replay window of
//     1,000 records per partition, so new subscribers receive old messages
//     that other groups have already acked (SPEC rule 21).
var suites = map[string]suite{
	"groups": {
		features: tests.Features{ConsumerGroups: true, Persistent: true},
	},
	"ordered": {
		features:     tests.Features{ConsumerGroups: true, Persistent: true, GuaranteedOrder: true},
		capacity:     16384,
		partitionKey: func(_ string, msg *message.Message) (string, error) { return string(msg.Payload), nil },
	},
	"ephemeral": {
		features:    tests.Features{ConsumerGroups: true, Persistent: true, NewSubscriberReceivesOldMessages: true},
		clusterOpts: []engine.Option{engine.WithReplayWindow(engine.MaxCapacity)},
		ephemeral:   true,
	},
}

func TestPubSubGroups(t *testing.T)    { suites["groups"].run(t, false) }
func TestPubSubOrdered(t *testing.T)   { suites["ordered"].run(t, false) }
func TestPubSubEphemeral(t *testing.T) { suites["ephemeral"].run(t, false) }

// The stress runs: each configuration's suite ten times in parallel
// (STRESS_TEST_COUNT overrides the ten), in the full-size run only.
func TestPubSubStressGroups(t *testing.T)    { stress(t, "groups") }
func TestPubSubStressOrdered(t *testing.T)   { stress(t, "ordered") }
func TestPubSubStressEphemeral(t *testing.T) { stress(t, "ephemeral") }

func stress(t *testing.T, name string) {
	if testing.Short() {
		t.Skip("stress runs only without -short (make test-watermill)")
	}
	suites[name].run(t, true)
}
