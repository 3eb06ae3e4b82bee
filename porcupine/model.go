package porcupine

import (
	"errors"
	"fmt"
	"html"
	"slices"
	"strconv"
	"strings"

	porc "github.com/anishathalye/porcupine"

	"github.com/f91dcac0/tributary/model"
)

// Kind names one of the seven core calls (SPEC section 1).
type Kind uint8

// The core calls. The zero Kind is invalid.
const (
	KindCreate Kind = iota + 1
	KindJoin
	KindLeave
	KindPublish
	KindPoll
	KindAck
	KindRetry
)

var kindNames = [...]string{"", "Create", "Join", "Leave", "Publish", "Poll", "Ack", "Retry"}

// String returns the method's name, e.g. "Poll".
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes k as its method name.
func (k Kind) MarshalText() ([]byte, error) {
	if k == 0 || int(k) >= len(kindNames) {
		return nil, fmt.Errorf("porcupine: invalid Kind %d", uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText decodes a method name written by MarshalText.
func (k *Kind) UnmarshalText(b []byte) error {
	i := slices.Index(kindNames[:], string(b))
	if i < 1 {
		return fmt.Errorf("porcupine: unknown call %q", b)
	}
	*k = Kind(i)
	return nil
}

// Input is one core call's arguments. Fields a call does not take are zero.
type Input struct {
	Kind      Kind   `json:"kind"`
	Topic     string `json:"topic"`
	Group     string `json:"group,omitempty"`
	Member    string `json:"member,omitempty"`
	Partition int32  `json:"partition,omitempty"` // Publish, Ack, Retry
	Offset    int64  `json:"offset,omitempty"`    // Ack, Retry
	N         int32  `json:"n,omitempty"`         // Create: partitionCount; Poll: maxRecords
	Payload   string `json:"payload,omitempty"`   // Publish
}

// Record is one polled record, a copy of engine.Record or model.Record.
type Record struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Payload   string `json:"payload"`
}

// Output is one core call's results, reduced to what the engine and the
// model share. Errors compare by kind only: Invalid is errors.Is(err,
// ErrInvalidArgument); any other error (the contract has none) keeps its
// text in Err and never matches the model. Nil and empty slices are equal.
type Output struct {
	Invalid    bool     `json:"invalid,omitempty"`
	Err        string   `json:"err,omitempty"`
	OK         bool     `json:"ok,omitempty"`         // Create, Leave, Ack, Retry
	Offset     int64    `json:"offset,omitempty"`     // Publish: the offset, or -1 when full
	Partitions []int32  `json:"partitions,omitempty"` // Join
	Records    []Record `json:"records,omitempty"`    // Poll
}

// Equal reports whether o and p are the same result.
func (o Output) Equal(p Output) bool {
	return o.Invalid == p.Invalid && o.Err == p.Err && o.OK == p.OK && o.Offset == p.Offset &&
		slices.Equal(o.Partitions, p.Partitions) && slices.Equal(o.Records, p.Records)
}

// setErr fills Invalid or Err from a call's error; invalid is the sentinel
// of the implementation that returned err.
func (o *Output) setErr(err, invalid error) {
	switch {
	case err == nil:
	case errors.Is(err, invalid):
		o.Invalid = true
	default:
		o.Err = err.Error()
	}
}

// Apply runs in on the sequential model b (mutating it) and returns its
// result.
func Apply(b *model.Broker, in Input) Output {
	var (
		out Output
		err error
	)
	switch in.Kind {
	case KindCreate:
		out.OK, err = b.Create(in.Topic, in.N)
	case KindJoin:
		out.Partitions, err = b.Join(in.Topic, in.Group, in.Member)
	case KindLeave:
		out.OK, err = b.Leave(in.Topic, in.Group, in.Member)
	case KindPublish:
		out.Offset, err = b.Publish(in.Topic, in.Partition, in.Payload)
	case KindPoll:
		var recs []model.Record
		recs, err = b.Poll(in.Topic, in.Group, in.Member, in.N)
		for _, r := range recs {
			out.Records = append(out.Records, Record(r))
		}
	case KindAck:
		out.OK, err = b.Ack(in.Topic, in.Group, in.Member, in.Partition, in.Offset)
	case KindRetry:
		out.OK, err = b.Retry(in.Topic, in.Group, in.Member, in.Partition, in.Offset)
	default:
		panic(fmt.Sprintf("porcupine: Apply: invalid Kind %d", in.Kind))
	}
	out.setErr(err, model.ErrInvalidArgument)
	return out
}

// Model returns the porcupine model of a broker whose partitions retain
// capacityPerPartition records. Operations carry an Input and an Output;
// the state is a *model.Broker, which Step clones before applying a call
// (it never mutates the state it is given; states are shared by the
// checker's cache). Partition and PartitionEvent split a history by topic
// (see the package doc for why that is sound). Equal is model.Equal and Hash
// is model.Hash. DescribeOperation and DescribeState write the text the HTML
// visualization shows.
func Model(capacityPerPartition int32) porc.Model {
	return porc.Model{
		Partition:      partitionOps,
		PartitionEvent: partitionEvents,
		Init: func() interface{} {
			b, err := model.New(capacityPerPartition)
			if err != nil {
				panic(fmt.Sprintf("porcupine: Model(%d): %v", capacityPerPartition, err))
			}
			return b
		},
		Step: func(state, input, output interface{}) (bool, interface{}) {
			s, in, out := state.(*model.Broker), input.(Input), output.(Output)
			if impossible(s, in, out) {
				return false, state
			}
			next := s.Clone()
			return Apply(next, in).Equal(out), next
		},
		Equal: func(a, b interface{}) bool {
			return a.(*model.Broker).Equal(b.(*model.Broker))
		},
		Hash: func(state interface{}) uint64 {
			return state.(*model.Broker).Hash()
		},
		DescribeOperation: func(input, output interface{}) string {
			return Describe(input.(Input), output.(Output))
		},
		DescribeState: describeState,
	}
}

// impossible reports whether the model in state s certainly does not return
// out for in, judging from a few read-only inspections. It is a fast path
// for the checker, which tries most calls at many points where they do not
// fit: a true answer saves Step a Clone. It must never return true where
// Apply would return out (TestImpossibleIsSound checks this on random
// states); false is always safe, since Step then runs the model.
func impossible(s *model.Broker, in Input, out Output) bool {
	if out.Invalid || out.Err != "" {
		return false
	}
	switch in.Kind {
	case KindPublish:
		start, err1 := s.LogStartOffset(in.Topic, in.Partition)
		end, err2 := s.LogEndOffset(in.Topic, in.Partition)
		if err1 != nil || err2 != nil {
			return false
		}
		full := end-start >= int64(s.Capacity())
		return full != (out.Offset == -1) || (!full && out.Offset != end)
	case KindPoll:
		for _, r := range out.Records {
			committed, err1 := s.Committed(in.Topic, in.Group, r.Partition)
			inFlight, err2 := s.InFlight(in.Topic, in.Group, r.Partition)
			if err1 != nil || err2 != nil {
				return false
			}
			if inFlight || committed != r.Offset {
				return true
			}
		}
	case KindAck, KindRetry:
		if !out.OK {
			return false
		}
		committed, err1 := s.Committed(in.Topic, in.Group, in.Partition)
		inFlight, err2 := s.InFlight(in.Topic, in.Group, in.Partition)
		return err1 == nil && err2 == nil && (!inFlight || committed != in.Offset)
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

// Describe renders one call and its result on one line, the way the HTML
// visualization labels an operation, e.g.
//
//	Poll(g0 m1 max=4) → p0@3 "c1.2", p2@1 "c0.5"
//	Ack(g0 m1 p0@3) → true
//	Publish(p1 "c3.7") → -1 full
//
// The topic is shown only for Create: a visualization shows one topic per
// partition of the history.
func Describe(in Input, out Output) string {
	var args string
	g, m := showID(in.Group), showID(in.Member)
	switch in.Kind {
	case KindCreate:
		args = fmt.Sprintf("%s, %d", showID(in.Topic), in.N)
	case KindJoin, KindLeave:
		args = g + " " + m
	case KindPublish:
		args = fmt.Sprintf("p%d %q", in.Partition, in.Payload)
	case KindPoll:
		args = fmt.Sprintf("%s %s max=%d", g, m, in.N)
	case KindAck, KindRetry:
		args = fmt.Sprintf("%s %s p%d@%d", g, m, in.Partition, in.Offset)
	}
	var res string
	switch {
	case out.Invalid:
		res = "invalid"
	case out.Err != "":
		res = "error: " + out.Err
	case in.Kind == KindJoin:
		res = fmt.Sprint(out.Partitions)
		if out.Partitions == nil {
			res = "[]"
		}
	case in.Kind == KindPublish:
		res = strconv.FormatInt(out.Offset, 10)
		if out.Offset < 0 {
			res += " full"
		}
	case in.Kind == KindPoll:
		if len(out.Records) == 0 {
			res = "none"
		}
		for i, r := range out.Records {
			if i > 0 {
				res += ", "
			}
			res += fmt.Sprintf("p%d@%d %q", r.Partition, r.Offset, r.Payload)
		}
	default:
		res = strconv.FormatBool(out.OK)
	}
	return fmt.Sprintf("%v(%s) → %s", in.Kind, args, res)
}

// describeState renders model.Broker.String as HTML (porcupine inserts the
// state description into the page as markup): escaped, one line per row.
func describeState(state interface{}) string {
	s := html.EscapeString(strings.TrimSuffix(state.(*model.Broker).String(), "\n"))
	s = strings.ReplaceAll(s, "  ", "&nbsp;&nbsp;")
	return strings.ReplaceAll(s, "\n", "<br>")
}

// showID prints an identifier bare when it is a plain word, and quoted when
// it is empty or holds anything else, so that invalid ids stand out.
func showID(id string) string {
	if id == "" {
		return `""`
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return strconv.Quote(id)
		}
	}
	return id
}
