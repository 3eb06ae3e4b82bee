package engine

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/f91dcac0/tributary/shard"
)

// TopicHandle is a topic resolved once: its calls skip the topic lookup of
// the by-name calls and behave exactly like them (same rules, results and
// errors). Get one from Broker.Topic. A topic is never deleted, so a handle
// stays valid for the Broker's life. Safe for concurrent use.
type TopicHandle struct {
	t *topic
}

// MemberHandle is a (topic, group, member) resolved once: Poll, AppendPoll,
// Ack and Retry skip the topic and group lookups of the by-name calls and
// behave exactly like Broker.Poll, AppendPoll, Ack and Retry with those
// names. The handle exists whether or not the member has joined; it keeps
// working across Join, Leave, DeleteGroup and a group created again under
// the same name. Get one from TopicHandle.Member. Safe for concurrent use.
type MemberHandle struct {
	t      *topic
	group  string
	member string
	// g caches the live group named group, nil until one is seen; a group
	// marked deleted is looked up again.
	g atomic.Pointer[group]
	// mask caches the member's partitions in one assignment, so that a poll
	// under an unchanged assignment does no map lookup; nil until the first
	// poll. Replaced (one small allocation) when the assignment changes.
	mask atomic.Pointer[maskCache]
}

// maskCache is a member's entry in one assignment: its partitions, its
// session (with a session timeout), and whether it is a member at all.
type maskCache struct {
	a      *assignment
	mask   shard.Mask
	sess   *session
	joined bool
}

// maskIn returns the member's partitions in a and whether it is a member of
// a, from the cache when it is of a.
func (m *MemberHandle) maskIn(a *assignment) (shard.Mask, bool) {
	if c := m.mask.Load(); c != nil && c.a == a {
		return c.mask, c.joined
	}
	c := m.cache(a)
	return c.mask, c.joined
}

// entryIn is maskIn with the member's session in a (nil without a session
// timeout).
func (m *MemberHandle) entryIn(a *assignment) (shard.Mask, *session, bool) {
	c := m.mask.Load()
	if c == nil || c.a != a {
		c = m.cache(a)
	}
	return c.mask, c.sess, c.joined
}

// cache stores and returns the member's entry in a.
func (m *MemberHandle) cache(a *assignment) *maskCache {
	mask, ok := a.masks[m.member]
	c := &maskCache{a: a, mask: mask, sess: a.sessions[m.member], joined: ok}
	m.mask.Store(c)
	return c
}

// Topic returns a handle on topic. Errors (ErrInvalidArgument): an unknown
// topic, an invalid identifier, a Broker not made by New.
func (b *Broker) Topic(topicName string) (*TopicHandle, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return nil, err
	}
	return &TopicHandle{t: t}, nil
}

// Name returns the topic's name.
func (h *TopicHandle) Name() string { return h.t.name }

// Partitions returns the topic's current partition count, 1..64; it grows
// only by AddPartitions.
func (h *TopicHandle) Partitions() int32 { return h.t.count.Load() }

// Publish is Broker.Publish on this topic (SPEC rules 5, 15): the offset, or
// -1 when the partition is full. It allocates nothing.
func (h *TopicHandle) Publish(partition int32, payload string) (int64, error) {
	return h.t.publish(partition, payload)
}

// PublishMessage is Broker.PublishMessage on this topic (SPEC rules 5, 15).
func (h *TopicHandle) PublishMessage(partition int32, m Message) (int64, error) {
	off, _, err := h.t.publishMessage(partition, &m)
	return off, err
}

// PublishStamped is PublishMessage that also returns the record's time, as
// a Poll's Record.Time will give it: m.Time, or, when m.Time is zero, the
// broker clock's reading that stamped the record (time.Unix of it). It
// lets a caller that reports the time of what it sent leave m.Time zero,
// so that a message with only a payload allocates nothing and the clock
// is read once. On a full partition the offset is -1 and the time zero.
// Errors: as PublishMessage.
func (h *TopicHandle) PublishStamped(partition int32, m Message) (int64, time.Time, error) {
	off, ts, err := h.t.publishMessage(partition, &m)
	if err != nil || off < 0 {
		return off, time.Time{}, err
	}
	if !m.Time.IsZero() {
		return off, m.Time, nil
	}
	return off, time.Unix(0, ts), nil
}

// Ready returns a channel closed by the next successful publish to any
// partition of the topic or the next AddPartitions. A waiting consumer takes
// it (and its MemberHandle's Ready) before it polls, then waits on it only
// if the poll was empty: a record published after the poll closes it. The
// channel is shared by every waiter; take a fresh one after each wake-up.
// Nobody waiting costs the publish path one atomic load.
func (h *TopicHandle) Ready() <-chan struct{} { return h.t.ready.wait() }

// Room returns a channel closed the next time a publish to partition,
// refused as full, could succeed: when retention removes records from it
// (an Ack, a Seek forward, a DeleteGroup), and, with a replay window, when
// such a call makes the oldest record of the full partition fully
// committed, which the next publish gives up (SPEC rule 21) although
// nothing was removed. A blocked producer takes it before it publishes and
// waits on it only if the publish returned -1; the channel may also close
// when the partition is still full (another producer took the room), so
// the producer publishes again and, refused, takes a fresh one. Errors
// (ErrInvalidArgument): partition outside [0, partitionCount).
func (h *TopicHandle) Room(partition int32) (<-chan struct{}, error) {
	p, err := h.t.partition(partition)
	if err != nil {
		return nil, err
	}
	return p.room.wait(), nil
}

// Member returns a handle on member of group on this topic. Neither needs
// to exist yet. Errors (ErrInvalidArgument): an invalid identifier.
func (h *TopicHandle) Member(groupName, member string) (*MemberHandle, error) {
	if err := checkGroupMember(groupName, member); err != nil {
		return nil, err
	}
	return &MemberHandle{t: h.t, group: groupName, member: member}, nil
}

// Topic returns the member's topic name.
func (m *MemberHandle) Topic() string { return m.t.name }

// Group returns the member's group name.
func (m *MemberHandle) Group() string { return m.group }

// Member returns the member's id.
func (m *MemberHandle) Member() string { return m.member }

// live returns the live group named m.group, or nil when there is none.
func (m *MemberHandle) live() *group {
	if g := m.g.Load(); g != nil && !g.deleted.Load() {
		return g
	}
	g := m.t.groups.Load(m.group)
	if g != nil {
		m.g.Store(g)
	}
	return g
}

// Join is Broker.Join for this member (SPEC rules 7, 9, 18): it returns the
// member's partitions, ascending, in a new slice.
func (m *MemberHandle) Join() ([]int32, error) {
	return m.t.b.Join(m.t.name, m.group, m.member)
}

// Leave is Broker.Leave for this member (SPEC rules 8, 9): false when the
// group or the member is absent.
func (m *MemberHandle) Leave() (bool, error) {
	return m.t.b.Leave(m.t.name, m.group, m.member)
}

// Assignment returns the partitions the member owns now, ascending, in a
// new slice (empty when the member or group is absent).
func (m *MemberHandle) Assignment() []int32 {
	g := m.live()
	if g == nil {
		return []int32{}
	}
	mask := g.assign.Load().masks[m.member]
	return mask.AppendTo(make([]int32, 0, mask.Len()))
}

// Poll is Broker.Poll for this member (SPEC rules 10, 16, 22).
func (m *MemberHandle) Poll(maxRecords int32) ([]Record, error) {
	out, err := m.AppendPoll(nil, maxRecords)
	if out == nil && err == nil {
		out = []Record{}
	}
	return out, err
}

// AppendPoll is Broker.AppendPoll for this member: the reserved records are
// appended to dst, which stays the caller's. Reusing one buffer, it
// allocates nothing. Errors (ErrInvalidArgument): maxRecords outside 1..64.
func (m *MemberHandle) AppendPoll(dst []Record, maxRecords int32) ([]Record, error) {
	if maxRecords < 1 || maxRecords > MaxPollRecords {
		return dst, fmt.Errorf("%w: maxRecords %d outside [1,%d]", ErrInvalidArgument, maxRecords, MaxPollRecords)
	}
	g := m.live()
	if g == nil {
		if b := m.t.b; b.session > 0 {
			m.t.expire(b.nowNanos())
		}
		return dst, nil
	}
	return m.t.poll(dst, g, m.member, m, maxRecords, allPartitions, 0, false)
}

// AppendPollPartition is AppendPoll restricted to one partition, with
// maxRecords 1: if the member owns partition now and the group has no
// delivery in flight there (or an expired one, rule 22), it reserves the
// record at the group's committed offset and appends it to dst (SPEC rules
// 10, 16 and 22 applied to that partition alone). The member's other
// partitions are untouched. It appends nothing, without error, when the
// member has not joined, does not own partition, or nothing there is
// eligible; Assignment tells the first two apart. dst stays the caller's;
// reusing one buffer, it allocates nothing. Errors (ErrInvalidArgument):
// partition outside [0, partitionCount).
func (m *MemberHandle) AppendPollPartition(dst []Record, partition int32) ([]Record, error) {
	if _, err := m.t.partition(partition); err != nil {
		return dst, err
	}
	g := m.live()
	if g == nil {
		if b := m.t.b; b.session > 0 {
			m.t.expire(b.nowNanos())
		}
		return dst, nil
	}
	return m.t.poll(dst, g, m.member, m, 1, shard.Mask(0).With(partition), 0, false)
}

// Ack is Broker.Ack for this member (SPEC rules 11, 13, 21). It allocates
// nothing.
func (m *MemberHandle) Ack(partition int32, offset int64) (bool, error) {
	return m.settle(partition, offset, true)
}

// Retry is Broker.Retry for this member (SPEC rules 12, 16). It allocates
// nothing.
func (m *MemberHandle) Retry(partition int32, offset int64) (bool, error) {
	return m.settle(partition, offset, false)
}

func (m *MemberHandle) settle(partition int32, offset int64, commit bool) (bool, error) {
	part, n := m.t.partAt(partition)
	if part == nil {
		return false, m.t.partitionError(partition, n)
	}
	if offset < 0 {
		return false, fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, offset)
	}
	g := m.live()
	if g == nil {
		if b := m.t.b; b.session > 0 {
			m.t.expire(b.nowNanos())
		}
		return false, nil
	}
	return m.t.settle(g, m.member, m, part, partition, offset, commit)
}

// Ready returns a channel closed by the next change to the member's group
// that may make a record deliverable: an Ack or Retry, a rebalance (Join,
// Leave, SetAssignor, AddPartitions), a Seek, or the group's deletion.
// Publishes are TopicHandle.Ready's. When the group does not exist yet it
// returns a channel that is already closed, so a waiter polls again. Take
// it before polling, as TopicHandle.Ready.
func (m *MemberHandle) Ready() <-chan struct{} {
	g := m.live()
	if g == nil {
		return closedChan
	}
	return g.ready.wait()
}

// closedChan is a channel that is always closed.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// NextTimeout returns how long, by the broker clock, until the oldest of
// the member's in-flight deliveries passes WithAckTimeout (SPEC rule 22), at
// which point the member's next Poll delivers it again; zero when one
// already has. ok is false without an ack timeout or when the member has no
// delivery in flight. A waiting consumer sets a timer for it: an ack
// timeout notifies nobody.
func (m *MemberHandle) NextTimeout() (d time.Duration, ok bool) {
	b := m.t.b
	if b.ackTimeout == 0 {
		return 0, false
	}
	g := m.live()
	if g == nil {
		return 0, false
	}
	oldest := int64(0)
	a := g.assign.Load()
	mask := a.masks[m.member]
	for p, rest, more := mask.First(); more; p, rest, more = rest.First() {
		c := a.cursors[p]
		c.mu.Lock()
		inFlight, at := c.inFlight, c.deliveredAt
		c.mu.Unlock()
		if inFlight && (!ok || at < oldest) {
			oldest, ok = at, true
		}
	}
	if !ok {
		return 0, false
	}
	return time.Duration(max(0, oldest+b.ackTimeout-b.nowNanos())), true
}

// Joined reports whether the member is in its group now.
func (m *MemberHandle) Joined() bool {
	g := m.live()
	if g == nil {
		return false
	}
	_, ok := g.assign.Load().masks[m.member]
	return ok
}

// CheckIdentifier returns nil if id is a valid topic, group or member
// identifier (1 to 64 bytes of A-Z a-z 0-9 _ -, SPEC rule 3), else an
// ErrInvalidArgument error naming kind ("topic", "group", "member", …).
func CheckIdentifier(kind, id string) error { return checkID(kind, id) }
