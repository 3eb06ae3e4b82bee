package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"

	"github.com/f91dcac0/tributary"
)

// The program's payload types (docs/cli.md): each is one Go type and codec
// of the typed library.
//
//	Integer → int64,           tributary.Integer[int64]()
//	String  → string,          tributary.String()
//	JSON    → json.RawMessage, tributary.JSON[json.RawMessage]() (any JSON value)
var payloadKinds = map[string]payloadKind{"Integer": &integerKind, "String": &stringKind, "JSON": &jsonKind}

// payloadKind is a kind whatever its Go type: what the commands that name
// a payload type make of it.
type payloadKind interface {
	createTopic(s *session, name string, partitions int32) (topicRef, error)
	// openTopic opens the existing topic name (one another process may
	// have created) as a topic of this kind.
	openTopic(s *session, name string) (topicRef, error)
	newProducer(s *session, name string, pt tributary.Partitioner) (producerRef, error)
}

// kindOf is the kind of a topic's payload type as the backend stores it
// (the codec's Name): the program's Integer, String or JSON, or a
// foreignKind.
func kindOf(payloadType string) payloadKind {
	if k, ok := payloadKinds[payloadType]; ok {
		return k
	}
	return foreignKind(payloadType)
}

// foreignKind is a payload type the program has no kind for: a topic
// another client of the backend created with its own codec ("Bytes",
// "JSON:main.Order", "Integer:int32", a user's). Its payloads are read as
// stored (rawCodec) and printed as JSON when the type is JSON or Integer
// text and the payload is valid JSON, else Go-quoted. The program has no
// producer of such a type, so it only shows and consumes these topics.
func foreignKind(payloadType string) *kind[string] {
	return &kind[string]{
		name:  payloadType,
		codec: rawCodec(payloadType),
		parse: func(json.RawMessage) (string, error) {
			return "", fmt.Errorf("the program makes no %s values", payloadType)
		},
		format: func(v string) string {
			if (strings.HasPrefix(payloadType, "JSON") || strings.HasPrefix(payloadType, "Integer")) && json.Valid([]byte(v)) {
				return printableJSON([]byte(v))
			}
			return strconv.Quote(v)
		},
	}
}

// rawCodec is the codec of a foreignKind: its Name is the topic's payload
// type, and a payload is its own value, unchanged both ways (so a
// dead-lettered payload is the original's).
type rawCodec string

func (c rawCodec) Name() string                        { return string(c) }
func (rawCodec) Encode(v string) (string, error)       { return v, nil }
func (rawCodec) Decode(payload string) (string, error) { return payload, nil }

func (k *kind[T]) openTopic(s *session, name string) (topicRef, error) {
	t, err := tributary.OpenTopic(s.c, name, k.codec)
	if err != nil {
		return nil, err
	}
	return &typedTopic[T]{Topic: t, k: k, s: s}, nil
}

func (k *kind[T]) createTopic(s *session, name string, partitions int32) (topicRef, error) {
	t, err := tributary.CreateTopic(s.c, name, partitions, k.codec)
	if err != nil {
		return nil, err
	}
	return &typedTopic[T]{Topic: t, k: k, s: s}, nil
}

func (k *kind[T]) newProducer(s *session, name string, pt tributary.Partitioner) (producerRef, error) {
	p, err := tributary.NewProducer[T](s.c, name, pt)
	if err != nil {
		return nil, err
	}
	return &typedProducer[T]{Producer: p, k: k, s: s}, nil
}

// kind is one payload type: how an event file's "value" becomes a T and
// how a T is printed.
type kind[T any] struct {
	name  string
	codec tributary.Codec[T]
	// parse turns the event file's "value" into a T, or explains why not.
	parse func(raw json.RawMessage) (T, error)
	// format prints a value on one line (strings quoted, JSON compacted).
	format func(v T) string
}

var (
	integerKind = kind[int64]{
		name:  "Integer",
		codec: tributary.Integer[int64](),
		parse: func(raw json.RawMessage) (int64, error) {
			d := json.NewDecoder(bytes.NewReader(raw))
			d.UseNumber()
			var v any
			if err := d.Decode(&v); err != nil {
				return 0, fmt.Errorf("value %s is not JSON", clipped(string(raw)))
			}
			n, ok := v.(json.Number)
			if !ok || strings.ContainsAny(n.String(), ".eE") {
				return 0, fmt.Errorf("value %s is not a JSON integer", clipped(string(raw)))
			}
			i, err := strconv.ParseInt(n.String(), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("value %s is outside the Integer range [-2^63, 2^63-1]", clipped(string(raw)))
			}
			return i, nil
		},
		format: func(v int64) string { return strconv.FormatInt(v, 10) },
	}
	stringKind = kind[string]{
		name:  "String",
		codec: tributary.String(),
		parse: func(raw json.RawMessage) (string, error) {
			var s *string
			if err := json.Unmarshal(raw, &s); err != nil || s == nil {
				return "", fmt.Errorf("value %s is not a JSON string", clipped(string(raw)))
			}
			return *s, nil
		},
		format: strconv.Quote,
	}
	jsonKind = kind[json.RawMessage]{
		name:  "JSON",
		codec: tributary.JSON[json.RawMessage](),
		parse: func(raw json.RawMessage) (json.RawMessage, error) {
			var b bytes.Buffer
			if err := json.Compact(&b, raw); err != nil {
				return nil, fmt.Errorf("value is not JSON: %v", err)
			}
			return b.Bytes(), nil
		},
		format: func(v json.RawMessage) string { return printableJSON(v) },
	}
)

// printableJSON is a compact JSON value for one table cell: a control or
// non-printable character (possible only inside a string) becomes its
// \u escape, and invalid UTF-8 becomes \ufffd, so the value stays one line
// and still reads as the same JSON.
func printableJSON(v []byte) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(string(v), "\ufffd") {
		if unicode.IsPrint(r) || r == ' ' {
			b.WriteRune(r)
		} else if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
		} else {
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// topicRef is a typed topic of the session, whatever its payload type.
type topicRef interface {
	Name() string
	Kind() string
	Partitions() int32
	// snapshot is the topic's description and retained events, printable.
	snapshot() (snapshot, error)
	// newConsumer joins group as name with the session's options.
	newConsumer(group, name string, opts consumerOpts) (consumerRef, error)
	// open is the topic of this kind named name (a dead-letter topic).
	open(name string) (topicRef, error)
}

// producerRef is a typed producer of the session.
type producerRef interface {
	Name() string
	Kind() string
	Strategy() string
	// check parses ev's value as the producer's payload type.
	check(ev event) error
	// produce sends ev to t (partition used by a Manual producer only).
	produce(ctx context.Context, t topicRef, ev event, partition int32) (sent, error)
	Close() error
}

// consumerRef is a typed consumer of the session.
type consumerRef interface {
	Name() string
	Group() string
	Topic() topicRef
	Assignment() []int32
	DeadLetter() (string, int32)
	// Heartbeat keeps the consumer's session, joining its group again
	// when it had expired (Stats().Expired counts it).
	Heartbeat() error
	Stats() tributary.ConsumerStats
	// consume reserves the event at the group's committed offset on
	// partition; with fail it is Nacked with cause, else acked.
	consume(ctx context.Context, partition int32, fail string) (delivery, bool, error)
	// seek moves the group's committed offset on partition.
	seek(partition int32, offset int64) error
	Close() error
}

// event is a parsed event file.
type event struct {
	Key     string
	Headers []tributary.Header
	Value   json.RawMessage
}

// sent is what a produce reports.
type sent struct {
	ID        string
	Partition int32
	Offset    int64
	Key       string
}

// delivery is one consumed event, formatted.
type delivery struct {
	ID        string
	Partition int32
	Offset    int64
	Attempt   int32
	Key       string
	Value     string // formatted by the kind
	Outcome   string // "acked", "retried", "dead-lettered to T"
}

// snapshot is a topic's state at one instant, with its events formatted.
type snapshot struct {
	tributary.TopicSnapshot[string]
}

type typedTopic[T any] struct {
	*tributary.Topic[T]
	k *kind[T]
	s *session
}

func (t *typedTopic[T]) Kind() string { return t.k.name }

func (t *typedTopic[T]) snapshot() (snapshot, error) {
	s, err := t.Topic.Snapshot()
	if err != nil {
		return snapshot{}, err
	}
	out := snapshot{tributary.TopicSnapshot[string]{TopicDescription: s.TopicDescription, Messages: make([][]tributary.Message[string], len(s.Messages))}}
	for p, ms := range s.Messages {
		f := make([]tributary.Message[string], len(ms))
		for i, m := range ms {
			f[i] = tributary.Message[string]{
				ID: m.ID, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key,
				Headers: m.Headers, Time: m.Time, PayloadType: m.PayloadType, Value: t.k.format(m.Value),
				Payload: m.Payload, Err: m.Err,
			}
			if m.Err != nil {
				f[i].Value = "(undecodable) " + strconv.Quote(m.Payload)
			}
		}
		out.Messages[p] = f
	}
	return out, nil
}

func (t *typedTopic[T]) newConsumer(group, name string, o consumerOpts) (consumerRef, error) {
	var opts []tributary.ConsumerOption
	if o.deadLetter != "" {
		opts = append(opts, tributary.WithDeadLetter(o.deadLetter, o.maxAttempts))
	}
	c, err := tributary.NewConsumer(t.Topic, group, name, opts...)
	if err != nil {
		return nil, err
	}
	return &typedConsumer[T]{Consumer: c, t: t}, nil
}

func (t *typedTopic[T]) open(name string) (topicRef, error) { return t.k.openTopic(t.s, name) }

type typedProducer[T any] struct {
	*tributary.Producer[T]
	k *kind[T]
	s *session
}

func (p *typedProducer[T]) Kind() string { return p.k.name }

func (p *typedProducer[T]) check(ev event) error {
	_, err := p.k.parse(ev.Value)
	return err
}

func (p *typedProducer[T]) produce(ctx context.Context, t topicRef, ev event, partition int32) (sent, error) {
	tt, ok := t.(*typedTopic[T])
	if !ok || tt.k != p.k {
		return sent{}, fmt.Errorf("%w: producer %s makes %s events; topic %s holds %s", errTypeMismatch, quote(p.Name()), p.k.name, quote(t.Name()), t.Kind())
	}
	v, err := p.k.parse(ev.Value)
	if err != nil {
		return sent{}, fmt.Errorf("%w: %v: topic %s holds %s events", errTypeMismatch, err, quote(t.Name()), p.k.name)
	}
	m, err := p.TrySend(tt.Topic, tributary.Message[T]{Key: ev.Key, Headers: ev.Headers, Value: v, Partition: partition, Time: p.s.now()})
	if errors.Is(err, tributary.ErrPartitionFull) {
		// A record is removed once every group has acked it (contract rule 13).
		return sent{}, fmt.Errorf("%w: %s %s holds its capacity of events; every consumer group of the topic must consume some first (with no group, nothing is ever removed)", tributary.ErrPartitionFull, t.Name(), p.s.partName(t.Name(), m.Partition))
	}
	if err != nil {
		return sent{}, err
	}
	return sent{ID: m.ID, Partition: m.Partition, Offset: m.Offset, Key: m.Key}, nil
}

type typedConsumer[T any] struct {
	*tributary.Consumer[T]
	t *typedTopic[T]
}

func (c *typedConsumer[T]) Topic() topicRef { return c.t }

func (c *typedConsumer[T]) consume(ctx context.Context, partition int32, fail string) (delivery, bool, error) {
	m, ok, err := c.TryPollPartition(partition)
	if err != nil || !ok {
		return delivery{}, false, err
	}
	d := delivery{ID: m.ID, Partition: m.Partition, Offset: m.Offset, Attempt: m.Attempt, Key: m.Key, Value: c.t.k.format(m.Value), Outcome: "acked"}
	if m.Err != nil {
		d.Value = "(undecodable) " + strconv.Quote(m.Payload)
	}
	if fail == "" {
		return d, true, c.Ack(m)
	}
	// Never wait for room in the dead-letter topic: nothing else runs to
	// make it. A cancelled context makes Nack try the publish once.
	now, cancel := context.WithCancel(ctx)
	cancel()
	dead, err := c.Nack(now, m, errors.New(fail))
	switch {
	case errors.Is(err, context.Canceled):
		dl, _ := c.DeadLetter()
		if rerr := c.Retry(m); rerr != nil {
			return d, true, rerr
		}
		d.Outcome = "retried"
		return d, true, fmt.Errorf("%w: dead-letter topic %s has no room for %s (events leave a topic only once every consumer group of it has consumed them; with no group, nothing is ever removed); the event was retried instead (attempt %d)", tributary.ErrPartitionFull, quote(dl), m.ID, m.Attempt)
	case err != nil:
		return d, true, err
	case dead:
		dl, _ := c.DeadLetter()
		d.Outcome = "dead-lettered to " + dl
	default:
		d.Outcome = "retried"
	}
	return d, true, nil
}

func (c *typedConsumer[T]) seek(partition int32, offset int64) error {
	return c.Seek(partition, offset)
}
