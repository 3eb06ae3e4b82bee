package jetstream_test

// The contract's worked examples and rules on one server: the orders and
// rebalance examples, Seek, AddPartitions, the ack timeout on a test clock,
// and the typed library running on this backend unchanged.

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/jetstream"
)

// docs/contract.md's orders example (capacity 2), plus full and room after ack.
func TestWorkedExample(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 2})
	bt := topic(t, b, "orders", 1)
	if ok, err := b.CreateTopic("orders", 1, "string"); ok || err != nil {
		t.Fatalf("duplicate CreateTopic = %v, %v", ok, err)
	}
	if off := pub(t, bt, 0, "a"); off != 0 {
		t.Fatalf("offset %d", off)
	}
	if off := pub(t, bt, 0, "b"); off != 1 {
		t.Fatalf("offset %d", off)
	}
	if _, err := bt.TryPublish(0, engine.Message{Payload: "c"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("publish to a full partition: %v", err)
	}
	m := member(t, bt, "billing", "m1")
	if a := must(m.Join()).of(t); !slices.Equal(a, []int32{0}) {
		t.Fatalf("Join = %v", a)
	}
	wantRecs(t, poll(t, m, 2), rec{0, 0, "a", 1})
	ok, err := m.Retry(0, 0)
	wantBool(t, "Retry", ok, err, true)
	wantRecs(t, poll(t, m, 2), rec{0, 0, "a", 2})
	ok, err = m.Ack(0, 0)
	wantBool(t, "Ack", ok, err, true)
	ok, err = m.Ack(0, 0)
	wantBool(t, "second Ack", ok, err, false)
	wantRecs(t, poll(t, m, 2), rec{0, 1, "b", 1})
	// The ack removed offset 0: room for one, and the offset is not reused.
	if off := pub(t, bt, 0, "c"); off != 2 {
		t.Fatalf("offset after room = %d, want 2", off)
	}
	if _, err := bt.TryPublish(0, engine.Message{Payload: "d"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("publish to a full partition: %v", err)
	}
	d := must(b.Describe("orders")).of(t)
	if p := d.Partitions[0]; p.LogStartOffset != 1 || p.LogEndOffset != 3 {
		t.Fatalf("partition %+v", p)
	}
	gp := d.Groups[0].Partitions[0]
	if d.Groups[0].Assignor != "RoundRobin" || gp.Owner != "m1" || gp.Committed != 1 || !gp.InFlight || gp.Attempts != 1 || gp.Lag != 2 {
		t.Fatalf("group %+v", d.Groups[0])
	}
}

// docs/contract.md's rebalance example: b's join cancels a's in-flight delivery of
// partition 1, b gets it (attempt 2), a's stale ack is refused, a keeps 0.
func TestRebalanceExample(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 3)
	for p := range int32(3) {
		pub(t, bt, p, "x")
	}
	ma, mb := member(t, bt, "g", "a"), member(t, bt, "g", "b")
	if a := must(ma.Join()).of(t); !slices.Equal(a, []int32{0, 1, 2}) {
		t.Fatalf("a = %v", a)
	}
	wantRecs(t, poll(t, ma, 64), rec{0, 0, "x", 1}, rec{1, 0, "x", 1}, rec{2, 0, "x", 1})
	if a := must(mb.Join()).of(t); !slices.Equal(a, []int32{1}) {
		t.Fatalf("b = %v", a)
	}
	if a := ma.Assignment(); !slices.Equal(a, []int32{0, 2}) {
		t.Fatalf("a now %v", a)
	}
	wantRecs(t, poll(t, mb, 64), rec{1, 0, "x", 2})
	ok, err := ma.Ack(1, 0)
	wantBool(t, "stale Ack", ok, err, false)
	ok, err = ma.Ack(0, 0)
	wantBool(t, "kept Ack", ok, err, true)
	ok, err = mb.Ack(1, 0)
	wantBool(t, "b's Ack", ok, err, true)
	ok, err = mb.Leave()
	wantBool(t, "Leave", ok, err, true)
	ok, err = mb.Leave()
	wantBool(t, "second Leave", ok, err, false)
	if a := ma.Assignment(); !slices.Equal(a, []int32{0, 1, 2}) {
		t.Fatalf("a after leave %v", a)
	}
	// a's partition 2 delivery survived both rebalances (owner kept).
	ok, err = ma.Ack(2, 0)
	wantBool(t, "Ack 2", ok, err, true)
}

func TestSeek(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 10})
	bt := topic(t, b, "t", 2)
	for i := range 5 {
		pub(t, bt, 0, string(rune('a'+i)))
	}
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	for off := range int64(2) {
		poll(t, m, 1)
		ok, err := m.Ack(0, off)
		wantBool(t, "Ack", ok, err, true)
	}
	// Log start is now 2 (one group). Seek forward frees records.
	wantRecs(t, poll(t, m, 1), rec{0, 2, "c", 1})
	ok, err := b.Seek("t", "g", 0, 4)
	wantBool(t, "Seek 4", ok, err, true)
	ok, err = m.Ack(0, 2)
	wantBool(t, "Ack cancelled by Seek", ok, err, false)
	d := must(b.Describe("t")).of(t)
	if p, g := d.Partitions[0], d.Groups[0].Partitions[0]; p.LogStartOffset != 4 || g.Committed != 4 || g.InFlight || g.Attempts != 0 {
		t.Fatalf("after seek: %+v %+v", p, g)
	}
	for _, off := range []int64{3, 6} {
		if _, err := b.Seek("t", "g", 0, off); !errors.Is(err, engine.ErrOffsetOutOfRange) {
			t.Fatalf("Seek %d: %v", off, err)
		}
	}
	ok, err = b.Seek("t", "g", 0, 5) // the log end
	wantBool(t, "Seek end", ok, err, true)
	ok, err = b.Seek("t", "nope", 0, 5)
	wantBool(t, "Seek absent group", ok, err, false)
	if _, err := b.Seek("t", "g", 0, -1); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("negative offset: %v", err)
	}
	if _, err := b.Seek("t", "nope", 2, 0); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("bad partition before absent group: %v", err)
	}
	wantRecs(t, poll(t, m, 5))
	pub(t, bt, 0, "f")
	wantRecs(t, poll(t, m, 5), rec{0, 5, "f", 1})
}

func TestAddPartitions(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 1)
	ma, mb := member(t, bt, "g", "a"), member(t, bt, "g", "b")
	must(ma.Join()).of(t)
	must(mb.Join()).of(t)
	ok, err := b.SetAssignor("t", "g", engine.Range)
	wantBool(t, "SetAssignor", ok, err, true)
	if _, err := b.AddPartitions("t", 64); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("too many: %v", err)
	}
	if n := must(b.AddPartitions("t", 3)).of(t); n != 4 {
		t.Fatalf("AddPartitions = %d", n)
	}
	if a, b := ma.Assignment(), mb.Assignment(); !slices.Equal(a, []int32{0, 1}) || !slices.Equal(b, []int32{2, 3}) {
		t.Fatalf("range: a %v b %v", a, b)
	}
	if n := bt.Partitions(); n != 4 {
		t.Fatalf("Partitions = %d", n)
	}
	if off := pub(t, bt, 3, "new"); off != 0 {
		t.Fatalf("offset %d", off)
	}
	wantRecs(t, poll(t, mb, 5), rec{3, 0, "new", 1})
	d := must(b.Describe("t")).of(t)
	for p := 1; p < 4; p++ {
		if g := d.Groups[0].Partitions[p]; g.Committed != 0 {
			t.Fatalf("partition %d: %+v", p, g)
		}
	}
	if d.Groups[0].Assignor != "Range" {
		t.Fatalf("assignor %q", d.Groups[0].Assignor)
	}
}

func TestAckTimeoutWithClock(t *testing.T) {
	clk := testclock.New()
	b, _ := start(t, jetstream.Config{AckTimeout: time.Minute, Clock: clk.Now})
	bt := topic(t, b, "t", 1)
	pub(t, bt, 0, "a")
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	rs := must(m.TryPoll(nil, 1)).of(t)
	if len(rs) != 1 || !rs[0].Time.Equal(clk.Now()) {
		t.Fatalf("records %+v (time from the broker clock)", rs)
	}
	clk.Advance(59 * time.Second)
	wantRecs(t, poll(t, m, 1))
	clk.Advance(time.Second)
	wantRecs(t, poll(t, m, 1), rec{0, 0, "a", 2})
	ok, err := m.Ack(0, 0)
	wantBool(t, "Ack after redelivery", ok, err, true)
}

// The typed library runs on the backend unchanged.
func TestTypedLibrary(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 100})
	c, err := tributary.NewClusterOn(b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type order struct {
		ID int `json:"id"`
	}
	orders := must(tributary.CreateTopic(c, "orders", 2, tributary.JSON[order]())).of(t)
	if _, err := tributary.OpenTopic(c, "orders", tributary.JSON[string]()); !errors.Is(err, tributary.ErrTypeMismatch) {
		t.Fatalf("OpenTopic with another type: %v", err)
	}
	p := must(tributary.NewProducer[order](c, "web", tributary.KeyHash())).of(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 1; i <= 3; i++ {
		must(p.Send(ctx, orders, tributary.Message[order]{Key: "cust-42", Value: order{ID: i}})).of(t)
	}
	cons := must(tributary.NewConsumer(orders, "billing", "billing-1")).of(t)
	var ids []int
	for len(ids) < 3 {
		ms := must(cons.Poll(ctx, 10)).of(t)
		for _, m := range ms {
			ids = append(ids, m.Value.ID)
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(ids, []int{1, 2, 3}) {
		t.Fatalf("ids %v", ids)
	}
}
