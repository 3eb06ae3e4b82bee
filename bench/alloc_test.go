package bench_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/bench"
	"github.com/f91dcac0/tributary/engine"
)

// steadyEngine is an engine with topic "t" of partitions partitions and
// groups "g" and "h" of one member "m" each: two groups, so that every ack
// computes the retention minimum and the logs wrap as they are trimmed.
func steadyEngine(t *testing.T, capacity, partitions int32) bench.Engine {
	t.Helper()
	if raceEnabled {
		t.Skip("the race detector allocates; allocation counts need a normal build")
	}
	e, err := bench.NewEngine(capacity)
	require.NoError(t, err)
	_, err = e.Create("t", partitions)
	require.NoError(t, err)
	for _, g := range []string{"g", "h"} {
		_, err := e.Join("t", g, "m")
		require.NoError(t, err)
	}
	return e
}

var steadyGroups = []string{"g", "h"}

// publishAll publishes one record to each partition and returns nothing
// unless a publish fails.
func publishAll(t *testing.T, e bench.Engine, partitions int32) {
	t.Helper()
	for p := range partitions {
		off, err := e.Publish("t", p, bench.Payload)
		require.NoError(t, err)
		require.GreaterOrEqual(t, off, int64(0), "partition %d full", p)
	}
}

// drainAll polls and acks everything retained, in both groups.
func drainAll(t *testing.T, e bench.Engine, buf []engine.Record) {
	t.Helper()
	for _, g := range steadyGroups {
		for {
			var err error
			buf, err = e.AppendPoll(buf[:0], "t", g, "m", engine.MaxPollRecords)
			require.NoError(t, err)
			if len(buf) == 0 {
				break
			}
			for _, r := range buf {
				ok, err := e.Ack("t", g, "m", r.Partition, r.Offset)
				require.NoError(t, err)
				require.True(t, ok)
			}
		}
	}
}

// TestPublishAllocatesNothing: Publish onto a log that wraps around its
// ring many times (capacity 8, drained between rounds).
func TestPublishAllocatesNothing(t *testing.T) {
	const capacity = 8
	e := steadyEngine(t, capacity, 1)
	buf := make([]engine.Record, 0, engine.MaxPollRecords)
	for round := range 20 {
		bad := 0
		// AllocsPerRun calls f runs+1 times: capacity publishes.
		allocs := testing.AllocsPerRun(capacity-1, func() {
			if off, err := e.Publish("t", 0, bench.Payload); err != nil || off < 0 {
				bad++
			}
		})
		require.Zero(t, bad, "round %d: failed publishes", round)
		require.Zero(t, allocs, "round %d: allocations per Publish", round)
		drainAll(t, e, buf)
	}
}

// TestAppendPollAllocatesNothing: AppendPoll into a reused buffer with room
// allocates nothing, whether it reserves one record (the p-th call takes
// partition p, walking past the p in-flight partitions before it) or 64.
func TestAppendPollAllocatesNothing(t *testing.T) {
	const partitions = engine.MaxPartitionCount
	e := steadyEngine(t, 4, partitions)
	buf := make([]engine.Record, 0, engine.MaxPollRecords)
	for round := range 10 {
		publishAll(t, e, partitions)
		for _, g := range steadyGroups {
			bad := 0
			allocs := testing.AllocsPerRun(partitions-1, func() {
				var err error
				if buf, err = e.AppendPoll(buf[:0], "t", g, "m", 1); err != nil || len(buf) != 1 {
					bad++
				}
			})
			require.Zero(t, bad, "round %d, group %s: polls that reserved nothing", round, g)
			require.Zero(t, allocs, "round %d, group %s: allocations per AppendPoll(1)", round, g)
			for p := range int32(partitions) {
				ok, err := e.Retry("t", g, "m", p, int64(round))
				require.NoError(t, err)
				require.True(t, ok)
			}
			// Two calls; the first, a warm-up, takes all 64 and the
			// second, measured, finds them all in flight.
			calls, got := 0, 0
			allocs = testing.AllocsPerRun(1, func() {
				buf, _ = e.AppendPoll(buf[:0], "t", g, "m", engine.MaxPollRecords)
				if calls++; calls == 1 {
					got = len(buf)
				}
			})
			require.Equal(t, partitions, got, "round %d, group %s: records in the 64-poll", round, g)
			require.Zero(t, allocs, "round %d, group %s: allocations per empty AppendPoll(64)", round, g)
			for p := range int32(partitions) {
				ok, err := e.Retry("t", g, "m", p, int64(round))
				require.NoError(t, err)
				require.True(t, ok)
			}
			allocs = testing.AllocsPerRun(20, func() {
				var err error
				if buf, err = e.AppendPoll(buf[:0], "t", g, "m", engine.MaxPollRecords); err != nil || len(buf) != partitions {
					bad++
				}
				for p := range int32(partitions) {
					if ok, err := e.Retry("t", g, "m", p, int64(round)); err != nil || !ok {
						bad++
					}
				}
			})
			require.Zero(t, bad, "round %d, group %s: 64-polls that fell short", round, g)
			require.Zero(t, allocs, "round %d, group %s: allocations per AppendPoll(64) and 64 Retries", round, g)
		}
		drainAll(t, e, buf)
	}
}

// settleAllocs measures Ack or Retry of each of 64 in-flight records of
// each group, round after round, the logs wrapping (capacity 4).
func settleAllocs(t *testing.T, commit bool) {
	const partitions = engine.MaxPartitionCount
	e := steadyEngine(t, 4, partitions)
	buf := make([]engine.Record, 0, engine.MaxPollRecords)
	settle, name := e.Retry, "Retry"
	if commit {
		settle, name = e.Ack, "Ack"
	}
	for round := range 10 {
		publishAll(t, e, partitions)
		for _, g := range steadyGroups {
			var err error
			buf, err = e.AppendPoll(buf[:0], "t", g, "m", engine.MaxPollRecords)
			require.NoError(t, err)
			require.Len(t, buf, partitions)
			i, bad := 0, 0
			allocs := testing.AllocsPerRun(partitions-1, func() {
				r := buf[i]
				if ok, err := settle("t", g, "m", r.Partition, r.Offset); err != nil || !ok {
					bad++
				}
				i++
			})
			require.Zero(t, bad, "round %d, group %s: failed %ss", round, g, name)
			require.Zero(t, allocs, "round %d, group %s: allocations per %s", round, g, name)
		}
		drainAll(t, e, buf)
	}
}

// TestAckAllocatesNothing: Ack of an in-flight record, trimming as the
// slower group catches up.
func TestAckAllocatesNothing(t *testing.T) { settleAllocs(t, true) }

// TestRetryAllocatesNothing: Retry of an in-flight record.
func TestRetryAllocatesNothing(t *testing.T) { settleAllocs(t, false) }

// TestSteadyConsumerAllocatesNothing: the whole steady path per record,
// publish → AppendPoll(1) → Retry → AppendPoll(1) → Ack in each of two
// groups, on a capacity-4 log that wraps hundreds of times.
func TestSteadyConsumerAllocatesNothing(t *testing.T) {
	e := steadyEngine(t, 4, 1)
	buf := make([]engine.Record, 0, 1)
	bad := 0
	allocs := testing.AllocsPerRun(1000, func() {
		off, err := e.Publish("t", 0, bench.Payload)
		if err != nil || off < 0 {
			bad++
			return
		}
		for _, g := range steadyGroups {
			for _, commit := range []bool{false, true} {
				if buf, err = e.AppendPoll(buf[:0], "t", g, "m", 1); err != nil || len(buf) != 1 || buf[0].Offset != off {
					bad++
					return
				}
				settle := e.Retry
				if commit {
					settle = e.Ack
				}
				if ok, err := settle("t", g, "m", 0, off); err != nil || !ok {
					bad++
				}
			}
		}
	})
	require.Zero(t, bad, "cycles that failed")
	require.Zero(t, allocs, "allocations per cycle")
}
