package porcupine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/f91dcac0/tributary/engine/assign"
	"github.com/f91dcac0/tributary/model"
)

// Kind names one recorded call: one of the broker's calls (docs/contract.md), or Advance, a move of a workload's test clock.
type Kind uint8

// The calls. The zero Kind is invalid. The first seven are the core calls
// of the core API (rules 1–14), in the order of the version 0 history format.
const (
	KindCreate Kind = iota + 1
	KindJoin
	KindLeave
	KindPublish
	KindPoll
	KindAck
	KindRetry
	KindPublishMessage
	KindCreateGroup
	KindDeleteGroup
	KindSetAssignor
	KindAddPartitions
	KindSeek
	KindDescribe
	// KindAdvance moves a topic's test clock forward (see TestClock); it is
	// not a broker call, but it is recorded and checked like one.
	KindAdvance
	// KindPollPartition is MemberHandle.AppendPollPartition: Poll of one
	// partition with maxRecords 1 (model.PollPartition). Recorded with the
	// group, member and partition; its records are compared as Poll's.
	KindPollPartition
	// KindCreateGroupAt is engine.Broker.CreateGroupAt: CreateGroup with
	// the group's start (Input.Start), StartLatest at the log end
	// (model.CreateGroupAt).
	KindCreateGroupAt
	// KindHeartbeat is engine.Broker.Heartbeat (SPEC rule 24): Output.OK
	// reports membership (model.Heartbeat).
	KindHeartbeat
	// KindRejoin is engine.Broker.Rejoin (SPEC rule 25): Join for a new
	// incarnation; Output.Partitions as Join's (model.Rejoin).
	KindRejoin

	kindCount // one past the last Kind
)

var kindNames = [kindCount]string{"", "Create", "Join", "Leave", "Publish", "Poll", "Ack", "Retry",
	"PublishMessage", "CreateGroup", "DeleteGroup", "SetAssignor", "AddPartitions", "Seek", "Describe", "Advance", "PollPartition", "CreateGroupAt",
	"Heartbeat", "Rejoin"}

// Kinds returns every valid Kind in order, as a new slice owned by the
// caller.
func Kinds() []Kind {
	out := make([]Kind, 0, kindCount-1)
	for k := KindCreate; k < kindCount; k++ {
		out = append(out, k)
	}
	return out
}

// String returns the method's name, e.g. "Poll".
func (k Kind) String() string {
	if k < kindCount && k != 0 {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes k as its method name.
func (k Kind) MarshalText() ([]byte, error) {
	if k == 0 || k >= kindCount {
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

// Header is one message header, a copy of engine.Header or model.Header.
type Header struct {
	Key   string `json:"k"`
	Value string `json:"v"`
}

// Input is one call's arguments. Fields a call does not take are zero.
type Input struct {
	Kind      Kind   `json:"kind"`
	Topic     string `json:"topic"`
	Group     string `json:"group,omitempty"`
	Member    string `json:"member,omitempty"`
	Partition int32  `json:"partition,omitempty"` // Publish, PublishMessage, Ack, Retry, Seek, PollPartition
	Offset    int64  `json:"offset,omitempty"`    // Ack, Retry, Seek
	N         int32  `json:"n,omitempty"`         // Create: partitionCount; Poll: maxRecords; AddPartitions: count
	Payload   string `json:"payload,omitempty"`   // Publish, PublishMessage

	Key     string    `json:"key,omitempty"`     // PublishMessage: Message.Key
	Headers []Header  `json:"headers,omitempty"` // PublishMessage: Message.Headers
	Time    time.Time `json:"time,omitzero"`     // PublishMessage: Message.Time (zero: the broker clock)
	// Assignor is, for CreateGroup, CreateGroupAt and SetAssignor, the
	// assignor's name (see AssignorNames); "" stands for a nil Assignor.
	Assignor string `json:"assignor,omitempty"`
	// Start is, for CreateGroupAt, engine.GroupStart's value: 0
	// StartEarliest, 1 StartLatest, anything else invalid.
	Start uint8 `json:"start,omitempty"`
	// Advance is, for Advance, how far the test clock moves.
	Advance time.Duration `json:"advance,omitempty"`
}

// message returns in's PublishMessage argument for the model.
func (in Input) message() model.Message {
	m := model.Message{Key: in.Key, Payload: in.Payload, Time: in.Time}
	for _, h := range in.Headers {
		m.Headers = append(m.Headers, model.Header(h))
	}
	return m
}

// Record is one polled record, a copy of engine.Record or model.Record.
// Time is recorded only in histories of a test clock (Options.TestClock);
// otherwise it is zero on both sides. Attempt is recorded from history
// format version 1 on (see Config.Version).
type Record struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Payload   string    `json:"payload"`
	Key       string    `json:"key,omitempty"`
	Headers   []Header  `json:"headers,omitempty"`
	Time      time.Time `json:"time,omitzero"`
	Attempt   int32     `json:"attempt,omitempty"`
}

// equal compares two records; nil and empty Headers are equal, times are
// compared as instants.
func (r Record) equal(s Record) bool {
	return r.Topic == s.Topic && r.Partition == s.Partition && r.Offset == s.Offset && r.Payload == s.Payload &&
		r.Key == s.Key && slices.Equal(r.Headers, s.Headers) && r.Time.Equal(s.Time) && r.Attempt == s.Attempt
}

// TopicDescription is Describe's result (SPEC rule 23), a copy of
// engine.TopicDescription or model.TopicDescription with the same fields.
type TopicDescription struct {
	Topic      string                 `json:"topic"`
	Partitions []PartitionDescription `json:"partitions"`
	Groups     []GroupDescription     `json:"groups"`
}

// PartitionDescription is one partition of a TopicDescription.
type PartitionDescription struct {
	Partition      int32 `json:"p"`
	LogStartOffset int64 `json:"start"`
	LogEndOffset   int64 `json:"end"`
}

// GroupDescription is one group of a TopicDescription.
type GroupDescription struct {
	Group      string           `json:"group"`
	Assignor   string           `json:"assignor"`
	Members    []string         `json:"members"`
	Partitions []GroupPartition `json:"partitions"`
	// LastSeen[i] is Members[i]'s last-seen instant on the test clock
	// (SPEC rule 24), in histories with a session timeout (which needs the
	// test clock); empty otherwise. Compared as instants.
	LastSeen []time.Time `json:"last_seen,omitempty"`
}

// GroupPartition is one group's state on one partition.
type GroupPartition struct {
	Partition int32  `json:"p"`
	Owner     string `json:"owner,omitempty"`
	Committed int64  `json:"committed"`
	InFlight  bool   `json:"inflight,omitempty"`
	Attempts  int32  `json:"attempts,omitempty"`
	Lag       int64  `json:"lag"`
}

// Equal reports whether d and e describe the same state; nil and empty
// slices are equal.
func (d *TopicDescription) Equal(e *TopicDescription) bool {
	if d == nil || e == nil {
		return d == e
	}
	return d.Topic == e.Topic && slices.Equal(d.Partitions, e.Partitions) &&
		slices.EqualFunc(d.Groups, e.Groups, func(g, h GroupDescription) bool {
			return g.Group == h.Group && g.Assignor == h.Assignor && slices.Equal(g.Members, h.Members) &&
				slices.Equal(g.Partitions, h.Partitions) && slices.EqualFunc(g.LastSeen, h.LastSeen, time.Time.Equal)
		})
}

// ErrKind is the kind of error a call returned: errors compare by kind,
// never by message.
type ErrKind uint8

// The error kinds: the contract's sentinels (docs/contract.md) and ErrInvalidAssignment
// (engine and model share assign.ErrInvalidAssignment), and ErrOther for
// anything else, which the contract never returns.
const (
	ErrNone ErrKind = iota
	// ErrInvalid: errors.Is(err, ErrInvalidArgument).
	ErrInvalid
	// ErrOutOfRange: errors.Is(err, ErrOffsetOutOfRange) (Seek).
	ErrOutOfRange
	// ErrNotEmpty: errors.Is(err, ErrGroupNotEmpty) (DeleteGroup).
	ErrNotEmpty
	// ErrAssignment: errors.Is(err, ErrInvalidAssignment) (a rebalance
	// whose assignor answered wrongly).
	ErrAssignment
	// ErrOther: any other error; it never matches the model.
	ErrOther

	errKindCount
)

var errKindNames = [errKindCount]string{"", "invalid", "offset-out-of-range", "group-not-empty", "invalid-assignment", "other"}

// String returns the kind's name, e.g. "invalid"; "" for ErrNone.
func (k ErrKind) String() string {
	if k < errKindCount {
		return errKindNames[k]
	}
	return "ErrKind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes k as its name.
func (k ErrKind) MarshalText() ([]byte, error) {
	if k >= errKindCount {
		return nil, fmt.Errorf("porcupine: invalid ErrKind %d", uint8(k))
	}
	return []byte(errKindNames[k]), nil
}

// UnmarshalText decodes a name written by MarshalText.
func (k *ErrKind) UnmarshalText(b []byte) error {
	i := slices.Index(errKindNames[:], string(b))
	if i < 0 {
		return fmt.Errorf("porcupine: unknown error kind %q", b)
	}
	*k = ErrKind(i)
	return nil
}

// sentinels are one implementation's errors, for classifying its results.
type sentinels struct{ invalid, outOfRange, notEmpty error }

var modelErrs = sentinels{model.ErrInvalidArgument, model.ErrOffsetOutOfRange, model.ErrGroupNotEmpty}

// kindOf classifies err by the sentinels of the implementation that
// returned it.
func kindOf(err error, s sentinels) ErrKind {
	switch {
	case err == nil:
		return ErrNone
	case errors.Is(err, s.invalid):
		return ErrInvalid
	case errors.Is(err, s.outOfRange):
		return ErrOutOfRange
	case errors.Is(err, s.notEmpty):
		return ErrNotEmpty
	case errors.Is(err, assign.ErrInvalidAssignment):
		return ErrAssignment
	}
	return ErrOther
}

// Output is one call's results, reduced to what the engine and the model
// share. Errors compare by kind only (Err); an ErrOther keeps its text in
// ErrText and never matches. Nil and empty slices are equal.
type Output struct {
	Err        ErrKind           `json:"error,omitempty"`
	ErrText    string            `json:"err,omitempty"`         // ErrOther: the error's text
	OK         bool              `json:"ok,omitempty"`          // Create, Leave, Ack, Retry, CreateGroup, CreateGroupAt, DeleteGroup, SetAssignor, Seek, Heartbeat
	Offset     int64             `json:"offset,omitempty"`      // Publish, PublishMessage: the offset, or -1 when full or on error
	N          int32             `json:"n,omitempty"`           // AddPartitions: the new partition count
	Now        time.Duration     `json:"now,omitempty"`         // Advance: the test clock's reading after it, since Epoch
	Partitions []int32           `json:"partitions,omitempty"`  // Join, Rejoin
	Records    []Record          `json:"records,omitempty"`     // Poll, PollPartition
	Desc       *TopicDescription `json:"description,omitempty"` // Describe
}

// UnmarshalJSON decodes an Output, reading version 0 histories too: there
// "invalid": true was ErrInvalid and a non-empty "err" was ErrOther.
func (o *Output) UnmarshalJSON(b []byte) error {
	type plain Output // without this method
	var v struct {
		plain
		Invalid bool `json:"invalid"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*o = Output(v.plain)
	switch {
	case v.Invalid && o.Err == ErrNone:
		o.Err = ErrInvalid
	case o.ErrText != "" && o.Err == ErrNone:
		o.Err = ErrOther
	}
	return nil
}

// Equal reports whether o and p are the same result. An ErrOther result
// equals nothing.
func (o Output) Equal(p Output) bool {
	return o.Err == p.Err && o.Err != ErrOther && o.OK == p.OK && o.Offset == p.Offset && o.N == p.N && o.Now == p.Now &&
		slices.Equal(o.Partitions, p.Partitions) && slices.EqualFunc(o.Records, p.Records, Record.equal) &&
		o.Desc.Equal(p.Desc)
}

// setErr fills Err (and ErrText) from a call's error, classified by the
// sentinels of the implementation that returned it.
func (o *Output) setErr(err error, s sentinels) {
	o.Err = kindOf(err, s)
	if o.Err == ErrOther {
		o.ErrText = err.Error()
	}
}

// Apply runs the broker call in on the sequential model b (mutating it) and
// returns its result, with every field the model gives (record times and
// attempts included; Model's Step drops those a history does not record).
// Assignors are looked up by name (LookupAssignor); "" is a nil Assignor.
// It panics for KindAdvance, which is not a broker call (Model's Step
// handles it), for an invalid Kind and for an unknown assignor name.
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
	case KindHeartbeat:
		out.OK, err = b.Heartbeat(in.Topic, in.Group, in.Member)
	case KindRejoin:
		out.Partitions, err = b.Rejoin(in.Topic, in.Group, in.Member)
	case KindPublish:
		out.Offset, err = b.Publish(in.Topic, in.Partition, in.Payload)
	case KindPublishMessage:
		out.Offset, err = b.PublishMessage(in.Topic, in.Partition, in.message())
	case KindPoll:
		var recs []model.Record
		recs, err = b.Poll(in.Topic, in.Group, in.Member, in.N)
		for _, r := range recs {
			out.Records = append(out.Records, fromModelRecord(r))
		}
	case KindPollPartition:
		var recs []model.Record
		recs, err = b.PollPartition(in.Topic, in.Group, in.Member, in.Partition)
		for _, r := range recs {
			out.Records = append(out.Records, fromModelRecord(r))
		}
	case KindAck:
		out.OK, err = b.Ack(in.Topic, in.Group, in.Member, in.Partition, in.Offset)
	case KindRetry:
		out.OK, err = b.Retry(in.Topic, in.Group, in.Member, in.Partition, in.Offset)
	case KindCreateGroup:
		out.OK, err = b.CreateGroup(in.Topic, in.Group, mustAssignor(in.Assignor))
	case KindCreateGroupAt:
		out.OK, err = b.CreateGroupAt(in.Topic, in.Group, mustAssignor(in.Assignor), model.GroupStart(in.Start))
	case KindDeleteGroup:
		out.OK, err = b.DeleteGroup(in.Topic, in.Group)
	case KindSetAssignor:
		out.OK, err = b.SetAssignor(in.Topic, in.Group, mustAssignor(in.Assignor))
	case KindAddPartitions:
		out.N, err = b.AddPartitions(in.Topic, in.N)
	case KindSeek:
		out.OK, err = b.Seek(in.Topic, in.Group, in.Partition, in.Offset)
	case KindDescribe:
		var d model.TopicDescription
		if d, err = b.Describe(in.Topic); err == nil {
			out.Desc = fromModelDescription(d)
		}
	default:
		panic(fmt.Sprintf("porcupine: Apply: %v is not a broker call", in.Kind))
	}
	out.setErr(err, modelErrs)
	return out
}

// fromModelRecord copies a model.Record.
func fromModelRecord(r model.Record) Record {
	return Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Payload: r.Payload, Key: r.Key,
		Headers: fromHeaders(r.Headers), Time: r.Time, Attempt: r.Attempt}
}

// fromModelDescription copies a model.TopicDescription.
func fromModelDescription(d model.TopicDescription) *TopicDescription {
	out := &TopicDescription{Topic: d.Topic, Partitions: fromPartitions(d.Partitions)}
	for _, g := range d.Groups {
		out.Groups = append(out.Groups, fromGroup(g.Group, g.Assignor, g.Members, g.Partitions, g.LastSeen))
	}
	return out
}

// picky is the test assignor "Picky": Range's answer, except that it answers
// invalidly (no owners) for a group of exactly three members. A workload
// uses it to make Join, Leave, SetAssignor and AddPartitions return
// ErrInvalidAssignment; engine and model both run it through assign.Run.
type picky struct{}

func (picky) Name() string { return "Picky" }

func (picky) Assign(members, previous []string) []string {
	if len(members) == 3 {
		return nil
	}
	return assign.Range.Assign(members, previous)
}

// Picky is the assignor named "Picky": assign.Range, except that its answer
// for a group of exactly three members is invalid, so the rebalance fails
// with ErrInvalidAssignment and changes nothing (SPEC rule 18).
var Picky assign.Assignor = picky{}

// assignors are the assignors a history can name: the built-in ones and
// Picky.
var assignors = []assign.Assignor{assign.RoundRobin, assign.Range, assign.Sticky, Picky}

// AssignorNames returns the names of the assignors a recorded call may
// use: "RoundRobin", "Range", "Sticky" and "Picky", as a new slice owned
// by the caller.
func AssignorNames() []string {
	names := make([]string, len(assignors))
	for i, a := range assignors {
		names[i] = a.Name()
	}
	return names
}

// LookupAssignor returns the assignor named name: one of AssignorNames, or
// nil and true for "" (a nil Assignor, which every call refuses as an
// invalid argument). It returns false for any other name.
func LookupAssignor(name string) (assign.Assignor, bool) {
	if name == "" {
		return nil, true
	}
	for _, a := range assignors {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

func mustAssignor(name string) assign.Assignor {
	a, ok := LookupAssignor(name)
	if !ok {
		panic(fmt.Sprintf("porcupine: unknown assignor %q (want one of %s)", name, strings.Join(AssignorNames(), ", ")))
	}
	return a
}
