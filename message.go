package tributary

import (
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/f91dcac0/tributary/engine"
)

// Header is a message header: an ordered key/value pair (engine.Header).
type Header = engine.Header

// Headers this library writes. User headers may not use
// HeaderPayloadType; the dead-letter headers are written on the copy of a
// record that Consumer.Run sends to a dead-letter topic.
const (
	// HeaderPayloadType carries the payload type (the codec's Name) of a
	// dead letter, beside the HeaderDeadLetter* headers. Other records do
	// not carry it: the payload type is the topic's, recorded once at
	// creation (Backend.OpenTopic returns it). A Consumer strips the
	// header, where a record has it, into Message.PayloadType.
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
	// and the same on every redelivery and replay. IDs share memory (a
	// 1 KiB block holds about 50): an ID kept long after its message keeps
	// its block alive; strings.Clone(m.ID) keeps only its own bytes.
	ID        string
	Topic     string
	Partition int32 // sending: read only by a Manual producer; receiving: the partition
	Offset    int64 // the record's offset in its partition
	Key       string
	Headers   []Header // user headers, in order; HeaderPayloadType is not among them
	// Time is the creation time. Sending, the caller may set it; left zero,
	// the broker stamps the record with its clock as it appends it, and
	// Send returns that time.
	Time time.Time
	// PayloadType is the topic's payload type (Topic.PayloadType; a dead
	// letter's HeaderPayloadType), set when the message is sent and
	// received.
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

// messageID is the ID of the record at (partition, offset), allocated on
// its own (a cold path: the ones that build many use an idArena).
func messageID(partition int32, offset int64) string {
	var b [32]byte
	s := strconv.AppendInt(b[:0], int64(partition), 10)
	s = append(s, '-')
	s = strconv.AppendInt(s, offset, 10)
	return string(s)
}

// idBlockSize is the size of one idArena block, in bytes: about 50 IDs of
// offsets below 10^12, so building IDs allocates once per ~50 messages.
// An ID keeps its whole block alive: 1 KiB at most per retained ID.
const idBlockSize = 1024

// idArena builds message IDs without an allocation each: it formats each ID
// into the unused tail of a shared byte block, reserved by an atomic add,
// and returns a string over those bytes. Bytes once reserved and written
// are never written again, so each string is immutable for its whole life;
// a full block is replaced by a new one and freed when no ID over it is
// referenced. Safe for concurrent use: concurrent callers reserve disjoint
// ranges. The zero idArena is ready to use.
type idArena struct {
	cur atomic.Pointer[idBlock]
}

// idBlock is one block of an idArena; used counts its reserved bytes and
// may pass len(buf) (a reservation that did not fit, abandoned).
type idBlock struct {
	used atomic.Int64
	buf  [idBlockSize]byte // one allocation with used, holding no pointers
}

// id returns the ID of (partition, offset); negative values (which no
// record has) fall back to messageID.
func (a *idArena) id(partition int32, offset int64) string {
	if partition < 0 || offset < 0 {
		return messageID(partition, offset)
	}
	return putID(a.reserve(idLen(partition, offset)), partition, offset)
}

// appendIDs appends the IDs of recs, in order, to dst and returns it: as
// id, with one reservation for as many of them as the current block's
// free tail holds, so that a batch of records costs one atomic add (or a
// few, across a block's end), not one each, and fills blocks as fully as
// id does.
func (a *idArena) appendIDs(dst []string, recs []engine.Record) []string {
	for len(recs) > 0 {
		blk := a.cur.Load()
		free := 0
		if blk != nil {
			free = len(blk.buf) - int(min(blk.used.Load(), int64(len(blk.buf))))
		}
		n, k := 0, 0
		for ; k < len(recs); k++ {
			l := idLen(recs[k].Partition, recs[k].Offset)
			if n+l > free {
				break
			}
			n += l
		}
		if k == 0 { // not even the first fits: the next block holds it
			a.cur.CompareAndSwap(blk, new(idBlock)) // lost: another caller's block serves
			continue
		}
		var buf []byte
		if n > 0 { // else only IDs left to messageID
			var ok bool
			if buf, ok = blk.take(n); !ok {
				continue // another caller took part of the tail first
			}
		}
		for _, r := range recs[:k] {
			if r.Partition < 0 || r.Offset < 0 {
				dst = append(dst, messageID(r.Partition, r.Offset))
				continue
			}
			l := idLen(r.Partition, r.Offset)
			dst = append(dst, putID(buf[:l:l], r.Partition, r.Offset))
			buf = buf[l:]
		}
		recs = recs[k:]
	}
	return dst
}

// idLen is the length of the arena's ID of (partition, offset): 0 for the
// negative values id leaves to messageID.
func idLen(partition int32, offset int64) int {
	if partition < 0 || offset < 0 {
		return 0
	}
	return decimalLen(uint64(partition)) + 1 + decimalLen(uint64(offset))
}

// putID writes the ID of (partition, offset), both non-negative, into all
// of dst, whose length is idLen(partition, offset), and returns it as a
// string over dst's bytes, which must never be written again.
func putID(dst []byte, partition int32, offset int64) string {
	np := decimalLen(uint64(partition))
	putDecimal(dst[:np], uint64(partition))
	dst[np] = '-'
	putDecimal(dst[np+1:], uint64(offset))
	return unsafe.String(&dst[0], len(dst))
}

// reserve returns n fresh bytes (1 ≤ n ≤ idBlockSize) of the arena, never
// handed out before: from the current block's unused tail, or a new
// block's.
func (a *idArena) reserve(n int) []byte {
	for {
		blk := a.cur.Load()
		if blk != nil {
			if b, ok := blk.take(n); ok {
				return b
			}
		}
		a.cur.CompareAndSwap(blk, new(idBlock)) // lost: another caller's block serves
	}
}

// take reserves the next n bytes of b by an atomic add and returns them;
// false when they would pass its end (the reservation is then abandoned,
// and b serves no one again).
func (b *idBlock) take(n int) ([]byte, bool) {
	end := b.used.Add(int64(n))
	if end > int64(len(b.buf)) {
		return nil, false
	}
	return b.buf[end-int64(n) : end : end], true
}

// decimalLen is the number of decimal digits of v (1 for 0).
func decimalLen(v uint64) int {
	n := 1
	for v >= 100 {
		v /= 100
		n += 2
	}
	if v >= 10 {
		n++
	}
	return n
}

// putDecimal writes v in decimal into all of dst, whose length is
// decimalLen(v).
func putDecimal(dst []byte, v uint64) {
	i := len(dst)
	for v >= 100 {
		q := v / 100
		r := v - q*100
		i -= 2
		dst[i], dst[i+1] = digitPairs[2*r], digitPairs[2*r+1]
		v = q
	}
	if v >= 10 {
		i -= 2
		dst[i], dst[i+1] = digitPairs[2*v], digitPairs[2*v+1]
		return
	}
	dst[i-1] = byte('0' + v)
}

// digitPairs holds "00" to "99".
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

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
