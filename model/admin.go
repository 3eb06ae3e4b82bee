package model

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/f91dcac0/tributary/engine/assign"
)

// This file holds the administrative calls of rules 15–23: group
// lifecycle (rule 17), assignors (rule 18), adding partitions (rule 19),
// seeking (rule 20) and describing a topic (rule 23, and Snapshot). Under a
// session timeout each of them, once its arguments pass the
// ErrInvalidArgument checks, first expires the topic's expired members
// (rule 24, Broker.enter), even when its own action then fails with
// another error (ErrOffsetOutOfRange, ErrGroupNotEmpty,
// ErrInvalidAssignment), which changes nothing beyond that expiry.

// TopicDescription is one atomic snapshot of a topic, as Describe returns it
// (SPEC rule 23). It and all its slices are the caller's.
type TopicDescription struct {
	Topic      string
	Partitions []PartitionDescription // index == partition
	Groups     []GroupDescription     // sorted bytewise by Group; non-nil (empty when none)
}

// PartitionDescription describes one partition log.
type PartitionDescription struct {
	Partition      int32
	LogStartOffset int64 // earliest retained offset (the log end when nothing is retained)
	LogEndOffset   int64 // the offset the next successful publish gets
}

// GroupDescription describes one consumer group of a topic.
type GroupDescription struct {
	Group      string
	Assignor   string           // the group's Assignor.Name()
	Members    []string         // sorted bytewise; non-nil (empty when none)
	Partitions []GroupPartition // index == partition
	// LastSeen[i] is Members[i]'s last-seen instant on the broker clock
	// (SPEC rule 24); nil without WithSessionTimeout, else non-nil with
	// one entry per member (empty when none).
	LastSeen []time.Time
}

// GroupPartition is one group's state on one partition.
type GroupPartition struct {
	Partition int32
	Owner     string // current owner; "" when the group has no members
	Committed int64  // next offset the group will be given
	InFlight  bool   // the record at Committed is reserved to Owner
	Attempts  int32  // deliveries so far of the record at Committed (0: not yet delivered)
	Lag       int64  // LogEndOffset - Committed, never negative
}

// CreateGroup makes an empty group on topic that uses assignor a, with each
// committed offset at the partition's log start, and returns true (rule 17).
// An existing group returns false and is left untouched, its assignor
// included. It returns ErrInvalidArgument for an invalid identifier, an
// unknown topic or a nil a. It is CreateGroupAt with StartEarliest.
func (b *Broker) CreateGroup(topic, group string, a Assignor) (bool, error) {
	return b.CreateGroupAt(topic, group, a, StartEarliest)
}

// GroupStart says where CreateGroupAt starts a group, as engine.GroupStart.
type GroupStart uint8

const (
	// StartEarliest: each committed offset at the partition's log start
	// (rules 7, 17).
	StartEarliest GroupStart = iota
	// StartLatest: each committed offset at the partition's log end.
	StartLatest
)

// CreateGroupAt is CreateGroup with the group's start: StartEarliest puts
// every committed offset at the partition's log start, StartLatest at its
// log end, after which retention is applied to every partition (as after a
// forward Seek, rule 20: what no other group needs is removed, but for the
// replay window). Checks, in order: the identifiers and the topic, a nil
// a, a start that is neither (each ErrInvalidArgument), a's Name panicking
// (ErrInvalidAssignment); then false for an existing group. Only true
// changes anything.
func (b *Broker) CreateGroupAt(topic, group string, a Assignor, start GroupStart) (bool, error) {
	t, err := b.lookup(topic, group)
	if err != nil {
		return false, err
	}
	if assign.IsNil(a) {
		return false, fmt.Errorf("%w: topic %q: group %q: nil assignor", ErrInvalidArgument, topic, group)
	}
	if start != StartEarliest && start != StartLatest {
		return false, fmt.Errorf("%w: topic %q: group %q: start %d: want StartEarliest or StartLatest", ErrInvalidArgument, topic, group, start)
	}
	if _, err := assign.Name(a); err != nil {
		return false, fmt.Errorf("topic %q: group %q: %w", topic, group, err)
	}
	b.enter(t)
	if _, ok := t.groups[group]; ok {
		return false, nil
	}
	g := t.newGroup(a)
	t.groups[group] = g
	if start == StartLatest {
		for p := range t.logs {
			g.committed[p] = t.logs[p].end()
			t.trim(p, b.window)
		}
	}
	return true, nil
}

// DeleteGroup removes group, which must have no members, from topic and
// returns true (rule 17). The group stops counting for retention at once:
// every partition drops the records the remaining groups have all committed
// past, but for the replay window (rules 13, 21). A later Join or
// CreateGroup of the same id starts a fresh group at the log start. It
// returns false, changing nothing, when the group is absent; an error
// wrapping ErrGroupNotEmpty, changing nothing, when it has members; and
// ErrInvalidArgument for an invalid identifier or an unknown topic.
func (b *Broker) DeleteGroup(topic, group string) (bool, error) {
	t, g, _, err := b.enterGroup(topic, group)
	if g == nil {
		return false, err
	}
	if len(g.members) > 0 {
		return false, fmt.Errorf("%w: topic %q: group %q has %d members",
			ErrGroupNotEmpty, topic, group, len(g.members))
	}
	delete(t.groups, group)
	for p := range t.logs {
		t.trim(p, b.window)
	}
	return true, nil
}

// SetAssignor makes group use assignor a and, if the group has members,
// rebalances it with a at the same instant (rules 9, 18): a partition whose
// owner changes loses its in-flight delivery; committed offsets and attempts
// are kept. It returns true on success and false, changing nothing, for an
// absent group. It returns ErrInvalidArgument for an invalid identifier, an
// unknown topic or a nil a, and an error wrapping ErrInvalidAssignment,
// changing nothing (the old assignor stays), when a's answer is invalid.
func (b *Broker) SetAssignor(topic, group string, a Assignor) (bool, error) {
	t, err := b.lookup(topic, group)
	if err != nil {
		return false, err
	}
	if assign.IsNil(a) {
		return false, fmt.Errorf("%w: topic %q: group %q: nil assignor", ErrInvalidArgument, topic, group)
	}
	if _, err := assign.Name(a); err != nil {
		return false, fmt.Errorf("topic %q: group %q: %w", topic, group, err)
	}
	b.enter(t)
	g, ok := t.groups[group]
	if !ok {
		return false, nil
	}
	owners, err := assignment(a, g.members, g.owners)
	if err != nil {
		return false, fmt.Errorf("topic %q: group %q: set assignor %q: %w", topic, group, a.Name(), err)
	}
	g.assignor = a
	g.rebalance(g.members, owners)
	return true, nil
}

// AddPartitions adds count empty partitions (their log start and end 0) to
// topic and returns the new partition count (rule 19). At the same instant
// every group gets committed offset 0 and no attempts on them, and every
// group with members is rebalanced over the new total by its assignor, with
// the current owners as the previous ones (rule 9). It returns
// ErrInvalidArgument for an invalid or unknown topic, a count below 1 or a
// new total above 64, and an error wrapping ErrInvalidAssignment, changing
// nothing at all, when any group's assignor answers invalidly (groups are
// asked in byte order of their ids; the first failure is returned).
func (b *Broker) AddPartitions(topic string, count int32) (int32, error) {
	t, err := b.lookup(topic)
	if err != nil {
		return 0, err
	}
	if count < 1 || int64(len(t.logs))+int64(count) > MaxPartitions {
		return 0, fmt.Errorf("%w: topic %q: adding %d partitions to %d: want 1 to %d in all",
			ErrInvalidArgument, topic, count, len(t.logs), MaxPartitions)
	}
	b.enter(t)
	k := int(count)
	names := slices.Sorted(maps.Keys(t.groups))
	owners := make([][]string, len(names))
	for i, name := range names {
		g := t.groups[name]
		previous := append(slices.Clone(g.owners), make([]string, k)...)
		if owners[i], err = assignment(g.assignor, g.members, previous); err != nil {
			return 0, fmt.Errorf("topic %q: group %q: adding %d partitions: %w", topic, name, count, err)
		}
	}
	t.logs = append(t.logs, make([]partitionLog, k)...)
	for i, name := range names {
		g := t.groups[name]
		g.owners = append(g.owners, make([]string, k)...)
		g.committed = append(g.committed, make([]int64, k)...)
		g.inFlight = append(g.inFlight, make([]bool, k)...)
		g.attempts = append(g.attempts, make([]int32, k)...)
		g.deliveredAt = append(g.deliveredAt, make([]time.Time, k)...)
		g.rebalance(g.members, owners[i])
	}
	return int32(len(t.logs)), nil
}

// Seek moves group's committed offset on partition to offset and returns
// true (rule 20): the in-flight delivery there is cancelled, the attempts
// reset to 0, and retention is applied again to the partition (a forward
// seek can free records). Any caller may seek, whatever the group's members.
// Checks come in this order: ErrInvalidArgument for an invalid identifier,
// an unknown topic, a partition outside [0, partitionCount) or a negative
// offset; false for an absent group; then an error wrapping
// ErrOffsetOutOfRange unless log start <= offset <= log end. Only true
// changes anything.
func (b *Broker) Seek(topic, group string, partition int32, offset int64) (bool, error) {
	t, err := b.lookup(topic, group)
	if err != nil {
		return false, err
	}
	if err := t.checkPartition(topic, partition); err != nil {
		return false, err
	}
	if offset < 0 {
		return false, fmt.Errorf("%w: topic %q: partition %d: negative offset %d",
			ErrInvalidArgument, topic, partition, offset)
	}
	b.enter(t)
	g, ok := t.groups[group]
	if !ok {
		return false, nil
	}
	p := int(partition)
	if l := &t.logs[p]; offset < l.start || offset > l.end() {
		return false, fmt.Errorf("%w: topic %q: partition %d: offset %d outside [%d,%d]",
			ErrOffsetOutOfRange, topic, partition, offset, l.start, l.end())
	}
	g.committed[p] = offset
	g.inFlight[p] = false
	g.attempts[p] = 0
	g.deliveredAt[p] = time.Time{}
	t.trim(p, b.window)
	return true, nil
}

// Describe returns a snapshot of topic: its partitions with their log start
// and end offsets, and its groups in byte order with assignor, members and,
// per partition, owner, committed offset, in-flight flag, attempts and lag
// (rule 23) and, under a session timeout, each member's last-seen instant
// (rule 24). Like every valid call on a topic it first expires the topic's
// expired members. The description is the caller's. It returns
// ErrInvalidArgument for an invalid or unknown topic.
func (b *Broker) Describe(topic string) (TopicDescription, error) {
	t, err := b.lookup(topic)
	if err != nil {
		return TopicDescription{}, err
	}
	b.enter(t)
	d := TopicDescription{
		Topic:      topic,
		Partitions: make([]PartitionDescription, len(t.logs)),
		Groups:     make([]GroupDescription, 0, len(t.groups)),
	}
	for p := range t.logs {
		l := &t.logs[p]
		d.Partitions[p] = PartitionDescription{Partition: int32(p), LogStartOffset: l.start, LogEndOffset: l.end()}
	}
	for _, name := range slices.Sorted(maps.Keys(t.groups)) {
		g := t.groups[name]
		gd := GroupDescription{
			Group:      name,
			Assignor:   g.assignor.Name(),
			Members:    append([]string{}, g.members...),
			Partitions: make([]GroupPartition, len(t.logs)),
		}
		if b.sessionTimeout > 0 {
			gd.LastSeen = make([]time.Time, len(g.members))
			for i, m := range g.members {
				gd.LastSeen[i] = g.lastSeen[m]
			}
		}
		for p := range t.logs {
			gd.Partitions[p] = GroupPartition{
				Partition: int32(p),
				Owner:     g.owners[p],
				Committed: g.committed[p],
				InFlight:  g.inFlight[p],
				Attempts:  g.attempts[p],
				Lag:       max(0, t.logs[p].end()-g.committed[p]),
			}
		}
		d.Groups = append(d.Groups, gd)
	}
	return d, nil
}

// TopicSnapshot is a topic's description together with its retained
// records, as Snapshot returns it. It and all its slices are the caller's.
type TopicSnapshot struct {
	TopicDescription
	// Records[p] holds partition p's retained records, offsets
	// Partitions[p].LogStartOffset up to LogEndOffset-1 in order (the
	// replay window's fully committed records included), each non-nil.
	// Attempt is 0: a snapshot is not a delivery.
	Records [][]Record
}

// Snapshot is Describe (expiry included) plus every retained record of every partition, as
// Retained returns them (key, a copy of the headers, time, Attempt 0): the
// sequential counterpart of engine's Broker.Snapshot. It changes nothing.
// It returns ErrInvalidArgument for an invalid or unknown topic, with the
// zero TopicSnapshot.
func (b *Broker) Snapshot(topic string) (TopicSnapshot, error) {
	d, err := b.Describe(topic)
	if err != nil {
		return TopicSnapshot{}, err
	}
	s := TopicSnapshot{TopicDescription: d, Records: make([][]Record, len(d.Partitions))}
	for p := range s.Records {
		if s.Records[p], err = b.Retained(topic, int32(p)); err != nil {
			panic(fmt.Sprintf("model: Snapshot(%q): partition %d: %v", topic, p, err))
		}
	}
	return s, nil
}
