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
	"github.com/f91dcac0/tributary/internal/contract"
	"github.com/f91dcac0/tributary/ringlog"
	"github.com/f91dcac0/tributary/shard"
)

// Limits of the core contract (SPEC rules 1–4).
const (
	MinCapacity = 1    // smallest capacityPerPartition New accepts, in records
	MaxCapacity = 1000 // largest capacityPerPartition New accepts, in records (SPEC rule 1)
	// MaxExtendedCapacity is the largest capacityPerPartition New accepts
	// with WithExtendedCapacity, in records: 16,777,216, the typed
	// library's bound (docs/contract.md).
	MaxExtendedCapacity = 1 << 24
	MaxPartitionCount   = 64 // largest partitionCount Create and AddPartitions accept (smallest: 1; internal/contract.MaxPartitionCount)
	MaxPollRecords      = 64 // largest maxRecords Poll accepts (smallest: 1)
	MaxIDLength         = 64 // longest topic, group or member identifier, in bytes (internal/contract.MaxIDLength)
)

// ErrInvalidArgument is returned, wrapped with context, by every call that
// breaks SPEC rules 1–4 or 15–20: a capacity outside 1..1000 (1..16,777,216
// with WithExtendedCapacity), a partition
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

// noLow is partition.low when the topic has no group: it never lowers a
// minimum.
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
	session    int64            // WithSessionTimeout, in nanoseconds; 0: members never expire
	wall       wallClock        // the default clock
	coarse     coarseClock      // the default clock's record times
	hooks      hooks            // empty unless built with tributary_faults (faults.go)

	// createMu serialises Create: it guards the write side of topics.
	createMu sync.Mutex
	// topics is the topic registry; lookups take no lock.
	topics registry[topic]
}

// topic is one topic: its partitions and its consumer groups.
type topic struct {
	name  string
	b     *Broker
	hooks hooks // the Broker's at Create; empty in a normal build

	// count is the number of partitions, 1..64. It grows only in
	// AddPartitions, under mu, after the new parts entries are written and
	// every group's new assignment is stored; readers load it, then read
	// parts[p] for p < count.
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
	// snapshots (package doc).
	mu     sync.Mutex
	groups registry[group]
	// slots is the length of every partition's cursors; freeSlots lists the
	// slots of deleted groups, reused by the next group created.
	slots     int
	freeSlots []int

	// ready wakes consumers waiting for records: every successful publish
	// and AddPartitions notify it (signal.go). It needs no lock.
	ready signal

	// deadline is, with a session timeout, a lower bound of the instant
	// (broker clock, Unix ns) at which any member of the topic's groups
	// expires: every call's expiry check is one load of it (SPEC rule 24).
	// Written only under mu: lowered by a Join that adds a member, set
	// exactly by every expiry pass (expireLocked). A member's refresh only
	// raises its own expiry, so it keeps the bound without writing here.
	// noDeadline when no member can expire.
	deadline atomic.Int64
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

// assignment is one immutable generation of a group's assignment, with the
// group's cursors.
type assignment struct {
	owner   []string              // owner[p]: member owning partition p, "" if none; len = partition count when made
	masks   map[string]shard.Mask // every member → its partitions (possibly none)
	cursors []*cursor             // cursors[p]: the group's cursor on partition p; len(owner) entries, shared by generations
	// sessions holds every member's session (SPEC rule 24), shared by
	// generations while the member stays; nil without a session timeout.
	sessions map[string]*session
}

// cursorState is the part of a cursor its fields need; cursor pads it.
type cursorState struct {
	// mu guards deliveredAt, attempts and inFlight, and every write of
	// state. It is the lock of one (group, partition) pair: Poll, Ack and
	// Retry of different groups never share one.
	mu sync.Mutex
	// state is committed<<stateShift | sole | pinned. committed is the
	// next offset the group will be given. pinned is set by retention
	// (retainLocked), under the partition lock, on a cursor at the
	// partition's least committed offset; while it is set and sole is not,
	// committed changes only under the partition lock too. sole is set,
	// with pinned, under the partition lock on the only cursor of a
	// partition without a replay window (partitionState.sole): its commits
	// move the partition's least committed offset with a compare-and-swap
	// under mu alone, and every holder of the partition lock catches up
	// (catchUpLocked). A cursor's state is read without mu by its
	// partition's retention and written atomically for that reason
	// (package doc: the pin).
	state       atomic.Int64
	deliveredAt int64 // broker clock, Unix ns, of the in-flight delivery (with an ack timeout)
	attempts    int32 // deliveries of the record at committed so far (SPEC rule 16)
	inFlight    bool  // the record at committed is reserved to the owner
}

// cursor is one group's position on one partition, padded to whole padding
// units (shard.CacheLineSize, two 64-byte lines) so that two groups'
// cursors, locked and written by different cores, never share a line or a
// prefetched pair.
type cursor struct {
	cursorState
	_ [(shard.CacheLineSize - unsafe.Sizeof(cursorState{})%shard.CacheLineSize) % shard.CacheLineSize]byte
}

// pinned and sole are the flag bits of cursorState.state; stateShift is
// the shift of its committed offset.
const (
	pinned     = 1
	sole       = 2
	stateShift = 2
)

// place puts a cursor that nobody else can reach yet, or whose lock and
// partition lock the caller holds, at committed, pinned or not.
func (c *cursor) place(committed int64, pin bool) {
	s := committed << stateShift
	if pin {
		s |= pinned
	}
	c.state.Store(s)
}

// committed returns the cursor's committed offset. Any goroutine may call
// it; the caller holding c.mu or the partition lock of an unpinned cursor
// gets a value that cannot change under it.
func (c *cursor) committed() int64 { return c.state.Load() >> stateShift }

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
	if e.meta == nil {
		return Record{Topic: t.name, Partition: p, Offset: off, Payload: e.payload, Time: time.Unix(0, e.ts), Attempt: attempt}
	}
	var r Record
	e.recordInto(&r, t, p, off, attempt)
	return r
}

// recordInto is record of an entry with meta (e.meta != nil) writing into
// *r, so that a poll fills its result's element in place instead of
// copying a Record through the stack. reserve fills the record of a
// payload-only entry itself, field by field.
func (e *entry) recordInto(r *Record, t *topic, p int32, off int64, attempt int32) {
	m := e.meta
	tm := m.time
	if tm.IsZero() {
		tm = time.Unix(0, e.ts)
	}
	*r = Record{Topic: t.name, Partition: p, Offset: off, Payload: e.payload, Key: m.key, Headers: cloneHeaders(m.headers), Time: tm, Attempt: attempt}
}

// partitionState is a partition's log and retention state.
type partitionState struct {
	// mu, the partition lock, guards log, cursors and low, and every write
	// of a pinned cursor's state. Publish takes it; Poll never does; Ack
	// takes it only for a pinned cursor (package doc).
	mu  sync.Mutex
	log ringlog.Log[entry]
	// cursors[slot] is the cursor of the group with that slot; nil for a
	// free slot.
	cursors []*cursor
	// low is the least committed offset of the topic's groups on this
	// partition, noLow when it has none. Records below low are fully
	// committed; retention keeps at most Broker.window of them. Whenever mu
	// is free, every cursor at low is pinned, and atLow counts them (an
	// int32, with stamps, so that the state fits one 128-byte padding unit).
	low   int64
	atLow int32
	// stamps counts the appends stamped by the coarse clock; every
	// coarseExactEvery-th reads the clock exactly (coarseClock).
	stamps uint32
	// sole is the partition's only cursor while it commits without the
	// partition lock (cursorState.state's sole bit, set on it exactly
	// while sole points at it); nil otherwise. Set, with the bit, only by
	// an Ack under mu on a partition of a ring log (capacity up to
	// ringlog.PageLen) without a replay window whose cursor is its only
	// one; cleared, with the bit, by unsoleLocked. While it is set, low
	// and the log's start lag the cursor's committed offset until a holder
	// of mu catches up (catchUpLocked).
	sole *cursor
	// room wakes producers waiting for space: notified, under mu, whenever
	// retention removes records (trimLocked). It needs no lock of its own.
	room signal
}

// partition pads partitionState to whole cache lines, and keeps the log end
// offset, which every Poll reads, on a line of its own: so that two
// partitions' locks never share a line and a poll's read of the end does
// not contend with the partition lock.
type partition struct {
	partitionState
	_ [(shard.CacheLineSize - unsafe.Sizeof(partitionState{})%shard.CacheLineSize) % shard.CacheLineSize]byte
	// end is the log end offset, stored under mu after each append. A poll
	// reads it without the partition lock: the entries below it are
	// written (package doc).
	end atomic.Int64
	_   [shard.CacheLineSize - 8]byte
}

// New returns an empty broker whose partitions each retain at most
// capacityPerPartition records. capacityPerPartition must be in 1..1000
// (SPEC rule 1), or in 1..16,777,216 with WithExtendedCapacity (SPEC
// section 3.5), and each option in its range (WithReplayWindow, WithClock,
// WithAckTimeout, WithMaxMessageBytes); otherwise New returns
// ErrInvalidArgument and a nil Broker. A partition's memory follows what
// it retains: up to 1,024 records of capacity it holds a ring of that many
// slots from its creation, beyond that pages of 1,024 slots allocated as
// records arrive and given up as retention removes them (package ringlog).
func New(capacityPerPartition int32, opts ...Option) (*Broker, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidArgument)
		}
		o(&cfg)
	}
	if maxCap := cfg.maxCapacity(); capacityPerPartition < MinCapacity || capacityPerPartition > maxCap {
		hint := ""
		if maxCap == MaxCapacity && capacityPerPartition > MaxCapacity && capacityPerPartition <= MaxExtendedCapacity {
			hint = " (WithExtendedCapacity allows up to 16777216)"
		}
		return nil, fmt.Errorf("%w: capacity %d outside [%d,%d]%s", ErrInvalidArgument, capacityPerPartition, MinCapacity, maxCap, hint)
	}
	if err := cfg.check(capacityPerPartition); err != nil {
		return nil, err
	}
	b := &Broker{
		capacity:   capacityPerPartition,
		window:     int64(cfg.window),
		clock:      cfg.clock,
		ackTimeout: int64(cfg.ackTimeout),
		maxBytes:   cfg.maxBytes,
		session:    int64(cfg.session),
	}
	b.coarse.run = func() { b.coarse.refresh(&b.wall) }
	b.coarse.timer = time.NewTimer(time.Hour)
	b.coarse.timer.Stop()
	return b, nil
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

// coarseNow is the record time of a publish in the common case, a running
// default coarse clock (coarseClock.read's first case), small enough to be
// inlined: ok false when the broker has WithClock or its coarse clock is
// not running, and then stampNanos reads the clock.
func (b *Broker) coarseNow() (ns int64, ok bool) {
	if b.clock == nil && b.coarse.state.Load() == coarseUsed {
		return b.coarse.now.Load(), true
	}
	return 0, false
}

// stampNanos reads the broker clock for a record's time (SPEC rule 15), in
// Unix nanoseconds: WithClock's, or the default coarseClock, and says
// which (coarse). A call that also needs its instant for rule 24 reads
// nowNanos once for both.
func (b *Broker) stampNanos() (ns int64, coarse bool) {
	if b.clock != nil {
		return b.clock().UnixNano(), false
	}
	return b.coarse.read(&b.wall), true
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
	if err := contract.CheckCreate(ErrInvalidArgument, topicName, partitionCount); err != nil {
		return false, err
	}
	b.createMu.Lock()
	defer b.createMu.Unlock()
	if b.topics.Load(topicName) != nil {
		return false, nil
	}
	t := &topic{name: topicName, b: b, hooks: b.hooks}
	t.deadline.Store(noDeadline)
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
	t, now, err := b.lockMember(topicName, groupName, member)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return t.joinLocked(groupName, member, now)
}

// joinLocked is Join at now after the validation and the expiry: it adds
// member (last seen at now) to the group, creating the group if absent,
// or refreshes it if it is a member. The caller holds t.mu.
func (t *topic) joinLocked(groupName, member string, now int64) ([]int32, error) {
	g := t.groups.Load(groupName)
	created := g == nil
	if created {
		g = t.newGroupLocked(groupName, RoundRobin, RoundRobin.Name())
	}
	if i, found := slices.BinarySearch(g.members, member); !found {
		members := slices.Insert(slices.Clone(g.members), i, member)
		next, err := t.plan(g, members, g.assignor, g.assignorName, g.assign.Load().cursors, now)
		if err != nil {
			return nil, err
		}
		g.members = members
		if t.b.session > 0 {
			// The new member expires at now + d at the earliest: the
			// topic's deadline must not be later, before anyone can see it.
			t.deadline.Store(min(t.deadline.Load(), t.hooks.joinDeadline(deadlineOf(now, t.b.session))))
		}
		if created {
			g.assign.Store(next) // nobody can reach g before addGroup
			t.addGroup(g, StartEarliest)
		} else {
			t.rebalance(g, next)
		}
		g.ready.notify()
	} else {
		t.refreshLocked(g.assign.Load(), member, now)
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
	t, g, now, err := b.lockMemberGroup(topicName, groupName, member)
	if g == nil {
		return false, err
	}
	defer t.mu.Unlock()
	i, found := slices.BinarySearch(g.members, member)
	if !found {
		return false, nil
	}
	members := slices.Delete(slices.Clone(g.members), i, i+1)
	next, err := t.plan(g, members, g.assignor, g.assignorName, g.assign.Load().cursors, now)
	if err != nil {
		return false, err
	}
	g.members = members
	t.rebalance(g, next)
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
	return t.publish(partition, payload)
}

// publish is Publish on t.
func (t *topic) publish(partition int32, payload string) (int64, error) {
	b := t.b
	p, err := t.partition(partition)
	if err != nil {
		return -1, err
	}
	if b.maxBytes > 0 && len(payload) > b.maxBytes {
		return -1, fmt.Errorf("%w: topic %q: message of %d bytes exceeds the limit of %d", ErrInvalidArgument, t.name, len(payload), b.maxBytes)
	}
	e := entry{payload: payload}
	var coarse bool
	if e.ts, coarse = b.coarseNow(); !coarse {
		e.ts, coarse = b.stampNanos()
	}
	if b.session > 0 {
		t.expireBy(e.ts, coarse) // one load of the topic's deadline unless it has come (rule 24)
	}
	return t.append(p, &e, coarse), nil
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
	off, _, err := t.publishMessage(partition, &m)
	return off, err
}

// publishMessage is PublishMessage on t; it also returns the record's
// broker-clock stamp (Unix ns) when m.Time is zero, else 0.
func (t *topic) publishMessage(partition int32, m *Message) (int64, int64, error) {
	b := t.b
	p, n := t.partAt(partition)
	if p == nil {
		return -1, 0, t.partitionError(partition, n)
	}
	if b.maxBytes > 0 {
		if n := messageSize(m); n > b.maxBytes {
			return -1, 0, fmt.Errorf("%w: topic %q: message of %d bytes exceeds the limit of %d", ErrInvalidArgument, t.name, n, b.maxBytes)
		}
	}
	e := entry{payload: m.Payload}
	if m.Key != "" || len(m.Headers) > 0 || !m.Time.IsZero() {
		e.meta = &entryMeta{key: m.Key, headers: cloneHeaders(m.Headers), time: m.Time}
	}
	coarse := false
	if m.Time.IsZero() || b.session > 0 {
		// One reading: the record's time and the expiry's instant.
		var now int64
		if now, coarse = b.coarseNow(); !coarse {
			now, coarse = b.stampNanos()
		}
		if m.Time.IsZero() {
			e.ts = now
		} else {
			coarse = false // e.ts is not a clock reading: nothing to correct
		}
		if b.session > 0 {
			t.expireBy(now, coarse)
		}
	}
	off := t.append(p, &e, coarse)
	return off, e.ts, nil
}

// append is the locked part of a publish: it appends *e to p and returns
// its offset, or -1 when p is full and has no fully committed record the
// replay window may give up. The new log end offset is published to polls
// (p.end) before the partition lock is let go. coarse says e.ts is a
// reading of the coarse clock; every coarseExactEvery-th such append to p
// replaces it with an exact reading, which bounds the coarse clock's lag
// while the refresher gets no CPU.
func (t *topic) append(p *partition, e *entry, coarse bool) int64 {
	p.mu.Lock()
	if c := p.sole; c != nil {
		t.catchUpLocked(p, c)
	}
	if coarse {
		if p.stamps++; p.stamps%coarseExactEvery == 0 {
			e.ts = t.b.coarse.exact(&t.b.wall)
		}
	}
	if p.log.Full() && t.hooks.evictOnPublish(t.evictableLocked(p), t, p) {
		p.log.TrimTo(p.log.StartOffset() + 1) // the oldest fully committed record (rule 21)
	}
	off, ok := p.log.Append(*e)
	if ok {
		p.end.Store(off + 1)
	}
	off, ok = t.hooks.appended(off, ok, p)
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
	return contract.Polled(b.appendPoll(nil, topicName, groupName, member, maxRecords))
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
		return dst, t.absentGroup(groupName, member)
	}
	return t.poll(dst, g, member, nil, maxRecords, allPartitions, 0, false)
}

// allPartitions is poll's filter for Poll: every partition the member owns.
const allPartitions = ^shard.Mask(0)

// bit is shard.Mask(0).With(p) for a p known to be in [0, 64), such as one
// from Mask.First: it inlines, and has no range check to panic on.
func bit(p int32) shard.Mask { return 1 << (uint(p) & 63) }

// poll is the part of Poll after the lookups: it reserves up to maxRecords
// (already checked) records of g's partitions owned by member and in only,
// appending them to dst. member is validated only when g does not know it.
// h, when not nil, is member's handle, whose cache spares the lookup of the
// member's partitions. held is false for a call of its own, which reads the
// broker clock (in Unix ns) here into now when it needs it; true for
// pollHeld, which holds t.mu and has done the expiry at now.
//
// It locks the group's cursors of the member's partitions in ascending
// order and never a partition lock. What it sees of each partition's log is
// the log end offset, an atomic that only grows; the package doc's
// linearization points say why the checks below make the whole poll one
// atomic step.
//
// With a session timeout (SPEC rule 24) the member's call first checks the
// topic's deadline, expiring at now if it has come, and refreshes the
// member's session while it holds its cursors and has seen its assignment
// current, so that the refresh and the poll are of one instant. A member
// that locks no cursor (it owns none of the partitions asked for), or whose
// session an expiry has claimed meanwhile, polls again under t.mu. Without
// one, the path has no expiry and no refresh: only the test of b.session.
func (t *topic) poll(dst []Record, g *group, member string, h *MemberHandle, maxRecords int32, only shard.Mask, now int64, held bool) ([]Record, error) {
	b := t.b
	if !held && (b.session > 0 || b.ackTimeout > 0) {
		now = b.nowNanos() // read only with an ack or session timeout
	}
	checked := held // the expiry at now is done
retry:
	a := g.assign.Load()
	var mask shard.Mask
	var sess *session
	var ok bool
	if b.session == 0 {
		if h != nil {
			mask, ok = h.maskIn(a)
		} else {
			mask, ok = a.masks[member]
		}
		if !ok {
			return dst, checkID("member", member)
		}
	} else {
		var expired bool
		var err error
		mask, sess, ok, expired, err = t.memberAt(a, member, h, now, &checked)
		if err != nil {
			return dst, err
		}
		if expired {
			goto retry
		}
		if !ok {
			return dst, nil
		}
	}
	mask &= only
	// locked: cursors held; picked: partitions with a record to reserve;
	// empty: partitions seen with nothing at the committed offset; last:
	// the partition inspected last.
	var locked, picked, empty shard.Mask
	last := int32(-1)
	taken := int32(0)
	for p, rest, ok := mask.First(); ok && taken < maxRecords; p, rest, ok = rest.First() {
		dst, locked, picked = t.hooks.inspecting(dst, locked, picked, t, a, now, maxRecords)
		c := a.cursors[p]
		c.mu.Lock()
		locked |= bit(p)
		last = p
		if c.inFlight && (b.ackTimeout == 0 || now-c.deliveredAt < b.ackTimeout) {
			continue
		}
		if c.committed() < t.parts[p].end.Load() {
			picked |= bit(p)
			taken++
		} else {
			empty |= bit(p)
		}
	}
	// The assignment must still be current, and made for the current
	// partition count (AddPartitions stores every group's new assignment
	// before the count).
	if t.hooks.stale(g.assign.Load() != a || int(t.count.Load()) != len(a.owner)) {
		unlockCursors(a, locked)
		goto retry
	}
	// A partition seen empty before the last one inspected must still be
	// empty, so that the instant after the last inspection is one at which
	// the poll saw every partition as it was.
	if t.hooks.recheck(empty != 0) {
		recheck := empty &^ bit(last) // empty ≠ 0: some partition was inspected
		for p, rest, ok := recheck.First(); ok; p, rest, ok = rest.First() {
			if t.parts[p].end.Load() > a.cursors[p].committed() {
				unlockCursors(a, locked)
				goto retry
			}
		}
	}
	if sess != nil {
		switch {
		case held:
			t.refreshLocked(a, member, now)
		case locked == 0 || !sess.refresh(now):
			// No cursor orders this refresh with Describe, or an expiry
			// has claimed the member and waits for these cursors: let go,
			// and poll again under t.mu, after that expiry.
			unlockCursors(a, locked)
			return t.pollHeld(dst, g, member, h, maxRecords, only, now)
		}
	}
	dst = t.reserve(dst, a, t.hooks.reserving(picked), now, maxRecords)
	for p, rest, ok := locked.First(); ok; p, rest, ok = rest.First() {
		a.cursors[p].mu.Unlock() // unlockCursors, inlined
	}
	return dst, nil
}

// memberAt is the first step of poll and settleAt on assignment a, with
// a session timeout, at now: member's partitions and session in a (from
// h's cache when h is not nil), ok false when it is not a member of a, and
// the ErrInvalidArgument error of an invalid member id. Unless *checked,
// it then does the call's expiry (SPEC rule 24): it sets *checked and,
// when the topic's deadline has come, expires at now and returns expired
// true, for the caller to read the assignment again.
func (t *topic) memberAt(a *assignment, member string, h *MemberHandle, now int64, checked *bool) (mask shard.Mask, sess *session, ok, expired bool, err error) {
	if h != nil {
		mask, sess, ok = h.entryIn(a)
	} else {
		mask, ok = a.masks[member] // with a session timeout, a.sessions has the same keys
		sess = a.sessions[member]
	}
	if !ok {
		if err := checkID("member", member); err != nil {
			return 0, nil, false, false, err
		}
	}
	if !*checked {
		*checked = true
		if now >= t.deadline.Load() {
			t.expire(now)
			return mask, sess, ok, true, nil
		}
	}
	return mask, sess, ok, false, nil
}

// pollHeld is poll under t.mu: the slow path of a poll with a session
// timeout. The call's expiry at now is done already (poll checks the
// deadline before it locks anything), and an expiry that
// claimed the member has stored its rebalance by the time t.mu is taken.
func (t *topic) pollHeld(dst []Record, g *group, member string, h *MemberHandle, maxRecords int32, only shard.Mask, now int64) ([]Record, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g = t.current(g, h); g == nil {
		return dst, nil
	}
	return t.poll(dst, g, member, h, maxRecords, only, now, true)
}

// current returns g or, if it was deleted, the live group of its name
// (through h's cache when h is not nil); nil when there is none. The
// caller holds t.mu.
func (t *topic) current(g *group, h *MemberHandle) *group {
	if !g.deleted.Load() {
		return g
	}
	if h != nil {
		return h.live()
	}
	return t.groups.Load(g.name)
}

// reserve makes the record at the committed offset of each partition in
// picked an in-flight delivery at now and appends it to dst; with dst nil
// it allocates room for up to maxRecords. The caller holds the cursors of
// picked and has seen a record at each committed offset: the record stays
// retained, and its slot unwritten, while the group's cursor holds it back
// (package doc), so it is read without the partition lock.
func (t *topic) reserve(dst []Record, a *assignment, picked shard.Mask, now int64, maxRecords int32) []Record {
	if picked == 0 {
		return dst
	}
	if dst == nil {
		dst = make([]Record, 0, min(int(maxRecords), picked.Len()))
	}
	for p, rest, ok := picked.First(); ok; p, rest, ok = rest.First() {
		c := a.cursors[p]
		off := c.committed()
		e, ok := t.hooks.entry(t.parts[p].log.Read(off), t, p, off)
		if !ok {
			continue
		}
		c.inFlight = true
		c.attempts++
		c.deliveredAt = now
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, 1)
		}
		dst = dst[:len(dst)+1]
		r := &dst[len(dst)-1]
		if e.meta != nil {
			e.recordInto(r, t, p, off, c.attempts)
			continue
		}
		// A payload-only entry's record, field by field: a composite
		// literal is built on the stack and then copied into *r, 120 bytes
		// zeroed and moved twice. As a function these lines cost 87, over
		// the compiler's inlining budget of 80.
		r.Topic = t.name
		r.Partition = p
		r.Offset = off
		r.Payload = e.payload
		r.Key = ""
		r.Headers = nil
		r.Time = time.Unix(0, e.ts)
		r.Attempt = c.attempts
	}
	return dst
}

// unlockCursors unlocks a's cursors of the partitions in locked.
func unlockCursors(a *assignment, locked shard.Mask) {
	for p, rest, ok := locked.First(); ok; p, rest, ok = rest.First() {
		a.cursors[p].mu.Unlock()
	}
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
		return false, t.absentGroup(groupName, member)
	}
	return t.settle(g, member, nil, part, partition, offset, commit)
}

// settle is the part of Ack and Retry after the lookups and argument checks:
// the owner check, then settleLocked under the group's cursor lock.
func (t *topic) settle(g *group, member string, h *MemberHandle, part *partition, partition int32, offset int64, commit bool) (bool, error) {
	if member == "" {
		// The one invalid id an owner check could pass: a partition with no
		// owner has owner "". Every other owner is a validated member id.
		return false, checkID("member", member)
	}
	if t.b.session > 0 {
		return t.settleAt(g, member, h, part, partition, offset, commit, t.b.nowNanos(), false)
	}
	var c *cursor
	for {
		a := g.assign.Load()
		// A deleted group's last assignment may predate AddPartitions.
		if int(partition) >= len(a.owner) || t.hooks.notOwner(a.owner[partition] != member) {
			return false, checkID("member", member)
		}
		c = a.cursors[partition]
		c.mu.Lock()
		if g.assign.Load() == a {
			break // a rebalance moving this partition needs c.mu: the owner stands until we let go
		}
		c.mu.Unlock()
	}
	ok := t.settleLocked(g, c, part, offset, commit)
	c.mu.Unlock()
	if ok {
		g.ready.notify()
	}
	return ok, nil
}

// settleAt is settle with a session timeout, at now, the call's one
// reading of the broker clock (SPEC rule 24); held says the caller holds
// t.mu and the expiry at now is done (settleHeld). The expiry check comes
// once the member id is known valid; then, holding the partition's cursor
// with the assignment seen current, it refreshes the member's session and
// only then checks ownership, so that an Ack or Retry of a member that
// returns false refreshes it too, at the instant it answers. A claimed
// session sends it to t.mu, as poll does.
func (t *topic) settleAt(g *group, member string, h *MemberHandle, part *partition, partition int32, offset int64, commit bool, now int64, held bool) (bool, error) {
	checked := held
	var a *assignment
	var c *cursor
	var sess *session
	for {
		a = g.assign.Load()
		var ok, expired bool
		var err error
		_, sess, ok, expired, err = t.memberAt(a, member, h, now, &checked)
		if err != nil {
			return false, err
		}
		if expired {
			continue
		}
		// A deleted group's last assignment, which has no members, may
		// predate AddPartitions.
		if !ok || int(partition) >= len(a.owner) {
			return false, nil
		}
		c = a.cursors[partition]
		c.mu.Lock()
		if g.assign.Load() == a {
			break // a rebalance moving this partition, or an expiry of the member, needs c.mu or t.mu
		}
		c.mu.Unlock()
	}
	if t.hooks.settleRefreshes() {
		switch {
		case held:
			t.refreshLocked(a, member, now)
		case !sess.refresh(now):
			c.mu.Unlock()
			return t.settleHeld(g, member, h, part, partition, offset, commit, now)
		}
	}
	if t.hooks.notOwner(a.owner[partition] != member) {
		c.mu.Unlock()
		return false, nil
	}
	ok := t.settleLocked(g, c, part, offset, commit)
	c.mu.Unlock()
	if ok {
		g.ready.notify()
	}
	return ok, nil
}

// settleHeld is settleAt under t.mu, as pollHeld.
func (t *topic) settleHeld(g *group, member string, h *MemberHandle, part *partition, partition int32, offset int64, commit bool, now int64) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g = t.current(g, h); g == nil {
		return false, nil
	}
	return t.settleAt(g, member, h, part, partition, offset, commit, now, true)
}

// settleLocked applies an Ack or Retry to g's cursor c on part, whose lock
// c.mu the caller holds, once the owner check has passed.
//
// A commit of an unpinned cursor changes only the cursor: the partition's
// least committed offset, and so retention, cannot move (package doc). A
// pinned cursor commits under the partition lock and applies retention.
func (t *topic) settleLocked(g *group, c *cursor, part *partition, offset int64, commit bool) bool {
	s := c.state.Load()
	if !c.inFlight || s>>stateShift != offset {
		return false
	}
	c.inFlight = false
	if !commit {
		return true
	}
	c.attempts = 0
	next := (offset + 1) << stateShift
	if s&sole != 0 {
		// The partition's only cursor, no replay window: the commit moves
		// low to offset+1 and (logically) removes the record at offset,
		// which the next holder of the partition lock catches up with.
		// Unsoling (under the partition lock) makes the swap fail.
		if c.state.CompareAndSwap(s, next|sole|pinned) {
			part.room.notify()
			return true
		}
		s = c.state.Load()
	}
	if t.hooks.unpinned(s&pinned == 0) {
		// Retention may pin c meanwhile, under the partition lock: then
		// the swap fails and the commit takes the partition lock below.
		if c.state.CompareAndSwap(s, next) {
			return true
		}
	}
	part.mu.Lock()
	t.unsoleLocked(part)
	t.hooks.commitPinned(t, g, c, part, offset)
	part.mu.Unlock()
	return true
}

// commitPinnedLocked commits c, g's cursor on part at offset, whose lock
// and part.mu the caller holds, and applies retention: c is pinned, or
// was until a stale pin was found, so low may move.
func (t *topic) commitPinnedLocked(c *cursor, part *partition, offset int64) {
	next := (offset + 1) << stateShift
	switch {
	case offset != part.low:
		c.state.Store(next) // a stale pin (package doc): c was above low, so low stays
	case part.atLow > 1:
		c.state.Store(next)
		part.atLow-- // another cursor is still at low: low stays
	default:
		// c was the last at low: low moves, to offset+1 if no other cursor
		// is that low (one group: always), which c keeps pinned.
		if other := t.leastOther(part, c); other > offset+1 {
			if other == noLow && t.b.window == 0 && t.b.capacity <= ringlog.PageLen {
				// c is the partition's only cursor, and the log a ring
				// (a paged log gives up pages only as it trims): its
				// next commits need no partition lock.
				c.state.Store(next | sole | pinned)
				part.sole = c
			} else {
				c.state.Store(next | pinned)
			}
			part.low, part.atLow = offset+1, 1
			t.trimLocked(part)
		} else {
			c.state.Store(next) // unpinned: retention pins it if it is among the least
			t.retainLocked(part)
		}
	}
}

// leastOther returns the least committed offset on part of the cursors other
// than c (of all of them with c nil; noLow when there are none). The caller holds part.mu; a result
// above some offset stays above it, as unpinned cursors only grow.
func (t *topic) leastOther(part *partition, c *cursor) int64 {
	low := int64(noLow)
	for _, o := range part.cursors {
		if o != nil && o != c {
			low = min(low, o.committed())
		}
	}
	return low
}

// retainLocked recomputes part.low, pins every cursor at it and applies
// retention (SPEC rules 13, 21): the log keeps at most the window's number
// of fully committed records. The caller holds part.mu.
//
// The cursors are read without their locks: a pinned one cannot move (its
// commits need part.mu), an unpinned one only grows. The second pass pins
// the cursors still at the least offset seen; if none is (each moved on
// meanwhile), it looks again. Once one cursor at low is pinned, low is the
// least committed offset until part.mu is let go.
func (t *topic) retainLocked(part *partition) {
	for {
		low := t.leastOther(part, nil)
		part.low, part.atLow = low, 0
		if low == noLow {
			break
		}
		atLow := int32(0)
		for _, c := range part.cursors {
			if c == nil {
				continue
			}
			for {
				s := c.state.Load()
				if s>>stateShift != low {
					break
				}
				if s&pinned != 0 || c.state.CompareAndSwap(s, s|pinned) {
					atLow++
					break
				}
			}
		}
		if atLow > 0 {
			part.atLow = atLow
			break
		}
	}
	t.trimLocked(part)
}

// catchUpLocked brings part.low and the log's start up to the committed
// offset of part's sole cursor, which its Acks move without the partition
// lock: the records below it are fully committed and, with no replay
// window, removed. The Acks notified room themselves. The caller holds
// part.mu; c is part.sole, or was until the caller cleared it.
func (t *topic) catchUpLocked(part *partition, c *cursor) {
	if low := c.committed(); low != part.low {
		part.low = low
		part.log.TrimTo(t.hooks.caughtUpTo(low))
	}
}

// unsoleLocked makes part's sole cursor, if any, commit under the
// partition lock again: it clears the cursor's sole bit (an Ack racing it
// then fails its compare-and-swap and takes the partition lock) and
// catches up with the cursor's last lock-free commit. Every holder of
// part.mu that changes part's cursors, pins or low (a slow Ack, Seek, and
// through lockAll CreateGroup, DeleteGroup and a creating Join) calls it
// first; a publish, Describe and logOffsets only catch up. The caller
// holds part.mu.
func (t *topic) unsoleLocked(part *partition) {
	c := part.sole
	if c == nil {
		return
	}
	for {
		s := c.state.Load()
		if c.state.CompareAndSwap(s, s&^sole) {
			break
		}
	}
	part.sole = nil
	t.catchUpLocked(part, c)
}

// trimLocked removes the fully committed records beyond the replay window
// and notifies room when a publish to the partition, had it been refused
// as full, could now succeed: when it removed records, or when the log is
// full and its oldest record is fully committed, so that a publish gives
// it up (rule 21). The second happens without any removal when the window
// covers the newly committed records (a window equal to the capacity
// never trims a full log), and every raise of low comes here. The caller
// holds part.mu.
func (t *topic) trimLocked(part *partition) {
	if part.low == noLow {
		return
	}
	start := part.log.StartOffset()
	part.log.TrimTo(part.low - t.b.window)
	if part.log.StartOffset() != start || t.hooks.roomWithoutTrim(part.log.Full() && t.evictableLocked(part)) {
		part.room.notify()
	}
}

// evictableLocked reports whether part's oldest retained record may be
// given up to a publish (SPEC rule 21): a replay window is set and every
// group has committed past the log start. The caller holds part.mu.
func (t *topic) evictableLocked(part *partition) bool {
	return t.b.window > 0 && part.low != noLow && part.log.StartOffset() < part.low
}

// newGroupLocked returns a group named name, not yet in the topic, with no
// members, no slot and a cursor per partition not yet placed. The caller
// holds t.mu.
func (t *topic) newGroupLocked(name string, a Assignor, assignorName string) *group {
	g := &group{name: name, slot: -1, assignor: a, assignorName: assignorName}
	n := t.count.Load()
	cs := make([]*cursor, n)
	for p := range cs {
		cs[p] = new(cursor)
	}
	g.assign.Store(&assignment{owner: make([]string, n), masks: map[string]shard.Mask{}, cursors: cs})
	return g
}

// addGroup places g's cursors at the log start offsets (SPEC rule 7) or,
// with StartLatest, at the log end offsets, gives g a slot on every
// partition and adds it to the registry, while holding every partition
// lock: the log start and end offsets cannot move meanwhile (they move
// only under the partition lock) and the group appears at one instant. A
// new cursor at its partition's least committed offset is pinned; one above
// it (a StartLatest group behind which others lag) is not. A StartLatest
// cursor that raises the least committed offset (no other group is behind
// it) applies retention. The caller holds t.mu.
func (t *topic) addGroup(g *group, start GroupStart) {
	if n := len(t.freeSlots); n > 0 {
		g.slot = t.freeSlots[n-1]
		t.freeSlots = t.freeSlots[:n-1]
	} else {
		g.slot = t.slots
		t.slots++
	}
	cs := g.assign.Load().cursors
	n := t.lockAll()
	for i, p := range t.parts[:n] {
		at := p.log.StartOffset() // ≤ low: the records from low on are retained
		if start == StartLatest {
			at = t.hooks.latestStart(p.log.EndOffset(), p)
		}
		pin := at <= p.low
		cs[i].place(at, pin)
		if g.slot < len(p.cursors) {
			p.cursors[g.slot] = cs[i]
		} else {
			p.cursors = append(p.cursors, cs[i])
		}
		switch {
		case p.low == noLow:
			p.low, p.atLow = at, 1
			t.trimLocked(p) // the first group: what it starts past is fully committed
		case at < p.low:
			p.low, p.atLow = at, 1
		case at == p.low:
			p.atLow++
		}
	}
	t.groups.Store(g.name, g)
	t.unlockAll(n)
}

// plan computes g's next assignment for members over the partitions of
// cursors (one per partition) with assignor a (named name), from g's
// current owners (SPEC rule 18). With a session timeout the members that
// stay keep their sessions and a new member gets one last seen at now. It
// changes nothing; the caller holds t.mu, so the current owners are
// stable. Errors: ErrInvalidAssignment from a user's assignor.
func (t *topic) plan(g *group, members []string, a Assignor, name string, cursors []*cursor, now int64) (*assignment, error) {
	partitions := len(cursors)
	cur := g.assign.Load()
	next := &assignment{owner: make([]string, partitions), masks: make(map[string]shard.Mask, len(members)), cursors: cursors}
	for _, m := range members {
		next.masks[m] = 0
	}
	if t.b.session > 0 {
		next.sessions = make(map[string]*session, len(members))
		for _, m := range members {
			s := cur.sessions[m]
			if s == nil {
				s = newSession(now)
			}
			next.sessions[m] = s
		}
	}
	if len(members) == 0 {
		return next, nil
	}
	previous := make([]string, partitions)
	copy(previous, cur.owner)
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

// moved returns the partitions of old whose owner differs in next: the
// cursors a rebalance from old to next must hold.
func moved(old, next *assignment) shard.Mask {
	var m shard.Mask
	for p := range min(len(old.owner), len(next.owner)) {
		if old.owner[p] != next.owner[p] {
			m = m.With(int32(p))
		}
	}
	return m
}

// rebalance makes next g's assignment (SPEC rule 9) while holding the
// group's cursors of the partitions whose owner changes, in ascending order:
// such a partition loses its in-flight delivery; committed offsets and
// attempts are kept. A Poll, Ack or Retry of one of those partitions is
// either over or not yet begun, and one of a partition whose owner stays is
// right under either assignment, so the whole assignment changes at one
// instant. Publishes and other groups run on. The caller holds t.mu.
func (t *topic) rebalance(g *group, next *assignment) {
	old := g.assign.Load()
	m := moved(old, next)
	held := t.lockCursors(old, m)
	t.cancelMoved(old, m)
	g.assign.Store(next)
	unlockCursors(old, held)
}

// lockCursors locks a's cursors of the partitions in m, ascending, and
// returns the ones it locked, for unlockCursors.
func (t *topic) lockCursors(a *assignment, m shard.Mask) shard.Mask {
	m = t.hooks.lockMoved(m)
	for p, rest, ok := m.First(); ok; p, rest, ok = rest.First() {
		a.cursors[p].mu.Lock()
	}
	return m
}

// cancelMoved cancels the in-flight deliveries of a's cursors of the
// partitions in m, whose owner changes. The caller holds their locks.
func (t *topic) cancelMoved(a *assignment, m shard.Mask) {
	for p, rest, ok := m.First(); ok; p, rest, ok = rest.First() {
		c := a.cursors[p]
		c.inFlight = t.hooks.movedInFlight(false, c)
	}
}

// lockAll locks every partition of t in ascending order (the lock order),
// unsoling each (its callers change the partitions' cursors), and returns
// how many it locked, for unlockAll. The caller holds t.mu, so the
// partition count cannot change meanwhile.
func (t *topic) lockAll() int {
	n := int(t.count.Load())
	for _, p := range t.parts[:n] {
		p.mu.Lock()
		t.unsoleLocked(p)
	}
	return n
}

// unlockAll unlocks what lockAll locked; n is lockAll's result.
func (t *topic) unlockAll(n int) {
	for _, p := range t.parts[:n] {
		p.mu.Unlock()
	}
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
	part, n := t.partAt(p)
	if part == nil {
		return nil, t.partitionError(p, n)
	}
	return part, nil
}

// partAt returns partition p and the partition count n it was checked
// against; nil when p is outside [0, n). It is partition without the
// error, small enough to inline into the publish and settle paths, whose
// callers make the error with partitionError(p, n).
func (t *topic) partAt(p int32) (*partition, int32) {
	n := t.count.Load()
	if uint32(p) >= uint32(n) { // p < 0 or p >= n
		return nil, n
	}
	return t.parts[p], n
}

// partitionError is partition's error for p outside [0, n).
func (t *topic) partitionError(p, n int32) error {
	return fmt.Errorf("%w: topic %q: partition %d outside [0,%d)", ErrInvalidArgument, t.name, p, n)
}

// checkGroupMember returns the first ErrInvalidArgument error of the group
// and member identifiers, or nil.
func checkGroupMember(groupName, member string) error {
	return contract.CheckGroupMember(ErrInvalidArgument, groupName, member)
}

// checkID returns ErrInvalidArgument unless id is 1..64 bytes of
// A-Z a-z 0-9 _ - (SPEC rule 3). kind names the identifier in the error.
func checkID(kind, id string) error { return contract.CheckID(ErrInvalidArgument, kind, id) }
