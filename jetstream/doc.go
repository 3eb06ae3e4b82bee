// Package jetstream is a tributary.Backend on NATS JetStream: the typed
// library (producers, consumers, typed topics) runs unchanged on a broker
// whose state is replicated by NATS and shared by any number of processes.
//
// Usage:
//
//	srv, _ := jetstream.StartServer(dir) // or a NATS server/cluster of your own
//	defer srv.Shutdown()
//	b, _ := jetstream.Open(jetstream.Config{Server: srv, Capacity: 1000})
//	defer b.Close()
//	cluster, _ := tributary.NewClusterOn(b)
//	orders, _ := tributary.OpenOrCreateTopic(cluster, "orders", 4, tributary.JSON[Order]())
//
// With Config.URL instead of Server (srv.ClientURL() for an embedded
// server), other processes, on this machine or others, share the same
// broker, each opening the topic with OpenOrCreateTopic; Replicas 3 on a cluster of three nodes (StartCluster, or
// your own) survives the loss of one.
//
// # Layout on the server
//
// Records: one stream per (topic, partition), named <Prefix>_<topic>_<p>,
// subject <prefix>.rec.<topic>.<p> (prefix lowercased), Limits retention,
// MaxMsgs = Capacity, DiscardNew: a full partition refuses a publish (API
// error 10077, no sequence used; tributary.ErrPartitionFull), and a
// record's offset is its stream sequence − 1. The key, user headers and
// time travel in NATS headers, encoded so no user header collides with
// them (order and duplicates kept).
//
// State: one stream <Prefix>_STATE, subjects <prefix>.state.>, one message
// per subject, every read answered by the stream's leader (direct gets,
// AllowDirect, only with Replicas 1, where the one server is the leader:
// raw replies without the API's JSON; with 3 replicas through the API, as a
// replica's direct get may be behind), used as a
// key-value store with compare-and-set: a key's revision is its message's
// stream sequence, and a write names the revision it replaces
// (Nats-Expected-Last-Subject-Sequence). Values are JSON:
//
//	topic.<T>            partitions, payload type, replay window
//	group.<T>.<G>        incarnation, generation, assignor name, members, owner and
//	                     owner-since generation per partition; the group's
//	                     configuration, written by CreateGroup and copied by
//	                     every later write: start (latest, with the partition
//	                     count then), dead-letter topic, attempts, backoff
//	cursor.<T>.<G>.<p>   incarnation, owner, generation, committed offset,
//	                     in flight, attempts, delivery time
//	low.<T>.<p>          the partition's log start: the retention fence
//
// Deleting a key writes the tombstone {"deleted":true}; its revision stays,
// so re-creating the key is a compare-and-set like any other. A deleted and
// re-created group is a new incarnation (the revision of its creating
// write); cursors of an older incarnation are ignored and replaced. A
// cursor's tombstone records the incarnation DeleteGroup deleted,
// {"deleted":true,"inc":N}, and DeleteGroup writes it on every partition,
// cursor present or not; placing a cursor of incarnation N or older is then
// refused. So a Poll (or any helper) whose view of the group predates the
// delete cannot resurrect its cursor: its placement and the tombstone are
// compare-and-sets on the same cursor key, so they serialise, and if the
// tombstone is first the placement fails, the caller re-reads the group
// and finds it gone; if the placement is first the tombstone replaces it.
//
// # Protocols
//
// Rebalance (Join, Leave, SetAssignor, AddPartitions): read the group,
// compute owners with assign.Run over the previous owners, write the group
// with generation+1 (the commit point), then migrate each partition whose
// owner changed: its cursor gets the new owner and generation and loses its
// in-flight delivery (attempts kept, rule 16). Any member that finds a
// cursor behind the group's generation migrates it itself first (helping),
// so a rebalancer that dies after its commit strands nothing; one that
// finds a cursor ahead re-reads the group. Before a membership call
// returns, it brings every cursor of the group up to the generation it
// committed, or, when it changed nothing, to the one it read (settle): a
// concurrent rebalance may still be migrating, and once a Join has
// returned, no member it displaced may poll or ack (without settle, a
// Join of a member already added by a slower concurrent Join would return
// at once, and the displaced owner could then poll a record published after
// that return; the linearizability check covers this).
//
// Poll, Ack, Retry: read the group, then the cursor, then compare-and-set
// the cursor on the revision read. Ack requires the member to own the
// partition in the current generation and exactly that offset in flight;
// a stale owner fails because migration rewrote the cursor. A Poll that
// finds the record at its cursor purged (low is raised before a purge, so
// low is then above the cursor it read) reads the cursor again: a Seek
// forward has moved it meanwhile.
//
// Settling by the poll's write. An Ack or Retry of a delivery the same
// Member polled is one request: a compare-and-set of the cursor from the
// revision the poll's reservation wrote (Member.reserved). It succeeds only
// if nothing wrote the cursor since, and every change that would refuse
// the Ack writes it: a migration (the partition moved or its owner left),
// a Rejoin's cancellation, another handle's settle, a Seek. Two writes
// that would not otherwise touch the cursor do so for this: a Rejoin
// writes every cursor its member owns, in flight or not (a stamp: the
// value unchanged), and a Seek back stamps every other group's cursor of
// its partition (Seek holds, below). A poll keeps its write for this only
// when no Rejoin can be missing from it: its cursor was read in the same
// snapshot as the group, or the group is unchanged after the write (one
// read more, key by key); and only when low carried no active hold
// (Member.groupAt). Anything else, or a failed compare-and-set, reads the
// group, the cursor and low and decides as above. A rebalance's move of a
// partition takes effect for this path at its migration, so every call
// that shows a move writes the migration first if it is still pending: a
// Poll of the new owner (helping), a Describe, the new owner's Assignment;
// and a Member that has seen its partition moved (its own poll or
// Assignment) forgets its write there.
//
// Retention (rules 13, 21), by the calls that need the log start: a
// publish that finds the partition full, a Seek, a group's placement of a
// new cursor, a DeleteGroup (an Ack runs none: Retention owed, below): read
// low (revision q), read every live cursor of the partition, and with M
// their least committed offset and w the topic's replay window (fixed at
// topic creation, stored in topic.<T>), if max(low, M − w) exceeds low,
// compare-and-set low q → max(low, M − w) and purge the stream below it,
// then send a room notice (core NATS) to waiting publishers. A waiting
// publisher also wakes on every cursor write of its partition and every
// group write of its topic: with a window covering the newly committed
// records a commit purges nothing, yet its next publish evicts. A publish the
// stream refuses as full runs the same pass with eviction: if M − w does
// not exceed low but low < M (a retained record is fully committed: the
// window's oldest), it compare-and-sets low q → low + 1, purges, and
// publishes again; with no live cursor (no group) or low = M it reports
// the partition full. A group creation that places a cursor reads low
// (revision r), writes the cursor at or above it, then compare-and-sets
// low r → the same value as a fence; if that fails it starts again. The
// two compare-and-sets on low are serialised, so either the purger saw the
// new cursor or the placer saw the new low: no cursor is ever below the
// log start. A Seek holds low instead (Seek holds, below).
//
// Why this holds under concurrency, window or not. Invariant: every live
// cursor's committed offset is at least low. low only grows, and only by a
// compare-and-set from a revision q read before the cursors, to a value
// v ≤ M, the least committed offset read after q. A cursor moves down only
// by a placement (group creation), which writes the cursor and then
// fences on low's revision r read before the write, or by a Seek, which
// writes it under a hold on low that no raise passes (below). Acks move cursors up;
// migrations and deletions do not lower M. So for a raise q → v to succeed
// while a placement below v is under way, the placement's cursor write
// came after the purger read it (else M would include it), hence its fence
// came after q was read; the fence and the raise both name the revision of
// low current then (r = q), and only the first of them succeeds: if the
// raise wins, the fence fails and the placer re-reads low (and Seek, its
// offset now below the log start, reports ErrOffsetOutOfRange); if the
// fence wins, the raise fails and the purger re-reads the cursors. The
// window changes only v (max(low, M − w), or low + 1 ≤ M on eviction), never
// the v ≤ M that the argument needs, so records in the window stay
// available to a Seek or a new group exactly as long as low says. A purge
// removes only records below the low it raised to, never above the current
// low, so purges racing in any order remove nothing a cursor can reach.
// Two publishers that both find the partition full each evict at most one
// record per round and publish again; one that loses the room to another
// publish tries again and reports full once no retained record is fully
// committed, as the engine would for the later of the two.
//
// Retention owed. The engine applies retention atomically with the call
// that frees records; here an Ack runs no pass at all (a DeleteGroup's
// pass follows its commit), so low lags the commits until the next call
// that needs the log start, and each of those applies or computes what is
// owed, max(low, M − w) with M read then. That makes the lag invisible on
// one partition:
//
//   - A placement of a new cursor (a group creation, CreateGroup or a Join
//     creating the group, or whoever first reads a cursor not placed yet)
//     runs the retention pass on its partition first (cursorFor): the
//     commits before it, and a DeleteGroup committed before it whose own
//     pass is still running, have their records removed first, so the new
//     group starts at the log start the engine would give it. A commit
//     after the pass's read is ordered after the placement: the new
//     cursor holds the log start where the pass left it.
//   - Describe and Snapshot show the owed log start, computed from the
//     cursors they show (they write nothing but a pending migration they
//     show: Settling by the poll's write), and Snapshot reads the records
//     from there.
//   - A Seek that moves a cursor back computes, after reading the cursor
//     it replaces, the log start the cursor advances already written imply
//     (max(low, M − w) with M read now, its own cursor included) and
//     reports ErrOffsetOutOfRange below it, even if their passes have not
//     run yet (their writes came first, so did their retention in the
//     engine's order). Its write lowers M, so before it the Seek raises low
//     to that log start (by compare-and-set from the revision read before
//     the cursors, as a pass does; the records below it stay until a
//     publish that finds the partition full purges them): else the owed log
//     start would move back with the write and the records below it,
//     removed in the engine's order, come back (also to a later Seek back:
//     a Seek forward, a Seek back within what it owes, then one below it).
//     Its own cursor is read and replaced by one compare-and-set, so a
//     racing Seek forward of the same group is never missed; other groups'
//     cursors are read one after another, not at one instant (rule 14's
//     weakening, below).
//   - A publish that finds the partition full runs the pass with
//     eviction, which raises low to what the commits owe and purges before
//     anything is evicted; a waiting publisher wakes on every cursor write
//     of its partition, an Ack's included. One whose pass moves nothing
//     still publishes again if the stream has room meanwhile: another
//     call's pass made room, and the full answer would belong before the
//     commit that pass applied, which it followed.
//
// Seek holds. A Seek's cursor write is its linearization point, and a fence
// after it would leave a gap: a Poll or Ack could act on the write before a
// purge overtook it and the Seek undid it. So a Seek reads low (revision r)
// and compare-and-sets r → the same value with a hold added (lowVal.Holds:
// a token and an expiry instant), decides the range against that low, reads
// its cursor and, for a Seek back, stamps the other groups' cursors of the
// partition (each written unchanged, read and written again until a write
// lands) and reads them (the retention owed), writes its cursor by
// compare-and-set, and compare-and-sets low again without the hold. The
// stamps keep the owed log start fixed until the write: an Ack of another
// group by its poll's write (Settling by the poll's write, above) fails on
// the stamp; a stamp that failed is sent again because the write that
// failed it may be such a poll's, made from a low read before the hold,
// whose revision would otherwise stay the cursor's last; an Ack that reads
// low and finds an active hold waits until it is released, as a retention
// pass does, and then reads everything again; a poll that finds a hold
// keeps no write for its Ack. A retention pass that would raise low and
// reads an active hold waits until it is released (each check a read of
// low), then reads everything again; one that read low before the hold
// fails its compare-and-set, as the hold changed low's revision. A pass
// that reads low and the cursors in one snapshot and finds there an
// eviction whose publish has not landed reads low again once it has
// (readLow), and then the cursors too: the snapshot's are older than that
// low, and a Seek that held, wrote and released in the wait is missing from
// them while low's revision is the one after its release. So from the hold
// to the release low moves only by the holder's own raise to the owed log
// start (Retention owed, above), which is at most its offset, and the write
// is never below it. One Seek holds a partition at a time (another waits as
// a retention pass does): the other groups' cursors a Seek back reads for
// the retention owed are not moved back by another Seek before its write. A
// hold expires holdFor after it was taken (fallbackWait + 2 ×
// Config.RequestTimeout, by the holder's clock: processes sharing a
// partition must agree on the time); a Seek sends its cursor write only
// with a request's time left on its hold, else it releases and holds again,
// so only a dead (or partitioned) holder's hold expires; a waiter that has
// waited holdFor itself raises over the holds it read. A Seek costs one
// request more than a write and a fence (the release), and a Seek back that
// raises the log start owed one more (the raise).
//
// A group creation's placement that a purge overtook (its fence failed and
// low has passed it) is moved up to the new log start by its placer. While
// such a write is briefly below low, no call acts on it: a Poll, Ack,
// Retry, Seek's retention-owed check or migration that finds its cursor
// below the log start waits for the placer to finish (it reads low after
// the cursor, or at the same instant), for at most fallbackWait: a placer
// that died there, or lost its fence request, would strand the partition,
// so then the waiter moves the cursor up to the log start itself, fenced
// as a placement. A retention pass that finds a cursor below the low it
// read waits and reads that cursor again (else a publish would report
// full, or evict less, on a cursor the model never had). A retention pass
// that moves nothing reports so only if low's revision is unchanged after
// it read the cursors; else it reads them again.
//
// Eviction and its publish. A publish that finds the partition full and
// evicts raises low by one and then publishes; in the model both are one
// step. So the raise records the log end it was made at (low's Evict) and
// counts only once a publish has landed past it: readLow (every reader of
// low: Seek, placements, Poll, Ack, retention) waits until the log end has
// moved past Evict. The publish that lands there is the evicting one or,
// when another publish took the room first, that one, which in the model
// evicts the same record; either way no call sees the log start raised
// with the log end not yet advanced. A publisher that fails or dies after
// its raise is waited for at most 2 s.
//
// Repair: a process that dies (or loses its connection) after raising low
// and before purging leaves records below low in the stream: invisible
// (Poll, Describe and Snapshot read from low or above) but using
// capacity. Every retention pass that does not move low checks the
// stream's first sequence and purges below low if it is lower; a publish
// that finds the partition full runs such a pass, so capacity is
// recovered even when no other call follows.
//
// # Differences from the in-process engine
//
//   - The replay window (rule 21) is a topic's, fixed when it is created
//     (Config.ReplayWindow of the creating Backend), as the capacity is.
//   - Rule 14 is weakened. Each call is a sequence of requests, each atomic;
//     the compare-and-sets make Poll, Ack, Retry and membership changes
//     behave as if atomic for the cursor or group they change, but a
//     rebalance's migrations and AddPartitions' per-group rebalances follow
//     their commit one by one, and Describe and Snapshot are not one atomic
//     instant across partitions (each partition's figures are consistent:
//     lag is never negative).
//   - Calls wait on the network. Each request is bounded by
//     Config.RequestTimeout; a failure returns an error wrapping
//     ErrUnavailable, and the call may or may not have taken effect. A
//     Poll whose reservation took effect with its reply lost is not lost:
//     the member's next poll through the same Backend finds the cursor
//     it wrote and delivers that record (same attempt); through another
//     Backend, only the ack timeout or a rebalance releases it.
//   - Blocking Poll and Publish are woken by core NATS messages (record
//     publishes, state changes, room notices), which a reconnect can lose;
//     they also re-check at most every 2 s.
//   - A user assignor lives in the Backend that gave it to its group (by a
//     CreateGroup or SetAssignor that committed), for that group only; a
//     rebalance of the group elsewhere returns ErrUnknownAssignor. Its name
//     must be UTF-8 (the state is JSON). The ack timeout (rule 22) compares
//     clocks of the processes sharing a group.
//   - Limits of NATS: a record's key and headers travel in NATS headers,
//     which the server caps at 64 KiB, so more than about 47 KiB of them is
//     refused with engine.ErrInvalidArgument; so is a message over the
//     server's max_payload (1 MiB by default), a time outside years
//     0–9999, and a payload type that is not UTF-8 or over 1 KiB.
//   - Admin calls on an unknown topic return an error wrapping both
//     engine.ErrInvalidArgument (rule 4) and tributary.ErrUnknownTopic.
//   - Retention is applied lazily: an Ack raises no low and purges
//     nothing; the records its commit frees stay in the stream until the
//     next pass on that partition (a publish that finds it full, a Seek, a
//     placement, a DeleteGroup), and a purge interrupted by a crash after
//     its compare-and-set leaves them too. Invisible (Describe and
//     Snapshot show the owed log start), but the stream's own figures
//     (nats stream info) count them.
//   - A group's cursors are placed one partition after another after its
//     creating write, each at the log start at its placement: an eviction
//     or retention in between can start a new group later than the log
//     start at the instant its key was written (rule 7 under rule 14's
//     weakening).
//   - A publish that evicts (replay window) raises low by one, purges, then
//     publishes; readers wait for that publish (above), but one whose
//     publisher died is waited for only 2 s. A process dying
//     mid-placement can also leave a cursor at the log start rather than
//     where it was.
//   - A Seek holds its partition's log start (Seek holds, above): a
//     process that dies holding it delays retention, evictions included,
//     on that partition by up to holdFor (fallbackWait + 2 ×
//     Config.RequestTimeout, 12 s by default), and Seeks of one partition
//     run one at a time; a Seek back writes every other group's cursor of
//     the partition once (its stamps). The seek mix of the linearizability
//     check runs on one server and on a 3-node cluster with Replicas 3; its
//     measured Illegal rates, and what they leave unknown, are in
//     lincheck_test.go.
package jetstream
