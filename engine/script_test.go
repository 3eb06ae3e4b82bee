package engine_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/model"
)

// This file holds the small builders the rule tests are written in: a broker
// call as data (step), what it returned (result), scripts of calls with
// expected outcomes (line, play), and a probe that reads a broker's whole
// observable state through further calls, for "an invalid call changes
// nothing" checks on twin brokers. It also holds what the tests that run
// the engine beside the model share (both run on one internal/testclock
// clock): a model record as an engine record (engineRecord), and the
// comparison of records on every field, Time as an instant (sameRecord).

// step is one broker call written as data, so that a script can be replayed
// on twin brokers and named in failure messages.
type step struct {
	Op        string // create, join, leave, publish, poll, ack, retry
	Topic     string
	Group     string
	Member    string
	Partition int32
	Offset    int64
	N         int32 // create: partitionCount; poll: maxRecords
	Payload   string
}

func create(topic string, partitionCount int32) step {
	return step{Op: "create", Topic: topic, N: partitionCount}
}

func join(topic, group, member string) step {
	return step{Op: "join", Topic: topic, Group: group, Member: member}
}

func leave(topic, group, member string) step {
	return step{Op: "leave", Topic: topic, Group: group, Member: member}
}

func publish(topic string, partition int32, payload string) step {
	return step{Op: "publish", Topic: topic, Partition: partition, Payload: payload}
}

func poll(topic, group, member string, maxRecords int32) step {
	return step{Op: "poll", Topic: topic, Group: group, Member: member, N: maxRecords}
}

func ack(topic, group, member string, partition int32, offset int64) step {
	return step{Op: "ack", Topic: topic, Group: group, Member: member, Partition: partition, Offset: offset}
}

func retry(topic, group, member string, partition int32, offset int64) step {
	return step{Op: "retry", Topic: topic, Group: group, Member: member, Partition: partition, Offset: offset}
}

func (s step) String() string {
	switch s.Op {
	case "create":
		return fmt.Sprintf("Create(%q, %d)", s.Topic, s.N)
	case "join", "leave":
		return fmt.Sprintf("%s(%q, %q, %q)", s.Op, s.Topic, s.Group, s.Member)
	case "publish":
		return fmt.Sprintf("Publish(%q, %d, %q)", s.Topic, s.Partition, s.Payload)
	case "poll":
		return fmt.Sprintf("Poll(%q, %q, %q, %d)", s.Topic, s.Group, s.Member, s.N)
	default:
		return fmt.Sprintf("%s(%q, %q, %q, %d, %d)", s.Op, s.Topic, s.Group, s.Member, s.Partition, s.Offset)
	}
}

// result is what a call returned. Only the field of the call's result type
// is set; an error replaces the whole result.
type result struct {
	Invalid bool            // the error wraps engine.ErrInvalidArgument
	Err     string          // any other error
	OK      bool            // Create, Leave, Ack, Retry
	Offset  int64           // Publish
	Parts   []int32         // Join
	Records []engine.Record // Poll, reduced to the core fields (coreRecords)
	// Attempts is Poll's Record.Attempt per record (SPEC rule 16). apply
	// always sets it; an expectation checks it only when it sets it (with
	// tries), so that the scripts of rules 1–14 need not spell it out.
	Attempts []int32
}

var (
	isTrue    = result{OK: true}
	isFalse   = result{}
	isInvalid = result{Invalid: true}
)

// tries returns r expecting the given Record.Attempt of each polled record,
// in order.
func (r result) tries(attempts ...int32) result {
	if attempts == nil {
		attempts = []int32{}
	}
	r.Attempts = attempts
	return r
}

// sameResult compares got with want for a script: every field, but
// Attempts only when want sets it.
func sameResult(want, got result) string {
	if want.Attempts == nil {
		got.Attempts = nil
	}
	return cmp.Diff(want, got)
}

func atOffset(off int64) result { return result{Offset: off} }

// owns is a Join result; with no arguments, the empty, non-nil slice.
func owns(partitions ...int32) result {
	if partitions == nil {
		partitions = []int32{}
	}
	return result{Parts: partitions}
}

// delivers is a Poll result; with no arguments, the empty, non-nil slice.
func delivers(records ...engine.Record) result {
	if records == nil {
		records = []engine.Record{}
	}
	return result{Records: records}
}

// coreRecords returns recs reduced to the core API's four fields (Topic,
// Partition, Offset, Payload), for comparisons with rec; the features of
// rules 15–23 (key, headers, time, attempt) are checked by their
// own tests.
func coreRecords(recs []engine.Record) []engine.Record {
	if recs == nil {
		return nil
	}
	out := make([]engine.Record, len(recs))
	for i, r := range recs {
		out[i] = engine.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Payload: r.Payload}
	}
	return out
}

// engineRecord is a model record as an engine record, every field kept.
func engineRecord(r model.Record) engine.Record {
	out := engine.Record{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Payload: r.Payload,
		Key: r.Key, Time: r.Time, Attempt: r.Attempt,
	}
	if r.Headers != nil {
		out.Headers = make([]engine.Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = engine.Header{Key: h.Key, Value: h.Value}
		}
	}
	return out
}

// sameRecord reports whether a and b are the same record on every field:
// the core four, Key, Headers (nil and empty differ), Time as an instant
// (time.Time.Equal) and Attempt.
func sameRecord(a, b engine.Record) bool {
	return a.Topic == b.Topic && a.Partition == b.Partition && a.Offset == b.Offset &&
		a.Payload == b.Payload && a.Key == b.Key && a.Attempt == b.Attempt &&
		a.Time.Equal(b.Time) && (a.Headers == nil) == (b.Headers == nil) && slices.Equal(a.Headers, b.Headers)
}

// sameRecords is sameRecord over two slices, which must also agree on
// being nil.
func sameRecords(a, b []engine.Record) bool {
	return (a == nil) == (b == nil) && slices.EqualFunc(a, b, sameRecord)
}

// requireAttempts requires recs' Record.Attempt values to be want, in order.
func requireAttempts(t testing.TB, recs []engine.Record, want ...int32) {
	t.Helper()
	got := make([]int32, len(recs))
	for i, r := range recs {
		got[i] = r.Attempt
	}
	require.Equal(t, want, got, "Record.Attempt of each record")
}

func rec(topic string, partition int32, offset int64, payload string) engine.Record {
	return engine.Record{Topic: topic, Partition: partition, Offset: offset, Payload: payload}
}

func (s step) apply(b *engine.Broker) result {
	var (
		o   result
		err error
	)
	switch s.Op {
	case "create":
		o.OK, err = b.Create(s.Topic, s.N)
	case "join":
		o.Parts, err = b.Join(s.Topic, s.Group, s.Member)
	case "leave":
		o.OK, err = b.Leave(s.Topic, s.Group, s.Member)
	case "publish":
		o.Offset, err = b.Publish(s.Topic, s.Partition, s.Payload)
	case "poll":
		o.Records, err = b.Poll(s.Topic, s.Group, s.Member, s.N)
		if o.Records != nil {
			o.Attempts = make([]int32, len(o.Records))
			for i, r := range o.Records {
				o.Attempts[i] = r.Attempt
			}
		}
		o.Records = coreRecords(o.Records)
	case "ack":
		o.OK, err = b.Ack(s.Topic, s.Group, s.Member, s.Partition, s.Offset)
	case "retry":
		o.OK, err = b.Retry(s.Topic, s.Group, s.Member, s.Partition, s.Offset)
	default:
		panic("unknown op " + s.Op)
	}
	if err != nil {
		if errors.Is(err, engine.ErrInvalidArgument) {
			return isInvalid
		}
		return result{Err: err.Error()}
	}
	return o
}

// line is one call of a script and the result it must have.
type line struct {
	call step
	want result
}

// play runs lines in order on b, failing at the first unexpected result.
func play(t *testing.T, b *engine.Broker, lines []line) {
	t.Helper()
	for i, l := range lines {
		got := l.call.apply(b)
		require.Empty(t, sameResult(l.want, got), "line %d: %v (-want +got)", i, l.call)
	}
}

func newBroker(t testing.TB, capacity int32) *engine.Broker {
	t.Helper()
	b, err := engine.New(capacity)
	require.NoError(t, err)
	require.NotNil(t, b)
	return b
}

// build returns a broker of the given capacity after script, every step of
// which must succeed without error.
func build(t testing.TB, capacity int32, script []step) *engine.Broker {
	t.Helper()
	b := newBroker(t, capacity)
	for i, s := range script {
		o := s.apply(b)
		require.False(t, o.Invalid, "setup step %d: %v", i, s)
		require.Empty(t, o.Err, "setup step %d: %v", i, s)
	}
	return b
}

// world names what probe looks at: topics, their groups, and for each group
// the member names to use (present or not).
type world struct {
	capacity int32
	topics   []worldTopic
}

type worldTopic struct {
	name       string
	partitions int32
	groups     []worldGroup
}

type worldGroup struct {
	name    string
	members []string
}

type probeLine struct {
	Step step
	Got  result
}

// probeMaxOffset bounds the offsets the probe tries to ack: the scripts it
// is used with publish fewer records than this per partition.
const probeMaxOffset = 8

// probe reads b's observable state through a fixed sequence of calls and
// returns every call with its result. It changes b. Two brokers in the same
// state give equal probes; the sequence is chosen so that the usual kinds of
// difference show: which topics exist, who may take which record now,
// what is in flight, who is a member, each group's committed offsets, and
// how much room retention leaves in each partition.
func probe(b *engine.Broker, w world) []probeLine {
	var out []probeLine
	do := func(s step) result {
		o := s.apply(b)
		out = append(out, probeLine{s, o})
		return o
	}
	each := func(f func(tp worldTopic, group, member string)) {
		for _, tp := range w.topics {
			for _, g := range tp.groups {
				for _, m := range g.members {
					f(tp, g.name, m)
				}
			}
		}
	}

	// Topics: invalid Create calls in the tests use "fresh".
	do(create("fresh", 1))
	for _, tp := range w.topics {
		do(create(tp.name, tp.partitions))
	}
	// What each member may take now (owner, committed offset, in flight).
	each(func(tp worldTopic, g, m string) { do(poll(tp.name, g, m, engine.MaxPollRecords)) })
	// Exactly what is in flight: all acks but one per delivery return false
	// and change nothing.
	each(func(tp worldTopic, g, m string) {
		for p := range tp.partitions {
			for off := range int64(probeMaxOffset) {
				do(ack(tp.name, g, m, p, off))
			}
		}
	})
	// Membership, seen through the assignment once every named member is in.
	each(func(tp worldTopic, g, m string) { do(join(tp.name, g, m)) })
	// Committed offsets and retained records: drain every group.
	for range 100 {
		more := false
		each(func(tp worldTopic, g, m string) {
			for _, r := range do(poll(tp.name, g, m, engine.MaxPollRecords)).Records {
				do(ack(tp.name, g, m, r.Partition, r.Offset))
				more = true
			}
		})
		if !more {
			break
		}
	}
	// Retention and next offsets: fill every partition.
	for _, tp := range w.topics {
		for p := range tp.partitions {
			for range w.capacity + 1 {
				if do(publish(tp.name, p, "probe")).Offset < 0 {
					break
				}
			}
		}
	}
	return out
}

// requireNoEffect builds twin brokers with script, applies call to one of
// them, requires result want, and requires that probing both gives the same
// result: call changed nothing observable.
func requireNoEffect(t *testing.T, w world, script []step, call step, want result) {
	t.Helper()
	untouched, called := build(t, w.capacity, script), build(t, w.capacity, script)
	require.Empty(t, sameResult(want, call.apply(called)), "%v (-want +got)", call)
	before, after := probe(untouched, w), probe(called, w)
	if !reflect.DeepEqual(before, after) { // cmp.Diff is slow; only for the message
		require.Empty(t, cmp.Diff(before, after), "%v changed the broker (-untouched +after call)", call)
		require.Fail(t, "probes differ", "%v", call)
	}
}

// requireEffect is the converse, used to show that probe sees a change.
func requireEffect(t *testing.T, w world, script []step, call step) {
	t.Helper()
	untouched, called := build(t, w.capacity, script), build(t, w.capacity, script)
	o := call.apply(called)
	require.False(t, o.Invalid, "%v", call)
	require.False(t, reflect.DeepEqual(probe(untouched, w), probe(called, w)), "probe does not see the effect of %v", call)
}
