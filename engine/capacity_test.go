package engine_test

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
)

// Tests of capacities beyond SPEC rule 1 (WithExtendedCapacity, SPEC
// section 3.5): the bounds, paged logs that retain every record up to the
// capacity, memory that follows what is retained, and allocation-free hot
// paths over page boundaries.

// TestExtendedCapacityBounds: without the option New keeps rule 1 exactly
// (1001 is ErrInvalidArgument, with a hint); with it every capacity in
// 1..16,777,216 is accepted and nothing else, and the replay window's
// range follows the capacity.
func TestExtendedCapacityBounds(t *testing.T) {
	ext := engine.WithExtendedCapacity()
	tests := []struct {
		capacity int32
		opts     []engine.Option
		wok      bool
	}{
		{1000, nil, true},
		{1001, nil, false},
		{engine.MaxExtendedCapacity, nil, false},
		{1, []engine.Option{ext}, true},
		{1000, []engine.Option{ext}, true},
		{1001, []engine.Option{ext}, true},
		{engine.MaxExtendedCapacity, []engine.Option{ext}, true},
		{engine.MaxExtendedCapacity + 1, []engine.Option{ext}, false},
		{math.MaxInt32, []engine.Option{ext}, false},
		{0, []engine.Option{ext}, false},
		{-1, []engine.Option{ext}, false},
		{engine.MaxExtendedCapacity, []engine.Option{ext, engine.WithReplayWindow(engine.MaxExtendedCapacity)}, true},
		{5000, []engine.Option{ext, engine.WithReplayWindow(5000)}, true},
		{5000, []engine.Option{ext, engine.WithReplayWindow(5001)}, false},
		{5000, []engine.Option{engine.WithReplayWindow(5000), ext}, true}, // the order of options does not matter
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%d options", tt.capacity, len(tt.opts)), func(t *testing.T) {
			b, err := engine.New(tt.capacity, tt.opts...)
			if !tt.wok {
				require.ErrorIs(t, err, engine.ErrInvalidArgument)
				require.Nil(t, b)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.capacity, b.Capacity())
		})
	}
	_, err := engine.New(5000)
	require.ErrorContains(t, err, "outside [1,1000] (WithExtendedCapacity allows up to 16777216)", "the error of a capacity only the option allows names it")
}

// extBroker is a broker of capacity with WithExtendedCapacity and opts,
// with topic "t" of partitions partitions.
func extBroker(t testing.TB, capacity int32, partitions int32, opts ...engine.Option) *engine.Broker {
	t.Helper()
	b, err := engine.New(capacity, append(opts, engine.WithExtendedCapacity())...)
	require.NoError(t, err)
	ok, err := b.Create("t", partitions)
	require.NoError(t, err)
	require.True(t, ok)
	return b
}

// TestExtendedCapacityRetainsEveryRecord: a partition of capacity 5,000
// with no group retains exactly 5,000 records (rules 5, 13) across five
// pages; a new group then reads them all in order from offset 0 (rule 7),
// and its acks remove them (rule 11) until the log is empty and accepts
// 5,000 more.
func TestExtendedCapacityRetainsEveryRecord(t *testing.T) {
	const capacity = 5000
	b := extBroker(t, capacity, 1)
	for round := range int64(2) {
		for i := range int64(capacity) {
			off, err := b.Publish("t", 0, fmt.Sprint(round*capacity+i))
			require.NoError(t, err)
			require.Equal(t, round*capacity+i, off)
		}
		off, err := b.Publish("t", 0, "full")
		require.NoError(t, err)
		require.Equal(t, int64(-1), off, "round %d: the 5,001st record", round)
		if round == 0 {
			_, err := b.Join("t", "g", "m")
			require.NoError(t, err)
		}
		for i := range int64(capacity) {
			recs, err := b.Poll("t", "g", "m", 1)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			want := round*capacity + i
			require.Equal(t, want, recs[0].Offset)
			require.Equal(t, fmt.Sprint(want), recs[0].Payload)
			ok, err := b.Ack("t", "g", "m", 0, want)
			require.NoError(t, err)
			require.True(t, ok)
		}
		d, err := b.Describe("t")
		require.NoError(t, err)
		require.Equal(t, (round+1)*capacity, d.Partitions[0].LogStartOffset, "every record acked and removed")
		require.Equal(t, (round+1)*capacity, d.Partitions[0].LogEndOffset)
	}
}

// liveHeap returns the live heap after two full collections, in bytes.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestExtendedCapacityMemoryFollowsRetention: a broker of capacity
// 16,777,216 with a 64-partition topic holds under 1 MiB of heap with
// nothing published (no page is allocated for capacity), 2,048 retained
// records per partition take their two 32 KiB pages, and once a group has
// acked them the pages are given up again but for one spare per
// partition.
func TestExtendedCapacityMemoryFollowsRetention(t *testing.T) {
	before := liveHeap()
	b := extBroker(t, engine.MaxExtendedCapacity, engine.MaxPartitionCount)
	empty := liveHeap()
	require.Less(t, int64(empty)-int64(before), int64(1<<20), "empty topic of capacity 16,777,216 × 64 partitions: %d bytes", int64(empty)-int64(before))
	for p := range int32(engine.MaxPartitionCount) {
		for range 2048 {
			if off, err := b.Publish("t", p, "payload"); err != nil || off < 0 {
				t.Fatalf("publish: %d, %v", off, err)
			}
		}
	}
	full := liveHeap()
	page := int64(1024 * 32)
	grown := int64(full) - int64(empty)
	require.Greater(t, grown, 128*page*9/10, "2,048 records × 64 partitions in 128 pages: %d bytes", grown)
	require.Less(t, grown, 128*page*11/10, "2,048 records × 64 partitions in 128 pages: %d bytes", grown)
	_, err := b.Join("t", "g", "m")
	require.NoError(t, err)
	for {
		recs, err := b.Poll("t", "g", "m", engine.MaxPollRecords)
		require.NoError(t, err)
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			ok, err := b.Ack("t", "g", "m", r.Partition, r.Offset)
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	drained := int64(liveHeap()) - int64(empty)
	require.Less(t, drained, 64*page*12/10, "after the acks: one spare page per partition, no more: %d bytes", drained)
	runtime.KeepAlive(b)
}

// TestPagedPublishAndAckAllocateNothing: on a partition of capacity
// 16,777,216 with a backlog of 3,000 records (three pages) that one group
// consumes as fast as it is published, Publish, AppendPoll into a buffer
// with room and Ack allocate nothing at all once the log has given up a
// page (which it keeps as the spare for the next one), page boundaries
// included: the count is of every allocation over 3,072 rounds, not an
// average.
func TestPagedPublishAndAckAllocateNothing(t *testing.T) {
	b := extBroker(t, engine.MaxExtendedCapacity, 1)
	th, m := joinedMember(t, b)
	for range 3000 {
		_, err := th.Publish(0, "payload")
		require.NoError(t, err)
	}
	buf := make([]engine.Record, 0, 1)
	bad := 0
	step := func() {
		if off, err := th.Publish(0, "payload"); err != nil || off < 0 {
			bad++
		}
		recs, err := m.AppendPoll(buf[:0], 1)
		if err != nil || len(recs) != 1 {
			bad++
			return
		}
		if ok, err := m.Ack(0, recs[0].Offset); err != nil || !ok {
			bad++
		}
	}
	for range 2048 { // past two page boundaries: a page given up, the spare reused
		step()
	}
	require.Zero(t, mallocs(3*1024, step), "allocations in 3,072 publishes, polls and acks (three page boundaries)")
	require.Zero(t, bad)
}

// mallocs returns the heap allocations n calls of f make in all. Unlike
// testing.AllocsPerRun, whose average rounds down, it sees one allocation
// in a thousand calls.
func mallocs(n int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// TestPagedLogConcurrentGroups: one publisher and three groups, each
// polling and acking in its own goroutine, on a partition of capacity
// 3,000 with a replay window of 500, through 60,000 records: the log's
// pages are installed, given up, kept as the spare and reused while the
// groups read records without the partition lock (Poll), and under -race
// this checks those reads. Each group sees every offset once, in order,
// with its payload.
func TestPagedLogConcurrentGroups(t *testing.T) {
	const total = 60000
	b := extBroker(t, 3000, 1, engine.WithReplayWindow(500))
	groups := []string{"a", "b", "c"}
	for _, g := range groups {
		_, err := b.Join("t", g, "m")
		require.NoError(t, err)
	}
	var f hFailures
	var fs []func()
	for _, g := range groups {
		fs = append(fs, func() {
			for next := int64(0); next < total && !f.stop.Load(); {
				recs, err := b.Poll("t", g, "m", 1)
				if err != nil {
					f.fail("%s: Poll: %v", g, err)
					return
				}
				if len(recs) == 0 {
					runtime.Gosched()
					continue
				}
				if r := recs[0]; r.Offset != next || r.Payload != fmt.Sprint(next) {
					f.fail("%s: polled %d %q, want %d", g, r.Offset, r.Payload, next)
					return
				}
				if ok, err := b.Ack("t", g, "m", 0, next); !ok || err != nil {
					f.fail("%s: Ack(%d) = %v, %v", g, next, ok, err)
					return
				}
				next++
			}
		})
	}
	fs = append(fs, func() {
		for i := int64(0); i < total && !f.stop.Load(); {
			off, err := b.Publish("t", 0, fmt.Sprint(i))
			switch {
			case err != nil:
				f.fail("Publish: %v", err)
				return
			case off < 0:
				runtime.Gosched() // full: the groups are behind
			case off != i:
				f.fail("Publish got %d, want %d", off, i)
				return
			default:
				i++
			}
		}
	})
	runAll(t, hDeadline, fs...)
	f.report(t)
	d, err := b.Describe("t")
	require.NoError(t, err)
	require.Equal(t, int64(total-500), d.Partitions[0].LogStartOffset, "the window's 500 records kept")
}
