// Package engine is Tributary's broker: a bounded, in-memory event broker with
// partitioned topics, consumer groups, per-record acknowledgement and retry,
// switchable assignors, deterministic rebalancing, replay and shared
// retention, and member liveness: a session timeout with heartbeats and a
// fenced rejoin. It implements SPEC rules 1–25 (the core contract, rules
// 1–14, the Tributary features, rules 15–23, and member liveness, rules 24
// and 25; all in docs/contract.md). Package model
// is the sequential reference model of the same contract, and package
// porcupine checks the engine against it.
//
// # Usage
//
//	b, err := engine.New(1000,                      // records retained per partition, 1..1000 (more: WithExtendedCapacity)
//		engine.WithReplayWindow(100),               // keep 100 fully committed records for replay
//		engine.WithAckTimeout(30*time.Second),      // redeliver deliveries not acked in 30 s
//		engine.WithSessionTimeout(45*time.Second))  // a member not seen for 45 s leaves its group
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
//	b.Heartbeat("orders", "billing", "m1") // false: m1 expired (or left) and must Join again
//	b.Rejoin("orders", "billing", "m1")    // a restarted m1: its predecessor's deliveries come again
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
//     entries, then every group's new assignment, then raises count, under
//     topic.mu; a reader loads count, then parts[p] for p < count.
//
//   - topic.mu (sync.Mutex), the topic's membership lock, serialises every
//     membership and configuration change (Join, Leave, CreateGroup,
//     DeleteGroup, SetAssignor, AddPartitions) and the admin calls Seek and
//     Describe, and guards each group's members and assignor and the
//     topic's cursor slot allocation. Poll, Ack, Retry and Publish never take
//     it.
//
//   - topic.groups and group.assign: immutable snapshots (the set of groups;
//     a group's owner per partition, partitions per member and cursor per
//     partition) behind atomic pointers, replaced under topic.mu. A new
//     assignment is stored while holding the group's cursor lock of every
//     partition whose owner changes.
//
//   - cursor.mu (sync.Mutex; one per group and partition, each cursor on a
//     128-byte padding unit of its own) guards that group's in-flight flag,
//     attempts, delivery time and buffer slot on that partition and every
//     write of its committed offset. Poll, Ack and Retry lock cursors, never
//     a partition, except that an Ack of a pinned cursor also takes the
//     partition lock unless the cursor is its partition's sole cursor
//     (below). Groups reading one partition (fan-out) thus
//     share no lock with each other, nor with Publish.
//
//   - partition.mu (sync.Mutex, padded to its own cache lines) guards the
//     partition's log, its slice of cursors (one per group slot) and low,
//     the least committed offset of the topic's groups there (noLow with no
//     group), partition.sole, and every write of a pinned cursor's
//     committed offset but a sole cursor's (below). Publish takes it to
//     append and to check capacity against retention.
//
//   - partition.end: the log end offset, an atomic on a cache line of its
//     own, stored under partition.mu after each append. Poll reads it
//     without the partition lock and reads the record at its committed
//     offset with ringlog's Read: a record below end is written, and the
//     record at a group's committed offset cannot be trimmed (retention
//     keeps everything from low on, and low ≤ that offset), nor its slot
//     or page reused, nor its page's directory slot written (each needs
//     the record trimmed first), while the group's cursor lock is held.
//
//   - The log's directory (ringlog.Log.dir): an atomic pointer to the
//     ring of page pointers of a log whose capacity exceeds one page
//     (1,024 records; WithExtendedCapacity), written under partition.mu
//     when the log outgrows it (a new directory, filled, then stored) and
//     loaded by Read. It is not a lock and takes part in no lock order:
//     Read loads it after the load of end that showed the record, and the
//     directory it gets, or any later one, holds the record's page
//     (package ringlog's doc has the argument; TestLogReadWhileAppending
//     and TestPagedLogConcurrentGroups race it, and the first catches
//     ringlog's grow-publishes-early fault, a directory stored before it is
//     filled: ringlog/faults_test.go).
//
//   - The pin: cursor.state holds committed<<2 | sole | pinned, read atomically by
//     retention without the cursor's lock. Retention (retainLocked, under
//     partition.mu) computes low and pins every cursor at it, with a
//     compare-and-swap that fails if the cursor moved meanwhile, so that
//     whenever partition.mu is free every cursor at low is pinned. An Ack
//     commits an unpinned cursor with a compare-and-swap under the cursor
//     lock alone: that cursor is above low, so low, and with it retention
//     and Publish's capacity, cannot change. A pinned cursor commits under
//     the partition lock and re-applies retention. A new group's cursors
//     start pinned; a Seek stores its cursor unpinned and re-applies
//     retention; a stale pin (on a cursor above low) only sends its next
//     Ack the slow way, which clears it.
//
//   - The sole cursor: on a partition of a ring log (a capacity up to
//     1,024 records) without a replay window whose only cursor is one
//     group's (one group on the topic), an Ack that commits that cursor
//     under the partition lock sets a second bit of cursor.state, sole,
//     with the pin, and partition.sole to the cursor.
//     Its later commits are a compare-and-swap under the cursor lock
//     alone (then a notify of room): the swap that moves committed from
//     offset to offset+1 also raises the partition's least committed
//     offset to offset+1 and, with no window, removes the record at
//     offset. partition.low and the log's start lag it until a holder of
//     the partition lock catches up (catchUpLocked: low becomes the
//     cursor's committed offset, the log is trimmed to it). Publish
//     catches up first thing under its lock; Describe, holding the
//     cursor, catches up; every other holder of a partition lock (a slow
//     Ack, Seek, CreateGroup, DeleteGroup, a creating Join: the calls
//     that change a partition's cursors, pins or low) first unsoles it
//     (unsoleLocked: a compare-and-swap clears the bit, then it catches
//     up), after which the cursor commits under the partition lock again
//     until an Ack makes it sole again. An Ack racing an unsole fails its
//     swap (the bit is part of the word it swaps) and takes the partition
//     lock, behind the unsole, where low is exact. A catch-up trims only
//     below the cursor's committed offset, so a poll holding the cursor
//     still reads its record. Until the catch-up the removed records'
//     payloads stay reachable from the ring (never more than its capacity,
//     which a full partition holds anyway); a paged log, which gives its
//     pages up as it trims, never has a sole cursor. Fault (x)
//     catch-up-skips-trim, a catch-up that raises low but removes
//     nothing, is caught by the checker and the differential test.
//
//   - wallClock.mu serialises the default clock's resync; a leaf lock:
//     nothing is locked while it is held. Every call reads the clock
//     before it locks anything, except a publish's exact reading for the
//     coarse clock (below), taken under partition.mu.
//
//   - coarseClock.state and coarseClock.now (clock.go): the default
//     clock's copy for record times, written by its refresher goroutine
//     (and by the one reader that starts it, and, under partition.mu, by
//     every coarseExactEvery-th append to the partition) and read by
//     Publish before any lock. partition.stamps, the count of those
//     appends, is guarded by partition.mu. Neither is a lock: they take part in no lock order, and a
//     record's time is not part of any call's linearization (a publish
//     linearizes at its append; its time is a value read before, as with
//     the exact clock, only up to 1 ms older).
//
//   - With WithSessionTimeout (rule 24), session.seen: one atomic word per
//     member, on a 128-byte padding unit of its own, holding the member's
//     last-seen instant (broker clock, Unix ns) or sessionGone. It is
//     written only by compare-and-swap: a refresh raises it (never lowers
//     it) and fails on sessionGone; an expiry, holding topic.mu, claims it
//     (sessionGone) only if it still holds the value it judged expired,
//     and gives it back if the group's assignor refuses the rebalance. A
//     refresh runs only under topic.mu or under a cursor lock of the
//     member's group, never with neither (below). The words hang from the
//     assignment snapshot (assignment.sessions, immutable, shared by
//     generations while the member stays), so a reader finds its member's
//     word with the lookup it makes anyway.
//
//   - With WithSessionTimeout, topic.deadline: an atomic, a lower bound of
//     every member's last-seen instant plus the timeout over the topic's
//     groups (noDeadline when none). Written only under topic.mu: lowered
//     by a Join that adds a member, before the member can be seen, and set
//     by every expiry pass from the words. Refreshes only raise what it
//     bounds, so they never write it. Every call's expiry check is one load
//     of it. Neither word is a lock: they take part in no lock order.
//
// Lock order, the only one used anywhere in this package:
//
//	topic.mu  →  for each partition p in ascending order:
//	             cursor locks of p (one group's, or, under topic.mu, several)
//	             →  partition.mu of p
//
// A call never takes topic.mu while holding another lock, never a lock of a
// lower-indexed partition while holding one of a higher, and never a cursor
// lock of p while holding partition p's lock. Poll locks one group's cursors
// in ascending partition order; Ack locks one cursor, then perhaps its
// partition; a rebalance locks one group's moved cursors in ascending order
// (AddPartitions: every group's, partition by partition); Seek locks one
// cursor, then its partition; Describe locks, partition by partition, every
// group's cursor and then the partition; CreateGroup(At), a creating Join and
// DeleteGroup lock every partition and no cursor (a new group is not
// reachable yet, a deleted one has no members). Only holders of topic.mu
// lock two cursors of one partition, so their order among groups is free.
// Broker.createMu is taken alone (Create, Topics). Heartbeat and Rejoin
// take topic.mu (Rejoin then locks the member's cursors in ascending order);
// an expiry runs under topic.mu and rebalances as Leave does. A Poll, Ack or
// Retry takes topic.mu only on its slow paths (the topic's deadline has
// come, the member's session is being expired, or a poll locks no cursor)
// and only with no other lock held: it lets go of its cursors first. A
// user's Assignor runs
// under topic.mu but before any other lock is taken, so a slow or failing
// assignor never holds up Publish, Poll or Ack, and its answer is validated
// before anything changes.
//
// # Wake-ups and handles
//
// Nothing in the broker blocks, but a caller may: TopicHandle.Ready,
// MemberHandle.Ready and TopicHandle.Room return channels (signal.go) that
// the next relevant change closes — a successful publish or AddPartitions
// (topic.ready); a group's Ack, Retry, rebalance, Seek or deletion
// (group.ready); retention making room in a full partition
// (partitionState.room): removing records, or raising low so that the
// oldest record of a full log is fully committed and a publish may give it
// up to the replay window (rule 21), which removes nothing when the window
// covers it. A signal is one atomic pointer, not a lock: it is
// outside the lock order, and notifying it (possibly under a lock) takes no
// lock. With nobody waiting a notify is one atomic load, so Publish and Ack
// pay nothing measurable. A waiter takes the channel before it checks the
// state, the notifier changes the state before it loads the channel, and
// both are sequentially consistent atomics: a wake-up is never lost
// (engine/handle_test.go races them). Records are removed, and low is
// raised, only under the partition lock (an Ack of a pinned cursor, a Seek,
// DeleteGroup, a publish giving up a replay-window record), and each of
// those ends in trimLocked, which notifies room whenever a publish refused
// before could now succeed (engine/room_test.go and the differential
// test's Room check hold it to that), except by the commit of a sole
// cursor: its compare-and-swap is the change (it removes a record, no
// replay window) and it notifies room after it, so a producer that took
// the channel before the swap is woken and one that took it after sees
// the swap in its publish's catch-up. The ack timeout
// notifies nobody; MemberHandle.NextTimeout tells a waiter when to look
// again.
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
// a hot topic stops scaling (golang/go#17973). Instead, readers load the
// assignment snapshot, lock the cursors they need, and check that the
// snapshot is still the group's current one. A rebalance stores a new
// snapshot only while holding the cursor of every partition whose owner
// changes, so once a reader holds a cursor and has seen its snapshot
// current, that partition's owner cannot change until the reader lets go;
// a partition whose owner stays is right under either snapshot. If the
// check fails, a rebalance ran in between; the reader unlocks and starts
// again with the new snapshot (a bounded retry that waits only for the
// rebalance's locks). A rebalance stops nothing but the polls and acks of
// the moved partitions of its own group: publishes, other groups and the
// group's other partitions run on.
//
// Cost model, for a topic of P partitions and G groups, a group of M
// members:
//
//   - Poll: two atomic pointer loads (the groups map, the assignment), one
//     map lookup for the group and one for the member, per partition one
//     cursor lock and one load of the log end, and one more load of the
//     assignment after the last lock; no partition lock, and no write to any
//     line but the group's own cursors.
//   - Ack, Retry: the same loads, one cursor lock and, for a commit, one
//     compare-and-swap on the cursor; an Ack of the group at the partition's
//     least committed offset also takes the partition lock and scans the
//     partition's G cursors (retention), but for the sole cursor's. With
//     G groups at the same pace, about one commit in G takes it; with one
//     group and no replay window, only the first after each unsole (a
//     Seek, a group created or deleted), and every commit then also loads
//     the room signal.
//   - Publish: the partition lock, an append, one store of the log end;
//     with a sole cursor, one load of its state and, when it moved, a
//     trim.
//   - Write (Join, Leave, SetAssignor): the topic's membership mutex, the
//     assignor's run (O(P + M) for the built-ins), the group's cursor locks
//     of the moved partitions in ascending order, and a new assignment: one
//     P-entry owner slice and one M-entry map allocated (the cursor slice is
//     shared). Creating a group adds one registry entry (amortised O(1)),
//     takes every partition lock and allocates one 128-byte cursor per
//     partition, reusing a deleted group's slot when there is one.
//     Deleting one takes every partition lock and scans every cursor.
//   - Memory per topic: 64 partition pointers, P padded partitions (256
//     bytes each plus the log: for a capacity up to 1,024 records a ring of
//     32-byte entries, the least power of two ≥ the capacity, allocated at
//     Create; beyond, 32 KiB pages of 1,024 entries only for the records
//     retained, one spare page once one was given up, and a directory of
//     8 bytes per page of the most ever retained; a message's key,
//     headers and own time sit behind one pointer, nil for a bare payload),
//     per group one 128-byte cursor and two pointers per partition, and one
//     live assignment (older ones are garbage once no reader holds them).
//
// # Linearization points
//
//   - Publish: while holding its partition lock, at the store of the new
//     log end; a publish refused as full, at its capacity check (low is
//     exact under the lock: the pin), or, with a sole cursor, at its
//     catch-up's load of that cursor's committed offset: only the sole
//     cursor's commits change the partition meanwhile, and they only raise
//     low, so a publish that fits then fits at its store too, and one
//     refused was full at that load.
//   - Poll: it locks the member's cursors in ascending order, inspecting
//     each (in-flight state under the lock; records by a load of the log
//     end, which only grows), then checks the assignment is still current
//     and made for the current partition count, then loads again the log end
//     of every partition it found empty, but the one inspected last,
//     starting again if one has grown; only then does it reserve, and it
//     releases nothing until it is done. It takes effect just after its last
//     inspection: every cursor is held then; a partition seen with a record
//     still has it (it cannot be taken or trimmed while its cursor is held);
//     one found empty was empty then, as the later load shows; and the
//     assignment, current when loaded and when checked, was current
//     throughout (snapshots are never reused). So a poll over several
//     partitions is one atomic snapshot. A poll that locks nothing (absent
//     group or member, no partitions) takes effect when it loads the
//     snapshot that says so.
//   - Ack, Retry: while holding the cursor lock, with the owner check made
//     against the assignment verified current under that lock; a commit at
//     the compare-and-swap or, for a pinned cursor, at the store under the
//     partition lock, where retention is applied in the same critical
//     section. A sole cursor's commit, at its compare-and-swap, is also
//     the instant its partition's low rises and the record at the offset
//     is removed; no holder of the partition lock reads low or the log's
//     start without catching up first.
//   - PublishMessage: as Publish. The record's broker timestamp is read just
//     before the partition lock, so it lies within the call's interval.
//   - CreateGroup, CreateGroupAt, DeleteGroup: while holding every partition
//     lock (where a StartLatest group reads the log ends), when the
//     group is added to (removed from) the registry. A deleted group's slot
//     is freed and retention re-applied in the same critical section.
//   - SetAssignor: at the store of the new assignment (rebalance).
//   - AddPartitions: at the store of the new count, after every group's new
//     assignment is stored while holding every group's cursors of the moved
//     partitions; a poll that sees a new assignment before the new count
//     starts again, so no reader sees the new partitions before that
//     instant.
//   - Seek: while holding topic.mu, the group's cursor and the partition
//     lock.
//   - Describe: while holding topic.mu, every group's cursors and every
//     partition lock, so the snapshot is of one instant (lag is never
//     negative). Snapshot is Describe copying each partition's retained
//     records under the same locks: the records and the description are of
//     that one instant.
//   - MemberHandle.AppendPollPartition: as Poll, with only the named
//     partition in the member's set.
//   - Heartbeat: while holding topic.mu, after its expiry, when it reads
//     the membership (and refreshes the member's word).
//   - Rejoin of a member: while holding topic.mu and the member's cursors,
//     where it cancels their deliveries and refreshes the member; no
//     assignment is stored. Rejoin of a non-member is Join.
//   - The session expiry (rule 24) of a group: at the store of its new
//     assignment, as Leave. See Member liveness below for why a call's
//     expiry, its refresh and its action are of one instant.
//   - Join, Leave of an existing group: at the store of the new assignment,
//     while holding the group's cursors of every partition whose owner
//     changes: the whole assignment changes at one instant (SPEC rule 9).
//     A Join that creates the group: while holding every partition lock,
//     at the registry store, with the group's cursors at the log start
//     offsets of that instant (rule 7; they move only under the partition
//     locks).
//   - Create: the atomic store of the new topics map.
//
// # Member liveness
//
// With WithSessionTimeout every valid call on a topic reads the broker
// clock once, after its argument checks and before any lock: that reading,
// now, is its instant (SPEC rule 24), for expiry, refresh, the ack timeout
// and a record's time. The call then loads topic.deadline: if now is
// before it, no member of the topic is expired at now (it is a lower bound)
// and the call goes on. Otherwise it takes topic.mu (a call that holds it
// anyway just checks) and expireLocked claims, with a compare-and-swap, the
// word of each member expired at now, rebalances each group once without
// its claimed members (the moved cursors held, as every rebalance), gives
// back the words of a group whose assignor refused, and stores the deadline
// computed from the words.
//
// The member's own call refreshes its word where it acts: a Poll holding
// its cursors with its assignment seen current, after its inspections and
// before it reserves; an Ack or Retry holding the partition's cursor with
// the assignment seen current, before the owner check (an Ack that returns
// false refreshes too); Join, Rejoin and Heartbeat under topic.mu; a Poll
// that locks no cursor (the member owns none of the partitions asked for)
// under topic.mu. A call whose refresh finds the word claimed has changed
// nothing yet: it lets go, takes topic.mu, which the claiming expiry holds
// until its rebalance is stored, and acts again there.
//
// Why that is one instant per call:
//
//   - Refresh against expiry: both are compare-and-swaps on one word, so one
//     wins. A refresh that wins came first, and the expiry judges the new
//     instant. A claim that wins comes first: every later refresh fails,
//     and its call acts after the expiry's store, where the member is gone.
//     No call acts for a claimed member meanwhile: a member's call holds a
//     cursor of its own partitions, which the expiry's rebalance needs (all
//     of them move), or topic.mu, or refreshes first.
//   - Refresh against Describe: every refresh runs under topic.mu or a
//     cursor lock of the member's group, and Describe holds topic.mu and
//     every cursor while it reads the words: LastSeen is of its instant.
//   - The deadline stays a lower bound: it is raised only from the words
//     under topic.mu (a word only grows, but for a claim, whose member is
//     gone when topic.mu is let go), and lowered for a new member before
//     the member is stored. A call that finds now before it has nobody to
//     expire at its instant.
//   - A call's expiry and its action are two steps, but expiring at an
//     instant is idempotent and only removes members: the first call
//     linearized after an expiry at now, if its own instant is no earlier,
//     would expire exactly those members, so the sequential history can
//     give the expiry to it. Call instants are in linearization order
//     whenever the clock stands still over overlapping calls (the test
//     clock with porcupine's gate, where every call that reads it holds
//     the gate), and for the wall clock to within the time between a
//     call's clock read and its linearization point, nanoseconds to
//     microseconds against a timeout of seconds: the same bound as the ack
//     timeout's (rule 22).
//
// Cost. Without WithSessionTimeout, Publish, Poll, Ack and Retry pay a
// branch on the immutable option: no lock, atomic or clock read is added.
// With it, Poll, Ack and Retry read the broker clock (Publish and, with an
// ack timeout, Poll read it anyway), load the topic's deadline, and make
// one compare-and-swap on the member's own word when its instant moved
// (none when it did not); by name, the word is one more map lookup, on a
// handle it is cached with the member's partitions. An expiry pass, once
// the deadline comes, costs topic.mu, one word read per member of the
// topic and each affected group's rebalance; while members call, the
// deadline comes about once per timeout. Heartbeat costs topic.mu. Memory:
// one 128-byte word per member and one map entry per member per
// assignment.
//
// # Allocation
//
// Publish, Ack, Retry, AppendPoll and AppendPollPartition into a buffer
// with room allocate nothing (on a paged log, a publish that starts a page
// takes the spare a trim kept, so a steady backlog allocates nothing
// either; a growing one allocates a page per 1,024 records); Poll
// allocates only its result. Identifiers found in the broker's
// maps were validated when added, so the hot paths validate an identifier
// only on a miss.
package engine
