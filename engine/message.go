package engine

import (
	"fmt"
	"time"

	"github.com/f91dcac0/tributary/internal/message"
)

// Header is one user header of a message: an ordered key/value pair. Keys
// need not be unique; the broker keeps headers in the order given.
type Header struct{ Key, Value string }

// Message is what PublishMessage appends (SPEC rule 15). Publish(t, p, s)
// is PublishMessage(t, p, Message{Payload: s}).
type Message struct {
	Key     string   // optional; producers' partitioners read it, the broker only stores it
	Headers []Header // user headers, in order; the broker keeps its own copy
	Payload string   // the record's value, possibly empty
	// Time is the message's creation time; the zero Time means "now": the
	// broker's clock read during the publish (WithClock's; by default the
	// wall clock to a resolution of 1 ms, see WithClock).
	Time time.Time
}

// Record is a value snapshot of one retained record, as returned by Poll.
// Changing a Record, its Headers included, never changes the broker.
type Record struct {
	Topic     string // the topic's identifier
	Partition int32  // partition index in [0, partitionCount)
	Offset    int64  // the record's offset in its partition, from 0
	Payload   string // the published payload, possibly empty

	Key     string    // the message key, possibly empty
	Headers []Header  // a copy of the message headers, owned by the caller; nil when it had none
	Time    time.Time // the message's creation time (Message.Time, or the broker clock at publish)
	// Attempt counts the deliveries of this record to this group, this one
	// included (SPEC rule 16): 1 the first time, +1 after each Retry,
	// rebalance that cancelled it, or ack timeout.
	Attempt int32
}

// Option configures a Broker at New. Each option is checked by New, which
// returns ErrInvalidArgument for a value outside its range.
type Option func(*config)

type config struct {
	window     int32            // WithReplayWindow; 0..capacity
	clock      func() time.Time // WithClock; nil: time.Now
	clockSet   bool
	ackTimeout time.Duration // WithAckTimeout; 0: none
	ackSet     bool
	maxBytes   int // WithMaxMessageBytes; 0: no limit
	maxSet     bool
	extended   bool          // WithExtendedCapacity
	session    time.Duration // WithSessionTimeout; 0: none
	sessionSet bool
}

// WithExtendedCapacity makes New accept a capacityPerPartition up to
// MaxExtendedCapacity (16,777,216) records instead of SPEC rule 1's 1,000:
// the bound of the typed library (docs/contract.md, the typed library's capacity), which
// tributary.NewCluster passes. Every rule but rule 1 is unchanged, and
// WithReplayWindow's range follows the capacity. A partition's memory
// follows the records it retains, never its capacity: beyond 1,024 records
// of capacity the log holds pages of 1,024 record slots only for what it
// retains (New). Without this option New keeps rule 1 exactly.
func WithExtendedCapacity() Option {
	return func(c *config) { c.extended = true }
}

// maxCapacity is the largest capacity New accepts with c.
func (c *config) maxCapacity() int32 {
	if c.extended {
		return MaxExtendedCapacity
	}
	return MaxCapacity
}

// WithReplayWindow makes each partition keep up to records of its most
// recent fully committed records (committed by every group of the topic)
// instead of removing them at once, so that Seek can replay them; a publish
// to a full partition then removes the oldest fully committed record to make
// room (SPEC rule 21). records is 0..capacityPerPartition; the default 0 is
// exactly SPEC rule 13.
func WithReplayWindow(records int32) Option {
	return func(c *config) { c.window = records }
}

// WithClock sets the broker clock, read for a message's Time when it has
// none, with WithAckTimeout for delivery ages and with WithSessionTimeout
// for members' last-seen instants. now must not be nil and
// must not call the broker; its readings are kept as Unix nanoseconds, so
// they must lie between the years 1678 and 2262 (time.Time.UnixNano's
// range). Tests use it to control time. With WithClock every reading is a
// call of now.
//
// The default is the wall clock. Delivery ages and last-seen instants read
// it exactly, to the nanosecond, so ack and session timeouts never fire
// early. A record's time (SPEC rule 15) reads a coarse copy of it, refreshed every millisecond by a goroutine that runs
// while the broker publishes and exits within about 10 ms of the last
// publish, and read exactly by every 64th publish to a partition: it is
// at most 1 ms behind the exact reading while the refresher gets CPU, and
// at most the time the partition's last 64 publishes took while it does
// not (a busy publisher at GOMAXPROCS 1), and ahead of it only after the
// system clock was set back by less than 100 ms (it keeps its later
// reading until the exact one passes it), so a record's time may be up to
// 1 ms before a time.Now taken just before the publish; the times of
// records published one after another are non-decreasing unless the
// system clock is set back by more. With WithSessionTimeout a publish
// compares the same reading with the topic's earliest session deadline
// and expires members only at an exact reading (WithSessionTimeout).
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.clock, c.clockSet = now, true }
}

// WithAckTimeout makes an in-flight delivery that is d or more old by the
// broker clock stop blocking its partition: the owner's next Poll delivers
// it again with Attempt + 1 (SPEC rule 22). Until then it stays in flight
// and Ack and Retry of it work. It is evaluated lazily by Poll: no timers,
// no goroutines. A delivery's age is read on the exact broker clock, never
// the coarse copy that stamps records (WithClock), so on the default clock
// a delivery is redelivered no earlier than d after its Poll. d must be >
// 0; the default is no timeout.
func WithAckTimeout(d time.Duration) Option {
	return func(c *config) { c.ackTimeout, c.ackSet = d, true }
}

// WithMaxMessageBytes bounds one message: a PublishMessage whose key, header
// keys, header values and payload add up to more than n bytes returns
// ErrInvalidArgument and changes nothing (SPEC rule 15). n must be > 0; the
// default is no limit.
func WithMaxMessageBytes(n int) Option {
	return func(c *config) { c.maxBytes, c.maxSet = n, true }
}

// check returns ErrInvalidArgument for the first option outside its range.
func (c *config) check(capacity int32) error {
	switch {
	case c.window < 0 || c.window > capacity:
		return fmt.Errorf("%w: replay window %d outside [0,%d] (the capacity)", ErrInvalidArgument, c.window, capacity)
	case c.clockSet && c.clock == nil:
		return fmt.Errorf("%w: nil clock", ErrInvalidArgument)
	case c.ackSet && c.ackTimeout <= 0:
		return fmt.Errorf("%w: ack timeout %v, want > 0", ErrInvalidArgument, c.ackTimeout)
	case c.maxSet && c.maxBytes <= 0:
		return fmt.Errorf("%w: max message bytes %d, want > 0", ErrInvalidArgument, c.maxBytes)
	}
	return c.checkSession()
}

// messageSize is the size WithMaxMessageBytes bounds, in bytes.
func messageSize(m *Message) int { return message.Size(m.Key, m.Payload, m.Headers) }

// cloneHeaders returns a copy of h, or nil when h is empty (no allocation).
func cloneHeaders(h []Header) []Header { return message.CloneHeaders(h) }
