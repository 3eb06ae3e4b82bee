package tributary

import (
	"context"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// Backend is what the typed library needs of a broker: the narrow interface
// a Cluster runs on. NewCluster gives it the in-process engine; a second
// backend (a distributed one) implements the same three interfaces and is
// passed to NewClusterOn, leaving every typed call unchanged.
//
// Records, messages, assignors and descriptions are the engine's types
// (docs/contract.md): a backend keeps rules 1–25 where it can and documents
// where it does not. Package backendtest checks a backend against them
// (docs/extending.md). Every method is safe for concurrent use.
//
// Conventions of every method below. Names of topics, groups and members
// are identifiers (SPEC rule 3: 1 to 64 bytes of A-Z a-z 0-9 _ -),
// partitions are indexes 0..Partitions()-1 and offsets count records
// from 0 per partition (rule 5). Validation comes first (rule 4): an
// invalid call returns an error wrapping ErrInvalidArgument and changes
// nothing. A call that returns false changes nothing. Slices returned are
// the caller's: the backend keeps no reference to them, and keeps its own
// copy of anything it stores from an argument (a message's headers). A
// backend whose broker is reached over a network wraps ErrUnavailable in
// the error of any call that could not reach it (the call may or may not
// have taken effect); the in-process backend never returns it.
//
// Member liveness (SPEC rules 24–25): a backend that enforces a session
// timeout says so with SessionTimeout; the library then heartbeats its
// running consumers (BackendMember.Heartbeat) and joins again a consumer
// that finds itself expired. A backend with no session timeout returns 0:
// its members leave only by Leave or RemoveMember.
type Backend interface {
	// CreateTopic creates topic with partitions empty partitions (1..64)
	// and records payloadType with it (the codec's Name, an opaque string
	// that OpenTopic returns), and returns true; false, changing nothing
	// (the topic's partitions, payload type and records stay), if the topic
	// exists (SPEC rule 2). Errors: ErrInvalidArgument (an invalid
	// identifier, partitions outside 1..64, a payload type the backend
	// cannot store), ErrUnavailable.
	CreateTopic(topic string, partitions int32, payloadType string) (bool, error)
	// OpenTopic returns a handle on topic, valid for the topic's life (it
	// sees partitions added later), and the payload type the topic was
	// created with. Errors: ErrUnknownTopic (wrapped, naming the topic)
	// when no topic of that valid name exists; ErrInvalidArgument for an
	// invalid identifier; ErrUnavailable.
	OpenTopic(topic string) (BackendTopic, string, error)
	// Topics returns the names of every topic, sorted bytewise, in a new
	// slice the caller owns; empty when there are none (a networked
	// backend: also when its broker cannot be reached, since Topics
	// returns no error).
	Topics() []string
	// CreateGroup creates an empty consumer group on topic with assignor a
	// and the configuration opts give (NewGroupConfig: where it starts, its
	// failure policy), which the backend keeps with the group for every
	// process to read (GroupConfig); false, changing nothing, if the group
	// exists (SPEC rule 17). With StartLatest the committed offsets
	// start at the log ends, at the instant the group appears; otherwise
	// at the log starts (rule 7). Errors: ErrInvalidArgument (unknown
	// topic, invalid identifier, nil assignor, an option NewGroupConfig
	// refuses), ErrInvalidAssignment (a's Name panics), ErrUnavailable.
	CreateGroup(topic, group string, a Assignor, opts ...GroupOption) (bool, error)
	// GroupConfig returns the configuration group was created with and
	// true; false when the group is absent. A group created by a Join has
	// the zero GroupConfig, and a group deleted and created again has the
	// new one's (SPEC rule 17). Errors: ErrInvalidArgument (unknown topic,
	// invalid identifier), ErrUnavailable.
	GroupConfig(topic, group string) (GroupConfig, bool, error)
	// RemoveMember removes member from group as its own Leave would (a
	// rebalance, SPEC rules 8, 9), whoever made it and in whatever
	// process: Kafka's admin RemoveMembersFromConsumerGroup. It supersedes
	// the member's BackendMembers of this process (fencing, below), and
	// the member's blocked and later Polls return ErrClosed. False when
	// the group or the member is absent. Errors: ErrInvalidArgument
	// (unknown topic, invalid identifier), ErrInvalidAssignment (the
	// group's assignor refused the remaining members; nothing changed),
	// ErrUnavailable.
	RemoveMember(topic, group, member string) (bool, error)
	// DeleteGroup removes group, which must have no members, with its
	// committed offsets and its GroupConfig, and returns true (SPEC rule
	// 17). The group stops counting for retention at once: records only
	// it still needed are removed (rules 13, 21). A name deleted and used
	// again starts a fresh group. False when the group is absent. Errors:
	// ErrInvalidArgument (unknown topic, invalid identifier),
	// ErrGroupNotEmpty (the group has members; nothing changed),
	// ErrUnavailable.
	DeleteGroup(topic, group string) (bool, error)
	// SetAssignor makes a the group's assignor and, if the group has
	// members, rebalances it with a at one instant (SPEC rules 9, 18): a
	// partition whose owner changes loses its in-flight delivery. Every
	// later rebalance of the group uses a. False when the group is absent.
	// Errors: ErrInvalidArgument (unknown topic, invalid identifier, nil
	// assignor, one holding a nil pointer included), ErrInvalidAssignment
	// (a's Name or Assign panics, or its answer is not one current member
	// per partition; nothing changed, the old assignor stays),
	// ErrUnavailable.
	SetAssignor(topic, group string, a Assignor) (bool, error)
	// AddPartitions adds count (≥ 1) empty partitions to topic and returns
	// the new partition count (SPEC rule 19). The new partitions start at
	// offset 0, every group's committed offset on them is 0, and every
	// group with members rebalances with its assignor at the instant they
	// appear. Errors (the count returned is then 0): ErrInvalidArgument
	// (unknown topic, invalid identifier, count < 1, a new total above
	// 64), ErrInvalidAssignment (a group's assignor answered wrongly;
	// nothing changed), ErrUnavailable.
	AddPartitions(topic string, count int32) (int32, error)
	// Seek sets group's committed offset on partition to offset, in
	// [log start, log end] (controlled replay, SPEC rule 20): the group's
	// in-flight delivery there is cancelled, its attempts reset, and
	// retention is applied again (a forward seek can free records). An
	// admin call: it needs no member. Checks, in this order:
	// ErrInvalidArgument (unknown topic, invalid identifier, partition
	// outside [0, partitions), negative offset); false when the group is
	// absent; ErrOffsetOutOfRange unless log start ≤ offset ≤ log end.
	// Either error changes nothing. ErrUnavailable as any call.
	Seek(topic, group string, partition int32, offset int64) (bool, error)
	// Describe returns a snapshot of topic (SPEC rule 23): every
	// partition's log start and end offsets, and every group's assignor
	// name, members (sorted), and per partition its owner, committed
	// offset, in-flight flag, attempts and lag (log end − committed), with
	// each member's last-seen instant when SessionTimeout > 0. On the
	// engine it is one atomic instant; a backend that cannot give one
	// says so (JetStream reads partition by partition). The result is the
	// caller's. Errors: ErrInvalidArgument (unknown topic, invalid
	// identifier), ErrUnavailable.
	Describe(topic string) (TopicDescription, error)
	// Snapshot is Describe plus a copy of every retained record, of the
	// same instant: Records[p] holds partition p's, offsets log start to
	// log end − 1 ascending, with Attempt 0 (a snapshot delivers nothing
	// and changes no group). It copies up to capacity × partitions
	// records: an inspection call, not a way to consume. The result,
	// headers included, is the caller's. Errors: as Describe.
	Snapshot(topic string) (engine.TopicSnapshot, error)
	// SessionTimeout is the session timeout the backend enforces (SPEC
	// rule 24): a member that makes no call naming it for this long, by
	// the broker clock, leaves its group as by Leave. 0: members never
	// expire (rules 24–25 not enforced). Describe's GroupDescription.LastSeen
	// is then nil. A backend that enforces one refuses, when it is made,
	// a timeout below MinSessionTimeout.
	SessionTimeout() time.Duration
}

// BackendTopic is one topic of a Backend, resolved once: a Producer and a
// Topic keep one for the topic's life, so its calls need not look the
// topic up by name. Safe for concurrent use.
type BackendTopic interface {
	// Name is the topic's name, as created.
	Name() string
	// Partitions is the current partition count, 1..64; it only grows,
	// by AddPartitions (a networked backend may report another process's
	// AddPartitions a little later, and documents how late).
	Partitions() int32
	// TryPublish appends m to partition and returns the offset it got
	// (SPEC rules 5, 15): 0, 1, 2, … per partition, never reused. The
	// record keeps m's key, headers (the backend stores its own copy, so
	// the caller may reuse m.Headers) and time (a zero m.Time: the broker
	// clock at append). With a replay window a full partition first gives
	// up its oldest fully committed record (rule 21). It returns at once.
	// Errors, with offset -1: ErrPartitionFull when the partition retains
	// as many records as the capacity and none may go (no offset is used
	// up); ErrInvalidArgument (partition outside [0, Partitions()), a
	// message whose key, header keys, header values and payload exceed
	// the maximum message size); ErrUnavailable.
	TryPublish(partition int32, m engine.Message) (int64, error)
	// Publish is TryPublish that, on a full partition, waits for room
	// without busy waiting (woken when retention removes records of the
	// partition: an ack, a forward Seek, a DeleteGroup, or with a replay
	// window an ack that makes the oldest record evictable) and tries
	// again, until it publishes, ctx ends (ctx.Err()) or stop is closed
	// (ErrClosed); it never returns ErrPartitionFull. Other errors: as
	// TryPublish. The offset is -1 on any error.
	Publish(ctx context.Context, stop <-chan struct{}, partition int32, m engine.Message) (int64, error)
	// Member returns a new handle on member of group on this topic; it
	// need not have joined, and the group need not exist. Each handle is
	// an incarnation of the member (BackendMember's fencing): a consumer
	// makes one and keeps it. Errors: ErrInvalidArgument (an invalid
	// identifier).
	Member(group, member string) (BackendMember, error)
}

// BackendMember is one (topic, group, member), resolved once. Safe for
// concurrent use. Records it returns are the caller's: their Headers are
// copies the backend does not share.
//
// Incarnations: a Backend fences, within this process, the BackendMembers
// it made for the same (topic, group, member). When one of them Joins or
// Rejoins, every other one is superseded; RemoveMember that removes the
// member supersedes all of them. A superseded BackendMember's calls return
// an error wrapping ErrFenced and ErrClosed and change nothing (its Leave
// returns false and leaves nothing), so an old incarnation can neither
// consume under its successor's name nor take it out of the group. A call
// of the old one already under way completes before the join or removal
// that supersedes it. Across processes a backend cannot tell two
// incarnations apart: they share the member's name (docs/library.md).
//
// With a session timeout (Backend.SessionTimeout > 0), each valid Join,
// Rejoin, poll, Ack, Retry and Heartbeat made while the member is in its
// group refreshes its last-seen instant, whatever it returns (SPEC rule
// 24); an expired member finds itself out of its group (an empty TryPoll,
// Poll's ErrClosed, a false Ack, Retry or Heartbeat) until it joins again.
type BackendMember interface {
	// Group is the member's group name.
	Group() string
	// Join adds the member to its group (SPEC rule 7), creating the group
	// with RoundRobin at the log starts if it is absent, rebalances with
	// the group's assignor (rules 9, 18: partitions that change owner lose
	// their in-flight deliveries) and returns the member's partitions,
	// ascending, in a new slice (empty, not nil, when it owns none).
	// Joining again changes nothing and returns the current partitions;
	// see the incarnations above. Errors: ErrInvalidAssignment (the
	// group's assignor answered wrongly; the member is not added),
	// ErrFenced with ErrClosed (superseded), ErrUnavailable.
	Join() ([]int32, error)
	// Rejoin is Join for a new incarnation of the member (SPEC rule 25):
	// if the member is in its group already, its in-flight deliveries are
	// cancelled at once, as by Retry (delivered again with Attempt + 1),
	// with no rebalance. It returns the member's partitions, ascending.
	// Errors: as Join.
	Rejoin() ([]int32, error)
	// Heartbeat tells the backend the member is alive (SPEC rule 24): it
	// refreshes the member's last-seen instant and changes nothing else;
	// false when the member is not in its group (it expired, left, was
	// removed, or never joined). Without a session timeout it only
	// reports membership. Errors: ErrFenced with ErrClosed (superseded),
	// ErrUnavailable.
	Heartbeat() (bool, error)
	// Leave removes the member from its group and rebalances (SPEC rules
	// 8, 9): its in-flight deliveries are cancelled, to be delivered again
	// to the new owners; the group keeps its committed offsets and keeps
	// counting for retention, with or without members. False when the
	// group or the member is absent, and when this handle is superseded
	// (it leaves nothing: the membership is its successor's). Errors:
	// ErrInvalidAssignment (the group's assignor refused the remaining
	// members; nothing changed), ErrUnavailable; never ErrFenced.
	Leave() (bool, error)
	// Assignment is the member's partitions now, ascending, in a new
	// slice; empty when the member is not in its group or this handle is
	// superseded (a networked backend: also when its broker cannot be
	// reached, since Assignment returns no error).
	Assignment() []int32
	// TryPoll reserves up to max (1..64) deliverable records and appends
	// them to dst, returning at once (SPEC rules 10, 16, 22): it walks the
	// member's partitions in ascending order and, for each with no
	// delivery in flight (or one older than the ack timeout) and a record
	// at the group's committed offset, reserves that record, so at most
	// one record per partition. Record.Attempt counts the record's
	// deliveries to the group, this one included. It appends nothing,
	// without error, when the member or its group is absent or nothing is
	// eligible. dst stays the caller's (the backend keeps no reference;
	// reusing one buffer, the engine backend allocates nothing); on error
	// nothing is appended. Errors: ErrInvalidArgument (max
	// outside 1..64), ErrFenced with ErrClosed (superseded),
	// ErrUnavailable.
	TryPoll(dst []engine.Record, max int32) ([]engine.Record, error)
	// Poll is TryPoll that, when nothing is deliverable, waits without busy
	// polling until something may be (a publish, Retry, rebalance, Seek,
	// AddPartitions or ack timeout) and polls again, until it has at least
	// one record. It returns ctx.Err() when ctx ends, ErrClosed when stop
	// is closed and ErrClosed when the member is no longer in its group
	// (it left, was removed, or expired); then, and on TryPoll's errors,
	// nothing is appended to dst.
	Poll(ctx context.Context, stop <-chan struct{}, dst []engine.Record, max int32) ([]engine.Record, error)
	// TryPollPartition is TryPoll of partition alone with max 1: it appends
	// the record at the group's committed offset there if the member owns
	// partition and nothing is in flight on it (or what is, is older than
	// the ack timeout); nothing, without error, otherwise (Assignment
	// tells whether the member owns it). The member's other partitions
	// are untouched. Errors: ErrInvalidArgument (partition outside
	// [0, partitions)), ErrFenced with ErrClosed, ErrUnavailable.
	TryPollPartition(dst []engine.Record, partition int32) ([]engine.Record, error)
	// Ack commits the delivery (partition, offset) and returns true (SPEC
	// rules 11, 13, 21): only when the member owns partition and exactly
	// that offset is in flight there to the group (an ack-timed-out
	// delivery not yet delivered again included, rule 22). The committed
	// offset becomes offset + 1, the attempts reset, and every record that
	// all the topic's groups have committed past is removed, beyond the
	// replay window. Anything else (not in flight, cancelled by a
	// rebalance or Seek, already acked or retried, the member not in its
	// group) returns false and changes nothing. Errors:
	// ErrInvalidArgument (partition out of range, negative offset),
	// ErrFenced with ErrClosed (superseded), ErrUnavailable (the ack may
	// or may not have been committed).
	Ack(partition int32, offset int64) (bool, error)
	// Retry releases the delivery (partition, offset) without committing
	// and returns true (SPEC rules 12, 16): the same checks as Ack; the
	// next poll of the partition's owner delivers the same record again,
	// with Attempt + 1. False, changing nothing, when Ack would be false.
	// Errors: as Ack.
	Retry(partition int32, offset int64) (bool, error)
}

// stampedPublisher is implemented by a BackendTopic whose broker stamps a
// record's time as it appends it and reports it (the engine backend):
// BackendTopic's TryPublish and Publish that also return the record's time
// (m.Time, or the broker clock's reading when m.Time is zero). Producer.Send
// then leaves a zero Message.Time to the broker, which reads its clock once
// and stores no per-record metadata for a message with only a payload;
// on other backends clockStamped stamps time.Now itself.
type stampedPublisher interface {
	tryPublishStamped(partition int32, m engine.Message) (int64, time.Time, error)
	publishStamped(ctx context.Context, stop <-chan struct{}, partition int32, m engine.Message) (int64, time.Time, error)
}

// pollCounter is implemented by a BackendMember that counts its own
// polling work (the engine backend's member): Consumer.Stats reports these
// counters as Polls, Waits and Wakeups, and leaves them 0 for a member
// that does not implement it. pollStats returns, since the member was
// made, the broker polls its TryPoll, TryPollPartition and Poll made, the
// times Poll blocked with nothing deliverable, and the times a blocked
// Poll was woken. It is safe for concurrent use and allocates nothing.
type pollCounter interface {
	pollStats() (polls, waits, wakeups int64)
}

// clockStamped is the stampedPublisher of a BackendTopic that does not
// report record times: a message with a zero Time is sent with time.Now,
// which is the time it reports.
type clockStamped struct{ bt BackendTopic }

func (s clockStamped) tryPublishStamped(partition int32, m engine.Message) (int64, time.Time, error) {
	if m.Time.IsZero() {
		m.Time = time.Now()
	}
	off, err := s.bt.TryPublish(partition, m)
	return off, m.Time, err
}

func (s clockStamped) publishStamped(ctx context.Context, stop <-chan struct{}, partition int32, m engine.Message) (int64, time.Time, error) {
	if m.Time.IsZero() {
		m.Time = time.Now()
	}
	off, err := s.bt.Publish(ctx, stop, partition, m)
	return off, m.Time, err
}

// OffsetReader is what a Backend may add for readers by offset, as Kafka's
// Fetch and ListOffsets (the kafka module): reads that reserve nothing,
// commit nothing and change no group. The engine backend implements it
// under each partition's lock; a backend without it is read through
// Snapshot, which copies the whole topic.
type OffsetReader interface {
	// LogOffsets returns partition's log start offset (its oldest retained
	// record, or the log end when it retains none) and log end offset (the
	// offset the next publish gets), of one instant. Errors:
	// ErrInvalidArgument (unknown topic, invalid identifier, partition
	// outside [0, partitions)), ErrUnavailable.
	LogOffsets(topic string, partition int32) (logStart, logEnd int64, err error)
	// ReadAt appends to dst copies of up to max (≥ 0) retained
	// records of partition from offset on, in offset order (Attempt 0,
	// headers copied), and returns them with the log start and end offsets
	// of the same instant; offset == log end appends nothing. dst stays the
	// caller's. Errors: ErrInvalidArgument (as LogOffsets, and a negative
	// max); ErrOffsetOutOfRange, with the log offsets, when offset
	// is outside [log start, log end] (nothing appended); ErrUnavailable.
	ReadAt(dst []engine.Record, topic string, partition int32, offset int64, max int32) (recs []engine.Record, logStart, logEnd int64, err error)
	// Appended returns a channel closed by the next successful publish to
	// topic (any partition) or AddPartitions of it: take it, read, then
	// block on it, and no record appended after the read is missed.
	// Errors: ErrInvalidArgument (unknown topic, invalid identifier),
	// ErrUnavailable.
	Appended(topic string) (<-chan struct{}, error)
}
