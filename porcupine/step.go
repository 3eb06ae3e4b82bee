package porcupine

import (
	"errors"
	"fmt"
	"time"

	porc "github.com/anishathalye/porcupine"

	"github.com/f91dcac0/tributary/model"
)

// HistoryVersion is the history format Run writes. Version 0 (the field
// absent) is the format before the Tributary features: core calls only,
// polled records without attempt counts. Version 1 records every call of
// Kinds, and each polled record's key, headers and Attempt (and its Time
// under a test clock). A version 0 history is checked as it was recorded:
// the model's attempt counts are left out of the comparison.
const HistoryVersion = 1

// Config is what checking a history needs besides its calls: the broker it
// ran on and the history's format. A History carries it (its fields appear
// at the top level of a fixture's JSON).
type Config struct {
	Capacity int32   `json:"capacity"`          // records each partition retains, as given to engine.New (above 1000 with WithExtendedCapacity)
	Options  Options `json:"options,omitzero"`  // the broker's options
	Version  int     `json:"version,omitempty"` // the history format: 0 or HistoryVersion
}

// Options are the broker options of a workload (engine.WithReplayWindow,
// WithAckTimeout, WithMaxMessageBytes, WithSessionTimeout and, for
// TestClock, WithClock). The
// zero Options is engine.New's default.
type Options struct {
	// ReplayWindow is engine.WithReplayWindow's argument, in records
	// (0..capacity); 0 is the default, no window.
	ReplayWindow int32 `json:"replay_window,omitempty"`
	// AckTimeout is engine.WithAckTimeout's argument; 0 is the default, no
	// timeout. A timeout needs TestClock.
	AckTimeout time.Duration `json:"ack_timeout,omitempty"`
	// MaxMessageBytes is engine.WithMaxMessageBytes's argument; 0 is the
	// default, no limit.
	MaxMessageBytes int `json:"max_message_bytes,omitempty"`
	// SessionTimeout is engine.WithSessionTimeout's argument (SPEC rule
	// 24); 0 is the default, members never expire. A timeout needs
	// TestClock.
	SessionTimeout time.Duration `json:"session_timeout,omitempty"`
	// TestClock says the broker clock was a TestClock, one per topic (and
	// so one broker per topic; see the package doc), moved only by recorded
	// Advance calls. Then record times are recorded and compared; without
	// it they are left out.
	TestClock bool `json:"test_clock,omitempty"`
}

// Option is one field of Options at a value other than its default:
// Field is the field's name ("ReplayWindow", "AckTimeout",
// "MaxMessageBytes", "SessionTimeout", "TestClock") and Value its value
// (an int32, a time.Duration, an int, a time.Duration, true).
type Option struct {
	Field string
	Value any
}

// NonDefault lists the options of o that are not at their default (the
// zero value), in the order of Options's fields: what a description of
// the workload, or a command line that reruns it, must name.
func (o Options) NonDefault() []Option {
	var out []Option
	add := func(field string, v any, set bool) {
		if set {
			out = append(out, Option{field, v})
		}
	}
	add("ReplayWindow", o.ReplayWindow, o.ReplayWindow != 0)
	add("AckTimeout", o.AckTimeout, o.AckTimeout != 0)
	add("MaxMessageBytes", o.MaxMessageBytes, o.MaxMessageBytes != 0)
	add("SessionTimeout", o.SessionTimeout, o.SessionTimeout != 0)
	add("TestClock", true, o.TestClock)
	return out
}

// Check returns an error for options the model cannot check: a negative
// value, a replay window above capacity, or an ack or session timeout
// without a test clock (the model could not know the broker's time).
func (c Config) Check() error {
	o := c.Options
	switch {
	case c.Capacity < model.MinCapacity || c.Capacity > model.MaxExtendedCapacity:
		return fmt.Errorf("porcupine: capacity %d outside [%d,%d]", c.Capacity, model.MinCapacity, model.MaxExtendedCapacity)
	case o.ReplayWindow < 0 || o.ReplayWindow > c.Capacity:
		return fmt.Errorf("porcupine: replay window %d outside [0,%d] (the capacity)", o.ReplayWindow, c.Capacity)
	case o.AckTimeout < 0 || o.MaxMessageBytes < 0 || o.SessionTimeout < 0:
		return errors.New("porcupine: negative ack timeout, max message bytes or session timeout")
	case o.AckTimeout > 0 && !o.TestClock:
		return errors.New("porcupine: an ack timeout needs the test clock")
	case o.SessionTimeout > 0 && !o.TestClock:
		return errors.New("porcupine: a session timeout needs the test clock")
	case c.Version < 0 || c.Version > HistoryVersion:
		return fmt.Errorf("porcupine: history version %d, want 0..%d", c.Version, HistoryVersion)
	}
	return nil
}

// Epoch is the reading of every topic's TestClock before its first Advance.
var Epoch = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

// zeroClock is the model's clock in a history without a test clock: record
// times are not recorded there, so the model leaves them zero.
func zeroClock() time.Time { return time.Time{} }

// clockAt returns a clock that always reads Epoch + now.
func clockAt(now time.Duration) func() time.Time {
	t := Epoch.Add(now)
	return func() time.Time { return t }
}

// state is the model's state: the sequential broker and, in a test-clock
// history, the clock's reading. States are immutable once Step returns
// them; they may share their *model.Broker (Advance changes only now).
type state struct {
	b   *model.Broker
	now time.Duration // the test clock's reading, since Epoch; 0 without a test clock
}

// Model returns the porcupine model of a broker configured as c. Operations
// carry an Input and an Output; the state is a *model.Broker and, with a
// test clock, the clock's reading. Step clones the broker before applying a
// call (it never mutates the state it is given; states are shared by the
// checker's cache) and binds the clone's clock to the state's reading;
// Advance moves the reading. Partition and PartitionEvent split a history by
// topic (see the package doc for why that is sound). Equal and Hash are
// model.Equal and model.Hash plus the clock reading. DescribeOperation and
// DescribeState write the text the HTML visualization shows. It panics if
// c.Check fails.
func Model(c Config) porc.Model {
	if err := c.Check(); err != nil {
		panic(err)
	}
	return porc.Model{
		Partition:      partitionOps,
		PartitionEvent: partitionEvents,
		Init: func() interface{} {
			b, err := model.New(c.Capacity, c.modelOptions()...)
			if err != nil {
				panic(fmt.Sprintf("porcupine: Model(%+v): %v", c, err))
			}
			return &state{b: b}
		},
		Step: func(st, input, output interface{}) (bool, interface{}) {
			return c.step(st.(*state), input.(Input), output.(Output))
		},
		Equal: func(a, b interface{}) bool {
			x, y := a.(*state), b.(*state)
			return x.now == y.now && x.b.Equal(y.b)
		},
		Hash: func(st interface{}) uint64 {
			s := st.(*state)
			return s.b.Hash() ^ uint64(s.now)*0x9e3779b97f4a7c15
		},
		DescribeOperation: func(input, output interface{}) string {
			return Describe(input.(Input), output.(Output))
		},
		DescribeState: describeState,
	}
}

// modelOptions returns the model's options for c; the clock reads Epoch
// (rebound by step) with a test clock, the zero time without.
func (c Config) modelOptions() []model.Option {
	clock := zeroClock
	if c.Options.TestClock {
		clock = clockAt(0)
	}
	opts := []model.Option{model.WithReplayWindow(c.Options.ReplayWindow), model.WithClock(clock)}
	if c.Options.AckTimeout > 0 {
		opts = append(opts, model.WithAckTimeout(c.Options.AckTimeout))
	}
	if c.Options.MaxMessageBytes > 0 {
		opts = append(opts, model.WithMaxMessageBytes(c.Options.MaxMessageBytes))
	}
	if c.Options.SessionTimeout > 0 {
		opts = append(opts, model.WithSessionTimeout(c.Options.SessionTimeout))
	}
	if c.Capacity > model.MaxCapacity {
		opts = append(opts, model.WithExtendedCapacity())
	}
	return opts
}

// step is Model's Step.
func (c Config) step(s *state, in Input, out Output) (bool, interface{}) {
	if in.Kind == KindAdvance {
		if !c.Options.TestClock || in.Advance < 0 || !out.Equal(Output{Now: s.now + in.Advance}) {
			return false, s
		}
		return true, &state{b: s.b, now: s.now + in.Advance}
	}
	if impossible(c, s.b, in, out) {
		return false, s
	}
	next := &state{b: s.b.Clone(), now: s.now}
	if c.Options.TestClock {
		next.b.SetClock(clockAt(s.now))
	}
	want := Apply(next.b, in)
	c.normalize(&want)
	return want.Equal(out), next
}

// normalize removes from a model result what c's histories do not record:
// record times without a test clock; in version 0, attempts and every
// result beside an error (the engine then returned offset 0 with a failed
// Publish, where it now returns -1 as the model does).
func (c Config) normalize(out *Output) {
	if c.Version == 0 && out.Err != ErrNone {
		*out = Output{Err: out.Err, ErrText: out.ErrText}
	}
	for i := range out.Records {
		if !c.Options.TestClock {
			out.Records[i].Time = time.Time{}
		}
		if c.Version == 0 {
			out.Records[i].Attempt = 0
		}
	}
}

// impossible reports whether the model in state s certainly does not return
// out for in, judging from a few read-only inspections. It is a fast path
// for the checker, which tries most calls at many points where they do not
// fit: a true answer saves Step a Clone. It must never return true where
// Apply would return out (TestImpossibleIsSound checks this on random
// states); false is always safe, since Step then runs the model.
func impossible(c Config, s *model.Broker, in Input, out Output) bool {
	if out.Err != ErrNone {
		return false
	}
	switch in.Kind {
	case KindPublish, KindPublishMessage:
		start, err1 := s.LogStartOffset(in.Topic, in.Partition)
		end, err2 := s.LogEndOffset(in.Topic, in.Partition)
		if err1 != nil || err2 != nil {
			return false
		}
		full := end-start >= int64(s.Capacity())
		if full && c.Options.ReplayWindow > 0 {
			return out.Offset != -1 && out.Offset != end // the window may make room
		}
		return full != (out.Offset == -1) || (!full && out.Offset != end)
	case KindPoll, KindPollPartition:
		for _, r := range out.Records {
			committed, err1 := s.Committed(in.Topic, in.Group, r.Partition)
			inFlight, err2 := s.InFlight(in.Topic, in.Group, r.Partition)
			attempts, err3 := s.Attempts(in.Topic, in.Group, r.Partition)
			if err1 != nil || err2 != nil || err3 != nil {
				return false
			}
			// An in-flight delivery may still be delivered under an ack
			// timeout, or once the poll's own expiry (a session timeout)
			// has cancelled it; expiry never moves a committed offset nor
			// changes attempts.
			if committed != r.Offset || inFlight && c.Options.AckTimeout == 0 && c.Options.SessionTimeout == 0 ||
				c.Version > 0 && r.Attempt != attempts+1 {
				return true
			}
		}
	case KindAck, KindRetry:
		// Expiry (rule 24) can only cancel a delivery, never make one.
		if !out.OK {
			return false
		}
		committed, err1 := s.Committed(in.Topic, in.Group, in.Partition)
		inFlight, err2 := s.InFlight(in.Topic, in.Group, in.Partition)
		return err1 == nil && err2 == nil && (!inFlight || committed != in.Offset)
	case KindDescribe:
		n, err := s.PartitionCount(in.Topic)
		return err == nil && (out.Desc == nil || len(out.Desc.Partitions) != int(n))
	}
	return false
}

// partitionOps splits a history by Input.Topic, keeping each topic's
// operations in their original order; topics appear in order of first use.
func partitionOps(h []porc.Operation) [][]porc.Operation {
	index := map[string]int{}
	var out [][]porc.Operation
	for _, op := range h {
		topic := op.Input.(Input).Topic
		i, ok := index[topic]
		if !ok {
			i = len(out)
			index[topic] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

// partitionEvents splits an event history by topic: a call event by its
// Input's topic, a return event with the call event of the same Id.
func partitionEvents(h []porc.Event) [][]porc.Event {
	index := map[string]int{}
	byID := map[int]int{}
	var out [][]porc.Event
	for _, ev := range h {
		var i int
		if ev.Kind == porc.CallEvent {
			topic := ev.Value.(Input).Topic
			var ok bool
			if i, ok = index[topic]; !ok {
				i = len(out)
				index[topic] = i
				out = append(out, nil)
			}
			byID[ev.Id] = i
		} else {
			var ok bool
			if i, ok = byID[ev.Id]; !ok {
				panic(fmt.Sprintf("porcupine: return event %d before its call", ev.Id))
			}
		}
		out[i] = append(out[i], ev)
	}
	return out
}
