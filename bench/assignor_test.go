package bench_test

import (
	"testing"

	"github.com/f91dcac0/tributary/engine"
)

// BenchmarkRebalanceAssignor: the Rebalance scenario's join-and-leave pair
// (a 15-member group on 64 partitions; a 16th member joins, then leaves)
// with each built-in assignor, in ns per rebalance. The assignor's run is
// part of it; it happens under the topic's membership lock but before any
// partition lock, so Publish, Poll and Ack do not wait for it.
func BenchmarkRebalanceAssignor(b *testing.B) {
	for _, a := range []engine.Assignor{engine.RoundRobin, engine.Range, engine.Sticky} {
		b.Run(a.Name(), func(b *testing.B) {
			b.ReportAllocs()
			br, err := engine.New(16)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := br.Create("t", 64); err != nil {
				b.Fatal(err)
			}
			if _, err := br.CreateGroup("t", "g", a); err != nil {
				b.Fatal(err)
			}
			for m := range 15 {
				if _, err := br.Join("t", "g", string(rune('a'+m))); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, err := br.Join("t", "g", "guest"); err != nil {
					b.Fatal(err)
				}
				if ok, err := br.Leave("t", "g", "guest"); err != nil || !ok {
					b.Fatalf("Leave = %v, %v", ok, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/rebalance")
		})
	}
}
