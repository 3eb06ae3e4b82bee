package bench_test

import (
	"strings"
	"testing"

	"github.com/f91dcac0/tributary/bench"
)

// runFamily runs every scenario of family as nested sub-benchmarks, one
// level per element of the scenario's name after the family, then one per
// subject kind: BenchmarkParallel/groups=3/engine.
func runFamily(b *testing.B, family string) {
	found := false
	for _, sc := range bench.Scenarios() {
		if sc.Family() != family {
			continue
		}
		found = true
		path := strings.Split(sc.Name, "/")[1:]
		runNested(b, path, func(b *testing.B) {
			for _, name := range sc.Subjects {
				k, ok := bench.KindByName(name)
				if !ok {
					b.Fatalf("scenario %s: unknown subject %q", sc.Name, name)
				}
				b.Run(k.Name, bench.Func(sc, k))
			}
		})
	}
	if !found {
		b.Fatalf("no scenario in family %q", family)
	}
}

func runNested(b *testing.B, path []string, f func(*testing.B)) {
	if len(path) == 0 {
		f(b)
		return
	}
	b.Run(path[0], func(b *testing.B) { runNested(b, path[1:], f) })
}

// BenchmarkPublish: appends to one partition kept from filling up, in
// ns/record.
func BenchmarkPublish(b *testing.B) { runFamily(b, "Publish") }

// BenchmarkRoundTrip: publish → poll(1) → ack in one goroutine, in
// ns/record; chan-raw is the bare channel send + receive.
func BenchmarkRoundTrip(b *testing.B) { runFamily(b, "RoundTrip") }

// BenchmarkBatch64: 64 publishes, one poll of 64, 64 acks, in ns/record.
func BenchmarkBatch64(b *testing.B) { runFamily(b, "Batch64") }

// BenchmarkParallel: one pipeline per goroutine on its own partition, with 1
// and 3 groups, in ns/record of aggregate throughput.
func BenchmarkParallel(b *testing.B) { runFamily(b, "Parallel") }

// BenchmarkHotTopic: one topic of 16 partitions, a goroutine per partition
// whatever GOMAXPROCS, in ns/record of aggregate throughput.
func BenchmarkHotTopic(b *testing.B) { runFamily(b, "HotTopic") }

// BenchmarkContended: many members of one group; many groups on one
// partition.
func BenchmarkContended(b *testing.B) { runFamily(b, "Contended") }

// BenchmarkRebalance: Join and Leave cost by members and partitions, in
// ns/rebalance.
func BenchmarkRebalance(b *testing.B) { runFamily(b, "Rebalance") }

// BenchmarkMixed: publish, poll, ack, retry, join and leave from every
// goroutine, in ns/call.
func BenchmarkMixed(b *testing.B) { runFamily(b, "Mixed") }
