// Package brokenassign holds deliberately wrong partition assignors for the
// tests that must show they catch a broken assignor: the engine's
// differential test (engine/diff_test.go) and the model's reference
// comparison (model/assignors_internal_test.go).
//
// Each assignor has the method set of engine.Assignor and model.Assignor
// (Name, and Assign from the sorted members and each partition's previous
// owner to each partition's new owner), and the name of the built-in it
// imitates, so a broker or a checker cannot tell it apart by name.
package brokenassign

// Range is Kafka's RangeAssignor with a plausible off-by-one: when the
// partitions do not divide evenly, the larger blocks (⌈P/n⌉ partitions) go
// to the last members instead of the first. Its Name is "Range". Assign
// returns len(previous) owners, each one of members; members must not be
// empty.
type Range struct{}

// Name returns "Range", the name of the assignor it imitates.
func (Range) Name() string { return "Range" }

// Assign gives member i of n a contiguous block of P/n partitions, one more
// for the last P mod n members, in member order.
func (Range) Assign(members, previous []string) []string {
	n, parts := len(members), len(previous)
	owner := make([]string, 0, parts)
	for i, m := range members {
		size := parts / n
		if i >= n-parts%n {
			size++
		}
		for range size {
			owner = append(owner, m)
		}
	}
	return owner
}
