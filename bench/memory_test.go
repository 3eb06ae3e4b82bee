package bench_test

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/f91dcac0/tributary/engine"
)

// heapInUse returns the live heap after a full collection, in bytes.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// memoryPerUnit builds something with build (which returns the number of
// units it made and a value that keeps them alive), and reports the live
// heap it added per unit, in bytes.
func memoryPerUnit(b *testing.B, unit string, build func() (units int, keep any)) {
	b.Helper()
	b.ReportAllocs()
	var perUnit float64
	for range b.N {
		before := heapInUse()
		n, keep := build()
		after := heapInUse()
		runtime.KeepAlive(keep)
		perUnit = (float64(after) - float64(before)) / float64(n)
	}
	b.ReportMetric(perUnit, "B/"+unit)
}

// newBroker is engine.New that fails the benchmark on an error.
func newBroker(b *testing.B, capacity int32, opts ...engine.Option) *engine.Broker {
	b.Helper()
	br, err := engine.New(capacity, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return br
}

// BenchmarkMemory measures the broker's live heap (runtime.MemStats
// HeapAlloc after two full collections, before and after) per unit of
// state, as B/<unit>. Run it with -benchtime 1x: each run builds a fresh
// broker.
//
//   - empty-partition/capacity=C: Create of 100 topics of 64 partitions on
//     a broker of capacity C, per partition (up to 1,024 records of
//     capacity the ring of slots is allocated when the partition is
//     created; 16,777,216, with engine.WithExtendedCapacity, allocates no
//     page until a record arrives);
//   - empty-topic/capacity=16777216: the same 100 topics, per topic of 64
//     partitions: the typed-library capacity rule's (docs/contract.md) empty 64-partition topic;
//   - record/headers=H: 64,000 records of a 16-byte payload (a fresh
//     string each, as a caller's would be) with H headers of 8-byte keys
//     and values and a key when H > 0, published into a topic created
//     before the measurement, per record: what the broker keeps beyond the
//     ring slot (the slot is in empty-partition);
//   - record/capacity=16777216/records=1000000: 1,000,000 records of a
//     16-byte payload published into one partition of a broker of capacity
//     16,777,216, per record: the slot in its page (the pages, 977 of them,
//     are counted here) plus the payload;
//   - group-partition: 1,000 groups created on a topic of 64 partitions,
//     per (group, partition);
//   - groups=100000: 100,000 groups created on a topic of one partition,
//     per group.
func BenchmarkMemory(b *testing.B) {
	for _, capacity := range []int32{1, 1000, engine.MaxExtendedCapacity} {
		b.Run(fmt.Sprintf("empty-partition/capacity=%d", capacity), func(b *testing.B) {
			memoryPerUnit(b, "partition", func() (int, any) {
				br := newBroker(b, capacity, engine.WithExtendedCapacity())
				for i := range 100 {
					if _, err := br.Create("t"+strconv.Itoa(i), engine.MaxPartitionCount); err != nil {
						b.Fatal(err)
					}
				}
				return 100 * engine.MaxPartitionCount, br
			})
		})
	}
	for _, headers := range []int{0, 3} {
		b.Run(fmt.Sprintf("record/headers=%d", headers), func(b *testing.B) {
			br := newBroker(b, 1000)
			if _, err := br.Create("t", engine.MaxPartitionCount); err != nil {
				b.Fatal(err)
			}
			memoryPerUnit(b, "record", func() (int, any) {
				n := 0
				for p := range int32(engine.MaxPartitionCount) {
					for i := range 1000 {
						m := engine.Message{Payload: fmt.Sprintf("payload-%08d", p*1000+int32(i))}
						if headers > 0 {
							m.Key = fmt.Sprintf("key-%04d", i)
							for h := range headers {
								m.Headers = append(m.Headers, engine.Header{Key: fmt.Sprintf("hkey-%03d", h), Value: fmt.Sprintf("val-%04d", i)})
							}
						}
						off, err := br.PublishMessage("t", p, m)
						if err != nil || off < 0 {
							b.Fatalf("publish: %d, %v", off, err)
						}
						n++
					}
				}
				return n, br
			})
		})
	}
	b.Run(fmt.Sprintf("empty-topic/capacity=%d", engine.MaxExtendedCapacity), func(b *testing.B) {
		memoryPerUnit(b, "topic", func() (int, any) {
			br := newBroker(b, engine.MaxExtendedCapacity, engine.WithExtendedCapacity())
			for i := range 100 {
				if _, err := br.Create("t"+strconv.Itoa(i), engine.MaxPartitionCount); err != nil {
					b.Fatal(err)
				}
			}
			return 100, br
		})
	})
	b.Run(fmt.Sprintf("record/capacity=%d/records=1000000", engine.MaxExtendedCapacity), func(b *testing.B) {
		br := newBroker(b, engine.MaxExtendedCapacity, engine.WithExtendedCapacity())
		if _, err := br.Create("t", 1); err != nil {
			b.Fatal(err)
		}
		memoryPerUnit(b, "record", func() (int, any) {
			for i := range 1_000_000 {
				off, err := br.Publish("t", 0, fmt.Sprintf("payload-%08d", i))
				if err != nil || off < 0 {
					b.Fatalf("publish: %d, %v", off, err)
				}
			}
			return 1_000_000, br
		})
	})
	b.Run("group-partition", func(b *testing.B) {
		br := newBroker(b, 1000)
		if _, err := br.Create("t", engine.MaxPartitionCount); err != nil {
			b.Fatal(err)
		}
		memoryPerUnit(b, "group-partition", func() (int, any) {
			for g := range 1000 {
				if _, err := br.CreateGroup("t", "g"+strconv.Itoa(g), engine.RoundRobin); err != nil {
					b.Fatal(err)
				}
			}
			return 1000 * engine.MaxPartitionCount, br
		})
	})
	b.Run("groups=100000", func(b *testing.B) {
		br := newBroker(b, 1000)
		if _, err := br.Create("t", 1); err != nil {
			b.Fatal(err)
		}
		memoryPerUnit(b, "group", func() (int, any) {
			for g := range 100_000 {
				if _, err := br.CreateGroup("t", "g"+strconv.Itoa(g), engine.RoundRobin); err != nil {
					b.Fatal(err)
				}
			}
			return 100_000, br
		})
	})
}
