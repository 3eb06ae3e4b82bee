package porcupine_test

import (
	"testing"
	"time"

	porc "github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/porcupine"
)

// rec is a Poll result of one record of topic "t".
func rec(p int32, off int64, payload string, attempt int32) porcupine.Output {
	return porcupine.Output{Records: []porcupine.Record{{Topic: "t", Partition: p, Offset: off, Payload: payload, Attempt: attempt}}}
}

// at sets the Time of every record of a Poll result.
func at(t time.Duration, out porcupine.Output) porcupine.Output {
	for i := range out.Records {
		out.Records[i].Time = porcupine.Epoch.Add(t)
	}
	return out
}

// edit is a change to a sequential history that a test expects to turn it
// Illegal (or keep it Ok).
type edit struct {
	name  string
	apply func(ops []porcupine.Op)
	wwant porc.CheckResult
}

// checkEdits checks the sequential history base (Ok as it is) and each
// edited copy against the model.
func checkEdits(t *testing.T, capacity int32, opts porcupine.Options, base func() []porcupine.Op, edits []edit) {
	t.Helper()
	require.Equal(t, porc.Ok, verdict(t, capacity, base(), opts), "the unedited history")
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			ops := base()
			e.apply(ops)
			require.Equal(t, e.wwant, verdict(t, capacity, ops, opts))
		})
	}
}

// docs/contract.md's replay-window example (rule 21): capacity 3, window 2.
func TestModelReplayWindow(t *testing.T) {
	base := func() []porcupine.Op {
		return sequential(
			call(create("t", 1), ok(true)),
			call(join("t", "g", "m"), parts(0)),
			call(publish("t", 0, "a"), offset(0)),
			call(publish("t", 0, "b"), offset(1)),
			call(publish("t", 0, "c"), offset(2)),
			call(poll("t", "g", "m", 1), rec(0, 0, "a", 1)),
			call(ack("t", "g", "m", 0, 0), ok(true)),
			call(poll("t", "g", "m", 1), rec(0, 1, "b", 1)),
			call(ack("t", "g", "m", 0, 1), ok(true)),
			call(publishMessage("t", 0, "k", "d"), offset(3)), // 9: removes offset 0
			call(seek("t", "g", 0, 1), ok(true)),
			call(publish("t", 0, "e"), offset(-1)),
			call(poll("t", "g", "m", 1), rec(0, 1, "b", 1)),
			call(ack("t", "g", "m", 0, 1), ok(true)),
			call(publish("t", 0, "e"), offset(4)), // 14: removes offset 1
			call(describe("t"), porcupine.Output{Desc: &porcupine.TopicDescription{Topic: "t",
				Partitions: []porcupine.PartitionDescription{{LogStartOffset: 2, LogEndOffset: 5}},
				Groups: []porcupine.GroupDescription{{Group: "g", Assignor: "RoundRobin", Members: []string{"m"},
					Partitions: []porcupine.GroupPartition{{Owner: "m", Committed: 2, Lag: 3}}}}}}),
		)
	}
	checkEdits(t, 3, porcupine.Options{ReplayWindow: 2}, base, []edit{
		{"full partition refuses although the window can give", func(ops []porcupine.Op) { ops[9].Out = offset(-1) }, porc.Illegal},
		{"seek below the log start", func(ops []porcupine.Op) {
			ops[10].In.Offset, ops[10].Out = 0, fails(porcupine.ErrOutOfRange)
			ops[11].Out, ops[12].Out, ops[13].In.Offset = offset(4), rec(0, 2, "c", 1), 2
			ops[14].Out = offset(5)
			ops[15].Out.Desc.Partitions[0] = porcupine.PartitionDescription{LogStartOffset: 3, LogEndOffset: 6}
			ops[15].Out.Desc.Groups[0].Partitions[0] = porcupine.GroupPartition{Owner: "m", Committed: 3, Lag: 3}
		}, porc.Ok},
		{"seek keeps the record in flight", func(ops []porcupine.Op) { ops[12].Out = porcupine.Output{} }, porc.Illegal},
		{"describe with a stale log start", func(ops []porcupine.Op) { ops[15].Out.Desc.Partitions[0].LogStartOffset = 1 }, porc.Illegal},
		{"describe with a wrong lag", func(ops []porcupine.Op) { ops[15].Out.Desc.Groups[0].Partitions[0].Lag = 2 }, porc.Illegal},
		{"a polled record loses its key", func(ops []porcupine.Op) { ops[2].In = publishMessage("t", 0, "k", "a") }, porc.Illegal},
		{"a polled record loses its headers", func(ops []porcupine.Op) {
			ops[3].In = publishMessage("t", 0, "", "b", porcupine.Header{Key: "h", Value: "v"})
			ops[7].Out.Records[0].Headers = []porcupine.Header{{Key: "h", Value: "v"}}
		}, porc.Illegal}, // the replay at 12 lost them
	})
}

// Ack timeout on a test clock (SPEC rule 22): capacity 2, timeout 10 s.
func TestModelAckTimeout(t *testing.T) {
	base := func() []porcupine.Op {
		return sequential(
			call(create("t", 1), ok(true)),
			call(join("t", "g", "m"), parts(0)),
			call(advance("t", time.Second), now(time.Second)),
			call(publish("t", 0, "a"), offset(0)),
			call(poll("t", "g", "m", 1), at(time.Second, rec(0, 0, "a", 1))),
			call(advance("t", 5*time.Second), now(6*time.Second)),
			call(poll("t", "g", "m", 1), porcupine.Output{}), // 6: 5 s old, not expired
			call(advance("t", 5*time.Second), now(11*time.Second)),
			call(poll("t", "g", "m", 1), at(time.Second, rec(0, 0, "a", 2))), // 8: 10 s old: delivered again
			call(poll("t", "g", "m", 1), porcupine.Output{}),
			call(ack("t", "g", "m", 0, 0), ok(true)),
		)
	}
	opts := porcupine.Options{AckTimeout: 10 * time.Second, TestClock: true}
	checkEdits(t, 2, opts, base, []edit{
		{"expired early", func(ops []porcupine.Op) { ops[6].Out = at(time.Second, rec(0, 0, "a", 2)) }, porc.Illegal},
		{"not expired at the timeout", func(ops []porcupine.Op) { ops[8].Out = porcupine.Output{} }, porc.Illegal},
		{"the redelivery is attempt 1", func(ops []porcupine.Op) { ops[8].Out = at(time.Second, rec(0, 0, "a", 1)) }, porc.Illegal},
		{"a record stamped at the poll, not the publish", func(ops []porcupine.Op) { ops[4].Out = at(0, rec(0, 0, "a", 1)) }, porc.Illegal},
		{"the clock moves by another amount", func(ops []porcupine.Op) { ops[5].Out = now(5 * time.Second) }, porc.Illegal},
		{"an explicit message time is kept", func(ops []porcupine.Op) {
			ops[3].In = porcupine.Input{Kind: porcupine.KindPublishMessage, Topic: "t", Payload: "a", Time: porcupine.Epoch.Add(time.Hour)}
			ops[4].Out = at(time.Hour, rec(0, 0, "a", 1))
			ops[8].Out = at(time.Hour, rec(0, 0, "a", 2))
		}, porc.Ok},
		{"an advance overlapping a poll may come first", func(ops []porcupine.Op) {
			ops[7].Call, ops[7].Return, ops[7].Client = ops[6].Call, ops[6].Return, 1
			ops[6].Out = at(time.Second, rec(0, 0, "a", 2))
			ops[8].Out = porcupine.Output{}
		}, porc.Ok},
	})
}

// Group lifecycle (SPEC rule 17) and assignors (rule 18): capacity 1.
func TestModelGroups(t *testing.T) {
	base := func() []porcupine.Op {
		return sequential(
			call(create("t", 2), ok(true)),
			call(createGroup("t", "g1", "Range"), ok(true)),
			call(createGroup("t", "g1", "Sticky"), ok(false)),
			call(createGroup("t", "g2", "Picky"), ok(true)),
			call(join("t", "g2", "m0"), parts(0, 1)),
			call(join("t", "g2", "m1"), parts(1)),
			call(join("t", "g2", "m2"), fails(porcupine.ErrAssignment)), // 6: Picky refuses three members
			call(publish("t", 0, "a"), offset(0)),
			call(poll("t", "g2", "m0", 2), rec(0, 0, "a", 1)),
			call(ack("t", "g2", "m0", 0, 0), ok(true)),
			call(publish("t", 0, "b"), offset(-1)), // 10: g1 still needs "a"
			call(deleteGroup("t", "g2"), fails(porcupine.ErrNotEmpty)),
			call(deleteGroup("t", "g1"), ok(true)), // 12: "a" goes at once
			call(deleteGroup("t", "g1"), ok(false)),
			call(publish("t", 0, "b"), offset(1)),
			call(setAssignor("t", "g2", "RoundRobin"), ok(true)),
			call(setAssignor("t", "g3", "RoundRobin"), ok(false)),
			call(setAssignor("t", "g2", ""), invalid()),
			call(join("t", "g2", "m2"), parts()),
			call(addPartitions("t", 2), count(4)),
			call(join("t", "g2", "m0"), parts(0, 3)),
		)
	}
	checkEdits(t, 1, porcupine.Options{}, base, []edit{
		{"Picky accepts three members", func(ops []porcupine.Op) { ops[6].Out = parts() }, porc.Illegal},
		{"a deleted group keeps holding retention", func(ops []porcupine.Op) { ops[14].Out = offset(-1) }, porc.Illegal},
		{"the memberless group does not hold retention", func(ops []porcupine.Op) { ops[10].Out = offset(1) }, porc.Illegal},
		{"delete of a group with members", func(ops []porcupine.Op) {
			ops[11].In.Group = "g1"
			ops[11].Out = ok(true)
			ops[12].Out = ok(false)
		}, porc.Ok},
		{"errors compare by kind", func(ops []porcupine.Op) { ops[11].Out = fails(porcupine.ErrInvalid) }, porc.Illegal},
	})
}

// TestModelVersion0 checks that a version 0 history is checked as recorded:
// no attempts, and an invalid Publish recorded with offset 0.
func TestModelVersion0(t *testing.T) {
	ops := sequential(
		call(create("t", 1), ok(true)),
		call(publish("t", 0, "p0o0"), offset(0)),
		call(join("t", "g", "m"), parts(0)),
		call(poll("t", "g", "m", 1), attempt(0, recs(0, 0))),
		call(publish("t", 2, "x"), invalid()),
	)
	c := porcupine.Config{Capacity: 2}
	require.Equal(t, porc.Ok, porcupine.Check(porcupine.History{Config: c, Ops: ops}, 0).Verdict)
	c.Version = porcupine.HistoryVersion
	require.Equal(t, porc.Illegal, porcupine.Check(porcupine.History{Config: c, Ops: ops}, 0).Verdict)
}
