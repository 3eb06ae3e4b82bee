package tributarywm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// HeaderUUID is the header that carries a message's Watermill UUID (the
// name Watermill's Kafka marshaler uses). Metadata may not use it.
const HeaderUUID = "_watermill_message_uuid"

// DefaultPartitions is the partition count of a topic created on first use
// when the config leaves Partitions 0: one partition keeps a topic in
// total order, like Kafka's num.partitions default.
const DefaultPartitions = 1

// ErrClosed is returned, wrapped, by Publish, Subscribe and
// SubscribeInitialize after Close, and by a Publish that Close (or
// Cluster.Close) ended while it waited for room. It is tributary.ErrClosed.
var ErrClosed = tributary.ErrClosed

// topics opens the Bytes topics of one cluster, creating missing ones with
// a fixed partition count, and keeps the handles (a topic is never
// deleted, so a handle stays valid).
type topics struct {
	cluster    *tributary.Cluster
	partitions int32
	explicit   bool // partitions came from the config, not DefaultPartitions
	logger     watermill.LoggerAdapter
	// mu guards byName.
	mu     sync.RWMutex
	byName map[string]*tributary.Topic[[]byte]
}

func newTopics(c *tributary.Cluster, partitions int32, logger watermill.LoggerAdapter) (*topics, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil Cluster", tributary.ErrInvalidArgument)
	}
	explicit := partitions != 0
	if partitions == 0 {
		partitions = DefaultPartitions
	}
	if partitions < 1 || partitions > engine.MaxPartitionCount {
		return nil, fmt.Errorf("%w: Partitions %d outside [1,%d]", tributary.ErrInvalidArgument, partitions, engine.MaxPartitionCount)
	}
	return &topics{cluster: c, partitions: partitions, explicit: explicit, logger: logger, byName: map[string]*tributary.Topic[[]byte]{}}, nil
}

// open returns the Bytes topic name, creating it with t.partitions
// partitions if the cluster has no such topic. Errors:
// tributary.ErrInvalidArgument (a name that is not an identifier),
// tributary.ErrTypeMismatch (a topic of another payload type),
// tributary.ErrClosed.
func (t *topics) open(name string) (*tributary.Topic[[]byte], error) {
	t.mu.RLock()
	tp := t.byName[name]
	t.mu.RUnlock()
	if tp != nil {
		return tp, nil
	}
	if err := engine.CheckIdentifier("topic", name); err != nil {
		return nil, fmt.Errorf("watermill topic %q: %w", name, err)
	}
	tp, err := tributary.OpenOrCreateTopic(t.cluster, name, t.partitions, tributary.Bytes())
	if err != nil {
		return nil, fmt.Errorf("watermill topic %q: %w", name, err)
	}
	if n := tp.Partitions(); t.explicit && n != t.partitions {
		// Someone else created it first; its count stands (logged once per
		// topic: the handle is cached below).
		t.logger.Info("Topic exists with another partition count; the configured Partitions does not apply", watermill.LogFields{
			"topic": name, "partitions": n, "configured_partitions": t.partitions,
		})
	}
	t.mu.Lock()
	t.byName[name] = tp
	t.mu.Unlock()
	return tp, nil
}

// toHeaders returns msg's UUID and metadata as headers: HeaderUUID first,
// then the metadata in key order. Errors: tributary.ErrInvalidArgument for
// metadata named HeaderUUID or tributary.HeaderPayloadType.
func toHeaders(msg *message.Message) ([]tributary.Header, error) {
	h := make([]tributary.Header, 1, 1+len(msg.Metadata))
	h[0] = tributary.Header{Key: HeaderUUID, Value: msg.UUID}
	for k, v := range msg.Metadata {
		switch k {
		case HeaderUUID:
			return nil, fmt.Errorf("%w: metadata key %q is reserved for the message UUID", tributary.ErrInvalidArgument, k)
		case tributary.HeaderPayloadType:
			return nil, fmt.Errorf("%w: metadata key %q is reserved for the topic's payload type", tributary.ErrInvalidArgument, k)
		}
		h = append(h, tributary.Header{Key: k, Value: v})
	}
	slices.SortFunc(h[1:], func(a, b tributary.Header) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return h, nil
}

// Delivery describes the delivery of a subscribed message: where it is in
// the topic and how often its group has been given it. It travels in the
// message's context (DeliveryFromContext).
type Delivery struct {
	Topic     string
	Partition int32
	Offset    int64 // the record's offset in its partition
	// Attempt counts deliveries of this record to the group: 1 the first
	// time, +1 after each Nack, rebalance or ack timeout (SPEC rule 16).
	Attempt int32
	Key     string    // the partition key it was published with; "" for none
	Time    time.Time // when it was published
	Group   string    // the consumer group it was delivered to
	Member  string    // the member (the subscription) that holds it
}

type deliveryKey struct{}

// DeliveryFromContext returns the delivery a subscribed message's context
// (message.Message.Context) carries; false for any other context.
func DeliveryFromContext(ctx context.Context) (Delivery, bool) {
	d, ok := ctx.Value(deliveryKey{}).(Delivery)
	return d, ok
}

// toWatermill turns a received message into a Watermill message: the UUID
// from HeaderUUID (the message ID "<partition>-<offset>" when a publisher
// other than this package's left it out), the other headers as metadata,
// the payload. The payload slice is the message's own.
func toWatermill(m *tributary.Message[[]byte]) *message.Message {
	uuid, found := "", false
	for _, h := range m.Headers {
		if h.Key == HeaderUUID {
			uuid, found = h.Value, true
			break
		}
	}
	if !found {
		uuid = m.ID
	}
	wm := message.NewMessage(uuid, m.Value)
	seen := false // the first HeaderUUID is the UUID; any later one is metadata
	for _, h := range m.Headers {
		if h.Key == HeaderUUID && !seen {
			seen = true
			continue
		}
		wm.Metadata[h.Key] = h.Value
	}
	return wm
}
