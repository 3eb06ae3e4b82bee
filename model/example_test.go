package model_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/f91dcac0/tributary/model"
)

// docs/contract.md's orders example (capacity 2), call by call. A fixed clock makes
// the records' times known.
func Example() {
	clock := func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }
	b, _ := model.New(2, model.WithClock(clock))
	show := func(rs []model.Record, err error) {
		for _, r := range rs {
			fmt.Printf("%s/%d/%d %q attempt %d; ", r.Topic, r.Partition, r.Offset, r.Payload, r.Attempt)
		}
		fmt.Println(err)
	}
	fmt.Println(b.Create("orders", 1))
	fmt.Println(b.Publish("orders", 0, "a"))
	fmt.Println(b.Publish("orders", 0, "b"))
	fmt.Println(b.Join("orders", "billing", "m1"))
	show(b.Poll("orders", "billing", "m1", 2))
	fmt.Println(b.Retry("orders", "billing", "m1", 0, 0))
	show(b.Poll("orders", "billing", "m1", 2))
	fmt.Println(b.Ack("orders", "billing", "m1", 0, 0))
	show(b.Poll("orders", "billing", "m1", 2))
	fmt.Print(b)
	// Output:
	// true <nil>
	// 0 <nil>
	// 1 <nil>
	// [0] <nil>
	// orders/0/0 "a" attempt 1; <nil>
	// true <nil>
	// orders/0/0 "a" attempt 2; <nil>
	// true <nil>
	// orders/0/1 "b" attempt 1; <nil>
	// capacity=2
	// topic orders partitions=1
	//   log p0 [1,2) "b"{time=2025-01-02T03:04:05Z}
	//   group billing assignor=RoundRobin members=[m1]
	//     p0 owner=m1 committed=1 attempts=1 inflight
}

// docs/contract.md's rebalance example: b joins a three-partition topic that a owns.
func ExampleBroker_Join() {
	b, _ := model.New(10)
	b.Create("t", 3)
	for p := range int32(3) {
		b.Publish("t", p, "x")
	}
	fmt.Println(b.Join("t", "g", "a"))
	b.Poll("t", "g", "a", 64) // a reserves offset 0 of partitions 0, 1 and 2
	fmt.Println(b.Join("t", "g", "b"))
	fmt.Println(b.Assignment("t", "g"))
	rs, _ := b.Poll("t", "g", "b", 64)
	fmt.Println(rs[0].Partition, rs[0].Offset, rs[0].Attempt)
	fmt.Println(b.Ack("t", "g", "a", 1, 0))
	// Output:
	// [0 1 2] <nil>
	// [1] <nil>
	// map[a:[0 2] b:[1]] <nil>
	// 1 0 2
	// false <nil>
}

// Every invalid call wraps ErrInvalidArgument and changes nothing.
func ExampleErrInvalidArgument() {
	b, _ := model.New(1)
	b.Create("t", 1)
	before := b.Clone()
	_, err := b.Join("t", "g", "bad id")
	fmt.Println(errors.Is(err, model.ErrInvalidArgument), b.Equal(before))
	fmt.Println(err)
	_, err = b.Publish("t", 1, "x")
	fmt.Println(err)
	// Output:
	// true true
	// invalid argument: member id "bad id": byte 0x20 at 3 is not one of A-Z a-z 0-9 _ -
	// invalid argument: topic "t": partition 1 out of range [0,1)
}

// A message carries a key, headers and a creation time; Poll returns them
// with the delivery's attempt number. WithMaxMessageBytes bounds the key,
// header and payload bytes together.
func ExampleBroker_PublishMessage() {
	clock := func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }
	b, _ := model.New(10, model.WithClock(clock), model.WithMaxMessageBytes(16))
	b.Create("orders", 1)
	fmt.Println(b.PublishMessage("orders", 0, model.Message{
		Key:     "cust-7",
		Headers: []model.Header{{Key: "v", Value: "2"}},
		Payload: "paid",
	}))
	fmt.Println(b.PublishMessage("orders", 0, model.Message{Key: "cust-7", Payload: "a payload too long"}))
	b.Join("orders", "billing", "m1")
	rs, _ := b.Poll("orders", "billing", "m1", 8)
	r := rs[0]
	fmt.Println(r.Offset, r.Key, r.Headers, r.Payload, r.Time.Format(time.RFC3339), r.Attempt)
	// Output:
	// 0 <nil>
	// -1 invalid argument: topic "orders": partition 0: message of 24 bytes exceeds the limit of 16
	// 0 cust-7 [{v 2}] paid 2025-01-02T03:04:05Z 1
}

// CreateGroup makes an empty group with a chosen assignor, at the log start,
// before any member joins; an existing group is left as it is.
func ExampleBroker_CreateGroup() {
	b, _ := model.New(10)
	b.Create("t", 4)
	fmt.Println(b.CreateGroup("t", "g", model.Range))
	fmt.Println(b.CreateGroup("t", "g", model.Sticky))
	fmt.Println(b.Join("t", "g", "a"))
	fmt.Println(b.Join("t", "g", "b"))
	d, _ := b.Describe("t")
	fmt.Println(d.Groups[0].Assignor)
	// Output:
	// true <nil>
	// false <nil>
	// [0 1 2 3] <nil>
	// [2 3] <nil>
	// Range
}

// An abandoned group holds records back from retention until it is
// deleted: here the topic fills up and publishes fail until DeleteGroup.
func ExampleBroker_DeleteGroup() {
	b, _ := model.New(2)
	b.Create("t", 1)
	b.Join("t", "old", "m")
	b.Leave("t", "old", "m") // old has no members but still counts
	b.Join("t", "live", "m")
	for _, s := range []string{"a", "b"} {
		b.Publish("t", 0, s)
		rs, _ := b.Poll("t", "live", "m", 1)
		b.Ack("t", "live", "m", 0, rs[0].Offset)
	}
	fmt.Println(b.Publish("t", 0, "c"))
	_, err := b.DeleteGroup("t", "live")
	fmt.Println(errors.Is(err, model.ErrGroupNotEmpty))
	fmt.Println(b.DeleteGroup("t", "old"))
	fmt.Println(b.Publish("t", 0, "c"))
	// Output:
	// -1 <nil>
	// true
	// true <nil>
	// 2 <nil>
}

// SetAssignor switches a group's assignor and rebalances at once.
func ExampleBroker_SetAssignor() {
	b, _ := model.New(10)
	b.Create("t", 4)
	b.Join("t", "g", "a")
	b.Join("t", "g", "b")
	fmt.Println(b.Assignment("t", "g"))
	fmt.Println(b.SetAssignor("t", "g", model.Range))
	fmt.Println(b.Assignment("t", "g"))
	fmt.Println(b.SetAssignor("t", "absent", model.Range))
	// Output:
	// map[a:[0 2] b:[1 3]] <nil>
	// true <nil>
	// map[a:[0 1] b:[2 3]] <nil>
	// false <nil>
}

// AddPartitions grows a topic; every group is rebalanced over the new
// partitions at the same instant, and starts on them at offset 0.
func ExampleBroker_AddPartitions() {
	b, _ := model.New(10)
	b.Create("t", 2)
	b.Join("t", "g", "a")
	b.Join("t", "g", "b")
	fmt.Println(b.AddPartitions("t", 2))
	fmt.Println(b.Assignment("t", "g"))
	fmt.Println(b.Committed("t", "g", 3))
	_, err := b.AddPartitions("t", 61)
	fmt.Println(err)
	// Output:
	// 4 <nil>
	// map[a:[0 2] b:[1 3]] <nil>
	// 0 <nil>
	// invalid argument: topic "t": adding 61 partitions to 4: want 1 to 64 in all
}

// Seek replays records kept by the replay window.
func ExampleBroker_Seek() {
	b, _ := model.New(4, model.WithReplayWindow(2))
	b.Create("t", 1)
	b.Join("t", "g", "m")
	for _, s := range []string{"a", "b"} {
		b.Publish("t", 0, s)
		rs, _ := b.Poll("t", "g", "m", 1)
		b.Ack("t", "g", "m", 0, rs[0].Offset)
	}
	fmt.Println(b.Seek("t", "g", 0, 0))
	rs, _ := b.Poll("t", "g", "m", 1)
	fmt.Println(rs[0].Offset, rs[0].Payload, rs[0].Attempt)
	_, err := b.Seek("t", "g", 0, 3)
	fmt.Println(errors.Is(err, model.ErrOffsetOutOfRange), err)
	// Output:
	// true <nil>
	// 0 a 1
	// true offset out of range: topic "t": partition 0: offset 3 outside [0,2]
}

// Describe returns one snapshot of a topic's logs and groups.
func ExampleBroker_Describe() {
	b, _ := model.New(10)
	b.Create("t", 2)
	b.Publish("t", 0, "a")
	b.Publish("t", 0, "b")
	b.Join("t", "g", "m")
	b.Poll("t", "g", "m", 1)
	d, _ := b.Describe("t")
	fmt.Printf("%+v\n", d.Partitions)
	fmt.Println(d.Groups[0].Group, d.Groups[0].Assignor, d.Groups[0].Members)
	for _, p := range d.Groups[0].Partitions {
		fmt.Printf("%+v\n", p)
	}
	// Output:
	// [{Partition:0 LogStartOffset:0 LogEndOffset:2} {Partition:1 LogStartOffset:0 LogEndOffset:0}]
	// g RoundRobin [m]
	// {Partition:0 Owner:m Committed:0 InFlight:true Attempts:1 Lag:2}
	// {Partition:1 Owner:m Committed:0 InFlight:false Attempts:0 Lag:0}
}

// docs/contract.md's replay-window example (rule 21), call by call.
func ExampleWithReplayWindow() {
	b, _ := model.New(3, model.WithReplayWindow(2))
	b.Create("t", 1)
	b.Join("t", "g", "m")
	var offsets []int64
	for _, s := range []string{"a", "b", "c"} {
		off, _ := b.Publish("t", 0, s)
		offsets = append(offsets, off)
	}
	fmt.Println(offsets) // full
	for off := range int64(2) {
		b.Poll("t", "g", "m", 1)
		b.Ack("t", "g", "m", 0, off)
	}
	fmt.Println(b.LogStartOffset("t", 0))
	fmt.Println(b.Publish("t", 0, "d"))
	fmt.Println(b.Seek("t", "g", 0, 1))
	fmt.Println(b.Publish("t", 0, "e"))
	rs, _ := b.Poll("t", "g", "m", 1)
	fmt.Println(rs[0].Offset, rs[0].Payload, rs[0].Attempt)
	fmt.Println(b.Ack("t", "g", "m", 0, 1))
	fmt.Println(b.Publish("t", 0, "e"))
	fmt.Println(b.LogStartOffset("t", 0))
	// Output:
	// [0 1 2]
	// 0 <nil>
	// 3 <nil>
	// true <nil>
	// -1 <nil>
	// 1 b 1
	// true <nil>
	// 4 <nil>
	// 2 <nil>
}

// With an ack timeout, a delivery left unacknowledged for the timeout is
// delivered again by the owner's next Poll; until then it can still be
// acknowledged.
func ExampleWithAckTimeout() {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	b, _ := model.New(10, model.WithAckTimeout(30*time.Second), model.WithClock(func() time.Time { return now }))
	b.Create("t", 1)
	b.Publish("t", 0, "a")
	b.Join("t", "g", "m")
	rs, _ := b.Poll("t", "g", "m", 1)
	fmt.Println(len(rs), rs[0].Attempt)
	now = now.Add(29 * time.Second)
	rs, _ = b.Poll("t", "g", "m", 1)
	fmt.Println(len(rs))
	now = now.Add(time.Second)
	rs, _ = b.Poll("t", "g", "m", 1)
	fmt.Println(len(rs), rs[0].Attempt)
	fmt.Println(b.Ack("t", "g", "m", 0, 0))
	// Output:
	// 1 1
	// 0
	// 1 2
	// true <nil>
}

// wrongAssignor answers an owner that is not a member.
type wrongAssignor struct{}

func (wrongAssignor) Name() string { return "wrong" }
func (wrongAssignor) Assign(members, previous []string) []string {
	owners := make([]string, len(previous))
	for p := range owners {
		owners[p] = "stranger"
	}
	return owners
}

// A user assignor whose answer is not one current member per partition
// makes the rebalancing call fail and change nothing.
func ExampleErrInvalidAssignment() {
	b, _ := model.New(10)
	b.Create("t", 2)
	b.CreateGroup("t", "g", wrongAssignor{})
	before := b.Clone()
	_, err := b.Join("t", "g", "m")
	fmt.Println(errors.Is(err, model.ErrInvalidAssignment), b.Equal(before))
	fmt.Println(b.Members("t", "g"))
	// Output:
	// true true
	// [] <nil>
}

// SPEC section 3.4's worked example (rule 24): a's session runs out while
// b heartbeats, and b's poll at t=15s first expires a.
func ExampleWithSessionTimeout() {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	now := start
	b, _ := model.New(10, model.WithSessionTimeout(10*time.Second), model.WithClock(func() time.Time { return now }))
	at := func(s int) { now = start.Add(time.Duration(s) * time.Second) }
	b.Create("t", 2)
	b.Publish("t", 0, "r0")
	b.Publish("t", 1, "r1")
	fmt.Println(b.Join("t", "g", "a"))
	at(1)
	fmt.Println(b.Join("t", "g", "b"))
	at(2)
	rs, _ := b.Poll("t", "g", "a", 1)
	fmt.Println("a polls", rs[0].Partition, rs[0].Offset)
	at(9)
	fmt.Println(b.Heartbeat("t", "g", "b"))
	at(15)
	rs, _ = b.Poll("t", "g", "b", 64)
	for _, r := range rs {
		fmt.Printf("b polls p%d@%d attempt %d\n", r.Partition, r.Offset, r.Attempt)
	}
	at(16)
	fmt.Println(b.Ack("t", "g", "a", 0, 0))
	fmt.Println(b.Heartbeat("t", "g", "a"))
	fmt.Println(b.Members("t", "g"))
	// Output:
	// [0 1] <nil>
	// [1] <nil>
	// a polls 0 0
	// true <nil>
	// b polls p0@0 attempt 2
	// b polls p1@0 attempt 1
	// false <nil>
	// false <nil>
	// [b] <nil>
}

// Rule 25: a restarted process rejoins under the same member name and gets
// its predecessor's deliveries again at once, without a rebalance.
func ExampleBroker_Rejoin() {
	b, _ := model.New(10)
	b.Create("t", 2)
	b.Publish("t", 0, "r0")
	b.Publish("t", 1, "r1")
	b.Join("t", "g", "a")
	rs, _ := b.Poll("t", "g", "a", 64) // the old incarnation dies with both in flight
	fmt.Println(len(rs), "in flight")
	fmt.Println(b.Rejoin("t", "g", "a"))
	rs, _ = b.Poll("t", "g", "a", 64)
	for _, r := range rs {
		fmt.Printf("p%d@%d attempt %d\n", r.Partition, r.Offset, r.Attempt)
	}
	// Output:
	// 2 in flight
	// [0 1] <nil>
	// p0@0 attempt 2
	// p1@0 attempt 2
}
