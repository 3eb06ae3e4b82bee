// Package model is the executable specification of the Tributary broker
// contract: a pure, sequential reference implementation of the core contract,
// SPEC rules 1–14 (listed in README.md), with the same API shape as package
// engine.
//
// The model is deliberately simple rather than fast: plain maps and slices, no
// locks, no goroutines, no I/O. A *Broker is not safe for concurrent use; the
// caller (a test, a porcupine model, a benchmark baseline) serialises calls.
// Because every method is a deterministic function of the state and the
// arguments, the model doubles as the state of a porcupine model: Clone copies
// it, Equal compares it, Hash and String summarise it.
//
// Which SPEC rule each part implements:
//
//   - New: rule 1 (capacity 1..1000).
//   - Create: rule 2 (partitionCount 1..64, duplicate is false).
//   - Identifier checks in every method: rule 3; argument checks: rule 4.
//   - Publish: rule 5 (offsets 0, 1, 2, … per partition; -1 when full).
//   - Ownership (ownerOf): rule 6 (sorted members, p mod memberCount).
//   - Join: rule 7; Leave: rule 8; rebalance: rule 9.
//   - Poll: rule 10; Ack: rule 11 and retention, rule 13; Retry: rule 12.
//
// Rule 14 (linearizability) is what the engine is checked against this model
// for; the model itself is trivially atomic.
//
// Result conventions, shared with engine so that a differential test can
// compare results with go-cmp: on error every result is its zero value (nil
// slice, false, 0); on success Join and Poll return non-nil slices, empty when
// there is nothing to return. Every returned slice or map is a fresh copy
// owned by the caller.
package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
)

// Limits from SPEC section 2, rules 1 to 4.
const (
	MinCapacity       = 1    // smallest capacityPerPartition New accepts, in records
	MaxCapacity       = 1000 // largest capacityPerPartition New accepts, in records
	MaxPartitions     = 64   // largest partitionCount Create accepts; the smallest is 1
	MaxPollRecords    = 64   // largest maxRecords Poll accepts; the smallest is 1
	MaxIdentifierSize = 64   // longest topic, group or member id, in bytes; the shortest is 1
)

// ErrInvalidArgument is returned (wrapped, with context) by New and by every
// Broker method when an argument breaks SPEC rule 1 to 4: a capacity outside
// 1..1000, a partitionCount outside 1..64, an invalid identifier, an unknown
// topic (every method but Create), a partition outside [0, partitionCount), a
// negative ack or retry offset, or a maxRecords outside 1..64. A call that
// returns it has changed nothing.
var ErrInvalidArgument = errors.New("invalid argument")

// ErrUnknownGroup is returned (wrapped) only by the inspection helpers
// (Members, Assignment, Committed, InFlight) when the topic exists but the
// group does not. The core API never returns it: there an absent group is a
// state condition answered with false or an empty result.
var ErrUnknownGroup = errors.New("unknown group")

// Record is a value snapshot of one retained record, as Poll and Retained
// return it. Changing a Record never changes the broker.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Payload   string
}

// Broker is the sequential reference broker. The zero value is not usable;
// call New. Not safe for concurrent use.
type Broker struct {
	capacity int32             // records each partition log may retain, 1..1000
	topics   map[string]*topic // by topic id; never shrinks
}

// topic is one topic: its fixed partition logs and its groups.
type topic struct {
	logs   []partitionLog    // index is the partition; len is partitionCount
	groups map[string]*group // by group id; never shrinks (rule 8)
}

// partitionLog holds the retained records of one partition.
type partitionLog struct {
	start    int64    // earliest retained offset: the offset of payloads[0], or the next offset when empty
	payloads []string // retained payloads in offset order; len <= capacity
}

// end is the log end: the offset the next successful publish gets.
func (l *partitionLog) end() int64 { return l.start + int64(len(l.payloads)) }

// group is one consumer group of one topic.
type group struct {
	members   []string // member ids sorted bytewise, no duplicates; may be empty
	committed []int64  // per partition: the next offset the group will be given
	inFlight  []bool   // per partition: the record at committed[p] is reserved to ownerOf(p)
}

// ownerOf returns the member that owns partition p under rule 6, or "" when
// the group has no members ("" is never a valid member id).
func (g *group) ownerOf(p int) string {
	if len(g.members) == 0 {
		return ""
	}
	return g.members[p%len(g.members)]
}

// partitionsOf returns member's partitions in ascending order; never nil.
func (g *group) partitionsOf(member string) []int32 {
	out := []int32{}
	for p := range g.committed {
		if g.ownerOf(p) == member {
			out = append(out, int32(p))
		}
	}
	return out
}

// rebalance replaces the membership with members (sorted, no duplicates) and
// so the whole assignment at once (rule 9): a partition whose owner changes
// loses its in-flight delivery, one that keeps its owner keeps it. Committed
// offsets never change here.
func (g *group) rebalance(members []string) {
	before := make([]string, len(g.committed))
	for p := range before {
		before[p] = g.ownerOf(p)
	}
	g.members = members
	for p := range before {
		if g.ownerOf(p) != before[p] {
			g.inFlight[p] = false
		}
	}
}

// New returns an empty broker whose partitions each retain at most
// capacityPerPartition records (1..1000, rule 1). It returns
// ErrInvalidArgument, and a nil broker, for any other capacity.
func New(capacityPerPartition int32) (*Broker, error) {
	if capacityPerPartition < MinCapacity || capacityPerPartition > MaxCapacity {
		return nil, fmt.Errorf("%w: capacity %d out of range [%d,%d]",
			ErrInvalidArgument, capacityPerPartition, MinCapacity, MaxCapacity)
	}
	return &Broker{capacity: capacityPerPartition, topics: map[string]*topic{}}, nil
}

// Create adds topic with partitionCount (1..64) empty partitions and returns
// true (rule 2). A duplicate topic returns false and is left untouched. It
// returns ErrInvalidArgument for an invalid topic id or partitionCount, even
// when the topic exists.
func (b *Broker) Create(topic string, partitionCount int32) (bool, error) {
	if err := checkID("topic", topic); err != nil {
		return false, err
	}
	if partitionCount < 1 || partitionCount > MaxPartitions {
		return false, fmt.Errorf("%w: topic %q: partitionCount %d out of range [1,%d]",
			ErrInvalidArgument, topic, partitionCount, MaxPartitions)
	}
	if _, ok := b.topics[topic]; ok {
		return false, nil
	}
	b.topics[topic] = newTopic(partitionCount)
	return true, nil
}

// Join creates group on topic if absent (each committed offset starting at
// the partition's log start), adds member if absent, rebalances, and returns
// member's partitions in ascending order (rules 6, 7, 9). The slice is the
// caller's and is non-nil, empty when member owns nothing. Joining twice
// changes nothing. It returns ErrInvalidArgument for an invalid identifier or
// an unknown topic.
func (b *Broker) Join(topic, group, member string) ([]int32, error) {
	t, err := b.lookup(topic, group, member)
	if err != nil {
		return nil, err
	}
	g, ok := t.groups[group]
	if !ok {
		g = t.newGroup()
		t.groups[group] = g
	}
	if i, found := slices.BinarySearch(g.members, member); !found {
		g.rebalance(slices.Insert(slices.Clone(g.members), i, member))
	}
	return g.partitionsOf(member), nil
}

// Leave removes member from group and rebalances (rules 8, 9), returning
// true. It returns false, changing nothing, when the group or the member is
// absent; a group whose last member leaves keeps its committed offsets and
// keeps counting for retention. It returns ErrInvalidArgument for an invalid
// identifier or an unknown topic.
func (b *Broker) Leave(topic, group, member string) (bool, error) {
	t, err := b.lookup(topic, group, member)
	if err != nil {
		return false, err
	}
	g, ok := t.groups[group]
	if !ok {
		return false, nil
	}
	i, found := slices.BinarySearch(g.members, member)
	if !found {
		return false, nil
	}
	g.rebalance(slices.Delete(slices.Clone(g.members), i, i+1))
	return true, nil
}

// Publish appends payload (any string, empty included) to partition of topic
// and returns the offset it got: 0, 1, 2, … per partition (rule 5). When the
// partition already retains capacity records it returns -1 and uses up no
// offset. It returns ErrInvalidArgument for an invalid or unknown topic or a
// partition outside [0, partitionCount).
func (b *Broker) Publish(topic string, partition int32, payload string) (int64, error) {
	t, err := b.lookup(topic)
	if err != nil {
		return 0, err
	}
	if err := t.checkPartition(topic, partition); err != nil {
		return 0, err
	}
	l := &t.logs[partition]
	if len(l.payloads) >= int(b.capacity) {
		return -1, nil
	}
	l.payloads = append(l.payloads, payload)
	return l.end() - 1, nil
}

// Poll walks member's partitions in ascending order and, for each with no
// in-flight delivery and a retained record at the group's committed offset,
// reserves that record for member, until maxRecords (1..64) are taken (rule
// 10). The result is the caller's, non-nil, in ascending partition order;
// it is empty for an absent group or member, or when nothing is eligible.
// Poll never creates a group. It returns ErrInvalidArgument for an invalid
// identifier, an unknown topic or maxRecords outside 1..64.
func (b *Broker) Poll(topic, group, member string, maxRecords int32) ([]Record, error) {
	t, err := b.lookup(topic, group, member)
	if err != nil {
		return nil, err
	}
	if maxRecords < 1 || maxRecords > MaxPollRecords {
		return nil, fmt.Errorf("%w: maxRecords %d out of range [1,%d]",
			ErrInvalidArgument, maxRecords, MaxPollRecords)
	}
	out := []Record{}
	g, ok := t.groups[group]
	if !ok {
		return out, nil
	}
	for p := range t.logs {
		if len(out) == int(maxRecords) {
			break
		}
		if g.ownerOf(p) != member || g.inFlight[p] {
			continue
		}
		l, c := &t.logs[p], g.committed[p]
		if c < l.start || c > l.end() {
			panic(fmt.Sprintf("model: topic %q partition %d: committed %d outside log [%d,%d]", topic, p, c, l.start, l.end()))
		}
		if c == l.end() {
			continue // nothing at the committed offset yet
		}
		g.inFlight[p] = true
		out = append(out, Record{Topic: topic, Partition: int32(p), Offset: c, Payload: l.payloads[c-l.start]})
	}
	return out, nil
}

// Ack commits the in-flight delivery (partition, offset) of member in group
// (rule 11): the committed offset advances by one, the delivery clears, and
// every record that all of the topic's groups have now committed past is
// removed from the log (rule 13). It returns true on success and false,
// changing nothing, unless member currently owns partition and offset is
// exactly its in-flight offset. It returns ErrInvalidArgument for an invalid
// identifier, an unknown topic, a partition outside [0, partitionCount) or a
// negative offset.
func (b *Broker) Ack(topic, group, member string, partition int32, offset int64) (bool, error) {
	t, g, ok, err := b.delivery(topic, group, member, partition, offset)
	if err != nil || !ok {
		return false, err
	}
	g.committed[partition]++
	g.inFlight[partition] = false
	t.trim()
	return true, nil
}

// Retry clears the in-flight delivery (partition, offset) of member in group
// without committing it, so the next poll delivers the same record again
// (rule 12). It returns true on success and false, changing nothing, under
// the same conditions as Ack, and ErrInvalidArgument for the same arguments.
func (b *Broker) Retry(topic, group, member string, partition int32, offset int64) (bool, error) {
	_, g, ok, err := b.delivery(topic, group, member, partition, offset)
	if err != nil || !ok {
		return false, err
	}
	g.inFlight[partition] = false
	return true, nil
}

// delivery validates the arguments of Ack and Retry and reports whether
// member currently owns partition with offset exactly in flight.
func (b *Broker) delivery(topic, group, member string, partition int32, offset int64) (*topic, *group, bool, error) {
	t, err := b.lookup(topic, group, member)
	if err != nil {
		return nil, nil, false, err
	}
	if err := t.checkPartition(topic, partition); err != nil {
		return nil, nil, false, err
	}
	if offset < 0 {
		return nil, nil, false, fmt.Errorf("%w: topic %q: partition %d: negative offset %d",
			ErrInvalidArgument, topic, partition, offset)
	}
	g, ok := t.groups[group]
	if !ok {
		return nil, nil, false, nil
	}
	p := int(partition)
	ok = g.ownerOf(p) == member && g.inFlight[p] && g.committed[p] == offset
	return t, g, ok, nil
}

// trim removes from every partition the records that all groups have
// committed past (rule 13). With no groups it removes nothing.
func (t *topic) trim() {
	if len(t.groups) == 0 {
		return
	}
	for p := range t.logs {
		l := &t.logs[p]
		low := l.end()
		for _, g := range t.groups {
			low = min(low, g.committed[p])
		}
		if n := low - l.start; n > 0 {
			l.payloads = slices.Clone(l.payloads[n:])
			l.start = low
		}
	}
}

func newTopic(partitionCount int32) *topic {
	return &topic{logs: make([]partitionLog, partitionCount), groups: map[string]*group{}}
}

// newGroup returns a memberless group positioned at each log start (rule 7).
func (t *topic) newGroup() *group {
	g := &group{committed: make([]int64, len(t.logs)), inFlight: make([]bool, len(t.logs))}
	for p := range t.logs {
		g.committed[p] = t.logs[p].start
	}
	return g
}

func (t *topic) checkPartition(topic string, partition int32) error {
	if partition < 0 || int(partition) >= len(t.logs) {
		return fmt.Errorf("%w: topic %q: partition %d out of range [0,%d)",
			ErrInvalidArgument, topic, partition, len(t.logs))
	}
	return nil
}

// lookup checks the topic id, then the ids that follow it (group, then
// member), and only then that the topic exists (rules 3, 4).
func (b *Broker) lookup(topic string, groupAndMember ...string) (*topic, error) {
	if err := checkID("topic", topic); err != nil {
		return nil, err
	}
	kinds := [...]string{"group", "member"}
	for i, id := range groupAndMember {
		if err := checkID(kinds[i], id); err != nil {
			return nil, err
		}
	}
	t, ok := b.topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: unknown topic %q", ErrInvalidArgument, topic)
	}
	return t, nil
}

// checkID enforces rule 3: 1 to 64 bytes, each one of A-Z a-z 0-9 _ -.
func checkID(kind, id string) error {
	if len(id) < 1 || len(id) > MaxIdentifierSize {
		return fmt.Errorf("%w: %s id %q: length %d out of range [1,%d]",
			ErrInvalidArgument, kind, id, len(id), MaxIdentifierSize)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s id %q: byte %#x at %d is not one of A-Z a-z 0-9 _ -",
				ErrInvalidArgument, kind, id, c, i)
		}
	}
	return nil
}

// Clone returns a deep copy of b that shares nothing mutable with it.
func (b *Broker) Clone() *Broker {
	c := &Broker{capacity: b.capacity, topics: make(map[string]*topic, len(b.topics))}
	for name, t := range b.topics {
		ct := &topic{logs: make([]partitionLog, len(t.logs)), groups: make(map[string]*group, len(t.groups))}
		for p, l := range t.logs {
			ct.logs[p] = partitionLog{start: l.start, payloads: slices.Clone(l.payloads)}
		}
		for gname, g := range t.groups {
			ct.groups[gname] = &group{
				members:   slices.Clone(g.members),
				committed: slices.Clone(g.committed),
				inFlight:  slices.Clone(g.inFlight),
			}
		}
		c.topics[name] = ct
	}
	return c
}

// Equal reports whether b and o hold exactly the same state: capacity,
// topics, retained records with their offsets, groups, members, committed
// offsets and in-flight deliveries. Two equal brokers answer every future
// call identically.
func (b *Broker) Equal(o *Broker) bool {
	if b.capacity != o.capacity || len(b.topics) != len(o.topics) {
		return false
	}
	for name, t := range b.topics {
		ot, ok := o.topics[name]
		if !ok || len(t.logs) != len(ot.logs) || len(t.groups) != len(ot.groups) {
			return false
		}
		for p := range t.logs {
			if t.logs[p].start != ot.logs[p].start || !slices.Equal(t.logs[p].payloads, ot.logs[p].payloads) {
				return false
			}
		}
		for gname, g := range t.groups {
			og, ok := ot.groups[gname]
			if !ok || !slices.Equal(g.members, og.members) ||
				!slices.Equal(g.committed, og.committed) || !slices.Equal(g.inFlight, og.inFlight) {
				return false
			}
		}
	}
	return true
}

// Hash returns an FNV-1a hash of a canonical, length-prefixed encoding of the
// state (topics and groups in sorted order). Equal states hash equal.
func (b *Broker) Hash() uint64 {
	h := fnv.New64a()
	var buf [binary.MaxVarintLen64]byte
	num := func(v int64) { h.Write(binary.AppendVarint(buf[:0], v)) }
	str := func(s string) { num(int64(len(s))); h.Write([]byte(s)) }
	num(int64(b.capacity))
	num(int64(len(b.topics)))
	for _, name := range slices.Sorted(maps.Keys(b.topics)) {
		t := b.topics[name]
		str(name)
		num(int64(len(t.logs)))
		for _, l := range t.logs {
			num(l.start)
			num(int64(len(l.payloads)))
			for _, s := range l.payloads {
				str(s)
			}
		}
		num(int64(len(t.groups)))
		for _, gname := range slices.Sorted(maps.Keys(t.groups)) {
			g := t.groups[gname]
			str(gname)
			num(int64(len(g.members)))
			for _, m := range g.members {
				str(m)
			}
			for p := range g.committed {
				num(g.committed[p])
				if g.inFlight[p] {
					num(1)
				} else {
					num(0)
				}
			}
		}
	}
	return h.Sum64()
}

// String describes the whole state deterministically, topics and groups
// sorted by id, one line per topic, partition log, group and group partition:
//
//	capacity=2
//	topic orders partitions=1
//	  log p0 [0,2) "a" "b"
//	  group billing members=[m1]
//	    p0 owner=m1 committed=0 inflight
//
// Payloads are Go-quoted; a partition of a memberless group shows owner=-.
func (b *Broker) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "capacity=%d\n", b.capacity)
	for _, name := range slices.Sorted(maps.Keys(b.topics)) {
		t := b.topics[name]
		fmt.Fprintf(&sb, "topic %s partitions=%d\n", name, len(t.logs))
		for p, l := range t.logs {
			fmt.Fprintf(&sb, "  log p%d [%d,%d)", p, l.start, l.end())
			for _, s := range l.payloads {
				fmt.Fprintf(&sb, " %q", s)
			}
			sb.WriteByte('\n')
		}
		for _, gname := range slices.Sorted(maps.Keys(t.groups)) {
			g := t.groups[gname]
			fmt.Fprintf(&sb, "  group %s members=[%s]\n", gname, strings.Join(g.members, " "))
			for p := range g.committed {
				owner := g.ownerOf(p)
				if owner == "" {
					owner = "-"
				}
				fmt.Fprintf(&sb, "    p%d owner=%s committed=%d", p, owner, g.committed[p])
				if g.inFlight[p] {
					sb.WriteString(" inflight")
				}
				sb.WriteByte('\n')
			}
		}
	}
	return sb.String()
}

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

// Retained returns partition's retained records in offset order; the slice
// is the caller's and non-nil. It returns ErrInvalidArgument like
// LogStartOffset.
func (b *Broker) Retained(topic string, partition int32) ([]Record, error) {
	l, err := b.log(topic, partition)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(l.payloads))
	for i, s := range l.payloads {
		out = append(out, Record{Topic: topic, Partition: partition, Offset: l.start + int64(i), Payload: s})
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

// Members returns group's member ids in byte order, the order ownership uses;
// the slice is the caller's and non-nil. It returns ErrInvalidArgument for an
// invalid identifier or an unknown topic, and ErrUnknownGroup for an absent
// group.
func (b *Broker) Members(topic, group string) ([]string, error) {
	_, g, err := b.group(topic, group)
	if err != nil {
		return nil, err
	}
	return append([]string{}, g.members...), nil
}

// Assignment returns, for each member of group, its partitions in ascending
// order (rule 6); the map and its slices are the caller's, and the map is
// empty for a memberless group. It returns errors like Members.
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
// owner). It returns errors like Committed.
func (b *Broker) InFlight(topic, group string, partition int32) (bool, error) {
	g, err := b.groupPartition(topic, group, partition)
	if err != nil {
		return false, err
	}
	return g.inFlight[partition], nil
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

// CheckInvariants returns a non-nil error describing the first broken
// invariant of the state, or nil. The invariants: every log retains at most
// capacity records from a non-negative start; every group has one committed
// offset per partition inside [log start, log end]; members are sorted,
// distinct and valid; an in-flight delivery has an owner and a retained
// record; with groups present, the log start is the smallest committed offset
// (nothing all groups committed past is still retained).
func (b *Broker) CheckInvariants() error {
	if b.capacity < MinCapacity || b.capacity > MaxCapacity {
		return fmt.Errorf("capacity %d out of range", b.capacity)
	}
	for name, t := range b.topics {
		if err := checkID("topic", name); err != nil {
			return err
		}
		if len(t.logs) < 1 || len(t.logs) > MaxPartitions {
			return fmt.Errorf("topic %s: %d partitions", name, len(t.logs))
		}
		for p, l := range t.logs {
			if l.start < 0 || len(l.payloads) > int(b.capacity) {
				return fmt.Errorf("topic %s p%d: log [%d,%d) with capacity %d", name, p, l.start, l.end(), b.capacity)
			}
		}
		for gname, g := range t.groups {
			if err := checkID("group", gname); err != nil {
				return err
			}
			if len(g.committed) != len(t.logs) || len(g.inFlight) != len(t.logs) {
				return fmt.Errorf("topic %s group %s: per-partition state for %d/%d partitions, want %d",
					name, gname, len(g.committed), len(g.inFlight), len(t.logs))
			}
			for i, m := range g.members {
				if err := checkID("member", m); err != nil {
					return err
				}
				if i > 0 && g.members[i-1] >= m {
					return fmt.Errorf("topic %s group %s: members %q not sorted and distinct", name, gname, g.members)
				}
			}
			for p, l := range t.logs {
				c := g.committed[p]
				if c < l.start || c > l.end() {
					return fmt.Errorf("topic %s group %s p%d: committed %d outside log [%d,%d]", name, gname, p, c, l.start, l.end())
				}
				if g.inFlight[p] && (len(g.members) == 0 || c == l.end()) {
					return fmt.Errorf("topic %s group %s p%d: in flight with %d members, committed %d, log end %d",
						name, gname, p, len(g.members), c, l.end())
				}
			}
		}
		if len(t.groups) == 0 {
			continue
		}
		for p, l := range t.logs {
			low := l.end()
			for _, g := range t.groups {
				low = min(low, g.committed[p])
			}
			if low != l.start {
				return fmt.Errorf("topic %s p%d: log start %d, lowest committed %d", name, p, l.start, low)
			}
		}
	}
	return nil
}
