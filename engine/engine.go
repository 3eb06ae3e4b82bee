package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/f91dcac0/tributary/ringlog"
	"github.com/f91dcac0/tributary/shard"
)

// Limits of the core contract (SPEC rules 1–4).
const (
	MinCapacity       = 1    // smallest capacityPerPartition New accepts, in records
	MaxCapacity       = 1000 // largest capacityPerPartition New accepts, in records
	MaxPartitionCount = 64   // largest partitionCount Create accepts (smallest: 1)
	MaxPollRecords    = 64   // largest maxRecords Poll accepts (smallest: 1)
	MaxIDLength       = 64   // longest topic, group or member identifier, in bytes
)

// ErrInvalidArgument is returned, wrapped with context, by every call that
// breaks SPEC rules 1–4: a capacity outside 1..1000, a partition count
// outside 1..64, an invalid identifier, an unknown topic (every method but
// Create), a partition outside [0, partitionCount), a negative ack or retry
// offset, or maxRecords outside 1..64. A call that returns it has changed
// nothing. Test with errors.Is(err, ErrInvalidArgument).
var ErrInvalidArgument = errors.New("tributary: invalid argument")

// Record is a value snapshot of one retained record, as returned by Poll.
// Changing a Record never changes the broker.
type Record struct {
	Topic     string // the topic's identifier
	Partition int32  // partition index in [0, partitionCount)
	Offset    int64  // the record's offset in its partition, from 0
	Payload   string // the published payload, possibly empty
}

// Option configures a Broker at New. The core contract needs none; options
// for the features layered on it are added as those features land.
type Option func(*config)

type config struct{}

// Broker is the event broker. Create one with New; a *Broker is safe for
// concurrent use by any number of goroutines.
type Broker struct {
	capacity int32
	faults   faultSet // empty unless built with tributary_faults (faults.go)

	// createMu serialises Create's copy-on-write of topics. It guards no
	// state that other calls read.
	createMu sync.Mutex
	// topics is the current topic registry, never mutated once stored.
	topics atomic.Pointer[map[string]*topic]
}

// topic is one topic: its partitions and its consumer groups.
type topic struct {
	name   string
	parts  []partition // fixed at Create; len 1..64
	faults faultSet    // the Broker's at Create; empty in a normal build

	// mu is the topic's membership lock. It serialises every membership
	// change (group creation, Join, Leave) and guards each group's members.
	// Readers do not take it: they read groups and each group's assignment
	// from immutable snapshots, which a writer replaces only while holding
	// mu and every partition lock of the topic (package doc).
	mu sync.Mutex
	// groups is the topic's set of groups, an immutable map replaced (copy
	// on write) to add a group. Groups are never removed.
	groups atomic.Pointer[map[string]*group]
}

// group is one consumer group of a topic.
type group struct {
	name string
	idx  int // this group's index in every partition's cursors; fixed

	members []string // sorted bytewise, distinct; guarded by topic.mu

	// assign is the group's current assignment, immutable once stored.
	assign atomic.Pointer[assignment]
}

// assignment is one immutable generation of a group's assignment.
type assignment struct {
	owner []string              // owner[p]: member owning partition p, "" if none
	masks map[string]shard.Mask // every member → its partitions (possibly none)
}

// cursor is one group's position on one partition.
type cursor struct {
	committed int64 // next offset the group will be given
	inFlight  bool  // the record at committed is reserved to the owner
}

// cursorsPerLine is how many cursors fill one padding unit; cursor slices
// are allocated in whole units so that two partitions' cursors, written by
// every Poll and Ack, never share a cache line.
const cursorsPerLine = shard.CacheLineSize / int(unsafe.Sizeof(cursor{}))

// entry is what a partition log stores per record.
type entry struct {
	payload string
}

// partitionState is the part of a partition that its mutex guards.
type partitionState struct {
	// mu guards log and cursors. cursors is indexed by group.idx.
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
func New(capacityPerPartition int32, opts ...Option) (*Broker, error) {
	if capacityPerPartition < MinCapacity || capacityPerPartition > MaxCapacity {
		return nil, fmt.Errorf("%w: capacity %d outside [%d,%d]", ErrInvalidArgument, capacityPerPartition, MinCapacity, MaxCapacity)
	}
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidArgument)
		}
		o(&cfg)
	}
	b := &Broker{capacity: capacityPerPartition}
	empty := map[string]*topic{}
	b.topics.Store(&empty)
	return b, nil
}

// Capacity returns the capacity per partition given to New, in records.
func (b *Broker) Capacity() int32 { return b.capacity }

// Create creates topic with partitionCount empty partitions (SPEC rule 2) and
// returns true. If the topic exists it returns false and leaves it untouched,
// whatever partitionCount is. Errors (ErrInvalidArgument): an invalid
// identifier, partitionCount outside 1..64.
func (b *Broker) Create(topicName string, partitionCount int32) (bool, error) {
	if err := checkID("topic", topicName); err != nil {
		return false, err
	}
	if partitionCount < 1 || partitionCount > MaxPartitionCount {
		return false, fmt.Errorf("%w: topic %q: partition count %d outside [1,%d]", ErrInvalidArgument, topicName, partitionCount, MaxPartitionCount)
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
		faults: b.faults,
	}
	for i := range t.parts {
		t.parts[i].log.Init(int(b.capacity))
	}
	noGroups := map[string]*group{}
	t.groups.Store(&noGroups)
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
	t, err := b.lookup(topicName)
	if err != nil {
		return nil, err
	}
	if err := checkGroupMember(groupName, member); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	g := (*t.groups.Load())[groupName]
	created := g == nil
	if created {
		g = &group{name: groupName, idx: len(*t.groups.Load())}
		g.assign.Store(&assignment{owner: make([]string, len(t.parts))})
	}
	i, found := slices.BinarySearch(g.members, member)
	if !found {
		g.members = slices.Insert(g.members, i, member)
		t.rebalanceLocked(g, created)
	}
	mask := g.assign.Load().masks[member]
	return mask.AppendTo(make([]int32, 0, mask.Len())), nil
}

// Leave removes member from group on topic and rebalances (SPEC rules 8, 9).
// It returns false, changing nothing, when the group or the member is
// absent. The group itself, with its committed offsets, always remains.
// Errors (ErrInvalidArgument): unknown topic, invalid identifier.
func (b *Broker) Leave(topicName, groupName, member string) (bool, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return false, err
	}
	if err := checkGroupMember(groupName, member); err != nil {
		return false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	g := (*t.groups.Load())[groupName]
	if g == nil {
		return false, nil
	}
	i, found := slices.BinarySearch(g.members, member)
	if !found {
		return false, nil
	}
	g.members = slices.Delete(g.members, i, i+1)
	t.rebalanceLocked(g, false)
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
	if t.faults.on(faultPublishBurnsOffset) {
		off, ok = t.burnOffset(p, off, ok)
	}
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
// records. It allocates only its result; AppendPoll reuses a caller's
// buffer instead. Errors (ErrInvalidArgument): unknown topic, invalid
// identifier, maxRecords outside 1..64.
func (b *Broker) Poll(topicName, groupName, member string, maxRecords int32) ([]Record, error) {
	out, err := b.appendPoll(nil, topicName, groupName, member, maxRecords)
	if out == nil && err == nil {
		out = []Record{}
	}
	return out, err
}

// appendPoll is Poll appending to dst; with dst nil it allocates only when a
// record is reserved, sized for the most records the member can get.
//
// Identifiers are validated only on a miss: a topic, group or member found
// in the broker's maps was validated when it was added.
func (b *Broker) appendPoll(dst []Record, topicName, groupName, member string, maxRecords int32) ([]Record, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return dst, err
	}
	if maxRecords < 1 || maxRecords > MaxPollRecords {
		if err := checkGroupMember(groupName, member); err != nil {
			return dst, err
		}
		return dst, fmt.Errorf("%w: maxRecords %d outside [1,%d]", ErrInvalidArgument, maxRecords, MaxPollRecords)
	}
	g := (*t.groups.Load())[groupName]
	if g == nil {
		return dst, checkGroupMember(groupName, member)
	}
retry:
	a := g.assign.Load()
	mask, ok := a.masks[member]
	if !ok {
		return dst, checkID("member", member)
	}
	if t.faults.on(faultPollStaleAssignment) {
		t.faultYield() // widen (f)'s window: let a rebalance run now
	}
	var locked shard.Mask
	taken := int32(0)
	for p, rest, ok := mask.First(); ok && taken < maxRecords; p, rest, ok = rest.First() {
		if t.faults.on(faultPollReleasesEach) {
			locked = t.releasePolled(locked)
		}
		part := &t.parts[p]
		part.mu.Lock()
		if locked == 0 && g.assign.Load() != a && !t.faults.on(faultPollStaleAssignment) {
			// A rebalance replaced the assignment after we read it. It held
			// every partition lock to do so, so holding this one, the
			// current assignment cannot change again until we let go.
			part.mu.Unlock()
			goto retry
		}
		if t.faults.on(faultRebalanceSkipsLock) {
			t.faultYield() // widen (g)'s window: hold the lock a while
		}
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
// mismatch it returns false and changes nothing. Retry allocates nothing.
func (b *Broker) Retry(topicName, groupName, member string, partition int32, offset int64) (bool, error) {
	return b.settle(topicName, groupName, member, partition, offset, false)
}

// settle is Ack (commit true) and Retry (commit false).
func (b *Broker) settle(topicName, groupName, member string, partition int32, offset int64, commit bool) (bool, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return false, err
	}
	if err := t.checkPartition(partition); err != nil {
		return false, err
	}
	if offset < 0 {
		if err := checkGroupMember(groupName, member); err != nil {
			return false, err
		}
		return false, fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, offset)
	}
	g := (*t.groups.Load())[groupName]
	if g == nil {
		return false, checkGroupMember(groupName, member)
	}
	if member == "" {
		// The one invalid id an owner check could pass: a partition with no
		// owner has owner "". Every other owner is a validated member id.
		return false, checkID("member", member)
	}
	part := &t.parts[partition]
	for {
		a := g.assign.Load()
		if a.owner[partition] != member && !t.faults.on(faultAckSkipsOwner) {
			return false, checkID("member", member)
		}
		part.mu.Lock()
		if g.assign.Load() == a {
			break // holding the partition lock, the assignment is a's until we let go
		}
		part.mu.Unlock()
	}
	ok := settleLocked(t, g, part, offset, commit)
	part.mu.Unlock()
	return ok, nil
}

// settleLocked applies an Ack or Retry to g's cursor on part, whose lock the
// caller holds, once the owner check has passed.
func settleLocked(t *topic, g *group, part *partition, offset int64, commit bool) bool {
	c := &part.cursors[g.idx]
	if !c.inFlight || c.committed != offset {
		return false
	}
	c.inFlight = false
	if !commit {
		return true
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
		if t.faults.on(faultTrimIgnoresMemberless) {
			low = t.lowIgnoringMemberless(part, g, c.committed)
		}
		part.log.TrimTo(low)
	}
	return true
}

// rebalanceLocked replaces g's whole assignment with the round-robin one for
// g.members (SPEC rules 6, 9): partition p goes to members[p mod n]. A
// partition whose owner changes loses its in-flight delivery; its committed
// offset is kept. With created set, g is new: each partition gets g's cursor
// at its log start offset (rule 7) and g is added to the topic's groups.
//
// The caller holds t.mu. Everything happens while holding every partition
// lock of the topic, so no Poll, Ack, Retry or Publish is in progress and the
// log start offsets cannot move: the new assignment (and a new group) takes
// effect at one instant.
func (t *topic) rebalanceLocked(g *group, created bool) {
	old := g.assign.Load()
	next := &assignment{owner: make([]string, len(t.parts)), masks: make(map[string]shard.Mask, len(g.members))}
	for _, m := range g.members {
		next.masks[m] = 0
	}
	if n := len(g.members); n > 0 {
		for p := range t.parts {
			owner := g.members[p%n]
			next.owner[p] = owner
			next.masks[owner] = next.masks[owner].With(int32(p))
		}
	}
	t.lockAll()
	if created {
		for i := range t.parts {
			p := &t.parts[i]
			p.cursors = appendCursor(p.cursors, cursor{committed: p.log.StartOffset()})
		}
		oldGroups := *t.groups.Load()
		groups := make(map[string]*group, len(oldGroups)+1)
		for k, v := range oldGroups {
			groups[k] = v
		}
		groups[g.name] = g
		t.groups.Store(&groups)
	}
	for p := range t.parts {
		if old.owner[p] != next.owner[p] && !t.faults.on(faultRebalanceKeepsInFlight) {
			t.parts[p].cursors[g.idx].inFlight = false
		}
	}
	g.assign.Store(next)
	t.unlockAll()
}

// lockAll locks every partition of t in ascending order (the lock order).
func (t *topic) lockAll() {
	for i := range t.parts {
		if t.faults.on(faultRebalanceSkipsLock) && i == len(t.parts)-1 && i > 0 {
			continue
		}
		t.parts[i].mu.Lock()
	}
}

// unlockAll unlocks what lockAll locked.
func (t *topic) unlockAll() {
	for i := range t.parts {
		if t.faults.on(faultRebalanceSkipsLock) && i == len(t.parts)-1 && i > 0 {
			continue
		}
		t.parts[i].mu.Unlock()
	}
}

// appendCursor appends c to cs, growing the backing array in whole padding
// units (cursorsPerLine) so that it shares no cache line with another
// partition's cursors.
func appendCursor(cs []cursor, c cursor) []cursor {
	if len(cs) == cap(cs) {
		grown := make([]cursor, len(cs), (len(cs)/cursorsPerLine+1)*cursorsPerLine)
		copy(grown, cs)
		cs = grown
	}
	return append(cs, c)
}

// lookup returns the named topic or ErrInvalidArgument.
func (b *Broker) lookup(name string) (*topic, error) {
	if t := (*b.topics.Load())[name]; t != nil {
		return t, nil // a stored name was validated by Create
	}
	if err := checkID("topic", name); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: unknown topic %q", ErrInvalidArgument, name)
}

// checkPartition returns ErrInvalidArgument unless p is in [0, partitionCount).
func (t *topic) checkPartition(p int32) error {
	if p < 0 || int(p) >= len(t.parts) {
		return fmt.Errorf("%w: topic %q: partition %d outside [0,%d)", ErrInvalidArgument, t.name, p, len(t.parts))
	}
	return nil
}

// checkGroupMember returns the first ErrInvalidArgument error of the group
// and member identifiers, or nil.
func checkGroupMember(groupName, member string) error {
	if err := checkID("group", groupName); err != nil {
		return err
	}
	return checkID("member", member)
}

// idByte marks the bytes allowed in identifiers: A-Z a-z 0-9 _ - (SPEC rule 3).
var idByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	t['_'], t['-'] = true, true
	return t
}()

// checkID returns ErrInvalidArgument unless id is 1..64 bytes of
// A-Z a-z 0-9 _ -. kind names the identifier in the error.
func checkID(kind, id string) error {
	if len(id) == 0 || len(id) > MaxIDLength {
		return fmt.Errorf("%w: %s identifier %q: length %d outside [1,%d]", ErrInvalidArgument, kind, id, len(id), MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		if !idByte[id[i]] {
			return fmt.Errorf("%w: %s identifier %q: byte %d (0x%02x) is not one of A-Z a-z 0-9 _ -", ErrInvalidArgument, kind, id, i, id[i])
		}
	}
	return nil
}
