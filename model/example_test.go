package model_test

import (
	"errors"
	"fmt"

	"github.com/f91dcac0/tributary/model"
)

// The SPEC's worked example (capacity 2), call by call.
func Example() {
	b, _ := model.New(2)
	fmt.Println(b.Create("orders", 1))
	fmt.Println(b.Publish("orders", 0, "a"))
	fmt.Println(b.Publish("orders", 0, "b"))
	fmt.Println(b.Join("orders", "billing", "m1"))
	fmt.Println(b.Poll("orders", "billing", "m1", 2))
	fmt.Println(b.Retry("orders", "billing", "m1", 0, 0))
	fmt.Println(b.Poll("orders", "billing", "m1", 2))
	fmt.Println(b.Ack("orders", "billing", "m1", 0, 0))
	fmt.Println(b.Poll("orders", "billing", "m1", 2))
	fmt.Print(b)
	// Output:
	// true <nil>
	// 0 <nil>
	// 1 <nil>
	// [0] <nil>
	// [{orders 0 0 a}] <nil>
	// true <nil>
	// [{orders 0 0 a}] <nil>
	// true <nil>
	// [{orders 0 1 b}] <nil>
	// capacity=2
	// topic orders partitions=1
	//   log p0 [1,2) "b"
	//   group billing members=[m1]
	//     p0 owner=m1 committed=1 inflight
}

// The SPEC's rebalance example: b joins a three-partition topic that a owns.
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
	fmt.Println(b.Poll("t", "g", "b", 64))
	fmt.Println(b.Ack("t", "g", "a", 1, 0))
	// Output:
	// [0 1 2] <nil>
	// [1] <nil>
	// map[a:[0 2] b:[1]] <nil>
	// [{t 1 0 x}] <nil>
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
