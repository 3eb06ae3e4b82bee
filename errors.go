package tributary

import (
	"errors"
	"fmt"

	"github.com/f91dcac0/tributary/engine"
)

// Errors of the engine, returned through this package unchanged (test with
// errors.Is).
var (
	// ErrInvalidArgument: an argument outside its range or an invalid
	// identifier (1 to 64 bytes of A-Z a-z 0-9 _ -, SPEC rules 3–4, 15).
	// Nothing changed.
	ErrInvalidArgument = engine.ErrInvalidArgument
	// ErrOffsetOutOfRange: a Seek outside [log start, log end] (SPEC rule
	// 20). Nothing changed.
	ErrOffsetOutOfRange = engine.ErrOffsetOutOfRange
	// ErrGroupNotEmpty: DeleteGroup of a group with members (SPEC rule 17).
	ErrGroupNotEmpty = engine.ErrGroupNotEmpty
	// ErrInvalidAssignment: a user's assignor answered something other than
	// one current member per partition (SPEC rule 18). Nothing changed.
	ErrInvalidAssignment = engine.ErrInvalidAssignment
)

// Errors of the typed library. Each is returned wrapped with context; a
// call that returns one changed nothing unless its doc says otherwise.
var (
	// ErrUnknownTopic is returned by OpenTopic (and Backend.OpenTopic) for
	// a topic the cluster does not have. The admin calls (CreateGroup,
	// Seek, Describe, …) return ErrInvalidArgument for it instead, as the
	// engine does (SPEC rule 4).
	ErrUnknownTopic = errors.New("tributary: unknown topic")
	// ErrExists is returned by CreateTopic for a topic that exists, and by
	// NewProducer and NewConsumer for a name a live producer or consumer of
	// the cluster already has.
	ErrExists = errors.New("tributary: already exists")
	// ErrNotFound is returned by the cluster's lookups of producers and
	// consumers by name when there is none.
	ErrNotFound = errors.New("tributary: not found")
	// ErrTypeMismatch is returned by OpenTopic, NewConsumer (for its
	// dead-letter topic) and the lookups when the payload type (the codec's
	// Name, and for topics this Cluster created the Go type) differs from the one the topic
	// or producer was created with.
	ErrTypeMismatch = errors.New("tributary: payload type mismatch")
	// ErrPolicyMismatch is returned by NewConsumer when the consumer's
	// WithDeadLetter or WithBackoff differs from the failure policy its
	// consumer group was created with (GroupConfig): a group's policy is
	// the group's, set by Cluster.CreateGroup, and every consumer of the
	// group follows it. The consumer did not join.
	ErrPolicyMismatch = errors.New("tributary: consumer's failure policy differs from its group's")
	// ErrPartitionFull is returned by Producer.TrySend when the chosen
	// partition retains as many records as the cluster's capacity (SPEC rule
	// 5): nothing was published. Producer.Send waits for room instead.
	ErrPartitionFull = errors.New("tributary: partition full")
	// ErrNotInFlight is returned by Consumer.Ack and Consumer.Retry for a
	// message that is not in flight to this consumer: already acked or
	// retried, cancelled by a rebalance or a Seek, or the consumer left
	// (SPEC rules 9, 11, 12). Nothing changed.
	ErrNotInFlight = errors.New("tributary: message not in flight to this consumer")
	// ErrClosed is returned by calls on a closed Cluster, Producer or
	// Consumer, and by a blocking Consumer.Poll that the consumer's Close
	// interrupted.
	ErrClosed = errors.New("tributary: closed")
	// ErrFenced is returned, together with ErrClosed (errors.Is holds for
	// both), by every call of a consumer, or a BackendMember, that a newer
	// incarnation of its member superseded in this process: NewConsumer of
	// the same (topic, group, name), on any Cluster of the same Backend, or
	// RemoveMember of it. The fenced consumer is closed; its Close leaves
	// nothing (the successor keeps the membership). Kafka's
	// FencedInstanceIdException.
	ErrFenced = errors.New("tributary: fenced by a newer incarnation of the member")
	// ErrUnavailable is wrapped by a Backend's errors when its broker
	// cannot be reached (a networked backend: the server is down,
	// restarting or has no quorum; jetstream.ErrUnavailable wraps it).
	// The call may or may not have taken effect. Consumer.Run waits and
	// tries again on it (at-least-once: a record whose ack was lost is
	// delivered again); other calls return it.
	ErrUnavailable = errors.New("tributary: backend unavailable")
	// ErrEncode wraps a codec's error, or its recovered panic, encoding a
	// value (Producer.Send, TrySend): nothing was sent.
	ErrEncode = errors.New("tributary: encode")
	// ErrDecode wraps a codec's error, or its recovered panic, decoding a
	// payload, in Message.Err and in the dead-letter header of a record
	// that did not decode.
	ErrDecode = errors.New("tributary: decode")
	// ErrPartitioner wraps a Partitioner's error, or its recovered panic,
	// choosing a message's partition (Producer.Send, TrySend): nothing was
	// sent. An answer outside the topic's partitions is ErrInvalidArgument
	// instead.
	ErrPartitioner = errors.New("tributary: partitioner")
)

// existsError is ErrExists for one named thing, read as one sentence,
// `tributary: topic "orders" already exists`, rather than ErrExists's text
// followed by the name. errors.Is(err, ErrExists) holds.
type existsError struct {
	kind string // "topic", "producer", "consumer"
	name string
}

func (e *existsError) Error() string {
	return fmt.Sprintf("tributary: %s %q already exists", e.kind, e.name)
}

func (e *existsError) Unwrap() error { return ErrExists }
