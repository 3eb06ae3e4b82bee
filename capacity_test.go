package tributary_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// Tests of the typed library's capacity (docs/contract.md): NewCluster
// accepts up to 16,777,216 records per partition, and memory follows what
// a partition retains.

// heapAlloc returns the live heap after two full collections, in bytes.
func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestMaxCapacityClusterHeap: a cluster of capacity 16,777,216 with a
// 64-partition topic and nothing published holds under 64 MiB of heap
// (docs/contract.md, the typed library's capacity), measured with runtime.ReadMemStats after GC. A log
// that allocated its capacity would need 32 GiB here.
func TestMaxCapacityClusterHeap(t *testing.T) {
	before := heapAlloc()
	c := testCluster(t, tributary.MaxCapacity, engine.WithReplayWindow(tributary.MaxCapacity))
	testTopic[string](t, c, "big", 64, tributary.String())
	grown := heapAlloc() - before
	t.Logf("heap of the cluster and its empty topic: %d bytes", grown)
	if grown >= 64<<20 {
		t.Fatalf("an empty 64-partition topic of capacity %d holds %d bytes of heap, want under 64 MiB", tributary.MaxCapacity, grown)
	}
	runtime.KeepAlive(c)
}

// TestReplayFromZeroAfter5000: on NewCluster(1,000,000) with a replay
// window of the capacity, a consumer reads and acks 5,000 messages, seeks
// back to offset 0 and reads all 5,000 again, in order (rules 20, 21): far
// more than rule 1's 1,000 records are retained.
func TestReplayFromZeroAfter5000(t *testing.T) {
	const n = 5000
	c := testCluster(t, 1_000_000, engine.WithReplayWindow(1_000_000))
	tp := testTopic[string](t, c, "events", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "c1")
	for i := range n {
		sendOK(t, pr, tp, tributary.Message[string]{Value: fmt.Sprint(i)})
	}
	read := func(pass string) {
		t.Helper()
		for i := range int64(n) {
			ms := pollOK(t, cons, 1)
			if len(ms) != 1 || ms[0].Offset != i || ms[0].Value != fmt.Sprint(i) {
				t.Fatalf("%s: polled %+v, want offset %d", pass, ms, i)
			}
			if err := cons.Ack(ms[0]); err != nil {
				t.Fatalf("%s: Ack(%d): %v", pass, i, err)
			}
		}
	}
	read("first read")
	if err := cons.Seek(0, 0); err != nil {
		t.Fatalf("Seek(0, 0) after %d records: %v", n, err)
	}
	read("replay from 0")
	d, err := c.Describe("events")
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Partitions[0]; p.LogStartOffset != 0 || p.LogEndOffset != n {
		t.Fatalf("log [%d, %d), want [0, %d): the window keeps everything", p.LogStartOffset, p.LogEndOffset, n)
	}
}
