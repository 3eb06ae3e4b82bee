package jetstream_test

// Retention: the log start follows the slowest group's commits, a purge cut
// short is repaired, and a retention pass reads the state right whatever
// its size: snapshots at each side of the batch limits (deleted groups'
// tombstones beside live cursors), and a Seek's cursor left below the log
// start by a placer that died.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

func TestRetentionTwoGroups(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 3})
	bt := topic(t, b, "t", 1)
	for _, g := range []string{"g1", "g2"} {
		ok, err := b.CreateGroup("t", g, engine.RoundRobin)
		wantBool(t, "CreateGroup", ok, err, true)
	}
	ok, err := b.CreateGroup("t", "g1", engine.Range)
	wantBool(t, "duplicate CreateGroup", ok, err, false)
	for _, s := range []string{"a", "b", "c"} {
		pub(t, bt, 0, s)
	}
	m1, m2 := member(t, bt, "g1", "m"), member(t, bt, "g2", "m")
	must(m1.Join()).of(t)
	must(m2.Join()).of(t)
	for off := range int64(3) {
		wantRecs(t, poll(t, m1, 1), rec{0, off, string(rune('a' + off)), 1})
		ok, err := m1.Ack(0, off)
		wantBool(t, "Ack g1", ok, err, true)
	}
	if _, err := bt.TryPublish(0, engine.Message{Payload: "d"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("g2 still needs every record: %v", err)
	}
	wantRecs(t, poll(t, m2, 1), rec{0, 0, "a", 1})
	ok, err = m2.Ack(0, 0)
	wantBool(t, "Ack g2", ok, err, true)
	if off := pub(t, bt, 0, "d"); off != 3 {
		t.Fatalf("offset %d", off)
	}
	d := must(b.Describe("t")).of(t)
	if p := d.Partitions[0]; p.LogStartOffset != 1 || p.LogEndOffset != 4 {
		t.Fatalf("partition %+v", p)
	}
	// Deleting g2 (after its member leaves) frees what only it needed.
	if _, err := b.DeleteGroup("t", "g2"); !errors.Is(err, engine.ErrGroupNotEmpty) {
		t.Fatalf("DeleteGroup with members: %v", err)
	}
	must(m2.Leave()).of(t)
	ok, err = b.DeleteGroup("t", "g2")
	wantBool(t, "DeleteGroup", ok, err, true)
	ok, err = b.DeleteGroup("t", "g2")
	wantBool(t, "second DeleteGroup", ok, err, false)
	d = must(b.Describe("t")).of(t)
	if p := d.Partitions[0]; p.LogStartOffset != 3 || len(d.Groups) != 1 {
		t.Fatalf("after delete: %+v %+v", p, d.Groups)
	}
	// A re-created g2 is fresh: at the log start, no attempts.
	m2b := member(t, bt, "g2", "n")
	must(m2b.Join()).of(t)
	wantRecs(t, poll(t, m2b, 5), rec{0, 3, "d", 1})
	s := must(b.Snapshot("t")).of(t)
	if len(s.Records[0]) != 1 || s.Records[0][0].Payload != "d" {
		t.Fatalf("snapshot records %+v", s.Records)
	}
}

// A purge cut short after its compare-and-set on low (a crash) leaves
// records below the log start in the stream; the next retention pass on
// the partition purges them though low does not move, and a publish that
// finds the partition full purges them too.
func TestRepairInterruptedPurge(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 3, ReplayWindow: 2})
	bt := topic(t, b, "t", 2)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	for p := range int32(2) {
		for _, s := range []string{"a", "b", "c"} {
			pub(t, bt, p, s)
		}
	}
	for off := range int64(2) {
		if got := len(poll(t, m, 2)); got != 2 {
			t.Fatalf("polled %d records", got)
		}
		for p := range int32(2) {
			ok, err := m.Ack(p, off)
			wantBool(t, "Ack", ok, err, true)
		}
	}
	stream := func(p int32) (uint64, uint64) {
		t.Helper()
		first, msgs, err := jetstream.StreamState(b, "t", p)
		if err != nil {
			t.Fatal(err)
		}
		return first, msgs
	}
	if first, msgs := stream(0); first != 1 || msgs != 3 {
		t.Fatalf("window of 2: stream first %d msgs %d", first, msgs)
	}
	// Partition 0: an eviction (low 0 → 1) dies before its purge.
	if err := jetstream.RaiseLowWithoutPurge(b, "t", 0, 1); err != nil {
		t.Fatal(err)
	}
	if first, msgs := stream(0); first != 1 || msgs != 3 {
		t.Fatalf("crashed purge: stream first %d msgs %d", first, msgs)
	}
	s := must(b.Snapshot("t")).of(t)
	if p := s.Partitions[0]; p.LogStartOffset != 1 || len(s.Records[0]) != 2 || s.Records[0][0].Payload != "b" {
		t.Fatalf("records below low are invisible: %+v %v", p, s.Records[0])
	}
	// A Seek to the committed offset moves no cursor and no low (M − w = 0
	// < 1): the pass still purges offset 0.
	ok, err := b.Seek("t", "g", 0, 2)
	wantBool(t, "Seek", ok, err, true)
	if first, msgs := stream(0); first != 2 || msgs != 2 {
		t.Fatalf("after the repairing pass: stream first %d msgs %d", first, msgs)
	}
	// Partition 1: low raised to the committed offset 2 (nothing left to
	// evict) without a purge: the stream is full of 0 1 2, two of them
	// visible. A publish repairs and succeeds, as the engine's would.
	if err := jetstream.RaiseLowWithoutPurge(b, "t", 1, 2); err != nil {
		t.Fatal(err)
	}
	if off := pub(t, bt, 1, "d"); off != 3 {
		t.Fatalf("offset %d", off)
	}
	if first, msgs := stream(1); first != 3 || msgs != 2 {
		t.Fatalf("after the repairing publish: stream first %d msgs %d", first, msgs)
	}
	if off := pub(t, bt, 1, "e"); off != 4 {
		t.Fatalf("offset %d", off)
	}
	if _, err := bt.TryPublish(1, engine.Message{Payload: "f"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("publish to a full partition with nothing fully committed: %v", err)
	}
}

// padDeletedGroups creates and deletes n groups on topic t: each leaves a group key
// tombstone and one cursor tombstone per partition in the state stream, keys
// a retention pass's snapshot (group.T.*, cursor.T.*.p) still matches.
func padDeletedGroups(t *testing.T, b *jetstream.Backend, topic string, n int) {
	t.Helper()
	for i := range n {
		g := fmt.Sprintf("pad%04d", i)
		if ok, err := b.CreateGroup(topic, g, engine.RoundRobin); !ok || err != nil {
			t.Fatalf("CreateGroup %s: %v %v", g, ok, err)
		}
		if ok, err := b.DeleteGroup(topic, g); !ok || err != nil {
			t.Fatalf("DeleteGroup %s: %v %v", g, ok, err)
		}
	}
}

// rawPadDeletedGroups writes, through a plain connection, the keys n deleted groups
// leave on a one-partition topic (what DeleteGroup writes: a group
// tombstone and a cursor tombstone), fast.
func rawPadDeletedGroups(t *testing.T, srv *jetstream.Server, sp, topic string, n int) {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		g := fmt.Sprintf("raw%04d", i)
		if _, err := js.Publish(ctx, sp+".state.group."+topic+"."+g, []byte(`{"deleted":true}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, sp+".state.cursor."+topic+"."+g+".0", []byte(`{"deleted":true,"inc":1}`)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotBatchBoundary: a retention pass whose snapshot
// holds about a thousand keys (the tombstones of deleted groups, written
// directly, beside two live groups), at each side of the limits: 999 keys,
// 1,001 and 1,023 (an answer cut at a batch size of 1,000 would leave the
// newest keys out: a live cursor unseen, the log start raised past it), 1,045
// (over the server's 1,024: 413, key by key).
func TestSnapshotBatchBoundary(t *testing.T) {
	for _, pad := range []int{497, 498, 509, 520} {
		t.Run(fmt.Sprintf("keys=%d", 1+2*(pad+2)), func(t *testing.T) {
			b, srv := start(t, jetstream.Config{Prefix: "H23", Capacity: 50, Storage: jetstream.MemoryStorage, RequestTimeout: 2 * time.Second})
			bt := topic(t, b, "t", 1)
			for i := range 4 {
				pub(t, bt, 0, fmt.Sprint(i))
			}
			rawPadDeletedGroups(t, srv, "h23", "t", pad)
			ms, mf := member(t, bt, "s", "m"), member(t, bt, "f", "m")
			must(ms.Join()).of(t)
			must(mf.Join()).of(t)
			for off := range int64(4) {
				wantRecs(t, poll(t, mf, 1), rec{0, off, fmt.Sprint(off), 1})
				ok, err := mf.Ack(0, off)
				wantBool(t, "Ack f", ok, err, true)
			}
			wantRecs(t, poll(t, ms, 1), rec{0, 0, "0", 1})
			ok, err := ms.Ack(0, 0)
			wantBool(t, "Ack s", ok, err, true)
			d := must(b.Describe("t")).of(t)
			if p := d.Partitions[0]; p.LogStartOffset != 1 {
				t.Errorf("log start %d after s acked 0 (s committed 1, f 4): want 1", p.LogStartOffset)
			}
			rs, err := ms.TryPoll(nil, 1)
			if err != nil || len(rs) != 1 || rs[0].Offset != 1 {
				t.Errorf("s's next poll = %v, %v; want record 1", recs(rs), err)
			}
		})
	}
}

// TestSnapshotTruncatedFull: as TestSnapshotBatchBoundary
// with one live group: the cut answer (1,001 keys) leaves out the newest
// key, the group's cursor as its Ack wrote it, so neither the Ack's pass
// nor the pass of the next publish to the full partition sees any live
// cursor ("no group": nothing is removed). The publish reports the
// partition full although offset 0 is fully committed (window 0): the
// engine would publish it at offset 4.
func TestSnapshotTruncatedFull(t *testing.T) {
	b, srv := start(t, jetstream.Config{Prefix: "H23", Capacity: 4, Storage: jetstream.MemoryStorage, RequestTimeout: 2 * time.Second})
	bt := topic(t, b, "t", 1)
	for i := range 4 {
		pub(t, bt, 0, fmt.Sprint(i))
	}
	// 1 low + (P+1) cursors + (P+1) groups = 1,001 with P = 499.
	rawPadDeletedGroups(t, srv, "h23", "t", 499)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	wantRecs(t, poll(t, m, 1), rec{0, 0, "0", 1})
	ok, err := m.Ack(0, 0)
	wantBool(t, "Ack", ok, err, true)
	st := time.Now()
	off, err := bt.TryPublish(0, engine.Message{Payload: "4"})
	if err != nil || off != 4 {
		t.Errorf("TryPublish to the full partition after the Ack freed offset 0 = %d, %v after %v; want 4", off, err, time.Since(st))
	}
}

// TestDeadPlacerStrandsGroup: a Seek back whose cursor write a
// purge overtook, its fence request then lost (a network blip: Seek
// returns ErrUnavailable; or the process dying there), leaves g's cursor
// below the log start, and its placer never puts it back. Readers wait
// for the placer (waitPlacer) only fallbackWait: then they move the cursor
// up to the log start themselves, so g's owner gets the record there, the
// other group's Ack and a second member's Join of g go through, and a
// Seek works. Readers that waited for the placer for good would fail it:
// every poll of g would end with ErrContention, the Join would fail, and
// the Seek could not repair it.
func TestDeadPlacerStrandsGroup(t *testing.T) {
	b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 10, Storage: jetstream.MemoryStorage, RequestTimeout: 2 * time.Second})
	bt := topic(t, b1, "t", 1)
	mg, mh := member(t, bt, "g", "m"), member(t, bt, "h", "m")
	must(mg.Join()).of(t)
	must(mh.Join()).of(t)
	for i := range 6 {
		pub(t, bt, 0, fmt.Sprint(i))
	}
	wantBool(t, "Seek g 4", must(b1.Seek("t", "g", 0, 4)).v, nil, true)
	// b2 seeks g back to 2. Just before its cursor write goes out, b1
	// seeks h forward to 4, which raises low to 4 (g's cursor is still 4
	// as read by that pass); b2's write then lands at 2 < low, and its
	// fence on low is lost: b2 "dies".
	var raced, fenceLost bool
	jetstream.SetLossy(b2, func(key string, written bool) bool {
		switch {
		case !written && key == "cursor.t.g.0" && !raced:
			raced = true
			if ok, err := b1.Seek("t", "h", 0, 4); !ok || err != nil {
				t.Errorf("Seek h 4: %v %v", ok, err)
			}
		case !written && key == "low.t.0" && raced && !fenceLost:
			fenceLost = true
			return true
		}
		return false
	})
	_, err := b2.Seek("t", "g", 0, 2)
	t.Logf("b2 Seek g 2 (dies): %v", err)
	if !raced || !fenceLost {
		t.Fatalf("race not set up: raced %v fence lost %v", raced, fenceLost)
	}
	jetstream.SetLossy(b2, nil)
	// g's owner polls (through b1): it waits for the placer, then repairs
	// the cursor to the log start and gets the record there.
	start := time.Now()
	rs, err := mg.TryPoll(nil, 1)
	el := time.Since(start)
	t.Logf("g poll: %v, %v after %v", recs(rs), err, el)
	if err != nil || len(rs) != 1 || rs[0].Offset != 4 {
		t.Errorf("g's poll after its placer died = %v, %v; want the record at the log start (4)", recs(rs), err)
	}
	if el > 4*time.Second {
		t.Errorf("g's poll took %v: more than the placer's wait (2 s) and a margin", el)
	}
	d := must(b1.Describe("t")).of(t)
	if p := d.Partitions[0]; p.LogStartOffset != 4 || d.Groups[0].Partitions[0].Committed != 4 {
		t.Errorf("after the repair: log [%d,%d), g committed %d; want log start 4, committed 4", p.LogStartOffset, p.LogEndOffset, d.Groups[0].Partitions[0].Committed)
	}
	wantBool(t, "g Ack(4)", must(mg.Ack(0, 4)).v, nil, true)
	start = time.Now()
	wantRecs(t, poll(t, mh, 1), rec{0, 4, "4", 1})
	ok, err := mh.Ack(0, 4)
	if el := time.Since(start); !ok || err != nil || el > time.Second {
		t.Errorf("h poll+Ack(4) = %v, %v in %v; want true at once", ok, err, el)
	}
	start = time.Now()
	m2 := member(t, bt, "g", "m2")
	if _, err := m2.Join(); err != nil {
		t.Errorf("a second member's Join of g: %v after %v", err, time.Since(start))
	}
	// Both groups have committed 4: the log start is 5, and a Seek of g
	// there works (the Join's rebalance migrated the cursor).
	ok, err = b1.Seek("t", "g", 0, 5)
	if !ok || err != nil {
		t.Errorf("Seek g 5 = %v, %v", ok, err)
	}
}
