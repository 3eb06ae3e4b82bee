package model

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// This file holds read-only inspection helpers for tests and checkers. They
// are not part of the broker contract and never change the state.

// Capacity returns the records each partition may retain, as given to New.
func (b *Broker) Capacity() int32 { return b.capacity }

// Topics returns the topic ids in byte order; the slice is the caller's and
// non-nil.
func (b *Broker) Topics() []string {
	return append([]string{}, slices.Sorted(maps.Keys(b.topics))...)
}

// PartitionCount returns topic's partition count. It returns
// ErrInvalidArgument for an invalid or unknown topic.
func (b *Broker) PartitionCount(topic string) (int32, error) {
	t, err := b.lookup(topic)
	if err != nil {
		return 0, err
	}
	return int32(len(t.logs)), nil
}

// LogStartOffset returns the earliest retained offset of partition (its log
// end when nothing is retained). It returns ErrInvalidArgument for an invalid
// or unknown topic or a partition outside [0, partitionCount).
func (b *Broker) LogStartOffset(topic string, partition int32) (int64, error) {
	l, err := b.log(topic, partition)
	if err != nil {
		return 0, err
	}
	return l.start, nil
}

// LogEndOffset returns the offset the next successful publish to partition
// gets. It returns ErrInvalidArgument like LogStartOffset.
func (b *Broker) LogEndOffset(topic string, partition int32) (int64, error) {
	l, err := b.log(topic, partition)
	if err != nil {
		return 0, err
	}
	return l.end(), nil
}

// Full reports whether a publish to partition would now return -1 (rules
// 5, 21): the partition retains capacity records and none of them may be
// given up to a replay window. It returns ErrInvalidArgument like
// LogStartOffset.
func (b *Broker) Full(topic string, partition int32) (bool, error) {
	t, err := b.lookup(topic)
	if err != nil {
		return false, err
	}
	if err := t.checkPartition(topic, partition); err != nil {
		return false, err
	}
	return b.refuses(t, int(partition)), nil
}

// Retained returns partition's retained records in offset order, the replay
// window included, each with its key, a copy of its headers and its time,
// and Attempt 0; the slice is the caller's and non-nil. It returns
// ErrInvalidArgument like LogStartOffset.
func (b *Broker) Retained(topic string, partition int32) ([]Record, error) {
	l, err := b.log(topic, partition)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(l.entries))
	for off := l.start; off < l.end(); off++ {
		out = append(out, l.record(topic, partition, off, 0))
	}
	return out, nil
}

func (b *Broker) log(topic string, partition int32) (*partitionLog, error) {
	t, err := b.lookup(topic)
	if err != nil {
		return nil, err
	}
	if err := t.checkPartition(topic, partition); err != nil {
		return nil, err
	}
	return &t.logs[partition], nil
}

// Groups returns topic's group ids in byte order, memberless groups
// included; the slice is the caller's and non-nil. It returns
// ErrInvalidArgument for an invalid or unknown topic.
func (b *Broker) Groups(topic string) ([]string, error) {
	t, err := b.lookup(topic)
	if err != nil {
		return nil, err
	}
	return append([]string{}, slices.Sorted(maps.Keys(t.groups))...), nil
}

// Members returns group's member ids in byte order, the order assignors
// read; the slice is the caller's and non-nil. It returns ErrInvalidArgument
// for an invalid identifier or an unknown topic, and ErrUnknownGroup for an
// absent group.
func (b *Broker) Members(topic, group string) ([]string, error) {
	_, g, err := b.group(topic, group)
	if err != nil {
		return nil, err
	}
	return append([]string{}, g.members...), nil
}

// Assignment returns, for each member of group, the partitions it owns in
// ascending order, as the group's assignor last decided (rules 6, 18); the
// map and its slices are the caller's, every member has a non-nil slice, and
// the map is empty for a memberless group. It returns errors like Members.
func (b *Broker) Assignment(topic, group string) (map[string][]int32, error) {
	_, g, err := b.group(topic, group)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]int32, len(g.members))
	for _, m := range g.members {
		out[m] = g.partitionsOf(m)
	}
	return out, nil
}

// Committed returns group's committed offset on partition: the next offset
// it will be given. It returns ErrInvalidArgument for an invalid identifier,
// an unknown topic or a partition outside [0, partitionCount), and
// ErrUnknownGroup for an absent group.
func (b *Broker) Committed(topic, group string, partition int32) (int64, error) {
	g, err := b.groupPartition(topic, group, partition)
	if err != nil {
		return 0, err
	}
	return g.committed[partition], nil
}

// InFlight reports whether group has a delivery in flight on partition (it
// is always the record at the committed offset, reserved to the partition's
// owner; an expired delivery under an ack timeout is still in flight). It
// returns errors like Committed.
func (b *Broker) InFlight(topic, group string, partition int32) (bool, error) {
	g, err := b.groupPartition(topic, group, partition)
	if err != nil {
		return false, err
	}
	return g.inFlight[partition], nil
}

// Attempts returns how many times group has been delivered the record at
// its committed offset on partition (rule 16): 0 before the first delivery,
// and again after Ack or Seek. It returns errors like Committed.
func (b *Broker) Attempts(topic, group string, partition int32) (int32, error) {
	g, err := b.groupPartition(topic, group, partition)
	if err != nil {
		return 0, err
	}
	return g.attempts[partition], nil
}

func (b *Broker) group(topic, group string) (*topic, *group, error) {
	t, err := b.lookup(topic, group)
	if err != nil {
		return nil, nil, err
	}
	g, ok := t.groups[group]
	if !ok {
		return nil, nil, fmt.Errorf("%w: topic %q: group %q", ErrUnknownGroup, topic, group)
	}
	return t, g, nil
}

func (b *Broker) groupPartition(topic, group string, partition int32) (*group, error) {
	t, err := b.lookup(topic, group)
	if err != nil {
		return nil, err
	}
	if err := t.checkPartition(topic, partition); err != nil {
		return nil, err
	}
	g, ok := t.groups[group]
	if !ok {
		return nil, fmt.Errorf("%w: topic %q: group %q", ErrUnknownGroup, topic, group)
	}
	return g, nil
}

// SessionTimeout returns the session timeout given to WithSessionTimeout,
// or 0 when members never expire (SPEC rule 24), as engine's
// Broker.SessionTimeout.
func (b *Broker) SessionTimeout() time.Duration { return b.sessionTimeout }

// LastSeen returns each member of group with its last-seen instant on the
// broker clock (SPEC rule 24), as Describe's LastSeen, but without
// expiring anyone first: a read-only look for tests and checkers. The map
// is the caller's; it is empty without a session timeout. It returns
// errors like Members.
func (b *Broker) LastSeen(topic, group string) (map[string]time.Time, error) {
	_, g, err := b.group(topic, group)
	if err != nil {
		return nil, err
	}
	return maps.Clone(g.lastSeen), nil
}
