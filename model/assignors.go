package model

import (
	"cmp"
	"slices"

	"github.com/f91dcac0/tributary/engine/assign"
)

// The model's own answers for the built-in assignors (rule 18), written
// from the rule's text and not from package assign, so that the
// differential test and the linearizability checker, which compare the
// engine with this model, also check the engine's assignors. A user's
// assignor has no reference: the model asks it through assign.Run, as the
// engine does, and both get the same answer and the same validation.
//
// Each reference takes members sorted bytewise, distinct, n ≥ 1, and the
// previous owner of each of the P ≥ 1 partitions ("" for none), and returns
// a new owner slice of P entries.

// referenceOwners returns the reference answer of a built-in assignor and
// true, or nil and false when a is not one of assign.RoundRobin,
// assign.Range and assign.Sticky.
func referenceOwners(a Assignor, members, previous []string) ([]string, bool) {
	switch a {
	case assign.RoundRobin:
		return refRoundRobin(members, len(previous)), true
	case assign.Range:
		return refRange(members, len(previous)), true
	case assign.Sticky:
		return refSticky(members, previous), true
	}
	return nil, false
}

// refRoundRobin: partition p goes to member p mod n (rules 6, 18).
func refRoundRobin(members []string, parts int) []string {
	owner := make([]string, parts)
	for p := range owner {
		owner[p] = members[p%len(members)]
	}
	return owner
}

// refRange: contiguous blocks in member order from partition 0; the first
// P mod n members take ⌈P/n⌉ partitions, the rest ⌊P/n⌋ (rule 18).
func refRange(members []string, parts int) []string {
	owner := make([]string, 0, parts)
	n := len(members)
	for i, m := range members {
		size := parts / n
		if i < parts%n {
			size++
		}
		for range size {
			owner = append(owner, m)
		}
	}
	return owner
}

// refSticky: every member gets ⌊P/n⌋ or ⌈P/n⌉ partitions and, among such
// assignments, as many partitions as possible keep their previous owner
// (rule 18). The rule leaves open which of the equally good answers is
// given; the model fixes the engine's documented choice, so that a
// deterministic answer can be compared:
//
//   - the ⌈P/n⌉ quotas go to the members that previously owned the most
//     partitions (at least ⌈P/n⌉ of them), ties in member order, and any
//     left over to the other members in member order;
//   - a member keeps its lowest previous partitions up to its quota;
//   - the other partitions, in ascending order, fill the members still
//     under quota, in member order.
//
// The model's tests check that the answer is balanced and keeps the
// maximum against an exhaustive search over small inputs.
func refSticky(members, previous []string) []string {
	parts, n := len(previous), len(members)
	low, extra := parts/n, parts%n
	had := make(map[string]int, n)
	for _, o := range previous {
		had[o]++
	}
	quota := make(map[string]int, n)
	for _, m := range members {
		quota[m] = low
	}
	byHad := slices.Clone(members)
	slices.SortStableFunc(byHad, func(a, b string) int { return cmp.Compare(had[b], had[a]) })
	for _, m := range byHad {
		if extra > 0 && had[m] >= low+1 {
			quota[m]++
			extra--
		}
	}
	for _, m := range members {
		if extra > 0 && quota[m] == low {
			quota[m]++
			extra--
		}
	}
	owner := make([]string, parts)
	kept := make(map[string]int, n)
	for p, o := range previous {
		if q, ok := quota[o]; ok && kept[o] < q {
			owner[p] = o
			kept[o]++
		}
	}
	next := 0
	for p := range owner {
		if owner[p] != "" {
			continue
		}
		for kept[members[next]] == quota[members[next]] {
			next++
		}
		owner[p] = members[next]
		kept[members[next]]++
	}
	return owner
}
