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
// where it does not. Every method is safe for concurrent use.
//
// Member liveness (SPEC rules 24–25): a backend that enforces a session
// timeout says so with SessionTimeout; the library then heartbeats its
// running consumers (BackendMember.Heartbeat) and joins again a consumer
// that finds itself expired. A backend with no session timeout returns 0:
// its members leave only by Leave or RemoveMember.
type Backend interface {
	// CreateTopic creates topic with partitions partitions (1..64) and
	// records its payload type; false, changing nothing, if it exists.
	CreateTopic(topic string, partitions int32, payloadType string) (bool, error)
	// OpenTopic returns the topic and the payload type it was created with;
	// ErrUnknownTopic when it does not exist.
	OpenTopic(topic string) (BackendTopic, string, error)
	// Topics returns the topic names, sorted, in a new slice.
	Topics() []string
	// CreateGroup creates an empty consumer group on topic with assignor a
	// and the configuration opts give (NewGroupConfig: where it starts, its
	// failure policy), which the backend keeps with the group for every
	// process to read (GroupConfig); false, changing nothing, if the group
	// exists (SPEC rule 17). With StartLatest the committed offsets
	// start at the log ends. Errors: ErrInvalidArgument (unknown topic,
	// invalid identifier, nil assignor, an option NewGroupConfig refuses),
	// ErrInvalidAssignment.
	CreateGroup(topic, group string, a Assignor, opts ...GroupOption) (bool, error)
	// GroupConfig returns the configuration group was created with and
	// true; false when the group is absent. A group created by a Join has
	// the zero GroupConfig, and a group deleted and created again has the
	// new one's. Errors: ErrInvalidArgument (unknown topic, invalid
	// identifier).
	GroupConfig(topic, group string) (GroupConfig, bool, error)
	// RemoveMember removes member from group as its own Leave would (a
	// rebalance, SPEC rules 8, 9), whoever made it and in whatever
	// process: Kafka's admin RemoveMembersFromConsumerGroup. The member's
	// blocked and later Polls return ErrClosed. False when the group or
	// the member is absent. Errors: ErrInvalidArgument (unknown topic,
	// invalid identifier), ErrInvalidAssignment.
	RemoveMember(topic, group, member string) (bool, error)
	DeleteGroup(topic, group string) (bool, error)
	SetAssignor(topic, group string, a Assignor) (bool, error)
	AddPartitions(topic string, count int32) (int32, error)
	Seek(topic, group string, partition int32, offset int64) (bool, error)
	Describe(topic string) (TopicDescription, error)
	// Snapshot is Describe plus every retained record, of one instant.
	Snapshot(topic string) (engine.TopicSnapshot, error)
	// SessionTimeout is the session timeout the backend enforces (SPEC
	// rule 24): a member that makes no call naming it for this long, by
	// the broker clock, leaves its group as by Leave. 0: members never
	// expire (rules 24–25 not enforced). Describe's GroupDescription.LastSeen
	// is then nil.
	SessionTimeout() time.Duration
}

// BackendTopic is one topic of a Backend, resolved once.
type BackendTopic interface {
	Name() string
	// Partitions is the current partition count, 1..64.
	Partitions() int32
	// TryPublish appends m to partition and returns its offset, or
	// ErrPartitionFull at once when the partition is full (SPEC rules 5, 15).
	TryPublish(partition int32, m engine.Message) (int64, error)
	// Publish is TryPublish that, on a full partition, waits for room
	// without busy waiting until ctx ends (then ctx.Err()) or stop is
	// closed (then ErrClosed).
	Publish(ctx context.Context, stop <-chan struct{}, partition int32, m engine.Message) (int64, error)
	// Member returns member of group on this topic; it need not have
	// joined.
	Member(group, member string) (BackendMember, error)
}

// BackendMember is one (topic, group, member), resolved once.
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
type BackendMember interface {
	// Group is the member's group name.
	Group() string
	// Join joins the group (SPEC rule 7); see the incarnations above.
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
	// reports membership.
	Heartbeat() (bool, error)
	Leave() (bool, error)
	// Assignment is the member's partitions now, ascending, in a new slice.
	Assignment() []int32
	// TryPoll appends up to max (1..64) deliverable records to dst and
	// returns at once (SPEC rule 10); dst stays the caller's.
	TryPoll(dst []engine.Record, max int32) ([]engine.Record, error)
	// Poll is TryPoll that, when nothing is deliverable, waits without busy
	// polling until something may be (a publish, Retry, rebalance, Seek or
	// ack timeout) and polls again, until it has at least one record. It
	// returns ctx.Err() when ctx ends, ErrClosed when stop is closed and
	// ErrClosed when the member is no longer in its group.
	Poll(ctx context.Context, stop <-chan struct{}, dst []engine.Record, max int32) ([]engine.Record, error)
	// TryPollPartition is TryPoll of partition alone with max 1: it appends
	// the record at the group's committed offset there if the member owns
	// partition and nothing is in flight on it; nothing otherwise.
	TryPollPartition(dst []engine.Record, partition int32) ([]engine.Record, error)
	Ack(partition int32, offset int64) (bool, error)
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
