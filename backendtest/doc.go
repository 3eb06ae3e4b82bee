// Package backendtest is a conformance suite for tributary.Backend: the
// sequential rule tests of the contract's rules 1–25 (docs/contract.md), written once against the
// Backend, BackendTopic and BackendMember interfaces, so that every
// backend (the in-process engine, NATS JetStream, …) is held to the same
// rules.
//
// # Running it
//
// A backend's test package passes a Factory that makes a fresh, empty
// backend honouring Config (capacity, ack timeout, clock, message limit,
// replay window, session timeout) and registers its own cleanup:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T, cfg backendtest.Config) tributary.Backend {
//			b := newMyBackend(t, cfg) // t.Cleanup(b.Close) inside
//			return b
//		}, map[string]string{
//			"Rule18FaultyAssignorChangesNothing": "user assignors run client-side",
//		})
//	}
//
// Run makes one subtest per check, named after its rule ("Rule05PublishFull",
// "Rule20SeekOutOfRange", …); every check makes its own backends, so topic
// names never collide. Skips name the checks a backend does not keep, each
// with its reason, which t.Skip prints; a skip naming no check fails the
// run. Blocking calls are bounded by Wait (10 s) and never judged by speed:
// a check only asserts that a blocked call has not returned before the
// event it waits for, and that it returns within Wait after it.
//
// The checks are also exported one by one (Checks): each runs on a
// testing.TB, so a test of the suite can run it on a recorder and show it
// fails on a faulty backend (see faults_test.go, where each of 46 faults
// trips at least one check and every check is tripped by some fault).
//
// # Codecs and assignors
//
// The library's other extension points have checks here too, for a test
// of a user's implementation (docs/extending.md): CheckCodec and
// CheckCodecPayload hold a tributary.Codec to its contract (round trips,
// refused payloads, concurrent use, no panics), and CheckAssignor holds a
// tributary.Assignor to what the broker requires of every answer (SPEC
// rule 18), to purity and to determinism.
//
// # Coverage, rule by rule
//
// Errors are compared with errors.Is against tributary's sentinels, which
// are the engine's: ErrInvalidArgument, ErrOffsetOutOfRange,
// ErrGroupNotEmpty; plus tributary.ErrPartitionFull (a full partition),
// ErrUnknownTopic (OpenTopic of an unknown topic) and ErrClosed. "Changes
// nothing" is checked by comparing Topics and every topic's Snapshot
// before and after.
//
//   - Worked examples: docs/contract.md's orders and rebalance examples, verbatim
//     (SpecWorkedExampleOrders, SpecWorkedExampleRebalance).
//   - Rule 1: a partition retains exactly Capacity records. New's bounds
//     are the factory's business and are not checked.
//   - Rule 2: partition counts 1..64, duplicates false leaving the topic,
//     its payload type, records, offsets and groups untouched; Topics
//     sorted.
//   - Rule 3: valid identifiers (64 bytes, every allowed byte), case
//     sensitivity of topics, groups and members, invalid identifiers on
//     every call that takes one.
//   - Rule 4: unknown topics (ErrUnknownTopic from OpenTopic,
//     ErrInvalidArgument elsewhere); a table of invalid calls on a busy
//     backend, each ErrInvalidArgument and changing nothing, validation
//     before state (an invalid call about an absent group is an error).
//   - Rule 5: offsets per partition from 0, empty and arbitrary payloads,
//     full partitions (ErrPartitionFull, no offset used up, per partition).
//   - Rule 6: ownership p mod n over bytewise-sorted members, through
//     Join, Assignment, Poll and Describe; joining twice and leaving when
//     absent change nothing.
//   - Rules 7–8: Join's result, new groups at the log start; Leave, and
//     member-less groups keeping offsets and holding retention.
//   - Rule 9: moved partitions lose their delivery (old owner's Ack and
//     Retry false, redelivered with Attempt + 1), kept ones keep it.
//   - Rule 10: order, maxRecords, own partitions only, empty results;
//     TryPoll appending to dst; TryPollPartition.
//   - Rules 11–12: Ack and Retry of the exact delivery, and thirteen
//     mismatches each false and changing nothing.
//   - Rule 13: retention with no groups, two groups and a member-less one,
//     per partition and per topic.
//   - Rule 14 (linearizability) is not sequential and is not checked here.
//   - Rule 15: key, headers and time round trip (a zero time is the clock
//     at append), headers copied both ways, MaxMessageBytes counted over
//     key, header keys and values and payload, for TryPublish and Publish.
//   - Rule 16: attempts after Retry, rebalance, Ack, Seek, per group, and
//     in Describe.
//   - Rule 17: CreateGroup, DeleteGroup (ErrGroupNotEmpty, retention freed
//     at once), a deleted name used again is a fresh group.
//   - Rule 18: RoundRobin, Range (P=7, n=2 and n=3) and Sticky (balance,
//     most owners kept, deterministic) through SetAssignor; a user's
//     faulty assignor (six kinds of wrong answer) makes Join, Leave,
//     AddPartitions and SetAssignor fail with an error that is not
//     ErrInvalidArgument, changing nothing.
//   - Rule 19: AddPartitions' result, bounds, new empty partitions at
//     committed offset 0 in every group, rebalancing, and a BackendTopic
//     opened before seeing the new count.
//   - Rule 20: Seek's check order, ErrOffsetOutOfRange outside
//     [log start, log end] changing nothing, cancel and attempt reset,
//     replay, forward seeks freeing records, member-less groups.
//   - Rule 21: docs/contract.md's replay-window example, verbatim
//     (capacity 3, window 2), with the log start at each step; with no
//     group, or only groups that committed nothing, a full partition
//     stays full (a deleted group's commits stop counting); a new group
//     starts at the log start, the window included; window 0 is rule 13
//     (acked records removed at once, Seek back to them out of range).
//   - Rule 22: with a FakeClock, redelivery at exactly the ack timeout, not
//     before; Ack and Retry of an expired delivery; only the owner's poll.
//   - Rule 23: Describe field by field, and Snapshot's records. Nil and
//     empty member and group lists compare equal.
//   - Rule 24 (with Config.SessionTimeout on a FakeClock; the backend must
//     report it as SessionTimeout): the contract's worked example,
//     verbatim; expiry at exactly d after the last call, not before, by
//     any caller's call (Describe included); each valid call naming the
//     member refreshing it whatever it returns (an empty TryPoll and
//     TryPollPartition, a false Ack and Retry, Heartbeat, a second Join),
//     as Describe's LastSeen shows; invalid calls refreshing nothing; an
//     expired member's deliveries cancelled with offsets and attempts
//     kept, its own calls false or empty and bringing it back to nothing,
//     a Heartbeat of a member that never joined false, a Join bringing it
//     back.
//   - Rule 25: the worked example, verbatim; Rejoin of a non-member is
//     Join; of a member, it cancels that member's deliveries alone, with
//     no rebalance, and refreshes it alone.
//   - Fencing (BackendMember's incarnations): after a second BackendMember
//     of the same names rejoins, the first one's every call fails with
//     ErrFenced and ErrClosed, changing nothing, and its Leave leaves
//     nothing; RemoveMember fences the one it removes; a member made
//     afterwards joins afresh.
//   - Groups (the typed library's additions): CreateGroup's options kept
//     and returned by GroupConfig (through joins, leaves and a duplicate
//     CreateGroup; zero for a group a Join made; gone with DeleteGroup, new
//     with the group made again), options out of range refused changing
//     nothing; engine.StartLatest at the log ends, delivering only later
//     records, freeing what no group needs but the window; RemoveMember
//     rebalancing as Leave, false for absent members and groups,
//     ErrInvalidArgument for bad names, and ending a blocked Poll with
//     ErrClosed.
//   - Blocking calls: Publish waits for room and wakes on an ack; Poll wakes
//     on a publish and on a Retry; both return ctx.Err() when ctx ends and
//     ErrClosed when stop is closed; Poll returns ErrClosed when the member
//     leaves its group. A property over capacities, replay windows
//     (0..capacity, the capacity included) and 1 to 3 groups that keep
//     acking: a waiting Publish always completes, including when an ack
//     only makes the oldest record evictable by the window (rule 21)
//     without removing anything (BlockingPublishWhileGroupsAck).
package backendtest
