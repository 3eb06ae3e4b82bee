package tributary

import (
	"strconv"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// Header is a message header: an ordered key/value pair (engine.Header).
type Header = engine.Header

// Headers this library writes. User headers may not use
// HeaderPayloadType; the dead-letter headers are written on the copy of a
// record that Consumer.Run sends to a dead-letter topic.
const (
	// HeaderPayloadType carries the topic's payload type (the codec's Name)
	// on every message; Consumer strips it into Message.PayloadType.
	HeaderPayloadType = "tributary-payload-type"
	// The origin of a dead letter: topic, group, partition, offset (decimal),
	// the attempts made (decimal) and the last error's text.
	HeaderDeadLetterTopic     = "tributary-dlq-topic"
	HeaderDeadLetterGroup     = "tributary-dlq-group"
	HeaderDeadLetterPartition = "tributary-dlq-partition"
	HeaderDeadLetterOffset    = "tributary-dlq-offset"
	HeaderDeadLetterAttempts  = "tributary-dlq-attempts"
	HeaderDeadLetterError     = "tributary-dlq-error"
)

// Message is one typed message: what a Producer sends (Key, Headers, Time,
// Value, and Partition for a Manual producer) and what a Consumer receives
// (every field). It is a value: the library keeps no reference to it.
type Message[T any] struct {
	// ID identifies the message in its topic: "<partition>-<offset>", set
	// when it is sent. It is unique per topic (offsets are never reused)
	// and the same on every redelivery and replay.
	ID        string
	Topic     string
	Partition int32 // sending: read only by a Manual producer; receiving: the partition
	Offset    int64 // the record's offset in its partition
	Key       string
	Headers   []Header  // user headers, in order; HeaderPayloadType is not among them
	Time      time.Time // creation time; zero when sending: the producer's clock (time.Now)
	// PayloadType is the topic's payload type (HeaderPayloadType), set when
	// the message is sent and received.
	PayloadType string
	Value       T
	// Attempt counts deliveries of this record to the consumer's group: 1
	// the first time, +1 each redelivery (SPEC rule 16). Receiving only.
	Attempt int32
	// Payload is the value as the codec encoded it.
	Payload string
	// Err is non-nil (wrapping ErrDecode) when Payload did not decode; Value
	// is then T's zero value. Receiving only.
	Err error
}

// messageID is the ID of the record at (partition, offset).
func messageID(partition int32, offset int64) string {
	var b [32]byte
	s := strconv.AppendInt(b[:0], int64(partition), 10)
	s = append(s, '-')
	s = strconv.AppendInt(s, offset, 10)
	return string(s)
}

// splitHeaders returns the user headers of a record and its payload type.
// h is the record's own copy (the engine copies headers out), so the
// payload-type header is removed in place; nil when no user header is left.
func splitHeaders(h []Header) (user []Header, payloadType string) {
	for i, x := range h {
		if x.Key == HeaderPayloadType {
			payloadType = x.Value
			user = append(h[:i], h[i+1:]...)
			if len(user) == 0 {
				user = nil
			}
			return user, payloadType
		}
	}
	return h, ""
}
