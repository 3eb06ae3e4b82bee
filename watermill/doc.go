// Package tributarywm makes a Tributary cluster a Watermill Pub/Sub: a
// message.Publisher and a message.Subscriber (with SubscribeInitializer) over
// one shared *tributary.Cluster, so a Watermill router, its middlewares and
// its handlers run on an in-process broker with partitioned topics, real
// consumer groups, per-message ack and retry, and shared retention.
//
// It lives in a module of its own (github.com/f91dcac0/tributary/watermill)
// so that importers of Tributary's core do not inherit Watermill's
// dependencies. Import it under its package name:
//
//	import tributarywm "github.com/f91dcac0/tributary/watermill"
//
//	cluster, _ := tributary.NewCluster(1000) // capacity per partition, records
//	pub, _ := tributarywm.NewPublisher(cluster, tributarywm.PublisherConfig{Partitions: 8}, logger)
//	sub, _ := tributarywm.NewSubscriber(cluster, tributarywm.SubscriberConfig{ConsumerGroup: "billing"}, logger)
//
// # Mapping
//
//   - A Watermill topic is a Tributary topic of payload type Bytes
//     (tributary.Bytes), created on first use by Publish, Subscribe or
//     SubscribeInitialize with the configured partition count. Its name must
//     be a Tributary identifier: 1 to 64 bytes of A-Z a-z 0-9 _ - (SPEC rule
//     3); a topic created by the typed library with another payload type is
//     refused (tributary.ErrTypeMismatch).
//   - The message UUID travels in the header HeaderUUID; every metadata
//     entry is a header of the same key and value, in key order. The payload
//     is copied.
//   - A publisher partitions by PublisherConfig.PartitionKey with Kafka's
//     key hash (tributary.KeyHash): messages of one key go to one partition
//     and keep their order; messages without a key go round-robin. A full
//     partition makes Publish wait for room (SPEC rule 5), never drop; the
//     wait ends with the message's context or Publisher.Close.
//   - Every Subscribe call is one member of a consumer group (SPEC rules
//     6–10): SubscriberConfig.ConsumerGroup, or DefaultConsumerGroup when it
//     is empty, or a group of its own with SubscriberConfig.Ephemeral. The
//     group's members share the topic's partitions; each group sees every
//     message.
//   - Each partition has at most one message in flight per group (SPEC rule
//     10): the subscription sends it on its channel and delivers that
//     partition's next message only after Ack (tributary.Consumer.Ack,
//     which commits it) or Nack (after NackResendSleep,
//     tributary.Consumer.Retry: the same message is delivered again with the
//     attempt count + 1; on the last attempt of the group's dead-letter
//     policy, SubscriberConfig.DeadLetterTopic or whatever created the
//     group, it is dead-lettered and acked). Partitions advance
//     independently, so one
//     subscription may hold several messages at once, one per partition.
//   - The message's context carries the delivery (DeliveryFromContext) and
//     is cancelled once the message is acked or nacked, and when the
//     subscription ends.
//   - Closing a subscription (its context, or Subscriber.Close) leaves the
//     group: the messages it held unacked go to the group's other members,
//     or to the next subscription of the group (at least once).
//   - Liveness is the cluster's session timeout (SPEC rule 24;
//     tributary.NewCluster's default 45 s, tributary.WithSessionTimeout):
//     each subscription heartbeats while it runs, whatever its handlers
//     take, and one whose process stops (or stalls past the timeout)
//     leaves its group, its unacked messages going to the other members;
//     a stalled one joins again by itself. SubscriberConfig.SessionTimeout
//     states the timeout the application expects.
//
// Retention is the cluster's: a message is removed once every group of its
// topic has acked it (SPEC rule 13), or kept as a replay window
// (tributary.WithReplayWindow, rule 21), which is what lets an Ephemeral
// subscription read messages other groups have already consumed.
//
// Watermill's universal Pub/Sub test suite (pubsub/tests.TestPubSub) runs
// against this package in three configurations; docs/watermill.md in the
// repository lists the features each claims and every test it skips.
package tributarywm
