package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
)

// TestPublishAndAckAllocateNothing runs a steady publish → poll → ack loop
// on a broker whose logs wrap many times, with two groups so that every ack
// computes the retention minimum and half of them trim, and measures each
// Publish and each Ack with testing.AllocsPerRun. Poll is outside the
// measurement: it returns a new slice by contract.
func TestPublishAndAckAllocateNothing(t *testing.T) {
	const partitions = engine.MaxPartitionCount
	b := build(t, 3, []step{create("t", partitions), join("t", "g", "m"), join("t", "h", "m")})
	groups := []string{"g", "h"}

	for round := range int64(10) {
		// Publish one record to each partition: AllocsPerRun calls f
		// runs+1 times, once per partition.
		p, bad := int32(0), 0
		allocs := testing.AllocsPerRun(partitions-1, func() {
			if off, err := b.Publish("t", p, "payload"); err != nil || off != round {
				bad++
			}
			p++
		})
		require.Zero(t, bad, "round %d: unexpected Publish results", round)
		require.Zero(t, allocs, "round %d: allocations per Publish", round)
		require.Equal(t, int32(partitions), p)

		for _, g := range groups {
			recs, err := b.Poll("t", g, "m", engine.MaxPollRecords)
			require.NoError(t, err)
			require.Len(t, recs, partitions)
			i, bad := 0, 0
			allocs := testing.AllocsPerRun(partitions-1, func() {
				r := recs[i]
				if ok, err := b.Ack("t", g, "m", r.Partition, r.Offset); err != nil || !ok {
					bad++
				}
				i++
			})
			require.Zero(t, bad, "round %d, group %s: unexpected Ack results", round, g)
			require.Zero(t, allocs, "round %d, group %s: allocations per Ack", round, g)
			require.Equal(t, partitions, i)
		}
	}
}

// TestFailedCallsAllocateNothing: a publish to a full partition and acks
// or retries that return false allocate nothing either.
func TestFailedCallsAllocateNothing(t *testing.T) {
	b := build(t, 1, []step{create("t", 1), join("t", "g", "m"), publish("t", 0, "a")})
	bad := 0
	allocs := testing.AllocsPerRun(100, func() {
		if off, err := b.Publish("t", 0, "b"); err != nil || off != -1 {
			bad++ // expected a full partition
		}
		if ok, err := b.Ack("t", "g", "m", 0, 0); err != nil || ok {
			bad++ // expected false: not in flight
		}
		if ok, err := b.Retry("t", "g", "other", 0, 0); err != nil || ok {
			bad++ // expected false: not the owner
		}
	})
	require.Zero(t, bad, "unexpected results")
	require.Zero(t, allocs)
}
