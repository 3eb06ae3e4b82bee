package engine

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/f91dcac0/tributary/engine/assign"
	"github.com/f91dcac0/tributary/shard"
)

// The administrative calls: group lifecycle (SPEC rule 17), assignor
// switching (18), adding partitions (19), seek (20) and describe (23). Each
// takes the topic's membership lock, so they are serialised with each other
// and with Join and Leave, and each changes state only while it also holds
// the partition locks involved.

// TopicDescription is one atomic snapshot of a topic (SPEC rule 23), as
// Describe returns it. It is the caller's: changing it changes nothing.
type TopicDescription struct {
	Topic      string
	Partitions []PartitionDescription // Partitions[p] describes partition p
	Groups     []GroupDescription     // sorted bytewise by Group; empty, not nil, when none
}

// PartitionDescription is one partition's log: it retains the records at
// offsets [LogStartOffset, LogEndOffset).
type PartitionDescription struct {
	Partition      int32
	LogStartOffset int64 // offset of the oldest retained record; LogEndOffset when none
	LogEndOffset   int64 // offset the next successful publish gets
}

// GroupDescription is one consumer group of a topic.
type GroupDescription struct {
	Group      string
	Assignor   string           // the group's Assignor's Name()
	Members    []string         // sorted bytewise, the order assignors see; empty, not nil, when none
	Partitions []GroupPartition // Partitions[p] is the group's state on partition p
	// LastSeen[i] is Members[i]'s last-seen instant on the broker clock
	// (SPEC rule 24): its Join or Rejoin, or the latest valid call since
	// that refreshed it. Nil without WithSessionTimeout; with it, one entry
	// per member (empty, not nil, when none).
	LastSeen []time.Time
}

// GroupPartition is a group's state on one partition.
type GroupPartition struct {
	Partition int32
	Owner     string // the member owning the partition; "" when the group has no members
	Committed int64  // the next offset the group will be given
	InFlight  bool   // the record at Committed is reserved to Owner
	Attempts  int32  // deliveries so far of the record at Committed (0: not yet delivered)
	Lag       int64  // LogEndOffset − Committed, in records; never negative
}

// CreateGroup creates group on topic with no members and the given assignor,
// its committed offset on each partition at that partition's log start
// offset (SPEC rules 7, 17), and returns true. If the group exists it returns
// false and changes nothing (its assignor included). The assignor's Name is
// read once, here, and shown by Describe. It is CreateGroupAt with
// StartEarliest. Errors: ErrInvalidArgument for an unknown topic, an invalid
// identifier, or a nil assignor (an interface holding a nil pointer
// included); ErrInvalidAssignment when a's Name panics.
func (b *Broker) CreateGroup(topicName, groupName string, a Assignor) (bool, error) {
	return b.CreateGroupAt(topicName, groupName, a, StartEarliest)
}

// GroupStart says where a group created by CreateGroupAt starts: its
// committed offset on each partition at the instant it appears.
type GroupStart uint8

const (
	// StartEarliest starts a new group at each partition's log start
	// offset, the earliest retained record (SPEC rules 7, 17; with
	// WithReplayWindow the window's fully committed records included): the
	// group receives every record the topic still retains. Join and
	// CreateGroup start groups here.
	StartEarliest GroupStart = iota
	// StartLatest starts a new group at each partition's log end offset,
	// as Kafka's auto.offset.reset=latest: the group receives only records
	// published after it was created. Like a forward Seek (SPEC rule 20),
	// retention is applied again: records no other group still needs are
	// removed, beyond the replay window.
	StartLatest
)

// String returns "earliest" or "latest", the names Kafka gives the two
// positions (auto.offset.reset), as ParseGroupStart accepts them.
func (s GroupStart) String() string {
	switch s {
	case StartEarliest:
		return "earliest"
	case StartLatest:
		return "latest"
	}
	return fmt.Sprintf("GroupStart(%d)", uint8(s))
}

// ParseGroupStart returns the GroupStart named name ("earliest" or
// "latest"); ErrInvalidArgument for another name.
func ParseGroupStart(name string) (GroupStart, error) {
	switch name {
	case "earliest":
		return StartEarliest, nil
	case "latest":
		return StartLatest, nil
	}
	return 0, fmt.Errorf("%w: group start %q: want earliest or latest", ErrInvalidArgument, name)
}

// CreateGroupAt is CreateGroup with the group's start: StartEarliest puts
// its committed offset on each partition at the log start (SPEC rules 7,
// 17), StartLatest at the log end. The group appears at one instant, under
// every partition lock, with every committed offset placed at that
// instant: a record published before the call is not delivered to a
// StartLatest group, one published after it returns is. A StartLatest
// group commits past every retained record, so retention is applied again
// at the same instant (rules 13, 21). False, changing nothing, if the
// group exists. Errors: as CreateGroup, and ErrInvalidArgument for a start
// that is neither (checked before the assignor's Name is read).
func (b *Broker) CreateGroupAt(topicName, groupName string, a Assignor, start GroupStart) (bool, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return false, err
	}
	if err := checkID("group", groupName); err != nil {
		return false, err
	}
	if assign.IsNil(a) {
		return false, fmt.Errorf("%w: nil Assignor", ErrInvalidArgument)
	}
	if start != StartEarliest && start != StartLatest {
		return false, fmt.Errorf("%w: %v: want StartEarliest or StartLatest", ErrInvalidArgument, start)
	}
	name, err := assign.Name(a)
	if err != nil {
		return false, err
	}
	t.lockExpired()
	defer t.mu.Unlock()
	if t.groups.Load(groupName) != nil {
		return false, nil
	}
	t.addGroup(t.newGroupLocked(groupName, a, name), start)
	return true, nil
}

// DeleteGroup removes group, which must have no members, from topic and
// returns true (SPEC rule 17). The group stops counting for retention at
// once: records only it still needed are removed (rules 13, 21), and its
// cursor slots are reused by the next group created. A name deleted and used
// again starts a fresh group. It returns false when the group is absent.
// Errors: ErrInvalidArgument for an unknown topic or an invalid identifier;
// ErrGroupNotEmpty when the group has members (nothing changes).
func (b *Broker) DeleteGroup(topicName, groupName string) (bool, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return false, err
	}
	if err := checkID("group", groupName); err != nil {
		return false, err
	}
	g, _ := t.lockGroup(groupName)
	if g == nil {
		return false, nil
	}
	defer t.mu.Unlock()
	if len(g.members) > 0 {
		return false, fmt.Errorf("%w: topic %q: group %q has %d members", ErrGroupNotEmpty, t.name, groupName, len(g.members))
	}
	// The group has no members, so none of its cursors is locked or
	// written by anyone else; the partition locks keep retention exact.
	n := t.lockAll()
	t.groups.Delete(groupName)
	g.deleted.Store(true)
	for _, p := range t.parts[:n] {
		p.cursors[g.slot] = nil
		t.hooks.retainDeleted(t, p)
	}
	t.unlockAll(n)
	t.freeSlots = append(t.freeSlots, g.slot)
	g.ready.notify()
	return true, nil
}

// SetAssignor makes a group's assignor a and, if the group has members,
// rebalances it with a at one instant (SPEC rules 9, 18): a partition whose
// owner changes loses its in-flight delivery. It returns false when the
// group is absent. Errors: ErrInvalidArgument for an unknown topic, an
// invalid identifier or a nil assignor (one holding a nil pointer
// included); ErrInvalidAssignment when a's Name panics or a answers wrongly
// (nothing changes, the old assignor stays).
func (b *Broker) SetAssignor(topicName, groupName string, a Assignor) (bool, error) {
	t, name, err := b.checkGroupAssignor(topicName, groupName, a)
	if err != nil {
		return false, err
	}
	g, now := t.lockGroup(groupName)
	if g == nil {
		return false, nil
	}
	defer t.mu.Unlock()
	next, err := t.plan(g, g.members, a, name, g.assign.Load().cursors, now)
	if err != nil {
		return false, err
	}
	g.assignor, g.assignorName = a, name
	if len(g.members) > 0 {
		t.hooks.reassign(t, g, next)
		g.ready.notify()
	}
	return true, nil
}

// AddPartitions adds count empty partitions to topic and returns the new
// partition count (SPEC rule 19). The new partitions start at offset 0,
// every group's committed offset on them is 0, and every group with members
// is rebalanced by its assignor, all at the instant the partitions appear;
// publishes and polls of the existing partitions run on meanwhile, waiting
// only for the partition locks. Errors: ErrInvalidArgument for an unknown
// topic, an invalid identifier, count < 1 or a new total above 64;
// ErrInvalidAssignment when any group's assignor answers wrongly (nothing
// changes).
func (b *Broker) AddPartitions(topicName string, count int32) (int32, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return 0, err
	}
	now := b.sessionNow() // read before any lock; used only if the call is valid
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.count.Load()
	if count < 1 || count > MaxPartitionCount-old {
		if old == MaxPartitionCount {
			return 0, fmt.Errorf("%w: topic %q already has the most partitions, %d", ErrInvalidArgument, t.name, old)
		}
		return 0, fmt.Errorf("%w: topic %q: adding %d partitions to %d: want 1..%d", ErrInvalidArgument, t.name, count, old, MaxPartitionCount-old)
	}
	t.expireLocked(now)
	total := old + count
	start := t.hooks.addedStart(0, t)
	added := make([]*partition, count)
	for i := range added {
		p := b.newPartition()
		p.cursors = make([]*cursor, t.slots)
		added[i] = p
	}
	groups := t.groups.AppendValues(nil)
	plans := make([]*assignment, len(groups))
	for i, g := range groups {
		cs := slices.Grow(slices.Clone(g.assign.Load().cursors), int(count))
		for _, p := range added {
			c := new(cursor)
			c.place(start, true)
			p.cursors[g.slot] = c
			p.low = start
			p.atLow++
			cs = append(cs, c)
		}
		if plans[i], err = t.plan(g, g.members, g.assignor, g.assignorName, cs, now); err != nil {
			return 0, err
		}
	}
	// Hold every group's cursors of the existing partitions whose owner
	// changes, in the lock order (ascending partition), while all the new
	// assignments and then the count are stored. A poll that sees a new
	// assignment before the count waits for the count (poll).
	type held struct {
		a *assignment
		m shard.Mask
	}
	hold := make([]held, len(groups))
	for i, g := range groups {
		hold[i].a = g.assign.Load()
		hold[i].m = moved(hold[i].a, plans[i])
	}
	for p := range old {
		for _, h := range hold {
			if h.m.Has(p) {
				h.a.cursors[p].mu.Lock()
			}
		}
	}
	for i, p := range added {
		t.parts[old+int32(i)] = p
	}
	for i, g := range groups {
		t.cancelMoved(hold[i].a, hold[i].m)
		g.assign.Store(plans[i])
	}
	t.count.Store(total) // the linearization point: the partitions appear
	for _, h := range hold {
		unlockCursors(h.a, h.m)
	}
	for _, g := range groups {
		g.ready.notify()
	}
	t.ready.notify()
	return total, nil
}

// Seek sets group's committed offset on partition to offset (controlled
// replay, SPEC rule 20): the group's in-flight delivery there is cancelled,
// its attempts reset, and retention is applied again (a forward seek can
// free records). Seek is an admin call: it needs no member. It returns
// false when the group is absent. Errors, checked in this order:
// ErrInvalidArgument for an unknown topic, an invalid identifier, a
// partition outside [0, partitionCount) or a negative offset;
// ErrOffsetOutOfRange (after the absent-group check) unless log start ≤
// offset ≤ log end. Either error changes nothing.
func (b *Broker) Seek(topicName, groupName string, partition int32, offset int64) (bool, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return false, err
	}
	if err := checkID("group", groupName); err != nil {
		return false, err
	}
	part, err := t.partition(partition)
	if err != nil {
		return false, err
	}
	if offset < 0 {
		return false, fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, offset)
	}
	g, _ := t.lockGroup(groupName)
	if g == nil {
		return false, nil
	}
	defer t.mu.Unlock()
	c := g.assign.Load().cursors[partition]
	c.mu.Lock()
	defer c.mu.Unlock()
	part.mu.Lock()
	defer part.mu.Unlock()
	t.unsoleLocked(part)
	if start, end := part.log.StartOffset(), part.log.EndOffset(); offset < start || offset > end {
		return false, fmt.Errorf("%w: topic %q: partition %d: offset %d outside [%d,%d]", ErrOffsetOutOfRange, t.name, partition, offset, start, end)
	}
	c.place(offset, false) // retention pins it if it is the least
	c.attempts = 0
	c.inFlight = t.hooks.soughtInFlight(false, c)
	t.retainLocked(part)
	g.ready.notify()
	return true, nil
}

// Describe returns one atomic snapshot of topic (SPEC rule 23): every
// partition's log start and end offsets and every group's assignor, members
// and, per partition, owner, committed offset, in-flight flag, attempts and
// lag. It holds the topic's locks while it copies, so lag is never negative
// and every figure is of the same instant. The result is the caller's.
// Errors (ErrInvalidArgument): unknown topic, invalid identifier.
func (b *Broker) Describe(topicName string) (TopicDescription, error) {
	s, err := b.snapshot(topicName, false)
	return s.TopicDescription, err
}

// TopicSnapshot is a topic's description together with its retained
// records, all of one instant.
type TopicSnapshot struct {
	TopicDescription
	// Records[p] holds partition p's retained records, offsets
	// Partitions[p].LogStartOffset up to LogEndOffset−1 ascending (the
	// replay window's fully committed records included). A snapshot is not a
	// delivery: Attempt is 0 and no group's state changes.
	Records [][]Record
}

// Snapshot is Describe plus a copy of every retained record, taken under the
// same locks (SPEC rule 23): what `show topic` prints. It copies up to
// capacity × partitionCount records, so it is an inspection call, not a way
// to consume. The result, headers included, is the caller's. Errors
// (ErrInvalidArgument): unknown topic, invalid identifier.
func (b *Broker) Snapshot(topicName string) (TopicSnapshot, error) {
	return b.snapshot(topicName, true)
}

func (b *Broker) snapshot(topicName string, records bool) (TopicSnapshot, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return TopicSnapshot{}, err
	}
	t.lockExpired()
	defer t.mu.Unlock()
	groups := t.groups.AppendValues(nil)
	slices.SortFunc(groups, func(x, y *group) int { return cmp.Compare(x.name, y.name) })
	n := int(t.count.Load())
	d := TopicDescription{Topic: t.name, Partitions: make([]PartitionDescription, n), Groups: make([]GroupDescription, len(groups))}
	for i, g := range groups {
		d.Groups[i] = GroupDescription{
			Group: g.name, Assignor: g.assignorName,
			Members: append([]string{}, g.members...), Partitions: make([]GroupPartition, n),
		}
	}
	s := TopicSnapshot{TopicDescription: d}
	if records {
		s.Records = make([][]Record, n)
	}
	// Every group's cursor on every partition, then the partition lock,
	// partition by partition: the lock order. Only holders of t.mu take two
	// cursors of one partition, so their order among groups is free.
	assigns := make([]*assignment, len(groups))
	for i, g := range groups {
		assigns[i] = g.assign.Load()
	}
	for p, part := range t.parts[:n] {
		for _, a := range assigns {
			a.cursors[p].mu.Lock()
			defer a.cursors[p].mu.Unlock()
		}
		part.mu.Lock()
		defer part.mu.Unlock()
		if c := part.sole; c != nil {
			t.catchUpLocked(part, c) // its lock is held: it cannot move
		}
	}
	if b.session > 0 {
		// Every refresh runs under topic.mu or under a cursor of the
		// member's group, all held here: the instants are of this instant.
		for i, a := range assigns {
			seen := make([]time.Time, len(d.Groups[i].Members))
			for j, m := range d.Groups[i].Members {
				seen[j] = time.Unix(0, a.sessions[m].seen.Load())
			}
			d.Groups[i].LastSeen = seen
		}
	}
	for p, part := range t.parts[:n] {
		start, end := part.log.StartOffset(), part.log.EndOffset()
		d.Partitions[p] = PartitionDescription{Partition: int32(p), LogStartOffset: start, LogEndOffset: end}
		for i, a := range assigns {
			c := a.cursors[p]
			committed := c.committed()
			d.Groups[i].Partitions[p] = GroupPartition{
				Partition: int32(p), Owner: a.owner[p], Committed: committed,
				InFlight: c.inFlight, Attempts: c.attempts, Lag: end - committed,
			}
		}
		if records {
			rs := make([]Record, 0, end-start)
			for off := start; off < end; off++ {
				rs = append(rs, part.log.At(off).record(t, int32(p), off, 0))
			}
			s.Records[p] = rs
		}
	}
	return s, nil
}

// checkGroupAssignor validates the arguments of CreateGroup and SetAssignor
// in rule 4's order and returns the topic and a's name. Errors:
// ErrInvalidArgument for an unknown topic, an invalid group identifier or a
// nil a (or one holding a nil pointer); ErrInvalidAssignment when a's Name
// panics.
func (b *Broker) checkGroupAssignor(topicName, groupName string, a Assignor) (*topic, string, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return nil, "", err
	}
	if err := checkID("group", groupName); err != nil {
		return nil, "", err
	}
	if assign.IsNil(a) {
		return nil, "", fmt.Errorf("%w: nil Assignor", ErrInvalidArgument)
	}
	name, err := assign.Name(a)
	return t, name, err
}

// Topics returns the names of the broker's topics, sorted bytewise, as a new
// slice owned by the caller (empty, not nil, when there are none).
func (b *Broker) Topics() []string {
	b.createMu.Lock()
	ts := b.topics.AppendValues(nil)
	b.createMu.Unlock()
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, t.name)
	}
	slices.Sort(names)
	return names
}
