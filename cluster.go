package tributary

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/engine/assign"
)

// Cluster is the entry point of the typed library: it owns a broker (the
// in-process engine, or another Backend) and the registries of its typed
// topics, producers and consumers. A *Cluster is safe for concurrent use by
// any number of goroutines; a handler running in a consumer may call
// anything on it.
type Cluster struct {
	backend Backend

	// mu guards goTypes, producers, consumers and closed.
	mu sync.Mutex
	// goTypes is the Go payload type of each topic created in this
	// process; OpenTopic refuses another one (the backend keeps the
	// codec's name, which a distributed backend can share).
	goTypes   map[string]reflect.Type
	producers map[string]producerEntry
	consumers map[string]consumerEntry
	closed    bool

	// hooks are the cluster's Hooks (AddHooks): an atomic pointer, read
	// without mu on every event's path.
	hooks clusterHooks
}

// producerEntry is a registered producer, untyped.
type producerEntry struct {
	goType reflect.Type
	p      any // *Producer[T]
	close  func() error
}

// consumerEntry is a registered consumer, untyped.
type consumerEntry struct {
	goType       reflect.Type
	c            any // *Consumer[T]
	close        func() error
	topic, group string      // the consumer's member is (topic, group, name)
	fence        func(error) // closes it without leaving (ErrFenced)
}

// MaxCapacity is the largest capacity per partition NewCluster accepts, in
// records: 16,777,216 (docs/contract.md, the typed library's capacity). The engine's own engine.New
// keeps SPEC rule 1's 1,000 unless given engine.WithExtendedCapacity,
// which NewCluster passes.
const MaxCapacity = engine.MaxExtendedCapacity

// DefaultSessionTimeout is the session timeout NewCluster gives the engine
// when its options set none (WithSessionTimeout; SPEC rule 24):
// 45 s, Kafka's session.timeout.ms and franz-go's SessionTimeout. A member
// that makes no call naming it for that long, by the broker clock, leaves
// its group as by Leave. Consumer.Run and a blocked Consumer.Poll
// heartbeat every HeartbeatInterval, so only a consumer nobody drives
// expires (docs/library.md, member liveness).
const DefaultSessionTimeout = 45 * time.Second

// MinSessionTimeout is the shortest session timeout the typed library's
// engine backend accepts: 10 ms, on the broker clock. The engine takes any
// d > 0 (SPEC rule 24), but a consumer heartbeats every third of it in
// real time and its every call would find itself expired below a few
// milliseconds: its polls would join again without end. Kafka's brokers
// refuse below group.min.session.timeout.ms (6 s) for the same reason.
const MinSessionTimeout = 10 * time.Millisecond

// MaxHeartbeatInterval caps HeartbeatInterval: 3 s, Kafka's
// heartbeat.interval.ms.
const MaxHeartbeatInterval = 3 * time.Second

// HeartbeatInterval is how often a running consumer heartbeats under
// session timeout d: a third of d (Kafka's advice: at most a third of the
// session timeout), at most MaxHeartbeatInterval, so 3 s under the 45 s
// default; 0 when d is 0 (no session timeout, no heartbeats).
func HeartbeatInterval(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return max(min(d/3, MaxHeartbeatInterval), time.Nanosecond)
}

// NewCluster returns a cluster on a new in-process engine whose partitions
// each retain at most capacityPerPartition records, 1..MaxCapacity
// (16,777,216; docs/contract.md, the typed library's capacity), with the broker's options
// (ClusterOption: WithReplayWindow, 0..capacityPerPartition, WithAckTimeout,
// WithClock, WithMaxMessageBytes, WithSessionTimeout). Without
// WithSessionTimeout the engine gets DefaultSessionTimeout (45 s);
// NewClusterOn(NewEngineBackend(…)) makes a cluster whose members never
// expire. A partition's memory follows the records
// it retains, not its capacity: beyond 1,024 records of capacity the
// engine holds pages of 1,024 record slots (32 KiB) only for what is
// retained, so a cluster of capacity 16,777,216 with a 64-partition topic
// and nothing published holds well under 64 MiB. Errors:
// ErrInvalidArgument for a capacity or option out of range.
func NewCluster(capacityPerPartition int32, opts ...ClusterOption) (*Cluster, error) {
	// The default first: a WithSessionTimeout among opts, applied after
	// it, replaces it.
	b, err := NewEngineBackend(capacityPerPartition, append([]ClusterOption{WithSessionTimeout(DefaultSessionTimeout)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return NewClusterOn(b)
}

// NewClusterOn returns a cluster on backend. Errors: ErrInvalidArgument for
// a nil backend.
func NewClusterOn(backend Backend) (*Cluster, error) {
	if backend == nil || reflect.ValueOf(backend).Kind() == reflect.Pointer && reflect.ValueOf(backend).IsNil() {
		return nil, fmt.Errorf("%w: nil Backend", ErrInvalidArgument)
	}
	return &Cluster{
		backend:   backend,
		goTypes:   map[string]reflect.Type{},
		producers: map[string]producerEntry{},
		consumers: map[string]consumerEntry{},
	}, nil
}

// Backend returns the broker the cluster runs on.
func (c *Cluster) Backend() Backend { return c.backend }

// Close closes every consumer of the cluster (each leaves its group) and
// every producer; later calls that create or send, and the admin calls
// that change the broker (CreateGroup, RemoveMember, DeleteGroup,
// SetAssignor, AddPartitions, Seek), return ErrClosed and change nothing,
// while Topics, GroupConfig and Describe still read it. A running
// Consumer.Run returns. Closing twice is a no-op.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	closers := make([]func() error, 0, len(c.consumers)+len(c.producers))
	for _, e := range c.consumers {
		closers = append(closers, e.close)
	}
	for _, e := range c.producers {
		closers = append(closers, e.close)
	}
	c.mu.Unlock()
	var first error
	for _, f := range closers {
		if err := f(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Topics returns the names of the cluster's topics, sorted, in a new slice.
func (c *Cluster) Topics() []string { return c.backend.Topics() }

// CreateGroup creates an empty consumer group on topic with assignor a
// (RoundRobinAssignor, RangeAssignor, StickyAssignor or a user's) and the
// configuration opts give (SPEC rule 17), and returns true; false, changing
// nothing, if it exists. The options, kept by the backend for every
// consumer of the group in any process (GroupConfig):
//
//   - WithStart: where the committed offsets start, StartEarliest
//     (the default) at the log start, the earliest retained record (SPEC
//     rule 7), or StartLatest at the log end (Kafka's
//     auto.offset.reset=latest).
//   - WithDeadLetter, WithBackoff: the group's failure policy, which every
//     consumer follows (Consumer.Run, Consumer.Nack). Without them a
//     failing record is retried for ever, with the default backoff.
//
// A consumer joining an absent group creates it with RoundRobin, at the
// log start, with its own failure options or the default policy. Errors:
// ErrInvalidArgument (unknown topic, invalid id, nil assignor, an option
// NewGroupConfig refuses), ErrTypeMismatch (an existing dead-letter topic
// holds another payload type than topic), ErrInvalidAssignment.
func (c *Cluster) CreateGroup(topic, group string, a Assignor, opts ...GroupOption) (bool, error) {
	if err := c.checkOpen(); err != nil {
		return false, err
	}
	if err := engine.CheckIdentifier("group", group); err != nil {
		return false, err
	}
	if assign.IsNil(a) {
		return false, fmt.Errorf("%w: nil Assignor", ErrInvalidArgument)
	}
	cfg, err := NewGroupConfig(topic, opts...)
	if err != nil {
		return false, err
	}
	if cfg.DeadLetter != "" {
		_, pt, err1 := c.backend.OpenTopic(topic)
		_, dpt, err2 := c.backend.OpenTopic(cfg.DeadLetter)
		if err1 == nil && err2 == nil && pt != dpt {
			return false, fmt.Errorf("%w: dead-letter topic %q holds %s; topic %q holds %s", ErrTypeMismatch, cfg.DeadLetter, dpt, topic, pt)
		}
	}
	return c.backend.CreateGroup(topic, group, a, opts...)
}

// GroupConfig returns the configuration group of topic was created with
// (where it started, its failure policy) and true; false when the group is
// absent. A group a consumer's Join created has the zero GroupConfig, or
// the failure options of the consumer that created it. Errors:
// ErrInvalidArgument (unknown topic, invalid id).
func (c *Cluster) GroupConfig(topic, group string) (GroupConfig, bool, error) {
	return c.backend.GroupConfig(topic, group)
}

// RemoveMember removes member from group of topic, as Kafka's admin
// RemoveMembersFromConsumerGroup does: the group rebalances at once (SPEC
// rules 8, 9: the member's in-flight deliveries go to the new owners,
// committed offsets stay), whichever process the member runs in. The
// removed member's blocked Poll, and every later one, return ErrClosed, so
// its Consumer.Run ends with that error and the consumer is closed; a new
// NewConsumer of the same name joins again. A consumer of this process so
// removed is fenced (ErrFenced, with ErrClosed): its Close leaves nothing,
// so it cannot take a successor of its name out of the group. False when the group or the
// member is absent. Errors: ErrInvalidArgument (unknown topic, invalid id),
// ErrInvalidAssignment (the group's assignor refused the remaining
// members: nothing changes).
func (c *Cluster) RemoveMember(topic, group, member string) (bool, error) {
	if err := c.checkOpen(); err != nil {
		return false, err
	}
	ok, err := c.backend.RemoveMember(topic, group, member)
	if ok {
		c.mu.Lock()
		e, found := c.consumers[member]
		c.mu.Unlock()
		if found && e.topic == topic && e.group == group {
			e.fence(fmt.Errorf("%w: %w: consumer %q removed from group %q of topic %q", ErrClosed, ErrFenced, member, group, topic))
		}
	}
	return ok, err
}

// DeleteGroup deletes an empty group (SPEC rule 17): it stops holding
// retention at once. False when absent. Errors: ErrInvalidArgument,
// ErrGroupNotEmpty.
func (c *Cluster) DeleteGroup(topic, group string) (bool, error) {
	if err := c.checkOpen(); err != nil {
		return false, err
	}
	return c.backend.DeleteGroup(topic, group)
}

// SetAssignor switches a group's assignor and rebalances it at one instant
// (SPEC rule 18). False when the group is absent. Errors:
// ErrInvalidArgument, ErrInvalidAssignment.
func (c *Cluster) SetAssignor(topic, group string, a Assignor) (bool, error) {
	if err := c.checkOpen(); err != nil {
		return false, err
	}
	return c.backend.SetAssignor(topic, group, a)
}

// AddPartitions adds count empty partitions to topic and returns the new
// count; every group rebalances at the same instant (SPEC rule 19). Errors:
// ErrInvalidArgument (unknown topic, count < 1, a total above 64),
// ErrInvalidAssignment.
func (c *Cluster) AddPartitions(topic string, count int32) (int32, error) {
	if err := c.checkOpen(); err != nil {
		return 0, err
	}
	return c.backend.AddPartitions(topic, count)
}

// Seek moves group's committed offset on partition to offset (controlled
// replay, SPEC rule 20); the group's consumers receive the partition's
// records again from there. False when the group is absent. Errors:
// ErrInvalidArgument, then ErrOffsetOutOfRange outside [log start, log end].
func (c *Cluster) Seek(topic, group string, partition int32, offset int64) (bool, error) {
	if err := c.checkOpen(); err != nil {
		return false, err
	}
	return c.backend.Seek(topic, group, partition, offset)
}

// checkOpen returns ErrClosed once Close has been called.
func (c *Cluster) checkOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("%w: cluster", ErrClosed)
	}
	return nil
}

// Describe returns one atomic snapshot of topic (SPEC rule 23): every
// partition's log start and end offsets, every group's assignor, members
// and, per partition, owner, committed offset, in-flight flag, attempts and
// lag. The result is the caller's. Errors: ErrInvalidArgument.
func (c *Cluster) Describe(topic string) (TopicDescription, error) {
	return c.backend.Describe(topic)
}

// Producers returns the names of the cluster's open producers, sorted.
func (c *Cluster) Producers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.producers))
	for n := range c.producers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Consumers returns the names of the cluster's open consumers, sorted.
func (c *Cluster) Consumers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.consumers))
	for n := range c.consumers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// CloseConsumer closes the cluster's consumer named name: it leaves its
// group (a rebalance) and a running Run returns. Errors: ErrNotFound.
func (c *Cluster) CloseConsumer(name string) error {
	c.mu.Lock()
	e, ok := c.consumers[name]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: consumer %q", ErrNotFound, name)
	}
	return e.close()
}

// LookupProducer returns the cluster's producer named name. Errors:
// ErrNotFound; ErrTypeMismatch when it is not a producer of T;
// ErrInvalidArgument for a nil c.
func LookupProducer[T any](c *Cluster, name string) (*Producer[T], error) {
	if err := checkCluster(c); err != nil {
		return nil, err
	}
	c.mu.Lock()
	e, ok := c.producers[name]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: producer %q", ErrNotFound, name)
	}
	p, ok := e.p.(*Producer[T])
	if !ok {
		return nil, fmt.Errorf("%w: producer %q sends %v, not %v", ErrTypeMismatch, name, e.goType, reflect.TypeFor[T]())
	}
	return p, nil
}

// LookupConsumer returns the cluster's consumer named name. Errors:
// ErrNotFound; ErrTypeMismatch when it is not a consumer of T;
// ErrInvalidArgument for a nil c.
func LookupConsumer[T any](c *Cluster, name string) (*Consumer[T], error) {
	if err := checkCluster(c); err != nil {
		return nil, err
	}
	c.mu.Lock()
	e, ok := c.consumers[name]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: consumer %q", ErrNotFound, name)
	}
	cc, ok := e.c.(*Consumer[T])
	if !ok {
		return nil, fmt.Errorf("%w: consumer %q receives %v, not %v", ErrTypeMismatch, name, e.goType, reflect.TypeFor[T]())
	}
	return cc, nil
}

// register adds a producer or consumer under name: add, run under c.mu
// once name is valid and the cluster open, checks the registry and adds
// it, or returns why not (ErrExists: existsError). Errors:
// ErrInvalidArgument (an invalid name), ErrClosed after Close, add's.
func (c *Cluster) register(kind, name string, add func() error) error {
	if err := engine.CheckIdentifier(kind, name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("%w: cluster", ErrClosed)
	}
	return add()
}
