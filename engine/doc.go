// Package engine is Tributary's broker: a bounded, in-memory event broker with
// partitioned topics, consumer groups, per-record acknowledgement and retry,
// switchable assignors, deterministic rebalancing, replay and shared
// retention. It implements SPEC rules 1–23 (the core contract, rules 1–14,
// and the Tributary features, rules 15–23; both in README.md). Package model
// is the sequential reference model of the same contract, and package
// porcupine checks the engine against it.
//
// # Usage
//
//	b, err := engine.New(1000,                      // records retained per partition, 1..1000
//		engine.WithReplayWindow(100),               // keep 100 fully committed records for replay
//		engine.WithAckTimeout(30*time.Second))      // redeliver deliveries not acked in 30 s
//	if err != nil { … }
//	b.Create("orders", 4)                           // 4 partitions; false if it exists
//	b.CreateGroup("orders", "billing", engine.Sticky)
//	off, err := b.PublishMessage("orders", 2, engine.Message{
//		Key: "customer-7", Headers: []engine.Header{{Key: "trace", Value: "ab12"}}, Payload: `{"id":7}`,
//	})                                              // off is -1 when the partition is full
//	parts, err := b.Join("orders", "billing", "m1") // m1's partitions: [0 1 2 3]
//	recs, err := b.Poll("orders", "billing", "m1", 16)
//	for _, r := range recs {                        // r.Attempt: 1, 2, … per delivery
//		if handle(r) == nil {
//			b.Ack("orders", "billing", "m1", r.Partition, r.Offset)   // commit
//		} else {
//			b.Retry("orders", "billing", "m1", r.Partition, r.Offset) // deliver again
//		}
//	}
//	b.Seek("orders", "billing", 2, 0)     // replay partition 2 from offset 0
//	d, err := b.Describe("orders")        // one atomic snapshot: offsets, owners, lag
//	b.Leave("orders", "billing", "m1")    // rebalance; the group keeps its offsets
//	b.DeleteGroup("orders", "billing")    // an empty group stops holding retention
//
// Identifiers (topic, group and member) are 1 to 64 bytes of A-Z a-z 0-9 _
// and -, case-sensitive and never trimmed (SPEC rule 3); anything else is
// ErrInvalidArgument. Every invalid call returns ErrInvalidArgument and
// changes nothing; a state mismatch (acking a record you do not hold) returns
// false; nothing blocks: an empty poll returns an empty slice.
//
// # Terms
//
// A topic has 1..64 partitions (more can be added, AddPartitions). A
// partition log retains records from its log start offset (the oldest
// retained record) up to its log end offset (the offset the next publish
// gets). A consumer group has, per partition, a committed offset (the next
// offset it will be given), at most one in-flight delivery (always the record
// at the committed offset, reserved to the partition's current owner) and an
// attempt count (deliveries of that record so far). Ownership is decided by
// the group's assignor (RoundRobin unless CreateGroup or SetAssignor chose
// another) over the members sorted bytewise. A record is removed once every
// group of its topic has committed past it, except that WithReplayWindow
// keeps the most recent fully committed ones for Seek.
//
// The lock design, linearization points and cost model follow; docs/design.md
// has the same with the reasoning behind each choice.
//
// # Concurrency
//
// A *Broker is safe for use by any number of goroutines. Every call is
// linearizable (SPEC rule 14): it takes effect at one instant between its
// call and return. No call waits for a future event; calls wait only for
// locks, and the single lock order below rules out deadlock.
//
// State and what guards it:
//
//   - Broker.topics and topic.groups: registries (registry.go) whose
//     lookups take no lock and write nothing shared; Create stores into
//     topics under Broker.createMu, and the group calls store into and
//     delete from groups under topic.mu. A store or delete costs amortised
//     O(1), so creating the N-th topic or group costs O(partitions).
//
//   - topic.count and topic.parts: the partition count, an atomic, and a
//     fixed array of 64 partition pointers. AddPartitions writes the new
//     entries, then raises count, while holding topic.mu and every partition
//     lock (old and new); a reader loads count, then parts[p] for p < count.
//     The hot path reads a pointer from the topic, as it read the slice
//     before: adding partitions costs it no lock and no extra indirection.
//
//   - topic.mu (sync.Mutex), the topic's membership lock, serialises every
//     membership and configuration change (Join, Leave, CreateGroup,
//     DeleteGroup, SetAssignor, AddPartitions) and the admin calls Seek and
//     Describe, and guards each group's members and assignor and the
//     topic's cursor slot allocation. Poll, Ack, Retry and Publish never take
//     it.
//
//   - topic.groups and group.assign: immutable snapshots (the set of groups;
//     a group's owner per partition and partitions per member) behind
//     atomic pointers. A writer replaces them only while holding topic.mu
//     and every partition lock of the topic.
//
//   - partition.mu (sync.Mutex, padded to its own cache lines) guards the
//     partition's log, every group's cursor on that partition (committed
//     offset, in-flight flag, attempts, delivery time) and low, the least
//     committed offset of the topic's groups there (noLow with no group). Keeping all groups' committed offsets for a
//     partition under the partition lock is what lets Ack compute the
//     retention trim, and Publish check capacity, atomically with each other
//     and without touching other groups' state.
//
//   - wallClock.mu serialises the default clock's resync; a leaf lock,
//     taken with no other lock held (Publish and Poll read the clock before
//     they lock a partition).
//
// Lock order, the only one used anywhere in this package:
//
//	topic.mu  →  partition.mu in ascending partition index
//
// A call never takes topic.mu while holding a partition lock, and never takes
// a lower-indexed partition lock while holding a higher one. AddPartitions
// locks the new partitions after every existing one, which is ascending.
// Broker.createMu is taken alone (Create, Topics). A user's Assignor runs
// under topic.mu but before any partition lock is taken, so a slow or
// failing assignor never holds up Publish, Poll or Ack, and its answer is
// validated before anything changes.
//
// # Wake-ups and handles
//
// Nothing in the broker blocks, but a caller may: TopicHandle.Ready,
// MemberHandle.Ready and TopicHandle.Room return channels (signal.go) that
// the next relevant change closes — a successful publish or AddPartitions
// (topic.ready); a group's Ack, Retry, rebalance, Seek or deletion
// (group.ready); retention removing records from a partition
// (partitionState.room). A signal is one atomic pointer, not a lock: it is
// outside the lock order, and notifying it (possibly under a partition lock)
// takes no lock. With nobody waiting a notify is one atomic load, so Publish
// and Ack pay nothing measurable. A waiter takes the channel before it
// checks the state, the notifier changes the state before it loads the
// channel, and both are sequentially consistent atomics: a wake-up is
// never lost (engine/handle_test.go races them). The ack timeout notifies
// nobody; MemberHandle.NextTimeout tells a waiter when to look again.
//
// Broker.Topic and TopicHandle.Member resolve names once. A MemberHandle
// caches its group and looks it up again only when the group was deleted
// (group.deleted, set under topic.mu and every partition lock); its calls
// then run exactly the code of the by-name calls after their lookups, with
// the same linearization points.
//
// # Why readers need no membership lock
//
// The membership lock of a topic is read on every Poll, Ack and Retry; as a
// sync.RWMutex its reader count is one cache line that every core writes, and
// a hot topic stops scaling (golang/go#17973). Instead,
// readers load the assignment snapshot, then lock the partition(s) they
// need, then check that the snapshot is still the group's current one. A
// rebalance stores a new snapshot only while holding every partition lock,
// so once a reader holds any one partition lock and has seen its snapshot
// current, no rebalance can complete until the reader lets go: the snapshot
// is as stable as under a read lock. If the check fails, a rebalance ran in
// between; the reader unlocks and starts again with the new snapshot (a
// bounded retry that waits only for the rebalance's locks). The reader side
// thus writes only the cache lines of the partitions it touches.
//
// Cost model of the membership scheme, for a topic of P partitions and a
// group of M members:
//
//   - Read (every Poll, Ack, Retry): two atomic pointer loads (the groups
//     map, the assignment) and one more after the first partition lock, one
//     map lookup for the group and, in Poll, one for the member; no write to
//     any shared line besides the partition locks the call needs anyway.
//   - Write (Join, Leave, SetAssignor): the topic's membership mutex, the
//     assignor's run (O(P + M) for the built-ins), all P partition locks in
//     ascending order, and a new assignment: one P-entry owner slice and one
//     M-entry map allocated. Creating a group adds one registry entry
//     (amortised O(1)) and one cursor (32 bytes) per partition, reusing a
//     deleted group's slot when there is one, in cursor slices grown
//     geometrically in whole 128-byte units.
//   - Memory per topic: 64 partition pointers, P padded partitions (128
//     bytes each plus the ring buffer of 32-byte entries; a message's key,
//     headers and own time sit behind one pointer, nil for a bare payload),
//     per group one cursor per partition and one live assignment (older
//     ones are garbage once no reader holds them).
//
// # Linearization points
//
//   - Publish: while holding its partition lock.
//   - Poll: it locks the member's partitions in ascending order, inspecting
//     each as it is locked, and releases none until it is done (two-phase
//     locking); it takes effect once the last lock is taken, so a poll over
//     several partitions is one atomic snapshot. A poll that locks nothing
//     (absent group or member, no partitions) takes effect when it loads the
//     snapshot that says so.
//   - Ack, Retry: while holding the partition lock, with the owner check
//     made against the assignment verified current under that lock.
//   - PublishMessage: as Publish. The record's broker timestamp is read just
//     before the partition lock, so it lies within the call's interval.
//   - CreateGroup, DeleteGroup, SetAssignor: while holding every partition
//     lock, when the group is added to (removed from) the registry or its
//     new assignment is stored. A deleted group's slot is freed and
//     retention re-applied in the same critical section.
//   - AddPartitions: while holding every old and new partition lock, at the
//     store of the new count, after every group's new assignment is stored:
//     no reader can see the new partitions with an old assignment.
//   - Seek: while holding topic.mu and the partition lock.
//   - Describe: while holding topic.mu and every partition lock, so the
//     snapshot is of one instant (lag is never negative). Snapshot is
//     Describe copying each partition's retained records under the same
//     locks: the records and the description are of that one instant.
//   - MemberHandle.AppendPollPartition: as Poll, with only the named
//     partition in the member's set: it locks that one partition (after the
//     assignment check) and takes effect while holding it.
//   - Join, Leave: while holding every partition lock, when the new
//     assignment (and for a new group, its cursors at the log start offsets
//     and the new set of groups) is stored. No Poll, Ack, Retry or Publish of
//     the topic is in progress then, so the whole assignment changes at one
//     instant (SPEC rule 9) and a new group's committed offsets are the log
//     start offsets of that instant (rule 7).
//   - Create: the atomic store of the new topics map.
//
// # Allocation
//
// Publish, Ack, Retry, AppendPoll and AppendPollPartition into a buffer
// with room allocate nothing; Poll allocates only its result. Identifiers found in the broker's
// maps were validated when added, so the hot paths validate an identifier
// only on a miss.
package engine
