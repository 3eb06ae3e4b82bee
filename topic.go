package tributary

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/f91dcac0/tributary/engine"
)

// Topic is a typed handle on one topic of a Cluster: every payload is a T,
// turned into the engine's string payload by the topic's Codec. Get one
// from CreateTopic or OpenTopic; it stays valid for the cluster's life (a
// topic is never deleted). Safe for concurrent use.
type Topic[T any] struct {
	c     *Cluster
	bt    BackendTopic
	sp    stampedPublisher // bt, or bt stamped by clockStamped when its backend does not report record times
	codec Codec[T]
	into  decoderInto[T] // codec, when it decodes in place; else nil
	pt    string         // the payload type, codec.Name()
}

func newTopic[T any](c *Cluster, bt BackendTopic, codec Codec[T], pt string) *Topic[T] {
	sp, ok := bt.(stampedPublisher)
	if !ok {
		sp = clockStamped{bt}
	}
	into, _ := codec.(decoderInto[T])
	if jc, ok := codec.(jsonCodec[T]); ok && !jc.inPlace {
		// A user's UnmarshalJSON or UnmarshalText would be handed the
		// address of the message's Value in the poll's result slice,
		// which a later poll into that slice (a Messages loop's batch, a
		// reused AppendPoll buffer) overwrites: a receiver it kept (a
		// parent pointer, a registry) would change under the caller.
		// Such types decode into a value of their own and are copied.
		into = nil
	}
	return &Topic[T]{c: c, bt: bt, sp: sp, codec: codec, into: into, pt: pt}
}

// CreateTopic creates topic name with partitions partitions (1..64) for
// payloads of type T encoded by codec (nil: JSON[T]()), records its payload
// type (the codec's Name, read once here, and the Go type T) and returns
// its handle. Errors: ErrExists when the topic exists (nothing changes,
// whatever its type); ErrInvalidArgument for an invalid name or partition
// count, a nil c, or a codec that is a typed nil or whose Name panics;
// ErrClosed after Cluster.Close.
func CreateTopic[T any](c *Cluster, name string, partitions int32, codec Codec[T]) (*Topic[T], error) {
	if err := checkCluster(c); err != nil {
		return nil, err
	}
	codec, pt, err := topicCodec(codec)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("%w: cluster", ErrClosed)
	}
	ok, err := c.backend.CreateTopic(name, partitions, pt)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &existsError{kind: "topic", name: name}
	}
	c.goTypes[name] = reflect.TypeFor[T]()
	bt, _, err := c.backend.OpenTopic(name)
	if err != nil {
		return nil, err
	}
	return newTopic(c, bt, codec, pt), nil
}

// OpenTopic returns a handle on the existing topic name for payloads of
// type T decoded by codec (nil: JSON[T]()). Errors: ErrUnknownTopic;
// ErrTypeMismatch when the topic was created with another payload type
// (another codec Name, or, for a topic this Cluster created, another Go type);
// ErrInvalidArgument (as CreateTopic: a nil c, a typed-nil codec, a
// panicking Name); nothing changes.
func OpenTopic[T any](c *Cluster, name string, codec Codec[T]) (*Topic[T], error) {
	if err := checkCluster(c); err != nil {
		return nil, err
	}
	codec, want, err := topicCodec(codec)
	if err != nil {
		return nil, err
	}
	bt, pt, err := c.backend.OpenTopic(name)
	if err != nil {
		return nil, err
	}
	if pt != want {
		return nil, fmt.Errorf("%w: topic %q holds %s, not %s", ErrTypeMismatch, name, pt, want)
	}
	c.mu.Lock()
	gt, known := c.goTypes[name]
	c.mu.Unlock()
	if want := reflect.TypeFor[T](); known && gt != want {
		return nil, fmt.Errorf("%w: topic %q holds Go type %v, not %v", ErrTypeMismatch, name, gt, want)
	}
	return newTopic(c, bt, codec, pt), nil
}

// OpenOrCreateTopic is OpenTopic, creating the topic with partitions
// partitions (1..64) when the cluster has none of that name; a topic
// another caller creates meanwhile is opened. An existing topic keeps its
// own partition count. Errors: as OpenTopic (ErrTypeMismatch for a topic of
// another payload type) and CreateTopic (ErrInvalidArgument for an invalid
// name or partition count; ErrClosed).
func OpenOrCreateTopic[T any](c *Cluster, name string, partitions int32, codec Codec[T]) (*Topic[T], error) {
	t, err := OpenTopic(c, name, codec)
	if !errors.Is(err, ErrUnknownTopic) {
		return t, err
	}
	t, err = CreateTopic(c, name, partitions, codec)
	if errors.Is(err, ErrExists) {
		return OpenTopic(c, name, codec)
	}
	return t, err
}

// Name returns the topic's name.
func (t *Topic[T]) Name() string { return t.bt.Name() }

// Partitions returns the topic's partition count now, 1..64.
func (t *Topic[T]) Partitions() int32 { return t.bt.Partitions() }

// PayloadType returns the payload type recorded at creation: the codec's
// Name, which every Message of the topic reports as its PayloadType.
func (t *Topic[T]) PayloadType() string { return t.pt }

// Codec returns the topic's codec.
func (t *Topic[T]) Codec() Codec[T] { return t.codec }

// Cluster returns the cluster the topic belongs to.
func (t *Topic[T]) Cluster() *Cluster { return t.c }

// Describe is Cluster.Describe of this topic (SPEC rule 23).
func (t *Topic[T]) Describe() (TopicDescription, error) {
	return t.c.backend.Describe(t.bt.Name())
}

// TopicSnapshot is a topic's description and its retained messages, all of
// one instant (Topic.Snapshot).
type TopicSnapshot[T any] struct {
	TopicDescription
	// Messages[p] holds partition p's retained messages, from its log start
	// offset to its log end offset, ascending. Attempt is 0: a snapshot is no
	// delivery. A payload that does not decode has Err set.
	Messages [][]Message[T]
}

// Snapshot returns the topic's description (as Describe) and every message
// it retains, taken at one instant (SPEC rule 23; engine.Broker.Snapshot).
// It copies up to capacity × partitions messages: an inspection call (the
// program's `show topic`), not a way to consume; no group's state changes.
// The result is the caller's. Errors: ErrInvalidArgument.
func (t *Topic[T]) Snapshot() (TopicSnapshot[T], error) {
	s, err := t.c.backend.Snapshot(t.bt.Name())
	if err != nil {
		return TopicSnapshot[T]{}, err
	}
	out := TopicSnapshot[T]{TopicDescription: s.TopicDescription, Messages: make([][]Message[T], len(s.Records))}
	for p, recs := range s.Records {
		ms := make([]Message[T], len(recs))
		for i := range recs {
			ms[i] = t.message(&recs[i])
		}
		out.Messages[p] = ms
	}
	return out, nil
}

// message turns a record of this topic into a typed Message, its ID
// allocated on its own (cold paths: Snapshot).
func (t *Topic[T]) message(r *engine.Record) Message[T] {
	var m Message[T]
	t.fill(&m, r, messageID(r.Partition, r.Offset))
	return m
}

// fill sets *m to the typed Message of r with the given ID. A payload that
// does not decode, or whose Decode panics, gives a Message with Err set
// (wrapping ErrDecode) and the zero Value. The payload type is the
// topic's, or a dead letter's own HeaderPayloadType, which is stripped
// from the headers. m does not escape: it may be a local of the caller.
func (t *Topic[T]) fill(m *Message[T], r *engine.Record, id string) {
	t.fillMeta(m, r, id)
	v, err := decode(t.codec, t.pt, r.Payload)
	if err != nil {
		m.Err = decodeErr(r, err)
	} else {
		m.Value = v
	}
}

// fillHeap is fill for a message already on the heap (an element of a
// poll's result slice): a codec that decodes in place (decoderInto)
// writes its value straight into m.Value, so no T is allocated for the
// decoder and copied out. m escapes, which is why fill does not do this:
// its callers' messages would each be moved to the heap.
func (t *Topic[T]) fillHeap(m *Message[T], r *engine.Record, id string) {
	if t.into == nil {
		t.fill(m, r, id)
		return
	}
	t.fillMeta(m, r, id)
	if err := decodeInto(t.into, t.pt, r.Payload, &m.Value); err != nil {
		m.Err = decodeErr(r, err)
	}
}

// fillMeta sets *m to the Message of r with the given ID and no Value.
func (t *Topic[T]) fillMeta(m *Message[T], r *engine.Record, id string) {
	*m = Message[T]{
		ID:          id,
		Topic:       r.Topic,
		Partition:   r.Partition,
		Offset:      r.Offset,
		Key:         r.Key,
		Time:        r.Time,
		Attempt:     r.Attempt,
		Payload:     r.Payload,
		PayloadType: t.pt,
	}
	if len(r.Headers) > 0 {
		var pt string
		if m.Headers, pt = splitHeaders(r.Headers); pt != "" {
			m.PayloadType = pt
		}
	}
}

// decodeErr is the Message.Err of record r whose payload did not decode.
func decodeErr(r *engine.Record, err error) error {
	return fmt.Errorf("%w: topic %q partition %d offset %d: %w", ErrDecode, r.Topic, r.Partition, r.Offset, err)
}
