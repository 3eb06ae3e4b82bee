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

func newEngineBackend(b *engine.Broker) *engineBackend {
	return &engineBackend{b: b, types: map[string]string{}, groups: map[groupKey]GroupConfig{}}
}

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
	return &engineTopic{h: h}, pt, nil
}

func (e *engineBackend) Topics() []string {
	t := e.b.Topics()
	slices.Sort(t)
	return t
}

// CreateGroup is the engine's CreateGroupAt, whose start is atomic with the
// group's creation; the rest of the configuration is kept here.
func (e *engineBackend) CreateGroup(topic, group string, a engine.Assignor, opts ...GroupOption) (bool, error) {
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

func (e *engineBackend) RemoveMember(topic, group, member string) (bool, error) {
	return e.b.Leave(topic, group, member)
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
func (e *engineBackend) SetAssignor(topic, group string, a engine.Assignor) (bool, error) {
	return e.b.SetAssignor(topic, group, a)
}
func (e *engineBackend) AddPartitions(topic string, count int32) (int32, error) {
	return e.b.AddPartitions(topic, count)
}
func (e *engineBackend) Seek(topic, group string, partition int32, offset int64) (bool, error) {
	return e.b.Seek(topic, group, partition, offset)
}
func (e *engineBackend) Describe(topic string) (engine.TopicDescription, error) {
	return e.b.Describe(topic)
}
func (e *engineBackend) Snapshot(topic string) (engine.TopicSnapshot, error) {
	return e.b.Snapshot(topic)
}

// engineTopic is a BackendTopic on an engine.TopicHandle.
type engineTopic struct {
	h *engine.TopicHandle
}

func (t *engineTopic) Name() string      { return t.h.Name() }
func (t *engineTopic) Partitions() int32 { return t.h.Partitions() }

func (t *engineTopic) TryPublish(partition int32, m engine.Message) (int64, error) {
	off, err := t.h.PublishMessage(partition, m)
	if err == nil && off < 0 {
		return -1, fmt.Errorf("%w: topic %q partition %d", ErrPartitionFull, t.h.Name(), partition)
	}
	return off, err
}

// Publish tries once; on a full partition it takes the partition's room
// signal, tries again (a trim between the two tries closed the channel it
// now holds) and waits. A publish that finds room never touches a signal.
func (t *engineTopic) Publish(ctx context.Context, stop <-chan struct{}, partition int32, m engine.Message) (int64, error) {
	for {
		off, err := t.h.PublishMessage(partition, m)
		if err != nil || off >= 0 {
			return off, err
		}
		room, err := t.h.Room(partition)
		if err != nil {
			return -1, err
		}
		if off, err = t.h.PublishMessage(partition, m); err != nil || off >= 0 {
			return off, err
		}
		select {
		case <-room:
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-stop:
			return -1, fmt.Errorf("%w: waiting for room in topic %q partition %d", ErrClosed, t.h.Name(), partition)
		}
	}
}

func (t *engineTopic) Member(group, member string) (BackendMember, error) {
	h, err := t.h.Member(group, member)
	if err != nil {
		return nil, err
	}
	return &engineMember{t: t.h, h: h}, nil
}

// engineMember is a BackendMember on an engine.MemberHandle. It counts its
// polls and wake-ups so tests can prove an idle consumer does no work.
type engineMember struct {
	t *engine.TopicHandle
	h *engine.MemberHandle

	// idle is set when the last Poll had to wait: the next one takes the
	// signals before its first poll, so a consumer that keeps waiting
	// polls once before each wait and once after each wake-up, never more.
	// A Poll that finds records at once clears it (the fast path).
	idle    atomic.Bool
	polls   atomic.Int64 // engine polls made by Poll and TryPoll
	waits   atomic.Int64 // times Poll blocked
	wakeups atomic.Int64 // times a blocked Poll was woken by the broker or an ack timeout
}

func (m *engineMember) Group() string          { return m.h.Group() }
func (m *engineMember) Join() ([]int32, error) { return m.h.Join() }
func (m *engineMember) Leave() (bool, error)   { return m.h.Leave() }
func (m *engineMember) Assignment() []int32    { return m.h.Assignment() }
func (m *engineMember) Ack(p int32, off int64) (bool, error) {
	return m.h.Ack(p, off)
}
func (m *engineMember) Retry(p int32, off int64) (bool, error) {
	return m.h.Retry(p, off)
}

func (m *engineMember) TryPoll(dst []engine.Record, max int32) ([]engine.Record, error) {
	m.polls.Add(1)
	return m.h.AppendPoll(dst, max)
}

func (m *engineMember) TryPollPartition(dst []engine.Record, partition int32) ([]engine.Record, error) {
	m.polls.Add(1)
	return m.h.AppendPollPartition(dst, partition)
}

// Poll polls once; when that is empty it takes the topic's and the group's
// ready signals, polls again (a change between the two polls closed a
// channel it now holds) and, still empty, waits on them, on a timer for the
// oldest in-flight delivery's ack timeout, on ctx and on stop. A consumer
// that keeps finding records never touches a signal.
func (m *engineMember) Poll(ctx context.Context, stop <-chan struct{}, dst []engine.Record, max int32) ([]engine.Record, error) {
	n := len(dst)
	var out []engine.Record
	var err error
	if !m.idle.Load() {
		if out, err = m.TryPoll(dst, max); err != nil || len(out) > n {
			return out, err
		}
	}
	waited := false // this call has blocked
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		topicReady, groupReady := m.t.Ready(), m.h.Ready()
		if out, err = m.TryPoll(dst, max); err != nil || len(out) > n {
			m.idle.Store(waited)
			return out, err
		}
		if !m.h.Joined() {
			return out, fmt.Errorf("%w: member %q is not in group %q of topic %q", ErrClosed, m.h.Member(), m.h.Group(), m.h.Topic())
		}
		var expiry <-chan time.Time
		if d, ok := m.h.NextTimeout(); ok {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			expiry = timer.C
		}
		m.waits.Add(1)
		select {
		case <-topicReady:
		case <-groupReady:
		case <-expiry:
		case <-ctx.Done():
			return out, ctx.Err()
		case <-stop:
			return out, ErrClosed
		}
		m.wakeups.Add(1)
		waited = true
	}
}

// pollStats returns the member's counters.
func (m *engineMember) pollStats() (polls, waits, wakeups int64) {
	return m.polls.Load(), m.waits.Load(), m.wakeups.Load()
}
