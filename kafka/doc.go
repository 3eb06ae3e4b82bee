// Package kafka serves a tributary Cluster, on any backend, over Kafka's
// wire protocol, so that Kafka clients (franz-go, librdkafka and kcat,
// the Java client) produce to it and consume from it. It is a module of
// its own (github.com/f91dcac0/tributary/kafka), so importers of the core
// inherit none of its dependencies.
//
//	cluster, _ := tributary.NewCluster(100_000) // records retained per partition
//	srv, _ := kafka.Listen(cluster, "127.0.0.1:0")
//	defer srv.Close()
//	cl, _ := kgo.NewClient(kgo.SeedBrokers(srv.Addr()))
//
// The Server is one broker, node 0 (NodeID), leader of every partition
// and coordinator of every group. Its APIs and versions are those
// ApiVersions lists (docs/kafka.md has the table): Produce, Fetch,
// ListOffsets, Metadata, CreateTopics, InitProducerID, FindCoordinator,
// the classic group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups) and
// share groups (KIP-932). Each handler's doc comment says what it maps to
// in Tributary and which error codes come back when.
//
// Kafka's terms on Tributary's: topics, groups and members are Tributary
// identifiers (1 to 64 of A-Z a-z 0-9 _ -; Kafka's '.' is refused);
// retention is Tributary's shared retention (a record is removed once
// every consumer group of its topic has committed past it, SPEC rule 13),
// so a committed offset (OffsetCommit) is a Cluster.Seek of the Tributary
// group of the same name, and a partition holds at most the cluster's
// capacity: a Produce into a full partition waits for room until the
// request's timeout. Share groups (share.go's header comment has the
// whole mapping) acquire by polling and acknowledge by Ack, Retry and the
// group's dead-letter topic.
package kafka
