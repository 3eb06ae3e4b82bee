package bench

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/f91dcac0/tributary/bench/internal/rwengine"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/model"
)

// Subject is a broker under measurement: the core API (docs/contract.md),
// with Poll replaced by PollInto. Results and errors follow engine.Broker,
// except where a Kind's documentation says otherwise.
type Subject interface {
	Create(topic string, partitionCount int32) (bool, error)
	Join(topic, group, member string) ([]int32, error)
	Leave(topic, group, member string) (bool, error)
	Publish(topic string, partition int32, payload string) (int64, error)
	// PollInto is Poll appending the reserved records to dst and returning
	// the extended slice. dst stays the caller's.
	PollInto(dst []engine.Record, topic, group, member string, maxRecords int32) ([]engine.Record, error)
	Ack(topic, group, member string, partition int32, offset int64) (bool, error)
	Retry(topic, group, member string, partition int32, offset int64) (bool, error)
}

// Kind is one kind of Subject: a name, what it is, and a constructor.
type Kind struct {
	Name     string // short name used in benchmark names, tables and -subjects filters
	Doc      string // one line: what the subject is
	Baseline bool   // a point of comparison rather than the engine itself
	// New returns an empty subject whose partitions each hold at most
	// capacity records (1..1000).
	New func(capacity int32) (Subject, error)
}

// Subject kind names.
const (
	KindEngine     = "engine"
	KindEnginePoll = "engine-poll"
	KindNaive      = "naive"
	KindChan       = "chan"
	KindChanRaw    = "chan-raw"
	KindEngineRW   = "engine-rw"
)

// Kinds returns every subject kind, the engine's first.
func Kinds() []Kind {
	return []Kind{
		{Name: KindEngine, Doc: "engine.Broker; polls with AppendPoll into a reused buffer",
			New: func(c int32) (Subject, error) { return NewEngine(c) }},
		{Name: KindEnginePoll, Doc: "engine.Broker; polls with Poll (a new slice per non-empty poll)",
			New: func(c int32) (Subject, error) { return NewEnginePoll(c) }},
		{Name: KindEngineRW, Doc: "the engine's first design: topic and group sync.RWMutex read-locked by every Poll, Ack, Retry (bench/internal/rwengine)", Baseline: true,
			New: func(c int32) (Subject, error) { return NewEngineRW(c) }},
		{Name: KindNaive, Doc: "model.Broker behind one global sync.Mutex", Baseline: true,
			New: func(c int32) (Subject, error) { return NewNaive(c) }},
		{Name: KindChan, Doc: "buffered channels, one per (group, partition): send per publish, receive per poll", Baseline: true,
			New: func(c int32) (Subject, error) { return NewChan(c) }},
		{Name: KindChanRaw, Doc: "no broker: the bare buffered-channel send + receive per record, in one goroutine", Baseline: true,
			New: func(c int32) (Subject, error) { return NewRawChan(c) }},
	}
}

// KindByName returns the kind called name.
func KindByName(name string) (Kind, bool) {
	for _, k := range Kinds() {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Engine is the engine under measurement, polling with AppendPoll.
type Engine struct{ *engine.Broker }

// NewEngine returns an Engine around engine.New(capacity).
func NewEngine(capacity int32) (Engine, error) {
	b, err := engine.New(capacity)
	return Engine{b}, err
}

// PollInto is engine.Broker.AppendPoll: it allocates nothing when dst has
// room for the records it reserves.
func (e Engine) PollInto(dst []engine.Record, topic, group, member string, maxRecords int32) ([]engine.Record, error) {
	return e.AppendPoll(dst, topic, group, member, maxRecords)
}

// EngineRW is the engine as first built to the original lock design — a
// per-topic and a per-group sync.RWMutex read-locked by every Poll, Ack and
// Retry — frozen in bench/internal/rwengine as the baseline for the
// snapshot-based reader side.
type EngineRW struct{ *rwengine.Broker }

// NewEngineRW returns an EngineRW around rwengine.New(capacity).
func NewEngineRW(capacity int32) (EngineRW, error) {
	b, err := rwengine.New(capacity)
	return EngineRW{b}, err
}

// PollInto is rwengine.Broker.AppendPoll.
func (e EngineRW) PollInto(dst []engine.Record, topic, group, member string, maxRecords int32) ([]engine.Record, error) {
	return e.AppendPoll(dst, topic, group, member, maxRecords)
}

// EnginePoll is the engine polling with Poll, which allocates a new slice
// for every non-empty poll; PollInto copies that slice into dst.
type EnginePoll struct{ *engine.Broker }

// NewEnginePoll returns an EnginePoll around engine.New(capacity).
func NewEnginePoll(capacity int32) (EnginePoll, error) {
	b, err := engine.New(capacity)
	return EnginePoll{b}, err
}

// PollInto calls Poll and appends its result to dst.
func (e EnginePoll) PollInto(dst []engine.Record, topic, group, member string, maxRecords int32) ([]engine.Record, error) {
	recs, err := e.Poll(topic, group, member, maxRecords)
	return append(dst, recs...), err
}

// Naive is the naive broker: the sequential reference model behind one
// global mutex. Every call holds the mutex from start to end, so it is
// linearizable and safe for any number of goroutines, and it never runs two
// calls at once. Its invalid-argument errors also match
// engine.ErrInvalidArgument.
type Naive struct {
	mu sync.Mutex // guards m, for the whole of every call
	m  *model.Broker
}

// NewNaive returns a Naive around model.New(capacity).
func NewNaive(capacity int32) (*Naive, error) {
	m, err := model.New(capacity)
	if err != nil {
		return nil, err
	}
	return &Naive{m: m}, nil
}

// Create is model.Broker.Create under the global mutex.
func (n *Naive) Create(topic string, partitionCount int32) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, err := n.m.Create(topic, partitionCount)
	return r, naiveErr(err)
}

// Join is model.Broker.Join under the global mutex.
func (n *Naive) Join(topic, group, member string) ([]int32, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, err := n.m.Join(topic, group, member)
	return r, naiveErr(err)
}

// Leave is model.Broker.Leave under the global mutex.
func (n *Naive) Leave(topic, group, member string) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, err := n.m.Leave(topic, group, member)
	return r, naiveErr(err)
}

// Publish is model.Broker.Publish under the global mutex.
func (n *Naive) Publish(topic string, partition int32, payload string) (int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, err := n.m.Publish(topic, partition, payload)
	return r, naiveErr(err)
}

// PollInto is model.Broker.Poll under the global mutex, its records copied
// into dst as engine.Records. The model allocates its result slice, as a
// straightforward broker would.
func (n *Naive) PollInto(dst []engine.Record, topic, group, member string, maxRecords int32) ([]engine.Record, error) {
	n.mu.Lock()
	recs, err := n.m.Poll(topic, group, member, maxRecords)
	n.mu.Unlock()
	for _, r := range recs {
		dst = append(dst, engine.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Payload: r.Payload})
	}
	return dst, naiveErr(err)
}

// naiveErr makes the model's invalid-argument errors engine ones, so that
// errors.Is(err, engine.ErrInvalidArgument) holds for every subject.
func naiveErr(err error) error {
	if errors.Is(err, model.ErrInvalidArgument) {
		return fmt.Errorf("%w: %w", engine.ErrInvalidArgument, err)
	}
	return err
}

// Ack is model.Broker.Ack under the global mutex.
func (n *Naive) Ack(topic, group, member string, partition int32, offset int64) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, err := n.m.Ack(topic, group, member, partition, offset)
	return r, naiveErr(err)
}

// Retry is model.Broker.Retry under the global mutex.
func (n *Naive) Retry(topic, group, member string, partition int32, offset int64) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, err := n.m.Retry(topic, group, member, partition, offset)
	return r, naiveErr(err)
}

// ErrUnsupported is returned by Chan.Retry: a received channel value cannot
// be delivered again.
var ErrUnsupported = errors.New("bench: not supported by this subject")

// Chan is the channel baseline: per topic partition, one buffered channel
// (capacity records) per group. Publish sends the record to every group's
// channel of the partition; PollInto receives, without blocking, from the
// channels of the member's partitions; Ack only looks the topic up and
// returns true, since a receive is already final.
//
// It is a hand-off, not a broker: records published before a group joins
// never reach it, a topic with no groups drops what is published (Publish
// still returns an offset), Retry returns ErrUnsupported, and a rebalance
// cancels nothing. Its concurrency is limited to what the scenarios need:
// Create, Join and Leave must not run concurrently with any other call, and
// each partition must have at most one publishing goroutine at a time.
// Polls may run from any goroutines.
type Chan struct {
	capacity int32
	topics   map[string]*chanTopic
}

type chanTopic struct {
	name   string
	parts  []chanPart
	groups map[string]*chanGroup
}

// chanPart is one partition: the next offset (written only by the
// partition's single publisher) and the queue of every group. Padded so that
// two publishers' counters never share a cache-line pair.
type chanPart struct {
	next   int64
	queues []chan engine.Record
	_      [128 - 8 - 24]byte
}

type chanGroup struct {
	queues   []chan engine.Record // by partition
	members  []string             // sorted bytewise
	assigned map[string][]int32   // member → partitions ascending (p mod len(members))
}

// NewChan returns an empty channel baseline whose channels each buffer
// capacity records. capacity must be in 1..1000.
func NewChan(capacity int32) (*Chan, error) {
	if capacity < engine.MinCapacity || capacity > engine.MaxCapacity {
		return nil, fmt.Errorf("%w: capacity %d", engine.ErrInvalidArgument, capacity)
	}
	return &Chan{capacity: capacity, topics: map[string]*chanTopic{}}, nil
}

// Create adds a topic of partitionCount (1..64) partitions with no groups;
// false if it exists.
func (c *Chan) Create(topic string, partitionCount int32) (bool, error) {
	if partitionCount < 1 || partitionCount > engine.MaxPartitionCount {
		return false, fmt.Errorf("%w: partition count %d", engine.ErrInvalidArgument, partitionCount)
	}
	if _, ok := c.topics[topic]; ok {
		return false, nil
	}
	c.topics[topic] = &chanTopic{name: topic, parts: make([]chanPart, partitionCount), groups: map[string]*chanGroup{}}
	return true, nil
}

func (c *Chan) lookup(topic string) (*chanTopic, error) {
	t := c.topics[topic]
	if t == nil {
		return nil, fmt.Errorf("%w: unknown topic %q", engine.ErrInvalidArgument, topic)
	}
	return t, nil
}

// Join adds member to group (creating the group and its channels if
// absent), reassigns partition p to the (p mod n)-th member in byte order,
// and returns member's partitions.
func (c *Chan) Join(topic, group, member string) ([]int32, error) {
	t, err := c.lookup(topic)
	if err != nil {
		return nil, err
	}
	g := t.groups[group]
	if g == nil {
		g = &chanGroup{queues: make([]chan engine.Record, len(t.parts))}
		for p := range t.parts {
			g.queues[p] = make(chan engine.Record, c.capacity)
			t.parts[p].queues = append(t.parts[p].queues, g.queues[p])
		}
		t.groups[group] = g
	}
	if i, found := slices.BinarySearch(g.members, member); !found {
		g.members = slices.Insert(g.members, i, member)
		g.assign(len(t.parts))
	}
	return slices.Clone(g.assigned[member]), nil
}

// Leave removes member from group and reassigns; false if either is absent.
func (c *Chan) Leave(topic, group, member string) (bool, error) {
	t, err := c.lookup(topic)
	if err != nil {
		return false, err
	}
	g := t.groups[group]
	if g == nil {
		return false, nil
	}
	i, found := slices.BinarySearch(g.members, member)
	if !found {
		return false, nil
	}
	g.members = slices.Delete(g.members, i, i+1)
	g.assign(len(t.parts))
	return true, nil
}

func (g *chanGroup) assign(partitions int) {
	g.assigned = make(map[string][]int32, len(g.members))
	if len(g.members) == 0 {
		return
	}
	for _, m := range g.members {
		g.assigned[m] = []int32{}
	}
	for p := range partitions {
		m := g.members[p%len(g.members)]
		g.assigned[m] = append(g.assigned[m], int32(p))
	}
}

// Publish sends the record to every group's channel of partition and
// returns its offset, or -1 if any of those channels is full.
func (c *Chan) Publish(topic string, partition int32, payload string) (int64, error) {
	t, err := c.lookup(topic)
	if err != nil {
		return 0, err
	}
	if partition < 0 || int(partition) >= len(t.parts) {
		return 0, fmt.Errorf("%w: partition %d", engine.ErrInvalidArgument, partition)
	}
	p := &t.parts[partition]
	for _, q := range p.queues {
		if len(q) == cap(q) {
			return -1, nil
		}
	}
	r := engine.Record{Topic: t.name, Partition: partition, Offset: p.next, Payload: payload}
	for _, q := range p.queues {
		q <- r // cannot block: this is the partition's only sender and there was room
	}
	p.next++
	return r.Offset, nil
}

// PollInto receives, without blocking, at most one record from each of
// member's partitions in ascending order, until maxRecords are taken.
func (c *Chan) PollInto(dst []engine.Record, topic, group, member string, maxRecords int32) ([]engine.Record, error) {
	t, err := c.lookup(topic)
	if err != nil {
		return dst, err
	}
	g := t.groups[group]
	if g == nil {
		return dst, nil
	}
	taken := int32(0)
	for _, p := range g.assigned[member] {
		if taken == maxRecords {
			break
		}
		select {
		case r := <-g.queues[p]:
			dst = append(dst, r)
			taken++
		default:
		}
	}
	return dst, nil
}

// Ack returns true for any known topic: the receive in PollInto already
// removed the record.
func (c *Chan) Ack(topic, group, member string, partition int32, offset int64) (bool, error) {
	if _, err := c.lookup(topic); err != nil {
		return false, err
	}
	return true, nil
}

// Retry returns ErrUnsupported.
func (c *Chan) Retry(topic, group, member string, partition int32, offset int64) (bool, error) {
	return false, ErrUnsupported
}

// RawChan marks the bare channel baseline that the single-goroutine
// targets are stated against. The RoundTrip and Batch64 scenarios, given a
// *RawChan, ignore the Subject API and time one send and one receive of an
// engine.Record on a buffered channel per record, so that this figure is
// measured beside the engine's, repetition by repetition. Through the
// Subject methods it behaves as its Chan.
type RawChan struct{ *Chan }

// NewRawChan returns a RawChan whose Chan buffers capacity records.
func NewRawChan(capacity int32) (*RawChan, error) {
	c, err := NewChan(capacity)
	if err != nil {
		return nil, err
	}
	return &RawChan{c}, nil
}
