package engine_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
)

// TestReadAt checks reads by offset against Snapshot of the same state:
// from every offset of [log start, log end], with every max, the records
// are the snapshot's from that offset on, Attempt 0, headers copied;
// outside the range ErrOffsetOutOfRange comes with the log offsets and
// nothing is appended; a read changes no group (its committed offsets,
// in-flight deliveries and attempts stay).
func TestReadAt(t *testing.T) {
	b, err := engine.New(10, engine.WithReplayWindow(2))
	require.NoError(t, err)
	_, err = b.Create("t", 2)
	require.NoError(t, err)
	for i := range 9 {
		_, err := b.PublishMessage("t", 0, engine.Message{Key: fmt.Sprint("k", i), Payload: fmt.Sprint("v", i),
			Headers: []engine.Header{{Key: "h", Value: fmt.Sprint(i)}}})
		require.NoError(t, err)
	}
	_, err = b.Join("t", "g", "m")
	require.NoError(t, err)
	for range 5 { // commit 0..4: the window keeps 3, 4; log start 3
		rs, err := b.Poll("t", "g", "m", 1)
		require.NoError(t, err)
		ok, err := b.Ack("t", "g", "m", rs[0].Partition, rs[0].Offset)
		require.NoError(t, err)
		require.True(t, ok)
	}
	inflight, err := b.Poll("t", "g", "m", 2) // offset 5 of p0 in flight
	require.NoError(t, err)
	require.Len(t, inflight, 1)
	before, err := b.Describe("t")
	require.NoError(t, err)
	snap, err := b.Snapshot("t")
	require.NoError(t, err)
	p0 := snap.Partitions[0]
	require.Equal(t, int64(3), p0.LogStartOffset)
	for off := p0.LogStartOffset; off <= p0.LogEndOffset; off++ {
		for _, max := range []int32{0, 1, 2, 100} {
			got, start, end, err := b.ReadAt(nil, "t", 0, off, max)
			require.NoError(t, err)
			require.Equal(t, p0.LogStartOffset, start)
			require.Equal(t, p0.LogEndOffset, end)
			want := snap.Records[0][off-p0.LogStartOffset:]
			want = want[:min(len(want), int(max))]
			if len(want) == 0 {
				require.Empty(t, got)
			} else {
				require.Equal(t, want, got, "offset %d max %d", off, max)
			}
		}
	}
	got, _, _, err := b.ReadAt(nil, "t", 0, 4, 1)
	require.NoError(t, err)
	got[0].Headers[0].Value = "changed"
	again, _, _, _ := b.ReadAt(nil, "t", 0, 4, 1)
	require.Equal(t, "4", again[0].Headers[0].Value, "headers are copies")
	for _, off := range []int64{0, 2, 10, 100} {
		dst := []engine.Record{{Payload: "kept"}}
		got, start, end, err := b.ReadAt(dst, "t", 0, off, 5)
		require.True(t, errors.Is(err, engine.ErrOffsetOutOfRange), "offset %d: %v", off, err)
		require.Equal(t, []int64{3, 9}, []int64{start, end})
		require.Len(t, got, 1)
	}
	for _, bad := range []func() error{
		func() error { _, _, _, err := b.ReadAt(nil, "t", 0, 3, -1); return err },
		func() error { _, _, _, err := b.ReadAt(nil, "t", 2, 3, 1); return err },
		func() error { _, _, _, err := b.ReadAt(nil, "nope", 0, 3, 1); return err },
		func() error { _, _, _, err := b.ReadAt(nil, "t.x", 0, 3, 1); return err },
	} {
		require.ErrorIs(t, bad(), engine.ErrInvalidArgument)
	}
	start, end, err := b.LogOffsets("t", 1)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 0}, []int64{start, end})
	after, err := b.Describe("t")
	require.NoError(t, err)
	require.Equal(t, before, after, "reads by offset change no group")
}

// TestAppendedWakes checks that the channel Appended returns is closed by
// the next publish, and not before.
func TestAppendedWakes(t *testing.T) {
	b, err := engine.New(10)
	require.NoError(t, err)
	_, err = b.Create("t", 1)
	require.NoError(t, err)
	ch, err := b.Appended("t")
	require.NoError(t, err)
	select {
	case <-ch:
		t.Fatal("closed before any publish")
	default:
	}
	_, err = b.Publish("t", 0, "x")
	require.NoError(t, err)
	select {
	case <-ch:
	default:
		t.Fatal("not closed by a publish")
	}
	_, err = b.Appended("nope")
	require.ErrorIs(t, err, engine.ErrInvalidArgument)
}
