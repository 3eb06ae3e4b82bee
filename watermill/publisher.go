package tributarywm

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary"
)

// PublisherConfig configures a Publisher. The zero value is valid.
type PublisherConfig struct {
	// Partitions is the partition count, 1..64, of a topic this publisher
	// creates on first use; an existing topic keeps its own. 0:
	// DefaultPartitions.
	Partitions int32
	// PartitionKey returns the key msg is partitioned by (Kafka's murmur2
	// key hash, tributary.KeyHash): messages of one key go to one partition
	// and are delivered in publish order. nil, or an empty key: round-robin
	// over the partitions. An error, or a panic (recovered), fails Publish
	// for that message with an error wrapping tributary.ErrPartitioner.
	PartitionKey func(topic string, msg *message.Message) (string, error)
}

// Publisher publishes Watermill messages to a Tributary cluster: a
// message.Publisher. Safe for concurrent use.
type Publisher struct {
	cfg      PublisherConfig
	topics   *topics
	producer *tributary.Producer[[]byte]
	logger   watermill.LoggerAdapter
	closed   atomic.Bool
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a publisher to cluster (its capacity per partition,
// replay window and other engine options are the cluster's). logger may be
// nil. It registers a producer named "wm-pub-<short UUID>" in the cluster.
// Errors: tributary.ErrInvalidArgument (nil cluster, Partitions outside
// 0..64), tributary.ErrClosed.
func NewPublisher(cluster *tributary.Cluster, cfg PublisherConfig, logger watermill.LoggerAdapter) (*Publisher, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	ts, err := newTopics(cluster, cfg.Partitions, logger)
	if err != nil {
		return nil, err
	}
	name := "wm-pub-" + watermill.NewShortUUID()
	prod, err := tributary.NewProducer[[]byte](cluster, name, tributary.KeyHash())
	if err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg, topics: ts, producer: prod, logger: logger.With(watermill.LogFields{"producer": name})}, nil
}

// Publish publishes msgs to topic in order, creating the topic on first
// use, each to the partition its key chooses (PublisherConfig.PartitionKey).
// On a full partition it waits for room (records are removed as every
// group acks them, SPEC rules 5, 13) until msg.Context() ends or the
// publisher is closed; it never drops a message. It returns at the first
// failure: the messages before it are published, the rest are not.
// Errors: the message context's error or ErrClosed (that message not
// published); tributary.ErrInvalidArgument (a topic name that is not an
// identifier, a nil message, metadata named HeaderUUID or tributary.HeaderPayloadType, a
// message over tributary.WithMaxMessageBytes); tributary.ErrTypeMismatch (a
// topic of another payload type); tributary.ErrPartitioner wrapping the
// PartitionKey function's error or panic.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if p.closed.Load() {
		return fmt.Errorf("%w: publisher", ErrClosed)
	}
	t, err := p.topics.open(topic)
	if err != nil {
		return err
	}
	for i, msg := range msgs {
		if msg == nil {
			return fmt.Errorf("%w: publish to topic %q: message %d is nil", tributary.ErrInvalidArgument, topic, i)
		}
		if err := p.publish(t, msg); err != nil {
			return fmt.Errorf("publish message %s to topic %q: %w", msg.UUID, topic, err)
		}
	}
	return nil
}

func (p *Publisher) publish(t *tributary.Topic[[]byte], msg *message.Message) error {
	var m tributary.Message[[]byte]
	if p.cfg.PartitionKey != nil {
		key, err := partitionKey(p.cfg.PartitionKey, t.Name(), msg)
		if err != nil {
			return fmt.Errorf("%w: partition key: %w", tributary.ErrPartitioner, err)
		}
		m.Key = key
	}
	h, err := toHeaders(msg)
	if err != nil {
		return err
	}
	m.Headers, m.Value = h, msg.Payload
	_, err = p.producer.TrySend(t, m)
	if !errors.Is(err, tributary.ErrPartitionFull) {
		return err
	}
	// The partition is full: send again, waiting for room until the
	// message's context ends or Close (which closes the producer, ending
	// the wait with ErrClosed). A key keeps its partition; a message
	// without one goes to the next partition round-robin.
	p.logger.Debug("Partition full: waiting for room", watermill.LogFields{"topic": t.Name(), "message_uuid": msg.UUID})
	_, err = p.producer.Send(msg.Context(), t, m)
	return err
}

// partitionKey calls the user's PartitionKey, turning a panic into an error
// that holds the panic value and the stack.
func partitionKey(f func(string, *message.Message) (string, error), topic string, msg *message.Message) (key string, err error) {
	defer func() {
		if r := recover(); r != nil {
			key, err = "", fmt.Errorf("PartitionKey panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return f(topic, msg)
}

// Close ends waiting publishes (ErrClosed) and removes the publisher's
// producer from the cluster; later Publish calls return ErrClosed.
// Closing twice is a no-op.
func (p *Publisher) Close() error {
	if !p.closed.Swap(true) {
		p.producer.Close() //nolint:errcheck // always nil
	}
	return nil
}
