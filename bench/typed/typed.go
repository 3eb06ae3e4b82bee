// Package typed holds the CPU-time families (package cputime) that measure
// the typed library (package tributary) against the engine it runs on,
// through public API only, and against Go channels:
//
//   - TypedRoundTrip, at GOMAXPROCS 1: one goroutine publishes one record,
//     polls it (at most 1) and acks it, per op: a bare channel, the engine's
//     bound handles, the typed library with the String, Bytes and JSON
//     codecs, the engine's handles with json.Marshal and json.Unmarshal
//     of the same value (the JSON codec's floor), and the handles again
//     (calibration: the same loop twice);
//   - ConsumerRun/consumers=N (N = 1, 4, 16), at GOMAXPROCS 1: a topic of 16
//     partitions and one group of N members drained by N goroutines, one op
//     a record consumed: the engine used directly (each goroutine a member:
//     AppendPoll of up to 64, an Ack per record, waiting on the member's and
//     the topic's Ready signals when a poll is empty; a member has at most
//     one record in flight per partition, so a poll returns at most as many
//     records as the member owns partitions) against N typed
//     Consumers in Consumer.Run with a handler that only counts.
//
// cmd/brokerbench -cputime runs them and states the typed library's
// performance goals as paired CPU-time ratios; bench/typed_test.go runs the
// same loops as Go benchmarks.
package typed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/bench"
	"github.com/f91dcac0/tributary/bench/cputime"
	"github.com/f91dcac0/tributary/engine"
)

// Family and loop names.
const (
	FamilyRoundTrip = "TypedRoundTrip"
	// FamilyConsumerRun is the prefix of the consumer families' names,
	// "ConsumerRun/consumers=N".
	FamilyConsumerRun = "ConsumerRun"

	LoopChan       = "chan"               // chan engine.Record: send, receive
	LoopHandle     = "engine-handle"      // TopicHandle.Publish, MemberHandle.AppendPoll(1), MemberHandle.Ack
	LoopString     = "typed-string"       // Producer.TrySend, Consumer.TryPoll(1), Consumer.Ack on a String() topic
	LoopBytes      = "typed-bytes"        // the same on a Bytes() topic
	LoopJSON       = "typed-json"         // the same on a JSON[Record]() topic
	LoopHandleJSON = "engine-handle+json" // LoopHandle with json.Marshal before and json.Unmarshal after
	// LoopHandleJSONSession is LoopHandleJSON on an engine with
	// tributary.DefaultSessionTimeout, the configuration NewCluster gives
	// the typed loops: its poll and ack read the exact clock (SPEC rule 24).
	LoopHandleJSONSession = "engine-handle+json+session"
	// LoopHandleSession is LoopHandle on that engine: what the session
	// timeout alone costs the engine's round trip.
	LoopHandleSession = "engine-handle+session"
	// LoopFloor is LoopHandle plus what the typed calls' result types
	// force on any implementation: TrySend's Message returned by value,
	// and TryPoll's new []Message of one, both filled from the records
	// (no message ID built: a lower bound).
	LoopFloor = "engine-handle+results"
	// LoopCalibration is LoopHandle again, a second instance: its paired
	// ratio to LoopHandle, ideally 1, shows the noise of the run.
	LoopCalibration = "engine-handle-again"

	LoopEngineDirect = "engine-direct" // N goroutines, each a member: AppendPoll(64), Ack per record, Ready when empty
	LoopRun          = "typed-run"     // N Consumers in Consumer.Run, a handler that counts
	// LoopRunFloor is LoopEngineDirect on the typed cluster's engine
	// configuration (DefaultSessionTimeout) plus, per record, what Run's
	// promises force on any implementation: a Message filled from the
	// record (no ID built: a lower bound), handed by value to a handler
	// through a func value, between the two compare-and-swaps that let a
	// cancelled Run abandon a handler that ignores its context.
	LoopRunFloor = "engine-direct+handoff"
)

// ConsumerCounts are the consumer counts of the ConsumerRun families.
var ConsumerCounts = []int{1, 4, 16}

// ConsumerRunName returns the name of the family with n consumers.
func ConsumerRunName(n int) string { return fmt.Sprintf("%s/consumers=%d", FamilyConsumerRun, n) }

// Record is the value of the JSON round trips: a small struct.
type Record struct {
	ID   int
	Name string
}

// record is the JSON round trips' value.
var record = Record{ID: 42, Name: bench.Payload}

// Families returns every family: TypedRoundTrip, then ConsumerRun at each
// of ConsumerCounts.
func Families() []cputime.Family {
	fs := []cputime.Family{{
		Name: FamilyRoundTrip, Unit: "record", Procs: 1, Base: LoopHandle,
		Doc: "one goroutine, one partition, one member: publish, poll(1), ack",
		Loops: []cputime.Loop{
			{Name: LoopChan, Doc: "buffered chan engine.Record: one send, one receive", Start: startChan},
			{Name: LoopHandle, Doc: "engine: TopicHandle.Publish, MemberHandle.AppendPoll(buf, 1) into a reused buffer, MemberHandle.Ack", Start: startHandle(false)},
			{Name: LoopString, Doc: "typed String(): Producer.TrySend (Manual), Consumer.TryPoll(1), Consumer.Ack", Start: startTyped(tributary.String(), bench.Payload, func(v string) bool { return v == bench.Payload })},
			{Name: LoopBytes, Doc: "typed Bytes(): the same with a []byte value", Start: startTyped(tributary.Bytes(), []byte(bench.Payload), func(v []byte) bool { return string(v) == bench.Payload })},
			{Name: LoopJSON, Doc: "typed JSON[Record]() (a two-field struct): the same", Start: startTyped(tributary.JSON[Record](), record, func(v Record) bool { return v == record })},
			{Name: LoopFloor, Doc: "engine-handle plus a tributary.Message[string] filled as TrySend returns it and a new []tributary.Message[string] of one filled from the polled record, as TryPoll returns it (no ID built): a lower bound of the typed String round trip on this API", Start: startFloor},
			{Name: LoopHandleJSON, Doc: "engine-handle with json.Marshal of the same Record before the publish and json.Unmarshal of the polled payload", Start: startHandle(true)},
			{Name: LoopHandleJSONSession, Doc: fmt.Sprintf("engine-handle+json on an engine with a session timeout of %v, as NewCluster configures the typed loops' engine", tributary.DefaultSessionTimeout), Start: startHandle(true, engine.WithSessionTimeout(tributary.DefaultSessionTimeout))},
			{Name: LoopHandleSession, Doc: fmt.Sprintf("engine-handle on an engine with a session timeout of %v: the session's own cost", tributary.DefaultSessionTimeout), Start: startHandle(false, engine.WithSessionTimeout(tributary.DefaultSessionTimeout))},
			{Name: LoopCalibration, Doc: "calibration: engine-handle again, on an engine of its own; its ratio to engine-handle shows the run's noise", Start: startHandle(false)},
		},
	}}
	for _, n := range ConsumerCounts {
		fs = append(fs, cputime.Family{
			Name: ConsumerRunName(n), Unit: "record", Procs: 1,
			Doc: fmt.Sprintf("%d partitions, one group of %d, a record consumed per op (the topic refilled, untimed, between timed drains)", Partitions, n),
			Loops: []cputime.Loop{
				{Name: LoopEngineDirect, Doc: fmt.Sprintf("%d goroutine(s), each a member: AppendPoll(buf, %d), Ack per record; on an empty poll TopicHandle.Ready and MemberHandle.Ready, a second poll, then a wait", n, engine.MaxPollRecords), Start: startEngineDirect(n)},
				{Name: LoopRun, Doc: fmt.Sprintf("%d String() Consumer(s) in Consumer.Run, a handler that counts and returns nil", n), Start: startRun(n)},
				{Name: LoopRunFloor, Doc: fmt.Sprintf("engine-direct with a session timeout of %v, and per record a Message[string] filled from it (no ID) passed by value to a handler func between two compare-and-swaps of a state word: a lower bound of typed-run", tributary.DefaultSessionTimeout), Start: startEngineFloor(n)},
			},
		})
	}
	return fs
}

// errStop reports a failed op and stops m.
func errStop(m *cputime.Meter, format string, args ...any) (int64, error) {
	m.Stop()
	return 0, fmt.Errorf(format, args...)
}

func startChan() (cputime.Instance, error) {
	ch := make(chan engine.Record, bench.Capacity)
	r := engine.Record{Topic: "t", Payload: bench.Payload}
	return cputime.Instance{Run: func(m *cputime.Meter, n int) (int64, error) {
		start := r.Offset
		m.Start()
		for range n {
			ch <- r
			r = <-ch
			r.Offset++
		}
		m.Stop()
		if r.Offset-start != int64(n) {
			return 0, fmt.Errorf("received %d records, want %d", r.Offset-start, n)
		}
		return int64(n), nil
	}}, nil
}

// newHandles returns an engine with opts and topic "t" of partitions
// partitions, and the topic's handle.
func newHandles(partitions int32, opts ...engine.Option) (*engine.Broker, *engine.TopicHandle, error) {
	e, err := engine.New(bench.Capacity, opts...)
	if err != nil {
		return nil, nil, err
	}
	if _, err := e.Create("t", partitions); err != nil {
		return nil, nil, err
	}
	th, err := e.Topic("t")
	return e, th, err
}

// newRoundTrip returns the handles of the round-trip loops on an engine
// with opts: topic "t" of one partition, and member "m" of group "g",
// joined.
func newRoundTrip(opts ...engine.Option) (*engine.TopicHandle, *engine.MemberHandle, error) {
	e, th, err := newHandles(1, opts...)
	if err != nil {
		return nil, nil, err
	}
	if _, err := e.Join("t", "g", "m"); err != nil {
		return nil, nil, err
	}
	mh, err := th.Member("g", "m")
	return th, mh, err
}

// runFunc is the type of cputime.Instance.Run.
type runFunc = func(m *cputime.Meter, n int) (int64, error)

// roundTripInstance is the Instance of a round-trip loop on an engine with
// opts: run makes its Run from newRoundTrip's handles and a poll buffer of
// capacity 1, which the loop owns.
func roundTripInstance(run func(th *engine.TopicHandle, mh *engine.MemberHandle, buf []engine.Record) runFunc, opts ...engine.Option) (cputime.Instance, error) {
	th, mh, err := newRoundTrip(opts...)
	if err != nil {
		return cputime.Instance{}, err
	}
	return cputime.Instance{Run: run(th, mh, make([]engine.Record, 0, 1))}, nil
}

// startHandle is the engine handle round trip on an engine with opts, with
// withJSON the JSON encoding and decoding of record around it.
func startHandle(withJSON bool, opts ...engine.Option) func() (cputime.Instance, error) {
	return func() (cputime.Instance, error) {
		return roundTripInstance(func(th *engine.TopicHandle, mh *engine.MemberHandle, buf []engine.Record) runFunc {
			return func(m *cputime.Meter, n int) (int64, error) {
				m.Start()
				for range n {
					payload := bench.Payload
					if withJSON {
						b, err := json.Marshal(record)
						if err != nil {
							return errStop(m, "json.Marshal: %v", err)
						}
						payload = string(b)
					}
					off, err := th.Publish(0, payload)
					if err != nil || off < 0 {
						return errStop(m, "Publish = %d, %v", off, err)
					}
					buf, err = mh.AppendPoll(buf[:0], 1)
					if err != nil || len(buf) != 1 || buf[0].Offset != off {
						return errStop(m, "AppendPoll = %v, %v; want offset %d", buf, err, off)
					}
					if withJSON {
						var got Record
						if err := json.Unmarshal([]byte(buf[0].Payload), &got); err != nil || got != record {
							return errStop(m, "json.Unmarshal = %+v, %v", got, err)
						}
					}
					if ok, err := mh.Ack(0, off); err != nil || !ok {
						return errStop(m, "Ack(0, %d) = %v, %v", off, ok, err)
					}
				}
				m.Stop()
				return int64(n), nil
			}
		}, opts...)
	}
}

// startFloor is the engine handle round trip plus the results the typed
// String round trip's calls return: TrySend's Message by value and
// TryPoll's new []Message of one, each filled from its record (LoopFloor).
func startFloor() (cputime.Instance, error) {
	return roundTripInstance(func(th *engine.TopicHandle, mh *engine.MemberHandle, buf []engine.Record) runFunc {
		return func(m *cputime.Meter, n int) (int64, error) {
			m.Start()
			for range n {
				off, ts, err := th.PublishStamped(0, engine.Message{Payload: bench.Payload})
				if err != nil || off < 0 {
					return errStop(m, "PublishStamped = %d, %v", off, err)
				}
				sent := floorSent(th.Name(), off, ts)
				buf, err = mh.AppendPoll(buf[:0], 1)
				if err != nil || len(buf) != 1 || buf[0].Offset != sent.Offset {
					return errStop(m, "AppendPoll = %v, %v; want offset %d", buf, err, off)
				}
				ms := floorPolled(&buf[0])
				if len(ms) != 1 || ms[0].Value != bench.Payload {
					return errStop(m, "floorPolled = %+v", ms)
				}
				if ok, err := mh.Ack(0, ms[0].Offset); err != nil || !ok {
					return errStop(m, "Ack(0, %d) = %v, %v", off, ok, err)
				}
			}
			m.Stop()
			return int64(n), nil
		}
	})
}

// floorSent is the Message a TrySend of bench.Payload returns, without
// its ID.
//
//go:noinline
func floorSent(topic string, off int64, ts time.Time) tributary.Message[string] {
	return tributary.Message[string]{Topic: topic, Offset: off, Time: ts, Value: bench.Payload, Payload: bench.Payload}
}

// floorPolled is the []Message a TryPoll(1) returns for r, without its ID.
//
//go:noinline
func floorPolled(r *engine.Record) []tributary.Message[string] {
	ms := make([]tributary.Message[string], 1)
	ms[0] = tributary.Message[string]{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Headers: r.Headers,
		Time: r.Time, Value: r.Payload, Attempt: r.Attempt, Payload: r.Payload}
	return ms
}

// startTyped is the typed round trip of v on a one-partition topic of
// codec; ok checks the polled value.
func startTyped[T any](codec tributary.Codec[T], v T, ok func(T) bool) func() (cputime.Instance, error) {
	return func() (cputime.Instance, error) {
		c, err := tributary.NewCluster(bench.Capacity)
		if err != nil {
			return cputime.Instance{}, err
		}
		fail := func(err error) (cputime.Instance, error) { return cputime.Instance{}, errors.Join(err, c.Close()) }
		t, err := tributary.CreateTopic(c, "t", 1, codec)
		if err != nil {
			return fail(err)
		}
		p, err := tributary.NewProducer[T](c, "p", tributary.Manual())
		if err != nil {
			return fail(err)
		}
		cons, err := tributary.NewConsumer(t, "g", "m")
		if err != nil {
			return fail(err)
		}
		msg := tributary.Message[T]{Value: v}
		return cputime.Instance{Run: func(m *cputime.Meter, n int) (int64, error) {
			m.Start()
			for range n {
				sent, err := p.TrySend(t, msg)
				if err != nil {
					return errStop(m, "TrySend: %v", err)
				}
				ms, err := cons.TryPoll(1)
				if err != nil || len(ms) != 1 || ms[0].Offset != sent.Offset || ms[0].Err != nil || !ok(ms[0].Value) {
					return errStop(m, "TryPoll = %+v, %v; want offset %d", ms, err, sent.Offset)
				}
				if err := cons.Ack(ms[0]); err != nil {
					return errStop(m, "Ack: %v", err)
				}
			}
			m.Stop()
			return int64(n), nil
		}, Stop: c.Close}, nil
	}
}

// Shape of the ConsumerRun families.
const (
	// Partitions is the topic's partition count.
	Partitions = 16
	// CycleRecords is the most records one fill puts in the topic: 900 per
	// partition, under its capacity of bench.Capacity with room for the few
	// records whose acks are still on their way when a drain ends.
	CycleRecords = Partitions * 900
	// drainTimeout fails a drain that handles nothing for this long.
	drainTimeout = time.Minute
)

// drainer is the harness both ConsumerRun loops share: a run fills the topic
// while the consumers are held at a gate, then opens the gate and starts
// the meter, and stops it when the consumers have counted every record.
type drainer struct {
	gate    atomic.Pointer[chan struct{}] // nil: open
	handled atomic.Int64                  // records counted, ever
	target  atomic.Int64                  // handled at which the current drain ends
	done    chan struct{}                 // a signal that handled reached target; buffered 1
	errs    chan error                    // the consumers' errors; buffered
}

func newDrainer(consumers int) *drainer {
	return &drainer{done: make(chan struct{}, 1), errs: make(chan error, consumers)}
}

// pass waits while the gate is shut; false when stop closed first.
func (d *drainer) pass(stop <-chan struct{}) bool {
	if g := d.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-stop:
			return false
		}
	}
	return true
}

// count counts one record handled.
func (d *drainer) count() {
	if d.handled.Add(1) >= d.target.Load() {
		select {
		case d.done <- struct{}{}:
		default:
		}
	}
}

// fail records a consumer's error without blocking.
func (d *drainer) fail(err error) {
	select {
	case d.errs <- err:
	default:
	}
}

// run does n ops: fills of at most CycleRecords records (fill(k) publishes
// k, untimed), each drained inside m's window. It returns the records
// handled inside the windows: n, less any that a consumer already past the
// gate when it shut handled during a fill (at most one poll each, at any
// GOMAXPROCS: the untimed runtime.GC yields to them).
func (d *drainer) run(m *cputime.Meter, n int, fill func(k int) error) (int64, error) {
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	units := int64(0)
	for left := n; left > 0; {
		k := min(left, CycleRecords)
		gate := make(chan struct{})
		d.gate.Store(&gate)
		target := d.target.Load() + int64(k)
		if err := fill(k); err != nil {
			return 0, err
		}
		d.target.Store(target)
		runtime.GC()
		timer.Reset(drainTimeout)
		units += target - d.handled.Load()
		m.Start()
		d.gate.Store(nil)
		close(gate)
		for d.handled.Load() < target {
			select {
			case <-d.done:
			case err := <-d.errs:
				m.Stop()
				return 0, err
			case <-timer.C:
				m.Stop()
				return 0, fmt.Errorf("drain: %d of %d records handled after %v", d.handled.Load()-(target-int64(k)), k, drainTimeout)
			}
		}
		m.Stop()
		left -= k
	}
	return units, nil
}

// memberName returns consumer i's member name; zero-padded, so byte order
// is numeric order.
func memberName(i int) string { return fmt.Sprintf("c%02d", i) }

// startEngineDirect is the engine drained by n member goroutines.
func startEngineDirect(n int) func() (cputime.Instance, error) {
	return startDrained(n, false)
}

// startEngineFloor is LoopRunFloor: startEngineDirect on an engine with
// the typed cluster's session timeout, each record handed off as Run must.
func startEngineFloor(n int) func() (cputime.Instance, error) {
	return startDrained(n, true)
}

// startDrained is the engine drained by n member goroutines, with handoff
// as LoopRunFloor.
func startDrained(n int, handoff bool) func() (cputime.Instance, error) {
	return func() (cputime.Instance, error) {
		var opts []engine.Option
		if handoff {
			opts = append(opts, engine.WithSessionTimeout(tributary.DefaultSessionTimeout))
		}
		e, th, err := newHandles(Partitions, opts...)
		if err != nil {
			return cputime.Instance{}, err
		}
		var members []*engine.MemberHandle
		for i := range n {
			if _, err := e.Join("t", "g", memberName(i)); err != nil {
				return cputime.Instance{}, err
			}
			mh, err := th.Member("g", memberName(i))
			if err != nil {
				return cputime.Instance{}, err
			}
			members = append(members, mh)
		}
		d := newDrainer(n)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, mh := range members {
			wg.Go(func() { drainMember(d, th, mh, stop, handoff) })
		}
		next := 0
		fill := func(k int) error {
			for range k {
				p := int32(next % Partitions)
				next++
				if off, err := th.Publish(p, bench.Payload); err != nil || off < 0 {
					return fmt.Errorf("fill: Publish(%d) = %d, %v", p, off, err)
				}
			}
			return nil
		}
		return cputime.Instance{
			Run:  func(m *cputime.Meter, ops int) (int64, error) { return d.run(m, ops, fill) },
			Stop: func() error { close(stop); wg.Wait(); return nil },
		}, nil
	}
}

// handOff hands r to h as a Message, as Run does, between the two
// compare-and-swaps of its state word (0 idle, 1 handling).
func handOff(ctx context.Context, state *atomic.Int32, h tributary.Handler[string], r *engine.Record) error {
	m := tributary.Message[string]{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Headers: r.Headers,
		Time: r.Time, Value: r.Payload, Attempt: r.Attempt, Payload: r.Payload}
	if !state.CompareAndSwap(0, 1) {
		return errors.New("handOff: not idle")
	}
	err := h(ctx, m)
	if !state.CompareAndSwap(1, 0) {
		return errors.New("handOff: not handling")
	}
	return err
}

// drainMember is one engine-direct goroutine: past the gate, it polls up to
// engine.MaxPollRecords into its buffer and acks each record. On an empty
// poll it takes the topic's and the member's Ready signals, polls again (a
// record published or released in between is then not missed) and, still
// empty, waits for either. Taking the signals only when a poll came back
// empty keeps the busy path free of them: every Ack closes a taken group
// signal, and taking a fresh one after that allocates it.
//
// With handoff (LoopRunFloor) each record is first handed to a handler as
// a Message between two compare-and-swaps of a state word (handOff).
func drainMember(d *drainer, th *engine.TopicHandle, mh *engine.MemberHandle, stop <-chan struct{}, handoff bool) {
	buf := make([]engine.Record, 0, engine.MaxPollRecords)
	var state atomic.Int32
	handler := func(_ context.Context, m tributary.Message[string]) error {
		if m.Value != bench.Payload {
			return fmt.Errorf("handler: value %q", m.Value)
		}
		return nil
	}
	ctx := context.Background()
	for d.pass(stop) {
		var err error
		buf, err = mh.AppendPoll(buf[:0], engine.MaxPollRecords)
		if err == nil && len(buf) == 0 {
			tr, mr := th.Ready(), mh.Ready()
			if buf, err = mh.AppendPoll(buf[:0], engine.MaxPollRecords); err == nil && len(buf) == 0 {
				select {
				case <-tr:
				case <-mr:
				case <-stop:
					return
				}
				continue
			}
		}
		if err != nil {
			d.fail(fmt.Errorf("%s: AppendPoll: %w", mh.Member(), err))
			return
		}
		for i := range buf {
			r := &buf[i]
			if handoff {
				if err := handOff(ctx, &state, handler, r); err != nil {
					d.fail(err)
					return
				}
			}
			if ok, err := mh.Ack(r.Partition, r.Offset); err != nil || !ok {
				d.fail(fmt.Errorf("%s: Ack(%d, %d) = %v, %v", mh.Member(), r.Partition, r.Offset, ok, err))
				return
			}
			d.count()
		}
	}
}

// startRun is the typed topic drained by n Consumers in Run.
func startRun(n int) func() (cputime.Instance, error) {
	return func() (cputime.Instance, error) {
		c, err := tributary.NewCluster(bench.Capacity)
		if err != nil {
			return cputime.Instance{}, err
		}
		fail := func(err error) (cputime.Instance, error) { return cputime.Instance{}, errors.Join(err, c.Close()) }
		t, err := tributary.CreateTopic(c, "t", Partitions, tributary.String())
		if err != nil {
			return fail(err)
		}
		p, err := tributary.NewProducer[string](c, "p", tributary.Manual())
		if err != nil {
			return fail(err)
		}
		var consumers []*tributary.Consumer[string]
		for i := range n {
			cons, err := tributary.NewConsumer(t, "g", memberName(i))
			if err != nil {
				return fail(err)
			}
			consumers = append(consumers, cons)
		}
		d := newDrainer(n)
		ctx, cancel := context.WithCancel(context.Background())
		handler := func(ctx context.Context, _ tributary.Message[string]) error {
			if !d.pass(ctx.Done()) {
				return ctx.Err()
			}
			d.count()
			return nil
		}
		var wg sync.WaitGroup
		for _, cons := range consumers {
			wg.Go(func() {
				if err := cons.Run(ctx, handler); err != nil && !errors.Is(err, context.Canceled) {
					d.fail(fmt.Errorf("%s: Run: %w", cons.Name(), err))
				}
			})
		}
		next := 0
		fill := func(k int) error {
			for range k {
				msg := tributary.Message[string]{Value: bench.Payload, Partition: int32(next % Partitions)}
				next++
				if _, err := p.Send(ctx, t, msg); err != nil {
					return fmt.Errorf("fill: Send: %w", err)
				}
			}
			return nil
		}
		return cputime.Instance{
			Run: func(m *cputime.Meter, ops int) (int64, error) { return d.run(m, ops, fill) },
			Stop: func() error {
				cancel()
				wg.Wait()
				return c.Close()
			},
		}, nil
	}
}
