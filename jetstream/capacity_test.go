package jetstream_test

// A topic's capacity beyond rule 1's 1,000 records: a Backend of the typed
// library's largest capacity creates its streams with that MaxMsgs, retains
// every record and delivers them from offset 0.

import (
	"fmt"
	"testing"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestCapacityBeyondRuleOne: a Backend of Capacity 16,777,216 (the typed
// library's bound, docs/contract.md) creates its streams with that MaxMsgs
// (the server accepts it), retains 1,200 records in a partition with no
// group, more than rule 1's 1,000, and a group then reads them from
// offset 0.
func TestCapacityBeyondRuleOne(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	b, err := jetstream.Open(jetstream.Config{Server: srv, Prefix: "CAP", Storage: jetstream.MemoryStorage, Capacity: engine.MaxExtendedCapacity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if ok, err := b.CreateTopic("t", 1, "bytes"); !ok || err != nil {
		t.Fatalf("CreateTopic: %v, %v", ok, err)
	}
	tp, _, err := b.OpenTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1200
	for i := range int64(n) {
		off, err := tp.TryPublish(0, engine.Message{Payload: fmt.Sprint(i)})
		if err != nil || off != i {
			t.Fatalf("TryPublish %d = %d, %v", i, off, err)
		}
	}
	m, err := tp.Member("g", "m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Join(); err != nil {
		t.Fatal(err)
	}
	for i := range int64(3) {
		recs, err := m.TryPoll(nil, 1)
		if err != nil || len(recs) != 1 || recs[0].Offset != i || recs[0].Payload != fmt.Sprint(i) {
			t.Fatalf("TryPoll = %+v, %v; want offset %d", recs, err, i)
		}
		if ok, err := m.Ack(0, i); !ok || err != nil {
			t.Fatalf("Ack(0, %d) = %v, %v", i, ok, err)
		}
	}
	d, err := b.Describe("t")
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Partitions[0]; p.LogStartOffset != 3 || p.LogEndOffset != n {
		t.Fatalf("log [%d, %d), want [3, %d)", p.LogStartOffset, p.LogEndOffset, n)
	}
}
