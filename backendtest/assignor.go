package backendtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine/assign"
)

// CheckAssignor checks a against the Assignor contract (engine/assign's
// Assignor; SPEC rule 18) on groups of 1 to 4 members and 1 to 8
// partitions with no previous owners, then on 500 cases drawn from a
// fixed seed (up to 70 members and 64 partitions, each previously owned by
// a member, by one that left, or by nobody): assign.Run accepts every
// answer (one current member per partition, no panic), which is the check
// the broker applies before a rebalance takes effect (a refused answer
// fails the rebalancing call with ErrInvalidAssignment); Assign changes
// neither argument; the same arguments give the same answer; and Name is
// not empty and does not panic. No call may panic nor run longer than
// Wait (10 s): either is a failure. A nil or typed-nil assignor fails too.
func CheckAssignor(t testing.TB, a tributary.Assignor) {
	t.Helper()
	name, err := guard(func() (string, error) { return assign.Name(a) })
	if err != nil || name == "" {
		t.Fatalf("assignor Name() = %s, %v: want a name", clip(name), err)
	}
	var cases [][2][]string // members, previous
	for n := 1; n <= 4; n++ {
		for p := 1; p <= 8; p++ {
			cases = append(cases, [2][]string{memberNames(n), make([]string, p)})
		}
	}
	rng := rand.New(rand.NewPCG(18, 18))
	for range 500 {
		members, previous := memberNames(1+rng.IntN(70)), make([]string, 1+rng.IntN(64))
		for p := range previous {
			if k := rng.IntN(len(members) + 2); k < len(members) {
				previous[p] = members[k]
			} else if k == len(members) {
				previous[p] = "gone"
			}
		}
		cases = append(cases, [2][]string{members, previous})
	}
	for _, c := range cases {
		members, previous := c[0], c[1]
		owner, err := guard(func() ([]string, error) { return assign.Run(a, members, previous) })
		if err != nil {
			t.Fatalf("%s: members %q, previous owners %q: %v", name, members, previous, err)
		}
		m, p := slices.Clone(members), slices.Clone(previous)
		again, err := guard(func() ([]string, error) { return a.Assign(m, p), nil })
		if err != nil {
			t.Fatalf("%s: members %q, previous owners %q: answered %q, then: %v", name, members, previous, owner, err)
		}
		if !slices.Equal(m, members) || !slices.Equal(p, previous) {
			t.Fatalf("%s: Assign changed its arguments: members %q → %s, previous %q → %s", name, members, clip(m), previous, clip(p))
		}
		if !slices.Equal(again, owner) {
			t.Fatalf("%s: members %q, previous owners %q: answered %q, then %s", name, members, previous, owner, clip(again))
		}
	}
}

// memberNames returns n member ids, sorted bytewise: m00, m01, ….
func memberNames(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%02d", i)
	}
	return ids
}
