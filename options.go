package tributary

import (
	"fmt"
	"time"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/engine/assign"
)

// The library's options, one namespace (With…), in the style of franz-go's
// kgo.Opt: a GroupOption configures a consumer group when it is created
// (Cluster.CreateGroup, Backend.CreateGroup), a ConsumerOption a Consumer
// (NewConsumer). The failure policy of a group, WithDeadLetter and
// WithBackoff, is both (FailureOption): it belongs to the group, and a
// consumer given it must agree with its group's. A new option is added
// here, with the type that says where it applies, and, for a group option,
// a field of GroupConfig that every Backend keeps.

// GroupOption configures a consumer group at its creation: WithStart,
// WithDeadLetter, WithBackoff. NewGroupConfig turns a list of them into the
// GroupConfig a Backend stores.
type GroupOption interface {
	applyGroup(*GroupConfig)
}

// ConsumerOption configures a Consumer (NewConsumer): WithBatch,
// WithStopGrace, and the failure options WithDeadLetter and WithBackoff,
// which must agree with the consumer's group.
type ConsumerOption interface {
	applyConsumer(*consumerConfig)
}

// FailureOption is one part of a consumer group's failure policy, made by
// WithDeadLetter or WithBackoff. Given to Cluster.CreateGroup it sets the
// group's policy, kept by the backend and followed by every consumer of the
// group in any process, as JetStream keeps MaxDeliver on its consumer and
// Watermill its poison queue on the router. Given to NewConsumer it states
// what the consumer expects: a consumer whose option differs from its
// group's policy is refused (ErrPolicyMismatch); one that joins a group
// absent so far creates it with the policy its options give. The zero
// FailureOption is invalid.
type FailureOption struct {
	kind        failureKind
	topic       string        // WithDeadLetter
	maxAttempts int32         // WithDeadLetter
	initial     time.Duration // WithBackoff
	max         time.Duration // WithBackoff
}

// failureKind says which option a FailureOption is.
type failureKind uint8

const (
	failureNone       failureKind = iota // the zero FailureOption: invalid
	failureDeadLetter                    // WithDeadLetter
	failureBackoff                       // WithBackoff
)

func (o FailureOption) applyGroup(g *GroupConfig) {
	switch o.kind {
	case failureDeadLetter:
		g.DeadLetter, g.MaxAttempts = o.topic, o.maxAttempts
	case failureBackoff:
		g.Backoff, g.MaxBackoff = o.initial, o.max
	}
}

func (o FailureOption) applyConsumer(c *consumerConfig) {
	o.applyGroup(&c.asked)
	switch o.kind {
	case failureDeadLetter:
		c.askedDeadLetter = true
	case failureBackoff:
		c.askedBackoff = true
	}
	c.failure = append(c.failure, o)
}

// groupOption is a GroupOption that is not a failure option.
type groupOption func(*GroupConfig)

func (f groupOption) applyGroup(g *GroupConfig) { f(g) }

// consumerOption is a ConsumerOption that is not a failure option.
type consumerOption func(*consumerConfig)

func (f consumerOption) applyConsumer(c *consumerConfig) { f(c) }

// Defaults of the options.
const (
	DefaultBackoff    = 100 * time.Millisecond // first retry delay of Run
	DefaultMaxBackoff = 10 * time.Second       // cap of Run's doubling retry delay
	DefaultBatch      = 16                     // records per poll in Run and Messages
	DefaultStopGrace  = 5 * time.Second        // Run's wait for a running handler once its context ends
)

// MaxDeadLetterAttempts is the most attempts WithDeadLetter accepts.
const MaxDeadLetterAttempts = 1000

// WithDeadLetter makes a consumer group's consumers send a record whose
// handler failed maxAttempts times (1..1000; attempts as Message.Attempt
// counts them, SPEC rule 16), or whose payload does not decode, to the
// dead-letter topic topic, then ack it (Consumer.Run, Consumer.Nack). Each
// consumer of the group creates the dead-letter topic, if absent, with the
// origin topic's payload type and partition count when it joins; the
// record keeps its key, headers and time, gains the HeaderDeadLetter*
// headers and goes to the partition of the same index (modulo the
// dead-letter topic's count). When the dead-letter topic is full, Run
// waits for room: the record stays in flight and is never lost. The error
// header keeps at most 512 bytes of the error's text, and none when the
// copy would exceed WithMaxMessageBytes; a copy too big even so
// stops Run with that ErrInvalidArgument (the record stays unacked).
// Without a dead-letter topic a failing record is retried for ever (with
// backoff), as Watermill does without a poison queue. topic must be an
// identifier other than the group's topic.
func WithDeadLetter(topic string, maxAttempts int32) FailureOption {
	return FailureOption{kind: failureDeadLetter, topic: topic, maxAttempts: maxAttempts}
}

// WithBackoff sets a consumer group's retry delay after a handler error in
// Consumer.Run: initial for the first failure, doubling with each attempt,
// capped at max (0 < initial ≤ max). Defaults: DefaultBackoff,
// DefaultMaxBackoff.
func WithBackoff(initial, max time.Duration) FailureOption {
	return FailureOption{kind: failureBackoff, initial: initial, max: max}
}

// WithStart sets where a new consumer group starts on each partition:
// StartEarliest (the default) at the log start, the earliest
// retained record (SPEC rules 7, 17; with a replay window the window's
// records included), so the group receives everything the topic still
// holds; StartLatest at the log end, Kafka's
// auto.offset.reset=latest, so the group receives only what is published
// after it was created (a record published before the call never, one
// published after it returns always). A group created at the log end
// commits past every retained record: records no other group needs are
// removed at once, beyond the replay window, as after a forward Seek.
func WithStart(start GroupStart) GroupOption {
	return groupOption(func(g *GroupConfig) { g.Start = start })
}

// WithBatch sets how many records Run and the Messages iterator reserve per
// poll, 1..64 (at most one per partition is in flight at a time). Default
// DefaultBatch.
func WithBatch(n int32) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.batch = n })
}

// WithStopGrace sets how long Run, once its context has ended, waits for
// the handler it is running to return, and for that record's settling to
// finish (d ≥ 0; default DefaultStopGrace, 5 s). A handler that returns
// within d has its result applied as at any other time: nil acks the
// record, an error retries or dead-letters it; the Ack and the dead-letter
// publish are not cancelled by the context, and ride out ErrUnavailable
// until d has passed. A handler still running after d is abandoned: Run
// returns, and the record, unacked, is redelivered once Run has left the
// group. 0 abandons at once (a result already returned is still applied).
// Like Kafka's consumer close timeout and Watermill's router CloseTimeout
// (30 s by default in both), it bounds how long stopping waits for work
// under way. It does not apply to Close, which leaves the group at once
// (the deliveries go to the new owners).
func WithStopGrace(d time.Duration) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.stopGrace = d })
}

// GroupConfig is a consumer group's configuration, fixed when the group is
// created (Cluster.CreateGroup and its GroupOptions) and kept by the
// Backend with the group, so that every consumer that joins it, in any
// process, reads the same one (Backend.GroupConfig). The zero GroupConfig
// is that of a group created by a Join: it started at the log start and
// retries a failing record for ever with the default backoff.
type GroupConfig struct {
	// Start is where the group's committed offsets began (WithStart).
	Start GroupStart
	// DeadLetter is the dead-letter topic (WithDeadLetter); "" for none:
	// a failing record is retried for ever.
	DeadLetter string
	// MaxAttempts is, with DeadLetter, the deliveries a failing record
	// gets before it is dead-lettered, 1..MaxDeadLetterAttempts; 0 without.
	MaxAttempts int32
	// Backoff and MaxBackoff are Run's first retry delay and its cap
	// (WithBackoff); both zero for DefaultBackoff and DefaultMaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// NewGroupConfig returns the configuration opts give a new consumer group
// of topic, checked: what a Backend's CreateGroup stores. Errors
// (ErrInvalidArgument, naming the option): a nil or zero option, a start
// other than StartEarliest or StartLatest, a dead-letter topic
// that is not an identifier or is topic itself, maxAttempts outside
// 1..1000, a backoff outside 0 < initial ≤ max.
func NewGroupConfig(topic string, opts ...GroupOption) (GroupConfig, error) {
	var g GroupConfig
	for _, o := range opts {
		if err := checkOption(o); err != nil {
			return GroupConfig{}, err
		}
		o.applyGroup(&g)
	}
	if err := g.check(topic); err != nil {
		return GroupConfig{}, err
	}
	return g, nil
}

// checkOption refuses a nil option and the zero FailureOption.
func checkOption(o any) error {
	switch v := o.(type) {
	case nil:
		return fmt.Errorf("%w: nil option", ErrInvalidArgument)
	case FailureOption:
		if v.kind == failureNone {
			return fmt.Errorf("%w: a zero FailureOption (make one with WithDeadLetter or WithBackoff)", ErrInvalidArgument)
		}
	}
	return nil
}

// check validates g for a group of topic: see NewGroupConfig.
func (g GroupConfig) check(topic string) error {
	if g.Start != StartEarliest && g.Start != StartLatest {
		return fmt.Errorf("%w: WithStart(%v): want StartEarliest or StartLatest", ErrInvalidArgument, g.Start)
	}
	if g.DeadLetter != "" || g.MaxAttempts != 0 {
		if err := engine.CheckIdentifier("dead-letter topic", g.DeadLetter); err != nil {
			return err
		}
		if g.DeadLetter == topic {
			return fmt.Errorf("%w: dead-letter topic %q is the consumed topic", ErrInvalidArgument, g.DeadLetter)
		}
		if g.MaxAttempts < 1 || g.MaxAttempts > MaxDeadLetterAttempts {
			return fmt.Errorf("%w: dead-letter maxAttempts %d outside [1,%d]", ErrInvalidArgument, g.MaxAttempts, MaxDeadLetterAttempts)
		}
	}
	if (g.Backoff != 0 || g.MaxBackoff != 0) && (g.Backoff <= 0 || g.MaxBackoff < g.Backoff) {
		return fmt.Errorf("%w: backoff %v, max %v: want 0 < initial <= max", ErrInvalidArgument, g.Backoff, g.MaxBackoff)
	}
	return nil
}

// backoffs returns g's retry delays with the defaults filled in.
func (g GroupConfig) backoffs() (initial, max time.Duration) {
	if g.Backoff == 0 {
		return DefaultBackoff, DefaultMaxBackoff
	}
	return g.Backoff, g.MaxBackoff
}

// Policy describes g's failure policy in words, for errors and the
// program: "dead-letter to T after N attempts, backoff 100ms to 10s" or
// "retry for ever, backoff 100ms to 10s".
func (g GroupConfig) Policy() string {
	initial, max := g.backoffs()
	if g.DeadLetter == "" {
		return fmt.Sprintf("retry for ever, backoff %v to %v", initial, max)
	}
	n := fmt.Sprintf("%d attempts", g.MaxAttempts)
	if g.MaxAttempts == 1 {
		n = "1 attempt"
	}
	return fmt.Sprintf("dead-letter to %s after %s, backoff %v to %v", g.DeadLetter, n, initial, max)
}

// The broker's settings, the assignors, the group starts and the
// description types under the library's own names, so that a program
// configures and inspects a Cluster without importing package engine.
// Each is the engine's own (a type alias, a copy of the engine's variable
// or constant, or a call of the engine's constructor): values of either
// name mix freely, and a program written with the engine's names compiles
// as before.

// ClusterOption configures the broker that NewCluster and NewEngineBackend
// build: WithReplayWindow, WithAckTimeout, WithMaxMessageBytes,
// WithSessionTimeout, WithClock. It is engine.Option; a value outside an
// option's range makes NewCluster return ErrInvalidArgument.
type ClusterOption = engine.Option

// WithReplayWindow makes each partition keep up to records of its most
// recent fully committed records (committed by every group of the topic)
// instead of removing them at once, so that Seek can replay them; a
// publish to a full partition then removes the oldest fully committed
// record to make room (SPEC rule 21). records is 0..capacityPerPartition;
// the default 0 removes what every group has committed at once (rule 13).
func WithReplayWindow(records int32) ClusterOption { return engine.WithReplayWindow(records) }

// WithAckTimeout makes an in-flight delivery d or more old by the broker
// clock stop blocking its partition: the owner's next poll delivers it
// again with Attempt + 1 (SPEC rule 22). d > 0; the default is none.
func WithAckTimeout(d time.Duration) ClusterOption { return engine.WithAckTimeout(d) }

// WithMaxMessageBytes bounds one message: a send whose key, header keys,
// header values and encoded payload add up to more than n bytes returns
// ErrInvalidArgument and changes nothing (SPEC rule 15). n > 0; the
// default is no limit.
func WithMaxMessageBytes(n int) ClusterOption { return engine.WithMaxMessageBytes(n) }

// WithSessionTimeout sets how long a member may go unseen before the
// broker removes it from its group and rebalances (SPEC rule 24):
// MinSessionTimeout ≤ d, as NewCluster checks; consumers heartbeat every
// HeartbeatInterval(d). NewCluster's default is DefaultSessionTimeout
// (45 s).
func WithSessionTimeout(d time.Duration) ClusterOption { return engine.WithSessionTimeout(d) }

// WithClock sets the broker clock: record times (when a message has
// none), delivery ages (WithAckTimeout) and last-seen instants
// (WithSessionTimeout) are read from now, which must not be nil nor call
// the broker. Tests use it to control time; the default is the wall clock
// (engine.WithClock tells how it is read).
func WithClock(now func() time.Time) ClusterOption { return engine.WithClock(now) }

// Assignor decides which member of a consumer group owns each partition
// (SPEC rule 18): RoundRobinAssignor, RangeAssignor, StickyAssignor or a
// user's (the contract: package engine/assign). It is engine.Assignor.
type Assignor = engine.Assignor

// The built-in assignors (SPEC rule 18), named as Kafka's; their Name()s
// are "RoundRobin", "Range" and "Sticky", as Describe reports them.
var (
	// RoundRobinAssignor gives partition p to member p mod n, members
	// sorted bytewise (rule 6): the assignor of a group a Join creates.
	RoundRobinAssignor Assignor = engine.RoundRobin
	// RangeAssignor gives contiguous blocks in member order from partition
	// 0; the first P mod n members take ⌈P/n⌉ partitions, the rest ⌊P/n⌋.
	RangeAssignor Assignor = engine.Range
	// StickyAssignor balances first (⌊P/n⌋ or ⌈P/n⌉ partitions each), then
	// keeps as many partitions as possible with their previous owner, so a
	// rebalance cancels as few in-flight deliveries as balance allows.
	StickyAssignor Assignor = engine.Sticky
)

// LookupAssignor returns the built-in assignor whose Name() is name
// ("RoundRobin", "Range", "Sticky"; case-sensitive) and true, or nil and
// false.
func LookupAssignor(name string) (Assignor, bool) { return assign.Lookup(name) }

// GroupStart says where a new consumer group's committed offsets start
// (WithStart): StartEarliest or StartLatest. It is engine.GroupStart.
type GroupStart = engine.GroupStart

const (
	// StartEarliest starts a new group at each partition's log start
	// offset, the earliest retained record (SPEC rules 7, 17): the default.
	StartEarliest = engine.StartEarliest
	// StartLatest starts a new group at each partition's log end offset,
	// Kafka's auto.offset.reset=latest.
	StartLatest = engine.StartLatest
)

// The types Describe returns (SPEC rule 23), each the engine's: one atomic
// description of a topic, its partitions' logs, its groups and each
// group's state on each partition (offsets, owner, in flight, attempts,
// lag in records).
type (
	TopicDescription     = engine.TopicDescription
	PartitionDescription = engine.PartitionDescription
	GroupDescription     = engine.GroupDescription
	GroupPartition       = engine.GroupPartition
)
