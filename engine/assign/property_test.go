package assign_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/f91dcac0/tributary/engine/assign"
)

// propertyCases is how many random (members, previous) inputs each
// property test draws: P in 1..64, n in 1..70.
const propertyCases = 3000

// TestPropertyValidBalancedDeterministic checks, for every built-in on
// random inputs, that the answer has one member per partition (Validate),
// is balanced (⌊P/n⌋ or ⌈P/n⌉ each), is the same when asked twice, and
// leaves the input slices unmodified; and that Run agrees with Assign.
func TestPropertyValidBalancedDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range propertyCases {
		members, previous := randomCase(rng, 64, 70)
		wmembers, wprevious := slices.Clone(members), slices.Clone(previous)
		for _, a := range builtins {
			owner := a.Assign(members, previous)
			if err := assign.Validate(members, len(previous), owner); err != nil {
				t.Fatalf("%s(%q, %q): %v", a.Name(), members, previous, err)
			}
			if err := balanced(members, owner); err != nil {
				t.Fatalf("%s(%q, %q) = %q: %v", a.Name(), members, previous, owner, err)
			}
			if !slices.Equal(members, wmembers) || !slices.Equal(previous, wprevious) {
				t.Fatalf("%s modified its input: members %q previous %q, want %q %q", a.Name(), members, previous, wmembers, wprevious)
			}
			if again := a.Assign(members, previous); !slices.Equal(owner, again) {
				t.Fatalf("%s(%q, %q) not deterministic: %q then %q", a.Name(), members, previous, owner, again)
			}
			run, err := assign.Run(a, members, previous)
			if err != nil || !slices.Equal(run, owner) {
				t.Fatalf("Run(%s) = %q, %v; Assign = %q", a.Name(), run, err, owner)
			}
		}
	}
}

// TestPropertyRoundRobinRange checks RoundRobin and Range against their
// closed forms: RoundRobin gives p to member p mod n; Range gives the first
// r(q+1) partitions in blocks of q+1 and the rest in blocks of q.
func TestPropertyRoundRobinRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range propertyCases {
		members, previous := randomCase(rng, 64, 70)
		n, P := len(members), len(previous)
		q, r := P/n, P%n
		rr := assign.RoundRobin.Assign(members, previous)
		rg := assign.Range.Assign(members, previous)
		for p := range P {
			if rr[p] != members[p%n] {
				t.Fatalf("RoundRobin(n=%d, P=%d)[%d] = %q, want %q", n, P, p, rr[p], members[p%n])
			}
			var i int
			if p < r*(q+1) {
				i = p / (q + 1)
			} else {
				i = r + (p-r*(q+1))/q
			}
			if rg[p] != members[i] {
				t.Fatalf("Range(n=%d, P=%d)[%d] = %q, want %q", n, P, p, rg[p], members[i])
			}
		}
	}
}

// TestPropertyStickyOptimal checks Sticky at full size (P up to 64, n up to
// 70) against the closed-form optimum of its doc comment, kept = Σ min(c_m,
// q) + min(r, #{m : c_m > q}), which TestStickyBruteForce confirms on small
// inputs; and that from the same previous owners Sticky never moves more
// than RoundRobin or Range.
func TestPropertyStickyOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range propertyCases {
		members, previous := randomCase(rng, 64, 70)
		owner := assign.Sticky.Assign(members, previous)
		if got, want := assign.Moved(previous, owner), optimumMoved(members, previous); got != want {
			t.Fatalf("Sticky(%q, %q) = %q moves %d, the optimum is %d", members, previous, owner, got, want)
		}
		for _, a := range []assign.Assignor{assign.RoundRobin, assign.Range} {
			if s, o := assign.Moved(previous, owner), assign.Moved(previous, a.Assign(members, previous)); s > o {
				t.Fatalf("Sticky moves %d, %s %d, from %q over %q", s, a.Name(), o, previous, members)
			}
		}
	}
}

// TestPropertyStickyStable checks that Sticky moves nothing when the
// members and P are unchanged and the previous owners are already balanced
// over them, however they are laid out.
func TestPropertyStickyStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range propertyCases {
		members, previous := randomCase(rng, 64, 70)
		n, P := len(members), len(previous)
		// A random balanced layout: r random members own q+1, the rest q,
		// over a random permutation of the partitions.
		quota := make([]int, n)
		for i := range quota {
			quota[i] = P / n
		}
		for _, i := range rng.Perm(n)[:P%n] {
			quota[i]++
		}
		perm := rng.Perm(P)
		for i, k := range quota {
			for range k {
				previous[perm[0]] = members[i]
				perm = perm[1:]
			}
		}
		if err := balanced(members, previous); err != nil {
			t.Fatalf("test bug: %v", err)
		}
		if owner := assign.Sticky.Assign(members, previous); !slices.Equal(owner, previous) {
			t.Fatalf("Sticky(%q, %q) = %q, moved %d; want no change", members, previous, owner, assign.Moved(previous, owner))
		}
	}
}

// optimumMoved is the least Moved over all balanced assignments, by the
// closed form in Sticky's doc comment.
func optimumMoved(members, previous []string) int {
	n, P := len(members), len(previous)
	q, r := P/n, P%n
	count := make(map[string]int)
	for _, m := range previous {
		if _, ok := slices.BinarySearch(members, m); ok && m != "" {
			count[m]++
		}
	}
	kept, rich := 0, 0
	for _, c := range count {
		kept += min(c, q)
		if c > q {
			rich++
		}
	}
	return P - kept - min(r, rich)
}
