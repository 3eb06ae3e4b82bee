// Package engine is Tributary's broker: a bounded, in-memory event broker with
// partitioned topics, consumer groups, per-record acknowledgement and retry,
// deterministic rebalancing and shared retention. It implements the core
// contract, SPEC rules 1–14 (listed in README.md); package model is the
// sequential reference model of the same contract, and package porcupine
// checks the engine against it.
//
// Identifiers (topic, group and member) are 1 to 64 bytes of A-Z a-z 0-9 _
// and -, case-sensitive and never trimmed (SPEC rule 3); anything else is
// ErrInvalidArgument.
//
// # Terms
//
// A topic has a fixed number of partitions (1..64). A partition log retains
// records from its log start offset (the oldest retained record) up to its
// log end offset (the offset the next publish gets). A consumer group has,
// per partition, a committed offset (the next offset it will be given) and at
// most one in-flight delivery, always the record at the committed offset,
// reserved to the partition's current owner. Ownership is decided by the
// round-robin assignor: members sorted bytewise, partition p belongs to
// member p mod memberCount.
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
//   - Broker.topics: an immutable map published through an atomic pointer;
//     Create copies it under Broker.createMu. Lookups take no lock.
//   - topic.mu (sync.Mutex), the topic's membership lock, serialises every
//     membership change (Join, Leave, group creation) and guards each
//     group's member list. Poll, Ack, Retry and Publish never take it.
//   - topic.groups and group.assign: immutable snapshots (the set of groups;
//     a group's owner per partition and partitions per member) behind
//     atomic pointers. A writer replaces them only while holding topic.mu
//     and every partition lock of the topic.
//   - partition.mu (sync.Mutex, padded to its own cache lines) guards the
//     partition's log and every group's cursor on that partition (committed
//     offset, in-flight flag). Keeping all groups' committed offsets for a
//     partition under the partition lock is what lets Ack compute the
//     retention trim, and Publish check capacity, atomically with each other
//     and without touching other groups' state.
//
// Lock order, the only one used anywhere in this package:
//
//	topic.mu  →  partition.mu in ascending partition index
//
// A call never takes topic.mu while holding a partition lock, and never takes
// a lower-indexed partition lock while holding a higher one.
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
//   - Write (Join, Leave): the topic's membership mutex, all P partition
//     locks in ascending order, and a new assignment: O(P + M) time, one
//     P-entry owner slice and one M-entry map allocated. Creating a group
//     also copies the groups map and adds one cursor (16 bytes) per
//     partition, in cursor slices grown in whole 128-byte units.
//   - Memory per topic: P padded partitions (128 bytes each plus the ring
//     buffer), per group one cursor per partition and one live assignment
//     (older ones are garbage once no reader holds them).
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
// Publish, Ack, Retry and AppendPoll into a buffer with room allocate
// nothing; Poll allocates only its result. Identifiers found in the broker's
// maps were validated when added, so the hot paths validate an identifier
// only on a miss.
package engine
