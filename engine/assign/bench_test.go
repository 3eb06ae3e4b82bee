package assign_test

import (
	"testing"

	"github.com/f91dcac0/tributary/engine/assign"
)

// BenchmarkAssign measures one rebalance at P=64, n=16, just after the 16th
// member joined a group whose 15 members shared the partitions round-robin,
// for each built-in assignor directly and through Run.
func BenchmarkAssign(b *testing.B) {
	const P, n = 64, 16
	members := ids(n)
	previous := assign.RoundRobin.Assign(members[:n-1], make([]string, P))
	for _, a := range builtins {
		b.Run(a.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = a.Assign(members, previous)
			}
		})
		b.Run("Run/"+a.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := assign.Run(a, members, previous); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
