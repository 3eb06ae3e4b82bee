package assign_test

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/f91dcac0/tributary/engine/assign"
)

// builtins are the assignors under test, in Names order.
var builtins = []assign.Assignor{assign.RoundRobin, assign.Range, assign.Sticky}

// ids returns n member ids m00, m01, …, sorted bytewise.
func ids(n int) []string {
	m := make([]string, n)
	for i := range m {
		m[i] = fmt.Sprintf("m%02d", i)
	}
	return m
}

// none returns P empty previous owners (a new group).
func none(P int) []string { return make([]string, P) }

// owners builds an owner slice from a compact spec: "ab-x" is
// ["a" "b" "" "x"]; '-' stands for "" (no owner).
func owners(spec string) []string {
	o := make([]string, len(spec))
	for p, c := range spec {
		if c != '-' {
			o[p] = string(c)
		}
	}
	return o
}

// parts turns owner into the partitions of each member, in member order.
// A member with no partition gets an empty (non-nil) list so that tables
// can say [] for it.
func parts(members, owner []string) [][]int {
	out := make([][]int, len(members))
	for i := range out {
		out[i] = []int{}
	}
	for p, m := range owner {
		if i, ok := slices.BinarySearch(members, m); ok {
			out[i] = append(out[i], p)
		}
	}
	return out
}

// span returns lo, lo+step, … up to hi inclusive.
func span(lo, hi, step int) []int {
	var s []int
	for p := lo; p <= hi; p += step {
		s = append(s, p)
	}
	return s
}

// balanced returns nil if every member owns ⌊P/n⌋ or ⌈P/n⌉ partitions of
// owner, exactly P mod n of them ⌈P/n⌉, else what is wrong.
func balanced(members, owner []string) error {
	n, P := len(members), len(owner)
	q, r := P/n, P%n
	big := 0
	for i, ps := range parts(members, owner) {
		switch len(ps) {
		case q:
		case q + 1:
			big++
		default:
			return fmt.Errorf("member %q owns %d partitions, want %d or %d", members[i], len(ps), q, q+1)
		}
	}
	if big != r {
		return fmt.Errorf("%d members own %d partitions, want %d", big, q+1, r)
	}
	return nil
}

// randomCase draws a group of n members (ids from a pool of 100, sorted)
// and P previous owners, each "" (no owner), a current member, or a member
// that has left.
func randomCase(rng *rand.Rand, maxP, maxN int) (members, previous []string) {
	n := 1 + rng.IntN(maxN)
	P := 1 + rng.IntN(maxP)
	pool := rng.Perm(100)
	for _, i := range pool[:n] {
		members = append(members, fmt.Sprintf("p%02d", i))
	}
	slices.Sort(members)
	departed := []string{fmt.Sprintf("p%02d", pool[n]), "gone"}
	previous = make([]string, P)
	for p := range previous {
		switch rng.IntN(4) {
		case 0:
			previous[p] = ""
		case 1:
			previous[p] = departed[rng.IntN(len(departed))]
		default:
			previous[p] = members[rng.IntN(n)]
		}
	}
	return members, previous
}

// assignorFunc is a user assignor built from a function, for Run's tests.
type assignorFunc func(members, previous []string) []string

func (assignorFunc) Name() string                                 { return "user" }
func (f assignorFunc) Assign(members, previous []string) []string { return f(members, previous) }
