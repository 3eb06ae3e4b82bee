package engine_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// PublishMessage stores a key, ordered headers and a creation time with the
// payload; Poll returns them, with the record's Attempt. A message over
// WithMaxMessageBytes is an invalid argument and gets no offset.
func ExampleBroker_PublishMessage() {
	b, err := engine.New(100, engine.WithMaxMessageBytes(64))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := b.Create("orders", 1); err != nil {
		log.Fatal(err)
	}
	created := time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)
	off, err := b.PublishMessage("orders", 0, engine.Message{
		Key:     "customer-7",
		Headers: []engine.Header{{Key: "trace", Value: "ab12"}, {Key: "retry", Value: "no"}},
		Payload: `{"id":7}`,
		Time:    created,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("offset:", off)

	off, err = b.PublishMessage("orders", 0, engine.Message{Payload: string(make([]byte, 65))})
	fmt.Println("too big:", off, errors.Is(err, engine.ErrInvalidArgument))

	if _, err := b.Join("orders", "billing", "m1"); err != nil {
		log.Fatal(err)
	}
	recs, err := b.Poll("orders", "billing", "m1", 10)
	if err != nil {
		log.Fatal(err)
	}
	r := recs[0]
	fmt.Println(r.Offset, r.Key, r.Headers, r.Payload, r.Time.Equal(created), "attempt", r.Attempt)
	// Output:
	// offset: 0
	// too big: -1 true
	// 0 customer-7 [{trace ab12} {retry no}] {"id":7} true attempt 1
}

// CreateGroup makes a group before any member joins, with the assignor of
// your choice; the group starts at the log start and holds records back
// from retention from then on.
func ExampleBroker_CreateGroup() {
	b, err := engine.New(100)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := b.Create("orders", 4); err != nil {
		log.Fatal(err)
	}
	ok, err := b.CreateGroup("orders", "billing", engine.Range)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", ok)
	ok, err = b.CreateGroup("orders", "billing", engine.Sticky)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created again:", ok)

	for _, m := range []string{"m1", "m2"} {
		if _, err := b.Join("orders", "billing", m); err != nil {
			log.Fatal(err)
		}
	}
	d, err := b.Describe("orders")
	if err != nil {
		log.Fatal(err)
	}
	g := d.Groups[0]
	fmt.Println(g.Group, g.Assignor, g.Members)
	for _, p := range g.Partitions {
		fmt.Printf("partition %d: %s\n", p.Partition, p.Owner)
	}
	// Output:
	// created: true
	// created again: false
	// billing Range [m1 m2]
	// partition 0: m1
	// partition 1: m1
	// partition 2: m2
	// partition 3: m2
}

// DeleteGroup removes an abandoned group: it stops holding records back at
// once, so a topic it kept full takes publishes again. A group with members
// cannot be deleted.
func ExampleBroker_DeleteGroup() {
	b, err := engine.New(2)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := b.Create("orders", 1); err != nil {
		log.Fatal(err)
	}
	if _, err := b.CreateGroup("orders", "abandoned", engine.RoundRobin); err != nil {
		log.Fatal(err)
	}
	if _, err := b.Join("orders", "billing", "m1"); err != nil {
		log.Fatal(err)
	}
	for _, s := range []string{"a", "b"} {
		if _, err := b.Publish("orders", 0, s); err != nil {
			log.Fatal(err)
		}
	}
	for range 2 { // billing consumes both records
		recs, err := b.Poll("orders", "billing", "m1", 1)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := b.Ack("orders", "billing", "m1", 0, recs[0].Offset); err != nil {
			log.Fatal(err)
		}
	}
	off, _ := b.Publish("orders", 0, "c")
	fmt.Println("publish while abandoned holds a and b:", off)

	_, err = b.DeleteGroup("orders", "billing")
	fmt.Println("billing has members:", errors.Is(err, engine.ErrGroupNotEmpty))

	ok, err := b.DeleteGroup("orders", "abandoned")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted:", ok)
	off, _ = b.Publish("orders", 0, "c")
	fmt.Println("publish after:", off)
	// Output:
	// publish while abandoned holds a and b: -1
	// billing has members: true
	// deleted: true
	// publish after: 2
}

// SetAssignor switches a live group's assignor and rebalances at once: a
// partition that changes owner loses its in-flight delivery, which its new
// owner then gets with Attempt 2.
func ExampleBroker_SetAssignor() {
	b, err := engine.New(10)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := b.Create("orders", 4); err != nil {
		log.Fatal(err)
	}
	for p := range int32(4) {
		if _, err := b.Publish("orders", p, fmt.Sprint("order-", p)); err != nil {
			log.Fatal(err)
		}
	}
	for _, m := range []string{"a", "b"} {
		if _, err := b.Join("orders", "billing", m); err != nil {
			log.Fatal(err)
		}
	}
	for _, m := range []string{"a", "b"} { // a holds 0 and 2, b holds 1 and 3
		if _, err := b.Poll("orders", "billing", m, 4); err != nil {
			log.Fatal(err)
		}
	}

	if _, err := b.SetAssignor("orders", "billing", engine.Range); err != nil {
		log.Fatal(err)
	}
	for _, m := range []string{"a", "b"} {
		parts, err := b.Join("orders", "billing", m) // joining again: its partitions
		if err != nil {
			log.Fatal(err)
		}
		recs, err := b.Poll("orders", "billing", m, 4)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			fmt.Printf("%s owns %v, gets %s again: attempt %d\n", m, parts, r.Payload, r.Attempt)
		}
	}
	// Output:
	// a owns [0 1], gets order-1 again: attempt 2
	// b owns [2 3], gets order-2 again: attempt 2
}

// AddPartitions grows a topic; the new partitions start empty at offset 0
// and every group is rebalanced over them at the same instant.
func ExampleBroker_AddPartitions() {
	b, err := engine.New(10)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := b.Create("orders", 2); err != nil {
		log.Fatal(err)
	}
	for _, m := range []string{"a", "b"} {
		if _, err := b.Join("orders", "billing", m); err != nil {
			log.Fatal(err)
		}
	}
	total, err := b.AddPartitions("orders", 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("partitions:", total)
	parts, err := b.Join("orders", "billing", "b")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("b owns", parts)
	off, err := b.Publish("orders", 3, "x")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first offset of partition 3:", off)

	_, err = b.AddPartitions("orders", 61) // 65 in all
	fmt.Println("beyond 64:", errors.Is(err, engine.ErrInvalidArgument))
	// Output:
	// partitions: 4
	// b owns [1 3]
	// first offset of partition 3: 0
	// beyond 64: true
}

// Seek moves a group on one partition: backward to replay what is still
// retained, forward to skip. Offsets outside the retained log are refused.
func ExampleBroker_Seek() {
	b, err := engine.New(10, engine.WithReplayWindow(10)) // keep consumed records for replay
	if err != nil {
		log.Fatal(err)
	}
	if _, err := b.Create("orders", 1); err != nil {
		log.Fatal(err)
	}
	if _, err := b.Join("orders", "billing", "m1"); err != nil {
		log.Fatal(err)
	}
	for _, s := range []string{"a", "b", "c"} {
		if _, err := b.Publish("orders", 0, s); err != nil {
			log.Fatal(err)
		}
	}
	consume := func() {
		var got []string
		for {
			recs, err := b.Poll("orders", "billing", "m1", 1)
			if err != nil {
				log.Fatal(err)
			}
			if len(recs) == 0 {
				fmt.Println(got)
				return
			}
			got = append(got, recs[0].Payload)
			if _, err := b.Ack("orders", "billing", "m1", 0, recs[0].Offset); err != nil {
				log.Fatal(err)
			}
		}
	}
	consume()
	if _, err := b.Seek("orders", "billing", 0, 1); err != nil {
		log.Fatal(err)
	}
	consume()
	_, err = b.Seek("orders", "billing", 0, 4)
	fmt.Println("past the log end:", errors.Is(err, engine.ErrOffsetOutOfRange))
	ok, err := b.Seek("orders", "nobody", 0, 0)
	fmt.Println("absent group:", ok, err)
	// Output:
	// [a b c]
	// [b c]
	// past the log end: true
	// absent group: false <nil>
}

// Describe is one consistent snapshot of a topic: log offsets per
// partition and, per group, owners, committed offsets, deliveries in flight
// and lag.
func ExampleBroker_Describe() {
	b, err := engine.New(10)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := b.Create("orders", 2); err != nil {
		log.Fatal(err)
	}
	if _, err := b.Join("orders", "billing", "m1"); err != nil {
		log.Fatal(err)
	}
	for _, p := range []int32{0, 0, 1} {
		if _, err := b.Publish("orders", p, "x"); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := b.Poll("orders", "billing", "m1", 1); err != nil { // partition 0, offset 0
		log.Fatal(err)
	}
	d, err := b.Describe("orders")
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range d.Partitions {
		fmt.Printf("partition %d: log [%d, %d)\n", p.Partition, p.LogStartOffset, p.LogEndOffset)
	}
	for _, g := range d.Groups {
		fmt.Println(g.Group, g.Assignor, g.Members)
		for _, p := range g.Partitions {
			fmt.Printf("  %d: owner %s committed %d in flight %v attempts %d lag %d\n",
				p.Partition, p.Owner, p.Committed, p.InFlight, p.Attempts, p.Lag)
		}
	}
	// Output:
	// partition 0: log [0, 2)
	// partition 1: log [0, 1)
	// billing RoundRobin [m1]
	//   0: owner m1 committed 0 in flight true attempts 1 lag 2
	//   1: owner m1 committed 0 in flight false attempts 0 lag 1
}

// WithReplayWindow keeps the most recent fully committed records, so that a
// group can Seek back to them; a publish to a full partition gives up the
// oldest of them (docs/contract.md's replay-window example).
func ExampleWithReplayWindow() {
	b, err := engine.New(3, engine.WithReplayWindow(2))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := b.Create("t", 1); err != nil {
		log.Fatal(err)
	}
	if _, err := b.Join("t", "g", "m"); err != nil {
		log.Fatal(err)
	}
	publish := func(s string) {
		off, err := b.Publish("t", 0, s)
		if err != nil {
			log.Fatal(err)
		}
		start, err := b.LogStartOffset("t", 0)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("publish %s: %d (log start %d)\n", s, off, start)
	}
	for _, s := range []string{"a", "b", "c"} {
		publish(s)
	}
	for off := range int64(2) { // consume a and b: they stay as the window
		if _, err := b.Poll("t", "g", "m", 1); err != nil {
			log.Fatal(err)
		}
		if _, err := b.Ack("t", "g", "m", 0, off); err != nil {
			log.Fatal(err)
		}
	}
	publish("d") // removes a, the oldest fully committed record
	if _, err := b.Seek("t", "g", 0, 1); err != nil {
		log.Fatal(err)
	}
	publish("e") // b, c and d are all needed by g now
	recs, err := b.Poll("t", "g", "m", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replayed:", recs[0].Offset, recs[0].Payload)
	// Output:
	// publish a: 0 (log start 0)
	// publish b: 1 (log start 0)
	// publish c: 2 (log start 0)
	// publish d: 3 (log start 1)
	// publish e: -1 (log start 1)
	// replayed: 1 b
}

// WithAckTimeout redelivers a delivery that was not acked in time, to the
// same member's next poll, with Attempt + 1. WithClock makes time a test's.
func ExampleWithAckTimeout() {
	now := time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)
	b, err := engine.New(10,
		engine.WithAckTimeout(30*time.Second),
		engine.WithClock(func() time.Time { return now }))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := b.Create("orders", 1); err != nil {
		log.Fatal(err)
	}
	if _, err := b.Join("orders", "billing", "m1"); err != nil {
		log.Fatal(err)
	}
	if _, err := b.Publish("orders", 0, "a"); err != nil {
		log.Fatal(err)
	}
	for _, wait := range []time.Duration{0, 29 * time.Second, time.Second} {
		now = now.Add(wait)
		recs, err := b.Poll("orders", "billing", "m1", 1)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			fmt.Printf("after %v: %s, attempt %d\n", wait, r.Payload, r.Attempt)
		}
		if len(recs) == 0 {
			fmt.Printf("after %v: nothing (still in flight)\n", wait)
		}
	}
	ok, err := b.Ack("orders", "billing", "m1", 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acked:", ok)
	// Output:
	// after 0s: a, attempt 1
	// after 29s: nothing (still in flight)
	// after 1s: a, attempt 2
	// acked: true
}
