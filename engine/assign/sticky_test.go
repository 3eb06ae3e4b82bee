package assign_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/f91dcac0/tributary/engine/assign"
)

// smallCase is one input small enough to brute-force, with the least Moved
// over all balanced assignments.
type smallCase struct {
	members, previous []string
	wmin              int
}

// smallCases returns every previous-owner vector over {"", a, b, c, x (a
// departed member)} up to the members present for P <= 4 and n <= 3, plus
// 60 random ones for each P in 1..7 and n in 1..4, each with its brute-force
// optimum.
func smallCases() []smallCase {
	var cases []smallCase
	add := func(members, previous []string) {
		cases = append(cases, smallCase{members, previous, bruteMinMoved(members, previous)})
	}
	all := []string{"a", "b", "c", "d"}
	for n := 1; n <= 3; n++ {
		members := all[:n]
		values := append([]string{"", "x"}, members...)
		for P := 1; P <= 4; P++ {
			for code := range pow(len(values), P) {
				previous := make([]string, P)
				for p := range previous {
					previous[p] = values[code%len(values)]
					code /= len(values)
				}
				add(members, previous)
			}
		}
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for n := 1; n <= 4; n++ {
		members := all[:n]
		values := append([]string{"", "x", "y"}, all...) // c, d are departed when n is small
		for P := 1; P <= 7; P++ {
			for range 60 {
				previous := make([]string, P)
				for p := range previous {
					previous[p] = values[rng.IntN(len(values))]
				}
				add(members, previous)
			}
		}
	}
	return cases
}

func pow(b, e int) int {
	x := 1
	for range e {
		x *= b
	}
	return x
}

// bruteMinMoved enumerates all n^P assignments, keeps the balanced ones and
// returns the least Moved among them.
func bruteMinMoved(members, previous []string) int {
	n, P := len(members), len(previous)
	q, r := P/n, P%n
	owner := make([]string, P)
	count := make([]int, n)
	best := P + 1
	for code := range pow(n, P) {
		clear(count)
		for p := range owner {
			count[code%n]++
			owner[p] = members[code%n]
			code /= n
		}
		big, ok := 0, true
		for _, c := range count {
			switch c {
			case q:
			case q + 1:
				big++
			default:
				ok = false
			}
		}
		if ok && big == r {
			best = min(best, assign.Moved(previous, owner))
		}
	}
	return best
}

// checkOptimal returns nil if a's answer for c is valid, balanced and moves
// the brute-force minimum, else what is wrong.
func checkOptimal(a assign.Assignor, c smallCase) error {
	owner := a.Assign(c.members, c.previous)
	if err := assign.Validate(c.members, len(c.previous), owner); err != nil {
		return err
	}
	if err := balanced(c.members, owner); err != nil {
		return fmt.Errorf("%q -> %q: %v", c.previous, owner, err)
	}
	if got := assign.Moved(c.previous, owner); got != c.wmin {
		return fmt.Errorf("%q over %q -> %q moves %d, the minimum is %d", c.previous, c.members, owner, got, c.wmin)
	}
	return nil
}

// TestStickyBruteForce checks Sticky's optimality against brute force, and
// that the checker is strong enough to reject two broken Sticky variants.
// It also confirms the closed-form optimum used at full size by
// TestPropertyStickyOptimal.
func TestStickyBruteForce(t *testing.T) {
	cases := smallCases()
	t.Logf("%d cases", len(cases))
	for _, c := range cases {
		if err := checkOptimal(assign.Sticky, c); err != nil {
			t.Fatalf("Sticky: %v", err)
		}
		if got := optimumMoved(c.members, c.previous); got != c.wmin {
			t.Fatalf("closed form %d, brute force %d, for %q over %q", got, c.wmin, c.previous, c.members)
		}
	}
	for _, broken := range []assign.Assignor{memberOrderQuotas{}, greedyKeep{}, assign.RoundRobin, assign.Range} {
		rejected := 0
		var first error
		for _, c := range cases {
			if err := checkOptimal(broken, c); err != nil {
				if rejected == 0 {
					first = err
				}
				rejected++
			}
		}
		if rejected == 0 {
			t.Errorf("the optimality check accepts %s on all %d cases", broken.Name(), len(cases))
		} else {
			t.Logf("%s rejected on %d of %d cases, e.g. %v", broken.Name(), rejected, len(cases), first)
		}
	}
}

// memberOrderQuotas is a broken Sticky: it hands the ⌈P/n⌉ quotas out in
// member order, ignoring who had more, so it is balanced but can move more
// than needed (P=3, members a b, all previously b: a gets 2, b keeps 1).
type memberOrderQuotas struct{}

func (memberOrderQuotas) Name() string { return "broken-member-order-quotas" }

func (memberOrderQuotas) Assign(members, previous []string) []string {
	n, P := len(members), len(previous)
	quota := make([]int, n)
	for i := range quota {
		quota[i] = P / n
		if i < P%n {
			quota[i]++
		}
	}
	return keepThenDeal(members, previous, quota)
}

// greedyKeep is a broken Sticky without the quota rule: every member keeps
// up to ⌈P/n⌉ of its previous partitions, however many members that gives
// ⌈P/n⌉, and the rest are dealt to the members with fewest.
type greedyKeep struct{}

func (greedyKeep) Name() string { return "broken-greedy" }

func (greedyKeep) Assign(members, previous []string) []string {
	n, P := len(members), len(previous)
	ceil := (P + n - 1) / n
	count := make([]int, n)
	owner := make([]string, P)
	for p, m := range previous {
		if i, ok := slices.BinarySearch(members, m); ok && count[i] < ceil {
			owner[p] = m
			count[i]++
		}
	}
	for p := range owner {
		if owner[p] == "" {
			i := slices.Index(count, slices.Min(count))
			owner[p] = members[i]
			count[i]++
		}
	}
	return owner
}

// keepThenDeal is Sticky's steps 2 and 3 for given quotas.
func keepThenDeal(members, previous []string, quota []int) []string {
	count := make([]int, len(members))
	owner := make([]string, len(previous))
	for p, m := range previous {
		if i, ok := slices.BinarySearch(members, m); ok && count[i] < quota[i] {
			owner[p] = m
			count[i]++
		}
	}
	i := 0
	for p := range owner {
		if owner[p] != "" {
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

// TestStickySavings simulates consumer groups whose members join and leave
// at random, with an in-flight delivery on every partition before each
// rebalance, and counts the deliveries each assignor's rebalances cancel
// (Moved per rebalance, summed), each assignor on its own history. At
// every step, from either history's previous owners, Sticky must move no
// more than RoundRobin or Range would.
func TestStickySavings(t *testing.T) {
	const steps, maxMembers = 500, 10
	seeds := []uint64{1, 2, 3, 4}
	var table strings.Builder
	fmt.Fprintf(&table, "%4s %6s %12s %12s %12s %8s\n", "P", "steps", "RoundRobin", "Range", "Sticky", "saving")
	for _, P := range []int{6, 12, 32} {
		var cancelled [3]int // by builtins index: RoundRobin, Range, Sticky
		for _, seed := range seeds {
			rng := rand.New(rand.NewPCG(seed, uint64(P)))
			pool := ids(2 * maxMembers)
			var members []string
			var prev [3][]string
			join := func() {
				for {
					m := pool[rng.IntN(len(pool))]
					if i, found := slices.BinarySearch(members, m); !found {
						members = slices.Insert(members, i, m)
						return
					}
				}
			}
			for range 1 + rng.IntN(maxMembers) {
				join()
			}
			for i, a := range builtins {
				prev[i] = a.Assign(members, none(P)) // the group forms: nothing in flight yet
			}
			for step := range steps {
				switch {
				case len(members) == 1 || len(members) < maxMembers && rng.IntN(2) == 0:
					join()
				default:
					i := rng.IntN(len(members))
					members = slices.Delete(members, i, i+1)
				}
				for _, from := range prev {
					s := assign.Moved(from, assign.Sticky.Assign(members, from))
					for _, other := range builtins[:2] {
						if o := assign.Moved(from, other.Assign(members, from)); s > o {
							t.Fatalf("seed %d P %d step %d: from %q over %q Sticky moves %d, %s %d", seed, P, step, from, members, s, other.Name(), o)
						}
					}
				}
				for i, a := range builtins {
					owner, err := assign.Run(a, members, prev[i])
					if err != nil {
						t.Fatalf("seed %d P %d step %d: %s: %v", seed, P, step, a.Name(), err)
					}
					cancelled[i] += assign.Moved(prev[i], owner)
					prev[i] = owner
				}
			}
		}
		saving := 100 * float64(cancelled[0]-cancelled[2]) / float64(cancelled[0])
		fmt.Fprintf(&table, "%4d %6d %12d %12d %12d %7.1f%%\n", P, steps*len(seeds), cancelled[0], cancelled[1], cancelled[2], saving)
		if cancelled[2] > cancelled[0] || cancelled[2] > cancelled[1] {
			t.Errorf("P %d: Sticky cancelled %d, more than RoundRobin %d or Range %d", P, cancelled[2], cancelled[0], cancelled[1])
		}
	}
	t.Logf("in-flight deliveries cancelled by rebalances (seeds %v, 1..%d members, each assignor on its own history):\n%s", seeds, maxMembers, table.String())
}
