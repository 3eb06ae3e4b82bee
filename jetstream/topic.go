package jetstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

// Record headers. The user's key and headers are encoded (base64; headers
// as a JSON list of pairs of base64 strings, so any bytes survive, order
// and duplicates kept) so that no user header can collide with these
// names or break NATS header syntax.
const (
	hdrTime    = "Tributary-Time"    // Unix ns, decimal; or RFC 3339 outside int64 ns (years 1678–2262)
	hdrKey     = "Tributary-Key"     // base64 of the key; absent when empty
	hdrHeaders = "Tributary-Headers" // base64 of JSON [[key, value], ...] of base64 strings; absent when none
)

// maxHeaderBytes is the NATS server's limit on a message's header block
// (API error 10097 above it); encode refuses a record whose encoded key and
// headers would exceed it, leaving room for the server's own headers.
const maxHeaderBytes = 64*1024 - 1024

// fallbackWait bounds a blocked Publish or Poll between checks: the
// wake-ups are core NATS messages, which a reconnect can lose.
const fallbackWait = 2 * time.Second

// Topic is a tributary.BackendTopic: one topic of a Backend.
type Topic struct {
	b     *Backend
	name  string
	count *partCount // shared by the Backend's handles of the topic
}

// partCount caches a topic's partition count: parts, read at checked (Unix
// ns). Partitions rereads it after a second; a partition at or beyond it is
// checked against the topic key before it is refused; AddPartitions through
// the same Backend updates it at once.
type partCount struct {
	parts   atomic.Int32
	checked atomic.Int64
}

// set stores n unless the cache already holds more (counts only grow).
func (c *partCount) set(n int32) {
	for {
		old := c.parts.Load()
		if n <= old || c.parts.CompareAndSwap(old, n) {
			break
		}
	}
	c.checked.Store(time.Now().UnixNano())
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// Partitions returns the partition count, 1..64, as read at most a second
// ago (AddPartitions by another process shows up within that second).
func (t *Topic) Partitions() int32 {
	if time.Now().UnixNano()-t.count.checked.Load() > int64(time.Second) {
		t.refresh() //nolint:errcheck // keep the cached count on failure
	}
	return t.count.parts.Load()
}

// refresh rereads the partition count.
func (t *Topic) refresh() error {
	tv, _, err := t.b.lookupTopic(t.name)
	if err != nil {
		return err
	}
	t.count.set(tv.Partitions)
	return nil
}

// checkPartition returns engine.ErrInvalidArgument unless 0 <= p <
// partition count.
func (t *Topic) checkPartition(p int32) error {
	if p >= 0 && p < t.count.parts.Load() {
		return nil
	}
	if p >= 0 {
		if err := t.refresh(); err != nil {
			return err
		}
		if p < t.count.parts.Load() {
			return nil
		}
	}
	return invalid("topic %q: partition %d outside [0,%d)", t.name, p, t.count.parts.Load())
}

// TryPublish appends m to partition and returns its offset (SPEC rules 5,
// 15, 21): the stream sequence − 1. A zero m.Time is the broker clock now.
// When the stream refuses the publish as full (API error 10077, using no
// offset), it applies retention with eviction (retain) and tries again:
// with a replay window the oldest fully committed record makes room, and
// records an interrupted purge left below the log start are purged. It
// returns full only when no retained record is fully committed or the
// topic has no group. Errors (offset -1): engine.ErrInvalidArgument
// (partition out of range, message over MaxMessageBytes);
// tributary.ErrPartitionFull when the partition retains Capacity records
// none of which may go; ErrUnavailable; ErrContention when concurrent
// publishes took the room it made maxRetries times in a row.
func (t *Topic) TryPublish(partition int32, m engine.Message) (int64, error) {
	if err := t.checkPartition(partition); err != nil {
		return -1, err
	}
	if max := t.b.cfg.MaxMessageBytes; max > 0 {
		n := len(m.Key) + len(m.Payload)
		for _, h := range m.Headers {
			n += len(h.Key) + len(h.Value)
		}
		if n > max {
			return -1, invalid("topic %q: message of %d bytes exceeds the limit of %d", t.name, n, max)
		}
	}
	msg, err := t.b.encode(t.name, partition, &m)
	if err != nil {
		return -1, err
	}
	for range maxRetries {
		off, full, err := t.publishOnce(msg)
		if !full {
			return off, err
		}
		freed, err := t.b.retain(t.name, partition, true)
		if err != nil {
			return -1, err
		}
		if !freed {
			return -1, fmt.Errorf("%w: topic %q partition %d", tributary.ErrPartitionFull, t.name, partition)
		}
	}
	return -1, fmt.Errorf("%w: publishing to %s/%d", ErrContention, t.name, partition)
}

// publishOnce publishes msg; full reports the stream's refusal for
// MaxMsgs.
func (t *Topic) publishOnce(msg *nats.Msg) (off int64, full bool, err error) {
	ctx, cancel := t.b.ctx()
	defer cancel()
	ack, err := t.b.js.PublishMsg(ctx, msg)
	if err != nil {
		if apiCode(err) == 10077 && strings.Contains(err.Error(), "maximum messages") {
			return -1, true, nil
		}
		return -1, false, t.b.fail(err)
	}
	return int64(ack.Sequence) - 1, false, nil
}

// Publish is TryPublish that, on a full partition, waits for a change that
// can make room and tries again, until ctx ends (ctx.Err()) or stop or the
// Backend closes (tributary.ErrClosed). The changes it wakes on are every
// one that can let a publish to the full partition succeed: a purge of the
// partition (its room notice); a commit or Seek of any group there (its
// cursor's state key), which may make the oldest record fully committed
// without purging anything when the replay window covers it, so that the
// next publish gives that record up (SPEC rule 21); and a change of any
// group of the topic (its state key: a deleted group stops holding
// records). Without any, it tries again after fallbackWait (a reconnect
// may lose a wake-up).
func (t *Topic) Publish(ctx context.Context, stop <-chan struct{}, partition int32, m engine.Message) (int64, error) {
	off, err := t.TryPublish(partition, m)
	if !isFull(err) {
		return off, err
	}
	b := t.b
	return block(ctx, stop, b, []string{
		b.roomSubject(t.name, partition),
		b.stateSubject(partCursorsKey(t.name, partition)),
		b.stateSubject(groupsKey(t.name)),
	}, -1, func() (int64, time.Duration, bool, error) {
		off, err := t.TryPublish(partition, m)
		return off, b.roomWait, !isFull(err), err
	}, func(backendClosed bool) error {
		if backendClosed {
			return fmt.Errorf("%w: backend closed while waiting for room in topic %q partition %d", tributary.ErrClosed, t.name, partition)
		}
		return fmt.Errorf("%w: waiting for room in topic %q partition %d", tributary.ErrClosed, t.name, partition)
	})
}

func isFull(err error) bool {
	return err != nil && errors.Is(err, tributary.ErrPartitionFull)
}

// Member returns member of group on this topic (it need not have joined).
// Errors: engine.ErrInvalidArgument for an invalid identifier.
func (t *Topic) Member(group, member string) (tributary.BackendMember, error) {
	if err := engine.CheckIdentifier("group", group); err != nil {
		return nil, err
	}
	if err := engine.CheckIdentifier("member", member); err != nil {
		return nil, err
	}
	return &Member{t: t, b: t.b, group: group, name: member}, nil
}

// encode builds the NATS message of m for partition p of topic. Errors
// (engine.ErrInvalidArgument, nothing sent): a time outside years 0–9999,
// a key and headers that encode to more than the server's header limit
// (about 47 KiB of raw bytes), or a message larger than the server's
// max_payload.
func (b *Backend) encode(topic string, p int32, m *engine.Message) (*nats.Msg, error) {
	msg := nats.NewMsg(b.partSubject(topic, p))
	ts := m.Time
	if ts.IsZero() {
		ts = b.now()
	}
	if y := ts.Year(); y > 1678 && y < 2262 {
		msg.Header.Set(hdrTime, strconv.FormatInt(ts.UnixNano(), 10))
	} else {
		txt, err := ts.UTC().MarshalText()
		if err != nil {
			return nil, invalid("topic %q: message time %v: %v", topic, ts, err)
		}
		msg.Header.Set(hdrTime, string(txt))
	}
	if m.Key != "" {
		msg.Header.Set(hdrKey, base64.StdEncoding.EncodeToString([]byte(m.Key)))
	}
	if len(m.Headers) > 0 {
		pairs := make([][2][]byte, len(m.Headers))
		for i, h := range m.Headers {
			pairs[i] = [2][]byte{[]byte(h.Key), []byte(h.Value)}
		}
		js, err := json.Marshal(pairs)
		if err != nil {
			return nil, err
		}
		msg.Header.Set(hdrHeaders, base64.StdEncoding.EncodeToString(js))
	}
	if n := len(msg.Header.Get(hdrKey)) + len(msg.Header.Get(hdrHeaders)); n > maxHeaderBytes {
		return nil, invalid("topic %q: key and headers encode to %d bytes, over the server's header limit of %d", topic, n, maxHeaderBytes)
	}
	msg.Data = []byte(m.Payload)
	if max := b.nc.MaxPayload(); max > 0 && int64(len(msg.Data)+len(msg.Header.Get(hdrKey))+len(msg.Header.Get(hdrHeaders))+256) > max {
		return nil, invalid("topic %q: message of %d bytes with its key and headers is over the server's max_payload of %d", topic, len(msg.Data), max)
	}
	return msg, nil
}

// decodeRecord returns the record a stream message holds (Topic,
// Partition, Offset and Attempt left for the caller).
func decodeRecord(m *njs.RawStreamMsg) (engine.Record, error) {
	r := engine.Record{Payload: string(m.Data)}
	corrupt := func(what string, err error) error {
		return fmt.Errorf("tributary/jetstream: record %s seq %d: bad %s: %v", m.Subject, m.Sequence, what, err)
	}
	if v := m.Header.Get(hdrTime); v != "" {
		if ns, err := strconv.ParseInt(v, 10, 64); err == nil {
			r.Time = time.Unix(0, ns)
		} else if err := r.Time.UnmarshalText([]byte(v)); err != nil {
			return r, corrupt("time", err)
		}
	}
	if v := m.Header.Get(hdrKey); v != "" {
		k, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return r, corrupt("key", err)
		}
		r.Key = string(k)
	}
	if v := m.Header.Get(hdrHeaders); v != "" {
		js, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return r, corrupt("headers", err)
		}
		var pairs [][2][]byte
		if err := json.Unmarshal(js, &pairs); err != nil {
			return r, corrupt("headers", err)
		}
		r.Headers = make([]engine.Header, len(pairs))
		for i, h := range pairs {
			r.Headers[i] = engine.Header{Key: string(h[0]), Value: string(h[1])}
		}
	}
	return r, nil
}
