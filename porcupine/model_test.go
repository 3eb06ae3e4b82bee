package porcupine_test

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	porc "github.com/anishathalye/porcupine"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/model"
	"github.com/f91dcac0/tributary/porcupine"
)

// Small builders: calls as Inputs, results as Outputs, and histories as
// timed operations.

func create(topic string, n int32) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindCreate, Topic: topic, N: n}
}

func join(topic, group, member string) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindJoin, Topic: topic, Group: group, Member: member}
}

func publish(topic string, p int32, payload string) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindPublish, Topic: topic, Partition: p, Payload: payload}
}

func poll(topic, group, member string, n int32) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindPoll, Topic: topic, Group: group, Member: member, N: n}
}

func pollPartition(topic, group, member string, p int32) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindPollPartition, Topic: topic, Group: group, Member: member, Partition: p}
}

func ack(topic, group, member string, p int32, off int64) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindAck, Topic: topic, Group: group, Member: member, Partition: p, Offset: off}
}

func retry(topic, group, member string, p int32, off int64) porcupine.Input {
	in := ack(topic, group, member, p, off)
	in.Kind = porcupine.KindRetry
	return in
}

func publishMessage(topic string, p int32, key string, payload string, headers ...porcupine.Header) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindPublishMessage, Topic: topic, Partition: p, Key: key, Headers: headers, Payload: payload}
}

func createGroup(topic, group, assignor string) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindCreateGroup, Topic: topic, Group: group, Assignor: assignor}
}

func deleteGroup(topic, group string) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindDeleteGroup, Topic: topic, Group: group}
}

func setAssignor(topic, group, assignor string) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindSetAssignor, Topic: topic, Group: group, Assignor: assignor}
}

func addPartitions(topic string, n int32) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindAddPartitions, Topic: topic, N: n}
}

func seek(topic, group string, p int32, off int64) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindSeek, Topic: topic, Group: group, Partition: p, Offset: off}
}

func describe(topic string) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindDescribe, Topic: topic}
}

func advance(topic string, d time.Duration) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindAdvance, Topic: topic, Advance: d}
}

func ok(b bool) porcupine.Output                 { return porcupine.Output{OK: b} }
func offset(o int64) porcupine.Output            { return porcupine.Output{Offset: o} }
func parts(p ...int32) porcupine.Output          { return porcupine.Output{Partitions: p} }
func count(n int32) porcupine.Output             { return porcupine.Output{N: n} }
func now(d time.Duration) porcupine.Output       { return porcupine.Output{Now: d} }
func fails(k porcupine.ErrKind) porcupine.Output { return porcupine.Output{Err: k} }
func invalid() porcupine.Output                  { return fails(porcupine.ErrInvalid) }

// recs is a Poll result: pairs of (partition, offset) with payload
// "p<partition>o<offset>" on topic "t", each a first delivery (Attempt 1).
func recs(po ...int64) porcupine.Output {
	var out porcupine.Output
	for i := 0; i < len(po); i += 2 {
		out.Records = append(out.Records, porcupine.Record{Topic: "t", Partition: int32(po[i]), Offset: po[i+1], Payload: payloadOf(po[i], po[i+1]), Attempt: 1})
	}
	return out
}

// attempt sets the Attempt of every record of a Poll result.
func attempt(n int32, out porcupine.Output) porcupine.Output {
	for i := range out.Records {
		out.Records[i].Attempt = n
	}
	return out
}

func payloadOf(p, o int64) string {
	return "p" + string(rune('0'+p)) + "o" + string(rune('0'+o))
}

// op is one timed call of a hand-written history.
func op(client int, call, ret int64, in porcupine.Input, out porcupine.Output) porcupine.Op {
	return porcupine.Op{Client: client, Call: call, Return: ret, In: in, Out: out}
}

// sequential times the calls one after another on client 0.
func sequential(calls ...porcupine.Op) []porcupine.Op {
	for i := range calls {
		calls[i].Call, calls[i].Return = int64(2*i), int64(2*i+1)
	}
	return calls
}

func call(in porcupine.Input, out porcupine.Output) porcupine.Op { return op(0, 0, 0, in, out) }

// verdict checks a hand-written history of the current format on a broker
// of the given capacity and options.
func verdict(t *testing.T, capacity int32, ops []porcupine.Op, opts ...porcupine.Options) porc.CheckResult {
	t.Helper()
	c := porcupine.Config{Capacity: capacity, Version: porcupine.HistoryVersion}
	if len(opts) > 0 {
		c.Options = opts[0]
	}
	return porcupine.Check(porcupine.History{Config: c, Ops: ops}, 0).Verdict
}

// docs/contract.md's orders example (capacity 2) as a sequential history.
func workedExample() []porcupine.Op {
	return sequential(
		call(create("t", 1), ok(true)),
		call(publish("t", 0, "p0o0"), offset(0)),
		call(publish("t", 0, "p0o1"), offset(1)),
		call(join("t", "billing", "m1"), parts(0)),
		call(poll("t", "billing", "m1", 2), recs(0, 0)),
		call(retry("t", "billing", "m1", 0, 0), ok(true)),
		call(poll("t", "billing", "m1", 2), attempt(2, recs(0, 0))),
		call(ack("t", "billing", "m1", 0, 0), ok(true)),
		call(poll("t", "billing", "m1", 2), recs(0, 1)),
	)
}

func TestModelSequential(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(ops []porcupine.Op) // changes one result or call
		wwant porc.CheckResult
	}{
		{"worked example", func([]porcupine.Op) {}, porc.Ok},
		{"second publish gets offset 0", func(ops []porcupine.Op) { ops[2].Out = offset(0) }, porc.Illegal},
		{"third publish is not full", func(ops []porcupine.Op) {
			ops[3] = call(publish("t", 0, "x"), offset(2))
			ops[3].Call, ops[3].Return = 6, 7
			ops[4].In, ops[4].Out = join("t", "billing", "m1"), parts(0) // keep the rest meaningful
		}, porc.Illegal},
		{"retry of a record not in flight", func(ops []porcupine.Op) { ops[5].In.Offset = 1 }, porc.Illegal},
		{"poll after ack redelivers", func(ops []porcupine.Op) { ops[8].Out = recs(0, 0) }, porc.Illegal},
		{"redelivery after retry is attempt 1 again", func(ops []porcupine.Op) { ops[6].Out = recs(0, 0) }, porc.Illegal},
		{"first delivery after ack is attempt 3", func(ops []porcupine.Op) { ops[8].Out = attempt(3, recs(0, 1)) }, porc.Illegal},
		{"poll returns nothing although a record waits", func(ops []porcupine.Op) { ops[6].Out = porcupine.Output{} }, porc.Illegal},
		{"ack succeeds twice", func(ops []porcupine.Op) {
			ops[8].In, ops[8].Out = ack("t", "billing", "m1", 0, 0), ok(true)
		}, porc.Illegal},
		{"unknown topic is invalid", func(ops []porcupine.Op) {
			ops[1].In.Topic, ops[1].Out = "nope", porcupine.Output{Err: porcupine.ErrInvalid, Offset: -1}
			ops[2].Out = offset(0)
			ops[4].Out = recs(0, 0)
			ops[4].Out.Records[0].Payload = "p0o1"
			ops[6].Out = attempt(2, recs(0, 0))
			ops[6].Out.Records[0].Payload = "p0o1"
			ops[8].Out = porcupine.Output{}
		}, porc.Ok},
		{"unknown topic is not invalid", func(ops []porcupine.Op) { ops[1].In.Topic = "nope" }, porc.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := workedExample()
			tt.edit(ops)
			require.Equal(t, tt.wwant, verdict(t, 2, ops))
		})
	}
}

// Hand-written concurrent histories: which overlaps may explain a result.
func TestModelConcurrent(t *testing.T) {
	setup := []porcupine.Op{ // capacity 2, topic t with 2 partitions, m1 owns both
		op(0, 0, 1, create("t", 2), ok(true)),
		op(0, 2, 3, join("t", "g", "m1"), parts(0, 1)),
	}
	tests := []struct {
		name  string
		ops   []porcupine.Op
		wwant porc.CheckResult
	}{
		{"poll overlapping a publish may see its record", []porcupine.Op{
			op(1, 10, 20, publish("t", 0, "p0o0"), offset(0)),
			op(2, 11, 19, poll("t", "g", "m1", 2), recs(0, 0)),
		}, porc.Ok},
		{"poll overlapping a publish may miss its record", []porcupine.Op{
			op(1, 10, 20, publish("t", 0, "p0o0"), offset(0)),
			op(2, 11, 19, poll("t", "g", "m1", 2), porcupine.Output{}),
		}, porc.Ok},
		{"poll before a publish cannot see its record", []porcupine.Op{
			op(2, 10, 11, poll("t", "g", "m1", 2), recs(0, 0)),
			op(1, 12, 20, publish("t", 0, "p0o0"), offset(0)),
		}, porc.Illegal},
		{"two overlapping polls cannot both take one record", []porcupine.Op{
			op(1, 10, 11, publish("t", 0, "p0o0"), offset(0)),
			op(2, 12, 20, poll("t", "g", "m1", 1), recs(0, 0)),
			op(3, 13, 19, poll("t", "g", "m1", 1), recs(0, 0)),
		}, porc.Illegal},
		{"a multi-partition poll is one snapshot", []porcupine.Op{
			// p0's record is published before p1's, so a poll that sees
			// p1's record must see p0's too.
			op(1, 10, 11, publish("t", 0, "p0o0"), offset(0)),
			op(1, 14, 15, publish("t", 1, "p1o0"), offset(0)),
			op(2, 9, 20, poll("t", "g", "m1", 2), recs(1, 0)),
		}, porc.Illegal},
		{"ack and retry of one delivery cannot both succeed", []porcupine.Op{
			op(1, 10, 11, publish("t", 0, "p0o0"), offset(0)),
			op(2, 12, 13, poll("t", "g", "m1", 1), recs(0, 0)),
			op(2, 14, 20, ack("t", "g", "m1", 0, 0), ok(true)),
			op(3, 15, 19, retry("t", "g", "m1", 0, 0), ok(true)),
		}, porc.Illegal},
		{"ack racing retry: one wins", []porcupine.Op{
			op(1, 10, 11, publish("t", 0, "p0o0"), offset(0)),
			op(2, 12, 13, poll("t", "g", "m1", 1), recs(0, 0)),
			op(2, 14, 20, ack("t", "g", "m1", 0, 0), ok(false)),
			op(3, 15, 19, retry("t", "g", "m1", 0, 0), ok(true)),
		}, porc.Ok},
		{"a join overlapping a poll: the poll may come first", []porcupine.Op{
			op(1, 10, 11, publish("t", 1, "p1o0"), offset(0)),
			op(2, 12, 20, poll("t", "g", "m1", 2), recs(1, 0)),
			op(3, 13, 19, join("t", "g", "m2"), parts(1)),
			op(3, 21, 22, poll("t", "g", "m2", 2), attempt(2, recs(1, 0))), // the moved delivery was cancelled
		}, porc.Ok},
		{"a rebalance cancels the moved partition's delivery", []porcupine.Op{
			op(1, 10, 11, publish("t", 1, "p1o0"), offset(0)),
			op(2, 12, 13, poll("t", "g", "m1", 2), recs(1, 0)),
			op(3, 14, 15, join("t", "g", "m2"), parts(1)),
			op(3, 16, 17, poll("t", "g", "m2", 2), porcupine.Output{}),
		}, porc.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := append(slices.Clone(setup), tt.ops...)
			require.Equal(t, tt.wwant, verdict(t, 2, ops))
		})
	}
}

// randomInput returns a call on one of a few topics (one never created, one
// invalid), aimed at records the model would deliver often enough that
// acks succeed.
func randomInput(rng *rand.Rand, m *model.Broker) porcupine.Input {
	topics := []string{"a", "b", "b", "c", "never", "bad.id"}
	groups := []string{"g0", "g1"}
	members := []string{"m0", "m1", "m2"}
	topic := topics[rng.IntN(len(topics))]
	group, member := groups[rng.IntN(2)], members[rng.IntN(3)]
	p := rng.Int32N(3) - rng.Int32N(2)
	assignor := []string{"", "RoundRobin", "Range", "Sticky", "Picky"}[rng.IntN(5)]
	switch rng.IntN(17) {
	case 15:
		return porcupine.Input{Kind: porcupine.KindHeartbeat, Topic: topic, Group: group, Member: member}
	case 16:
		return porcupine.Input{Kind: porcupine.KindRejoin, Topic: topic, Group: group, Member: member}
	case 8:
		return publishMessage(topic, p, "k", "y", porcupine.Header{Key: "h", Value: "v"})
	case 9:
		return createGroup(topic, group, assignor)
	case 10:
		return deleteGroup(topic, group)
	case 11:
		return setAssignor(topic, group, assignor)
	case 12:
		return addPartitions(topic, rng.Int32N(3))
	case 13:
		return seek(topic, group, p, rng.Int64N(4))
	case 14:
		return describe(topic)
	case 0:
		return create(topic, rng.Int32N(4))
	case 1:
		return join(topic, group, member)
	case 2:
		return porcupine.Input{Kind: porcupine.KindLeave, Topic: topic, Group: group, Member: member}
	case 3, 4:
		return publish(topic, p, "x")
	case 5:
		return poll(topic, group, member, rng.Int32N(4))
	default: // 6, 7
		off := rng.Int64N(4)
		for q := int32(0); q < 3 && rng.IntN(4) > 0; q++ { // aim at a delivery in flight
			if f, err := m.InFlight(topic, group, q); err == nil && f {
				p = q
				off, _ = m.Committed(topic, group, q)
				break
			}
		}
		if rng.IntN(2) == 0 {
			return ack(topic, group, member, p, off)
		}
		return retry(topic, group, member, p, off)
	}
}

// TestTopicsIndependent checks the premise of partitioning by topic: on
// random sequential histories over several topics, every call returns the
// same on a model holding all topics as on a model holding only its own
// topic's calls, and each per-topic model equals the all-topics model
// restricted to that topic (compared through String's per-topic lines).
// Every other sequence has a session timeout on a clock that moves between
// calls (SPEC rule 24: a call expires the members of its own topic only).
func TestTopicsIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for seq := 0; seq < 300; seq++ {
		var now time.Duration
		opts := []model.Option{model.WithClock(func() time.Time { return porcupine.Epoch.Add(now) })}
		if seq%2 == 1 {
			opts = append(opts, model.WithSessionTimeout(3*time.Second))
		}
		all, _ := model.New(2, opts...)
		per := map[string]*model.Broker{}
		for i := 0; i < 80; i++ {
			if seq%2 == 1 && rng.IntN(4) == 0 {
				now += time.Duration(rng.IntN(3)) * time.Second
			}
			in := randomInput(rng, all)
			if per[in.Topic] == nil {
				per[in.Topic], _ = model.New(2, opts...)
			}
			wout := porcupine.Apply(all, in)
			out := porcupine.Apply(per[in.Topic], in)
			if !out.Equal(wout) {
				t.Fatalf("sequence %d call %d %v: alone %+v, among all topics %+v", seq, i, in, out, wout)
			}
		}
		var joined []string
		for _, topic := range all.Topics() {
			joined = append(joined, topicLines(per[topic].String(), topic))
		}
		if d := cmp.Diff(topicLines(all.String(), ""), strings.Join(joined, "")); d != "" {
			t.Fatalf("sequence %d: per-topic states differ from the whole (-whole +per-topic):\n%s", seq, d)
		}
	}
}

// topicLines returns the lines of a model.String for topic (all topics when
// topic is ""), without the capacity line.
func topicLines(s, topic string) string {
	lines := strings.SplitAfter(s, "\n")[1:]
	if topic == "" {
		return strings.Join(lines, "")
	}
	var out []string
	in := false
	for _, l := range lines {
		if strings.HasPrefix(l, "topic ") {
			in = strings.HasPrefix(l, "topic "+topic+" ")
		}
		if in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// TestPartitionEvents checks that the event form of a history splits and
// checks like its operation form.
func TestPartitionEvents(t *testing.T) {
	h, err := porcupine.Run(porcupine.Workload{Seed: 9, Topics: 3, Clients: 4, OpsPerClient: 20}, nil)
	require.NoError(t, err)
	m := porcupine.Model(h.Config)
	ops := make([]porc.Operation, len(h.Ops))
	type stamp struct {
		t   int64
		ret bool
		id  int
	}
	var stamps []stamp
	for i, o := range h.Ops {
		ops[i] = porc.Operation{ClientId: o.Client, Input: o.In, Output: o.Out, Call: o.Call, Return: o.Return}
		stamps = append(stamps, stamp{o.Call, false, i}, stamp{o.Return, true, i})
	}
	slices.SortStableFunc(stamps, func(a, b stamp) int {
		if a.t != b.t {
			return int(a.t - b.t)
		}
		if a.ret == b.ret {
			return 0
		}
		if !a.ret { // calls before returns at one instant (closed intervals)
			return -1
		}
		return 1
	})
	var events []porc.Event
	for _, s := range stamps {
		o := h.Ops[s.id]
		if s.ret {
			events = append(events, porc.Event{ClientId: o.Client, Kind: porc.ReturnEvent, Value: o.Out, Id: s.id})
		} else {
			events = append(events, porc.Event{ClientId: o.Client, Kind: porc.CallEvent, Value: o.In, Id: s.id})
		}
	}
	byOps, byEvents := m.Partition(ops), m.PartitionEvent(events)
	require.Len(t, byEvents, len(byOps))
	for i := range byOps {
		require.Len(t, byEvents[i], 2*len(byOps[i]), "partition %d", i)
		topic := byOps[i][0].Input.(porcupine.Input).Topic
		for _, e := range byEvents[i] {
			if e.Kind == porc.CallEvent {
				require.Equal(t, topic, e.Value.(porcupine.Input).Topic)
			}
		}
	}
	require.Equal(t, porc.CheckOperations(m, ops), porc.CheckEvents(m, events))
	require.True(t, porc.CheckEvents(m, events))
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		in    porcupine.Input
		out   porcupine.Output
		wtext string
	}{
		{create("t", 3), ok(true), "Create(t, 3) → true"},
		{join("t", "g0", "m1"), parts(0, 2), "Join(g0 m1) → [0 2]"},
		{join("t", "g0", "m1"), parts(), "Join(g0 m1) → []"},
		{publish("t", 1, "c3.7"), offset(-1), `Publish(p1 "c3.7") → -1 full`},
		{poll("t", "g0", "m1", 4), recs(0, 3, 2, 1), `Poll(g0 m1 max=4) → p0@3 "p0o3"#1, p2@1 "p2o1"#1`},
		{poll("t", "g0", "m1", 4), porcupine.Output{}, "Poll(g0 m1 max=4) → none"},
		{ack("t", "g0", "m1", 0, 3), ok(true), "Ack(g0 m1 p0@3) → true"},
		{retry("t", "g0", "m1", 0, -1), invalid(), "Retry(g0 m1 p0@-1) → invalid"},
		{poll("t", "g0", "m1", 1), porcupine.Output{Err: porcupine.ErrOther, ErrText: "boom"}, "Poll(g0 m1 max=1) → error: boom"},
		{poll("t", "g0", "m1", 4), attempt(2, recs(0, 3)), `Poll(g0 m1 max=4) → p0@3 "p0o3"#2`},
		{pollPartition("t", "g0", "m1", 2), attempt(3, recs(2, 1)), `PollPartition(g0 m1 p2) → p2@1 "p2o1"#3`},
		{pollPartition("t", "g0", "m1", 9), fails(porcupine.ErrInvalid), "PollPartition(g0 m1 p9) → invalid"},
		{publishMessage("t", 0, "k1", "c2.4", porcupine.Header{Key: "h0", Value: "v"}), offset(5), `PublishMessage(p0 key="k1" [h0:v] "c2.4") → 5`},
		{porcupine.Input{Kind: porcupine.KindPublishMessage, Topic: "t", Payload: "x", Time: porcupine.Epoch.Add(time.Second)}, offset(0), `PublishMessage(p0 "x" at +1s) → 0`},
		{poll("t", "g0", "m1", 1), porcupine.Output{Records: []porcupine.Record{{Partition: 0, Offset: 5, Key: "k1", Headers: []porcupine.Header{{Key: "h0", Value: "a b"}}, Payload: "c2.4", Attempt: 1, Time: porcupine.Epoch.Add(2 * time.Second)}}},
			`Poll(g0 m1 max=1) → p0@5 key="k1" [h0:"a b"] "c2.4"#1 at +2s`},
		{createGroup("t", "g1", "Sticky"), ok(true), "CreateGroup(g1 Sticky) → true"},
		{createGroup("t", "g1", ""), invalid(), "CreateGroup(g1 nil) → invalid"},
		{deleteGroup("t", "g1"), fails(porcupine.ErrNotEmpty), "DeleteGroup(g1) → group-not-empty"},
		{setAssignor("t", "g1", "Picky"), fails(porcupine.ErrAssignment), "SetAssignor(g1 Picky) → invalid-assignment"},
		{addPartitions("t", 2), count(5), "AddPartitions(+2) → 5"},
		{seek("t", "g1", 0, 2), fails(porcupine.ErrOutOfRange), "Seek(g1 p0@2) → offset-out-of-range"},
		{advance("t", 5*time.Second), now(15 * time.Second), "Advance(+5s) → +15s"},
		{describe("t"), porcupine.Output{Desc: &porcupine.TopicDescription{Topic: "t",
			Partitions: []porcupine.PartitionDescription{{Partition: 0, LogStartOffset: 2, LogEndOffset: 5}, {Partition: 1, LogEndOffset: 1}},
			Groups: []porcupine.GroupDescription{{Group: "g0", Assignor: "Range", Members: []string{"m0", "m1"}, Partitions: []porcupine.GroupPartition{
				{Partition: 0, Owner: "m0", Committed: 3, InFlight: true, Attempts: 2, Lag: 2}, {Partition: 1, Owner: "m1", Committed: 1}}}}}},
			"Describe() → p0[2,5) p1[0,1) | g0 Range [m0 m1] p0:m0@3*/2 p1:m1@1"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.wtext, porcupine.Describe(tt.in, tt.out))
	}
}

func TestKindText(t *testing.T) {
	for _, k := range porcupine.Kinds() {
		text, err := k.MarshalText()
		require.NoError(t, err)
		var back porcupine.Kind
		require.NoError(t, back.UnmarshalText(text))
		require.Equal(t, k, back)
	}
	var k porcupine.Kind
	require.Error(t, k.UnmarshalText([]byte("Delete")))
	_, err := porcupine.Kind(0).MarshalText()
	require.Error(t, err)
}

// TestRecorderClock checks the recorded intervals: each Call <= Return, and
// each client's calls follow one another (Return <= next Call), so program
// order is never lost; and every call of the workload is recorded.
func TestRecorderClock(t *testing.T) {
	w := porcupine.Workload{Seed: 5, Topics: 3, Clients: 6, OpsPerClient: 50}
	h, err := porcupine.Run(w, nil)
	require.NoError(t, err)
	w, _ = w.Resolve()
	require.Len(t, h.Ops, w.Ops())
	last := map[int]int64{}
	count := map[int]int{}
	for i, o := range h.Ops {
		require.LessOrEqual(t, o.Call, o.Return, "op %d", i)
		if prev, ok := last[o.Client]; ok {
			require.LessOrEqual(t, prev, o.Call, "op %d: client %d's call before its previous return", i, o.Client)
		}
		last[o.Client] = o.Return
		count[o.Client]++
		if i > 0 {
			require.LessOrEqual(t, h.Ops[i-1].Call, o.Call, "Ops not sorted by call")
		}
	}
	require.Len(t, count, w.Topics*w.Clients)
}

func TestWorkloadResolve(t *testing.T) {
	w, err := porcupine.Workload{Mix: "full"}.Resolve()
	require.NoError(t, err)
	require.Equal(t, porcupine.Workload{Mix: "full", Topics: 1, Clients: 8, OpsPerClient: 40, Partitions: 2, Capacity: 1, Groups: 2, Members: 2}, w)
	w, err = porcupine.Workload{Mix: "acktimeout", Options: porcupine.Options{ReplayWindow: 3}}.Resolve()
	require.NoError(t, err)
	require.Equal(t, porcupine.Options{ReplayWindow: 3, AckTimeout: 10 * time.Second, TestClock: true}, w.Options)
	require.Equal(t, porcupine.Config{Capacity: 4, Options: w.Options, Version: porcupine.HistoryVersion}, w.Config())
	for _, bad := range []porcupine.Workload{{Mix: "nope"}, {Clients: 65}, {Capacity: 16777217}, {Partitions: 65}, {OpsPerClient: -1},
		{Mix: "window", Options: porcupine.Options{ReplayWindow: 3}}, {Options: porcupine.Options{AckTimeout: -1}}} {
		_, err := bad.Resolve()
		require.Error(t, err, "%+v", bad)
	}
}

func TestFixtureRoundTrip(t *testing.T) {
	f := porcupine.Fixture{Verdict: porc.Ok, Note: "round trip", History: porcupine.History{Config: porcupine.Config{Capacity: 2, Version: porcupine.HistoryVersion}, Ops: workedExample()}}
	path := filepath.Join(t.TempDir(), "f.json")
	require.NoError(t, porcupine.WriteFixture(path, f))
	back, err := porcupine.ReadFixture(path)
	require.NoError(t, err)
	require.Equal(t, f, back)
}
