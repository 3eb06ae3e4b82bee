package porcupine_test

import (
	"testing"
	"time"

	porc "github.com/anishathalye/porcupine"

	"github.com/f91dcac0/tributary/porcupine"
)

func heartbeat(topic, group, member string) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindHeartbeat, Topic: topic, Group: group, Member: member}
}

func rejoin(topic, group, member string) porcupine.Input {
	return porcupine.Input{Kind: porcupine.KindRejoin, Topic: topic, Group: group, Member: member}
}

// both is a Poll result of p0 and p1 offset 0, payloads "r0" and "r1".
func both(a0, a1 int32) porcupine.Output {
	return porcupine.Output{Records: []porcupine.Record{
		{Topic: "t", Partition: 0, Offset: 0, Payload: "r0", Attempt: a0, Time: porcupine.Epoch},
		{Topic: "t", Partition: 1, Offset: 0, Payload: "r1", Attempt: a1, Time: porcupine.Epoch},
	}}
}

// seenDesc is Describe's result for topic t of two partitions, one record
// each and nothing committed, with group g of members at their last-seen
// instants (seconds after Epoch), owners and in-flight flags.
func seenDesc(members []string, seen []int, owners [2]string, inFlight [2]bool, attempts [2]int32) porcupine.Output {
	g := porcupine.GroupDescription{Group: "g", Assignor: "RoundRobin", Members: members}
	for _, s := range seen {
		g.LastSeen = append(g.LastSeen, porcupine.Epoch.Add(time.Duration(s)*time.Second))
	}
	for p := range 2 {
		g.Partitions = append(g.Partitions, porcupine.GroupPartition{Partition: int32(p), Owner: owners[p],
			InFlight: inFlight[p], Attempts: attempts[p], Lag: 1})
	}
	return porcupine.Output{Desc: &porcupine.TopicDescription{Topic: "t",
		Partitions: []porcupine.PartitionDescription{{Partition: 0, LogEndOffset: 1}, {Partition: 1, LogEndOffset: 1}},
		Groups:     []porcupine.GroupDescription{g}}}
}

// SPEC section 3.4's worked example (rule 24) as a sequential history on a
// test clock: capacity 10, session timeout 10 s, topic t of 2 partitions,
// one record on each.
func TestModelSessionTimeout(t *testing.T) {
	base := func() []porcupine.Op {
		return sequential(
			call(create("t", 2), ok(true)),
			call(publish("t", 0, "r0"), offset(0)),
			call(publish("t", 1, "r1"), offset(0)),
			call(join("t", "g", "a"), parts(0, 1)),
			call(advance("t", time.Second), now(time.Second)),
			call(join("t", "g", "b"), parts(1)), // 5
			call(advance("t", time.Second), now(2*time.Second)),
			call(poll("t", "g", "a", 1), at(0, rec(0, 0, "r0", 1))), // 7
			call(advance("t", 7*time.Second), now(9*time.Second)),
			call(heartbeat("t", "g", "b"), ok(true)), // 9: a last seen 7 s before
			call(describe("t"), seenDesc([]string{"a", "b"}, []int{2, 9}, [2]string{"a", "b"}, [2]bool{true, false}, [2]int32{1, 0})),
			call(advance("t", 6*time.Second), now(15*time.Second)),
			call(poll("t", "g", "b", 64), both(2, 1)), // 12: expires a first
			call(advance("t", time.Second), now(16*time.Second)),
			call(ack("t", "g", "a", 0, 0), ok(false)), // 14
			call(heartbeat("t", "g", "a"), ok(false)), // 15
			call(describe("t"), seenDesc([]string{"b"}, []int{15}, [2]string{"b", "b"}, [2]bool{true, true}, [2]int32{2, 1})),
		)
	}
	opts := porcupine.Options{SessionTimeout: 10 * time.Second, TestClock: true}
	checkEdits(t, 10, opts, base, []edit{
		{"a expired early", func(ops []porcupine.Op) {
			ops[10].Out = seenDesc([]string{"b"}, []int{9}, [2]string{"b", "b"}, [2]bool{false, false}, [2]int32{1, 0})
		}, porc.Illegal},
		{"a not expired at b's poll", func(ops []porcupine.Op) { ops[12].Out = at(0, rec(1, 0, "r1", 1)) }, porc.Illegal},
		{"the redelivery is attempt 1", func(ops []porcupine.Op) { ops[12].Out = both(1, 1) }, porc.Illegal},
		{"the expired member's ack succeeds", func(ops []porcupine.Op) { ops[14].Out = ok(true) }, porc.Illegal},
		{"the expired member's heartbeat brings it back", func(ops []porcupine.Op) { ops[15].Out = ok(true) }, porc.Illegal},
		{"a heartbeat does not refresh", func(ops []porcupine.Op) {
			ops[10].Out = seenDesc([]string{"a", "b"}, []int{2, 1}, [2]string{"a", "b"}, [2]bool{true, false}, [2]int32{1, 0})
		}, porc.Illegal},
		{"last seen not compared", func(ops []porcupine.Op) {
			ops[16].Out = seenDesc([]string{"b"}, []int{9}, [2]string{"b", "b"}, [2]bool{true, true}, [2]int32{2, 1})
		}, porc.Illegal},
		{"exactly d is expired", func(ops []porcupine.Op) {
			// b's poll 10 s after a's poll at 2 s expires a: d or more.
			ops[11].In.Advance, ops[11].Out = 3*time.Second, now(12*time.Second)
			ops[13].In.Advance, ops[13].Out = 4*time.Second, now(16*time.Second)
			ops[16].Out = seenDesc([]string{"b"}, []int{12}, [2]string{"b", "b"}, [2]bool{true, true}, [2]int32{2, 1})
		}, porc.Ok},
		{"a nanosecond under d is not", func(ops []porcupine.Op) {
			ops[11].In.Advance, ops[11].Out = 3*time.Second-1, now(12*time.Second-1)
			ops[13].In.Advance, ops[13].Out = 4*time.Second+1, now(16*time.Second)
			ops[16].Out = seenDesc([]string{"b"}, []int{12}, [2]string{"b", "b"}, [2]bool{true, true}, [2]int32{2, 1})
			ops[16].Out.Desc.Groups[0].LastSeen[0] = porcupine.Epoch.Add(12*time.Second - 1) // all as if a had expired
		}, porc.Illegal},
		{"an invalid call expires nobody", func(ops []porcupine.Op) {
			ops[12].In.N, ops[12].Out = 65, invalid()
			ops[14].Out = ok(true) // a's ack is the first valid call since t=15s: a was seen at 2 s, so it is expired there too
		}, porc.Illegal},
		{"an advance overlapping the poll may come after it", func(ops []porcupine.Op) {
			ops[11].Call, ops[11].Return, ops[11].Client = ops[12].Call, ops[12].Return, 1
			ops[11].Out = now(15 * time.Second)
			ops[12].Out = at(0, rec(1, 0, "r1", 1)) // at 9 s: a not expired
			ops[16].Out = seenDesc([]string{"b"}, []int{9}, [2]string{"b", "b"}, [2]bool{false, true}, [2]int32{1, 1})
		}, porc.Ok},
	})
}

// SPEC section 3.4's Rejoin example (rule 25), on a fresh broker, and a
// Rejoin of a non-member.
func TestModelRejoin(t *testing.T) {
	base := func() []porcupine.Op {
		return sequential(
			call(create("t", 2), ok(true)),
			call(publish("t", 0, "r0"), offset(0)),
			call(publish("t", 1, "r1"), offset(0)),
			call(join("t", "g", "a"), parts(0, 1)),
			call(poll("t", "g", "a", 64), both(1, 1)),
			call(rejoin("t", "g", "a"), parts(0, 1)), // 5
			call(describe("t"), seenDesc([]string{"a"}, []int{0}, [2]string{"a", "a"}, [2]bool{false, false}, [2]int32{1, 1})),
			call(poll("t", "g", "a", 64), both(2, 2)), // 7
			call(rejoin("t", "g", "b"), parts(1)),     // 8: a Join
			call(ack("t", "g", "a", 1, 0), ok(false)),
			call(ack("t", "g", "a", 0, 0), ok(true)),
		)
	}
	for _, opts := range []porcupine.Options{{}, {SessionTimeout: time.Minute, TestClock: true}} {
		name := "no session timeout"
		if opts.SessionTimeout > 0 {
			name = "session timeout"
		}
		t.Run(name, func(t *testing.T) {
			base := base
			if opts.SessionTimeout == 0 {
				timed := base
				base = func() []porcupine.Op {
					ops := timed()
					for i := range ops { // no test clock: no times, no last-seen
						for j := range ops[i].Out.Records {
							ops[i].Out.Records[j].Time = time.Time{}
						}
						if d := ops[i].Out.Desc; d != nil {
							d.Groups[0].LastSeen = nil
						}
					}
					return ops
				}
			}
			checkEdits(t, 10, opts, base, []edit{
				{"rejoin keeps the deliveries", func(ops []porcupine.Op) {
					ops[6].Out.Desc.Groups[0].Partitions[0].InFlight = true
					ops[6].Out.Desc.Groups[0].Partitions[1].InFlight = true
					ops[7].Out = porcupine.Output{}
				}, porc.Illegal},
				{"rejoin resets attempts", func(ops []porcupine.Op) {
					for j := range ops[7].Out.Records {
						ops[7].Out.Records[j].Attempt = 1
					}
				}, porc.Illegal},
				{"rejoin rebalances", func(ops []porcupine.Op) { ops[5].Out = parts(0) }, porc.Illegal},
				{"rejoin of a non-member is not a join", func(ops []porcupine.Op) { ops[8].Out = parts() }, porc.Illegal},
			})
		})
	}
}
