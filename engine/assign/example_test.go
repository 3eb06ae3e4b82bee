package assign_test

import (
	"errors"
	"fmt"
	"slices"

	"github.com/f91dcac0/tributary/engine/assign"
)

// show prints each member's partitions.
func show(members, owner []string) {
	for i, ps := range parts(members, owner) {
		fmt.Printf("%s %v\n", members[i], ps)
	}
}

func ExampleRoundRobin() {
	members := []string{"a", "b"}
	show(members, assign.RoundRobin.Assign(members, make([]string, 7)))
	// Output:
	// a [0 2 4 6]
	// b [1 3 5]
}

func ExampleRange() {
	members := []string{"a", "b"}
	show(members, assign.Range.Assign(members, make([]string, 7)))
	// Output:
	// a [0 1 2 3]
	// b [4 5 6]
}

// Member c joins a group whose 7 partitions a and b share round-robin.
// Sticky moves the 2 partitions c must get; RoundRobin would move 4.
func ExampleSticky() {
	previous := assign.RoundRobin.Assign([]string{"a", "b"}, make([]string, 7))
	members := []string{"a", "b", "c"}
	owner := assign.Sticky.Assign(members, previous)
	show(members, owner)
	fmt.Println("moved:", assign.Moved(previous, owner))
	fmt.Println("RoundRobin would move:", assign.Moved(previous, assign.RoundRobin.Assign(members, previous)))
	// Output:
	// a [0 2 4]
	// b [1 3]
	// c [5 6]
	// moved: 2
	// RoundRobin would move: 4
}

// A user's assignor that names a member who is not in the group is
// rejected; the caller changes nothing.
func ExampleRun() {
	members, previous := []string{"a", "b"}, []string{"a", "b", ""}
	owner, err := assign.Run(assign.Sticky, members, previous)
	fmt.Println(owner, err)

	everything := userAssignor(func(_, previous []string) []string {
		owner := make([]string, len(previous))
		for p := range owner {
			owner[p] = "boss"
		}
		return owner
	})
	_, err = assign.Run(everything, members, previous)
	fmt.Println(errors.Is(err, assign.ErrInvalidAssignment), err)
	// Output:
	// [a b a] <nil>
	// true tributary: invalid assignment: partition 0: owner "boss" is not a member
}

type userAssignor func(members, previous []string) []string

func (userAssignor) Name() string                                 { return "everything-to-boss" }
func (f userAssignor) Assign(members, previous []string) []string { return f(members, previous) }

func ExampleValidate() {
	members := []string{"a", "b"}
	fmt.Println(assign.Validate(members, 3, []string{"a", "b", "a"}))
	fmt.Println(assign.Validate(members, 3, []string{"a", "b"}))
	fmt.Println(assign.Validate(members, 3, []string{"a", "", "b"}))
	// Output:
	// <nil>
	// tributary: invalid assignment: 2 owners for 3 partitions
	// tributary: invalid assignment: partition 1 has no owner
}

func ExampleMoved() {
	previous := []string{"a", "b", "", "gone"}
	owner := []string{"a", "a", "b", "b"}
	fmt.Println(assign.Moved(previous, owner))
	// Output: 3
}

func ExampleLookup() {
	for _, name := range []string{"Sticky", "fair"} {
		a, ok := assign.Lookup(name)
		fmt.Println(name, ok, a == assign.Sticky)
	}
	// Output:
	// Sticky true true
	// fair false false
}

func ExampleNames() {
	names := assign.Names()
	fmt.Println(names, slices.Contains(names, "Range"))
	// Output: [RoundRobin Range Sticky] true
}
