package tributary

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// Hooks are the library's instrumentation points, in the manner of
// franz-go's kgo hooks and Watermill's middleware: funcs the library calls
// as producers send and consumers receive, settle and rebalance, on which
// logging (LogHooks), metrics and tracing (the otel module), a lag
// exporter and a monitoring page (the monitor package) are built without
// the core depending on them. Every field may be nil: an unset hook costs
// one atomic load and a nil check on its path, and a cluster with no Hooks
// added costs one atomic load per event (BenchmarkHooksOff, and the
// AllocsPerRun guards of TestHooksOffAllocs).
//
// Hooks are called on the goroutine of the call that makes the event,
// synchronously, without any lock of the library or the engine held: a
// hook may call anything on the cluster, but the event's call waits for
// it, so a slow hook slows its producer or consumer. A hook that panics
// panics that call. Slices and headers a hook is given are valid only
// during the call and must not be changed, but for SendInfo.Headers.
//
// Several Hooks may be added to one cluster (Cluster.AddHooks); each event
// calls them in the order added.
type Hooks struct {
	// OnSend is called by Producer.Send and TrySend once the partition is
	// chosen and the value encoded, before the record is published; ctx
	// is Send's (TrySend's: context.Background()). The hook may append to
	// s.Headers (a trace context: W3C traceparent): the headers it holds
	// when the hook returns are published (one named HeaderPayloadType
	// fails the send with ErrInvalidArgument). done, if not nil, is called once the publish
	// ended, with the record's offset (−1 when err is not nil) and the
	// error Send returns. s is valid until the last done returns (the
	// library reuses it), so a done func may read it but nothing may keep
	// it.
	OnSend func(ctx context.Context, s *SendInfo) (done func(offset int64, err error))
	// OnWaitForRoom is called when Send finds its partition full (SPEC
	// rule 15) and waits for room, once per Send.
	OnWaitForRoom func(topic string, partition int32)
	// OnDeliver is called for each message a poll gives the consumer
	// (Poll, TryPoll, AppendPoll, TryPollPartition, Messages, Run): the
	// record is in flight to it (SPEC rule 10).
	OnDeliver func(d Delivery)
	// OnProcess is called by Consumer.Run around each handler call: ctx is
	// the handler's context, and the context it returns is the one the
	// handler gets (a consumer span's, linked to the producer's trace
	// context in d.Headers). end, if not nil, is called when the handler
	// returned, with its error (a panic's, recovered), and how long it
	// ran. A message whose payload does not decode is not handled: it has
	// no OnProcess.
	OnProcess func(ctx context.Context, d Delivery) (hctx context.Context, end func(err error, elapsed time.Duration))
	// OnAck is called after a consumer's Ack of d took effect (SPEC rule
	// 11): Consumer.Ack, Run's after its handler succeeded, and the ack
	// that follows a dead letter (Run's and Nack's).
	OnAck func(d Delivery)
	// OnRetry is called after Consumer.Retry (and Nack's retry) released
	// d for redelivery (SPEC rules 12, 16), backoff 0, and when Run
	// schedules the retry of a record its handler failed, backoff the
	// delay before the record is released.
	OnRetry func(d Delivery, backoff time.Duration)
	// OnDeadLetter is called after d was published to the group's
	// dead-letter topic deadLetterTopic (before its ack); cause is the
	// last handler or decode error.
	OnDeadLetter func(d Delivery, deadLetterTopic string, cause error)
	// OnAssigned and OnRevoked are called when a consumer finds its
	// partitions changed (franz-go's OnPartitionsAssigned and
	// OnPartitionsRevoked): after it joins (all its partitions assigned),
	// after a poll that finds the assignment changed by a rebalance (SPEC
	// rules 8, 9, 18, 19), and when it leaves, is fenced or finds itself
	// expired (all revoked). r.Partitions are the ones gained or lost,
	// ascending. Over a consumer's life they balance: every partition
	// assigned is revoked once, by its Close at the latest; the calls of
	// a poll and of a Close racing with it may come in either order.
	// A consumer learns of a rebalance when its poll returns, so a
	// revoked partition's in-flight delivery may already be another
	// member's, and one waiting with nothing to deliver (an idle Run, a
	// blocked Poll) reports it only once a record arrives for it or it
	// leaves; Describe shows the group's assignment at once.
	OnAssigned func(r Rebalance)
	OnRevoked  func(r Rebalance)
	// OnExpired is called when a consumer finds its session expired (SPEC
	// rule 24: it had left its group, its deliveries cancelled), before
	// the OnRevoked and OnAssigned of its joining again.
	OnExpired func(m MemberRef)
	// OnOutage is called when Consumer.Run's poll meets ErrUnavailable
	// after one that succeeded (o.Err, Ended false), and when a poll
	// delivers again after it (Ended true, Duration the time since the
	// outage began): once per outage, not per failed try.
	OnOutage func(o Outage)
}

// SendInfo is what OnSend is told of a record about to be published.
type SendInfo struct {
	Producer  string
	Topic     string
	Partition int32
	Key       string
	// Headers are the record's headers: the message's slice cut to its
	// length (slices.Clip), so that an append copies it and never writes
	// into the caller's array. A hook may append to it; one that changes
	// or removes an element must first copy it (slices.Clone): the
	// elements are the caller's Message.Headers.
	Headers []Header
	// Bytes is the encoded payload's length.
	Bytes int
}

// Delivery is a message as a consumer holds it: the record (topic,
// partition, offset, ID, attempt, headers, payload size) and the member
// it is in flight to.
type Delivery struct {
	Topic, Group, Member string
	Partition            int32
	Offset               int64
	ID                   string
	Attempt              int32 // 1 the first delivery (SPEC rule 16)
	Headers              []Header
	Bytes                int       // the payload's length
	Time                 time.Time // the record's creation time
}

// Rebalance is a change of one consumer's partitions.
type Rebalance struct {
	Topic, Group, Member string
	Partitions           []int32 // those gained (OnAssigned) or lost (OnRevoked), ascending
}

// MemberRef names a consumer group member.
type MemberRef struct{ Topic, Group, Member string }

// Outage is a consumer's view of an unavailable backend.
type Outage struct {
	Topic, Group, Member string
	Err                  error         // the first ErrUnavailable (Ended false)
	Ended                bool          // a call succeeded again
	Duration             time.Duration // Ended: since the outage began
}

// hookSet is the immutable list of a cluster's Hooks, replaced whole by
// AddHooks, and which events of it have a func.
type hookSet struct {
	list                                                 []Hooks
	onSend, onWait, onDeliver, onProcess, onAck, onRetry bool
	onDLQ, onRebalance, onExpired, onOutage              bool
}

// clusterHooks is a cluster's hook set: nil until AddHooks.
type clusterHooks struct {
	set atomic.Pointer[hookSet]
	mu  sync.Mutex // serialises AddHooks
}

// AddHooks adds h to the cluster's hooks: every producer and consumer of
// the cluster, those made already included, calls them for the events
// that follow. Hooks cannot be removed; a hook that should stop checks a
// flag of its own.
func (c *Cluster) AddHooks(h Hooks) {
	c.hooks.mu.Lock()
	defer c.hooks.mu.Unlock()
	n := &hookSet{}
	if old := c.hooks.set.Load(); old != nil {
		n.list = append(n.list, old.list...)
	}
	n.list = append(n.list, h)
	for _, h := range n.list {
		n.onSend = n.onSend || h.OnSend != nil
		n.onWait = n.onWait || h.OnWaitForRoom != nil
		n.onDeliver = n.onDeliver || h.OnDeliver != nil
		n.onProcess = n.onProcess || h.OnProcess != nil
		n.onAck = n.onAck || h.OnAck != nil
		n.onRetry = n.onRetry || h.OnRetry != nil
		n.onDLQ = n.onDLQ || h.OnDeadLetter != nil
		n.onRebalance = n.onRebalance || h.OnAssigned != nil || h.OnRevoked != nil
		n.onExpired = n.onExpired || h.OnExpired != nil
		n.onOutage = n.onOutage || h.OnOutage != nil
	}
	c.hooks.set.Store(n)
}

// hooksOf returns c's hook set, nil when none was added.
func (c *Cluster) hooksOf() *hookSet { return c.hooks.set.Load() }

// sendStart calls every OnSend for the record em about to be published
// by producer to (topic, partition) and returns the send's state: the
// SendInfo the hooks were given and their done funcs. The headers the
// hooks leave in SendInfo become em's. The state comes from sendStates
// and goes back there in sendDone: a hook's pointer escapes, and a Send
// would otherwise allocate it, and the done funcs' slice, per record.
func (hs *hookSet) sendStart(ctx context.Context, producer, topic string, partition int32, em *engine.Message) *sendState {
	if ctx == nil {
		ctx = context.Background()
	}
	st := sendStates.Get().(*sendState)
	st.info = SendInfo{Producer: producer, Topic: topic, Partition: partition, Key: em.Key,
		Headers: slices.Clip(em.Headers), Bytes: len(em.Payload)}
	for _, h := range hs.list {
		if h.OnSend != nil {
			if d := h.OnSend(ctx, &st.info); d != nil {
				st.dones = append(st.dones, d)
			}
		}
	}
	em.Headers = st.info.Headers
	return st
}

// sendState is one hooked send's: what its OnSend hooks were given and
// returned.
type sendState struct {
	info  SendInfo
	dones []func(int64, error)
}

// sendStates holds the states of sends whose hooks are done with them.
var sendStates = sync.Pool{New: func() any { return new(sendState) }}

// sendDone calls st's done funcs in reverse order and gives st back.
func sendDone(st *sendState, off int64, err error) {
	if err != nil {
		off = -1
	}
	for i := len(st.dones) - 1; i >= 0; i-- {
		st.dones[i](off, err)
	}
	st.info = SendInfo{}
	clear(st.dones)
	st.dones = st.dones[:0]
	sendStates.Put(st)
}

// waitForRoom calls every OnWaitForRoom.
func (hs *hookSet) waitForRoom(topic string, partition int32) {
	for _, h := range hs.list {
		if h.OnWaitForRoom != nil {
			h.OnWaitForRoom(topic, partition)
		}
	}
}

// deliver calls every OnDeliver with d.
func (hs *hookSet) deliver(d Delivery) {
	for _, h := range hs.list {
		if h.OnDeliver != nil {
			h.OnDeliver(d)
		}
	}
}

// processStart calls every OnProcess, each given the context the one
// before returned, and returns the handler's context and the end funcs.
func (hs *hookSet) processStart(ctx context.Context, d Delivery) (context.Context, []func(error, time.Duration)) {
	var ends []func(error, time.Duration)
	for _, h := range hs.list {
		if h.OnProcess == nil {
			continue
		}
		hctx, end := h.OnProcess(ctx, d)
		if hctx != nil {
			ctx = hctx
		}
		if end != nil {
			ends = append(ends, end)
		}
	}
	return ctx, ends
}

// processEnd calls the end funcs processStart returned, in reverse order.
func processEnd(ends []func(error, time.Duration), err error, elapsed time.Duration) {
	for i := len(ends) - 1; i >= 0; i-- {
		ends[i](err, elapsed)
	}
}

// acked, retried and deadLettered call every OnAck, OnRetry and
// OnDeadLetter.
func (hs *hookSet) acked(d Delivery) {
	for _, h := range hs.list {
		if h.OnAck != nil {
			h.OnAck(d)
		}
	}
}

func (hs *hookSet) retried(d Delivery, backoff time.Duration) {
	for _, h := range hs.list {
		if h.OnRetry != nil {
			h.OnRetry(d, backoff)
		}
	}
}

func (hs *hookSet) deadLettered(d Delivery, topic string, cause error) {
	for _, h := range hs.list {
		if h.OnDeadLetter != nil {
			h.OnDeadLetter(d, topic, cause)
		}
	}
}

// assigned and revoked call every OnAssigned or OnRevoked with r, when r
// has partitions.
func (hs *hookSet) assigned(r Rebalance) {
	if len(r.Partitions) == 0 {
		return
	}
	for _, h := range hs.list {
		if h.OnAssigned != nil {
			h.OnAssigned(r)
		}
	}
}

func (hs *hookSet) revoked(r Rebalance) {
	if len(r.Partitions) == 0 {
		return
	}
	for _, h := range hs.list {
		if h.OnRevoked != nil {
			h.OnRevoked(r)
		}
	}
}

// expiredMember calls every OnExpired.
func (hs *hookSet) expiredMember(m MemberRef) {
	for _, h := range hs.list {
		if h.OnExpired != nil {
			h.OnExpired(m)
		}
	}
}

// outage calls every OnOutage.
func (hs *hookSet) outageEvent(o Outage) {
	for _, h := range hs.list {
		if h.OnOutage != nil {
			h.OnOutage(o)
		}
	}
}

// recordDelivery is the Delivery of rec, whose message ID is id, in
// flight to member of group.
func recordDelivery(rec *engine.Record, id, group, member string) Delivery {
	return Delivery{Topic: rec.Topic, Group: group, Member: member, Partition: rec.Partition,
		Offset: rec.Offset, ID: id, Attempt: rec.Attempt, Headers: rec.Headers,
		Bytes: len(rec.Payload), Time: rec.Time}
}

// messageDelivery is the Delivery of m, in flight to member of group.
func messageDelivery[T any](m *Message[T], group, member string) Delivery {
	return Delivery{Topic: m.Topic, Group: group, Member: member, Partition: m.Partition,
		Offset: m.Offset, ID: m.ID, Attempt: m.Attempt, Headers: m.Headers,
		Bytes: len(m.Payload), Time: m.Time}
}

// diffPartitions returns the partitions of a not in b; both ascending.
func diffPartitions(a, b []int32) []int32 {
	var out []int32
	for _, p := range a {
		if _, found := slices.BinarySearch(b, p); !found {
			out = append(out, p)
		}
	}
	return out
}
