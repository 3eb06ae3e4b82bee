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

// LogOffsets returns partition of topic's log start and end offsets (as
// LogStartOffset and LogEndOffset) of one instant, under the partition
// lock. Errors as LogStartOffset.
func (b *Broker) LogOffsets(topicName string, partition int32) (start, end int64, err error) {
	return b.logOffsets(topicName, partition)
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

// ReadAt appends to dst copies of up to max (≥ 0) records that
// partition of topic retains, from offset on in offset order, and returns
// them with the partition's log start and end offsets of the same instant
// (read under the partition lock): a read by offset, as Kafka's Fetch, that
// reserves nothing, commits nothing and changes no group (Attempt is 0 on
// every record). offset == log end appends nothing. dst stays the caller's;
// the records' headers are copies. Errors: ErrInvalidArgument (invalid
// identifier, unknown topic, partition outside [0, partitionCount), max
// outside 0..capacity); ErrOffsetOutOfRange, with the log offsets, when
// offset is outside [log start, log end] (SPEC rule 20's range; nothing is
// appended).
func (b *Broker) ReadAt(dst []Record, topicName string, partition int32, offset int64, max int32) (recs []Record, logStart, logEnd int64, err error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return dst, 0, 0, err
	}
	p, err := t.partition(partition)
	if err != nil {
		return dst, 0, 0, err
	}
	if max < 0 {
		return dst, 0, 0, fmt.Errorf("%w: negative max %d", ErrInvalidArgument, max)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.sole; c != nil {
		t.catchUpLocked(p, c)
	}
	start, end := p.log.StartOffset(), p.log.EndOffset()
	if offset < start || offset > end {
		return dst, start, end, fmt.Errorf("%w: offset %d outside [%d, %d] of %s/%d", ErrOffsetOutOfRange, offset, start, end, topicName, partition)
	}
	for off := offset; off < end && off-offset < int64(max); off++ {
		dst = append(dst, p.log.At(off).record(t, partition, off, 0))
	}
	return dst, start, end, nil
}

// Appended returns a channel that the next successful publish to topic (any
// partition) or AddPartitions of it closes: a reader by offset (ReadAt)
// takes the channel first, then reads, then blocks on it, so a record
// appended after its read always closes the channel it holds (signal.go).
// Nothing else is changed or waited for. Errors (ErrInvalidArgument):
// invalid identifier, unknown topic.
func (b *Broker) Appended(topicName string) (<-chan struct{}, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return nil, err
	}
	return t.ready.wait(), nil
}
