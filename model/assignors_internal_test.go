package model

import (
	"fmt"
	"slices"
	"testing"

	"github.com/f91dcac0/tributary/engine/assign"
	"github.com/f91dcac0/tributary/internal/brokenassign"
)

// assignCase is one input of an assignor: sorted distinct members and the
// previous owner of each partition.
type assignCase struct{ members, previous []string }

// assignCases returns every case with members a non-empty subset of
// {a, b, c, d} and 1 to maxParts partitions, each previously owned by a
// member, by nobody ("") or by one that has left ("x").
func assignCases(maxParts int) []assignCase {
	names := []string{"a", "b", "c", "d"}
	var out []assignCase
	for set := 1; set < 1<<len(names); set++ {
		var members []string
		for i, m := range names {
			if set&(1<<i) != 0 {
				members = append(members, m)
			}
		}
		choices := append([]string{"", "x"}, members...)
		for parts := 1; parts <= maxParts; parts++ {
			idx := make([]int, parts)
			for {
				prev := make([]string, parts)
				for p, i := range idx {
					prev[p] = choices[i]
				}
				out = append(out, assignCase{members, prev})
				p := 0
				for p < parts && idx[p] == len(choices)-1 {
					idx[p] = 0
					p++
				}
				if p == parts {
					break
				}
				idx[p]++
			}
		}
	}
	return out
}

// disagreement returns the first case on which a's answer differs from the
// model's reference answer for the built-in ref, and "" when none does.
func disagreement(ref, a Assignor, cases []assignCase) string {
	for _, c := range cases {
		want, ok := referenceOwners(ref, c.members, c.previous)
		if !ok {
			return fmt.Sprintf("%s has no reference", ref.Name())
		}
		got, err := assign.Run(a, c.members, c.previous)
		if err != nil || !slices.Equal(got, want) {
			return fmt.Sprintf("members %q previous %q: %s answers %q (%v), reference %q",
				c.members, c.previous, a.Name(), got, err, want)
		}
	}
	return ""
}

// TestReferenceAssignorsMatchBuiltins: the model's answers (written from
// rule 18) and package assign's agree on every small input, so the
// differential test and lincheck, which compare the engine with the model,
// check the engine's assignors too.
func TestReferenceAssignorsMatchBuiltins(t *testing.T) {
	cases := assignCases(5)
	for _, a := range []Assignor{assign.RoundRobin, assign.Range, assign.Sticky} {
		if d := disagreement(a, a, cases); d != "" {
			t.Errorf("%s: %s", a.Name(), d)
		}
	}
	t.Logf("%d cases", len(cases))
}

// TestReferenceStickyIsOptimal checks refSticky against rule 18's text by
// exhaustive search: balanced (each member ⌊P/n⌋ or ⌈P/n⌉) and no balanced
// assignment keeps more partitions with their previous owner. Its broken
// variant: Range's answer (balanced, not sticky) must fail the same check.
func TestReferenceStickyIsOptimal(t *testing.T) {
	cases := assignCases(5)
	for _, c := range cases {
		if len(c.members) <= 3 {
			if v := stickyViolation(c, refSticky(c.members, c.previous)); v != "" {
				t.Fatal(v)
			}
		}
	}
	caught := ""
	for _, c := range cases {
		if len(c.members) <= 3 {
			if caught = stickyViolation(c, refRange(c.members, len(c.previous))); caught != "" {
				break
			}
		}
	}
	if caught == "" {
		t.Fatal("Range's answers pass as sticky")
	}
	t.Log("broken variant:", caught)
}

// stickyViolation says what is wrong with owner as Sticky's answer to c,
// or "" when it is balanced and keeps the maximum.
func stickyViolation(c assignCase, owner []string) string {
	if !balanced(c.members, owner) {
		return fmt.Sprintf("members %q previous %q: %q is not balanced", c.members, c.previous, owner)
	}
	if k, best := kept(c.previous, owner), bestKept(c.members, c.previous); k != best {
		return fmt.Sprintf("members %q previous %q: %q keeps %d, a balanced answer keeps %d", c.members, c.previous, owner, k, best)
	}
	return ""
}

func balanced(members, owner []string) bool {
	n, parts := len(members), len(owner)
	for _, m := range members {
		c := 0
		for _, o := range owner {
			if o == m {
				c++
			}
		}
		if c != parts/n && c != (parts+n-1)/n {
			return false
		}
	}
	return true
}

func kept(previous, owner []string) int {
	k := 0
	for p := range owner {
		if owner[p] == previous[p] {
			k++
		}
	}
	return k
}

// bestKept is the most partitions any balanced assignment keeps, by trying
// all n^P assignments.
func bestKept(members, previous []string) int {
	best := -1
	owner := make([]string, len(previous))
	var try func(p int)
	try = func(p int) {
		if p == len(owner) {
			if balanced(members, owner) {
				best = max(best, kept(previous, owner))
			}
			return
		}
		for _, m := range members {
			owner[p] = m
			try(p + 1)
		}
	}
	try(0)
	return best
}

// brokenSticky keeps each member's highest previous partitions instead of
// its lowest: balanced and as sticky, but not the documented answer.
type brokenSticky struct{}

func (brokenSticky) Name() string { return "Sticky" }

func (brokenSticky) Assign(members, previous []string) []string {
	rev := slices.Clone(previous)
	slices.Reverse(rev)
	owner := assign.Sticky.Assign(members, rev)
	slices.Reverse(owner)
	return owner
}

// TestReferenceCatchesBrokenAssignors is the comparison's broken variants:
// each wrong assignor disagrees with the reference on some small input.
func TestReferenceCatchesBrokenAssignors(t *testing.T) {
	cases := assignCases(4)
	for _, tt := range []struct{ ref, broken Assignor }{
		{assign.Range, brokenassign.Range{}},
		{assign.Sticky, brokenSticky{}},
		{assign.RoundRobin, assign.Range},
	} {
		d := disagreement(tt.ref, tt.broken, cases)
		if d == "" {
			t.Errorf("%T passes as %s", tt.broken, tt.ref.Name())
		}
		t.Log(d)
	}
}
