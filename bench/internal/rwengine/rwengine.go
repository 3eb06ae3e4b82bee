// Package rwengine is a frozen copy of the engine as first built to the
// user's original lock design — a per-topic sync.RWMutex read-locked by
// Poll, Ack and Retry, a per-group sync.RWMutex, and per-partition mutexes —
// kept only as a benchmark baseline for the engine's snapshot-based reader
// side (package engine's doc, "Why readers need no membership lock"). It
// implements the same contract and is exercised by bench's subject tests,
// but it is not maintained or meant for use.
package rwengine

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/contract"
	"github.com/f91dcac0/tributary/ringlog"
	"github.com/f91dcac0/tributary/shard"
)

// Limits of the core contract (SPEC rules 1–4).
const (
	MinCapacity       = 1    // smallest capacityPerPartition New accepts
	MaxCapacity       = 1000 // largest capacityPerPartition New accepts
	MaxPartitionCount = 64   // largest partitionCount Create accepts (smallest: 1)
	MaxPollRecords    = 64   // largest maxRecords Poll accepts (smallest: 1)
	MaxIDLength       = 64   // longest topic, group or member identifier, in bytes
)

// ErrInvalidArgument is engine.ErrInvalidArgument: the same sentinel.
var ErrInvalidArgument = engine.ErrInvalidArgument

// Record is engine.Record.
type Record = engine.Record

// Broker is the event broker. Create one with New; a *Broker is safe for
// concurrent use by any number of goroutines.
type Broker struct {
	capacity int32

	// createMu serialises Create's copy-on-write of topics. It guards no
	// state that other calls read.
	createMu sync.Mutex
	// topics is the current topic registry, never mutated once stored.
	topics atomic.Pointer[map[string]*topic]
}

// topic is one topic: its partitions and its consumer groups.
type topic struct {
	name  string
	parts []partition // fixed at Create; len 1..64

	// mu guards groups (the map and the group indexes handed out). Lock
	// order: topic.mu → group.mu → partition.mu ascending (package doc).
	mu     sync.RWMutex
	groups map[string]*group
}

// group is one consumer group of a topic.
type group struct {
	name string
	idx  int // this group's index in every partition's cursors; fixed

	// mu guards members, owner and assigned.
	mu       sync.RWMutex
	members  []string              // sorted bytewise, distinct
	owner    []string              // owner[p]: member owning partition p, "" if none
	assigned map[string]shard.Mask // member → the partitions it owns
}

// cursor is one group's position on one partition.
type cursor struct {
	committed int64 // next offset the group will be given
	inFlight  bool  // the record at committed is reserved to the owner
}

// entry is what a partition log stores per record.
type entry struct {
	payload string
}

// partitionState is the part of a partition that its mutex guards.
type partitionState struct {
	// mu guards log and cursors. cursors is indexed by group.idx; its slice
	// header changes only when a group is created, which also holds the
	// topic write lock.
	mu      sync.Mutex
	log     ringlog.Log[entry]
	cursors []cursor
}

// partition pads partitionState to whole cache-line pairs so that two
// partitions' locks never share a line.
type partition struct {
	partitionState
	_ [(shard.CacheLineSize - unsafe.Sizeof(partitionState{})%shard.CacheLineSize) % shard.CacheLineSize]byte
}

// New returns an empty broker whose partitions each retain at most
// capacityPerPartition records. capacityPerPartition must be in 1..1000
// (SPEC rule 1); otherwise New returns ErrInvalidArgument.
func New(capacityPerPartition int32) (*Broker, error) {
	if capacityPerPartition < MinCapacity || capacityPerPartition > MaxCapacity {
		return nil, fmt.Errorf("%w: capacity %d outside [%d,%d]", ErrInvalidArgument, capacityPerPartition, MinCapacity, MaxCapacity)
	}
	b := &Broker{capacity: capacityPerPartition}
	empty := map[string]*topic{}
	b.topics.Store(&empty)
	return b, nil
}

// Capacity returns the capacity per partition given to New.
func (b *Broker) Capacity() int32 { return b.capacity }

// Create creates topic with partitionCount empty partitions (SPEC rule 2) and
// returns true. If the topic exists it returns false and leaves it untouched,
// whatever partitionCount is. Errors (ErrInvalidArgument): an invalid
// identifier, partitionCount outside 1..64.
func (b *Broker) Create(topicName string, partitionCount int32) (bool, error) {
	if err := contract.CheckCreate(ErrInvalidArgument, topicName, partitionCount); err != nil {
		return false, err
	}
	b.createMu.Lock()
	defer b.createMu.Unlock()
	old := *b.topics.Load()
	if _, ok := old[topicName]; ok {
		return false, nil
	}
	t := &topic{
		name:   topicName,
		parts:  make([]partition, partitionCount),
		groups: map[string]*group{},
	}
	for i := range t.parts {
		t.parts[i].log.Init(int(b.capacity))
	}
	next := make(map[string]*topic, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[topicName] = t
	b.topics.Store(&next)
	return true, nil
}

// Join adds member to group on topic (SPEC rule 7), creating the group if it
// is absent, rebalances (rule 9) and returns the member's partitions in
// ascending order, as a new slice owned by the caller (empty, not nil, when
// the group has more members than partitions). A new group's committed
// offset on each partition is that partition's log start offset. Joining
// twice changes nothing and returns the current partitions. Errors
// (ErrInvalidArgument): unknown topic, invalid identifier.
func (b *Broker) Join(topicName, groupName, member string) ([]int32, error) {
	t, err := b.lookupMember(topicName, groupName, member)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	if g := t.groups[groupName]; g != nil {
		g.mu.Lock()
		mask := t.addMemberLocked(g, member)
		g.mu.Unlock()
		t.mu.RUnlock()
		return mask.AppendTo(make([]int32, 0, mask.Len())), nil
	}
	t.mu.RUnlock()

	t.mu.Lock()
	g := t.groups[groupName]
	if g == nil {
		g = t.createGroupLocked(groupName)
	}
	g.mu.Lock()
	mask := t.addMemberLocked(g, member)
	g.mu.Unlock()
	t.mu.Unlock()
	return mask.AppendTo(make([]int32, 0, mask.Len())), nil
}

// Leave removes member from group on topic and rebalances (SPEC rules 8, 9).
// It returns false, changing nothing, when the group or the member is
// absent. The group itself, with its committed offsets, always remains.
// Errors (ErrInvalidArgument): unknown topic, invalid identifier.
func (b *Broker) Leave(topicName, groupName, member string) (bool, error) {
	t, err := b.lookupMember(topicName, groupName, member)
	if err != nil {
		return false, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	g := t.groups[groupName]
	if g == nil {
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	i, found := slices.BinarySearch(g.members, member)
	if !found {
		return false, nil
	}
	g.members = slices.Delete(g.members, i, i+1)
	t.rebalanceLocked(g)
	return true, nil
}

// Publish appends payload to partition of topic and returns the offset it
// got: 0, 1, 2, … per partition (SPEC rule 5). When the partition already
// retains capacity records it returns -1 and uses up no offset. Empty
// payloads are valid. Publish allocates nothing. Errors
// (ErrInvalidArgument): unknown topic, invalid identifier, partition outside
// [0, partitionCount).
func (b *Broker) Publish(topicName string, partition int32, payload string) (int64, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return 0, err
	}
	if err := t.checkPartition(partition); err != nil {
		return 0, err
	}
	p := &t.parts[partition]
	p.mu.Lock()
	off, ok := p.log.Append(entry{payload: payload})
	p.mu.Unlock()
	if !ok {
		return -1, nil
	}
	return off, nil
}

// Poll reserves and returns up to maxRecords records for member of group
// (SPEC rule 10): walking the member's partitions in ascending order, it
// takes the record at the committed offset of each partition that has no
// in-flight delivery and has a record there. The result is a new slice owned
// by the caller, in ascending partition order, at most one record per
// partition; it is empty (not nil) when the group or member is absent,
// nothing is eligible or everything is in flight. Poll never waits for
// records. Errors (ErrInvalidArgument): unknown topic, invalid identifier,
// maxRecords outside 1..64.
func (b *Broker) Poll(topicName, groupName, member string, maxRecords int32) ([]Record, error) {
	return contract.Polled(b.appendPoll(nil, topicName, groupName, member, maxRecords))
}

// AppendPoll is Poll appending to dst, as engine.Broker.AppendPoll.
func (b *Broker) AppendPoll(dst []Record, topicName, groupName, member string, maxRecords int32) ([]Record, error) {
	return b.appendPoll(dst, topicName, groupName, member, maxRecords)
}

// appendPoll is Poll appending to dst; with dst nil it allocates only when a
// record is reserved, sized for the most records the member can get.
func (b *Broker) appendPoll(dst []Record, topicName, groupName, member string, maxRecords int32) ([]Record, error) {
	t, err := b.lookupMember(topicName, groupName, member)
	if err != nil {
		return dst, err
	}
	if maxRecords < 1 || maxRecords > MaxPollRecords {
		return dst, fmt.Errorf("%w: maxRecords %d outside [1,%d]", ErrInvalidArgument, maxRecords, MaxPollRecords)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	g := t.groups[groupName]
	if g == nil {
		return dst, nil
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	mask := g.assigned[member]
	var locked shard.Mask
	taken := int32(0)
	for p, rest, ok := mask.First(); ok && taken < maxRecords; p, rest, ok = rest.First() {
		part := &t.parts[p]
		part.mu.Lock()
		locked = locked.With(p)
		c := &part.cursors[g.idx]
		if c.inFlight {
			continue
		}
		e := part.log.At(c.committed)
		if e == nil {
			continue
		}
		if dst == nil {
			dst = make([]Record, 0, min(int(maxRecords), mask.Len()))
		}
		dst = append(dst, Record{Topic: t.name, Partition: p, Offset: c.committed, Payload: e.payload})
		c.inFlight = true
		taken++
	}
	for p, rest, ok := locked.First(); ok; p, rest, ok = rest.First() {
		t.parts[p].mu.Unlock()
	}
	return dst, nil
}

// Ack acknowledges the in-flight delivery (partition, offset) of member in
// group (SPEC rule 11). It succeeds only if member currently owns partition
// and that exact record is in flight: the group's committed offset advances
// by one, the delivery clears, and every record that all of the topic's
// groups have now committed past is removed (rule 13). Otherwise it returns
// false and changes nothing. Ack allocates nothing. Errors
// (ErrInvalidArgument): unknown topic, invalid identifier, partition outside
// [0, partitionCount), negative offset.
func (b *Broker) Ack(topicName, groupName, member string, partition int32, offset int64) (bool, error) {
	return b.settle(topicName, groupName, member, partition, offset, true)
}

// Retry releases the in-flight delivery (partition, offset) of member in
// group without committing it, so the next poll delivers the same record
// again (SPEC rule 12). It has exactly Ack's checks and errors; on any
// mismatch it returns false and changes nothing.
func (b *Broker) Retry(topicName, groupName, member string, partition int32, offset int64) (bool, error) {
	return b.settle(topicName, groupName, member, partition, offset, false)
}

// settle is Ack (commit true) and Retry (commit false).
func (b *Broker) settle(topicName, groupName, member string, partition int32, offset int64, commit bool) (bool, error) {
	t, err := b.lookupMember(topicName, groupName, member)
	if err != nil {
		return false, err
	}
	if err := t.checkPartition(partition); err != nil {
		return false, err
	}
	if offset < 0 {
		return false, fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, offset)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	g := t.groups[groupName]
	if g == nil {
		return false, nil
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.owner[partition] != member {
		return false, nil
	}
	part := &t.parts[partition]
	part.mu.Lock()
	defer part.mu.Unlock()
	c := &part.cursors[g.idx]
	if !c.inFlight || c.committed != offset {
		return false, nil
	}
	c.inFlight = false
	if !commit {
		return true, nil
	}
	c.committed++
	// Invariant: with at least one group, the log start offset equals the
	// least committed offset of the topic's groups (a group starts at the log
	// start and every commit is followed by this trim). So only a group that
	// was at the log start can move the minimum.
	if offset == part.log.StartOffset() {
		low := c.committed
		for i := range part.cursors {
			low = min(low, part.cursors[i].committed)
		}
		part.log.TrimTo(low)
	}
	return true, nil
}

// createGroupLocked adds an empty group whose committed offset on each
// partition is the partition's log start offset (SPEC rule 7). The caller
// holds t.mu for writing, which excludes every Ack and so every trim.
func (t *topic) createGroupLocked(name string) *group {
	g := &group{
		name:     name,
		idx:      len(t.groups),
		owner:    make([]string, len(t.parts)),
		assigned: map[string]shard.Mask{},
	}
	for i := range t.parts {
		p := &t.parts[i]
		p.mu.Lock()
		p.cursors = append(p.cursors, cursor{committed: p.log.StartOffset()})
		p.mu.Unlock()
	}
	t.groups[name] = g
	return g
}

// addMemberLocked adds member to g if absent, rebalancing, and returns the
// member's partitions. The caller holds g.mu for writing.
func (t *topic) addMemberLocked(g *group, member string) shard.Mask {
	i, found := slices.BinarySearch(g.members, member)
	if !found {
		g.members = slices.Insert(g.members, i, member)
		t.rebalanceLocked(g)
	}
	return g.assigned[member]
}

// rebalanceLocked replaces g's whole assignment with the round-robin one for
// g.members (SPEC rules 6, 9): partition p goes to members[p mod n]. A
// partition whose owner changes loses its in-flight delivery; its committed
// offset is kept. The caller holds g.mu for writing, which excludes every
// Poll, Ack and Retry of g, so the change is seen at one instant.
func (t *topic) rebalanceLocked(g *group) {
	assigned := make(map[string]shard.Mask, len(g.members))
	for p := range t.parts {
		owner := ""
		if n := len(g.members); n > 0 {
			owner = g.members[p%n]
			assigned[owner] = assigned[owner].With(int32(p))
		}
		if g.owner[p] == owner {
			continue
		}
		g.owner[p] = owner
		part := &t.parts[p]
		part.mu.Lock()
		part.cursors[g.idx].inFlight = false
		part.mu.Unlock()
	}
	g.assigned = assigned
}

// lookup returns the named topic or ErrInvalidArgument.
func (b *Broker) lookup(name string) (*topic, error) {
	if err := checkID("topic", name); err != nil {
		return nil, err
	}
	t := (*b.topics.Load())[name]
	if t == nil {
		return nil, fmt.Errorf("%w: unknown topic %q", ErrInvalidArgument, name)
	}
	return t, nil
}

// checkPartition returns ErrInvalidArgument unless p is in [0, partitionCount).
func (t *topic) checkPartition(p int32) error {
	if p < 0 || int(p) >= len(t.parts) {
		return fmt.Errorf("%w: topic %q: partition %d outside [0,%d)", ErrInvalidArgument, t.name, p, len(t.parts))
	}
	return nil
}

// lookupMember is lookup of topicName followed by checkGroupMember: the
// topic, or the first ErrInvalidArgument error of the three identifiers.
func (b *Broker) lookupMember(topicName, groupName, member string) (*topic, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return nil, err
	}
	return t, checkGroupMember(groupName, member)
}

// checkGroupMember and checkID are the engine's identifier checks (SPEC
// rule 3), shared through internal/contract.
func checkGroupMember(groupName, member string) error {
	return contract.CheckGroupMember(ErrInvalidArgument, groupName, member)
}

func checkID(kind, id string) error { return contract.CheckID(ErrInvalidArgument, kind, id) }
