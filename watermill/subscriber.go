package tributarywm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// DefaultConsumerGroup is the consumer group of a subscriber whose config
// names none (and is not Ephemeral).
const DefaultConsumerGroup = "watermill"

// DefaultNackResendSleep is how long a nacked message waits before it is
// delivered again when SubscriberConfig.NackResendSleep is 0 (the default
// of Watermill's Kafka subscriber). NoSleep redelivers at once.
const (
	DefaultNackResendSleep = 100 * time.Millisecond
	NoSleep                = time.Duration(-1)
)

// SubscriberConfig configures a Subscriber. The zero value is valid: every
// subscription joins DefaultConsumerGroup.
type SubscriberConfig struct {
	// ConsumerGroup is the group every Subscribe call joins (an
	// identifier: 1 to 64 bytes of A-Z a-z 0-9 _ -). The group's
	// subscriptions, in this subscriber or others, share each topic's
	// partitions and its committed offsets; another group receives every
	// message again. "": DefaultConsumerGroup.
	ConsumerGroup string
	// Ephemeral gives each Subscribe call a consumer group of its own,
	// "wm-eph-<short UUID>", created at the topic's log start (it receives
	// every message the topic retains, SPEC rules 7, 17) and deleted when
	// the subscription ends, so that it stops holding retention (Kafka's
	// consumer without a group.id; a NATS ephemeral consumer). Messages
	// other groups have acked are retained only by a replay window
	// (engine.WithReplayWindow). ConsumerGroup must then be "".
	Ephemeral bool
	// Assignor is the assignor of a group this subscriber creates
	// (engine.RoundRobin, engine.Range, engine.Sticky, or a user's); an
	// existing group keeps its own. nil: engine.RoundRobin.
	Assignor engine.Assignor
	// Partitions is the partition count, 1..64, of a topic this subscriber
	// creates on first use; an existing topic keeps its own. 0:
	// DefaultPartitions.
	Partitions int32
	// NackResendSleep is how long a nacked message keeps its partition
	// before it is delivered again (Watermill's Kafka subscriber's option of
	// the same name). 0: DefaultNackResendSleep; NoSleep: at once.
	NackResendSleep time.Duration
	// Start is where a consumer group this subscriber creates starts on
	// each partition (tributary.WithStart): engine.StartEarliest, the
	// default, at the log start (every message the topic retains);
	// engine.StartLatest at the log end (only messages published after the
	// group was created: Kafka's auto.offset.reset=latest). An existing
	// group keeps its own.
	Start engine.GroupStart
	// DeadLetterTopic and MaxAttempts are the failure policy of a consumer
	// group this subscriber creates (tributary.WithDeadLetter; MaxAttempts
	// 1..1000, default 3 with a DeadLetterTopic): a message nacked on its
	// MaxAttempts-th delivery is published to DeadLetterTopic, created
	// like the topic if absent, with the tributary-dlq-* headers, and
	// acked, as a poison queue would. An existing group keeps its own
	// policy, and every subscription follows its group's, whoever created
	// it (GroupConfig): a subscription of a group with a dead-letter topic
	// dead-letters whatever its own config says. "": a nacked message is
	// delivered again for ever.
	DeadLetterTopic string
	MaxAttempts     int32
	// SessionTimeout is the session timeout the subscriber expects of its
	// cluster (SPEC rule 24): a subscription that makes no call for that
	// long, by the broker clock, leaves its group, and its messages go to
	// the group's other members. It is the broker's, set when the cluster
	// is made (engine.WithSessionTimeout; tributary.NewCluster's default
	// is tributary.DefaultSessionTimeout, 45 s), as JetStream's is the
	// server's; like Sarama's Consumer.Group.Session.Timeout written for
	// Kafka, a value here states what the application relies on:
	// NewSubscriber refuses a cluster whose Backend.SessionTimeout differs
	// (ErrInvalidArgument, naming both). 0: the cluster's, whatever it is.
	// Each subscription heartbeats every tributary.HeartbeatInterval while
	// it runs, so a slow handler keeps its partitions; one that expired
	// anyway (its process stalled) joins again by itself.
	SessionTimeout time.Duration
}

// DefaultMaxAttempts is SubscriberConfig.MaxAttempts when a DeadLetterTopic
// is set and MaxAttempts is 0.
const DefaultMaxAttempts = 3

// Subscriber subscribes Watermill handlers to a Tributary cluster: a
// message.Subscriber and message.SubscribeInitializer. Each Subscribe call
// is one member of a consumer group (see the package doc). Safe for
// concurrent use.
type Subscriber struct {
	cluster *tributary.Cluster
	cfg     SubscriberConfig
	topics  *topics
	logger  watermill.LoggerAdapter
	group   []tributary.GroupOption // the configuration of the groups it creates

	// mu guards closed and subs.
	mu     sync.Mutex
	closed bool
	subs   map[*subscription]struct{}
	// running counts subscriptions whose goroutine has not ended; Close
	// waits for it.
	running sync.WaitGroup
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)

// NewSubscriber returns a subscriber to cluster. logger may be nil. Errors:
// tributary.ErrInvalidArgument (nil cluster; a ConsumerGroup that is not
// an identifier, or one set with Ephemeral; Partitions outside 0..64; a
// negative NackResendSleep other than NoSleep; a Start, DeadLetterTopic or
// MaxAttempts tributary.NewGroupConfig refuses, MaxAttempts without a
// DeadLetterTopic; a SessionTimeout other than 0 and the cluster's).
func NewSubscriber(cluster *tributary.Cluster, cfg SubscriberConfig, logger watermill.LoggerAdapter) (*Subscriber, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	ts, err := newTopics(cluster, cfg.Partitions, logger)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.Ephemeral && cfg.ConsumerGroup != "":
		return nil, fmt.Errorf("%w: ConsumerGroup %q with Ephemeral: an ephemeral subscription has a group of its own", tributary.ErrInvalidArgument, cfg.ConsumerGroup)
	case cfg.ConsumerGroup == "" && !cfg.Ephemeral:
		cfg.ConsumerGroup = DefaultConsumerGroup
	}
	if cfg.ConsumerGroup != "" {
		if err := engine.CheckIdentifier("group", cfg.ConsumerGroup); err != nil {
			return nil, fmt.Errorf("ConsumerGroup: %w", err)
		}
	}
	switch {
	case cfg.NackResendSleep == 0:
		cfg.NackResendSleep = DefaultNackResendSleep
	case cfg.NackResendSleep < 0 && cfg.NackResendSleep != NoSleep:
		return nil, fmt.Errorf("%w: NackResendSleep %v: want >= 0 or NoSleep", tributary.ErrInvalidArgument, cfg.NackResendSleep)
	}
	group := []tributary.GroupOption{tributary.WithStart(cfg.Start)}
	switch {
	case cfg.DeadLetterTopic != "":
		if cfg.MaxAttempts == 0 {
			cfg.MaxAttempts = DefaultMaxAttempts
		}
		group = append(group, tributary.WithDeadLetter(cfg.DeadLetterTopic, cfg.MaxAttempts))
	case cfg.MaxAttempts != 0:
		return nil, fmt.Errorf("%w: MaxAttempts %d without a DeadLetterTopic", tributary.ErrInvalidArgument, cfg.MaxAttempts)
	}
	if _, err := tributary.NewGroupConfig("", group...); err != nil {
		return nil, err
	}
	if have := cluster.Backend().SessionTimeout(); cfg.SessionTimeout != 0 && cfg.SessionTimeout != have {
		return nil, fmt.Errorf("%w: SessionTimeout %v: the cluster's session timeout is %v (set it when making the cluster: engine.WithSessionTimeout)",
			tributary.ErrInvalidArgument, cfg.SessionTimeout, have)
	}
	return &Subscriber{cluster: cluster, cfg: cfg, topics: ts, logger: logger, group: group, subs: map[*subscription]struct{}{}}, nil
}

// SubscribeInitialize creates topic if absent and, unless the subscriber
// is Ephemeral, its consumer group, at the log start (SPEC rule 17) or, with
// Start engine.StartLatest, at the log end: from then on the group holds
// retention, so it will receive every message published to topic after
// this call, even before its first Subscribe. Errors: as Subscribe.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	if s.isClosed() {
		return ErrClosed
	}
	t, err := s.topics.open(topic)
	if err != nil {
		return err
	}
	if s.cfg.Ephemeral {
		return nil
	}
	return s.createGroup(t, s.cfg.ConsumerGroup)
}

// createGroup creates group on t with the configured assignor, start and
// failure policy; an existing group is left as it is.
func (s *Subscriber) createGroup(t *tributary.Topic[[]byte], group string) error {
	a := s.cfg.Assignor
	if a == nil {
		a = engine.RoundRobin
	}
	if _, err := s.cluster.CreateGroup(t.Name(), group, a, s.group...); err != nil {
		return fmt.Errorf("watermill topic %q: group %q: %w", t.Name(), group, err)
	}
	return nil
}

// Subscribe joins the subscriber's consumer group on topic (creating the
// topic if absent) as a new member named "wm-<short UUID>" and returns the
// channel its messages arrive on, unbuffered. Each message must be acked
// or nacked; until then its partition delivers nothing more to the group.
// The channel is closed when ctx ends or the subscriber is closed; the
// subscription then leaves the group (an Ephemeral one deletes its group).
// Errors: ErrClosed; tributary.ErrInvalidArgument (a nil ctx, a topic name
// that is not an identifier); tributary.ErrTypeMismatch (a topic of another
// payload type); tributary.ErrInvalidAssignment (the group's assignor
// refused the new member).
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil Context", tributary.ErrInvalidArgument)
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	t, err := s.topics.open(topic)
	if err != nil {
		return nil, err
	}
	group := s.cfg.ConsumerGroup
	if s.cfg.Ephemeral {
		group = "wm-eph-" + watermill.NewShortUUID()
	}
	if err := s.createGroup(t, group); err != nil {
		return nil, err
	}
	name := "wm-" + watermill.NewShortUUID()
	c, err := tributary.NewConsumer(t, group, name)
	if err != nil {
		s.dropEphemeral(t, group)
		return nil, fmt.Errorf("watermill topic %q: subscribe: %w", topic, err)
	}
	sub := &subscription{
		s:       s,
		c:       c,
		out:     make(chan *message.Message),
		pending: map[int32]int64{},
		ackedTo: map[int32]int64{},
		logger:  s.logger.With(watermill.LogFields{"topic": topic, "consumer_group": group, "member": name}),
	}
	sub.ctx, sub.cancel = context.WithCancel(ctx)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sub.cancel()
		c.Close() //nolint:errcheck // leaving a group just joined
		s.dropEphemeral(t, group)
		return nil, ErrClosed
	}
	s.subs[sub] = struct{}{}
	s.running.Add(1)
	s.mu.Unlock()
	go sub.run()
	return sub.out, nil
}

// dropEphemeral deletes group if it is an ephemeral subscription's (it
// has no members by then). It goes to the backend, not the Cluster,
// because a subscription also ends when its cluster closes, and a closed
// Cluster refuses admin calls while its own ephemeral group must still go.
func (s *Subscriber) dropEphemeral(t *tributary.Topic[[]byte], group string) {
	if !s.cfg.Ephemeral {
		return
	}
	if _, err := s.cluster.Backend().DeleteGroup(t.Name(), group); err != nil {
		s.logger.Error("Cannot delete ephemeral consumer group", err, watermill.LogFields{"topic": t.Name(), "consumer_group": group})
	}
}

func (s *Subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close ends every subscription: each leaves its group (its unacked
// messages go to the group's other members) and its channel is closed
// before Close returns. Messages handed out and not yet acked have their
// contexts cancelled; acking them later does nothing. Later Subscribe
// calls return ErrClosed. Closing twice is a no-op.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	for sub := range s.subs {
		sub.cancel()
	}
	s.mu.Unlock()
	s.running.Wait()
	return nil
}

// subscription is one Subscribe call: one consumer, one output channel.
type subscription struct {
	// hooks are the seams of the adapter's deliberate faults (faults.go):
	// empty, and calls to them compiled away, in a normal build.
	hooks  hooks
	s      *Subscriber
	c      *tributary.Consumer[[]byte]
	out    chan *message.Message
	logger watermill.LoggerAdapter

	ctx    context.Context // ends with Subscribe's ctx or Close
	cancel context.CancelFunc

	// mu guards pending, ackedTo and acks, and is held across each settle
	// (Ack or Retry) so that run sees a settle and its bookkeeping as one
	// step.
	//
	// With an ack timeout (engine.WithAckTimeout) the broker may reserve a
	// record again while its first copy is with the handler. pending is
	// the offset each partition's unsettled delivery holds: no second
	// delivery of it starts. The handler's Ack of the first copy is then
	// accepted for the new reservation, so a poll (run's Poll or a
	// worker's TryPollPartition) that returned that reservation before the
	// Ack holds a stale record. ackedTo (per partition, the offset after
	// the last record this subscription committed) and acks (how many it
	// committed) let hold recognise it and hand it back (Retry) instead of
	// delivering what was already acked.
	mu      sync.Mutex
	pending map[int32]int64
	ackedTo map[int32]int64
	acks    uint64
}

// run polls the consumer and hands each message to a worker goroutine
// that delivers it (at most one per partition is in flight, SPEC rule 10),
// until the subscription ends; then it waits for its workers, leaves the
// group and closes out. A worker that has settled its message waits for
// the next one, so a subscription keeps as many workers as it ever had
// deliveries pending at once (at most its partitions, and a few more for
// an instant), and their grown stacks are reused.
func (sub *subscription) run() {
	var workers sync.WaitGroup
	work := make(chan *tributary.Message[[]byte]) // to an idle worker
	var assigned []int32
	assigned = sub.logAssignment(assigned)
	for {
		acks := sub.ackCount()
		msgs, err := sub.c.Poll(sub.ctx, engine.MaxPollRecords)
		if err != nil {
			if sub.ctx.Err() == nil {
				sub.logger.Error("Subscription ended", err, nil)
			}
			break
		}
		assigned = sub.logAssignment(assigned)
		for i := range msgs {
			m := &msgs[i]
			if !sub.hold(m, acks) {
				continue
			}
			select {
			case work <- m:
			default:
				workers.Add(1)
				go sub.worker(m, work, &workers)
			}
		}
	}
	sub.cancel()
	workers.Wait()
	if err := sub.c.Close(); err != nil && !errors.Is(err, tributary.ErrClosed) {
		sub.logger.Error("Cannot leave the consumer group", err, nil)
	}
	sub.s.dropEphemeral(sub.c.Topic(), sub.c.Group())
	sub.logger.Info("Subscription closed", watermill.LogFields{"partitions_revoked": fmt.Sprint(assigned)})
	close(sub.out)
	sub.s.mu.Lock()
	delete(sub.s.subs, sub)
	sub.s.mu.Unlock()
	sub.s.running.Done()
}

// logAssignment logs, at Info, the partitions the subscription's consumer
// gained and lost since its assignment was last, and returns the one it
// has now (a rebalance: SPEC rules 8, 9, 18, 19; the consumer learns of
// it at its poll).
func (sub *subscription) logAssignment(last []int32) []int32 {
	now := sub.c.Assignment()
	if slices.Equal(now, last) {
		return last
	}
	diff := func(a, b []int32) []int32 {
		return slices.DeleteFunc(slices.Clone(a), func(p int32) bool { return slices.Contains(b, p) })
	}
	sub.logger.Info("Partitions assigned", watermill.LogFields{
		"partitions": fmt.Sprint(now), "gained": fmt.Sprint(diff(now, last)), "lost": fmt.Sprint(diff(last, now))})
	return now
}

// worker delivers m, then each message run hands it, until the
// subscription ends. After an ack it takes its partition's next record
// itself if one is there (tributary.Consumer.TryPollPartition), sparing the
// hand-over from run; the broker gives each record to one poll only.
func (sub *subscription) worker(m *tributary.Message[[]byte], work <-chan *tributary.Message[[]byte], wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		if sub.deliver(m) {
			// With an ack timeout this poll too may re-reserve a record
			// another worker still holds: hold checks it as run does.
			acks := sub.ackCount()
			next, ok, err := sub.c.TryPollPartition(m.Partition)
			if err == nil && ok && sub.hold(&next, acks) {
				m = &next
				continue
			}
		}
		select {
		case m = <-work:
		case <-sub.ctx.Done():
			return
		}
	}
}

// ackCount returns how many records the subscription has committed.
func (sub *subscription) ackCount() uint64 {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.acks
}

// hold records m's delivery as its partition's pending one and reports
// whether to deliver it. acks is ackCount from before the poll that
// returned m. false, with nothing recorded, when the partition's pending delivery
// already holds m's offset (an ack timeout reserved it again: the first
// copy is still with the handler), and when a commit since that poll has
// passed m's offset (m is a stale reservation; it is handed back, and the
// broker refuses that unless m was in flight again by a Seek, which then
// comes back to the next poll).
func (sub *subscription) hold(m *tributary.Message[[]byte], acks uint64) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if off, ok := sub.pending[m.Partition]; ok && off == m.Offset {
		return false
	}
	if sub.acks != acks {
		if to, ok := sub.ackedTo[m.Partition]; ok && m.Offset < to {
			sub.c.Retry(*m) //nolint:errcheck // refused unless it is in flight to us
			return false
		}
	}
	sub.pending[m.Partition] = m.Offset
	return true
}

// settle ends m's hold and applies settle (the consumer's Ack or Retry)
// to it as one step under mu, noting a commit.
func (sub *subscription) settle(m *tributary.Message[[]byte], settle func(tributary.Message[[]byte]) error, commit bool) error {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if off, ok := sub.pending[m.Partition]; ok && off == m.Offset {
		delete(sub.pending, m.Partition)
	}
	err := settle(*m)
	if err == nil && commit {
		sub.ackedTo[m.Partition] = m.Offset + 1
		sub.acks++
	}
	return err
}

// errNacked is the cause a dead letter's error header gives: Watermill's
// Nack carries no error.
var errNacked = errors.New("nacked by the Watermill handler")

// deliver sends m on the subscription's channel and settles it, and
// reports whether it committed m: Ack commits it; Nack waits
// NackResendSleep and releases it for redelivery (Retry) or, on the last
// attempt its group's failure policy allows, dead-letters and acks it. The message's context is cancelled once it is settled or the
// subscription ends. A settle the broker refuses (a rebalance moved the
// partition, SPEC rule 9) is logged: the partition's new owner delivers
// the message again.
func (sub *subscription) deliver(m *tributary.Message[[]byte]) (committed bool) {
	wm := sub.hooks.received(toWatermill(m))
	d := Delivery{
		Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Attempt: m.Attempt,
		Key: m.Key, Time: m.Time, Group: sub.c.Group(), Member: sub.c.Name(),
	}
	ctx, cancel := context.WithCancel(context.WithValue(sub.ctx, deliveryKey{}, d))
	defer cancel()
	wm.SetContext(ctx)
	select {
	case sub.out <- wm:
	case <-sub.ctx.Done():
		return false // leaving the group releases the record
	}
	settle, retried := sub.c.Ack, false
	select {
	case <-sub.hooks.acked(wm.Acked()):
	case <-wm.Nacked():
		cancel()
		if dl, max := sub.c.DeadLetter(); sub.hooks.lastAttempt(dl != "" && m.Attempt >= max) {
			// The group's policy: this was the last attempt. Nack publishes
			// the dead letter (waiting for room while the subscription
			// lasts) and acks the message.
			settle = func(m tributary.Message[[]byte]) error {
				_, err := sub.c.Nack(sub.ctx, m, errNacked)
				return err
			}
			break
		}
		settle, retried = sub.hooks.nacked(sub.c.Retry, settle)
		if wait := sub.s.cfg.NackResendSleep; wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-sub.ctx.Done():
				t.Stop()
				return false
			}
		}
	case <-sub.ctx.Done():
		return false
	}
	// The hold ends with the settle: after Retry the next Poll returns the
	// same record, which must then start a new delivery.
	if err := sub.settle(m, settle, !retried); err != nil {
		sub.logger.Info("Broker refused the settle; the message will be delivered again", watermill.LogFields{
			"message_uuid": wm.UUID, "partition": m.Partition, "offset": m.Offset, "error": err.Error(),
		})
		return false
	}
	return !retried
}
