package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/engine/assign"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

// Errors of this package. Each is returned wrapped with context; test with
// errors.Is. The engine's and the typed library's sentinels
// (engine.ErrInvalidArgument, tributary.ErrPartitionFull, …) are returned
// as the in-process backend returns them.
var (
	// ErrUnavailable is returned by Open, StartServer and StartCluster when
	// the server cannot be reached or started within the configured timeout,
	// and by any call whose request to the server failed or timed out
	// (Config.RequestTimeout). The call may or may not have taken effect.
	// It wraps tributary.ErrUnavailable, on which the typed library's
	// Consumer.Run waits and tries again.
	// Its text, "tributary/jetstream: server unavailable", does not repeat
	// tributary.ErrUnavailable's.
	ErrUnavailable error = &unavailableError{}
	// ErrUnknownAssignor is returned by a rebalancing call (Join, Leave,
	// AddPartitions) on a group whose assignor, named in the shared state,
	// is a user assignor this Backend did not give the group: one given to
	// CreateGroup or SetAssignor through another Backend (another process).
	// Nothing changed.
	ErrUnknownAssignor = errors.New("tributary/jetstream: the group's assignor is not known to this Backend")
	// ErrContention is returned when a compare-and-set loop lost more than
	// maxRetries races in a row; the call changed nothing of its own (a
	// helping migration it made may stay). Retrying is safe.
	ErrContention = errors.New("tributary/jetstream: too much contention")
)

// unavailableError is ErrUnavailable: a sentinel of this package that
// wraps tributary.ErrUnavailable without spelling it out again.
type unavailableError struct{}

func (*unavailableError) Error() string { return "tributary/jetstream: server unavailable" }
func (*unavailableError) Unwrap() error { return tributary.ErrUnavailable }

// errStale is internal: a cursor is at a newer group generation than the
// caller's view of the group; re-read the group.
var errStale = errors.New("stale group view")

// errHoldShort is internal to Seek: its hold on the log start has less
// than a request's time left; release it and hold again.
var errHoldShort = errors.New("seek hold too short")

// maxRetries bounds every compare-and-set loop.
const maxRetries = 1000

// Storage selects where JetStream keeps the streams.
type Storage int

const (
	// FileStorage keeps streams on disk: they survive a server restart.
	// The default.
	FileStorage Storage = iota
	// MemoryStorage keeps streams in server memory: lost on restart.
	MemoryStorage
)

// Config configures Open. The zero value of each field but Capacity and
// one of URL or Server means its default.
type Config struct {
	// URL is the nats:// URL (several separated by commas) of the server
	// or cluster. Exactly one of URL and Server is set.
	URL string
	// Server, when set, is an embedded server to connect to in-process,
	// without a socket; the connection follows its Restart.
	Server *Server
	// Capacity is the most records a partition retains, 1..16,777,216
	// (the typed library's bound, docs/contract.md; rule 1's 1..1000
	// included). It is set on each partition's stream (MaxMsgs) when the
	// topic is created; a topic keeps the capacity it was created with.
	// The server stores only what is retained, so a large capacity costs
	// nothing until records arrive.
	Capacity int32
	// SessionTimeout is rule 24's session timeout, on the broker clock;
	// 0 means none (members never expire). Must be 0 or at least
	// tributary.MinSessionTimeout. Weakened here (docs/jetstream.md): a
	// member's last-seen instant is refreshed by its Join, Rejoin and
	// Heartbeat (a running consumer heartbeats every
	// tributary.HeartbeatInterval), and members are expired by the
	// Heartbeats, Joins and Rejoins of their group, not by every call.
	SessionTimeout time.Duration
	// AckTimeout is rule 22's ack timeout; 0 means none. Must be >= 0. It
	// is measured by Clock between deliverer and poller, so the processes
	// sharing a group must agree on the time.
	AckTimeout time.Duration
	// MaxMessageBytes bounds key + header keys + header values + payload,
	// in bytes (SPEC rule 15); 0 means no limit (the server's max_payload,
	// 1 MiB by default, still applies). Must be >= 0.
	MaxMessageBytes int
	// Replicas is each stream's replication factor: 1 (default) or 3 (a
	// JetStream cluster of at least 3 nodes).
	Replicas int
	// Storage is FileStorage (default) or MemoryStorage.
	Storage Storage
	// Prefix names this backend's streams (<Prefix>_STATE and
	// <Prefix>_<topic>_<partition>) and, lowercased, its subjects: 1 to 32
	// of A-Z a-z 0-9 -, no underscore (so that the first underscore of a
	// stream name ends the prefix: prefix "A" with topic "B_x" and prefix
	// "A_B" with topic "x" would share a stream); default "TRIB". Two
	// backends with different prefixes share a server without seeing each
	// other, provided the prefixes differ in more than letter case.
	Prefix string
	// ConnectTimeout bounds Open's connection attempt; default 5 s.
	ConnectTimeout time.Duration
	// RequestTimeout bounds each request to the server; default 5 s.
	RequestTimeout time.Duration
	// Clock is the broker clock: record times and ack-timeout ages. Default
	// time.Now. Tests inject one.
	Clock func() time.Time
	// ReplayWindow is SPEC rule 21's window, in records, 0..Capacity
	// (default 0: rule 13 exactly): each partition keeps up to this many of
	// its most recent fully committed records (committed by every group)
	// for Seek to replay, and a publish to a full partition removes the
	// oldest fully committed record to make room. Like Capacity it is fixed
	// for a topic when the topic is created (stored with it); later Opens
	// with another window do not change it.
	ReplayWindow int32
	// Logger receives the backend's events (nil: silent, the default):
	// the connection lost (Warn) and back (Info), group rebalances and
	// session expiries (Info), and the repairs the backend makes for a
	// process that died mid-call (Warn: a cursor a placer left below the
	// log start moved up to it). Nothing per record.
	Logger *slog.Logger
}

// Backend is a tributary.Backend on NATS JetStream: every partition is a
// stream, and all group and topic state lives in one key-value state stream
// updated by compare-and-set (see the package doc). Any number of Backends,
// in any number of processes, may share a server and prefix; they then form
// one broker. Its methods are safe for concurrent use.
type Backend struct {
	cfg   Config
	nc    *nats.Conn
	js    njs.JetStream
	state njs.Stream
	sp    string // subject prefix: lowercased Prefix
	now   func() time.Time

	closeOnce sync.Once
	closed    chan struct{} // closed by Close

	// roomWait bounds a blocked Publish's wait between tries when no
	// wake-up arrives: fallbackWait; fixed at Open (a test may lengthen
	// it, to show that the wake-ups alone suffice).
	roomWait time.Duration
	// pollWait is roomWait for a blocked Poll.
	pollWait time.Duration

	// mu guards assignors (topic/group → the user assignor this process
	// gave the group, registered once its CreateGroup or SetAssignor
	// committed),
	// streams (stream name → handle, a cache), counts (topic → its
	// partition-count cache, shared by the topic's handles) and windows
	// (topic → its replay window, fixed at creation: a cache), and
	// pending (topic/group → the user assignors of this process's
	// CreateGroup and SetAssignor writes under way, not yet known to have
	// committed or been refused).
	mu        sync.Mutex
	assignors map[string]userAssignor
	pending   map[string][]*userAssignor
	streams   map[string]njs.Stream
	counts    map[string]*partCount
	windows   map[string]int64

	// snapshots is whether the state stream takes snapshot reads
	// (batch.go): set at Open when it has direct gets, cleared for good
	// if the server refuses one.
	snapshots atomic.Bool
	snaps     snapReplies

	// cache holds the state values decoded or written last
	// (statecache.go).
	cache stateCache

	// landed caches, per partition stream name, the highest pending
	// eviction's log end (lowVal.Evict) known to have been published past:
	// log ends only grow, so it stays landed (readLow).
	landed sync.Map

	// unsure holds, per cursor key, the reservation a Poll of this
	// process wrote without learning whether it took effect (the reply
	// was lost: a server restarting). The member's next poll of the
	// partition delivers it if it did (Member.pollPartition).
	unsure sync.Map // cursor key → unsureReservation

	// lossy, nil but in tests, makes put fail a write of key as a lost
	// request (written false: before sending it) or a lost reply (written
	// true: after the server applied it) when it returns true.
	lossy func(key string, written bool) bool
	// reading, nil but in tests, is called before each read of one key
	// (getTomb): a test runs other calls there, between two reads.
	reading func(key string)
}

var _ tributary.Backend = (*Backend)(nil)

// Open connects to the server of cfg, creates the state stream if missing,
// and returns the Backend. It fails within cfg.ConnectTimeout (plus one
// RequestTimeout for the stream) with an error wrapping ErrUnavailable
// when the server cannot be reached or has no JetStream, never hanging.
// Once connected, the Backend reconnects forever after a server restart or
// a lost connection; calls made meanwhile fail with ErrUnavailable after
// RequestTimeout. Errors: engine.ErrInvalidArgument for a Config field out
// of range (ReplayWindow outside 0..Capacity included); ErrUnavailable.
func Open(cfg Config) (*Backend, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name("tributary"),
		nats.Timeout(cfg.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(100 * time.Millisecond),
		nats.NoCallbacksAfterClientClose(),
		nats.ErrorHandler(asyncError),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			cfg.Logger.Warn("tributary/jetstream: connection lost", "prefix", cfg.Prefix, "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			cfg.Logger.Info("tributary/jetstream: connection back", "prefix", cfg.Prefix, "url", nc.ConnectedUrlRedacted())
		}),
		// A connection nats.go gives up on (an error from the server it
		// does not reconnect after) is closed for good: every later call
		// returns tributary.ErrClosed. Say why. (NoCallbacksAfterClientClose:
		// not called for Close.)
		nats.ClosedHandler(func(nc *nats.Conn) {
			cfg.Logger.Error("tributary/jetstream: connection closed by the client library; the Backend is closed", "prefix", cfg.Prefix, "error", nc.LastError())
		}),
	}
	url := cfg.URL
	if cfg.Server != nil {
		opts = append(opts, nats.InProcessServer(cfg.Server))
		url = cfg.Server.ClientURL()
	}
	nc, err := connect(url, cfg.ConnectTimeout, opts)
	if err != nil {
		return nil, err
	}
	js, err := njs.New(nc, njs.WithDefaultTimeout(cfg.RequestTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	b := &Backend{
		cfg: cfg, nc: nc, js: js,
		sp:        strings.ToLower(cfg.Prefix),
		now:       cfg.Clock,
		closed:    make(chan struct{}),
		roomWait:  fallbackWait,
		pollWait:  fallbackWait,
		assignors: map[string]userAssignor{},
		pending:   map[string][]*userAssignor{},
		streams:   map[string]njs.Stream{},
		counts:    map[string]*partCount{},
		windows:   map[string]int64{},
	}
	b.state, err = b.ensureStream(njs.StreamConfig{
		Name:              cfg.Prefix + "_STATE",
		Subjects:          []string{b.sp + ".state.>"},
		Retention:         njs.LimitsPolicy,
		MaxMsgsPerSubject: 1,
		Discard:           njs.DiscardOld,
	})
	if err != nil {
		nc.Close()
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, njs.ErrJetStreamNotEnabled) {
			// A server without JetStream answers no JetStream request.
			return nil, fmt.Errorf("%w (is JetStream enabled on the server? nats-server -js)", err)
		}
		return nil, err
	}
	if info := b.state.CachedInfo(); info != nil && info.Config.AllowDirect {
		b.snapshots.Store(true)
	}
	return b, nil
}

// asyncError is the connection's handler of asynchronous errors, which
// writes nothing: a library does not print. Our core NATS subscriptions
// are wake-ups only (a blocked Poll or Publish also re-checks on a timer),
// so a dropped message or a slow consumer is harmless, and every failure
// that matters (a lost connection, a server without JetStream) reaches the
// caller as the error of a request. Without it nats.go's default handler
// would print them to stderr ("slow consumer", "read/write on closed pipe"
// at a server's shutdown).
func asyncError(*nats.Conn, *nats.Subscription, error) {}

// wakeSettle is when, after the last message that woke it, wakeOn wakes
// its waiter again: each delay counted from the one before.
var wakeSettle = [...]time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 400 * time.Millisecond}

// wakeOn subscribes to subjects (core NATS) and returns a channel that
// holds a value after any message arrived since it was last drained. The
// callback never blocks (a 1-slot channel, a non-blocking send), so the
// subscriptions cannot become slow consumers. stop unsubscribes.
//
// A message on a stream's subject reaches core subscribers when the
// server receives it, not once the stream has stored it (the stream
// stores on a queue of its own): a waiter woken by an Ack's cursor write
// can read the state before that write is there, find nothing changed and
// wait again, with no wake-up left to come (seen: a Publish to a full
// partition waiting out its fallback after the last Ack that made room).
// The same lag hides a write whose message passed before the
// subscriptions were made: the waiter's re-check, made once they are,
// can still read the state without it, and no message of it is to come
// (seen: one loaded race run in 50 of TestPublishWakesOnCommit, its
// Publish subscribing just after the Ack that made room, waited out its
// fallback so).
// So each wake-up, and the subscribing itself, comes again after each
// delay of wakeSettle (20 ms, then 100 ms and 500 ms after), by when a
// loaded server has stored the write; a message meanwhile starts the
// series again. Past the last, the waiter's fallback (fallbackWait) is
// left.
func (b *Backend) wakeOn(subjects ...string) (wake <-chan struct{}, stop func(), err error) {
	ch := make(chan struct{}, 1)
	signal := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	var (
		mu      sync.Mutex // guards again, step and stopped
		again   *time.Timer
		step    int // the delay of wakeSettle again is timing
		stopped bool
	)
	settle := func() {
		signal()
		mu.Lock()
		defer mu.Unlock()
		if step++; !stopped && step < len(wakeSettle) {
			again.Reset(wakeSettle[step])
		}
	}
	subs := make([]*nats.Subscription, 0, len(subjects))
	stop = func() {
		for _, s := range subs {
			s.Unsubscribe() //nolint:errcheck // best effort
		}
		mu.Lock()
		stopped = true
		if again != nil {
			again.Stop()
		}
		mu.Unlock()
	}
	for _, subj := range subjects {
		s, err := b.nc.Subscribe(subj, func(*nats.Msg) {
			signal()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case stopped: // a callback still running as stop returned
			case again == nil:
				again = time.AfterFunc(wakeSettle[0], settle)
			default:
				step = 0
				again.Reset(wakeSettle[0])
			}
		})
		if err != nil {
			stop()
			return nil, nil, b.fail(err)
		}
		subs = append(subs, s)
	}
	if err := b.nc.FlushTimeout(b.cfg.RequestTimeout); err != nil {
		stop()
		return nil, nil, b.fail(err)
	}
	// A write whose message passed before the subscriptions were made
	// may be stored only after the waiter's re-check has read the state:
	// the series starts now too, as if a message had just come.
	mu.Lock()
	if again == nil && !stopped {
		again = time.AfterFunc(wakeSettle[0], settle)
	}
	mu.Unlock()
	return ch, stop, nil
}

// connect dials url, giving up after timeout even where the client would
// wait longer.
func connect(url string, timeout time.Duration, opts []nats.Option) (*nats.Conn, error) {
	type result struct {
		nc  *nats.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(url, opts...)
		ch <- result{nc, err}
	}()
	t := time.NewTimer(timeout + time.Second)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%w: connecting to %s: %v", ErrUnavailable, url, r.err)
		}
		return r.nc, nil
	case <-t.C:
		go func() { // close the connection if it ever completes
			if r := <-ch; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, fmt.Errorf("%w: connecting to %s: no answer within %v", ErrUnavailable, url, timeout)
	}
}

// fill checks cfg and sets its defaults.
func (cfg *Config) fill() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: jetstream config: "+format, append([]any{engine.ErrInvalidArgument}, args...)...)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case (cfg.URL == "") == (cfg.Server == nil):
		return bad("set exactly one of URL and Server")
	case cfg.Capacity < 1 || cfg.Capacity > engine.MaxExtendedCapacity:
		return bad("capacity %d outside 1..%d", cfg.Capacity, engine.MaxExtendedCapacity)
	case cfg.ReplayWindow < 0 || cfg.ReplayWindow > cfg.Capacity:
		return bad("replay window %d outside 0..%d (the capacity)", cfg.ReplayWindow, cfg.Capacity)
	case cfg.AckTimeout < 0:
		return bad("ack timeout %v < 0", cfg.AckTimeout)
	case cfg.SessionTimeout < 0 || cfg.SessionTimeout > 0 && cfg.SessionTimeout < tributary.MinSessionTimeout:
		return bad("session timeout %v: 0 (none) or at least %v", cfg.SessionTimeout, tributary.MinSessionTimeout)
	case cfg.MaxMessageBytes < 0:
		return bad("max message bytes %d < 0", cfg.MaxMessageBytes)
	case cfg.Replicas != 0 && cfg.Replicas != 1 && cfg.Replicas != 3:
		return bad("replicas %d, want 1 or 3", cfg.Replicas)
	case cfg.Storage != FileStorage && cfg.Storage != MemoryStorage:
		return bad("unknown storage %d", cfg.Storage)
	case cfg.ConnectTimeout < 0 || cfg.RequestTimeout < 0:
		return bad("negative timeout")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "TRIB"
	}
	if len(cfg.Prefix) > 32 || engine.CheckIdentifier("prefix", cfg.Prefix) != nil || strings.Contains(cfg.Prefix, "_") {
		return bad("prefix %q: want 1 to 32 of A-Z a-z 0-9 - (no underscore)", cfg.Prefix)
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return nil
}

// Close closes the connection. Blocked Polls and Publishes return
// ErrClosed; later calls fail with tributary.ErrClosed. The server and its
// streams are untouched. Closing twice is a no-op.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		close(b.closed)
		b.nc.Close()
	})
	return nil
}

// ctx returns a context bounded by the request timeout.
func (b *Backend) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
}

// fail maps a NATS error: a closed Backend or connection gives
// tributary.ErrClosed, any other failure ErrUnavailable, both wrapping err.
func (b *Backend) fail(err error) error {
	select {
	case <-b.closed:
		return fmt.Errorf("%w: backend: %w", tributary.ErrClosed, err)
	default:
	}
	// nats.go also answers ErrConnectionClosed for a flush or request cut
	// short by a disconnect (FlushTimeout's pending pong, during a
	// reconnect): closed only if the connection is.
	if errors.Is(err, nats.ErrConnectionClosed) && (b.nc == nil || b.nc.IsClosed()) {
		return fmt.Errorf("%w: backend: %w", tributary.ErrClosed, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// apiCode returns the JetStream API error code in err, or 0.
func apiCode(err error) njs.ErrorCode {
	var je njs.JetStreamError
	if errors.As(err, &je) {
		if a := je.APIError(); a != nil {
			return a.ErrorCode
		}
	}
	return 0
}

// ensureStream creates the stream of cfg (storage and replicas from the
// Backend's Config) or returns the existing one of that name.
func (b *Backend) ensureStream(cfg njs.StreamConfig) (njs.Stream, error) {
	b.mu.Lock()
	s, ok := b.streams[cfg.Name]
	b.mu.Unlock()
	if ok {
		return s, nil
	}
	cfg.Replicas = b.cfg.Replicas
	// Direct gets (answered by the stream's server itself, raw, without
	// the JSON API's envelope and base64) only on one replica: that server
	// is the stream, so a read still sees every acknowledged write. With 3
	// replicas any of them could answer, possibly behind: reads then go to
	// the leader through the API.
	cfg.AllowDirect = cfg.Replicas == 1
	cfg.Storage = njs.FileStorage
	if b.cfg.Storage == MemoryStorage {
		cfg.Storage = njs.MemoryStorage
	}
	ctx, cancel := b.ctx()
	defer cancel()
	s, err := b.js.CreateStream(ctx, cfg)
	if errors.Is(err, njs.ErrStreamNameAlreadyInUse) {
		s, err = b.js.Stream(ctx, cfg.Name)
	}
	if err != nil {
		return nil, b.fail(fmt.Errorf("stream %s: %w", cfg.Name, err))
	}
	b.mu.Lock()
	b.streams[cfg.Name] = s
	b.mu.Unlock()
	return s, nil
}

// partName and partSubject name partition p's stream and subject.
func (b *Backend) partName(topic string, p int32) string {
	return b.cfg.Prefix + "_" + topic + "_" + strconv.Itoa(int(p))
}

func (b *Backend) partSubject(topic string, p int32) string {
	return b.sp + ".rec." + topic + "." + strconv.Itoa(int(p))
}

// roomSubject carries a core NATS notice after each purge of a partition.
func (b *Backend) roomSubject(topic string, p int32) string {
	return b.sp + ".room." + topic + "." + strconv.Itoa(int(p))
}

// partStream returns partition p's stream, creating it if missing: the
// stream holds offsets as sequences − 1, MaxMsgs = capacity, DiscardNew,
// so a full partition refuses a publish without using a sequence.
func (b *Backend) partStream(topic string, p int32) (njs.Stream, error) {
	return b.ensureStream(njs.StreamConfig{
		Name:      b.partName(topic, p),
		Subjects:  []string{b.partSubject(topic, p)},
		Retention: njs.LimitsPolicy,
		MaxMsgs:   int64(b.cfg.Capacity),
		Discard:   njs.DiscardNew,
	})
}

// invalid returns an engine.ErrInvalidArgument error.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{engine.ErrInvalidArgument}, args...)...)
}

// lookupTopic validates topic and reads it. Errors: ErrInvalidArgument
// (also wrapping tributary.ErrUnknownTopic for an absent topic, rule 4).
func (b *Backend) lookupTopic(topic string) (topicVal, uint64, error) {
	if err := engine.CheckIdentifier("topic", topic); err != nil {
		return topicVal{}, 0, err
	}
	var tv topicVal
	rev, ok, err := b.get(topicKey(topic), &tv)
	if err != nil {
		return tv, 0, err
	}
	if !ok {
		return tv, 0, fmt.Errorf("%w: %w: %q", engine.ErrInvalidArgument, tributary.ErrUnknownTopic, topic)
	}
	return tv, rev, nil
}

// maxPayloadType bounds a topic's payload type name, in bytes: it lives in
// the topic key's JSON value, which must fit one NATS message.
const maxPayloadType = 1024

// CreateTopic creates topic with partitions streams (1..64, SPEC rule 2)
// of Config.Capacity records each and records payloadType and
// Config.ReplayWindow with it, returning true; false, changing nothing, when
// the topic exists. The topic key's compare-and-set is the commit point:
// streams made by a losing concurrent call stay, unused. Errors:
// engine.ErrInvalidArgument (invalid identifier or count, a payload type
// that is not UTF-8 or is over 1 KiB), ErrUnavailable.
func (b *Backend) CreateTopic(topic string, partitions int32, payloadType string) (bool, error) {
	if err := engine.CheckIdentifier("topic", topic); err != nil {
		return false, err
	}
	if partitions < 1 || partitions > engine.MaxPartitionCount {
		return false, invalid("topic %q: partition count %d outside 1..%d", topic, partitions, engine.MaxPartitionCount)
	}
	if !utf8.ValidString(payloadType) || len(payloadType) > maxPayloadType {
		return false, invalid("topic %q: payload type %q: want UTF-8 of at most %d bytes", topic, payloadType, maxPayloadType)
	}
	var tv topicVal
	rev, ok, err := b.get(topicKey(topic), &tv)
	if err != nil || ok {
		return false, err
	}
	for p := range partitions {
		if _, err := b.partStream(topic, p); err != nil {
			return false, err
		}
	}
	_, ok, err = b.put(topicKey(topic), topicVal{Partitions: partitions, PayloadType: payloadType, Window: b.cfg.ReplayWindow}, rev)
	return ok, err
}

// window returns topic's replay window (rule 21), read from the topic key
// once and then cached: it never changes. Errors: as lookupTopic.
func (b *Backend) window(topic string) (int64, error) {
	b.mu.Lock()
	w, ok := b.windows[topic]
	b.mu.Unlock()
	if ok {
		return w, nil
	}
	tv, _, err := b.lookupTopic(topic)
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	b.windows[topic] = int64(tv.Window)
	b.mu.Unlock()
	return int64(tv.Window), nil
}

// OpenTopic returns topic's handle and payload type. Errors:
// tributary.ErrUnknownTopic, engine.ErrInvalidArgument (invalid
// identifier), ErrUnavailable.
func (b *Backend) OpenTopic(topic string) (tributary.BackendTopic, string, error) {
	if err := engine.CheckIdentifier("topic", topic); err != nil {
		return nil, "", err
	}
	var tv topicVal
	_, ok, err := b.get(topicKey(topic), &tv)
	if err != nil {
		return nil, "", err
	}
	if !ok {
		return nil, "", fmt.Errorf("%w: %q", tributary.ErrUnknownTopic, topic)
	}
	t := &Topic{b: b, name: topic, count: b.partCount(topic)}
	t.count.set(tv.Partitions)
	return t, tv.PayloadType, nil
}

// partCount returns the Backend's partition-count cache of topic.
func (b *Backend) partCount(topic string) *partCount {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.counts[topic]
	if !ok {
		c = &partCount{}
		b.counts[topic] = c
	}
	return c
}

// Topics returns the topic names, sorted, in a new slice; empty when the
// server cannot be reached.
func (b *Backend) Topics() []string {
	names, _ := b.listKeys("topic.*", 3)
	slices.Sort(names)
	return names
}

// listKeys returns token i of the subjects of the state keys matching
// pattern (a key pattern, e.g. "group.T.*").
func (b *Backend) listKeys(pattern string, i int) ([]string, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	info, err := b.state.Info(ctx, njs.WithSubjectFilter(b.sp+".state."+pattern))
	if err != nil {
		return nil, b.fail(err)
	}
	names := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		if toks := strings.Split(subj, "."); len(toks) > i {
			names = append(names, toks[i])
		}
	}
	return names, nil
}

// checkAssignor validates a and returns its name (rule 18), which the
// group key stores. Errors: engine.ErrInvalidArgument for a nil a, one
// whose name is a built-in's but is not that built-in, or a name that is
// not UTF-8 (JSON state could not keep it); engine.ErrInvalidAssignment
// when Name panics.
func (b *Backend) checkAssignor(a engine.Assignor) (string, error) {
	if assign.IsNil(a) {
		return "", invalid("nil Assignor")
	}
	name, err := assign.Name(a)
	if err != nil {
		return "", err
	}
	if builtin, ok := assign.Lookup(name); ok && reflect.TypeOf(builtin) != reflect.TypeOf(a) {
		return "", invalid("assignor name %q is a built-in's", name)
	}
	if !utf8.ValidString(name) {
		return "", invalid("assignor name %q is not UTF-8", name)
	}
	return name, nil
}

// assignor returns the assignor named name for group g of topic t: a
// built-in, or the user assignor this process gave the group (remember);
// ErrUnknownAssignor otherwise.
func (b *Backend) assignor(t, g, name string) (engine.Assignor, error) {
	if a, ok := assign.Lookup(name); ok {
		return a, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if u, ok := b.assignors[t+"/"+g]; ok && u.name == name {
		return u.a, nil
	}
	for _, u := range b.pending[t+"/"+g] {
		if u.name == name {
			return u.a, nil // its write has committed, remember is on its way
		}
	}
	return nil, fmt.Errorf("%w: %q (group %q of topic %q)", ErrUnknownAssignor, name, g, t)
}

// pend marks a, a user assignor named name, as being written to group g
// of topic t, until the returned function is called (once the write has
// committed and been remembered, or failed). Built-ins need none.
func (b *Backend) pend(t, g, name string, a engine.Assignor) (done func()) {
	if _, ok := assign.Lookup(name); ok {
		return func() {}
	}
	k, u := t+"/"+g, &userAssignor{name, a}
	b.mu.Lock()
	b.pending[k] = append(b.pending[k], u)
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if ps := slices.DeleteFunc(b.pending[k], func(p *userAssignor) bool { return p == u }); len(ps) > 0 {
			b.pending[k] = ps
		} else {
			delete(b.pending, k)
		}
	}
}

// userAssignor is a user assignor and the name it had when registered.
type userAssignor struct {
	name string
	a    engine.Assignor
}

// remember registers a, a user assignor, for group g of topic t, once a
// CreateGroup or SetAssignor with it committed. Built-ins need none.
func (b *Backend) remember(t, g, name string, a engine.Assignor) {
	if _, ok := assign.Lookup(name); ok {
		return
	}
	b.mu.Lock()
	b.assignors[t+"/"+g] = userAssignor{name, a}
	b.mu.Unlock()
}

var (
	_ tributary.BackendTopic  = (*Topic)(nil)
	_ tributary.BackendMember = (*Member)(nil)
)
