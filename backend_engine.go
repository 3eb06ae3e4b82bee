package tributary

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// engineBackend is the in-process Backend: an *engine.Broker plus what the
// engine does not keep, the payload type of each topic and the
// configuration of each group created by CreateGroup.
type engineBackend struct {
	b *engine.Broker

	// inc guards current, the incarnation of each (topic, group, member):
	// the engineMember that last joined or rejoined it through this
	// backend (BackendMember's fencing). It is taken before a member's
	// gate and held across the engine's Join, Rejoin and Leave of a
	// member, so that the engine's membership and current agree. Lock
	// order: inc, then an engineMember's gate, then the engine's locks.
	inc     sync.Mutex
	current map[memberKey]*engineMember

	// mu guards types (topic name → payload type) and groups (a group
	// created by CreateGroup → its configuration; a group of the engine
	// that has none was created by a Join, with the zero GroupConfig). It
	// is held across the engine's CreateGroupAt and DeleteGroup, so that a
	// group's entry appears and disappears with the group.
	mu     sync.Mutex
	types  map[string]string
	groups map[groupKey]GroupConfig
}

// groupKey names a group: its topic and its name.
type groupKey struct{ topic, group string }

// memberKey names a member: its topic, group and id.
type memberKey struct{ topic, group, member string }

func newEngineBackend(b *engine.Broker) *engineBackend {
	return &engineBackend{
		b:       b,
		types:   map[string]string{},
		groups:  map[groupKey]GroupConfig{},
		current: map[memberKey]*engineMember{},
	}
}

// NewEngineBackend returns a new in-process engine as a Backend, for
// NewClusterOn: engine.New(capacityPerPartition, opts…) with the typed
// library's capacity (1..MaxCapacity, engine.WithExtendedCapacity) and
// exactly the options given. NewCluster is NewClusterOn(NewEngineBackend(…))
// with DefaultSessionTimeout added when opts set none; this one adds
// nothing, so without WithSessionTimeout its members never expire
// (SPEC rule 24). Errors: ErrInvalidArgument for a capacity or option out
// of range, and for a session timeout below MinSessionTimeout.
func NewEngineBackend(capacityPerPartition int32, opts ...ClusterOption) (Backend, error) {
	if capacityPerPartition < 1 || capacityPerPartition > MaxCapacity {
		return nil, fmt.Errorf("%w: capacity %d outside [1,%d]", ErrInvalidArgument, capacityPerPartition, MaxCapacity)
	}
	b, err := engine.New(capacityPerPartition, append(slices.Clip(opts), engine.WithExtendedCapacity())...)
	if err != nil {
		return nil, err
	}
	if d := b.SessionTimeout(); d > 0 && d < MinSessionTimeout {
		return nil, fmt.Errorf("%w: session timeout %v: want 0 (none) or at least %v", ErrInvalidArgument, d, MinSessionTimeout)
	}
	return newEngineBackend(b), nil
}

// SessionTimeout is the engine's (WithSessionTimeout; 0: none).
func (e *engineBackend) SessionTimeout() time.Duration { return e.b.SessionTimeout() }

func (e *engineBackend) CreateTopic(topic string, partitions int32, payloadType string) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ok, err := e.b.Create(topic, partitions)
	if ok {
		e.types[topic] = payloadType
	}
	return ok, err
}

func (e *engineBackend) OpenTopic(topic string) (BackendTopic, string, error) {
	e.mu.Lock()
	pt, known := e.types[topic]
	e.mu.Unlock()
	h, err := e.b.Topic(topic)
	if err != nil {
		if !known && engine.CheckIdentifier("topic", topic) == nil {
			return nil, "", fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
		}
		return nil, "", err
	}
	return &engineTopic{e: e, h: h}, pt, nil
}

func (e *engineBackend) Topics() []string {
	t := e.b.Topics()
	slices.Sort(t)
	return t
}

// CreateGroup is the engine's CreateGroupAt, whose start is atomic with the
// group's creation; the rest of the configuration is kept here.
func (e *engineBackend) CreateGroup(topic, group string, a Assignor, opts ...GroupOption) (bool, error) {
	cfg, err := NewGroupConfig(topic, opts...)
	if err != nil {
		if _, lerr := e.b.PartitionCount(topic); lerr != nil {
			return false, lerr // rule 4: an unknown topic first
		}
		return false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ok, err := e.b.CreateGroupAt(topic, group, a, cfg.Start)
	if ok {
		e.groups[groupKey{topic, group}] = cfg
	}
	return ok, err
}

func (e *engineBackend) GroupConfig(topic, group string) (GroupConfig, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.b.Committed(topic, group, 0); errors.Is(err, engine.ErrUnknownGroup) {
		return GroupConfig{}, false, nil
	} else if err != nil {
		return GroupConfig{}, false, err
	}
	return e.groups[groupKey{topic, group}], true, nil
}

// RemoveMember is the engine's Leave; removing the member supersedes its
// incarnation of this backend (fencing), atomically with the Leave.
func (e *engineBackend) RemoveMember(topic, group, member string) (bool, error) {
	e.inc.Lock()
	defer e.inc.Unlock()
	k := memberKey{topic, group, member}
	cur := e.current[k]
	if cur != nil {
		cur.gate.Lock()
		defer cur.gate.Unlock()
	}
	ok, err := e.b.Leave(topic, group, member)
	if ok && cur != nil {
		cur.fenced = true
		delete(e.current, k)
	}
	return ok, err
}

func (e *engineBackend) DeleteGroup(topic, group string) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ok, err := e.b.DeleteGroup(topic, group)
	if ok {
		delete(e.groups, groupKey{topic, group})
	}
	return ok, err
}
func (e *engineBackend) SetAssignor(topic, group string, a Assignor) (bool, error) {
	return e.b.SetAssignor(topic, group, a)
}
func (e *engineBackend) AddPartitions(topic string, count int32) (int32, error) {
	return e.b.AddPartitions(topic, count)
}
func (e *engineBackend) Seek(topic, group string, partition int32, offset int64) (bool, error) {
	return e.b.Seek(topic, group, partition, offset)
}
func (e *engineBackend) Describe(topic string) (TopicDescription, error) {
	return e.b.Describe(topic)
}
func (e *engineBackend) Snapshot(topic string) (engine.TopicSnapshot, error) {
	return e.b.Snapshot(topic)
}

// engineTopic is a BackendTopic on an engine.TopicHandle.
type engineTopic struct {
	e *engineBackend
	h *engine.TopicHandle
}

func (t *engineTopic) Name() string      { return t.h.Name() }
func (t *engineTopic) Partitions() int32 { return t.h.Partitions() }

func (t *engineTopic) TryPublish(partition int32, m engine.Message) (int64, error) {
	off, _, err := t.tryPublishStamped(partition, m)
	return off, err
}

func (t *engineTopic) Publish(ctx context.Context, stop <-chan struct{}, partition int32, m engine.Message) (int64, error) {
	off, _, err := t.publishStamped(ctx, stop, partition, m)
	return off, err
}

func (t *engineTopic) tryPublishStamped(partition int32, m engine.Message) (int64, time.Time, error) {
	off, ts, err := t.h.PublishStamped(partition, m)
	if err == nil && off < 0 {
		return -1, ts, fmt.Errorf("%w: topic %q partition %d", ErrPartitionFull, t.h.Name(), partition)
	}
	return off, ts, err
}

// publishStamped tries once; on a full partition it takes the partition's
// room signal, tries again (a trim between the two tries closed the channel
// it now holds) and waits (blocking). A publish that finds room never
// touches a signal.
func (t *engineTopic) publishStamped(ctx context.Context, stop <-chan struct{}, partition int32, m engine.Message) (int64, time.Time, error) {
	type stamped struct {
		off int64
		ts  time.Time
	}
	off, ts, err := t.h.PublishStamped(partition, m)
	if err != nil || off >= 0 {
		return off, ts, err
	}
	r, err := blocking[stamped]{
		arm: func() (<-chan struct{}, <-chan struct{}, error) {
			room, err := t.h.Room(partition)
			return room, nil, err
		},
		try: func(bool) (stamped, bool, error) {
			off, ts, err := t.h.PublishStamped(partition, m)
			return stamped{off, ts}, err != nil || off >= 0, err
		},
		stopped: func() error {
			return fmt.Errorf("%w: waiting for room in topic %q partition %d", ErrClosed, t.h.Name(), partition)
		},
	}.run(ctx, stop, stamped{off, ts})
	return r.off, r.ts, err
}

func (t *engineTopic) Member(group, member string) (BackendMember, error) {
	h, err := t.h.Member(group, member)
	if err != nil {
		return nil, err
	}
	return &engineMember{e: t.e, t: t.h, h: h, key: memberKey{t.h.Name(), group, member}}, nil
}

// engineMember is a BackendMember on an engine.MemberHandle. It counts its
// polls and wake-ups so tests can prove an idle consumer does no work.
type engineMember struct {
	e   *engineBackend
	t   *engine.TopicHandle
	h   *engine.MemberHandle
	key memberKey

	// gate guards fenced: every call of the member that acts on the
	// engine holds it for reading and fails once fenced is set; the
	// backend sets fenced holding gate for writing and e.inc, so a call
	// under way completes before the join or removal that supersedes the
	// member, and none starts after it. Reads of fenced under e.inc alone
	// (Join, Rejoin, Leave) are safe too.
	gate   sync.RWMutex
	fenced bool

	// idle is set when the last Poll had to wait: the next one takes the
	// signals before its first poll, so a consumer that keeps waiting
	// polls once before each wait and once after each wake-up, never more.
	// A Poll that finds records at once clears it (the fast path).
	idle  atomic.Bool
	polls atomic.Int64 // engine polls made by Poll and TryPoll
	stats waitStats    // times Poll blocked, and was woken by the broker or an ack timeout
}

func (m *engineMember) Group() string            { return m.h.Group() }
func (m *engineMember) Join() ([]int32, error)   { return m.join(m.h.Join) }
func (m *engineMember) Rejoin() ([]int32, error) { return m.join(m.h.Rejoin) }

// join is Join and Rejoin: on success m is the member's incarnation and
// the one before it, if another, is superseded; the engine call runs
// with that one's gate held, so that nothing it does lands after it.
func (m *engineMember) join(call func() ([]int32, error)) ([]int32, error) {
	e := m.e
	e.inc.Lock()
	defer e.inc.Unlock()
	if m.fenced {
		return nil, m.fencedErr()
	}
	prev := e.current[m.key]
	if prev != nil && prev != m {
		prev.gate.Lock()
		defer prev.gate.Unlock()
	}
	parts, err := call()
	if err != nil {
		return parts, err
	}
	if prev != nil && prev != m {
		prev.fenced = true
	}
	e.current[m.key] = m
	return parts, nil
}

// Leave leaves the group unless m is superseded (false, leaving nothing).
func (m *engineMember) Leave() (bool, error) {
	e := m.e
	e.inc.Lock()
	defer e.inc.Unlock()
	if m.fenced {
		return false, nil
	}
	ok, err := m.h.Leave()
	if err == nil && e.current[m.key] == m {
		delete(e.current, m.key)
	}
	return ok, err
}

// fencedErr is the error of a call of a superseded member.
func (m *engineMember) fencedErr() error {
	return fmt.Errorf("%w: %w: member %q of group %q of topic %q: a newer incarnation joined, or it was removed",
		ErrClosed, ErrFenced, m.key.member, m.key.group, m.key.topic)
}

// enter takes the gate for a call; false (the gate released) once fenced.
func (m *engineMember) enter() bool {
	m.gate.RLock()
	if m.fenced {
		m.gate.RUnlock()
		return false
	}
	return true
}

func (m *engineMember) Assignment() []int32 {
	if !m.enter() {
		return []int32{}
	}
	defer m.gate.RUnlock()
	return m.h.Assignment()
}

func (m *engineMember) Heartbeat() (bool, error) {
	if !m.enter() {
		return false, m.fencedErr()
	}
	defer m.gate.RUnlock()
	return m.h.Heartbeat()
}

func (m *engineMember) Ack(p int32, off int64) (bool, error) {
	if !m.enter() {
		return false, m.fencedErr()
	}
	defer m.gate.RUnlock()
	return m.h.Ack(p, off)
}

func (m *engineMember) Retry(p int32, off int64) (bool, error) {
	if !m.enter() {
		return false, m.fencedErr()
	}
	defer m.gate.RUnlock()
	return m.h.Retry(p, off)
}

func (m *engineMember) TryPoll(dst []engine.Record, max int32) ([]engine.Record, error) {
	if !m.enter() {
		return dst, m.fencedErr()
	}
	defer m.gate.RUnlock()
	m.polls.Add(1)
	return m.h.AppendPoll(dst, max)
}

func (m *engineMember) TryPollPartition(dst []engine.Record, partition int32) ([]engine.Record, error) {
	if !m.enter() {
		return dst, m.fencedErr()
	}
	defer m.gate.RUnlock()
	m.polls.Add(1)
	return m.h.AppendPollPartition(dst, partition)
}

// Poll polls once; when that is empty it takes the topic's and the group's
// ready signals, polls again (a change between the two polls closed a
// channel it now holds) and, still empty, waits on them, on a timer for the
// oldest in-flight delivery's ack timeout, on ctx and on stop (blocking). A
// consumer that keeps finding records never touches a signal.
func (m *engineMember) Poll(ctx context.Context, stop <-chan struct{}, dst []engine.Record, max int32) ([]engine.Record, error) {
	n := len(dst)
	var out []engine.Record
	var err error
	if !m.idle.Load() {
		if out, err = m.TryPoll(dst, max); err != nil || len(out) > n {
			return out, err
		}
	}
	return blocking[[]engine.Record]{
		arm: func() (<-chan struct{}, <-chan struct{}, error) {
			return m.t.Ready(), m.h.Ready(), nil
		},
		try: func(woken bool) ([]engine.Record, bool, error) {
			out, err := m.TryPoll(dst, max)
			if err != nil || len(out) > n {
				m.idle.Store(woken)
				return out, true, err
			}
			if !m.h.Joined() {
				return out, true, fmt.Errorf("%w: member %q is not in group %q of topic %q", ErrClosed, m.h.Member(), m.h.Group(), m.h.Topic())
			}
			return out, false, nil
		},
		timeout: m.h.NextTimeout,
		stopped: func() error { return ErrClosed },
		stats:   &m.stats,
	}.run(ctx, stop, out)
}

// engineMember counts its polling work for Consumer.Stats.
var _ pollCounter = (*engineMember)(nil)

// pollStats returns the member's counters (pollCounter).
func (m *engineMember) pollStats() (polls, waits, wakeups int64) {
	return m.polls.Load(), m.stats.waits.Load(), m.stats.wakeups.Load()
}

// LogOffsets is OffsetReader's, the engine's log offsets under the
// partition lock.
func (e *engineBackend) LogOffsets(topic string, partition int32) (int64, int64, error) {
	return e.b.LogOffsets(topic, partition)
}

// ReadAt is OffsetReader's: engine.Broker.ReadAt.
func (e *engineBackend) ReadAt(dst []engine.Record, topic string, partition int32, offset int64, max int32) ([]engine.Record, int64, int64, error) {
	return e.b.ReadAt(dst, topic, partition, offset, max)
}

var _ OffsetReader = (*engineBackend)(nil)

// Appended is OffsetReader's: engine.Broker.Appended.
func (e *engineBackend) Appended(topic string) (<-chan struct{}, error) { return e.b.Appended(topic) }
