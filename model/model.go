// Package model is the executable specification of the Tributary broker
// contract: a pure, sequential reference implementation of SPEC rules 1–25
// (the core contract, rules 1–14, the Tributary features, rules 15–23,
// and member liveness, rules 24–25; all in docs/contract.md),
// with the same API shape as package engine.
//
//	b, _ := model.New(2, model.WithReplayWindow(1))
//	b.Create("orders", 1)
//	b.Publish("orders", 0, "a")       // 0
//	b.Join("orders", "billing", "m1") // [0]
//	rs, _ := b.Poll("orders", "billing", "m1", 8)
//	b.Ack("orders", "billing", "m1", 0, rs[0].Offset)
//
// The model is deliberately simple rather than fast: plain maps and slices, no
// locks, no goroutines, no I/O. A *Broker is not safe for concurrent use; the
// caller (a test, a porcupine model, a benchmark baseline) serialises calls.
// Every method is a deterministic function of the state, the arguments and
// the readings of the broker clock (WithClock, SetClock), so the model
// doubles as the state of a porcupine model: Clone copies it, Equal compares
// it, Hash and String summarise it.
//
// Which SPEC rule each part implements:
//
//   - New: rule 1 (capacity 1..1000; up to 16,777,216 with
//     WithExtendedCapacity, docs/contract.md, the typed library's capacity); its options: WithReplayWindow rule 21,
//     WithAckTimeout rule 22, WithMaxMessageBytes rule 15,
//     WithSessionTimeout rule 24, WithClock the clock of rules 15 (message
//     times), 22 (delivery ages) and 24 (members' last-seen instants).
//   - Create: rule 2 (partitionCount 1..64, duplicate is false).
//   - Identifier checks in every method: rule 3; argument checks: rules 4
//     and 15 (validation first; an invalid call changes nothing).
//   - Publish, PublishMessage: rules 5 and 15 (offsets 0, 1, 2, … per
//     partition; -1 when full), and 21 (a full partition gives up its oldest
//     fully committed record when a replay window is set).
//   - Ownership: rules 6 and 18. Each group stores its owner per partition,
//     computed by the group's Assignor at every rebalance (the built-ins'
//     answers are the model's own, assignors.go; others through assign.Run)
//     with the previous owners (Sticky reads them); RoundRobin is rule 6.
//   - Join: rules 7 and 17; Leave: rule 8; rebalance: rule 9, applied by
//     Join, Leave, SetAssignor (rule 18) and AddPartitions (rule 19).
//   - Poll: rules 10, 16 (Record.Attempt) and 22 (ack timeout); PollPartition
//     is the same for one partition (engine's AppendPollPartition); Ack:
//     rule 11 and retention, rules 13 and 21; Retry: rule 12.
//   - CreateGroup, DeleteGroup: rule 17, and CreateGroupAt, a group at
//     the log end (engine's); SetAssignor: rule 18;
//     AddPartitions: rule 19; Seek: rule 20; Describe: rule 23, and
//     Snapshot, Describe with the retained records (engine's Snapshot).
//   - Session timeout: rule 24. With WithSessionTimeout every valid call
//     on a topic but Create first expires that topic's members whose
//     last-seen instant is the timeout or more before the clock (expire),
//     then acts; Join, Rejoin, Poll, PollPartition, Ack, Retry and
//     Heartbeat refresh the named member's last-seen. Heartbeat: rule 24;
//     Rejoin: rule 25.
//
// Rule 14 (linearizability) is what the engine is checked against this model
// for; the model itself is trivially atomic.
//
// Result conventions, shared with engine so that a differential test can
// compare results with go-cmp: on error every result is its zero value (nil
// slice, false, 0, zero TopicDescription or TopicSnapshot) except Publish
// and PublishMessage, which return -1 with any error; on success Join, Poll
// and PollPartition return non-nil slices, empty when there is nothing to
// return (engine's AppendPollPartition appends nothing instead). Every
// returned slice or map, a Record's Headers included, is a fresh copy owned
// by the caller.
package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/f91dcac0/tributary/engine/assign"
	"github.com/f91dcac0/tributary/internal/message"
)

// Limits from rules 1 to 4 and rule 19.
const (
	MinCapacity = 1    // smallest capacityPerPartition New accepts, in records
	MaxCapacity = 1000 // largest capacityPerPartition New accepts, in records
	// MaxExtendedCapacity is the largest capacityPerPartition New accepts
	// with WithExtendedCapacity, in records (docs/contract.md, the typed library's capacity).
	MaxExtendedCapacity = 1 << 24
	MaxPartitions       = 64 // largest partitionCount Create and AddPartitions reach; the smallest is 1
	MaxPollRecords      = 64 // largest maxRecords Poll accepts; the smallest is 1
	MaxIdentifierSize   = 64 // longest topic, group or member id, in bytes; the shortest is 1
)

// ErrInvalidArgument is returned (wrapped, with context) by New and by every
// Broker method when an argument breaks SPEC rules 1 to 4 or 15 to 20: a
// capacity outside 1..1000 (1..16,777,216 with WithExtendedCapacity), an
// option out of range or nil, a partitionCount outside 1..64, an invalid
// identifier, an unknown topic (every method but Create), a partition outside [0, partitionCount), a negative offset, a
// maxRecords outside 1..64, an AddPartitions count below 1 or past 64
// partitions in all, a nil Assignor, or a message over WithMaxMessageBytes.
// A call that returns it has changed nothing.
var ErrInvalidArgument = errors.New("invalid argument")

// ErrOffsetOutOfRange is returned (wrapped) by Seek when the offset is
// outside [log start, log end] of the partition (SPEC rule 20). Nothing
// changes.
var ErrOffsetOutOfRange = errors.New("offset out of range")

// ErrGroupNotEmpty is returned (wrapped) by DeleteGroup when the group still
// has members (SPEC rule 17). Nothing changes.
var ErrGroupNotEmpty = errors.New("consumer group not empty")

// ErrInvalidAssignment is returned (wrapped) by Join, Leave, SetAssignor and
// AddPartitions when the group's Assignor answers something other than one
// current member per partition, or panics (SPEC rule 18). The call changed
// nothing. It
// is the very variable assign.ErrInvalidAssignment, so errors.Is matches
// the engine's errors too.
var ErrInvalidAssignment = assign.ErrInvalidAssignment

// ErrUnknownGroup is returned (wrapped) only by the inspection helpers
// (Members, Assignment, Committed, InFlight, Attempts) when the topic exists
// but the group does not. The core API never returns it: there an absent
// group is a state condition answered with false or an empty result.
var ErrUnknownGroup = errors.New("unknown group")

// Assignor decides which member of a group owns each partition (SPEC rule
// 18); see package assign for its contract. It is compared by Name: two
// assignors with the same Name are the same state to Equal, Hash and String.
type Assignor = assign.Assignor

// The built-in assignors (SPEC rule 18), the same values as package assign's.
var (
	// RoundRobin gives partition p to member p mod n, members sorted
	// bytewise (rule 6). Join uses it for the groups it creates.
	RoundRobin Assignor = assign.RoundRobin
	// Range gives contiguous blocks in member order from partition 0: the
	// first P mod n members take ⌈P/n⌉ partitions, the rest ⌊P/n⌋.
	Range Assignor = assign.Range
	// Sticky gives every member ⌊P/n⌋ or ⌈P/n⌉ partitions and, among such
	// assignments, keeps the most partitions with their previous owner.
	Sticky Assignor = assign.Sticky
)

// Header is one user header of a message: an ordered key/value pair. Keys
// need not be unique; the broker keeps headers in the order given.
type Header struct{ Key, Value string }

// Message is what PublishMessage appends (SPEC rule 15). Publish(t, p, s)
// is PublishMessage(t, p, Message{Payload: s}).
type Message struct {
	Key     string   // optional; producers' partitioners read it, the broker only stores it
	Headers []Header // user headers, in order; the broker keeps its own copy
	Payload string   // the record's value, possibly empty
	// Time is the message's creation time; the zero Time means "now": the
	// broker clock (WithClock, default time.Now) read during the publish.
	Time time.Time
}

// Record is a value snapshot of one retained record, as Poll and Retained
// return it. Changing a Record, its Headers included, never changes the
// broker.
type Record struct {
	Topic     string // the topic's id
	Partition int32  // the partition, in [0, partitionCount)
	Offset    int64  // the record's offset in its partition, from 0
	Payload   string // the published payload, possibly empty

	Key     string    // the message key, possibly empty
	Headers []Header  // a copy of the message headers, owned by the caller; nil when it had none
	Time    time.Time // the message's creation time: Message.Time, or the broker clock at publish
	// Attempt counts the deliveries of this record to the polling group on
	// its partition, this one included (SPEC rule 16): 1 the first time, +1
	// after each Retry, cancelling rebalance or ack timeout. Retained
	// reports 0: it is not a delivery.
	Attempt int32
}

// Broker is the sequential reference broker. The zero value is not usable;
// call New. Not safe for concurrent use.
type Broker struct {
	capacity        int32             // records each partition log may retain, 1..1000 (1..16,777,216 extended)
	window          int32             // WithReplayWindow: fully committed records kept per partition, 0..capacity
	clock           func() time.Time  // WithClock or SetClock; never nil
	ackTimeout      time.Duration     // WithAckTimeout; 0: no timeout
	maxMessageBytes int               // WithMaxMessageBytes; 0: no limit
	sessionTimeout  time.Duration     // WithSessionTimeout; 0: members never expire
	topics          map[string]*topic // by topic id; never shrinks
}

// topic is one topic: its partition logs and its groups.
type topic struct {
	logs   []partitionLog    // index is the partition; len is partitionCount, grown only by AddPartitions
	groups map[string]*group // by group id; shrinks only by DeleteGroup
}

// partitionLog holds the retained records of one partition.
type partitionLog struct {
	start   int64   // earliest retained offset: the offset of entries[0], or the next offset when empty
	entries []entry // retained records in offset order; len <= capacity
}

// entry is one retained record. Its headers are never changed once stored,
// so clones may share them.
type entry struct {
	key     string
	headers []Header // nil when the message had none
	payload string
	time    time.Time
}

// end is the log end: the offset the next successful publish gets.
func (l *partitionLog) end() int64 { return l.start + int64(len(l.entries)) }

// group is one consumer group of one topic. The per-partition slices all
// have one element per partition of the topic.
type group struct {
	assignor    Assignor    // never nil
	members     []string    // member ids sorted bytewise, no duplicates; may be empty
	owners      []string    // per partition: the owning member; all "" when members is empty
	committed   []int64     // per partition: the next offset the group will be given
	inFlight    []bool      // per partition: the record at committed[p] is reserved to owners[p]
	attempts    []int32     // per partition: deliveries so far of the record at committed[p]
	deliveredAt []time.Time // per partition: clock reading at the in-flight delivery; zero unless in flight under an ack timeout
	// lastSeen holds, under a session timeout, each member's last-seen
	// instant on the broker clock (rule 24): exactly the members as keys.
	// Empty without a session timeout. Never nil.
	lastSeen map[string]time.Time
}

// partitionsOf returns member's partitions in ascending order; never nil.
func (g *group) partitionsOf(member string) []int32 {
	out := []int32{}
	for p, o := range g.owners {
		if o == member {
			out = append(out, int32(p))
		}
	}
	return out
}

// assignment returns the owners of the partitions under a for members,
// given the previous owners (one per partition, "" for none), or the
// assignor's error (wrapping ErrInvalidAssignment). A memberless group's
// owners are all "" and its assignor is not asked. A built-in assignor's
// answer is the model's own (referenceOwners, from rule 18's text); any
// other goes through assign.Run, which gives the assignor its own copies
// of members and previous, so it cannot change the state, and returns a
// slice that is ours.
func assignment(a Assignor, members, previous []string) ([]string, error) {
	if len(members) == 0 {
		return make([]string, len(previous)), nil
	}
	if owner, ok := referenceOwners(a, members, previous); ok {
		return owner, nil
	}
	return assign.Run(a, members, previous)
}

// rebalance replaces the membership with members (sorted, no duplicates) and
// the whole assignment with owners at once (rule 9): a partition whose owner
// changes loses its in-flight delivery, one that keeps its owner keeps it.
// Committed offsets and attempts never change here.
func (g *group) rebalance(members, owners []string) {
	for p := range g.owners {
		if owners[p] != g.owners[p] {
			g.inFlight[p] = false
			g.deliveredAt[p] = time.Time{}
		}
	}
	g.members, g.owners = members, owners
}

// Option configures a Broker at New. New checks each value and returns
// ErrInvalidArgument for one out of range or for a nil Option.
type Option func(*config)

type config struct {
	window     int32            // WithReplayWindow
	clock      func() time.Time // WithClock
	clockSet   bool             // WithClock was given (nil is then an error)
	ackTimeout time.Duration    // WithAckTimeout
	ackSet     bool             // WithAckTimeout was given (0 is then an error)
	maxBytes   int              // WithMaxMessageBytes
	maxSet     bool             // WithMaxMessageBytes was given (0 is then an error)
	session    time.Duration    // WithSessionTimeout
	sessionSet bool             // WithSessionTimeout was given (0 is then an error)
	extended   bool             // WithExtendedCapacity
}

// WithExtendedCapacity makes New accept a capacityPerPartition up to
// MaxExtendedCapacity (16,777,216) records instead of rule 1's 1,000, as
// engine.WithExtendedCapacity does (docs/contract.md, the typed library's capacity). Nothing else
// changes.
func WithExtendedCapacity() Option {
	return func(c *config) { c.extended = true }
}

// WithReplayWindow makes each partition keep up to records of its most
// recent fully committed records (committed by every group of the topic)
// instead of removing them at once, so that Seek can replay them; a publish
// to a full partition then removes the oldest fully committed record to make
// room (SPEC rule 21). records is 0..capacityPerPartition, in records; the
// default 0 is exactly SPEC rule 13.
func WithReplayWindow(records int32) Option {
	return func(c *config) { c.window = records }
}

// WithClock sets the broker clock, read for a message's Time when it has
// none, with WithAckTimeout once per Poll for delivery ages and, with
// WithSessionTimeout, once per valid call on a topic (all but Create) for
// expiry and last-seen instants. now must not be nil; the default is
// time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.clock, c.clockSet = now, true }
}

// WithAckTimeout makes an in-flight delivery that is d or more old by the
// broker clock stop blocking its partition: the owner's next Poll delivers
// it again with Attempt + 1 (SPEC rule 22). Until then it stays in flight
// and Ack and Retry of it work. d must be > 0; the default is no timeout.
func WithAckTimeout(d time.Duration) Option {
	return func(c *config) { c.ackTimeout, c.ackSet = d, true }
}

// WithMaxMessageBytes bounds one message: a PublishMessage whose key, header
// keys, header values and payload add up to more than n bytes returns
// ErrInvalidArgument and changes nothing (SPEC rule 15). n must be > 0; the
// default is no limit.
func WithMaxMessageBytes(n int) Option {
	return func(c *config) { c.maxBytes, c.maxSet = n, true }
}

// WithSessionTimeout makes members expire (SPEC rule 24): every member has
// a last-seen instant on the broker clock, set by its Join or Rejoin and
// refreshed by each valid Join, Rejoin, Poll, PollPartition, Ack, Retry or
// Heartbeat naming it while it is a member, whatever that call returns. A
// member last seen d or more before the clock's reading is expired and
// leaves its group as by Leave; expiry is lazy: every valid call on a topic
// (all but Create) first expires that topic's expired members, at that
// call's clock reading, then acts. d must be > 0; the default is no
// timeout, under which members never expire and no last-seen is kept.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.session, c.sessionSet = d, true }
}

// New returns an empty broker whose partitions each retain at most
// capacityPerPartition records (1..1000, rule 1; 1..16,777,216 with
// WithExtendedCapacity), configured by opts. It returns
// ErrInvalidArgument, and a nil broker, for any other capacity, a nil
// Option or an option value out of range.
func New(capacityPerPartition int32, opts ...Option) (*Broker, error) {
	c := config{clock: time.Now}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: option %d is nil", ErrInvalidArgument, i)
		}
		o(&c)
	}
	maxCap := int32(MaxCapacity)
	if c.extended {
		maxCap = MaxExtendedCapacity
	}
	if capacityPerPartition < MinCapacity || capacityPerPartition > maxCap {
		return nil, fmt.Errorf("%w: capacity %d out of range [%d,%d]",
			ErrInvalidArgument, capacityPerPartition, MinCapacity, maxCap)
	}
	switch {
	case c.window < 0 || c.window > capacityPerPartition:
		return nil, fmt.Errorf("%w: replay window %d out of range [0,%d] (the capacity)",
			ErrInvalidArgument, c.window, capacityPerPartition)
	case c.clockSet && c.clock == nil:
		return nil, fmt.Errorf("%w: nil clock", ErrInvalidArgument)
	case c.ackSet && c.ackTimeout <= 0:
		return nil, fmt.Errorf("%w: ack timeout %v, want > 0", ErrInvalidArgument, c.ackTimeout)
	case c.maxSet && c.maxBytes <= 0:
		return nil, fmt.Errorf("%w: max message bytes %d, want > 0", ErrInvalidArgument, c.maxBytes)
	case c.sessionSet && c.session <= 0:
		return nil, fmt.Errorf("%w: session timeout %v, want > 0", ErrInvalidArgument, c.session)
	}
	return &Broker{
		capacity:        capacityPerPartition,
		window:          c.window,
		clock:           c.clock,
		ackTimeout:      c.ackTimeout,
		maxMessageBytes: c.maxBytes,
		sessionTimeout:  c.session,
		topics:          map[string]*topic{},
	}, nil
}

// SetClock replaces the broker clock (see WithClock); a nil now restores the
// default, time.Now. It is for checkers and tests: Clone shares the clock
// function, so a porcupine model rebinds a cloned state's clock with it. The
// clock is not state: Equal, Hash and String ignore it.
func (b *Broker) SetClock(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	b.clock = now
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

// Join creates group on topic if absent (with RoundRobin, each committed
// offset at the partition's log start), adds member if absent, rebalances
// with the group's assignor, and returns member's partitions in ascending
// order (rules 6, 7, 9, 17, 18). The slice is the caller's and is non-nil,
// empty when member owns nothing. Joining twice changes nothing. It returns
// ErrInvalidArgument for an invalid identifier or an unknown topic, and an
// error wrapping ErrInvalidAssignment, changing nothing (the member is not
// added, the group not created), when the assignor's answer is invalid.
//
// Under a session timeout (rule 24) it first expires the topic's expired
// members, then sets member's last-seen to the clock's reading, whether it
// was added or already a member.
func (b *Broker) Join(topic, group, member string) ([]int32, error) {
	t, err := b.lookup(topic, group, member)
	if err != nil {
		return nil, err
	}
	now := b.enter(t)
	return b.join(t, topic, group, member, now)
}

// join is Join after validation and expiry, at clock reading now.
func (b *Broker) join(t *topic, topic, group, member string, now time.Time) ([]int32, error) {
	g, exists := t.groups[group]
	if !exists {
		g = t.newGroup(assign.RoundRobin)
	}
	if i, found := slices.BinarySearch(g.members, member); !found {
		members := slices.Insert(slices.Clone(g.members), i, member)
		owners, err := assignment(g.assignor, members, g.owners)
		if err != nil {
			return nil, fmt.Errorf("topic %q: group %q: join of %q: %w", topic, group, member, err)
		}
		g.rebalance(members, owners)
	}
	if !exists {
		t.groups[group] = g
	}
	b.refresh(g, member, now)
	return g.partitionsOf(member), nil
}

// Rejoin is Join for a new incarnation of member (SPEC rule 25): if member
// is already a member of group (after the expiry of rule 24), each of its
// in-flight deliveries is cancelled as by Retry (attempts are kept, so the
// next poll delivers the record again with Attempt + 1), its last-seen is
// refreshed, and its membership and assignment stay as they are: no
// rebalance. Otherwise it is exactly Join, group creation and
// ErrInvalidAssignment included. It returns member's partitions in
// ascending order, a non-nil slice owned by the caller, and
// ErrInvalidArgument for an invalid identifier or an unknown topic. It
// works the same without a session timeout.
func (b *Broker) Rejoin(topic, group, member string) ([]int32, error) {
	t, err := b.lookup(topic, group, member)
	if err != nil {
		return nil, err
	}
	now := b.enter(t)
	g, ok := t.groups[group]
	if !ok {
		return b.join(t, topic, group, member, now)
	}
	if _, found := slices.BinarySearch(g.members, member); !found {
		return b.join(t, topic, group, member, now)
	}
	for p, o := range g.owners {
		if o == member && g.inFlight[p] {
			g.inFlight[p] = false
			g.deliveredAt[p] = time.Time{}
		}
	}
	b.refresh(g, member, now)
	return g.partitionsOf(member), nil
}

// Heartbeat reports whether member is a member of group and, under a
// session timeout, refreshes its last-seen instant (SPEC rule 24); it
// changes nothing else. It first expires the topic's expired members, so
// an expired member's Heartbeat is false and does not bring it back: it
// must Join again. It returns false for an absent group or member, and
// ErrInvalidArgument for an invalid identifier or an unknown topic (it
// validates like Poll). Without a session timeout it only reports
// membership.
func (b *Broker) Heartbeat(topic, group, member string) (bool, error) {
	_, g, now, err := b.enterGroup(topic, group, member)
	if g == nil {
		return false, err
	}
	if _, found := slices.BinarySearch(g.members, member); !found {
		return false, nil
	}
	b.refresh(g, member, now)
	return true, nil
}

// enter is the first step of every valid call on topic t but Create (rule
// 24): under a session timeout it reads the broker clock once, expires the
// members of t that are expired at that reading, and returns it; without
// one it returns the zero Time and reads nothing.
func (b *Broker) enter(t *topic) time.Time {
	if b.sessionTimeout == 0 {
		return time.Time{}
	}
	now := b.clock()
	b.expire(t, now)
	return now
}

// expire removes from every group of t the members last seen
// sessionTimeout or more before now, each group's expired members in one
// rebalance with its assignor, exactly as by Leave (rules 9, 24): their
// in-flight deliveries are cancelled, committed offsets and attempts kept.
// A group whose assignor refuses that rebalance changes nothing: its
// expired members stay, as after a failed Leave (rule 18), and the call
// that expires goes on.
func (b *Broker) expire(t *topic, now time.Time) {
	for _, g := range t.groups {
		var members []string
		for _, m := range g.members {
			if now.Sub(g.lastSeen[m]) < b.sessionTimeout {
				members = append(members, m)
			}
		}
		if len(members) == len(g.members) {
			continue
		}
		owners, err := assignment(g.assignor, members, g.owners)
		if err != nil {
			continue
		}
		for _, m := range g.members {
			if _, kept := slices.BinarySearch(members, m); !kept {
				delete(g.lastSeen, m)
			}
		}
		g.rebalance(members, owners)
	}
}

// refresh sets member's last-seen instant to now if there is a session
// timeout and member is a member of g (rule 24). A last-seen only grows: a
// reading before the one stored (a clock set back) leaves it, as the
// engine does; a member just added has none yet and gets now.
func (b *Broker) refresh(g *group, member string, now time.Time) {
	if b.sessionTimeout == 0 {
		return
	}
	if _, found := slices.BinarySearch(g.members, member); !found {
		return
	}
	if seen, ok := g.lastSeen[member]; !ok || now.After(seen) {
		g.lastSeen[member] = now
	}
}

// Leave removes member from group and rebalances the remaining members with
// the group's assignor (rules 8, 9, 18), returning true. It returns false,
// changing nothing, when the group or the member is absent (under a session
// timeout, after expiring the topic's expired members: an expired member's
// Leave is false); a group whose
// last member leaves keeps its committed offsets and attempts, has no owners
// and keeps counting for retention. It returns ErrInvalidArgument for an
// invalid identifier or an unknown topic, and an error wrapping
// ErrInvalidAssignment, changing nothing (the member stays), when the
// assignor's answer is invalid.
func (b *Broker) Leave(topic, group, member string) (bool, error) {
	_, g, _, err := b.enterGroup(topic, group, member)
	if g == nil {
		return false, err
	}
	i, found := slices.BinarySearch(g.members, member)
	if !found {
		return false, nil
	}
	members := slices.Delete(slices.Clone(g.members), i, i+1)
	owners, err := assignment(g.assignor, members, g.owners)
	if err != nil {
		return false, fmt.Errorf("topic %q: group %q: leave of %q: %w", topic, group, member, err)
	}
	g.rebalance(members, owners)
	delete(g.lastSeen, member)
	return true, nil
}

// Publish is PublishMessage(topic, partition, Message{Payload: payload})
// (rules 5, 15): it returns the offset the payload got, -1 when the
// partition is full, and -1 with ErrInvalidArgument for an invalid or
// unknown topic, a partition outside [0, partitionCount), or a payload over
// WithMaxMessageBytes.
func (b *Broker) Publish(topic string, partition int32, payload string) (int64, error) {
	return b.PublishMessage(topic, partition, Message{Payload: payload})
}

// PublishMessage appends m to partition of topic and returns the offset it
// got: 0, 1, 2, … per partition (rules 5, 15). The broker keeps its own copy
// of m.Headers; a zero m.Time is replaced by the broker clock, read once,
// only when the record is appended. When the partition already retains
// capacity records, it removes the oldest fully committed record to make room
// if a replay window is set and there is one (rule 21); otherwise it returns
// -1, uses up no offset and changes nothing. It returns -1 with
// ErrInvalidArgument, changing nothing, for an invalid or unknown topic, a
// partition outside [0, partitionCount), or a message whose key, header keys,
// header values and payload add up to more than WithMaxMessageBytes bytes.
func (b *Broker) PublishMessage(topic string, partition int32, m Message) (int64, error) {
	t, err := b.lookup(topic)
	if err != nil {
		return -1, err
	}
	if err := t.checkPartition(topic, partition); err != nil {
		return -1, err
	}
	if size := messageSize(m); b.maxMessageBytes > 0 && size > b.maxMessageBytes {
		return -1, fmt.Errorf("%w: topic %q: partition %d: message of %d bytes exceeds the limit of %d",
			ErrInvalidArgument, topic, partition, size, b.maxMessageBytes)
	}
	now := b.enter(t)
	p := int(partition)
	l := &t.logs[p]
	if len(l.entries) >= int(b.capacity) {
		if b.refuses(t, p) {
			return -1, nil // nothing retained is fully committed
		}
		l.entries = l.entries[1:] // O(1): append drops the prefix when it grows the array
		l.start++
	}
	tm := m.Time
	switch {
	case !tm.IsZero():
	case b.sessionTimeout > 0:
		tm = now // the call's one clock reading
	default:
		tm = b.clock()
	}
	l.entries = append(l.entries, entry{key: m.Key, headers: cloneHeaders(m.Headers), payload: m.Payload, time: tm})
	return l.end() - 1, nil
}

// messageSize is the size WithMaxMessageBytes bounds, in bytes (rule 15),
// as internal/message states it for the engine too.
func messageSize(m Message) int { return message.Size(m.Key, m.Payload, m.Headers) }

// cloneHeaders returns a copy of h, or nil when h is empty.
func cloneHeaders(h []Header) []Header { return message.CloneHeaders(h) }

// Poll walks member's partitions in ascending order and, for each with a
// retained record at the group's committed offset and no in-flight delivery
// (or, with WithAckTimeout(d), one delivered d or more ago by the broker
// clock), delivers that record to member, until maxRecords (1..64) are taken
// (rules 10, 16, 22). Each delivery adds 1 to the partition's attempts and
// the Record carries the new count. The clock is read once per valid call,
// and only when an ack timeout is set. The result is the caller's, non-nil,
// in ascending partition order; it is empty for an absent group or member,
// or when nothing is eligible. Poll never creates a group. Under a session
// timeout (rule 24) it first expires the topic's expired members (so an
// expired member's Poll is empty) and then refreshes member's last-seen;
// the clock is then read once per valid call whatever the ack timeout. It returns
// ErrInvalidArgument for an invalid identifier, an unknown topic or
// maxRecords outside 1..64.
func (b *Broker) Poll(topic, group, member string, maxRecords int32) ([]Record, error) {
	t, err := b.lookup(topic, group, member)
	if err != nil {
		return nil, err
	}
	if maxRecords < 1 || maxRecords > MaxPollRecords {
		return nil, fmt.Errorf("%w: maxRecords %d out of range [1,%d]",
			ErrInvalidArgument, maxRecords, MaxPollRecords)
	}
	now := b.now(t)
	out := []Record{}
	g, ok := t.groups[group]
	if !ok {
		return out, nil
	}
	b.refresh(g, member, now)
	for p := range t.logs {
		if len(out) == int(maxRecords) {
			break
		}
		if r, ok := b.deliver(t, g, topic, member, p, now); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// PollPartition is Poll restricted to partition, with maxRecords 1: the
// sequential counterpart of engine's MemberHandle.AppendPollPartition. If
// member owns partition and the group has a retained record at its
// committed offset there with no delivery in flight (or, with
// WithAckTimeout(d), one delivered d or more ago), it delivers that record
// (rules 10, 16, 22 applied to that partition alone). No other partition is
// looked at or changed. The clock is read once per valid call, and only
// when an ack timeout or a session timeout is set; under a session timeout
// it expires and refreshes members as Poll does. The result is the caller's and non-nil:
// empty when the group or member is absent, member does not own partition
// or nothing there is eligible. It returns ErrInvalidArgument for an
// invalid identifier, an unknown topic or a partition outside [0,
// partitionCount).
func (b *Broker) PollPartition(topic, group, member string, partition int32) ([]Record, error) {
	t, err := b.lookup(topic, group, member)
	if err != nil {
		return nil, err
	}
	if err := t.checkPartition(topic, partition); err != nil {
		return nil, err
	}
	now := b.now(t)
	out := []Record{}
	if g, ok := t.groups[group]; ok {
		b.refresh(g, member, now)
		if r, ok := b.deliver(t, g, topic, member, int(partition), now); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// now is enter for a call that also needs the clock under an ack timeout
// (Poll, PollPartition): the one clock reading of the call, or the zero
// Time when neither timeout is set.
func (b *Broker) now(t *topic) time.Time {
	if b.sessionTimeout == 0 && b.ackTimeout > 0 {
		return b.clock()
	}
	return b.enter(t)
}

// deliver is one partition's step of Poll (rules 10, 16, 22): if member owns
// partition p of g and the record at the committed offset is retained and
// not in flight (or its delivery has expired at now under an ack timeout),
// it reserves that record, counts the attempt and returns it.
func (b *Broker) deliver(t *topic, g *group, topic, member string, p int, now time.Time) (Record, bool) {
	if g.owners[p] != member {
		return Record{}, false
	}
	l, c := &t.logs[p], g.committed[p]
	if c < l.start || c > l.end() {
		panic(fmt.Sprintf("model: topic %q partition %d: committed %d outside log [%d,%d]", topic, p, c, l.start, l.end()))
	}
	if g.inFlight[p] {
		if b.ackTimeout == 0 || now.Sub(g.deliveredAt[p]) < b.ackTimeout {
			return Record{}, false // still in flight
		}
	} else if c == l.end() {
		return Record{}, false // nothing at the committed offset yet
	}
	g.inFlight[p] = true
	g.attempts[p]++
	if b.ackTimeout > 0 {
		g.deliveredAt[p] = now
	}
	return l.record(topic, int32(p), c, g.attempts[p]), true
}

// record returns the retained record at offset as a Record owned by the
// caller, with the given attempt count.
func (l *partitionLog) record(topic string, partition int32, offset int64, attempt int32) Record {
	e := &l.entries[offset-l.start]
	return Record{
		Topic: topic, Partition: partition, Offset: offset, Payload: e.payload,
		Key: e.key, Headers: cloneHeaders(e.headers), Time: e.time, Attempt: attempt,
	}
}

// Ack commits the in-flight delivery (partition, offset) of member in group
// (rules 11, 16): the committed offset advances by one, the delivery clears,
// the attempts reset to 0, and the partition's records that all of the
// topic's groups have now committed past are removed from the log, but for
// the replay window (rules 13, 21). It returns true on success and false,
// changing nothing, unless member currently owns partition and offset is
// exactly its in-flight offset (an expired delivery still counts). Under a
// session timeout it first expires the topic's expired members (so an
// expired member's Ack is false) and then refreshes member's last-seen,
// whatever it returns (rule 24). It returns
// ErrInvalidArgument for an invalid identifier, an unknown topic, a
// partition outside [0, partitionCount) or a negative offset.
func (b *Broker) Ack(topic, group, member string, partition int32, offset int64) (bool, error) {
	t, g, ok, err := b.delivery(topic, group, member, partition, offset)
	if err != nil || !ok {
		return false, err
	}
	g.committed[partition]++
	g.inFlight[partition] = false
	g.attempts[partition] = 0
	g.deliveredAt[partition] = time.Time{}
	t.trim(int(partition), b.window)
	return true, nil
}

// Retry clears the in-flight delivery (partition, offset) of member in group
// without committing it, so the next poll delivers the same record again
// with the next Attempt (rules 12, 16). It returns true on success and false,
// changing nothing, under the same conditions as Ack, and
// ErrInvalidArgument for the same arguments.
func (b *Broker) Retry(topic, group, member string, partition int32, offset int64) (bool, error) {
	_, g, ok, err := b.delivery(topic, group, member, partition, offset)
	if err != nil || !ok {
		return false, err
	}
	g.inFlight[partition] = false
	g.deliveredAt[partition] = time.Time{}
	return true, nil
}

// delivery validates the arguments of Ack and Retry, expires and refreshes
// members (rule 24), and reports whether member currently owns partition
// with offset exactly in flight.
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
	now := b.enter(t)
	g, ok := t.groups[group]
	if !ok {
		return nil, nil, false, nil
	}
	b.refresh(g, member, now)
	p := int(partition)
	ok = g.owners[p] == member && g.inFlight[p] && g.committed[p] == offset
	return t, g, ok, nil
}

// low returns the smallest committed offset of partition p over the topic's
// groups: records below it are fully committed. ok is false when the topic
// has no group.
func (t *topic) low(p int) (low int64, ok bool) {
	if len(t.groups) == 0 {
		return 0, false
	}
	low = math.MaxInt64
	for _, g := range t.groups {
		low = min(low, g.committed[p])
	}
	return low, true
}

// refuses reports whether a publish to partition p of t is refused (rules
// 5, 21): p retains capacity records and none may be given up, for want of
// a replay window, of a group, or of a fully committed record.
func (b *Broker) refuses(t *topic, p int) bool {
	l := &t.logs[p]
	if len(l.entries) < int(b.capacity) {
		return false
	}
	low, ok := t.low(p)
	return b.window == 0 || !ok || l.start >= low
}

// trim applies retention to partition p (rules 13, 21): it removes the
// fully committed records but the window most recent of them. With no
// groups it removes nothing.
func (t *topic) trim(p int, window int32) {
	low, ok := t.low(p)
	if !ok {
		return
	}
	l := &t.logs[p]
	if n := low - int64(window) - l.start; n > 0 {
		l.entries = l.entries[n:]
		l.start += n
	}
}

func newTopic(partitionCount int32) *topic {
	return &topic{logs: make([]partitionLog, partitionCount), groups: map[string]*group{}}
}

// newGroup returns a memberless group using a, positioned at each log start
// (rules 7, 17).
func (t *topic) newGroup(a Assignor) *group {
	n := len(t.logs)
	g := &group{
		assignor:    a,
		owners:      make([]string, n),
		committed:   make([]int64, n),
		inFlight:    make([]bool, n),
		attempts:    make([]int32, n),
		deliveredAt: make([]time.Time, n),
		lastSeen:    map[string]time.Time{},
	}
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

// enterGroup is lookup of topic, group and the member (when given), then
// enter: the topic, the group (nil when absent) and enter's clock reading;
// or a nil group and lookup's error, having entered nothing.
func (b *Broker) enterGroup(topic, group string, member ...string) (*topic, *group, time.Time, error) {
	t, err := b.lookup(topic, append([]string{group}, member...)...)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	now := b.enter(t)
	return t, t.groups[group], now, nil
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
