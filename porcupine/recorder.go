package porcupine

import (
	"cmp"
	"slices"
	"sync"
	"time"

	porc "github.com/anishathalye/porcupine"

	"github.com/f91dcac0/tributary/engine"
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

// Recorder wraps an *engine.Broker and records every call made through its
// Clients. Make one with NewRecorder.
type Recorder struct {
	b     *engine.Broker
	start time.Time // carries a monotonic reading; every timestamp is time.Since(start)

	// mu guards clients; it is taken only by Client and History, never
	// around a broker call.
	mu      sync.Mutex
	clients []*Client
}

// NewRecorder returns a Recorder of calls to b. b is not owned: calls made
// on b directly are not recorded.
func NewRecorder(b *engine.Broker) *Recorder {
	return &Recorder{b: b, start: time.Now()}
}

// Broker returns the recorded broker.
func (r *Recorder) Broker() *engine.Broker { return r.b }

// now returns nanoseconds since r was made, on the monotonic clock.
func (r *Recorder) now() int64 { return int64(time.Since(r.start)) }

// Client returns a new client, with the next client id (0, 1, 2, …). A
// Client records into its own buffer without locking, so each Client must be
// used by one goroutine at a time; use one per goroutine.
func (r *Recorder) Client() *Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &Client{r: r, id: len(r.clients)}
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

// Client makes recorded calls on the Recorder's broker. Its methods are the
// engine's core calls, with the same arguments and results; each records one
// Op. Not safe for concurrent use.
type Client struct {
	r   *Recorder
	id  int
	ops []Op
}

// ID returns the client's id, as recorded in Op.Client.
func (c *Client) ID() int { return c.id }

// record appends one call, with the clock readings taken immediately before
// the broker call and immediately after it returned.
func (c *Client) record(call, ret int64, in Input, out Output) {
	c.ops = append(c.ops, Op{Client: c.id, Call: call, Return: ret, In: in, Out: out})
}

// Create calls engine.Broker.Create and records it.
func (c *Client) Create(topic string, partitionCount int32) (bool, error) {
	call := c.r.now()
	ok, err := c.r.b.Create(topic, partitionCount)
	ret := c.r.now()
	out := Output{OK: ok}
	out.setErr(err, engine.ErrInvalidArgument)
	c.record(call, ret, Input{Kind: KindCreate, Topic: topic, N: partitionCount}, out)
	return ok, err
}

// Join calls engine.Broker.Join and records it.
func (c *Client) Join(topic, group, member string) ([]int32, error) {
	call := c.r.now()
	parts, err := c.r.b.Join(topic, group, member)
	ret := c.r.now()
	out := Output{Partitions: slices.Clone(parts)}
	out.setErr(err, engine.ErrInvalidArgument)
	c.record(call, ret, Input{Kind: KindJoin, Topic: topic, Group: group, Member: member}, out)
	return parts, err
}

// Leave calls engine.Broker.Leave and records it.
func (c *Client) Leave(topic, group, member string) (bool, error) {
	call := c.r.now()
	ok, err := c.r.b.Leave(topic, group, member)
	ret := c.r.now()
	out := Output{OK: ok}
	out.setErr(err, engine.ErrInvalidArgument)
	c.record(call, ret, Input{Kind: KindLeave, Topic: topic, Group: group, Member: member}, out)
	return ok, err
}

// Publish calls engine.Broker.Publish and records it.
func (c *Client) Publish(topic string, partition int32, payload string) (int64, error) {
	call := c.r.now()
	off, err := c.r.b.Publish(topic, partition, payload)
	ret := c.r.now()
	out := Output{Offset: off}
	out.setErr(err, engine.ErrInvalidArgument)
	c.record(call, ret, Input{Kind: KindPublish, Topic: topic, Partition: partition, Payload: payload}, out)
	return off, err
}

// Poll calls engine.Broker.Poll and records it.
func (c *Client) Poll(topic, group, member string, maxRecords int32) ([]engine.Record, error) {
	call := c.r.now()
	recs, err := c.r.b.Poll(topic, group, member, maxRecords)
	ret := c.r.now()
	var out Output
	for _, r := range recs {
		out.Records = append(out.Records, Record(r))
	}
	out.setErr(err, engine.ErrInvalidArgument)
	c.record(call, ret, Input{Kind: KindPoll, Topic: topic, Group: group, Member: member, N: maxRecords}, out)
	return recs, err
}

// Ack calls engine.Broker.Ack and records it.
func (c *Client) Ack(topic, group, member string, partition int32, offset int64) (bool, error) {
	call := c.r.now()
	ok, err := c.r.b.Ack(topic, group, member, partition, offset)
	ret := c.r.now()
	out := Output{OK: ok}
	out.setErr(err, engine.ErrInvalidArgument)
	c.record(call, ret, Input{Kind: KindAck, Topic: topic, Group: group, Member: member, Partition: partition, Offset: offset}, out)
	return ok, err
}

// Retry calls engine.Broker.Retry and records it.
func (c *Client) Retry(topic, group, member string, partition int32, offset int64) (bool, error) {
	call := c.r.now()
	ok, err := c.r.b.Retry(topic, group, member, partition, offset)
	ret := c.r.now()
	out := Output{OK: ok}
	out.setErr(err, engine.ErrInvalidArgument)
	c.record(call, ret, Input{Kind: KindRetry, Topic: topic, Group: group, Member: member, Partition: partition, Offset: offset}, out)
	return ok, err
}

// operations converts ops to porcupine's form (Input and Output values).
func operations(ops []Op) []porc.Operation {
	out := make([]porc.Operation, len(ops))
	for i, op := range ops {
		out[i] = porc.Operation{ClientId: op.Client, Input: op.In, Call: op.Call, Output: op.Out, Return: op.Return}
	}
	return out
}
