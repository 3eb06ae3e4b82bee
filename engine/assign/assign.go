// Package assign holds Tributary's partition assignors: the functions that
// decide which member of a consumer group owns each partition of a topic
// (SPEC rule 18). Package engine calls them; package model computes the
// built-ins' answers itself from rule 18's text (model/assignors.go), so
// the differential test and the linearizability checker check these
// assignors too, and calls a user's assignor through Run as the engine
// does.
//
// Usage:
//
//	members := []string{"a", "b"}          // sorted bytewise, distinct
//	previous := []string{"a", "", "b"}     // owner per partition before; "" = none
//	owner, err := assign.Run(assign.Sticky, members, previous)
//	// owner[p] is the member that owns partition p from now on;
//	// assign.Moved(previous, owner) partitions changed owner.
//
// An Assignor is a pure function from (members, previous owners) to new
// owners; it holds no state and must not call the broker. Three are built
// in, RoundRobin (rule 6, the default), Range and Sticky, and users may write
// their own. Run is the one entry point the broker uses: it isolates the
// assignor from the caller's slices, turns a panic into ErrInvalidAssignment
// and checks the answer with Validate, so a faulty user assignor makes the
// rebalancing call fail and change nothing instead of corrupting the group.
//
// The package is pure: no locks, no goroutines, no I/O, and it imports
// neither engine nor model.
package assign

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// ErrInvalidAssignment is returned, wrapped with what is wrong, by Run and
// Validate when an assignor's answer is not exactly one current member per
// partition (wrong length, an unknown member, or ""), and by Run when the
// assignor panics. Test for it with errors.Is.
var ErrInvalidAssignment = errors.New("tributary: invalid assignment")

// Assignor decides which member of a consumer group owns each partition of a
// topic (SPEC rule 18).
type Assignor interface {
	// Name identifies the assignor in descriptions and lookups. The
	// built-ins are named as their Go variables: "RoundRobin", "Range",
	// "Sticky".
	Name() string

	// Assign returns owner with len(owner) == len(previous): owner[p] is the
	// member that owns partition p, and every partition has exactly one
	// owner, one of members.
	//
	// members are the group's member ids: non-empty strings, sorted
	// bytewise, distinct, len(members) >= 1. previous[p] is partition p's
	// owner before this rebalance, or "" when it had none (a new group or a
	// new partition); it may name a member that has just left.
	// len(previous) is the topic's partition count P >= 1.
	//
	// Assign must be a pure, deterministic function of its arguments: it
	// must not retain or modify members or previous, and must not call the
	// broker. The returned slice belongs to the caller. Run enforces the
	// shape of the answer; purity is the implementer's promise.
	Assign(members []string, previous []string) []string
}

// The built-in assignors, each a stateless value safe for concurrent use.
// Each returns a newly allocated owner slice that belongs to the caller and
// works for any P >= 1 and n >= 1 (the broker limits P to 64).
var (
	// RoundRobin, named "RoundRobin", gives partition p to members[p mod n]
	// (SPEC rules 6 and 18). It ignores previous. P=7, n=2 (members a, b):
	// a owns [0 2 4 6], b owns [1 3 5].
	RoundRobin Assignor = roundRobin{}

	// Range, named "Range", is Kafka's RangeAssignor for one topic: it deals
	// contiguous blocks in member order from partition 0; the first P mod n
	// members take ⌈P/n⌉ partitions, the rest ⌊P/n⌋. When n > P, the last
	// n-P members get nothing. It ignores previous. P=7, n=2 (members a, b):
	// a owns [0 1 2 3], b owns [4 5 6].
	Range Assignor = rangeAssignor{}

	// Sticky, named "Sticky", balances first, then keeps as many partitions
	// as possible with their previous owner, so a rebalance cancels as few
	// in-flight deliveries as balance allows (SPEC rule 18). Every member
	// gets ⌊P/n⌋ or ⌈P/n⌉ partitions, and among all such balanced
	// assignments Sticky's answer minimises Moved(previous, owner). It is
	// deterministic: same members and previous owners, same answer.
	//
	// Algorithm. Let q = P/n and r = P mod n. A balanced assignment gives
	// exactly r members the quota q+1 and the other n-r the quota q. Let c_m
	// count the partitions whose previous owner is member m (a previous
	// owner that is "" or not a current member counts for nobody).
	//
	//  1. Quotas: the q+1 quotas go first to members with c_m >= q+1, by
	//     larger c_m, then member order; any left over go to the remaining
	//     members in member order.
	//  2. Keep: each member keeps its lowest-indexed previous partitions, up
	//     to its quota.
	//  3. Deal: every other partition (released by a member over quota, or
	//     with no current previous owner) is dealt in ascending partition
	//     order to the members still below quota, in member order.
	//
	// The quotas sum to P, so step 3 fills every quota exactly: the answer
	// is balanced. It runs in O(P + n log n) time.
	//
	// Optimality. In any balanced assignment with quotas k_m, member m can
	// keep at most min(c_m, k_m) partitions (it owns only k_m, and had only
	// c_m), and partitions with no current previous owner are never kept,
	// so kept <= Σ min(c_m, k_m). Sticky attains this bound for its quotas
	// (step 2 keeps exactly min(c_m, k_m) for each m; partitions are owned
	// by one previous owner each, so the kept sets are disjoint). It remains
	// to see that its quotas maximise the bound over all quota vectors with
	// r entries q+1: Σ min(c_m, k_m) = Σ min(c_m, q) + #{m : k_m = q+1 and
	// c_m >= q+1}, since raising a quota from q to q+1 gains one exactly when
	// c_m >= q+1. The first term does not depend on the quotas; the second
	// is at most min(r, #{m : c_m >= q+1}), which step 1 attains. So Sticky
	// keeps the maximum, and Moved = P - kept is the minimum over balanced
	// assignments. The tests check this against brute force.
	Sticky Assignor = sticky{}
)

// builtins lists the built-in assignors in the order Names reports them.
var builtins = [...]Assignor{RoundRobin, Range, Sticky}

// Lookup returns the built-in assignor with the given name ("RoundRobin",
// "Range" or "Sticky", each its Name()) and true, or nil and false for any
// other name. Names are case-sensitive.
func Lookup(name string) (Assignor, bool) {
	for _, a := range builtins {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// Names returns the built-in assignors' names in the order "RoundRobin",
// "Range", "Sticky". The slice is newly allocated and belongs to the caller.
func Names() []string {
	names := make([]string, len(builtins))
	for i, a := range builtins {
		names[i] = a.Name()
	}
	return names
}

// Run computes a rebalance: it calls a.Assign on private copies of members
// and previous (so the assignor can neither modify nor alias the caller's
// slices), turns a panic in Assign into ErrInvalidAssignment, and checks the
// answer with Validate. On success it returns a newly allocated owner slice
// of len(previous) entries that belongs to the caller (the assignor cannot
// reach it afterwards) and a nil error.
//
// Errors: ErrInvalidAssignment, wrapped with what is wrong, when Assign
// panics or answers something other than one member of members per
// partition; the owner slice is then nil.
//
// Preconditions (broken ones are caller bugs and panic): a is non-nil;
// members is non-empty, sorted bytewise, distinct and free of ""; and
// len(previous) >= 1.
func Run(a Assignor, members []string, previous []string) ([]string, error) {
	if a == nil {
		panic("assign: Run with a nil Assignor")
	}
	checkMembers(members)
	if len(previous) == 0 {
		panic("assign: Run with no partitions")
	}
	answer, err := call(a, slices.Clone(members), slices.Clone(previous))
	if err != nil {
		return nil, err
	}
	if err := Validate(members, len(previous), answer); err != nil {
		return nil, err
	}
	return slices.Clone(answer), nil
}

// call runs a.Assign, turning a panic into ErrInvalidAssignment.
func call(a Assignor, members, previous []string) (owner []string, err error) {
	defer func() {
		if v := recover(); v != nil {
			owner, err = nil, fmt.Errorf("%w: assignor panicked: %v", ErrInvalidAssignment, v)
		}
	}()
	return a.Assign(members, previous), nil
}

// checkMembers panics unless members is non-empty, sorted bytewise, distinct
// and free of "" (Run's precondition).
func checkMembers(members []string) {
	if len(members) == 0 {
		panic("assign: no members")
	}
	if members[0] == "" {
		panic("assign: empty member id")
	}
	for i := 1; i < len(members); i++ {
		if members[i-1] >= members[i] {
			panic(fmt.Sprintf("assign: members not sorted and distinct: %q before %q", members[i-1], members[i]))
		}
	}
}

// Validate reports whether owner is a valid assignment of partitions
// partitions to members: exactly partitions entries, each one of members.
// members must be sorted bytewise (Validate uses binary search); "" is never
// a valid owner. It returns nil if owner is valid, else ErrInvalidAssignment
// wrapped with the first fault found: the length, or the partition index
// and its bad owner. It reads its arguments only.
func Validate(members []string, partitions int, owner []string) error {
	if len(owner) != partitions {
		return fmt.Errorf("%w: %d owners for %d partitions", ErrInvalidAssignment, len(owner), partitions)
	}
	for p, m := range owner {
		if m == "" {
			return fmt.Errorf("%w: partition %d has no owner", ErrInvalidAssignment, p)
		}
		if _, ok := slices.BinarySearch(members, m); !ok {
			return fmt.Errorf("%w: partition %d: owner %q is not a member", ErrInvalidAssignment, p, m)
		}
	}
	return nil
}

// Moved returns the number of partitions p whose owner changed,
// previous[p] != owner[p] (a plain string comparison, so a partition that
// had no owner, "", counts as moved once it gets one). These are the
// partitions whose in-flight deliveries a rebalance from previous to owner
// cancels (SPEC rule 9). The slices must have equal length (it panics
// otherwise); it reads them only.
func Moved(previous, owner []string) int {
	if len(previous) != len(owner) {
		panic(fmt.Sprintf("assign: Moved of %d previous owners and %d owners", len(previous), len(owner)))
	}
	moved := 0
	for p := range previous {
		if previous[p] != owner[p] {
			moved++
		}
	}
	return moved
}

type roundRobin struct{}

func (roundRobin) Name() string { return "RoundRobin" }

func (roundRobin) Assign(members []string, previous []string) []string {
	owner := make([]string, len(previous))
	for p := range owner {
		owner[p] = members[p%len(members)]
	}
	return owner
}

type rangeAssignor struct{}

func (rangeAssignor) Name() string { return "Range" }

func (rangeAssignor) Assign(members []string, previous []string) []string {
	n, P := len(members), len(previous)
	q, r := P/n, P%n
	owner := make([]string, P)
	p := 0
	for i, m := range members {
		size := q
		if i < r {
			size++
		}
		for end := p + size; p < end; p++ {
			owner[p] = m
		}
	}
	return owner
}

type sticky struct{}

func (sticky) Name() string { return "Sticky" }

// Assign implements the algorithm documented on Sticky. It allocates the
// owner slice and one scratch slice of ints.
func (sticky) Assign(members []string, previous []string) []string {
	n, P := len(members), len(previous)
	q, r := P/n, P%n
	owner := make([]string, P)
	scratch := make([]int, P+3*n)
	prev := scratch[:P]       // prev[p]: index of p's previous owner in members, or -1
	count := scratch[P : P+n] // count[i]: c_m, then partitions owned so far
	quota := scratch[P+n : P+2*n]
	order := scratch[P+2*n:] // members with c_m >= q+1, best first

	for p, m := range previous {
		prev[p] = -1
		if m == "" {
			continue
		}
		if i, ok := slices.BinarySearch(members, m); ok {
			prev[p] = i
			count[i]++
		}
	}

	// Step 1: quotas.
	rich := order[:0]
	for i := range members {
		quota[i] = q
		if count[i] >= q+1 {
			rich = append(rich, i)
		}
	}
	slices.SortStableFunc(rich, func(a, b int) int { return count[b] - count[a] })
	extra := r
	for _, i := range rich {
		if extra == 0 {
			break
		}
		quota[i]++
		extra--
	}
	for i := 0; extra > 0; i++ {
		if quota[i] == q {
			quota[i]++
			extra--
		}
	}

	// Step 2: keep the lowest-indexed previous partitions up to quota;
	// afterwards prev[p] >= 0 exactly for the kept partitions.
	clear(count)
	for p, i := range prev {
		if i < 0 {
			continue
		}
		if count[i] < quota[i] {
			owner[p] = members[i]
			count[i]++
		} else {
			prev[p] = -1
		}
	}

	// Step 3: deal the rest in partition order to members below quota.
	i := 0
	for p := range owner {
		if prev[p] >= 0 {
			continue
		}
		for count[i] == quota[i] {
			i++
		}
		owner[p] = members[i]
		count[i]++
	}
	return owner
}

// IsNil reports whether a is nil or an interface holding a nil pointer (or
// nil map, slice, func or channel): such an Assignor is refused as nil
// (SPEC rule 15), since calling its methods would most likely panic.
func IsNil(a Assignor) bool {
	if a == nil {
		return true
	}
	switch v := reflect.ValueOf(a); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// Name returns a.Name(), or an error wrapping ErrInvalidAssignment when it
// panics. The broker reads an assignor's name once, when the assignor is
// given to it, and keeps it for descriptions, so a user's Name that panics
// fails that call instead of every later Describe.
func Name(a Assignor) (name string, err error) {
	defer func() {
		if r := recover(); r != nil {
			name, err = "", fmt.Errorf("%w: assignor's Name panicked: %v", ErrInvalidAssignment, r)
		}
	}()
	return a.Name(), nil
}
