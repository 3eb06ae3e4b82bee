package tributary

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/f91dcac0/tributary/engine"
)

// Handler processes one message for Consumer.Run. A nil result acks the
// message; an error (or a panic, recovered) retries it after a backoff,
// until the consumer's maximum attempts send it to the dead-letter topic.
// ctx ends when Run is cancelled or the consumer is closed. A handler may
// call anything on the cluster, this consumer included. m is the
// handler's own, its Headers slice included: changing it changes nothing
// Run does with the record (a dead letter is the record as consumed).
type Handler[T any] func(ctx context.Context, m Message[T]) error

// consumerConfig is a consumer's configuration: its own options, and the
// failure policy of its group, read from the backend when it joins.
type consumerConfig struct {
	batch int32 // records per poll in Run, 1..64

	// The group's failure policy, which Run and Nack apply.
	deadLetter  string        // dead-letter topic; "" for none
	maxAttempts int32         // with deadLetter: attempts before a record is dead-lettered
	backoff     time.Duration // first retry delay
	maxBackoff  time.Duration // cap of the doubling delay

	stopGrace time.Duration // Run: how long a running handler may take to return once ctx ends

	// The consumer's own failure options (FailureOption), which must agree
	// with its group's policy: asked holds what they set, askedDeadLetter
	// and askedBackoff which of them were given, failure the options
	// themselves (a group absent so far is created with them).
	asked           GroupConfig
	askedDeadLetter bool
	askedBackoff    bool
	failure         []GroupOption
}

// follow makes g's failure policy the consumer's.
func (c *consumerConfig) follow(g GroupConfig) {
	c.deadLetter, c.maxAttempts = g.DeadLetter, g.MaxAttempts
	c.backoff, c.maxBackoff = g.backoffs()
}

// agree returns ErrPolicyMismatch unless the consumer's own failure options
// (none: it agrees with anything) match g, the policy of its group.
func (c *consumerConfig) agree(g GroupConfig, topic, group, name string) error {
	var want []string
	if c.askedDeadLetter && (c.asked.DeadLetter != g.DeadLetter || c.asked.MaxAttempts != g.MaxAttempts) {
		want = append(want, fmt.Sprintf("WithDeadLetter(%q, %d)", c.asked.DeadLetter, c.asked.MaxAttempts))
	}
	if c.askedBackoff {
		ai, am := c.asked.backoffs()
		if gi, gm := g.backoffs(); ai != gi || am != gm {
			want = append(want, fmt.Sprintf("WithBackoff(%v, %v)", ai, am))
		}
	}
	if want == nil {
		return nil
	}
	return fmt.Errorf("%w: consumer %q asks for %s; group %q of topic %q has the policy it was created with: %s "+
		"(set a group's failure policy when creating it, Cluster.CreateGroup with WithDeadLetter and WithBackoff, and give its consumers none or the same)",
		ErrPolicyMismatch, name, strings.Join(want, " and "), group, topic, g.Policy())
}

// ConsumerStats counts a consumer's work since it was made. Polls, Waits
// and Wakeups are counted by the in-process backend (NewCluster,
// NewEngineBackend); on a backend that does not count them (JetStream's)
// they stay 0.
type ConsumerStats struct {
	Polls        int64 // polls of the broker (a blocked Poll makes none until woken)
	Waits        int64 // times Poll blocked with nothing deliverable
	Wakeups      int64 // times a blocked Poll was woken (a publish, retry, rebalance, seek, ack timeout)
	Handled      int64 // handler calls made by Run
	Acked        int64 // messages Run acked after its handler succeeded
	Retried      int64 // handler failures Run scheduled for redelivery
	DeadLettered int64 // records Run sent to the dead-letter topic
	// Heartbeats counts the heartbeats the consumer sent to keep its
	// session (SPEC rule 24; Backend.SessionTimeout > 0): Run's and a
	// blocked Poll's, every HeartbeatInterval, Heartbeat's, and those of
	// a TryPoll that found nothing.
	Heartbeats int64
	// Expired counts the times the consumer found its session had expired
	// (SPEC rule 24: it had left its group, its deliveries cancelled) and
	// joined the group again.
	Expired int64
}

// Consumer is a member of a consumer group on one typed topic: Poll blocks
// until messages are deliverable, Run processes them with a Handler. It is
// bound to (topic, group, member) and registered in the cluster under its
// member name. Safe for concurrent use, except that one Run at a time may
// use it.
type Consumer[T any] struct {
	t    *Topic[T]
	m    BackendMember
	name string
	cfg  consumerConfig
	dlq  *Topic[T]
	// group is the configuration of the consumer's group, read from the
	// backend when it joined; cfg holds its failure policy.
	group GroupConfig

	stop chan struct{} // closed by Close, and by fence
	// isClosed is set just before stop is closed, so that closed, on
	// every call's path, is one atomic load and not a select; a goroutine
	// that sees stop closed sees it set.
	isClosed  atomic.Bool
	closeOnce sync.Once
	closeErr  error
	running   atomic.Bool
	// fenced is the error of every call once a newer incarnation of the
	// member superseded the consumer, or RemoveMember removed it (set
	// before stop is closed); nil otherwise.
	fenced atomic.Pointer[error]
	// session is the backend's session timeout (0: none), read once.
	session time.Duration
	// rejoinMu serialises the consumer's joins again after an expiry
	// (rejoin) with each other and with Close's Leave: a second rejoin
	// would find the member joined by the first and, as Rejoin of a
	// member (SPEC rule 25), cancel what it had reserved since; a rejoin
	// after Close's Leave would leave a closed consumer in its group.
	rejoinMu sync.Mutex
	// busy counts the Runs and blocked Polls under way: heartbeatLoop
	// heartbeats while it is not 0. A call that ended between two ticks
	// refreshed the session itself (SPEC rule 24) and is not heartbeated
	// for afterwards.
	busy atomic.Int32

	// ids builds the IDs of the messages the consumer receives.
	ids idArena
	// recs is a record buffer kept between polls (takeRecords).
	recs atomic.Pointer[recordBuf]

	// unreleasedMu guards unreleased: the records a Messages loop could
	// not release as it ended (its Retry met ErrUnavailable), which the
	// consumer's next poll releases first (releaseUnreleased).
	// unreleasedN is len(unreleased), stored under the lock and read
	// without it, so that a poll with nothing to release takes no lock.
	unreleasedMu sync.Mutex
	unreleased   []recordRef
	unreleasedN  atomic.Int32

	handled, acked, retried, deadLettered, heartbeats, expired atomic.Int64

	// assignMu guards assigned: the partitions the consumer last told
	// its cluster's OnAssigned and OnRevoked hooks of (noteAssignment);
	// used only when the cluster has such hooks.
	assignMu sync.Mutex
	assigned []int32
}

// NewConsumer makes name (an identifier) a member of group on topic t: it
// joins, creating the group with RoundRobinAssignor if absent (SPEC rule 7;
// Cluster.CreateGroup picks another assignor and the group's
// configuration), which rebalances the group. The consumer follows its
// group's failure policy (GroupConfig: dead-letter topic, attempts,
// backoff), read from the backend as it joins, whatever process created
// the group. Given WithDeadLetter or WithBackoff, it creates an absent
// group with them (and RoundRobin), and is refused with ErrPolicyMismatch,
// without joining, when its group's policy differs. A consumer name
// belongs to one topic and group in the cluster.
//
// The consumer is a new incarnation of its member (SPEC rule 25): it joins
// with BackendMember.Rejoin, so when name is already a member of the group
// (a process that restarted under the same name, its predecessor gone)
// the predecessor's in-flight deliveries are delivered again at once,
// with Attempt + 1, and the membership stays (no rebalance). A consumer of
// the same name made earlier on the same Backend in this process, by any
// Cluster, is fenced (ErrFenced): it can no longer consume, and its Close
// leaves nothing. Errors: ErrInvalidArgument (an invalid id, an
// option out of range), ErrExists (a consumer of that name is open on
// another topic or group of this cluster; one open on the same topic and
// group is the member's older incarnation, which this one supersedes),
// ErrPolicyMismatch, ErrTypeMismatch (the dead-letter topic holds another
// payload type), ErrInvalidAssignment, ErrClosed.
func NewConsumer[T any](t *Topic[T], group, name string, opts ...ConsumerOption) (*Consumer[T], error) {
	cfg := consumerConfig{batch: DefaultBatch, stopGrace: DefaultStopGrace}
	for _, o := range opts {
		if err := checkOption(o); err != nil {
			return nil, fmt.Errorf("%w (a ConsumerOption)", err)
		}
		o.applyConsumer(&cfg)
	}
	if cfg.batch < 1 || cfg.batch > engine.MaxPollRecords {
		return nil, fmt.Errorf("%w: batch %d outside [1,%d]", ErrInvalidArgument, cfg.batch, engine.MaxPollRecords)
	}
	if cfg.stopGrace < 0 {
		return nil, fmt.Errorf("%w: stop grace %v: want >= 0", ErrInvalidArgument, cfg.stopGrace)
	}
	if err := checkTopic(t); err != nil {
		return nil, err
	}
	if err := cfg.asked.check(t.Name()); err != nil {
		return nil, err
	}
	if err := engine.CheckIdentifier("group", group); err != nil {
		return nil, err
	}
	m, err := t.bt.Member(group, name)
	if err != nil {
		return nil, err
	}
	cl := t.c
	c := &Consumer[T]{t: t, m: m, name: name, cfg: cfg, stop: make(chan struct{}), session: cl.backend.SessionTimeout()}
	// A consumer of the same name open on the same topic and group is not
	// a duplicate but the member's older incarnation (prev), which this
	// one supersedes once it has joined; on another topic or group the
	// name is taken.
	var prev consumerEntry
	var superseding bool
	err = cl.register("consumer", name, func() error {
		if e, ok := cl.consumers[name]; ok {
			if e.topic != t.Name() || e.group != group {
				return &existsError{kind: "consumer", name: name}
			}
			prev, superseding = e, true
		}
		cl.consumers[name] = consumerEntry{goType: reflect.TypeFor[T](), c: c, close: c.Close,
			topic: t.Name(), group: group, fence: c.fence}
		return nil
	})
	if err != nil {
		return nil, err
	}
	unregister := func(err error) (*Consumer[T], error) {
		cl.mu.Lock()
		if e, ok := cl.consumers[name]; ok && e.c == any(c) {
			delete(cl.consumers, name)
			if superseding {
				cl.consumers[name] = prev // the older incarnation stays
			}
		}
		cl.mu.Unlock()
		return nil, err
	}
	// The group's policy, checked before joining so that a refused consumer
	// causes no rebalance; an existing dead-letter topic is checked too.
	// The first consumer of a group absent so far creates it with its own.
	be := cl.backend
	if cfg.askedDeadLetter {
		if c.dlq, err = OpenTopic(cl, cfg.asked.DeadLetter, t.codec); err != nil && !errors.Is(err, ErrUnknownTopic) {
			return unregister(err)
		}
	}
	if len(cfg.failure) > 0 {
		if _, err := be.CreateGroup(t.Name(), group, RoundRobinAssignor, cfg.failure...); err != nil {
			return unregister(err)
		}
	}
	gc, ok, err := be.GroupConfig(t.Name(), group)
	if err != nil {
		return unregister(err)
	}
	if ok {
		if err := cfg.agree(gc, t.Name(), group, name); err != nil {
			return unregister(err)
		}
		if gc.DeadLetter != "" {
			if c.dlq, err = OpenTopic(cl, gc.DeadLetter, t.codec); err != nil && !errors.Is(err, ErrUnknownTopic) {
				return unregister(err)
			}
		}
	}
	parts, err := m.Rejoin()
	if err != nil {
		return unregister(err)
	}
	if superseding {
		// The backend fenced the older incarnation's member with the
		// Rejoin; close that consumer now rather than at its next call
		// (its OnRevoked before this one's OnAssigned, of the same member).
		prev.fence(fmt.Errorf("%w: %w: consumer %q of group %q of topic %q: a newer consumer of its name joined",
			ErrClosed, ErrFenced, name, group, t.Name()))
	}
	if hs := cl.hooksOf(); hs != nil && hs.onRebalance {
		c.setAssignment(hs, parts)
	}
	if c.closed() {
		// Closed (Cluster.Close, CloseConsumer) between register and Join:
		// its Leave may have run before the Join. Wait for that Close to
		// finish (Once), then leave again.
		c.Close() //nolint:errcheck // already closed: returns its result
		m.Leave() //nolint:errcheck // the Join above succeeded with the same names
		return nil, fmt.Errorf("%w: consumer %q closed while joining", ErrClosed, name)
	}
	// Read again now that the consumer is a member: the group can no longer
	// be deleted, so this is the policy it keeps (the first read may have
	// seen a group deleted and created again since, or none).
	if gc, ok, err = be.GroupConfig(t.Name(), group); err == nil && !ok {
		err = fmt.Errorf("%w: group %q of topic %q is gone", ErrNotFound, group, t.Name())
	}
	if err == nil {
		err = cfg.agree(gc, t.Name(), group, name)
	}
	if err != nil {
		c.Close() //nolint:errcheck // reporting err
		return nil, err
	}
	c.cfg.follow(gc)
	c.group = gc
	if every := HeartbeatInterval(c.session); every > 0 {
		go c.heartbeatLoop(every)
	}
	if c.cfg.deadLetter == "" {
		c.dlq = nil
	}
	if c.cfg.deadLetter != "" && (c.dlq == nil || c.dlq.Name() != c.cfg.deadLetter) {
		if c.dlq, err = deadLetterTopic(t, c.cfg.deadLetter); err != nil {
			c.Close() //nolint:errcheck // reporting err
			return nil, err
		}
	}
	return c, nil
}

// deadLetterTopic opens, or creates like t, the dead-letter topic name.
func deadLetterTopic[T any](t *Topic[T], name string) (*Topic[T], error) {
	return OpenOrCreateTopic(t.c, name, t.Partitions(), t.codec)
}

// Name returns the consumer's name, its member id in the group.
func (c *Consumer[T]) Name() string { return c.name }

// Topic returns the consumer's topic.
func (c *Consumer[T]) Topic() *Topic[T] { return c.t }

// Group returns the consumer's group name.
func (c *Consumer[T]) Group() string { return c.m.Group() }

// DeadLetter returns the dead-letter topic's name and the attempts after
// which a failing record goes there, its group's (WithDeadLetter); "" and 0
// without one.
func (c *Consumer[T]) DeadLetter() (topic string, maxAttempts int32) {
	return c.cfg.deadLetter, c.cfg.maxAttempts
}

// GroupConfig returns the configuration of the consumer's group, as the
// backend had it when the consumer joined: the failure policy Run and Nack
// apply, and where the group started. It stays fixed while the consumer is
// a member (a group with members cannot be deleted and created again).
func (c *Consumer[T]) GroupConfig() GroupConfig { return c.group }

// Assignment returns the partitions the consumer owns now, ascending, in a
// new slice; nil once the consumer is closed (it owns nothing, even when a
// new consumer of the same name has joined its group).
func (c *Consumer[T]) Assignment() []int32 {
	if c.closed() {
		return nil
	}
	return c.m.Assignment()
}

// Stats returns the consumer's counters. Polls, Waits and Wakeups come
// from the backend's member when it counts them (pollCounter: the
// in-process backend does); on other backends they stay 0.
func (c *Consumer[T]) Stats() ConsumerStats {
	s := ConsumerStats{Handled: c.handled.Load(), Acked: c.acked.Load(), Retried: c.retried.Load(), DeadLettered: c.deadLettered.Load(),
		Heartbeats: c.heartbeats.Load(), Expired: c.expired.Load()}
	if pc, ok := c.m.(pollCounter); ok {
		s.Polls, s.Waits, s.Wakeups = pc.pollStats()
	}
	return s
}

// Close leaves the group (a rebalance: the consumer's in-flight deliveries
// go to the new owners; SPEC rules 8, 9), removes the consumer from the
// cluster's registry and ends a blocked Poll (ErrClosed) and a running Run
// (which returns nil) without waiting for them, so a handler may call it.
// A fenced consumer (ErrFenced) leaves nothing: the membership is its
// successor's. Closing twice is a no-op and returns the first result.
func (c *Consumer[T]) Close() error {
	c.closeOnce.Do(func() {
		c.isClosed.Store(true)
		close(c.stop)
		c.rejoinMu.Lock()
		_, c.closeErr = c.m.Leave()
		c.rejoinMu.Unlock()
		c.unregister()
	})
	c.revokeAll()
	return c.closeErr
}

// revokeAll tells the OnRevoked hooks that the closed or fenced consumer
// holds no partition. It runs after closeOnce.Do, not in it, so that a
// hook may call Close (a no-op then) or Cluster.Close.
func (c *Consumer[T]) revokeAll() {
	if hs := c.t.c.hooksOf(); hs != nil && hs.onRebalance {
		c.setAssignment(hs, nil)
	}
}

// unregister removes the consumer from its cluster's registry.
func (c *Consumer[T]) unregister() {
	cl := c.t.c
	cl.mu.Lock()
	if e, ok := cl.consumers[c.name]; ok && e.c == any(c) {
		delete(cl.consumers, c.name)
	}
	cl.mu.Unlock()
}

// fence closes the consumer without leaving its group, err (wrapping
// ErrFenced and ErrClosed) becoming the error of its calls: a newer
// incarnation of its member holds the membership, or RemoveMember removed
// it. A running Run returns err. No-op once closed.
func (c *Consumer[T]) fence(err error) {
	c.closeOnce.Do(func() {
		c.fenced.Store(&err)
		c.isClosed.Store(true)
		close(c.stop)
		c.unregister()
	})
	c.revokeAll()
}

// noteErr fences the consumer when err says the backend fenced its member,
// and returns err.
func (c *Consumer[T]) noteErr(err error) error {
	if errors.Is(err, ErrFenced) {
		c.fence(err)
	}
	return err
}

// fenceErr is the consumer's fencing error (wrapping ErrFenced and
// ErrClosed), or nil when it was not fenced.
func (c *Consumer[T]) fenceErr() error {
	if f := c.fenced.Load(); f != nil {
		return *f
	}
	return nil
}

// closedErr is the error of a call on a closed consumer: its fencing's, or
// ErrClosed.
func (c *Consumer[T]) closedErr() error {
	if err := c.fenceErr(); err != nil {
		return err
	}
	return fmt.Errorf("%w: consumer %q", ErrClosed, c.name)
}

// expiredErr reports whether err, from a blocking poll under ctx, says
// the consumer is no longer in its group because its session expired: the
// backend enforces a session timeout, the consumer is neither closed nor
// fenced (a removal in this process fences it) and ctx has not ended.
func (c *Consumer[T]) expiredErr(ctx context.Context, err error) bool {
	return c.session > 0 && errors.Is(err, ErrClosed) && !errors.Is(err, ErrFenced) && !c.closed() && ctx.Err() == nil
}

// rejoin joins the group again after the consumer found its session had
// expired (SPEC rule 24) and counts it (ConsumerStats.Expired). Under
// rejoinMu it first checks that the consumer is open (ErrClosed
// otherwise: Close has left, or is leaving after this) and, with a
// heartbeat, that it is still not a member: a rejoin that ran meanwhile
// (the heartbeat loop's, another poll's) has done it, and joining again
// would cancel the deliveries taken since.
//
// The hooks are told after rejoinMu is released (Close takes it, and a
// hook may call Close): OnExpired, the partitions revoked and, when the
// consumer joined again, assigned.
func (c *Consumer[T]) rejoin() error {
	expired, parts, err := c.rejoinLocked()
	if hs := c.t.c.hooksOf(); expired && hs != nil {
		if hs.onExpired {
			hs.expiredMember(MemberRef{Topic: c.t.Name(), Group: c.m.Group(), Member: c.name})
		}
		if hs.onRebalance {
			c.setAssignment(hs, nil)
			if err == nil {
				c.setAssignment(hs, parts)
			}
		}
	}
	if err != nil {
		return c.noteErr(err) // not under rejoinMu: fencing waits for a Close under way
	}
	return nil
}

// rejoinLocked is rejoin's work under rejoinMu: expired reports that the
// consumer found itself no longer a member, parts the partitions it got
// joining again.
func (c *Consumer[T]) rejoinLocked() (expired bool, parts []int32, err error) {
	c.rejoinMu.Lock()
	defer c.rejoinMu.Unlock()
	if c.closed() {
		return false, nil, c.closedErr()
	}
	if ok, err := c.m.Heartbeat(); err != nil || ok {
		return false, nil, err
	}
	if parts, err = c.m.Rejoin(); err != nil {
		return true, nil, err
	}
	c.expired.Add(1)
	return true, parts, nil
}

// ensureMember is the expiry check of a poll that found nothing: with a
// session timeout, a heartbeat (which refreshes the session) says whether
// the consumer is still a member; when not, it joins again and reports
// true, so the poll is made once more. A heartbeat error other than
// ErrFenced leaves the empty result as it is.
func (c *Consumer[T]) ensureMember() (rejoined bool, err error) {
	if c.session == 0 {
		return false, nil
	}
	ok, err := c.m.Heartbeat()
	if err != nil {
		if errors.Is(err, ErrFenced) {
			return false, c.noteErr(err)
		}
		return false, nil
	}
	c.heartbeats.Add(1)
	if ok {
		return false, nil
	}
	if err := c.rejoin(); err != nil {
		return false, err
	}
	return true, nil
}

// Heartbeat tells the backend the consumer is alive (SPEC rule 24): its
// session's last-seen instant becomes the broker clock's reading. Run and
// a blocked Poll heartbeat on their own (every HeartbeatInterval); a
// consumer driven by hand that works on its messages for longer than the
// session timeout between calls calls Heartbeat meanwhile, as a Kafka
// consumer's poll loop must run within max.poll.interval.ms. A consumer
// that finds it has expired joins its group again (its in-flight
// deliveries were cancelled; ConsumerStats.Expired counts it). Without a
// session timeout (Backend.SessionTimeout 0) it does nothing. Errors:
// ErrClosed (closed or fenced: ErrFenced too), the backend's.
func (c *Consumer[T]) Heartbeat() error {
	if c.closed() {
		return c.closedErr()
	}
	if _, err := c.ensureMember(); err != nil {
		return err
	}
	if c.closed() {
		return c.closedErr()
	}
	return nil
}

// heartbeatLoop keeps the consumer's session alive (SPEC rule 24) while
// Run or a blocked Poll goes on, whatever the handler does: every
// HeartbeatInterval of the session timeout it heartbeats if one of them
// is under way at the tick (busy), until the consumer is closed. A
// consumer nobody drives sends nothing, and expires. A heartbeat that finds
// the consumer expired (the backend answers false) joins it again at once
// (rejoin), so a consumer whose handler runs on is back in its group
// without waiting for the handler to return.
// NewConsumer starts it when the backend has a session timeout.
func (c *Consumer[T]) heartbeatLoop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.stop:
			return
		}
		if c.busy.Load() == 0 {
			continue
		}
		ok, err := c.m.Heartbeat()
		if err != nil {
			c.noteErr(err) // ErrUnavailable: the next tick tries again
			continue
		}
		if !ok {
			// Expired while Run's handler or a poll was busy: join
			// again now, so that a long handler's consumer is back in
			// its group (its record's delivery was cancelled; the ack
			// will be refused and the record comes again).
			c.rejoin() //nolint:errcheck // closed or fenced: the loop ends; else the next tick
		}
		c.heartbeats.Add(1)
	}
}

// driven marks the consumer busy, for heartbeatLoop, until the returned
// func is called: Run's whole life, a blocked Poll's call.
func (c *Consumer[T]) driven() (done func()) {
	c.busy.Add(1)
	return func() { c.busy.Add(-1) }
}

// closed reports whether Close has been called.
func (c *Consumer[T]) closed() bool { return c.isClosed.Load() }

// Poll blocks until at least one message is deliverable to the consumer
// and returns up to max (1..64) of them, at most one per partition,
// ascending by partition, each now in flight to the consumer until Ack or
// Retry (SPEC rule 10). It is woken by the broker (a publish, Retry,
// rebalance, Seek, or an ack timeout) and never busy-polls. A message whose
// payload does not decode is returned with Err set. The slice is the
// caller's. With a session timeout (SPEC rule 24) a blocked Poll
// heartbeats every HeartbeatInterval, and a consumer that finds itself
// expired joins its group again and waits on (ConsumerStats.Expired).
// Errors: ErrInvalidArgument (max outside 1..64); ctx.Err() when ctx ends;
// ErrClosed when the consumer is closed (or removed from its group, or
// superseded: with ErrFenced). ctx is read only while Poll waits: a Poll
// whose ctx has already ended returns the messages deliverable at once,
// and ctx.Err() only when there are none.
func (c *Consumer[T]) Poll(ctx context.Context, max int32) ([]Message[T], error) {
	out, err := c.AppendPoll(ctx, nil, max)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendPoll is Poll appending the messages to dst, for a caller that
// reuses one buffer: it returns dst extended by the messages polled (dst
// itself, unchanged, with the error). With cap(dst) − len(dst) ≥ max a
// poll allocates nothing of its own but its messages' IDs (from a shared
// block, about one allocation per 50 messages) and what the codec's
// Decode allocates. The messages' IDs and payloads stay valid after dst
// is reused. Errors: ErrInvalidArgument (a nil ctx, max outside 1..64);
// ctx.Err() when ctx ends; ErrClosed when the consumer is closed (or
// removed, or superseded: with ErrFenced); the backend's.
func (c *Consumer[T]) AppendPoll(ctx context.Context, dst []Message[T], max int32) ([]Message[T], error) {
	if ctx == nil {
		return dst, fmt.Errorf("%w: nil Context", ErrInvalidArgument)
	}
	if err := c.checkPoll(max); err != nil {
		return dst, err
	}
	if c.unreleasedN.Load() > 0 {
		c.releaseUnreleased()
	}
	c.busy.Add(1)
	defer c.busy.Add(-1)
	buf := c.takeRecords()
	for {
		recs, err := c.m.Poll(ctx, c.stop, buf.recs[:0], max)
		if err == nil {
			dst = c.appendMessages(dst, recs)
			c.putRecords(buf, recs)
			return dst, nil
		}
		c.putRecords(buf, recs)
		if c.expiredErr(ctx, err) {
			if err := c.rejoin(); err != nil {
				return dst, err
			}
			buf = c.takeRecords()
			continue
		}
		if c.closed() && ctx.Err() == nil {
			return dst, c.closedErr()
		}
		return dst, c.noteErr(err)
	}
}

// TryPoll is Poll without waiting: it returns at once, with no messages
// (an empty slice) when none is deliverable. With a session timeout, a
// TryPoll that finds nothing also heartbeats, and a consumer that finds it
// has expired joins again and polls once more (ConsumerStats.Expired).
// Errors: ErrInvalidArgument (max outside 1..64); ErrClosed when the
// consumer is closed (or removed, or superseded: with ErrFenced); the
// backend's.
func (c *Consumer[T]) TryPoll(max int32) ([]Message[T], error) {
	out, err := c.TryAppendPoll(nil, max)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []Message[T]{}
	}
	return out, nil
}

// TryAppendPoll is TryPoll appending the messages to dst, as AppendPoll is
// Poll's: dst extended by the messages polled, dst unchanged when there is
// none or with an error. Errors: ErrInvalidArgument (max outside 1..64);
// ErrClosed when the consumer is closed (or removed, or superseded: with
// ErrFenced); the backend's.
func (c *Consumer[T]) TryAppendPoll(dst []Message[T], max int32) ([]Message[T], error) {
	if err := c.checkPoll(max); err != nil {
		return dst, err
	}
	if c.unreleasedN.Load() > 0 {
		c.releaseUnreleased()
	}
	buf := c.takeRecords()
	for tries := 0; ; tries++ {
		recs, err := c.m.TryPoll(buf.recs[:0], max)
		if err != nil {
			c.putRecords(buf, recs)
			return dst, c.noteErr(err)
		}
		if len(recs) == 0 && tries == 0 {
			if again, err := c.ensureMember(); err != nil {
				c.putRecords(buf, recs)
				return dst, err
			} else if again {
				continue // once: it returns at once whatever it finds
			}
		}
		dst = c.appendMessages(dst, recs)
		c.putRecords(buf, recs)
		return dst, nil
	}
}

// Messages returns an iterator over the consumer's messages, for a range
// loop: each step waits as Poll does and yields one message (in flight to
// the consumer until Ack or Retry, which the loop's body calls) with a nil
// error, in the order of Poll (batches of up to the consumer's WithBatch,
// ascending by partition within each). When a poll fails, or before a step
// once ctx has ended or the consumer was closed, the iterator yields the
// zero Message with the error (ctx.Err() when ctx ends,
// ErrClosed once the consumer is closed or fenced, ErrInvalidArgument for a
// nil ctx) and stops; a step after the consumer was closed or fenced
// yields ErrClosed so even while messages of the last poll remain (the
// close released them to the group's other members). Messages it had
// polled but not yielded when the loop ends (a break, or the error) are
// released as by Retry (delivered again, Attempt + 1: each counts as a
// delivery, which a dead-letter policy's maximum attempts counts too; a
// loop that often breaks early should use a small WithBatch), so none is
// left in flight to nobody; a release that meets an outage
// (ErrUnavailable) is made by the consumer's next poll. With a session
// timeout (SPEC rule 24) the consumer heartbeats for as long as the loop
// runs, its body working or its poll waiting, as under Run. The iterator
// polls nothing until a loop starts; it may be ranged over again, and by
// several goroutines at once (each loop polls for itself).
func (c *Consumer[T]) Messages(ctx context.Context) iter.Seq2[Message[T], error] {
	return func(yield func(Message[T], error) bool) {
		c.busy.Add(1)
		defer c.busy.Add(-1)
		var batch []Message[T]
		next := 0
		defer func() { // release what was polled and not yielded
			for _, m := range batch[next:] {
				// An error other than an outage: not in flight any more
				// (closed, rebalanced), nothing to release.
				if err := c.Retry(m); errors.Is(err, ErrUnavailable) {
					c.keepUnreleased(m.Partition, m.Offset)
				}
			}
		}()
		for {
			clear(batch) // yielded: a waiting loop keeps none of them alive
			var err error
			batch, err = c.AppendPoll(ctx, batch[:0], c.cfg.batch)
			next = 0
			if err != nil {
				yield(Message[T]{}, err)
				return
			}
			for next < len(batch) {
				if c.closed() {
					// Close (or fencing) left the group, which released
					// the rest of the batch to its other members: a step
					// now fails as a Poll would.
					yield(Message[T]{}, c.closedErr())
					return
				}
				if err := ctx.Err(); err != nil {
					// As Run: once ctx ends no further message is
					// handed out; the rest are released.
					yield(Message[T]{}, err)
					return
				}
				m := batch[next]
				next++
				if !yield(m, nil) {
					return
				}
			}
		}
	}
}

// TryPollPartition is TryPoll of one partition, without waiting: if the
// consumer owns partition and its group has nothing in flight there, it
// reserves the message at the group's committed offset (SPEC rules 10, 16,
// 22 applied to that partition alone) and returns it with true; otherwise
// the zero Message and false. The consumer's other partitions are
// untouched. This is the program's `consume event <consumer> <partition>`.
// Errors: ErrInvalidArgument (partition outside [0, partitions)),
// ErrClosed.
func (c *Consumer[T]) TryPollPartition(partition int32) (Message[T], bool, error) {
	if c.closed() {
		return Message[T]{}, false, c.closedErr()
	}
	var buf [1]engine.Record
	for tries := 0; ; tries++ {
		recs, err := c.m.TryPollPartition(buf[:0], partition)
		if err != nil {
			return Message[T]{}, false, c.noteErr(err)
		}
		if len(recs) == 0 && tries == 0 {
			if again, err := c.ensureMember(); err != nil {
				return Message[T]{}, false, err
			} else if again {
				continue // once, as TryPoll
			}
			return Message[T]{}, false, nil
		}
		m := c.message(&recs[0])
		if hs := c.t.c.hooksOf(); hs != nil {
			c.polledHooks(hs, &recs[0], m.ID)
			c.noteAssignment(hs)
		}
		return m, true, nil
	}
}

// checkPoll is Poll's and TryPoll's argument and state check.
func (c *Consumer[T]) checkPoll(max int32) error {
	if max < 1 || max > engine.MaxPollRecords {
		return fmt.Errorf("%w: max %d outside [1,%d]", ErrInvalidArgument, max, engine.MaxPollRecords)
	}
	if c.closed() {
		return c.closedErr()
	}
	return nil
}

// appendMessages appends the typed messages of recs to dst.
func (c *Consumer[T]) appendMessages(dst []Message[T], recs []engine.Record) []Message[T] {
	n := len(dst)
	dst = slices.Grow(dst, len(recs))[:n+len(recs)]
	if len(recs) == 1 {
		r := &recs[0]
		c.t.fillHeap(&dst[n], r, c.ids.id(r.Partition, r.Offset))
	} else {
		var ids [engine.MaxPollRecords]string
		for i, id := range c.ids.appendIDs(ids[:0], recs) {
			c.t.fillHeap(&dst[n+i], &recs[i], id)
		}
	}
	if hs := c.t.c.hooksOf(); hs != nil {
		for i := range recs {
			c.polledHooks(hs, &recs[i], dst[n+i].ID)
		}
		c.noteAssignment(hs)
	}
	return dst
}

// polledHooks calls hs's OnDeliver for rec, whose message ID is id, just
// polled by the consumer.
func (c *Consumer[T]) polledHooks(hs *hookSet, rec *engine.Record, id string) {
	if hs.onDeliver {
		hs.deliver(recordDelivery(rec, id, c.m.Group(), c.name))
	}
}

// noteAssignment tells hs's OnRevoked and OnAssigned hooks of the change
// of the consumer's partitions since it last did (SPEC rules 8, 9, 18,
// 19), revocations first, as Kafka's consumers do.
func (c *Consumer[T]) noteAssignment(hs *hookSet) {
	if !hs.onRebalance {
		return
	}
	c.setAssignment(hs, c.m.Assignment())
}

// setAssignment records now as the consumer's partitions and calls hs's
// OnRevoked and OnAssigned hooks for the difference from the last ones.
func (c *Consumer[T]) setAssignment(hs *hookSet, now []int32) {
	c.assignMu.Lock()
	old := c.assigned
	if slices.Equal(old, now) || len(now) > 0 && c.closed() {
		// A closed consumer holds nothing: a poll's or a join's
		// assignment that comes after its revokeAll is stale.
		c.assignMu.Unlock()
		return
	}
	c.assigned = now
	c.assignMu.Unlock()
	ref := func(ps []int32) Rebalance {
		return Rebalance{Topic: c.t.Name(), Group: c.m.Group(), Member: c.name, Partitions: ps}
	}
	hs.revoked(ref(diffPartitions(old, now)))
	hs.assigned(ref(diffPartitions(now, old)))
}

// message is the typed Message of r, its ID built by the consumer's arena.
func (c *Consumer[T]) message(r *engine.Record) Message[T] {
	var m Message[T]
	c.t.fill(&m, r, c.ids.id(r.Partition, r.Offset))
	return m
}

// recordRef names a record of the consumer's topic.
type recordRef struct {
	partition int32
	offset    int64
}

// releaseUnreleased releases, as by Retry, the records a Messages loop
// could not release; those that still meet ErrUnavailable are kept for
// the next poll, the others (released, or no longer in flight to the
// consumer) are dropped.
func (c *Consumer[T]) releaseUnreleased() {
	c.unreleasedMu.Lock()
	defer c.unreleasedMu.Unlock()
	kept := c.unreleased[:0]
	for _, r := range c.unreleased {
		if err := c.settle(r.partition, r.offset, true); errors.Is(err, ErrUnavailable) {
			kept = append(kept, r)
		}
	}
	clear(c.unreleased[len(kept):])
	c.unreleased = kept
	c.unreleasedN.Store(int32(len(kept)))
}

// keepUnreleased adds a record whose release met ErrUnavailable.
func (c *Consumer[T]) keepUnreleased(partition int32, offset int64) {
	c.unreleasedMu.Lock()
	c.unreleased = append(c.unreleased, recordRef{partition, offset})
	c.unreleasedN.Store(int32(len(c.unreleased)))
	c.unreleasedMu.Unlock()
}

// recordBuf is a record buffer kept between polls (takeRecords).
type recordBuf struct{ recs []engine.Record }

// takeRecords returns a record buffer of the consumer's for one poll: the
// one putRecords kept, or a new one (the engine allocates its slice, kept
// after the poll). Concurrent polls each get their own.
func (c *Consumer[T]) takeRecords() *recordBuf {
	if b := c.recs.Swap(nil); b != nil {
		return b
	}
	return &recordBuf{}
}

// putRecords keeps b for the next poll, recs (what the poll filled) cleared
// so that no payload stays referenced by it.
func (c *Consumer[T]) putRecords(b *recordBuf, recs []engine.Record) {
	clear(recs)
	if cap(recs) > cap(b.recs) {
		b.recs = recs[:0]
	}
	c.recs.Store(b)
}

// Ack commits m, which must be in flight to this consumer (SPEC rule 11):
// the group moves past it and retention may remove it. Errors:
// ErrNotInFlight (already acked or retried, cancelled by a rebalance or
// Seek, or the consumer is closed — that error wraps ErrClosed too;
// nothing changes), ErrInvalidArgument.
// A closed consumer's Ack is refused even when a new consumer of the same
// name holds the record; only an Ack racing with Close itself can land on
// the successor.
func (c *Consumer[T]) Ack(m Message[T]) error {
	err := c.settle(m.Partition, m.Offset, false)
	if hs := c.t.c.hooksOf(); hs != nil && hs.onAck && err == nil {
		hs.acked(messageDelivery(&m, c.m.Group(), c.name))
	}
	return err
}

// Retry releases m, which must be in flight to this consumer, without
// committing it: the next poll delivers it again with Attempt + 1 (SPEC
// rules 12, 16). Errors: as Ack.
func (c *Consumer[T]) Retry(m Message[T]) error {
	err := c.settle(m.Partition, m.Offset, true)
	if hs := c.t.c.hooksOf(); hs != nil && hs.onRetry && err == nil {
		hs.retried(messageDelivery(&m, c.m.Group(), c.name), 0)
	}
	return err
}

// settle is Ack (retry false: the member's Ack) and Retry (its Retry) of
// the record at (partition, offset).
func (c *Consumer[T]) settle(partition int32, offset int64, retry bool) error {
	if c.closed() {
		return c.closedNotInFlight()
	}
	var ok bool
	var err error
	if retry {
		ok, err = c.m.Retry(partition, offset)
	} else {
		ok, err = c.m.Ack(partition, offset)
	}
	if errors.Is(err, ErrFenced) {
		c.noteErr(err)
		return c.closedNotInFlight()
	}
	if err != nil {
		return c.noteErr(err)
	}
	if !ok {
		err = fmt.Errorf("%w: %s partition %d offset %d", ErrNotInFlight, c.t.Name(), partition, offset)
	}
	return err
}

// Nack reports that processing m, in flight to this consumer, failed with
// cause, and applies its group's failure policy as Run does: with a
// dead-letter topic (WithDeadLetter), a message that has had its maximum attempts (m.Attempt ≥
// maxAttempts) or whose payload does not decode (m.Err) is published to the
// dead-letter topic with the HeaderDeadLetter* headers, waiting for room
// until ctx ends or the consumer is closed (ErrClosed), then acked, and
// Nack returns true; otherwise it is released like Retry (redelivered with
// Attempt + 1) and Nack returns false.
// Errors: ErrNotInFlight (as Ack; nothing is published), ErrInvalidArgument
// (nil ctx or cause), the dead-letter publish's error (m stays in flight).
// Like Run's, the dead letter is at least once: a rebalance between the
// publish and the ack leaves m dead-lettered and delivered again.
func (c *Consumer[T]) Nack(ctx context.Context, m Message[T], cause error) (deadLettered bool, err error) {
	if ctx == nil || cause == nil {
		return false, fmt.Errorf("%w: nil Context or cause", ErrInvalidArgument)
	}
	if c.dlq == nil || (m.Err == nil && m.Attempt < c.cfg.maxAttempts) {
		return false, c.Retry(m)
	}
	if err := c.checkInFlight(m); err != nil {
		return false, err
	}
	if err := c.deadLetter(ctx, &m, cause, false); err != nil {
		return false, err
	}
	return true, nil
}

// closedNotInFlight is the error of Ack, Retry and Nack on a closed
// consumer: nothing is in flight to it, and it is closed.
func (c *Consumer[T]) closedNotInFlight() error {
	if err := c.fenceErr(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotInFlight, err)
	}
	return fmt.Errorf("%w: %w: consumer %q", ErrNotInFlight, ErrClosed, c.name)
}

// checkInFlight returns ErrNotInFlight unless m is in flight to c now, as the
// topic's description shows it.
func (c *Consumer[T]) checkInFlight(m Message[T]) error {
	if c.closed() {
		return c.closedNotInFlight()
	}
	d, err := c.t.Describe()
	if err != nil {
		return err
	}
	for _, g := range d.Groups {
		if g.Group != c.m.Group() || int(m.Partition) >= len(g.Partitions) || m.Partition < 0 {
			continue
		}
		if gp := g.Partitions[m.Partition]; gp.InFlight && gp.Owner == c.name && gp.Committed == m.Offset {
			return nil
		}
	}
	return fmt.Errorf("%w: %s partition %d offset %d", ErrNotInFlight, c.t.Name(), m.Partition, m.Offset)
}

// Seek replays the consumer's group on partition from offset (SPEC rule
// 20): the group's committed offset there becomes offset and its in-flight
// delivery is cancelled. Errors: ErrInvalidArgument, ErrOffsetOutOfRange,
// ErrNotFound (the group was deleted), ErrClosed (the consumer is closed,
// or fenced, with ErrFenced: nothing changes).
func (c *Consumer[T]) Seek(partition int32, offset int64) error {
	if c.closed() {
		return c.closedErr()
	}
	// The seek is the group's (an admin call of the backend); a heartbeat
	// of the member first finds out whether a newer incarnation has
	// fenced this one, which must not move its successor's offsets.
	if _, err := c.m.Heartbeat(); errors.Is(err, ErrFenced) {
		return c.noteErr(err)
	}
	group := c.m.Group()
	ok, err := c.t.c.backend.Seek(c.t.Name(), group, partition, offset)
	if err == nil && !ok {
		err = fmt.Errorf("%w: group %q of topic %q is gone", ErrNotFound, group, c.t.Name())
	}
	return err
}

// Run processes the consumer's messages with h until ctx ends (it returns
// ctx.Err()) or the consumer is closed (it returns nil); either way it
// leaves the group when it returns (Close). For each message, in partition
// order: h returns nil → Ack; h returns an error or panics → the record is
// redelivered after a backoff (the group's WithBackoff: doubling from the
// first delay, capped), its partition held meanwhile while the others go
// on; after the group's WithDeadLetter maximum attempts, or at once for a
// payload that does not decode, the record is sent to the dead-letter
// topic and acked (GroupConfig: the group's policy, whoever created it).
//
// When ctx ends while h runs, Run waits for h to return for at most the
// stop grace (WithStopGrace; DefaultStopGrace) and applies its result as
// usual: a handler that calls cancel() and returns nil has its record
// acked, on every backend, and one that returns an error has it retried
// or dead-lettered. The Ack and the dead-letter publish of that record are
// not cancelled by ctx; they too must finish within the grace. So Run
// returns at most the grace (plus one backend request) after ctx ends,
// even when h ignores ctx: h runs on a goroutine of Run's, which is then
// abandoned (its result ignored, the record redelivered after Run leaves
// the group) and ends when h does. Records Run had reserved but not
// handed to h when ctx ended are released by that leave. Close does not
// wait: it leaves the group at once, and Run returns nil without applying
// the result of a handler still running, nor of one that closed the
// consumer itself. Run allocates nothing per record of its own (the
// codec's Decode and the message IDs' shared blocks aside).
//
// While the backend is unavailable (an error wrapping
// ErrUnavailable: a networked backend's server restarting, say) Run waits,
// doubling from 50 ms to 2 s, and polls, acks, retries, rejoins or
// dead-letters again (the dead-letter publish and its ack alike); an ack
// that may have been lost is tried again, so a record is at worst
// delivered twice. On a consumer already closed, Run returns nil at once
// (the fencing error, wrapping ErrFenced, on a fenced one),
// polling nothing.
// With a session timeout (Backend.SessionTimeout > 0, SPEC rule 24) Run
// heartbeats every HeartbeatInterval for as long as it runs, its handler
// working or its poll waiting, so a slow handler keeps its partitions; a
// consumer that finds itself expired all the same (a stalled process)
// joins its group again and goes on (ConsumerStats.Expired).
//
// Errors: ErrInvalidArgument (nil handler, Run already running); ErrClosed
// when the consumer was removed from its group (Cluster.RemoveMember, from
// any process; it is then closed, and a new NewConsumer of its name joins
// again) or superseded by a newer incarnation (both wrap ErrFenced when the
// backend or this process fenced it); an error sending to the dead-letter topic other than ctx's (the
// record stays unacked and is redelivered); any other error of the backend.
func (c *Consumer[T]) Run(ctx context.Context, h Handler[T]) error {
	if h == nil || ctx == nil {
		return fmt.Errorf("%w: nil Handler or Context", ErrInvalidArgument)
	}
	if c.closed() {
		return c.fenceErr() // nil after Close; fenced, the consumer did not end by its own Close
	}
	if !c.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: consumer %q: Run already running", ErrInvalidArgument, c.name)
	}
	defer c.running.Store(false)
	defer c.Close()
	defer c.driven()()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// settle bounds the handler's return and its record's Ack or dead
	// letter: not cancelled with ctx, it ends stopGrace after ctx does, at
	// once on Close, and when Run returns.
	settle, endSettle := context.WithCancel(context.WithoutCancel(ctx))
	defer endSettle()
	r := &runner[T]{c: c, h: h, ctx: ctx, done: ctx.Done(), settle: settle, end: make(chan error, 1)}
	defer r.stopTimers()
	go r.loop()
	return r.wait(cancel, endSettle)
}

// Backoff of Run while its backend is unavailable: the n-th wait in a row
// (from 0) is outageFirst·2^n, capped at outageMax.
const (
	outageFirst = 50 * time.Millisecond
	outageMax   = 2 * time.Second
)

// waitOutage waits before Run tries its backend again after the n-th
// ErrUnavailable in a row. It returns ctx's error, or ErrClosed when the
// consumer is closed, if that comes first.
func (c *Consumer[T]) waitOutage(ctx context.Context, n int) error {
	d := outageFirst
	for i := 0; i < n && d < outageMax; i++ {
		d *= 2
	}
	t := time.NewTimer(min(d, outageMax))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return ErrClosed
	}
}

// runEnd is Run's result for err: the fencing error of a fenced consumer,
// nil after Close, ctx's error after cancellation, else err.
func (c *Consumer[T]) runEnd(ctx context.Context, err error) error {
	c.noteErr(err)
	if err := c.fenceErr(); err != nil {
		return err
	}
	if c.closed() {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// runner is the state of one Run. The poll-handle-settle loop (drive)
// runs on a worker goroutine (loop), so that Run's own goroutine (wait)
// can return without waiting for a handler that ignores ctx; the two
// agree through state which of them the record being handled belongs to.
type runner[T any] struct {
	// hooks are the seams of Run's deliberate faults (run_faults.go):
	// empty, and calls to them compiled away, in a normal build.
	hooks  runHooks
	c      *Consumer[T]
	h      Handler[T]
	ctx    context.Context // Run's: the handler's, the poll's
	done   <-chan struct{} // ctx.Done()
	settle context.Context // ends stopGrace after ctx: the handler's result, its Ack, its dead letter
	end    chan error      // the worker's result, sent once, when drive returns (buffered)

	// state is runIdle while the worker polls or settles a record (wait
	// then waits for the worker to end), runHandling while the handler
	// runs, and runAbandoned once wait has given up: a worker that finds
	// it so ends without entering the handler or applying its result.
	state atomic.Int32

	// The worker's: the records of the last poll, their message IDs (built
	// for the whole poll at once, idArena.appendIDs), and the next to
	// process. A handler that ends its goroutine hands them to a new worker
	// (call).
	buf  []engine.Record
	ids  []string
	next int
	// outageAt is when the backend outage under way began (the worker's;
	// zero when none), for the OnOutage hooks.
	outageAt time.Time

	mu      sync.Mutex
	pending map[int32]*retryTimer // partition → its pending retry; guarded by mu
	armed   atomic.Int32          // len(pending), stored as mu is released: cancelPending reads it without mu
	stopped bool                  // stopTimers has run: no new retry; guarded by mu
	wg      sync.WaitGroup        // running retry callbacks
}

// The values of runner.state.
const (
	runIdle      = iota // the worker polls, or settles a record: wait waits for it
	runHandling         // the handler runs: wait may abandon it
	runAbandoned        // wait gave up: the worker ends at its next step, applying nothing
)

// errRunAbandoned ends the worker of a Run that returned without it (or
// whose consumer was closed while the handler ran); Run's result is then
// runEnd's for ctx, and the handler's result is not applied.
var errRunAbandoned = errors.New("consumer: Run abandoned its handler")

// wait is Run's own goroutine: it waits for the worker to end (its
// result is Run's), for ctx to end (then at most the stop grace more for
// the worker), or for Close. Then it cancels the handler's context and the
// settle step's and, if the handler is running, abandons it and returns
// at once; otherwise the worker is polling or settling a record (one
// backend request, or a dead letter bounded by the settle context), and
// wait returns when it ends.
func (r *runner[T]) wait(cancel, endSettle context.CancelFunc) error {
	c := r.c
	select {
	case err := <-r.end:
		return err
	case <-c.stop:
	case <-r.done:
		t := time.NewTimer(c.cfg.stopGrace)
		select {
		case err := <-r.end:
			t.Stop()
			return err
		case <-t.C:
		case <-c.stop:
			t.Stop()
		}
	}
	cancel()
	endSettle()
	if r.abandon() {
		return c.runEnd(r.ctx, r.ctx.Err())
	}
	return <-r.end
}

// abandon makes the state runAbandoned and reports whether the handler was
// running (its worker is left to end on its own).
func (r *runner[T]) abandon() bool {
	for {
		s := r.state.Load()
		if r.state.CompareAndSwap(s, runAbandoned) {
			return r.hooks.abandons(s == runHandling)
		}
	}
}

// loop is the worker goroutine: it drives the consumer until an error, the
// end of ctx or abandonment, and hands the result to wait.
func (r *runner[T]) loop() {
	r.end <- r.drive()
}

// drive polls and processes records, in order, until an error, the end of
// ctx or abandonment, and returns Run's result for it. Records polled and
// not processed stay in flight; Run's leave releases them.
func (r *runner[T]) drive() error {
	c := r.c
	for outage := 0; ; {
		for r.next < len(r.buf) {
			select {
			case <-r.done:
				return c.runEnd(r.ctx, r.ctx.Err())
			default:
			}
			rec, id := &r.buf[r.next], r.ids[r.next]
			r.next++
			if err := r.process(rec, id); err != nil {
				return c.runEnd(r.ctx, err)
			}
		}
		// The records done with are cleared first: a Run that waits
		// for more must not keep their payloads (or IDs' blocks) alive.
		clear(r.buf)
		clear(r.ids)
		var err error
		r.buf, err = c.m.Poll(r.ctx, c.stop, r.buf[:0], c.cfg.batch)
		r.next = 0
		if errors.Is(err, ErrUnavailable) {
			if outage == 0 {
				r.outageBegan(err)
			}
			r.buf = r.buf[:0]
			if err := c.waitOutage(r.ctx, outage); err != nil {
				return c.runEnd(r.ctx, err)
			}
			outage++
			continue
		}
		if c.expiredErr(r.ctx, err) {
			r.buf = r.buf[:0]
			err := c.rejoin()
			if errors.Is(err, ErrUnavailable) {
				// The rejoin met an outage: waited out as a poll's is;
				// the next poll finds the consumer still expired and
				// rejoins then.
				if err := c.waitOutage(r.ctx, outage); err != nil {
					return c.runEnd(r.ctx, err)
				}
				outage++
				continue
			}
			if err != nil {
				return c.runEnd(r.ctx, err)
			}
			continue
		}
		if err != nil {
			return c.runEnd(r.ctx, err)
		}
		r.ids = c.ids.appendIDs(r.ids[:0], r.buf)
		if hs := c.t.c.hooksOf(); hs != nil {
			if outage > 0 {
				r.outageEnded(hs)
			}
			for i := range r.buf {
				c.polledHooks(hs, &r.buf[i], r.ids[i])
			}
			c.noteAssignment(hs)
		}
		outage = 0
	}
}

// outageBegan notes the start of an outage of Run's backend (err, its
// first ErrUnavailable) and calls the cluster's OnOutage hooks.
func (r *runner[T]) outageBegan(err error) {
	r.outageAt = time.Now()
	if hs := r.c.t.c.hooksOf(); hs != nil && hs.onOutage {
		c := r.c
		hs.outageEvent(Outage{Topic: c.t.Name(), Group: c.m.Group(), Member: c.name, Err: err})
	}
}

// outageEnded calls hs's OnOutage hooks for the end of the outage that
// outageBegan noted.
func (r *runner[T]) outageEnded(hs *hookSet) {
	if hs.onOutage && !r.outageAt.IsZero() {
		c := r.c
		hs.outageEvent(Outage{Topic: c.t.Name(), Group: c.m.Group(), Member: c.name, Ended: true, Duration: time.Since(r.outageAt)})
	}
	r.outageAt = time.Time{}
}

// errHandlerExit is the failure of a handler that ended its goroutine
// (runtime.Goexit, as testing's FailNow does) instead of returning.
var errHandlerExit = errors.New("handler ended its goroutine (runtime.Goexit) without returning")

// process handles one reserved record, whose message ID is id: the handler (unless it does not
// decode), then its result applied (settleRecord). errRunAbandoned when
// Run gave up the record, or the consumer was closed while the handler
// ran; then nothing is applied.
func (r *runner[T]) process(rec *engine.Record, id string) error {
	c := r.c
	r.cancelPending(rec.Partition)
	var m Message[T]
	c.t.fill(&m, rec, id)
	herr := m.Err
	if herr == nil {
		c.handled.Add(1)
		if !r.state.CompareAndSwap(runIdle, runHandling) {
			return errRunAbandoned
		}
		herr = r.call(rec, &m)
		if !r.handled() {
			return errRunAbandoned
		}
	}
	return r.settleRecord(rec, &m, herr)
}

// handled ends the handler's step: the record is the worker's again to
// settle, unless wait abandoned it meanwhile or the consumer was closed
// (Close ends Run without applying the running handler's result).
func (r *runner[T]) handled() bool {
	if !r.hooks.handedBack(r.state.CompareAndSwap(runHandling, runIdle), &r.state) {
		return false
	}
	return r.hooks.applies(!r.c.closed())
}

// call runs the handler on m's copy (its changes never reach a dead
// letter), turning a panic into an error that holds the panic value and
// the stack (recovered by handle). A handler that calls runtime.Goexit
// fails its record the same way; that goroutine cannot be kept, so call
// hands the record and the rest of the loop to a new worker (resume) as
// the goroutine ends. The goroutine ends so too when a panic raised while
// the handler's goroutine was already ending is recovered: the runtime
// then goes on ending it, so whether handle returned, not whether it
// recovered, tells the two apart.
func (r *runner[T]) call(rec *engine.Record, m *Message[T]) error {
	returned := false
	defer func() {
		if !returned {
			go r.resume(rec, *m)
		}
	}()
	err := r.handle(m)
	returned = true
	return err
}

// handle runs the handler on m's copy, its panic recovered as an error.
func (r *runner[T]) handle(m *Message[T]) (err error) {
	ctx := r.ctx
	var (
		ends  []func(error, time.Duration)
		start time.Time
	)
	if hs := r.c.t.c.hooksOf(); hs != nil && hs.onProcess {
		ctx, ends = hs.processStart(ctx, messageDelivery(m, r.c.m.Group(), r.c.name))
		start = time.Now()
	}
	returned := false
	defer func() {
		if p := recover(); p != nil {
			err = newPanicError("handler", p)
		} else if !returned {
			err = errHandlerExit // runtime.Goexit: the record fails (resume)
		}
		if ends != nil {
			processEnd(ends, err, time.Since(start))
		}
	}()
	if m.Headers == nil {
		err = r.h(ctx, *m) // a copy already: nothing of it is shared with m
	} else {
		hm := *m
		hm.Headers = slices.Clone(m.Headers)
		err = r.h(ctx, hm)
	}
	returned = true
	return err
}

// resume is the worker that follows one whose handler called
// runtime.Goexit: it fails the record (errHandlerExit) and goes on.
func (r *runner[T]) resume(rec *engine.Record, m Message[T]) {
	if !r.handled() {
		r.end <- r.c.runEnd(r.ctx, errRunAbandoned)
		return
	}
	if err := r.settleRecord(rec, &m, errHandlerExit); err != nil {
		r.end <- r.c.runEnd(r.ctx, err)
		return
	}
	r.loop()
}

// settleRecord applies herr, the handler's result for rec (m its message,
// as consumed): nil acks it; an error retries it after the backoff, or
// dead-letters it after the group's maximum attempts, as does a payload
// that does not decode. The Ack and the dead letter ride out an outage
// until the settle context ends.
func (r *runner[T]) settleRecord(rec *engine.Record, m *Message[T], herr error) error {
	c := r.c
	if herr == nil {
		for outage := 0; ; outage++ {
			ok, err := c.m.Ack(rec.Partition, rec.Offset)
			if errors.Is(err, ErrUnavailable) {
				// Lost or not, the ack is tried again: false then
				// means it had taken effect (or the delivery moved).
				if err := c.waitOutage(r.settle, outage); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			if ok {
				c.acked.Add(1)
				if hs := c.t.c.hooksOf(); hs != nil && hs.onAck {
					hs.acked(messageDelivery(m, c.m.Group(), c.name))
				}
			}
			return nil
		}
	}
	if c.dlq != nil && (m.Err != nil || rec.Attempt >= c.cfg.maxAttempts) {
		return c.deadLetter(r.settle, m, herr, true)
	}
	c.retried.Add(1)
	d := r.backoff(rec.Attempt)
	r.retryLater(rec.Partition, rec.Offset, d)
	if hs := c.t.c.hooksOf(); hs != nil && hs.onRetry {
		hs.retried(messageDelivery(m, c.m.Group(), c.name), d)
	}
	return nil
}

// backoff is the delay before redelivering a record that failed its
// attempt-th delivery: backoff·2^(attempt−1), capped.
func (r *runner[T]) backoff(attempt int32) time.Duration {
	d := r.c.cfg.backoff
	for i := int32(1); i < attempt && d < r.c.cfg.maxBackoff; i++ {
		d *= 2
	}
	return min(d, r.c.cfg.maxBackoff)
}

// retryTimer is a pending delayed Retry of one partition's record.
type retryTimer struct {
	t *time.Timer
}

// retryLater releases the in-flight record (partition, offset) after d; its
// redelivery wakes Run's poll. A Retry that fails with ErrUnavailable (it
// may not have reached the server: the record would stay in flight to Run,
// with no ack timeout for ever) is tried again after Run's outage backoff;
// one that took effect with its reply lost then returns false.
func (r *runner[T]) retryLater(partition int32, offset int64, d time.Duration) {
	r.retryAfter(partition, offset, d, 0)
}

// retryAfter is retryLater's timer; outage counts the failed Retries of
// this record so far.
func (r *runner[T]) retryAfter(partition int32, offset int64, d time.Duration, outage int) {
	r.mu.Lock()
	defer r.unlock()
	r.retryAfterLocked(partition, offset, d, outage)
}

// unlock releases mu after a change of pending, storing its size in armed.
func (r *runner[T]) unlock() {
	r.armed.Store(int32(len(r.pending)))
	r.mu.Unlock()
}

func (r *runner[T]) retryAfterLocked(partition int32, offset int64, d time.Duration, outage int) {
	if r.stopped {
		return // Run is leaving the group, which releases the record
	}
	if r.pending == nil {
		r.pending = map[int32]*retryTimer{}
	}
	r.cancelLocked(partition)
	rt := &retryTimer{}
	r.wg.Add(1)
	rt.t = time.AfterFunc(d, func() {
		defer r.wg.Done()
		r.mu.Lock()
		current := r.pending[partition] == rt
		r.mu.Unlock()
		if !current {
			return
		}
		// It stays pending while the Retry runs: a redelivery of the
		// record meanwhile (cancelPending) is then seen below. false: the
		// delivery was already cancelled. Errors other than ErrUnavailable
		// (the consumer closed, the backend's) end with Run.
		_, err := r.c.m.Retry(partition, offset)
		r.mu.Lock()
		defer r.unlock()
		if r.pending[partition] != rt {
			return
		}
		delete(r.pending, partition)
		if errors.Is(err, ErrUnavailable) {
			wait := outageFirst
			for i := 0; i < outage && wait < outageMax; i++ {
				wait *= 2
			}
			r.retryAfterLocked(partition, offset, min(wait, outageMax), outage+1)
		}
	})
	r.pending[partition] = rt
}

// cancelPending drops the pending retry of partition, if any: Run got the
// partition's record again (an ack timeout or a rebalance redelivered it)
// before the backoff ended, and a late Retry would cancel that delivery.
// With no retry pending (armed 0) it takes no lock: the worker armed
// every retry itself, or a timer re-armed one it had armed.
func (r *runner[T]) cancelPending(partition int32) {
	if r.armed.Load() == 0 {
		return
	}
	r.mu.Lock()
	r.cancelLocked(partition)
	r.unlock()
}

func (r *runner[T]) cancelLocked(partition int32) {
	if rt, ok := r.pending[partition]; ok {
		delete(r.pending, partition)
		if rt.t.Stop() {
			r.wg.Done()
		}
	}
}

// stopTimers cancels the pending retries (Run is leaving the group, which
// cancels the deliveries) and waits for running callbacks.
func (r *runner[T]) stopTimers() {
	r.mu.Lock()
	r.stopped = true
	for p := range r.pending {
		r.cancelLocked(p)
	}
	r.unlock()
	r.wg.Wait()
}

// deadLetter sends m to the dead-letter topic, waiting for room until ctx
// ends, and acks it; cause is the last handler or decode error. With
// rideOut (Run), an ErrUnavailable of the publish or of the ack is waited
// out as Run's polls are (waitOutage) and the step tried again: a publish
// whose reply was lost may then leave the dead letter twice (at least
// once), and an ack lost or not is answered false the second time, which
// is fine. Without it (Nack) the error is the caller's.
func (c *Consumer[T]) deadLetter(ctx context.Context, m *Message[T], cause error, rideOut bool) error {
	pt := m.PayloadType
	if pt == "" {
		pt = c.t.pt
	}
	headers := make([]Header, 0, len(m.Headers)+7)
	headers = append(append(headers, m.Headers...),
		Header{Key: HeaderPayloadType, Value: pt},
		Header{Key: HeaderDeadLetterTopic, Value: m.Topic},
		Header{Key: HeaderDeadLetterGroup, Value: c.m.Group()},
		Header{Key: HeaderDeadLetterPartition, Value: strconv.Itoa(int(m.Partition))},
		Header{Key: HeaderDeadLetterOffset, Value: strconv.FormatInt(m.Offset, 10)},
		Header{Key: HeaderDeadLetterAttempts, Value: strconv.Itoa(int(m.Attempt))},
		Header{Key: HeaderDeadLetterError, Value: truncate(errorText(cause), maxErrorHeader)},
	)
	em := engine.Message{Key: m.Key, Headers: headers, Payload: m.Payload, Time: m.Time}
	p := m.Partition % c.dlq.bt.Partitions()
	for outage := 0; ; outage++ {
		_, err := c.dlq.bt.Publish(ctx, c.stop, p, em)
		if errors.Is(err, ErrInvalidArgument) {
			// Over WithMaxMessageBytes: send it without the error text.
			headers[len(headers)-1].Value = ""
			_, err = c.dlq.bt.Publish(ctx, c.stop, p, em)
		}
		if rideOut && errors.Is(err, ErrUnavailable) {
			if werr := c.waitOutage(ctx, outage); werr != nil {
				return fmt.Errorf("consumer %q: dead-letter topic %q: %w (%w)", c.name, c.dlq.Name(), werr, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("consumer %q: dead-letter topic %q: %w", c.name, c.dlq.Name(), err)
		}
		break
	}
	c.deadLettered.Add(1)
	hs := c.t.c.hooksOf()
	if hs != nil && hs.onDLQ {
		hs.deadLettered(messageDelivery(m, c.m.Group(), c.name), c.dlq.Name(), cause)
	}
	for outage := 0; ; outage++ {
		ok, err := c.m.Ack(m.Partition, m.Offset)
		if rideOut && errors.Is(err, ErrUnavailable) {
			if werr := c.waitOutage(ctx, outage); werr != nil {
				return werr
			}
			continue
		}
		if ok && hs != nil && hs.onAck {
			hs.acked(messageDelivery(m, c.m.Group(), c.name))
		}
		return err
	}
}

// maxErrorHeader is the most bytes of an error's text a dead letter's
// HeaderDeadLetterError keeps.
const maxErrorHeader = 512

// truncate returns s cut to at most n bytes, marked with "…" when cut,
// never inside a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
