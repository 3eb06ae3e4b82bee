package tributary

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// Producer sends messages of type T to the cluster's topics of type T, each
// to the partition its Partitioner chooses; the strategy is fixed when the
// producer is made. Safe for concurrent use.
type Producer[T any] struct {
	c        *Cluster
	name     string
	part     Partitioner
	strategy string // part.Name(), read once by NewProducer
	closed   atomic.Bool
	stop     chan struct{} // closed by Close: ends a Send waiting for room
	ids      idArena       // builds the IDs of sent messages
}

// NewProducer registers a producer of T named name (an identifier: 1 to 64
// bytes of A-Z a-z 0-9 _ -) in the cluster, choosing partitions with p
// (Manual(), Random(), RoundRobin(), KeyHash() or a user's), whose Name
// it reads once, here. Errors: ErrInvalidArgument (invalid name, nil c, a
// nil or typed-nil partitioner, a partitioner whose Name panics), ErrExists
// (a producer of that name is open), ErrClosed.
func NewProducer[T any](c *Cluster, name string, p Partitioner) (*Producer[T], error) {
	if err := checkCluster(c); err != nil {
		return nil, err
	}
	if err := engine.CheckIdentifier("producer", name); err != nil {
		return nil, err
	}
	if isNil(p) {
		return nil, fmt.Errorf("%w: producer %q: nil Partitioner", ErrInvalidArgument, name)
	}
	strategy, err := userName(fmt.Sprintf("producer %q: partitioner %T", name, p), p.Name)
	if err != nil {
		return nil, err
	}
	pr := &Producer[T]{c: c, name: name, part: p, strategy: strategy, stop: make(chan struct{})}
	err = c.register("producer", name, func() error {
		if _, ok := c.producers[name]; ok {
			return &existsError{kind: "producer", name: name}
		}
		c.producers[name] = producerEntry{goType: reflect.TypeFor[T](), p: pr, close: pr.Close}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pr, nil
}

// Name returns the producer's name.
func (p *Producer[T]) Name() string { return p.name }

// Strategy returns the name of the producer's partitioner, as its Name
// answered when the producer was made: "Manual", "Random", "RoundRobin",
// "KeyHash", or a user's.
func (p *Producer[T]) Strategy() string { return p.strategy }

// Close removes the producer from the cluster's registry and ends a Send
// waiting for room (ErrClosed, nothing published); later sends return
// ErrClosed. Closing twice is a no-op. Cluster.Close closes every
// producer.
func (p *Producer[T]) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	close(p.stop)
	p.c.mu.Lock()
	if e, ok := p.c.producers[p.name]; ok && e.p == any(p) {
		delete(p.c.producers, p.name)
	}
	p.c.mu.Unlock()
	return nil
}

// Send encodes m.Value with the topic's codec, picks a partition with the
// producer's partitioner, and publishes, waiting while that partition is
// full until records are removed (acks, trims, deletes wake it; it never
// busy-waits), ctx ends or the producer is closed. It returns m as stored:
// ID, Topic, Partition, Offset, Time (when m.Time was zero: the time the broker
// stamped on the record, or time.Now on a backend that does not report it) and
// PayloadType set, Headers the caller's slice. The partition is chosen once: a full partition is
// waited for, not skipped. Errors: ctx.Err() (nothing published);
// ErrPartitioner (the partitioner's error, or its panic, recovered);
// ErrEncode (the codec's error, or its panic, recovered); ErrInvalidArgument
// (a nil ctx or t, a partition out of range from the
// partitioner or a Manual m.Partition, a header named HeaderPayloadType, a
// message over WithMaxMessageBytes); ErrClosed (the producer or
// its cluster was closed, before or while Send waited; nothing published).
// Every error but ctx's and ErrClosed's comes before anything is published.
// ctx is read only while Send waits: a Send that finds room publishes
// even when ctx has already ended.
func (p *Producer[T]) Send(ctx context.Context, t *Topic[T], m Message[T]) (Message[T], error) {
	if ctx == nil {
		return m, fmt.Errorf("%w: producer %q: nil Context", ErrInvalidArgument, p.name)
	}
	err := p.send(ctx, t, &m, true)
	return m, err
}

// TrySend is Send without waiting: a full partition returns
// ErrPartitionFull at once and publishes nothing; the returned Message's
// Partition is then the partition that was full.
func (p *Producer[T]) TrySend(t *Topic[T], m Message[T]) (Message[T], error) {
	err := p.send(nil, t, &m, false)
	return m, err
}

// send is Send (wait) and TrySend: it publishes *m and sets its fields as
// Send documents; on an error *m is unchanged but for Partition where said.
func (p *Producer[T]) send(ctx context.Context, t *Topic[T], m *Message[T], wait bool) error {
	if p.closed.Load() {
		return fmt.Errorf("%w: producer %q", ErrClosed, p.name)
	}
	if err := checkTopic(t); err != nil {
		return fmt.Errorf("producer %q: %w", p.name, err)
	}
	n := t.bt.Partitions()
	part, err := partition(p.part, m.Key, m.Partition, n)
	if err != nil {
		return fmt.Errorf("%w: producer %q: partitioner %s: %w", ErrPartitioner, p.name, p.strategy, err)
	}
	if part < 0 || part >= n {
		return fmt.Errorf("%w: producer %q (%s): partition %d outside [0,%d) of topic %q", ErrInvalidArgument, p.name, p.strategy, part, n, t.Name())
	}
	payload, err := encode(t.codec, m.Value)
	if err != nil {
		return fmt.Errorf("%w: producer %q: %s: %w", ErrEncode, p.name, t.pt, err)
	}
	for _, h := range m.Headers {
		if h.Key == HeaderPayloadType {
			return fmt.Errorf("%w: producer %q: header %q is reserved", ErrInvalidArgument, p.name, HeaderPayloadType)
		}
	}
	// The broker keeps its own copy of the headers (engine.Message).
	em := engine.Message{Key: m.Key, Headers: m.Headers, Payload: payload, Time: m.Time}
	var off int64
	var ts time.Time
	if hs := p.c.hooksOf(); hs != nil {
		off, ts, err = p.publishHooked(ctx, hs, t, part, &em, wait)
	} else if wait {
		off, ts, err = t.sp.publishStamped(ctx, p.stop, part, em)
	} else {
		off, ts, err = t.sp.tryPublishStamped(part, em)
	}
	if err != nil {
		m.Partition = part
		return err
	}
	m.ID, m.Topic, m.Partition, m.Offset, m.Time = p.ids.id(part, off), t.Name(), part, off, ts
	m.PayloadType, m.Payload, m.Attempt, m.Err = t.pt, payload, 0, nil
	return nil
}

// publishHooked is send's publish with the cluster's hooks hs: OnSend
// before (its headers added to em), OnWaitForRoom when a waiting publish
// finds the partition full, and OnSend's done funcs after.
func (p *Producer[T]) publishHooked(ctx context.Context, hs *hookSet, t *Topic[T], part int32, em *engine.Message, wait bool) (int64, time.Time, error) {
	var st *sendState
	if hs.onSend {
		st = hs.sendStart(ctx, p.name, t.Name(), part, em)
		for _, h := range em.Headers {
			if h.Key == HeaderPayloadType {
				// Published, it would be read as the record's payload type.
				err := fmt.Errorf("%w: producer %q: an OnSend hook set header %q, which is reserved", ErrInvalidArgument, p.name, HeaderPayloadType)
				sendDone(st, -1, err)
				return -1, time.Time{}, err
			}
		}
	}
	off, ts, err := t.sp.tryPublishStamped(part, *em)
	if wait && errors.Is(err, ErrPartitionFull) {
		if hs.onWait {
			hs.waitForRoom(t.Name(), part)
		}
		off, ts, err = t.sp.publishStamped(ctx, p.stop, part, *em)
	}
	if st != nil {
		sendDone(st, off, err)
	}
	return off, ts, err
}
