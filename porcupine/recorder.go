package porcupine

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	porc "github.com/anishathalye/porcupine"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/model"
)

// Op is one recorded call: which client made it, when (nanoseconds since
// the Recorder was made, from the monotonic clock; see the package doc), and
// what went in and came out. Call <= Return.
type Op struct {
	Client int    `json:"client"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	In     Input  `json:"in"`
	Out    Output `json:"out"`
}

// engineErrs are the engine's sentinels, for classifying its errors.
var engineErrs = sentinels{engine.ErrInvalidArgument, engine.ErrOffsetOutOfRange, engine.ErrGroupNotEmpty}

// TestClock is a broker clock that moves only when told: give its Now to
// engine.WithClock, and move it with a recorded Client.Advance. Its reading
// is Epoch plus an atomic count of nanoseconds.
//
// The engine reads its clock once per Publish, PublishMessage or Poll (and,
// with a session timeout, once per valid call on a topic but Create, SPEC
// rule 24), not necessarily at the instant the call takes effect (SPEC
// rule 15: "read during the call"), so a concurrent Advance could fall
// between the two, and no sequential order would then explain the result.
// A TestClock therefore has a gate: a Client holds it shared around each
// call that reads the clock and exclusively around Advance, so that the
// clock never moves during such a call and Advance is linearizable with
// every call. The zero TestClock reads Epoch and is ready to use.
type TestClock struct {
	// gate is held shared by a recorded clock-reading call and exclusively
	// by Advance; it guards no memory (ns is atomic).
	gate sync.RWMutex
	ns   atomic.Int64 // nanoseconds since Epoch
}

// Now returns the clock's reading. It is safe for concurrent use.
func (c *TestClock) Now() time.Time { return Epoch.Add(time.Duration(c.ns.Load())) }

// Recorder records every call made through its Clients, each on the
// *engine.Broker it was made for. Make one with NewRecorder.
type Recorder struct {
	b     *engine.Broker // Client's broker
	start time.Time      // carries a monotonic reading; every timestamp is time.Since(start)

	// mu guards clients; it is taken only by Client, ClientFor and Ops,
	// never around a broker call.
	mu      sync.Mutex
	clients []*Client
}

// NewRecorder returns a Recorder of calls to b (nil when every client is
// made with ClientFor). b is not owned: calls made on b directly are not
// recorded.
func NewRecorder(b *engine.Broker) *Recorder {
	return &Recorder{b: b, start: time.Now()}
}

// Broker returns the broker given to NewRecorder.
func (r *Recorder) Broker() *engine.Broker { return r.b }

// now returns nanoseconds since r was made, on the monotonic clock.
func (r *Recorder) now() int64 { return int64(time.Since(r.start)) }

// Client returns a new client of NewRecorder's broker without a test clock:
// ClientFor(r.Broker(), nil).
func (r *Recorder) Client() *Client { return r.ClientFor(r.b, nil) }

// ClientFor returns a new client of b, with the next client id (0, 1, 2, …).
// When clock is not nil, it must be b's clock (engine.WithClock(clock.Now)):
// the client then records record times, gates its calls that read the clock
// (see TestClock; with b.SessionTimeout() > 0 that is every call but
// Create) and may Advance it. A Client records into its own buffer
// without locking, so each Client must be used by one goroutine at a time;
// use one per goroutine.
func (r *Recorder) ClientFor(b *engine.Broker, clock *TestClock) *Client {
	c := &Client{b: b, t: engineTarget{b}, clock: clock}
	c.gateAll = clock != nil && b.SessionTimeout() > 0
	return r.add(c)
}

// ClientOn returns a new client, with the next client id, whose calls go
// to t (another backend: see Target and BackendTarget). It has no test
// clock. Like every Client it must be used by one goroutine at a time.
func (r *Recorder) ClientOn(t Target) *Client {
	return r.add(&Client{t: t})
}

// add gives c the next id and registers it.
func (r *Recorder) add(c *Client) *Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.r, c.id = r, len(r.clients)
	r.clients = append(r.clients, c)
	return c
}

// Ops returns every call recorded so far by every client, sorted by call
// time, as a new slice owned by the caller. Call it only once no client is
// in use (after the goroutines using them are done).
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ops []Op
	for _, c := range r.clients {
		ops = append(ops, c.ops...)
	}
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	return ops
}

// Client makes recorded calls on its broker (or, made with ClientOn, on
// another Target). Its methods are the engine's calls, with the same
// arguments and results except that an Assignor is named (see
// LookupAssignor), plus Advance; each records one Op. The doc of each
// method names the engine's call; a Target's method of the same name stands
// in for it. Not safe for concurrent use.
type Client struct {
	r     *Recorder
	b     *engine.Broker // nil for a client made with ClientOn
	t     Target         // the calls go here: b, or ClientOn's target
	clock *TestClock     // nil: no test clock
	// gateAll: under a session timeout every call but Create reads the
	// clock (expiry, SPEC rule 24), so each holds the gate.
	gateAll bool
	id      int
	ops     []Op
}

// ID returns the client's id, as recorded in Op.Client.
func (c *Client) ID() int { return c.id }

// Broker returns the client's broker; nil for a client made with ClientOn.
func (c *Client) Broker() *engine.Broker { return c.b }

// record appends one call, with the clock readings taken immediately before
// the broker call and immediately after it returned.
func (c *Client) record(call, ret int64, in Input, out Output) {
	c.ops = append(c.ops, Op{Client: c.id, Call: call, Return: ret, In: in, Out: out})
}

// readClock holds the test clock's gate shared, if there is a test clock,
// for a call that reads the clock; the result releases it.
func (c *Client) readClock() func() {
	if c.clock == nil {
		return noGate
	}
	c.clock.gate.RLock()
	return c.clock.gate.RUnlock
}

// expiring is readClock for a call that reads the clock only for expiry
// (SPEC rule 24): it holds the gate only under a session timeout.
func (c *Client) expiring() func() {
	if !c.gateAll {
		return noGate
	}
	return c.readClock()
}

// recorded makes one recorded call: do is the call, made between the two
// clock readings, and out turns its result into the recorded Output, whose
// error err classifies. done, called on return, releases the test clock's
// gate that the caller took for the call (readClock, expiring, or noGate
// for a call that reads no clock). It records in and returns do's results.
func recorded[T any](c *Client, done func(), in Input, do func() (T, error), out func(T, error) Output) (T, error) {
	defer done()
	call := c.r.now()
	v, err := do()
	ret := c.r.now()
	o := out(v, err)
	o.setErr(err, engineErrs)
	c.record(call, ret, in, o)
	return v, err
}

// noGate is the gate release of a call that holds no gate.
func noGate() {}

// outOK, outOffset, outN and outParts are recorded's out for a call
// answering a bool, an offset, a partition count or a member's partitions
// (copied: the caller owns the slice).
func outOK(ok bool, _ error) Output          { return Output{OK: ok} }
func outOffset(off int64, _ error) Output    { return Output{Offset: off} }
func outN(n int32, _ error) Output           { return Output{N: n} }
func outParts(parts []int32, _ error) Output { return Output{Partitions: slices.Clone(parts)} }

// outRecords is recorded's out for a poll: the polled records (records).
func (c *Client) outRecords(recs []engine.Record, _ error) Output {
	return Output{Records: c.records(recs)}
}

// Create calls engine.Broker.Create and records it.
func (c *Client) Create(topic string, partitionCount int32) (bool, error) {
	return recorded(c, noGate, Input{Kind: KindCreate, Topic: topic, N: partitionCount},
		func() (bool, error) { return c.t.Create(topic, partitionCount) }, outOK)
}

// Join calls engine.Broker.Join and records it.
func (c *Client) Join(topic, group, member string) ([]int32, error) {
	return recorded(c, c.expiring(), Input{Kind: KindJoin, Topic: topic, Group: group, Member: member},
		func() ([]int32, error) { return c.t.Join(topic, group, member) }, outParts)
}

// Leave calls engine.Broker.Leave and records it.
func (c *Client) Leave(topic, group, member string) (bool, error) {
	return recorded(c, c.expiring(), Input{Kind: KindLeave, Topic: topic, Group: group, Member: member},
		func() (bool, error) { return c.t.Leave(topic, group, member) }, outOK)
}

// Publish calls engine.Broker.Publish and records it.
func (c *Client) Publish(topic string, partition int32, payload string) (int64, error) {
	return recorded(c, c.readClock(), Input{Kind: KindPublish, Topic: topic, Partition: partition, Payload: payload},
		func() (int64, error) { return c.t.Publish(topic, partition, payload) }, outOffset)
}

// PublishMessage calls engine.Broker.PublishMessage and records it.
func (c *Client) PublishMessage(topic string, partition int32, m engine.Message) (int64, error) {
	in := Input{Kind: KindPublishMessage, Topic: topic, Partition: partition, Payload: m.Payload, Key: m.Key, Headers: fromHeaders(m.Headers), Time: m.Time}
	return recorded(c, c.readClock(), in,
		func() (int64, error) { return c.t.PublishMessage(topic, partition, m) }, outOffset)
}

// Poll calls engine.Broker.Poll and records it.
func (c *Client) Poll(topic, group, member string, maxRecords int32) ([]engine.Record, error) {
	return recorded(c, c.readClock(), Input{Kind: KindPoll, Topic: topic, Group: group, Member: member, N: maxRecords},
		func() ([]engine.Record, error) { return c.t.Poll(topic, group, member, maxRecords) }, c.outRecords)
}

// PollPartition calls the target's PollPartition and records it as
// KindPollPartition. On the engine that is MemberHandle.AppendPollPartition
// on a handle of topic, group and member, resolved within the recorded
// interval, into a new buffer; resolving the handle changes nothing, so the
// call takes effect where AppendPollPartition does.
func (c *Client) PollPartition(topic, group, member string, partition int32) ([]engine.Record, error) {
	return recorded(c, c.readClock(), Input{Kind: KindPollPartition, Topic: topic, Group: group, Member: member, Partition: partition},
		func() ([]engine.Record, error) { return c.t.PollPartition(topic, group, member, partition) }, c.outRecords)
}

// records copies polled records, with their times only under a test clock.
func (c *Client) records(recs []engine.Record) []Record {
	var out []Record
	for _, r := range recs {
		rec := Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Payload: r.Payload,
			Key: r.Key, Headers: fromHeaders(r.Headers), Attempt: r.Attempt}
		if c.clock != nil {
			rec.Time = r.Time.UTC()
		}
		out = append(out, rec)
	}
	return out
}

// Ack calls engine.Broker.Ack and records it.
func (c *Client) Ack(topic, group, member string, partition int32, offset int64) (bool, error) {
	return recorded(c, c.expiring(), Input{Kind: KindAck, Topic: topic, Group: group, Member: member, Partition: partition, Offset: offset},
		func() (bool, error) { return c.t.Ack(topic, group, member, partition, offset) }, outOK)
}

// Retry calls engine.Broker.Retry and records it.
func (c *Client) Retry(topic, group, member string, partition int32, offset int64) (bool, error) {
	return recorded(c, c.expiring(), Input{Kind: KindRetry, Topic: topic, Group: group, Member: member, Partition: partition, Offset: offset},
		func() (bool, error) { return c.t.Retry(topic, group, member, partition, offset) }, outOK)
}

// CreateGroup calls engine.Broker.CreateGroup with the assignor named
// assignor ("" for nil) and records it. It panics for a name LookupAssignor
// does not know.
func (c *Client) CreateGroup(topic, group, assignor string) (bool, error) {
	a := mustAssignor(assignor)
	return recorded(c, c.expiring(), Input{Kind: KindCreateGroup, Topic: topic, Group: group, Assignor: assignor},
		func() (bool, error) { return c.t.CreateGroup(topic, group, a) }, outOK)
}

// CreateGroupAt calls engine.Broker.CreateGroupAt with the assignor named
// assignor ("" for nil) and start (engine.GroupStart's value; others are
// invalid) and records it. It panics for a name LookupAssignor does not
// know.
func (c *Client) CreateGroupAt(topic, group, assignor string, start uint8) (bool, error) {
	a := mustAssignor(assignor)
	return recorded(c, c.expiring(), Input{Kind: KindCreateGroupAt, Topic: topic, Group: group, Assignor: assignor, Start: start},
		func() (bool, error) { return c.t.CreateGroupAt(topic, group, a, engine.GroupStart(start)) }, outOK)
}

// DeleteGroup calls engine.Broker.DeleteGroup and records it.
func (c *Client) DeleteGroup(topic, group string) (bool, error) {
	return recorded(c, c.expiring(), Input{Kind: KindDeleteGroup, Topic: topic, Group: group},
		func() (bool, error) { return c.t.DeleteGroup(topic, group) }, outOK)
}

// SetAssignor calls engine.Broker.SetAssignor with the assignor named
// assignor ("" for nil) and records it. It panics for a name LookupAssignor
// does not know.
func (c *Client) SetAssignor(topic, group, assignor string) (bool, error) {
	a := mustAssignor(assignor)
	return recorded(c, c.expiring(), Input{Kind: KindSetAssignor, Topic: topic, Group: group, Assignor: assignor},
		func() (bool, error) { return c.t.SetAssignor(topic, group, a) }, outOK)
}

// AddPartitions calls engine.Broker.AddPartitions and records it.
func (c *Client) AddPartitions(topic string, count int32) (int32, error) {
	return recorded(c, c.expiring(), Input{Kind: KindAddPartitions, Topic: topic, N: count},
		func() (int32, error) { return c.t.AddPartitions(topic, count) }, outN)
}

// Seek calls engine.Broker.Seek and records it.
func (c *Client) Seek(topic, group string, partition int32, offset int64) (bool, error) {
	return recorded(c, c.expiring(), Input{Kind: KindSeek, Topic: topic, Group: group, Partition: partition, Offset: offset},
		func() (bool, error) { return c.t.Seek(topic, group, partition, offset) }, outOK)
}

// Describe calls engine.Broker.Describe and records the whole description.
func (c *Client) Describe(topic string) (engine.TopicDescription, error) {
	return recorded(c, c.expiring(), Input{Kind: KindDescribe, Topic: topic},
		func() (engine.TopicDescription, error) { return c.t.Describe(topic) },
		func(d engine.TopicDescription, err error) (out Output) {
			if err == nil {
				out.Desc = fromEngineDescription(d)
			}
			return out
		})
}

// Heartbeat calls engine.Broker.Heartbeat (SPEC rule 24) and records it.
// It panics for a client of a Target that is not a LivenessTarget.
func (c *Client) Heartbeat(topic, group, member string) (bool, error) {
	lt := c.liveness()
	return recorded(c, c.expiring(), Input{Kind: KindHeartbeat, Topic: topic, Group: group, Member: member},
		func() (bool, error) { return lt.Heartbeat(topic, group, member) }, outOK)
}

// Rejoin calls engine.Broker.Rejoin (SPEC rule 25) and records it. It
// panics for a client of a Target that is not a LivenessTarget.
func (c *Client) Rejoin(topic, group, member string) ([]int32, error) {
	lt := c.liveness()
	return recorded(c, c.expiring(), Input{Kind: KindRejoin, Topic: topic, Group: group, Member: member},
		func() ([]int32, error) { return lt.Rejoin(topic, group, member) }, outParts)
}

// liveness returns the client's Target as a LivenessTarget, or panics.
func (c *Client) liveness() LivenessTarget {
	lt, ok := c.t.(LivenessTarget)
	if !ok {
		panic(fmt.Sprintf("porcupine: Heartbeat or Rejoin on a target without them (%T)", c.t))
	}
	return lt
}

// Advance moves the client's test clock forward by d and records it as a
// call on topic (whose broker the clock drives), returning the clock's new
// reading since Epoch. It holds the clock's gate exclusively (see
// TestClock). It panics without a test clock or for a negative d.
func (c *Client) Advance(topic string, d time.Duration) time.Duration {
	if c.clock == nil || d < 0 {
		panic(fmt.Sprintf("porcupine: Advance(%v) of a client without a test clock, or backwards", d))
	}
	c.clock.gate.Lock()
	call := c.r.now()
	now := time.Duration(c.clock.ns.Add(int64(d)))
	ret := c.r.now()
	c.clock.gate.Unlock()
	c.record(call, ret, Input{Kind: KindAdvance, Topic: topic, Advance: d}, Output{Now: now})
	return now
}

// fromHeaders copies the headers of an engine's or the model's message or
// record; nil when there are none.
func fromHeaders[H engine.Header | model.Header](hs []H) []Header {
	return copyAll(hs, func(h H) Header { return Header(h) })
}

// fromEngineDescription copies an engine.TopicDescription.
func fromEngineDescription(d engine.TopicDescription) *TopicDescription {
	out := &TopicDescription{Topic: d.Topic, Partitions: fromPartitions(d.Partitions)}
	for _, g := range d.Groups {
		out.Groups = append(out.Groups, fromGroup(g.Group, g.Assignor, g.Members, g.Partitions, g.LastSeen))
	}
	return out
}

// fromPartitions copies the partitions of an engine's or the model's
// description; nil when there are none.
func fromPartitions[P engine.PartitionDescription | model.PartitionDescription](ps []P) []PartitionDescription {
	return copyAll(ps, func(p P) PartitionDescription { return PartitionDescription(p) })
}

// fromGroup copies one group of an engine's or the model's description:
// its members and partitions copied (nil partitions when there are none),
// its last-seen instants in UTC (nil when there are none).
func fromGroup[GP engine.GroupPartition | model.GroupPartition](group, assignor string, members []string, parts []GP, lastSeen []time.Time) GroupDescription {
	return GroupDescription{Group: group, Assignor: assignor, Members: slices.Clone(members),
		Partitions: copyAll(parts, func(p GP) GroupPartition { return GroupPartition(p) }),
		LastSeen:   copyAll(lastSeen, time.Time.UTC)}
}

// copyAll returns xs, each converted by to, as a new slice; nil when xs is
// empty.
func copyAll[From, To any](xs []From, to func(From) To) []To {
	var out []To
	for _, x := range xs {
		out = append(out, to(x))
	}
	return out
}

// operations converts ops to porcupine's form (Input and Output values).
func operations(ops []Op) []porc.Operation {
	out := make([]porc.Operation, len(ops))
	for i, op := range ops {
		out[i] = porc.Operation{ClientId: op.Client, Input: op.In, Call: op.Call, Output: op.Out, Return: op.Return}
	}
	return out
}
