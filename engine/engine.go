package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/f91dcac0/tributary/engine/assign"
	"github.com/f91dcac0/tributary/ringlog"
	"github.com/f91dcac0/tributary/shard"
)

// Limits of the core contract (SPEC rules 1–4).
const (
	MinCapacity       = 1    // smallest capacityPerPartition New accepts, in records
	MaxCapacity       = 1000 // largest capacityPerPartition New accepts, in records
	MaxPartitionCount = 64   // largest partitionCount Create and AddPartitions accept (smallest: 1)
	MaxPollRecords    = 64   // largest maxRecords Poll accepts (smallest: 1)
	MaxIDLength       = 64   // longest topic, group or member identifier, in bytes
)

// ErrInvalidArgument is returned, wrapped with context, by every call that
// breaks SPEC rules 1–4 or 15–20: a capacity outside 1..1000, a partition
// count outside 1..64, an invalid identifier, an unknown topic (every method
// but Create), a partition outside [0, partitionCount), a negative offset,
// maxRecords outside 1..64, a nil Assignor, an option out of range, a
// message over WithMaxMessageBytes, or a Broker not made by New. A call that
// returns it has changed nothing. Test with errors.Is(err, ErrInvalidArgument).
var ErrInvalidArgument = errors.New("tributary: invalid argument")

// ErrOffsetOutOfRange is returned, wrapped, by Seek to an offset outside
// [log start, log end] of the partition (SPEC rule 20). Nothing changes: a
// group is never moved to some other offset in its place.
var ErrOffsetOutOfRange = errors.New("tributary: offset out of range")

// ErrGroupNotEmpty is returned, wrapped, by DeleteGroup of a group that
// still has members (SPEC rule 17). Nothing changes.
var ErrGroupNotEmpty = errors.New("tributary: consumer group not empty")

// ErrInvalidAssignment is returned, wrapped, by a call whose rebalance ran an
// Assignor that answered something other than one current member per
// partition, or panicked (SPEC rule 18): Join, Leave, SetAssignor or
// AddPartitions. The call changed nothing. It is assign.ErrInvalidAssignment.
var ErrInvalidAssignment = assign.ErrInvalidAssignment

// Assignor decides which member of a group owns each partition (SPEC rule
// 18). RoundRobin, Range and Sticky are built in; users may implement their
// own: see package assign for the contract.
type Assignor = assign.Assignor

// The built-in assignors (SPEC rule 18).
var (
	// RoundRobin gives partition p to member p mod n, members sorted
	// bytewise (rule 6). Join uses it for the groups it creates.
	RoundRobin Assignor = assign.RoundRobin
	// Range gives contiguous blocks in member order from partition 0; the
	// first P mod n members take ⌈P/n⌉ partitions, the rest ⌊P/n⌋ (Kafka's
	// RangeAssignor for one topic).
	Range Assignor = assign.Range
	// Sticky balances first (⌊P/n⌋ or ⌈P/n⌉ partitions each), then keeps
	// the largest possible number of partitions with their previous owner,
	// so a rebalance cancels as few in-flight deliveries as balance allows.
	Sticky Assignor = assign.Sticky
)

// noLow is partition.low when the topic has no group, and the committed
// offset of a free cursor slot: it never lowers a minimum.
const noLow = math.MaxInt64

// Broker is the event broker. Create one with New; a *Broker is safe for
// concurrent use by any number of goroutines. The zero Broker is not usable:
// its methods return ErrInvalidArgument.
type Broker struct {
	capacity   int32
	window     int64            // WithReplayWindow, in records
	clock      func() time.Time // WithClock; nil: time.Now
	ackTimeout int64            // WithAckTimeout, in nanoseconds; 0: none
	maxBytes   int              // WithMaxMessageBytes; 0: no limit
	wall       wallClock        // the default clock
	faults     faultSet         // empty unless built with tributary_faults (faults.go)

	// createMu serialises Create: it guards the write side of topics.
	createMu sync.Mutex
	// topics is the topic registry; lookups take no lock.
	topics registry[topic]
}

// topic is one topic: its partitions and its consumer groups.
type topic struct {
	name   string
	b      *Broker
	faults faultSet // the Broker's at Create; empty in a normal build

	// count is the number of partitions, 1..64. It grows only in
	// AddPartitions, under mu and every partition lock, after the new
	// parts entries are written; readers load it, then read parts[p] for
	// p < count.
	count atomic.Int32
	// parts[p] is partition p for p < count; each entry is written once,
	// before count covers it, and never changes after.
	parts [MaxPartitionCount]*partition

	// mu is the topic's membership lock. It serialises every change of
	// membership or configuration (Join, Leave, CreateGroup, DeleteGroup,
	// SetAssignor, AddPartitions), Seek and Describe, and guards the write
	// side of groups, each group's members and assignor, and freeSlots and
	// slots. Poll, Ack, Retry and Publish never take it: they read groups
	// and each group's assignment from the registry and immutable
	// snapshots, which a writer replaces only while holding mu and every
	// partition lock of the topic (package doc).
	mu     sync.Mutex
	groups registry[group]
	// slots is the length of every partition's cursors; freeSlots lists the
	// slots of deleted groups, reused by the next group created.
	slots     int
	freeSlots []int

	// ready wakes consumers waiting for records: every successful publish
	// and AddPartitions notify it (signal.go). It needs no lock.
	ready signal
}

// group is one consumer group of a topic.
type group struct {
	name string
	slot int // this group's index in every partition's cursors; fixed

	members      []string // sorted bytewise, distinct; guarded by topic.mu
	assignor     Assignor // guarded by topic.mu
	assignorName string   // assignor.Name(), read once when it was given; guarded by topic.mu

	// assign is the group's current assignment, immutable once stored. A
	// deleted group keeps its last one, which has no members, for ever.
	assign atomic.Pointer[assignment]
	// deleted is set, under topic.mu and every partition lock, when
	// DeleteGroup removes the group; a MemberHandle holding the group then
	// looks its name up again.
	deleted atomic.Bool
	// ready wakes the group's waiting members: its Ack, Retry, rebalances,
	// Seek and deletion notify it (signal.go). It needs no lock.
	ready signal
}

// assignment is one immutable generation of a group's assignment.
type assignment struct {
	owner []string              // owner[p]: member owning partition p, "" if none; len = partition count when made
	masks map[string]shard.Mask // every member → its partitions (possibly none)
}

// cursor is one group's position on one partition.
type cursor struct {
	committed   int64 // next offset the group will be given; noLow for a free slot
	deliveredAt int64 // broker clock, Unix ns, of the in-flight delivery (with an ack timeout)
	attempts    int32 // deliveries of the record at committed so far (SPEC rule 16)
	inFlight    bool  // the record at committed is reserved to the owner
	_           [11]byte
}

// cursorsPerLine is how many cursors fill one padding unit; cursor slices
// are allocated in whole units so that two partitions' cursors, written by
// every Poll and Ack, never share a cache line.
const cursorsPerLine = shard.CacheLineSize / int(unsafe.Sizeof(cursor{}))

// freeCursor is the cursor of a slot no group uses.
var freeCursor = cursor{committed: noLow}

// entry is what a partition log stores per record: 32 bytes, the rarely
// used parts of a message behind one pointer.
type entry struct {
	payload string
	ts      int64      // broker clock at append, Unix ns; unused when meta.time is set
	meta    *entryMeta // nil for a message with no key, no headers and no Time
}

// entryMeta is the part of a message Publish never has.
type entryMeta struct {
	key     string
	headers []Header  // the broker's copy; nil when none
	time    time.Time // Message.Time as given; zero: use entry.ts
}

// record returns e as the Record at (t, p, off) for its attempt-th delivery;
// the headers are copied.
func (e *entry) record(t *topic, p int32, off int64, attempt int32) Record {
	r := Record{Topic: t.name, Partition: p, Offset: off, Payload: e.payload, Attempt: attempt}
	if m := e.meta; m != nil {
		r.Key, r.Headers, r.Time = m.key, cloneHeaders(m.headers), m.time
	}
	if r.Time.IsZero() {
		r.Time = time.Unix(0, e.ts)
	}
	return r
}

// partitionState is the part of a partition that its mutex guards.
type partitionState struct {
	// mu guards log, cursors and low. cursors is indexed by group.slot.
	mu      sync.Mutex
	log     ringlog.Log[entry]
	cursors []cursor
	// low is the least committed offset of the topic's groups on this
	// partition, noLow when it has none. Records below low are fully
	// committed; retention keeps at most Broker.window of them.
	low int64
	// room wakes producers waiting for space: notified, under mu, whenever
	// retention removes records (trimLocked). It needs no lock of its own.
	room signal
}

// partition pads partitionState to whole cache-line pairs so that two
// partitions' locks never share a line.
type partition struct {
	partitionState
	_ [(shard.CacheLineSize - unsafe.Sizeof(partitionState{})%shard.CacheLineSize) % shard.CacheLineSize]byte
}

// New returns an empty broker whose partitions each retain at most
// capacityPerPartition records. capacityPerPartition must be in 1..1000
// (SPEC rule 1) and each option in its range (WithReplayWindow, WithClock,
// WithAckTimeout, WithMaxMessageBytes); otherwise New returns
// ErrInvalidArgument and a nil Broker.
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
	if err := cfg.check(capacityPerPartition); err != nil {
		return nil, err
	}
	return &Broker{
		capacity:   capacityPerPartition,
		window:     int64(cfg.window),
		clock:      cfg.clock,
		ackTimeout: int64(cfg.ackTimeout),
		maxBytes:   cfg.maxBytes,
	}, nil
}

// errZeroBroker is the error of every call on a Broker not made by New.
var errZeroBroker = fmt.Errorf("%w: Broker not created with engine.New", ErrInvalidArgument)

// Capacity returns the capacity per partition given to New, in records.
func (b *Broker) Capacity() int32 { return b.capacity }

// nowNanos reads the broker clock, in Unix nanoseconds: WithClock's, or
// the default wallClock.
func (b *Broker) nowNanos() int64 {
	if b.clock != nil {
		return b.clock().UnixNano()
	}
	return b.wall.now()
}

// Create creates topic with partitionCount empty partitions (SPEC rule 2) and
// returns true. If the topic exists it returns false and leaves it untouched,
// whatever partitionCount is. Creating the N-th topic costs O(partitionCount)
// (amortised), not O(N). Errors (ErrInvalidArgument): an invalid
// identifier, partitionCount outside 1..64, a zero Broker.
func (b *Broker) Create(topicName string, partitionCount int32) (bool, error) {
	if b.capacity == 0 {
		return false, errZeroBroker
	}
	if err := checkID("topic", topicName); err != nil {
		return false, err
	}
	if partitionCount < 1 || partitionCount > MaxPartitionCount {
		return false, fmt.Errorf("%w: topic %q: partition count %d outside [1,%d]", ErrInvalidArgument, topicName, partitionCount, MaxPartitionCount)
	}
	b.createMu.Lock()
	defer b.createMu.Unlock()
	if b.topics.Load(topicName) != nil {
		return false, nil
	}
	t := &topic{name: topicName, b: b, faults: b.faults}
	for p := range partitionCount {
		t.parts[p] = b.newPartition()
	}
	t.count.Store(partitionCount)
	b.topics.Store(topicName, t)
	return true, nil
}

// newPartition returns an empty partition at offset 0 with no cursors.
func (b *Broker) newPartition() *partition {
	p := new(partition)
	p.log.Init(int(b.capacity))
	p.low = noLow
	return p
}

// Join adds member to group on topic (SPEC rule 7), creating the group with
// the RoundRobin assignor if it is absent, rebalances with the group's
// assignor (rules 9, 18) and returns the member's partitions in ascending
// order, as a new slice owned by the caller (empty, not nil, when the member
// owns none). A new group's committed offset on each partition is that
// partition's log start offset. Joining twice changes nothing and returns the
// current partitions. Errors: ErrInvalidArgument for an unknown topic or an
// invalid identifier; ErrInvalidAssignment when the group's assignor
// answers wrongly (nothing changes: the member is not added).
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
	g := t.groups.Load(groupName)
	created := g == nil
	if created {
		g = t.newGroupLocked(groupName, RoundRobin, RoundRobin.Name())
	}
	if i, found := slices.BinarySearch(g.members, member); !found {
		members := slices.Insert(slices.Clone(g.members), i, member)
		next, err := t.plan(g, members, g.assignor, g.assignorName, int(t.count.Load()))
		if err != nil {
			return nil, err
		}
		n := t.lockAll()
		if created {
			t.addGroupAllLocked(g)
		}
		g.members = members
		t.applyAllLocked(g, next)
		t.unlockAll(n)
		g.ready.notify()
	}
	mask := g.assign.Load().masks[member]
	return mask.AppendTo(make([]int32, 0, mask.Len())), nil
}

// Leave removes member from group on topic and rebalances with the group's
// assignor (SPEC rules 8, 9, 18). It returns false, changing nothing, when
// the group or the member is absent. The group, with its committed offsets,
// remains until DeleteGroup. Errors: ErrInvalidArgument for an unknown topic
// or an invalid identifier; ErrInvalidAssignment when the group's assignor
// answers wrongly for the remaining members (nothing changes).
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
	g := t.groups.Load(groupName)
	if g == nil {
		return false, nil
	}
	i, found := slices.BinarySearch(g.members, member)
	if !found {
		return false, nil
	}
	members := slices.Delete(slices.Clone(g.members), i, i+1)
	next, err := t.plan(g, members, g.assignor, g.assignorName, int(t.count.Load()))
	if err != nil {
		return false, err
	}
	n := t.lockAll()
	g.members = members
	t.applyAllLocked(g, next)
	t.unlockAll(n)
	g.ready.notify()
	return true, nil
}

// Publish appends payload to partition of topic and returns the offset it
// got: 0, 1, 2, … per partition (SPEC rule 5). It is PublishMessage with
// Message{Payload: payload} (rule 15): the record's Time is the broker
// clock. When the partition is full it returns -1 and uses up no offset
// (with WithReplayWindow, a full partition first gives up its oldest fully
// committed record, rule 21). Empty payloads are valid. Publish allocates
// nothing. Errors (ErrInvalidArgument, with offset -1): unknown topic,
// invalid identifier, partition outside [0, partitionCount), a payload
// longer than WithMaxMessageBytes.
func (b *Broker) Publish(topicName string, partition int32, payload string) (int64, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return -1, err
	}
	p, err := t.partition(partition)
	if err != nil {
		return -1, err
	}
	if b.maxBytes > 0 && len(payload) > b.maxBytes {
		return -1, fmt.Errorf("%w: topic %q: message of %d bytes exceeds the limit of %d", ErrInvalidArgument, t.name, len(payload), b.maxBytes)
	}
	return t.append(p, entry{payload: payload, ts: b.nowNanos()}), nil
}

// PublishMessage appends m to partition of topic and returns the offset it
// got (SPEC rules 5, 15), or -1 when the partition is full, as Publish. The
// broker keeps its own copy of m.Headers; m.Time, when zero, becomes the
// broker clock. A message with only a payload allocates nothing; one with a
// key, headers or its own Time allocates its metadata (and, with headers,
// their copy). Errors
// (ErrInvalidArgument, with offset -1): unknown topic, invalid identifier,
// partition outside [0, partitionCount), a message whose key, header keys,
// header values and payload add up to more than WithMaxMessageBytes.
func (b *Broker) PublishMessage(topicName string, partition int32, m Message) (int64, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return -1, err
	}
	p, err := t.partition(partition)
	if err != nil {
		return -1, err
	}
	if b.maxBytes > 0 {
		if n := messageSize(&m); n > b.maxBytes {
			return -1, fmt.Errorf("%w: topic %q: message of %d bytes exceeds the limit of %d", ErrInvalidArgument, t.name, n, b.maxBytes)
		}
	}
	e := entry{payload: m.Payload}
	if m.Key != "" || len(m.Headers) > 0 || !m.Time.IsZero() {
		e.meta = &entryMeta{key: m.Key, headers: cloneHeaders(m.Headers), time: m.Time}
	}
	if m.Time.IsZero() {
		e.ts = b.nowNanos()
	}
	return t.append(p, e), nil
}

// append is the locked part of a publish: it appends e to p and returns its
// offset, or -1 when p is full and has no fully committed record the replay
// window may give up.
func (t *topic) append(p *partition, e entry) int64 {
	p.mu.Lock()
	if t.b.window > 0 && p.log.Full() && p.low != noLow && (p.log.StartOffset() < p.low || t.faults.on(faultWindowEvictsNeeded)) {
		p.log.TrimTo(p.log.StartOffset() + 1) // the oldest fully committed record (rule 21)
	}
	off, ok := p.log.Append(e)
	if t.faults.on(faultPublishBurnsOffset) {
		off, ok = t.burnOffset(p, off, ok)
	}
	p.mu.Unlock()
	if !ok {
		return -1
	}
	t.ready.notify()
	return off
}

// Poll reserves and returns up to maxRecords records for member of group
// (SPEC rules 10, 16, 22): walking the member's partitions in ascending
// order, it takes the record at the committed offset of each partition that
// has no in-flight delivery and has a record there, or whose in-flight
// delivery has passed WithAckTimeout (delivered again). Each record's
// Attempt counts its deliveries to the group. The result is a new slice
// owned by the caller, in ascending partition order, at most one record per
// partition; it is empty (not nil) when the group or member is absent,
// nothing is eligible or everything is in flight. Poll never waits for
// records. It allocates only its result (and the copy of a record's
// headers); AppendPoll reuses a caller's buffer instead. Errors
// (ErrInvalidArgument): unknown topic, invalid identifier, maxRecords
// outside 1..64.
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
// in the broker's registries was validated when it was added.
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
	g := t.groups.Load(groupName)
	if g == nil {
		return dst, checkGroupMember(groupName, member)
	}
	return t.poll(dst, g, member, maxRecords, allPartitions)
}

// allPartitions is poll's filter for Poll: every partition the member owns.
const allPartitions = ^shard.Mask(0)

// poll is the part of Poll after the lookups: it reserves up to maxRecords
// (already checked) records of g's partitions owned by member and in only,
// appending them to dst. member is validated only when g does not know it.
func (t *topic) poll(dst []Record, g *group, member string, maxRecords int32, only shard.Mask) ([]Record, error) {
	b := t.b
	var now int64 // broker clock in Unix ns, read only with an ack timeout
	if b.ackTimeout > 0 {
		now = b.nowNanos()
	}
retry:
	a := g.assign.Load()
	mask, ok := a.masks[member]
	if !ok {
		return dst, checkID("member", member)
	}
	mask &= only
	if t.faults.on(faultPollStaleAssignment) {
		t.faultYield() // widen (f)'s window: let a rebalance run now
	}
	var locked shard.Mask
	taken := int32(0)
	for p, rest, ok := mask.First(); ok && taken < maxRecords; p, rest, ok = rest.First() {
		if t.faults.on(faultPollReleasesEach) {
			locked = t.releasePolled(locked)
		}
		part := t.parts[p]
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
		c := &part.cursors[g.slot]
		if c.inFlight && (b.ackTimeout == 0 || now-c.deliveredAt < b.ackTimeout) {
			continue
		}
		e := part.log.At(c.committed)
		if e == nil {
			continue
		}
		if dst == nil {
			dst = make([]Record, 0, min(int(maxRecords), mask.Len()))
		}
		c.inFlight = true
		c.attempts++
		c.deliveredAt = now
		dst = append(dst, e.record(t, p, c.committed, c.attempts))
		taken++
	}
	for p, rest, ok := locked.First(); ok; p, rest, ok = rest.First() {
		t.parts[p].mu.Unlock()
	}
	return dst, nil
}

// Ack acknowledges the in-flight delivery (partition, offset) of member in
// group (SPEC rule 11). It succeeds only if member currently owns partition
// and that exact record is in flight (an expired delivery not yet delivered
// again included, rule 22): the group's committed offset advances by one,
// its attempts reset, the delivery clears, and retention is applied (rules
// 13, 21). Otherwise it returns false and changes nothing. Ack allocates
// nothing. Errors (ErrInvalidArgument): unknown topic, invalid identifier,
// partition outside [0, partitionCount), negative offset.
func (b *Broker) Ack(topicName, groupName, member string, partition int32, offset int64) (bool, error) {
	return b.settle(topicName, groupName, member, partition, offset, true)
}

// Retry releases the in-flight delivery (partition, offset) of member in
// group without committing it, so the next poll delivers the same record
// again with Attempt + 1 (SPEC rules 12, 16). It has exactly Ack's checks
// and errors; on any mismatch it returns false and changes nothing. Retry
// allocates nothing.
func (b *Broker) Retry(topicName, groupName, member string, partition int32, offset int64) (bool, error) {
	return b.settle(topicName, groupName, member, partition, offset, false)
}

// settle is Ack (commit true) and Retry (commit false).
func (b *Broker) settle(topicName, groupName, member string, partition int32, offset int64, commit bool) (bool, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return false, err
	}
	part, err := t.partition(partition)
	if err != nil {
		return false, err
	}
	if offset < 0 {
		if err := checkGroupMember(groupName, member); err != nil {
			return false, err
		}
		return false, fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, offset)
	}
	g := t.groups.Load(groupName)
	if g == nil {
		return false, checkGroupMember(groupName, member)
	}
	return t.settle(g, member, part, partition, offset, commit)
}

// settle is the part of Ack and Retry after the lookups and argument checks:
// the owner check, then settleLocked under the partition lock.
func (t *topic) settle(g *group, member string, part *partition, partition int32, offset int64, commit bool) (bool, error) {
	if member == "" {
		// The one invalid id an owner check could pass: a partition with no
		// owner has owner "". Every other owner is a validated member id.
		return false, checkID("member", member)
	}
	for {
		a := g.assign.Load()
		// A deleted group's last assignment may predate AddPartitions.
		if int(partition) >= len(a.owner) || a.owner[partition] != member && !t.faults.on(faultAckSkipsOwner) {
			return false, checkID("member", member)
		}
		part.mu.Lock()
		if g.assign.Load() == a {
			break // holding the partition lock, the assignment is a's until we let go
		}
		part.mu.Unlock()
	}
	ok := t.settleLocked(g, part, offset, commit)
	part.mu.Unlock()
	if ok {
		g.ready.notify()
	}
	return ok, nil
}

// settleLocked applies an Ack or Retry to g's cursor on part, whose lock the
// caller holds, once the owner check has passed.
func (t *topic) settleLocked(g *group, part *partition, offset int64, commit bool) bool {
	c := &part.cursors[g.slot]
	if !c.inFlight || c.committed != offset {
		return false
	}
	c.inFlight = false
	if !commit {
		return true
	}
	c.committed++
	c.attempts = 0
	// Only a group that was at the partition's least committed offset can
	// move it.
	if offset == part.low {
		if t.faults.on(faultTrimIgnoresMemberless) {
			part.low = t.lowIgnoringMemberless(part, g, c.committed)
			t.trimLocked(part)
			return true
		}
		t.retainLocked(part)
	}
	return true
}

// retainLocked recomputes part.low from the cursors and applies retention
// (SPEC rules 13, 21): the log keeps at most the window's number of fully
// committed records. The caller holds part.mu.
func (t *topic) retainLocked(part *partition) {
	low := int64(noLow)
	for i := range part.cursors {
		low = min(low, part.cursors[i].committed)
	}
	part.low = low
	t.trimLocked(part)
}

// trimLocked removes the fully committed records beyond the replay window.
func (t *topic) trimLocked(part *partition) {
	if part.low != noLow {
		start := part.log.StartOffset()
		part.log.TrimTo(part.low - t.b.window)
		if part.log.StartOffset() != start {
			part.room.notify()
		}
	}
}

// newGroupLocked returns a group named name, not yet in the topic, with no
// members and no slot. The caller holds t.mu.
func (t *topic) newGroupLocked(name string, a Assignor, assignorName string) *group {
	g := &group{name: name, slot: -1, assignor: a, assignorName: assignorName}
	g.assign.Store(&assignment{owner: make([]string, t.count.Load()), masks: map[string]shard.Mask{}})
	return g
}

// addGroupAllLocked gives g a cursor slot on every partition at its log
// start offset (SPEC rule 7) and adds it to the registry. The caller holds
// t.mu and every partition lock, so the log start offsets cannot move and
// the group appears at one instant.
func (t *topic) addGroupAllLocked(g *group) {
	if n := len(t.freeSlots); n > 0 {
		g.slot = t.freeSlots[n-1]
		t.freeSlots = t.freeSlots[:n-1]
	} else {
		g.slot = t.slots
		t.slots++
	}
	for _, p := range t.parts[:t.count.Load()] {
		start := p.log.StartOffset()
		c := cursor{committed: start}
		if g.slot < len(p.cursors) {
			p.cursors[g.slot] = c
		} else {
			p.cursors = appendCursor(p.cursors, c)
		}
		p.low = min(p.low, start)
	}
	t.groups.Store(g.name, g)
}

// plan computes g's next assignment for members over partitions partitions
// with assignor a (named name), from g's current owners (SPEC rule 18). It changes
// nothing; the caller holds t.mu, so the current owners are stable. Errors:
// ErrInvalidAssignment from a user's assignor.
func (t *topic) plan(g *group, members []string, a Assignor, name string, partitions int) (*assignment, error) {
	next := &assignment{owner: make([]string, partitions), masks: make(map[string]shard.Mask, len(members))}
	for _, m := range members {
		next.masks[m] = 0
	}
	if len(members) == 0 {
		return next, nil
	}
	previous := make([]string, partitions)
	copy(previous, g.assign.Load().owner)
	owner, err := assign.Run(a, members, previous)
	if err != nil {
		return nil, fmt.Errorf("topic %q: group %q: assignor %q: %w", t.name, g.name, name, err)
	}
	for p, m := range owner {
		next.owner[p] = m
		next.masks[m] = next.masks[m].With(int32(p))
	}
	return next, nil
}

// applyAllLocked makes next g's assignment (SPEC rule 9): a partition whose
// owner changes loses its in-flight delivery; committed offsets and attempts
// are kept. The caller holds t.mu and every partition lock, so no Poll, Ack
// or Retry of the topic is in progress and the whole assignment changes at
// one instant.
func (t *topic) applyAllLocked(g *group, next *assignment) {
	old := g.assign.Load()
	for p := range next.owner {
		if p < len(old.owner) && old.owner[p] == next.owner[p] {
			continue
		}
		c := &t.parts[p].cursors[g.slot]
		if !t.faults.on(faultRebalanceKeepsInFlight) {
			c.inFlight = false
		}
		if t.faults.on(faultRebalanceResetsAttempts) {
			c.attempts = 0
		}
	}
	g.assign.Store(next)
}

// lockAll locks every partition of t in ascending order (the lock order)
// and returns how many it locked, for unlockAll. The caller holds t.mu, so
// the partition count cannot change meanwhile.
func (t *topic) lockAll() int {
	n := int(t.count.Load())
	for i, p := range t.parts[:n] {
		if t.faults.on(faultRebalanceSkipsLock) && i == n-1 && i > 0 {
			continue
		}
		p.mu.Lock()
	}
	return n
}

// unlockAll unlocks what lockAll locked; n is lockAll's result.
func (t *topic) unlockAll(n int) {
	for i, p := range t.parts[:n] {
		if t.faults.on(faultRebalanceSkipsLock) && i == n-1 && i > 0 {
			continue
		}
		p.mu.Unlock()
	}
}

// appendCursor appends c to cs, growing the backing array geometrically in
// whole padding units (cursorsPerLine) so that it shares no cache line with
// another partition's cursors and adding the N-th group costs amortised
// O(1) per partition.
func appendCursor(cs []cursor, c cursor) []cursor {
	if len(cs) == cap(cs) {
		want := max(2*cap(cs), cursorsPerLine)
		grown := make([]cursor, len(cs), (want+cursorsPerLine-1)/cursorsPerLine*cursorsPerLine)
		copy(grown, cs)
		cs = grown
	}
	return append(cs, c)
}

// lookup returns the named topic or ErrInvalidArgument.
func (b *Broker) lookup(name string) (*topic, error) {
	if t := b.topics.Load(name); t != nil {
		return t, nil // a stored name was validated by Create
	}
	if b.capacity == 0 {
		return nil, errZeroBroker
	}
	if err := checkID("topic", name); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: unknown topic %q", ErrInvalidArgument, name)
}

// partition returns partition p, or ErrInvalidArgument unless p is in
// [0, partitionCount).
func (t *topic) partition(p int32) (*partition, error) {
	if n := t.count.Load(); p < 0 || p >= n {
		return nil, fmt.Errorf("%w: topic %q: partition %d outside [0,%d)", ErrInvalidArgument, t.name, p, n)
	}
	return t.parts[p], nil
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
