package engine_test

import (
	"errors"
	"fmt"

	"github.com/f91dcac0/tributary/engine"
)

// New, Create and Publish: offsets count from 0 per partition; a duplicate
// Create returns false; a bad partition is an invalid argument.
func ExampleNew() {
	b, err := engine.New(100) // each partition retains at most 100 records
	if err != nil {
		panic(err)
	}
	created, _ := b.Create("orders", 2)
	fmt.Println("created:", created)

	for _, p := range []int32{0, 0, 1} {
		off, _ := b.Publish("orders", p, "order")
		fmt.Printf("partition %d: offset %d\n", p, off)
	}

	again, _ := b.Create("orders", 5)
	fmt.Println("created again:", again)

	_, err = b.Publish("orders", 2, "order")
	fmt.Println("partition 2 invalid:", errors.Is(err, engine.ErrInvalidArgument))
	// Output:
	// created: true
	// partition 0: offset 0
	// partition 0: offset 1
	// partition 1: offset 0
	// created again: false
	// partition 2 invalid: true
}

// Join, Poll and Ack: a poll reserves at most one record per partition, in
// ascending partition order; an ack commits it and the next poll moves on.
func ExampleBroker_Ack() {
	b, _ := engine.New(10)
	b.Create("orders", 2)
	b.Publish("orders", 0, "a")
	b.Publish("orders", 1, "b")
	b.Publish("orders", 0, "c")

	parts, _ := b.Join("orders", "billing", "m1")
	fmt.Println("m1 owns", parts)

	recs, _ := b.Poll("orders", "billing", "m1", 10)
	for _, r := range recs {
		ok, _ := b.Ack(r.Topic, "billing", "m1", r.Partition, r.Offset)
		fmt.Printf("%s/%d/%d %q acked: %v\n", r.Topic, r.Partition, r.Offset, r.Payload, ok)
	}
	again, _ := b.Ack("orders", "billing", "m1", 0, 0)
	fmt.Println("acked twice:", again)

	recs, _ = b.Poll("orders", "billing", "m1", 10)
	for _, r := range recs {
		fmt.Printf("%s/%d/%d %q attempt %d\n", r.Topic, r.Partition, r.Offset, r.Payload, r.Attempt)
	}
	// Output:
	// m1 owns [0 1]
	// orders/0/0 "a" acked: true
	// orders/1/0 "b" acked: true
	// acked twice: false
	// orders/0/1 "c" attempt 1
}

// Retry releases a delivery without committing it: the next poll delivers
// the same record again, its Attempt one higher (docs/contract.md's orders
// example, capacity 2).
func ExampleBroker_Retry() {
	b, _ := engine.New(2)
	b.Create("orders", 1)
	b.Publish("orders", 0, "a")
	b.Publish("orders", 0, "b")
	b.Join("orders", "billing", "m1")

	show := func() {
		recs, _ := b.Poll("orders", "billing", "m1", 2)
		for _, r := range recs {
			fmt.Printf("%s/%d/%d %q attempt %d\n", r.Topic, r.Partition, r.Offset, r.Payload, r.Attempt)
		}
	}
	show()
	ok, _ := b.Retry("orders", "billing", "m1", 0, 0)
	fmt.Println("retry:", ok)
	show()
	ok, _ = b.Ack("orders", "billing", "m1", 0, 0)
	fmt.Println("ack:", ok)
	show()
	// Output:
	// orders/0/0 "a" attempt 1
	// retry: true
	// orders/0/0 "a" attempt 2
	// ack: true
	// orders/0/1 "b" attempt 1
}

// A second member joining rebalances: members sorted bytewise, partition p
// goes to member p mod n. A partition that changes owner loses its in-flight
// delivery, so the old owner's ack fails and the new owner gets the record,
// as its second attempt.
func ExampleBroker_Join() {
	b, _ := engine.New(10)
	b.Create("t", 3)
	for p := range int32(3) {
		b.Publish("t", p, fmt.Sprint("r", p))
	}
	a, _ := b.Join("t", "g", "a")
	fmt.Println("a owns", a)
	recs, _ := b.Poll("t", "g", "a", 10)
	fmt.Println("a polled", len(recs), "records")

	bParts, _ := b.Join("t", "g", "b")
	a, _ = b.Join("t", "g", "a") // joining twice changes nothing
	fmt.Println("a owns", a, "b owns", bParts)

	ok, _ := b.Ack("t", "g", "a", 1, 0)
	fmt.Println("a acks partition 1:", ok)
	ok, _ = b.Ack("t", "g", "a", 0, 0)
	fmt.Println("a acks partition 0:", ok)
	recs, _ = b.Poll("t", "g", "b", 10)
	for _, r := range recs {
		fmt.Printf("b polled %s/%d/%d %q attempt %d\n", r.Topic, r.Partition, r.Offset, r.Payload, r.Attempt)
	}
	// Output:
	// a owns [0 1 2]
	// a polled 3 records
	// a owns [0 2] b owns [1]
	// a acks partition 1: false
	// a acks partition 0: true
	// b polled t/1/0 "r1" attempt 2
}

// A partition that retains capacity records refuses publishes with -1 and
// uses up no offset; once every group has acked a record it is removed and
// the next publish gets the next offset.
func ExampleBroker_Publish_full() {
	b, _ := engine.New(2)
	b.Create("t", 1)
	b.Join("t", "g", "m")
	for _, payload := range []string{"a", "b", "c", "d"} {
		off, _ := b.Publish("t", 0, payload)
		fmt.Println(payload, off)
	}
	recs, _ := b.Poll("t", "g", "m", 1)
	b.Ack("t", "g", "m", 0, recs[0].Offset)
	off, _ := b.Publish("t", 0, "e")
	fmt.Println("e", off)
	// Output:
	// a 0
	// b 1
	// c -1
	// d -1
	// e 2
}
