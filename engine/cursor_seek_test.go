package engine_test

// Cursors and Seek under admin churn: SetAssignor flips, Seek forward and
// back, transient groups created, joined, left and deleted, and
// AddPartitions, racing consumers; and Seek racing Acks (a Seek cancels the
// group's in-flight delivery on the partition). Every check is an exact expectation derived from
// the contract, never a timing assertion.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// TestCursorAdminChurn: four partitions (growing to eight) of
// capacity 3, with and without a replay window; sole publishers; stable
// groups with two members each consuming; racing them: SetAssignor flips
// (moving partitions between the members), Seek of stable groups forward
// and back to offsets read just before, transient groups created, joined,
// left and deleted (names reused), AddPartitions. Checked: every delivered
// record has its published payload; every Describe and Snapshot is
// self-consistent and monotonic; a transient group's committed offsets
// right after CreateGroup lie between the log start read before and the
// log end read after; CreateGroup and DeleteGroup return true exactly as
// expected. At the end (quiet): retention exact, and exactly capacity −
// (end − least committed) publishes fit on every partition.
func TestCursorAdminChurn(t *testing.T) {
	for _, w := range []int32{0, 2} {
		t.Run(fmt.Sprintf("W%d", w), func(t *testing.T) { cxAdminChurn(t, w) })
	}
}

func cxAdminChurn(t *testing.T, window int32) {
	const topic, capacity = "adm", int32(3)
	b, err := hNew(capacity, engine.WithReplayWindow(window))
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, 4)
	stable := []string{"s0", "s1", "s2", "s3"}
	for _, g := range stable {
		b.Join(topic, g, "a")
		b.Join(topic, g, "b")
	}
	var f hFailures
	var stop atomic.Bool
	var delivered atomic.Int64
	var fs []func()
	for w := range int32(2) {
		fs = append(fs, func() {
			var next [engine.MaxPartitionCount]int64
			for !stop.Load() && !f.stop.Load() {
				n, _ := b.PartitionCount(topic)
				for p := w; p < n; p += 2 {
					off, err := b.Publish(topic, p, cxPayload(p, next[p]))
					if err != nil || off != -1 && off != next[p] {
						f.fail("p%d: publish %d %v, want %d", p, off, err, next[p])
						return
					}
					if off >= 0 {
						next[p]++
					}
				}
				runtime.Gosched()
			}
		})
	}
	for _, g := range stable {
		for _, m := range []string{"a", "b"} {
			fs = append(fs, func() {
				for !stop.Load() && !f.stop.Load() {
					recs, err := b.Poll(topic, g, m, 64)
					if err != nil {
						f.fail("Poll: %v", err)
						return
					}
					for i, r := range recs {
						if r.Payload != cxPayload(r.Partition, r.Offset) {
							f.fail("%s/%s: p%d off %d payload %q (a reused or trimmed slot?)", g, m, r.Partition, r.Offset, r.Payload)
						}
						if i > 0 && r.Partition <= recs[i-1].Partition {
							f.fail("poll not ascending: %v", cxParts(recs))
						}
						if _, err := b.Ack(topic, g, m, r.Partition, r.Offset); err != nil {
							f.fail("Ack: %v", err)
						}
						delivered.Add(1)
					}
					if len(recs) == 0 {
						runtime.Gosched()
					}
				}
			})
		}
	}
	// SetAssignor flips on stable groups: with two members, Range and
	// RoundRobin move partitions (cancelling in-flight deliveries).
	fs = append(fs, func() {
		as := []engine.Assignor{engine.Range, engine.RoundRobin, engine.Sticky}
		for i := 0; !stop.Load() && !f.stop.Load(); i++ {
			if ok, err := b.SetAssignor(topic, stable[i%len(stable)], as[i%3]); !ok || err != nil {
				f.fail("SetAssignor: %v %v", ok, err)
			}
			runtime.Gosched()
		}
	})
	// Seeks of stable groups.
	fs = append(fs, func() {
		rng := rand.New(rand.NewPCG(3, uint64(window)))
		for !stop.Load() && !f.stop.Load() {
			n, _ := b.PartitionCount(topic)
			p := rng.Int32N(n)
			start, _ := b.LogStartOffset(topic, p)
			end, _ := b.LogEndOffset(topic, p)
			off := start + rng.Int64N(end-start+1)
			ok, err := b.Seek(topic, stable[rng.IntN(len(stable))], p, off)
			if err != nil && !errors.Is(err, engine.ErrOffsetOutOfRange) || err == nil && !ok {
				f.fail("Seek p%d %d: %v %v", p, off, ok, err)
			}
			runtime.Gosched()
		}
	})
	// Transient groups.
	fs = append(fs, func() {
		for i := 0; !stop.Load() && !f.stop.Load(); i++ {
			name := fmt.Sprintf("t%d", i%3)
			n, _ := b.PartitionCount(topic)
			starts := make([]int64, n)
			for p := range n {
				starts[p], _ = b.LogStartOffset(topic, p)
			}
			if ok, err := b.CreateGroup(topic, name, engine.Sticky); !ok || err != nil {
				f.fail("CreateGroup %s: %v %v", name, ok, err)
				return
			}
			for p := range n {
				c, err := b.Committed(topic, name, p)
				end, _ := b.LogEndOffset(topic, p)
				if err != nil || c < starts[p] || c > end {
					f.fail("new group %s p%d committed %d (%v): log start before %d, end after %d", name, p, c, err, starts[p], end)
				}
			}
			if i%2 == 0 {
				b.Join(topic, name, "x")
				b.Join(topic, name, "y")
				recs, _ := b.Poll(topic, name, "x", 64)
				for _, r := range recs {
					if r.Payload != cxPayload(r.Partition, r.Offset) {
						f.fail("%s: p%d off %d payload %q", name, r.Partition, r.Offset, r.Payload)
					}
					b.Ack(topic, name, "x", r.Partition, r.Offset)
				}
				if _, err := b.DeleteGroup(topic, name); !errors.Is(err, engine.ErrGroupNotEmpty) {
					f.fail("DeleteGroup of a group with members: %v", err)
				}
				b.Leave(topic, name, "x")
				b.Leave(topic, name, "y")
			}
			if ok, err := b.DeleteGroup(topic, name); !ok || err != nil {
				f.fail("DeleteGroup %s: %v %v", name, ok, err)
				return
			}
			runtime.Gosched()
		}
	})
	fs = append(fs, func() {
		for n := int32(4); n < 8 && !stop.Load() && !f.stop.Load(); n++ {
			time.Sleep(cxDur() / 6)
			if got, err := b.AddPartitions(topic, 1); got != n+1 || err != nil {
				f.fail("AddPartitions: %d %v", got, err)
			}
		}
	})
	cxStorm(t, fs, b, topic, int64(capacity), int64(window), true, &f, &stop)
	d, _ := b.Describe(topic)
	if err := cxCheckDesc(d, int64(capacity), int64(window)); err != nil {
		t.Fatal(err)
	}
	if len(d.Groups) != len(stable) {
		t.Fatalf("groups %v left", d.Groups)
	}
	for p := range d.Partitions {
		low := int64(math.MaxInt64)
		for _, g := range d.Groups {
			low = min(low, g.Partitions[p].Committed)
		}
		// With a window the log start is not low; cxFill wants log start
		// = low after filling, which holds: the fill evicts every fully
		// committed record it needs room for, and ends full at [low, low+C).
		if int64(capacity)-(d.Partitions[p].LogEndOffset-low) >= 0 {
			cxFill(t, b, topic, int32(p), low)
		}
	}
	t.Logf("%d records delivered", delivered.Load())
}

// TestCursorSeekRacingAcks: eight groups on one partition of
// capacity 2 (window 0 and 1), one consumer each, one goroutine seeking
// random groups to random offsets in [log start, log end]. Checked: payloads
// (a Seek re-places the cursor's slot; a forward Seek of the least group
// trims); an Ack of a record polled before a Seek of its group began, called
// after that Seek returned true, returns false (the Seek cancelled the
// delivery); a poll that begins after a Seek to X returned true, with no
// other Seek of the group begun before the poll returned, gives an offset
// ≥ X; Describe and Snapshot self-consistent throughout; at the end (quiet)
// exactly capacity − (end − least committed) publishes fit.
func TestCursorSeekRacingAcks(t *testing.T) {
	for _, w := range []int32{0, 1} {
		t.Run(fmt.Sprintf("W%d", w), func(t *testing.T) { cxSeek(t, w) })
	}
}

func cxSeek(t *testing.T, window int32) {
	const topic, G, capacity = "seek", 8, int32(2)
	b, names := cxGroupsOnOnePartition(t, topic, "k%d", G, capacity, window)
	// Per group, written only by the seeker: seeks begun and finished
	// (whatever the outcome), and the last one that returned true.
	type okSeek struct {
		seq, target int64
	}
	type seekState struct {
		begun, finished atomic.Int64
		lastOK          atomic.Pointer[okSeek]
	}
	seeks := make([]*seekState, G)
	for g := range seeks {
		seeks[g] = new(seekState)
		seeks[g].lastOK.Store(&okSeek{})
	}
	var f hFailures
	var stop atomic.Bool
	var nOK, nCheckedAck atomic.Int64
	var fs []func()
	fs = append(fs, func() {
		var next int64
		for !stop.Load() && !f.stop.Load() {
			off, err := b.Publish(topic, 0, cxPayload(0, next))
			if err != nil || off != -1 && off != next {
				f.fail("publish %d %v, want %d", off, err, next)
				return
			}
			if off >= 0 {
				next++
			}
			runtime.Gosched()
		}
	})
	fs = append(fs, func() {
		rng := rand.New(rand.NewPCG(4, uint64(window)))
		for !stop.Load() && !f.stop.Load() {
			g := rng.IntN(G)
			start, _ := b.LogStartOffset(topic, 0)
			end, _ := b.LogEndOffset(topic, 0)
			off := start + rng.Int64N(end-start+1)
			s := seeks[g]
			n := s.begun.Add(1)
			ok, err := b.Seek(topic, names[g], 0, off)
			switch {
			case err == nil && ok:
				s.lastOK.Store(&okSeek{seq: n, target: off})
				nOK.Add(1)
			case errors.Is(err, engine.ErrOffsetOutOfRange):
			default:
				f.fail("Seek %s %d: %v %v", names[g], off, ok, err)
				return
			}
			s.finished.Store(n)
			for range 3 {
				runtime.Gosched()
			}
		}
	})
	for g := range G {
		fs = append(fs, func() {
			s := seeks[g]
			for !stop.Load() && !f.stop.Load() {
				finishedBefore := s.finished.Load()
				begunBefore := s.begun.Load()
				last := s.lastOK.Load()
				recs, err := b.Poll(topic, names[g], "m", 1)
				if err != nil {
					f.fail("Poll: %v", err)
					return
				}
				begunAfter := s.begun.Load()
				if len(recs) == 0 {
					runtime.Gosched()
					continue
				}
				r := recs[0]
				if r.Payload != cxPayload(0, r.Offset) {
					f.fail("%s: off %d payload %q", names[g], r.Offset, r.Payload)
				}
				if finishedBefore == begunBefore && begunAfter == begunBefore && last.seq > 0 && r.Offset < last.target {
					f.fail("%s: polled off %d after Seek #%d to %d returned, no Seek since", names[g], r.Offset, last.seq, last.target)
				}
				runtime.Gosched()
				lastNow := s.lastOK.Load()
				ok, err := b.Ack(topic, names[g], "m", 0, r.Offset)
				if err != nil {
					f.fail("Ack: %v", err)
				}
				// A Seek that began after the poll returned and returned
				// true before the Ack was called cancelled the delivery.
				if lastNow.seq > begunAfter {
					nCheckedAck.Add(1)
					if ok {
						f.fail("%s: Ack of off %d returned true after Seek #%d (begun after the poll returned) to %d returned true", names[g], r.Offset, lastNow.seq, lastNow.target)
					}
				}
			}
		})
	}
	cxStorm(t, fs, b, topic, int64(capacity), int64(window), true, &f, &stop)
	d, _ := b.Describe(topic)
	if err := cxCheckDesc(d, int64(capacity), int64(window)); err != nil {
		t.Fatal(err)
	}
	low := int64(math.MaxInt64)
	for _, g := range d.Groups {
		low = min(low, g.Partitions[0].Committed)
	}
	cxFill(t, b, topic, 0, low)
	t.Logf("%d seeks, %d acks after a seek checked", nOK.Load(), nCheckedAck.Load())
}
