// Package engine is Tributary's broker: a bounded, in-memory event broker with
// partitioned topics, consumer groups, per-record acknowledgement and retry,
// deterministic rebalancing and shared retention. It implements sections 1
// and 2 of SPEC.md; the sequential reference model of the same contract is
// package model.
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
// State and the lock that guards it:
//
//   - Broker.topics: an immutable map published through an atomic pointer;
//     Create copies it under Broker.createMu. Lookups take no lock.
//   - topic.mu (sync.RWMutex) guards topic.groups, the set of groups. Join
//     takes it for writing only to create a group; Join of an existing group,
//     Leave, Poll, Ack and Retry take it for reading. Publish does not take
//     it: a publish touches one partition log and nothing else.
//   - group.mu (sync.RWMutex) guards the group's membership and assignment
//     (members, owner, assigned). Join and Leave take it for writing; Poll,
//     Ack and Retry for reading.
//   - partition.mu (sync.Mutex) guards the partition's log and every group's
//     cursor on that partition (committed offset, in-flight flag). Keeping
//     all groups' committed offsets for a partition under the partition lock
//     is what lets Ack compute the retention trim, and Publish check
//     capacity, atomically with each other and without touching other
//     groups' locks.
//
// Lock order, the only one used anywhere in this package:
//
//	topic.mu  →  group.mu  →  partition.mu in ascending partition index
//
// A call may skip levels but never takes a lock of an earlier level while
// holding a later one, and never takes a lower-indexed partition lock while
// holding a higher one.
//
// # Linearization points
//
//   - Publish: while holding its partition lock.
//   - Poll: it locks the member's partitions in ascending order, inspecting
//     each as it is locked, and releases none until it is done (two-phase
//     locking); it takes effect once the last lock is taken, so a poll over
//     several partitions is one atomic snapshot. The group read lock keeps
//     the assignment fixed throughout.
//   - Ack, Retry: while holding the group read lock (the owner check) and the
//     partition lock (the in-flight check, the commit and the trim).
//   - Join, Leave: while holding the group write lock, which excludes every
//     Poll, Ack and Retry of that group, so the whole assignment changes at
//     one instant (SPEC rule 9). Creating a group holds the topic write lock,
//     which excludes every Ack (so no trim moves a log start offset while the
//     new group's committed offsets are read) and makes the group visible to
//     other calls only once complete.
//   - Create: the atomic store of the new topics map.
package engine
