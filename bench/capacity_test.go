package bench_test

import (
	"fmt"
	"testing"

	"github.com/f91dcac0/tributary/bench"
	"github.com/f91dcac0/tributary/engine"
)

// BenchmarkBacklogRoundTrip: one goroutine publishes one record, polls the
// oldest unconsumed one (MemberHandle.AppendPoll into a reused buffer) and
// acks it, per op, on a one-partition topic whose one group stays backlog
// records behind the log end, so that the log retains backlog + 1 records
// throughout and wraps its ring, or installs and gives up its pages, as it
// goes. capacity=1000/backlog=0 is BenchmarkRoundTrip/handles/engine's
// shape; the capacity=16777216 rows (engine.WithExtendedCapacity, SPEC
// section 3.5) are paged logs: with the backlog at 0 (one page), 900, and
// 1,000,000 records retained (977 pages).
//
//	go test -run '^$' -bench BacklogRoundTrip -benchtime 2s -count 3 ./bench/
func BenchmarkBacklogRoundTrip(b *testing.B) {
	for _, c := range []struct {
		capacity int32
		backlog  int
	}{
		{1000, 0}, {1000, 900}, {engine.MaxExtendedCapacity, 0}, {engine.MaxExtendedCapacity, 900}, {engine.MaxExtendedCapacity, 1_000_000},
	} {
		b.Run(fmt.Sprintf("capacity=%d/backlog=%d", c.capacity, c.backlog), func(b *testing.B) {
			br := newBroker(b, c.capacity, engine.WithExtendedCapacity())
			if _, err := br.Create("t", 1); err != nil {
				b.Fatal(err)
			}
			th, err := br.Topic("t")
			if err != nil {
				b.Fatal(err)
			}
			mh, err := th.Member("g", "m")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := mh.Join(); err != nil {
				b.Fatal(err)
			}
			for range c.backlog {
				if off, err := th.Publish(0, bench.Payload); err != nil || off < 0 {
					b.Fatalf("backlog: Publish = %d, %v", off, err)
				}
			}
			buf := make([]engine.Record, 0, 1)
			b.ReportAllocs()
			for b.Loop() {
				off, err := th.Publish(0, bench.Payload)
				if err != nil || off < 0 {
					b.Fatalf("Publish = %d, %v", off, err)
				}
				buf, err = mh.AppendPoll(buf[:0], 1)
				if err != nil || len(buf) != 1 || buf[0].Offset != off-int64(c.backlog) {
					b.Fatalf("AppendPoll = %v, %v; want offset %d", buf, err, off-int64(c.backlog))
				}
				if ok, err := mh.Ack(0, buf[0].Offset); err != nil || !ok {
					b.Fatalf("Ack(0, %d) = %v, %v", buf[0].Offset, ok, err)
				}
			}
			bench.Report(b, "record", int64(b.N))
		})
	}
}
