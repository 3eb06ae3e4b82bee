// Package tributary is the typed library on Tributary's broker: a Cluster of
// topics whose payloads are Go values, producers that choose partitions,
// and consumers in consumer groups that block, run handlers, retry with
// backoff and dead-letter what keeps failing — Kafka's consumer-group
// semantics inside one process. The broker underneath is package engine
// (SPEC rules 1–25, docs/contract.md); a second backend slots in through the Backend
// interface.
//
// # Usage
//
//	c, _ := tributary.NewCluster(1000)                         // records retained per partition
//	orders, _ := tributary.CreateTopic(c, "orders", 4, tributary.JSON[Order]())
//	p, _ := tributary.NewProducer[Order](c, "web", tributary.KeyHash())
//	m, err := p.Send(ctx, orders, tributary.Message[Order]{Key: "customer-7", Value: o})
//	// m.ID "2-17", m.Partition 2, m.Offset 17; Send waits while the partition is full
//
//	cons, _ := tributary.NewConsumer(orders, "billing", "b1",
//		tributary.WithDeadLetter("orders-dlq", 5))             // 5 attempts, then the dead-letter topic
//	err = cons.Run(ctx, func(ctx context.Context, m tributary.Message[Order]) error {
//		return bill(m.Value)                                   // nil: ack; error or panic: retry with backoff
//	})                                                         // returns when ctx ends; leaves the group
//
// Several consumers run together under one context with
// golang.org/x/sync/errgroup; each Run has its own goroutines, so a stalled
// consumer never delays another group.
//
// # Types and codecs
//
// A topic holds one payload type, fixed at creation: the Codec's Name (for
// example "String", "Integer", "JSON:main.Order") and, for topics this Cluster created, the
// Go type. OpenTopic with another codec or type returns ErrTypeMismatch.
// Every received Message reports it as PayloadType; records do not carry
// it (a dead letter does, in its HeaderPayloadType header).
// JSON is the default codec; String, Integer and Bytes are built in, and a
// user's Codec plugs in the same way.
//
// # Producers and partitioners
//
// A Producer's Partitioner is fixed when it is made: Manual (the message's
// Partition), Random, RoundRobin, KeyHash (Kafka's default partitioner:
// murmur2 of the key, (h & 0x7fffffff) % partitions), or a user's. Send
// waits for room in a full partition (woken when retention removes
// records, never busy-waiting, until its context ends); TrySend returns
// ErrPartitionFull at once.
//
// # Consumers
//
// A Consumer is one member (its name) of a consumer group on one topic.
// Poll blocks until messages are deliverable, woken by the broker: a
// publish, a Retry, a rebalance, a Seek or an ack timeout. An idle consumer
// uses no CPU. Run calls a Handler for each message: nil acks it; an error
// or a panic retries it after a doubling, capped backoff; after the
// maximum attempts of its group's WithDeadLetter (or at once when the
// payload does not decode) the record goes to the dead-letter topic with
// headers naming its origin and the last error, then is acked. A full
// dead-letter topic makes Run wait: a record is never lost. Delivery is at
// least once: a record whose delivery a rebalance, a Seek or an ack timeout
// cancelled is processed again, by its new owner.
//
// A handler may call anything on the cluster — publish to its own topic,
// ack, seek, close its consumer — without deadlock: no lock is held while
// it runs.
//
// # Consumer groups
//
// A group's configuration is the group's, kept by the backend for every
// process (Cluster.CreateGroup's GroupOptions, Cluster.GroupConfig): where
// it starts, at the log start (SPEC rule 7, the default) or with
// WithStart(StartLatest) at the log end, and its failure policy,
// WithDeadLetter and WithBackoff, which every consumer of the group
// follows. A consumer given a failure option that differs from its
// group's is refused (ErrPolicyMismatch); the first consumer of an absent
// group creates it with its own. Cluster.RemoveMember removes a member
// from any process (Kafka's RemoveMembersFromConsumerGroup); its Run ends
// with ErrClosed.
//
// # Errors
//
// Sentinels, each returned wrapped with context (test with errors.Is):
// ErrInvalidArgument, ErrUnknownTopic, ErrExists, ErrNotFound,
// ErrTypeMismatch, ErrPolicyMismatch, ErrPartitionFull, ErrNotInFlight,
// ErrClosed, ErrEncode, ErrDecode, ErrPartitioner, and the engine's ErrOffsetOutOfRange,
// ErrGroupNotEmpty and ErrInvalidAssignment. A call that returns an error
// changed nothing unless its doc says otherwise.
//
// # User code
//
// Code of yours that the library calls never crashes the process: a panic
// in a Codec (Name, Encode, Decode), a Partitioner (Name, Partition), a
// Handler, or the Error method of an error you give it is recovered and
// becomes an error of the call that ran it — ErrEncode or ErrPartitioner
// from Send (nothing sent), ErrDecode in Message.Err (handled by Run as a
// payload that does not decode), a handler failure in Run (retried or
// dead-lettered), ErrInvalidArgument from the call given a Codec or
// Partitioner whose Name panics — with the panic value and its goroutine's
// stack in the error's text. Nil arguments (a nil *Cluster, *Topic,
// Context, Handler, option, or a Codec or Partitioner that is a typed nil)
// are ErrInvalidArgument.
package tributary
