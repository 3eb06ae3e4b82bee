package engine_test

// Many groups on one partition, racing: fan-out with retention exactness
// (no publish succeeds before every group committed past the record it
// displaces), and the helpers of the cursor race tests (cursor_poll_test.go,
// cursor_seek_test.go, ack_timeout_race_test.go, rebalance_race_test.go,
// room_test.go): storm durations, payloads, and self-consistent, monotonic
// Describe and Snapshot. These tests check the per-(group, partition)
// cursors: lock-free polls of the log end, compare-and-swap commits of
// unpinned cursors, the pin at the least committed offset, rebalances that
// lock only moved cursors, and AddPartitions publishing assignments before
// the count. Every check is an exact expectation derived from the contract
// (docs/contract.md), never a timing assertion.

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// cxDur is how long each storm runs: short under -race (2-core machines).
func cxDur() time.Duration {
	if raceEnabled {
		return 350 * time.Millisecond
	}
	return 150 * time.Millisecond
}

// cxPayload is the payload a sole publisher of partition p gives offset off.
func cxPayload(p int32, off int64) string { return fmt.Sprintf("%d:%d", p, off) }

// cxMax raises a to at least v.
func cxMax(a *atomic.Int64, v int64) {
	for {
		c := a.Load()
		if c >= v || a.CompareAndSwap(c, v) {
			return
		}
	}
}

// cxCheckDesc checks what must hold in every Describe snapshot: offsets in
// order and within capacity, groups sorted, owners among the members,
// committed offsets inside the log, lag = end − committed ≥ 0, an in-flight
// delivery only of a record that exists, and retention exact at that
// instant: with any group, low − window ≤ log start ≤ low, where low is the
// least committed offset (log start = low without a replay window).
func cxCheckDesc(d engine.TopicDescription, capacity, window int64) error {
	n := len(d.Partitions)
	for i, pd := range d.Partitions {
		if pd.Partition != int32(i) {
			return fmt.Errorf("Partitions[%d].Partition = %d", i, pd.Partition)
		}
		if pd.LogStartOffset < 0 || pd.LogStartOffset > pd.LogEndOffset || pd.LogEndOffset-pd.LogStartOffset > capacity {
			return fmt.Errorf("p%d: log [%d,%d) with capacity %d", i, pd.LogStartOffset, pd.LogEndOffset, capacity)
		}
	}
	if !sort.SliceIsSorted(d.Groups, func(i, j int) bool { return d.Groups[i].Group < d.Groups[j].Group }) {
		return fmt.Errorf("groups not sorted")
	}
	low := make([]int64, n)
	for i := range low {
		low[i] = math.MaxInt64
	}
	for _, g := range d.Groups {
		if len(g.Partitions) != n {
			return fmt.Errorf("group %s: %d partitions, topic has %d", g.Group, len(g.Partitions), n)
		}
		for i := 1; i < len(g.Members); i++ {
			if g.Members[i-1] >= g.Members[i] {
				return fmt.Errorf("group %s: members %v not sorted and distinct", g.Group, g.Members)
			}
		}
		for p, gp := range g.Partitions {
			pd := d.Partitions[p]
			if gp.Partition != int32(p) {
				return fmt.Errorf("group %s: Partitions[%d].Partition = %d", g.Group, p, gp.Partition)
			}
			if len(g.Members) == 0 {
				if gp.Owner != "" {
					return fmt.Errorf("group %s p%d: owner %q with no members", g.Group, p, gp.Owner)
				}
			} else if _, ok := slices.BinarySearch(g.Members, gp.Owner); !ok {
				return fmt.Errorf("group %s p%d: owner %q not among %v", g.Group, p, gp.Owner, g.Members)
			}
			if gp.Committed < pd.LogStartOffset || gp.Committed > pd.LogEndOffset {
				return fmt.Errorf("group %s p%d: committed %d outside log [%d,%d]", g.Group, p, gp.Committed, pd.LogStartOffset, pd.LogEndOffset)
			}
			if gp.Lag != pd.LogEndOffset-gp.Committed || gp.Lag < 0 {
				return fmt.Errorf("group %s p%d: lag %d, end %d committed %d", g.Group, p, gp.Lag, pd.LogEndOffset, gp.Committed)
			}
			if gp.Attempts < 0 {
				return fmt.Errorf("group %s p%d: attempts %d", g.Group, p, gp.Attempts)
			}
			if gp.InFlight && (gp.Committed >= pd.LogEndOffset || gp.Attempts < 1 || gp.Owner == "") {
				return fmt.Errorf("group %s p%d: in flight at %d (end %d) attempts %d owner %q", g.Group, p, gp.Committed, pd.LogEndOffset, gp.Attempts, gp.Owner)
			}
			low[p] = min(low[p], gp.Committed)
		}
	}
	if len(d.Groups) > 0 {
		for p, pd := range d.Partitions {
			if pd.LogStartOffset > low[p] || pd.LogStartOffset < low[p]-window {
				return fmt.Errorf("p%d: log start %d, least committed %d, window %d: retention not exact", p, pd.LogStartOffset, low[p], window)
			}
		}
	}
	return nil
}

// cxDescMonotonic checks that offsets and the partition count never go
// back between two snapshots taken in order.
func cxDescMonotonic(prev, d engine.TopicDescription) error {
	if len(d.Partitions) < len(prev.Partitions) {
		return fmt.Errorf("partition count went from %d to %d", len(prev.Partitions), len(d.Partitions))
	}
	for p, pd := range prev.Partitions {
		nd := d.Partitions[p]
		if nd.LogEndOffset < pd.LogEndOffset || nd.LogStartOffset < pd.LogStartOffset {
			return fmt.Errorf("p%d: log went from [%d,%d) to [%d,%d)", p, pd.LogStartOffset, pd.LogEndOffset, nd.LogStartOffset, nd.LogEndOffset)
		}
	}
	return nil
}

// cxDescriber returns a goroutine that checks Describe (and, every few
// rounds, Snapshot: records contiguous, payloads as published by sole
// publishers when payloads is set) until stop.
func cxDescriber(b *engine.Broker, topic string, capacity, window int64, payloads bool, f *hFailures, stop *atomic.Bool) func() {
	return func() {
		var prev engine.TopicDescription
		for i := 0; !stop.Load() && !f.stop.Load(); i++ {
			var d engine.TopicDescription
			if i%4 == 3 {
				s, err := b.Snapshot(topic)
				if err != nil {
					f.fail("Snapshot: %v", err)
					return
				}
				d = s.TopicDescription
				for p, rs := range s.Records {
					pd := d.Partitions[p]
					if int64(len(rs)) != pd.LogEndOffset-pd.LogStartOffset {
						f.fail("snapshot p%d: %d records for [%d,%d)", p, len(rs), pd.LogStartOffset, pd.LogEndOffset)
					}
					for j, r := range rs {
						if r.Offset != pd.LogStartOffset+int64(j) || r.Partition != int32(p) {
							f.fail("snapshot p%d: record %d at p%d off %d", p, j, r.Partition, r.Offset)
						}
						if payloads && r.Payload != cxPayload(int32(p), r.Offset) {
							f.fail("snapshot p%d off %d: payload %q", p, r.Offset, r.Payload)
						}
					}
				}
			} else {
				var err error
				if d, err = b.Describe(topic); err != nil {
					f.fail("Describe: %v", err)
					return
				}
			}
			if err := cxCheckDesc(d, capacity, window); err != nil {
				f.fail("snapshot %d: %v", i, err)
			}
			if i > 0 {
				if err := cxDescMonotonic(prev, d); err != nil {
					f.fail("snapshot %d: %v", i, err)
				}
			}
			prev = d
			runtime.Gosched()
		}
	}
}

// cxStorm runs fs, with a goroutine checking every Describe and Snapshot
// of topic (cxDescriber with capacity, window and payloads) and one that
// stops them all after cxDur, under runAll; then it fails t with every
// failure recorded in f.
func cxStorm(t *testing.T, fs []func(), b *engine.Broker, topic string, capacity, window int64, payloads bool, f *hFailures, stop *atomic.Bool) {
	t.Helper()
	fs = append(fs, cxDescriber(b, topic, capacity, window, payloads, f, stop))
	fs = append(fs, func() { time.Sleep(cxDur()); stop.Store(true) })
	runAll(t, hDeadline, fs...)
	f.report(t)
}

// cxFill publishes to partition of a quiet topic until it is full and
// checks that exactly capacity − (end − low) publishes succeed, low being
// the least committed offset (the pin's promise: Publish's capacity check
// is against exact retention), and that the log then retains [low, end)
// when window is 0, ends full otherwise.
func cxFill(t *testing.T, b *engine.Broker, topic string, p int32, low int64) {
	t.Helper()
	end, _ := b.LogEndOffset(topic, p)
	want := int64(b.Capacity()) - (end - low)
	got := int64(0)
	for {
		off, err := b.Publish(topic, p, cxPayload(p, end+got))
		if err != nil {
			t.Fatal(err)
		}
		if off < 0 {
			break
		}
		if off != end+got {
			t.Fatalf("p%d: fill publish got offset %d, want %d", p, off, end+got)
		}
		got++
		if got > int64(b.Capacity())+1 {
			break
		}
	}
	if got != want {
		t.Fatalf("p%d: %d publishes fit at quiescence (end %d, least committed %d, capacity %d), want %d", p, got, end, low, b.Capacity(), want)
	}
	start, _ := b.LogStartOffset(topic, p)
	if start != low {
		t.Fatalf("p%d: after filling, log start %d, want the least committed offset %d", p, start, low)
	}
}

// TestCursorFanOut: 16 to 64 groups on one partition of capacity 1 to
// 4 (with and without a replay window), two publishers, one or two pollers
// per group sharing the group's member id. Checked online: a publish that
// got offset o ≥ capacity happened after every group had begun acking
// o − capacity (retention exactness: no publish succeeds before every group
// committed past the record it displaces); no group is given a record
// already acked, nor a record whose predecessor it has not begun acking;
// every Ack of a held record succeeds; every Describe/Snapshot is
// self-consistent. At the end: every group was given and acked each offset
// of [0, end) exactly once with the published payload; log start is
// max(0, end − window); exactly capacity more publishes fit.
func TestCursorFanOut(t *testing.T) {
	cfgs := []struct {
		groups           int
		capacity, window int32
		pollers          int
	}{
		{16, 1, 0, 1}, {32, 2, 1, 2}, {64, 4, 4, 1}, {24, 3, 0, 2}, {48, 1, 1, 1}, {16, 2, 2, 2},
	}
	for _, c := range cfgs {
		t.Run(fmt.Sprintf("G%d-C%d-W%d-P%d", c.groups, c.capacity, c.window, c.pollers), func(t *testing.T) {
			cxFanOut(t, c.groups, c.capacity, c.window, c.pollers)
		})
	}
}

// cxPublisher returns a goroutine body that, until stop or a failure,
// publishes cxPayload records to each of parts in turn, yielding after each
// round; it must be their only publisher, so each offset must be the next
// (or -1 for a full partition).
func cxPublisher(b *engine.Broker, topic string, parts []int32, f *hFailures, stop *atomic.Bool) func() {
	return func() {
		next := make([]int64, len(parts))
		for !stop.Load() && !f.stop.Load() {
			for i, p := range parts {
				off, err := b.Publish(topic, p, cxPayload(p, next[i]))
				if err != nil || off != -1 && off != next[i] {
					f.fail("p%d: publish %d %v, want %d", p, off, err, next[i])
					return
				}
				if off >= 0 {
					next[i]++
				}
			}
			runtime.Gosched()
		}
	}
}

// cxPartitions returns partitions 0..n-1.
func cxPartitions(n int32) []int32 {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}

// cxGroupsOnOnePartition returns a broker of the given capacity and replay
// window with topic of one partition and G groups named by format from
// 0 (their names, in order), each with the one member "m".
func cxGroupsOnOnePartition(t *testing.T, topic, format string, G int, capacity, window int32) (*engine.Broker, []string) {
	t.Helper()
	b, err := hNew(capacity, engine.WithReplayWindow(window))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(topic, 1); err != nil {
		t.Fatal(err)
	}
	names := make([]string, G)
	for g := range names {
		names[g] = fmt.Sprintf(format, g)
		if _, err := b.Join(topic, names[g], "m"); err != nil {
			t.Fatal(err)
		}
	}
	return b, names
}

func cxFanOut(t *testing.T, G int, capacity, window int32, pollers int) {
	const topic = "fan"
	b, names := cxGroupsOnOnePartition(t, topic, "g%02d", G, capacity, window)
	var f hFailures
	var stop atomic.Bool
	ackStarted := make([]atomic.Int64, G)  // highest offset whose Ack was called
	ackReturned := make([]atomic.Int64, G) // highest offset whose Ack returned true
	for g := range G {
		ackStarted[g].Store(-1)
		ackReturned[g].Store(-1)
	}
	var mu sync.Mutex
	pubs := map[int64]string{}
	delivered := make([]map[int64]string, G)
	acked := make([]map[int64]int, G)
	for g := range G {
		delivered[g], acked[g] = map[int64]string{}, map[int64]int{}
	}
	C := int64(capacity)
	var fs []func()
	for w := range 2 {
		fs = append(fs, func() {
			for i := 0; !stop.Load() && !f.stop.Load(); i++ {
				payload := fmt.Sprintf("w%d-%d", w, i)
				off, err := b.Publish(topic, 0, payload)
				if err != nil {
					f.fail("Publish: %v", err)
					return
				}
				if off < 0 {
					runtime.Gosched()
					continue
				}
				if off >= C {
					for g := range G {
						if s := ackStarted[g].Load(); s < off-C {
							f.fail("publish got offset %d (capacity %d) but group %s had begun acking only up to %d", off, C, names[g], s)
						}
					}
				}
				mu.Lock()
				if _, dup := pubs[off]; dup {
					f.fail("offset %d returned by two publishes", off)
				}
				pubs[off] = payload
				mu.Unlock()
			}
		})
	}
	for g := range G {
		for range pollers {
			fs = append(fs, func() {
				for !stop.Load() && !f.stop.Load() {
					recs, err := b.Poll(topic, names[g], "m", 1)
					if err != nil || len(recs) > 1 {
						f.fail("Poll %s: %v %v", names[g], recs, err)
						return
					}
					if len(recs) == 0 {
						runtime.Gosched()
						continue
					}
					r := recs[0]
					if r.Partition != 0 || r.Attempt != 1 {
						f.fail("%s: got %+v", names[g], r)
					}
					if r.Offset <= ackReturned[g].Load() {
						f.fail("%s: given offset %d, already acked up to %d", names[g], r.Offset, ackReturned[g].Load())
					}
					if s := ackStarted[g].Load(); r.Offset > 0 && s < r.Offset-1 {
						f.fail("%s: given offset %d before any Ack of %d began (acks begun to %d): a record skipped", names[g], r.Offset, r.Offset-1, s)
					}
					mu.Lock()
					if _, dup := delivered[g][r.Offset]; dup {
						f.fail("%s: offset %d delivered twice", names[g], r.Offset)
					}
					delivered[g][r.Offset] = r.Payload
					mu.Unlock()
					cxMax(&ackStarted[g], r.Offset)
					ok, err := b.Ack(topic, names[g], "m", 0, r.Offset)
					if !ok || err != nil {
						f.fail("%s: Ack(%d) of a held record = %v, %v", names[g], r.Offset, ok, err)
						return
					}
					cxMax(&ackReturned[g], r.Offset)
					mu.Lock()
					acked[g][r.Offset]++
					mu.Unlock()
				}
			})
		}
	}
	cxStorm(t, fs, b, topic, C, int64(window), false, &f, &stop)

	// Drain every group, sequentially.
	for g := range G {
		for {
			recs, err := b.Poll(topic, names[g], "m", 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			r := recs[0]
			delivered[g][r.Offset] = r.Payload
			if ok, _ := b.Ack(topic, names[g], "m", 0, r.Offset); !ok {
				t.Fatalf("%s: drain ack %d failed", names[g], r.Offset)
			}
			acked[g][r.Offset]++
		}
	}
	end, _ := b.LogEndOffset(topic, 0)
	start, _ := b.LogStartOffset(topic, 0)
	if int64(len(pubs)) != end {
		t.Fatalf("%d successful publishes, log end %d", len(pubs), end)
	}
	for g := range G {
		if int64(len(delivered[g])) != end || int64(len(acked[g])) != end {
			t.Fatalf("%s: %d offsets delivered, %d acked, want %d each", names[g], len(delivered[g]), len(acked[g]), end)
		}
		for off := range end {
			if delivered[g][off] != pubs[off] || acked[g][off] != 1 {
				t.Fatalf("%s off %d: delivered %q (published %q), acked %d times", names[g], off, delivered[g][off], pubs[off], acked[g][off])
			}
		}
	}
	if want := max(0, end-int64(window)); start != want {
		t.Fatalf("every group committed %d: log start %d, want %d (window %d)", end, start, want, window)
	}
	d, _ := b.Describe(topic)
	if err := cxCheckDesc(d, C, int64(window)); err != nil {
		t.Fatal(err)
	}
	cxFill(t, b, topic, 0, end)
	t.Logf("%d records through %d groups", end, G)
}
