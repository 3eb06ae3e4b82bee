package brokenassign

import (
	"slices"
	"testing"
)

// TestRangeIsBroken pins the fault: with 3 partitions and 2 members the
// extra partition goes to the last member, where Range gives it to the
// first ([a a b]).
func TestRangeIsBroken(t *testing.T) {
	got := Range{}.Assign([]string{"a", "b"}, []string{"", "", ""})
	if want := []string{"a", "b", "b"}; !slices.Equal(got, want) {
		t.Fatalf("Assign = %v, want %v", got, want)
	}
	if got := (Range{}).Assign([]string{"a", "b"}, []string{"", ""}); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Assign of an even split = %v, want [a b]", got)
	}
}
