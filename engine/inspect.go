package engine

import (
	"errors"
	"fmt"
)

// ErrUnknownGroup is returned, wrapped, by the inspection methods Committed
// and InFlight when the topic exists but the group does not. The core calls
// never return it: for them an absent group is a state, answered with false
// or an empty result (SPEC rules 8, 10).
var ErrUnknownGroup = errors.New("tributary: unknown group")

// PartitionCount returns the number of partitions of topic, 1..64.
// Errors (ErrInvalidArgument): invalid identifier, unknown topic.
func (b *Broker) PartitionCount(topicName string) (int32, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return 0, err
	}
	return t.count.Load(), nil
}

// LogStartOffset returns the offset of the oldest record partition of topic
// retains, or its log end offset when it retains none. Errors
// (ErrInvalidArgument): invalid identifier, unknown topic, partition outside
// [0, partitionCount).
func (b *Broker) LogStartOffset(topicName string, partition int32) (int64, error) {
	start, _, err := b.logOffsets(topicName, partition)
	return start, err
}

// LogEndOffset returns the offset the next successful publish to partition
// of topic will get. Errors as LogStartOffset.
func (b *Broker) LogEndOffset(topicName string, partition int32) (int64, error) {
	_, end, err := b.logOffsets(topicName, partition)
	return end, err
}

func (b *Broker) logOffsets(topicName string, partition int32) (start, end int64, err error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return 0, 0, err
	}
	p, err := t.partition(partition)
	if err != nil {
		return 0, 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.sole; c != nil {
		t.catchUpLocked(p, c)
	}
	return p.log.StartOffset(), p.log.EndOffset(), nil
}

// Committed returns group's committed offset on partition of topic: the next
// offset the group will be given, in [log start, log end]. Errors:
// ErrInvalidArgument for an invalid identifier, an unknown topic or a
// partition outside [0, partitionCount); ErrUnknownGroup for an absent group.
func (b *Broker) Committed(topicName, groupName string, partition int32) (int64, error) {
	c, err := b.cursor(topicName, groupName, partition)
	return c.committed, err
}

// Attempts returns how many times the record at group's committed offset on
// partition of topic has been delivered to the group (SPEC rule 16; 0 when
// not yet). Errors as Committed.
func (b *Broker) Attempts(topicName, groupName string, partition int32) (int32, error) {
	c, err := b.cursor(topicName, groupName, partition)
	return c.attempts, err
}

// InFlight reports whether group has a delivery in flight on partition of
// topic (always the record at the committed offset). Errors as Committed.
func (b *Broker) InFlight(topicName, groupName string, partition int32) (bool, error) {
	c, err := b.cursor(topicName, groupName, partition)
	return c.inFlight, err
}

// cursorCopy is a copy of a cursor's fields, for the inspection methods.
type cursorCopy struct {
	committed int64
	attempts  int32
	inFlight  bool
}

// cursor returns a copy of group's cursor on partition, read under the
// cursor's lock.
func (b *Broker) cursor(topicName, groupName string, partition int32) (cursorCopy, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return cursorCopy{}, err
	}
	if err := checkID("group", groupName); err != nil {
		return cursorCopy{}, err
	}
	if _, err := t.partition(partition); err != nil {
		return cursorCopy{}, err
	}
	// The membership lock keeps the group from being deleted, and its
	// partitions from being added to, while we read its cursor.
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups.Load(groupName)
	if g == nil {
		return cursorCopy{}, fmt.Errorf("%w: topic %q: group %q", ErrUnknownGroup, topicName, groupName)
	}
	c := g.assign.Load().cursors[partition]
	c.mu.Lock()
	defer c.mu.Unlock()
	return cursorCopy{committed: c.committed(), attempts: c.attempts, inFlight: c.inFlight}, nil
}
