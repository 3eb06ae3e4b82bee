package engine_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
)

// Where a new group starts (CreateGroupAt): StartEarliest at the log start
// (SPEC rules 7, 17), StartLatest at the log end, as Kafka's
// auto.offset.reset. The differential test (diff_test.go) and the latest
// porcupine mix check the same calls against the model; these are the
// worked cases and the concurrent property.

func TestCreateGroupAtLatest(t *testing.T) {
	t.Run("receives only what is published after", func(t *testing.T) {
		f := ftNew(t, 5)
		f.create("t", 3)
		f.join("t", "old", "m") // holds retention: nothing is removed
		for range 3 {
			f.pub("t", 0, "x")
		}
		f.pub("t", 1, "y")
		ok, err := f.CreateGroupAt("t", "new", engine.Sticky, engine.StartLatest)
		require.NoError(t, err)
		require.True(t, ok)
		d := f.describe("t")
		g := ftGroup(t, d, "new")
		require.Equal(t, []int64{3, 1, 0}, ftCommitted(g))
		require.Equal(t, "Sticky", g.Assignor)
		for p := range g.Partitions {
			require.Equal(t, int64(0), g.Partitions[p].Lag, "partition %d", p)
		}
		require.Equal(t, int64(0), f.logStart("t", 0), "old still needs every record")
		f.join("t", "new", "n")
		require.Empty(t, f.drain("t", "new", "n"))
		f.pub("t", 1, "z")
		f.pub("t", 2, "w")
		require.Equal(t, []string{"1/1 z #1", "2/0 w #1"}, f.drain("t", "new", "n"))
	})
	t.Run("alone, it frees what it starts past", func(t *testing.T) {
		for _, window := range []int32{0, 2} {
			t.Run(fmt.Sprintf("window %d", window), func(t *testing.T) {
				f := ftNew(t, 4, engine.WithReplayWindow(window))
				f.create("t", 1)
				for range 4 {
					f.pub("t", 0, "x")
				}
				off, err := f.Publish("t", 0, "full")
				require.NoError(t, err)
				require.Equal(t, int64(-1), off, "no group: the partition is full")
				ok, err := f.CreateGroupAt("t", "g", engine.RoundRobin, engine.StartLatest)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, int64(4-window), f.logStart("t", 0), "records beyond the window are removed")
				require.Equal(t, int64(4), f.committed("t", "g", 0))
				require.Equal(t, int64(4), f.pub("t", 0, "after"))
				// An earliest group created now starts at what was kept.
				require.True(t, f.createGroup("t", "e", engine.RoundRobin))
				require.Equal(t, int64(4-window), f.committed("t", "e", 0))
			})
		}
	})
	t.Run("behind a lagging group it frees nothing", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 1)
		f.createGroup("t", "slow", engine.RoundRobin)
		f.pub("t", 0, "a")
		f.pub("t", 0, "b")
		ok, err := f.CreateGroupAt("t", "g", engine.RoundRobin, engine.StartLatest)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(0), f.logStart("t", 0))
		// slow's commits free up to the latest group's start, no further.
		f.join("t", "slow", "m")
		require.Len(t, f.drain("t", "slow", "m"), 2)
		require.Equal(t, int64(2), f.logStart("t", 0))
		f.pub("t", 0, "c")
		require.Equal(t, int64(2), f.logStart("t", 0), "g has not acked c")
	})
	t.Run("on an empty partition it is the log start", func(t *testing.T) {
		f := ftNew(t, 2)
		f.create("t", 2)
		ok, err := f.CreateGroupAt("t", "g", engine.Range, engine.StartLatest)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, []int64{0, 0}, ftCommitted(ftGroup(t, f.describe("t"), "g")))
	})
	t.Run("an existing group is false and unchanged", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 1)
		f.createGroup("t", "g", engine.Range)
		f.pub("t", 0, "a")
		before := f.describe("t")
		ok, err := f.CreateGroupAt("t", "g", engine.Sticky, engine.StartLatest)
		require.NoError(t, err)
		require.False(t, ok)
		f.unchanged("t", before, "CreateGroupAt of an existing group")
	})
	t.Run("invalid calls change nothing", func(t *testing.T) {
		tests := []struct {
			name, topic, group string
			a                  engine.Assignor
			start              engine.GroupStart
		}{
			{"unknown topic", "nope", "g", engine.RoundRobin, engine.StartLatest},
			{"invalid group", "t", "bad group", engine.RoundRobin, engine.StartLatest},
			{"nil assignor", "t", "g", nil, engine.StartLatest},
			{"start out of range", "t", "g", engine.RoundRobin, 2},
			{"start 255", "t", "g", engine.RoundRobin, 255},
			{"start out of range, existing group", "t", "old", engine.RoundRobin, 7},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := ftNew(t, 4)
				f.create("t", 2)
				f.createGroup("t", "old", engine.Range)
				f.pub("t", 0, "a")
				before := f.describe("t")
				ok, err := f.CreateGroupAt(tt.topic, tt.group, tt.a, tt.start)
				ftInvalid(t, err, "CreateGroupAt")
				require.False(t, ok)
				f.unchanged("t", before, "an invalid CreateGroupAt")
			})
		}
	})
	t.Run("CreateGroup is StartEarliest", func(t *testing.T) {
		f := ftNew(t, 4)
		f.create("t", 1)
		f.join("t", "old", "m")
		f.pub("t", 0, "a")
		f.pub("t", 0, "b")
		ok, err := f.CreateGroupAt("t", "e", engine.RoundRobin, engine.StartEarliest)
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, f.createGroup("t", "c", engine.RoundRobin))
		d := f.describe("t")
		require.Equal(t, ftCommitted(ftGroup(t, d, "c")), ftCommitted(ftGroup(t, d, "e")))
		require.Equal(t, []int64{0}, ftCommitted(ftGroup(t, d, "e")))
	})
}

func TestGroupStartNames(t *testing.T) {
	for _, s := range []engine.GroupStart{engine.StartEarliest, engine.StartLatest} {
		got, err := engine.ParseGroupStart(s.String())
		require.NoError(t, err)
		require.Equal(t, s, got)
	}
	require.Equal(t, "earliest", engine.StartEarliest.String())
	require.Equal(t, "latest", engine.StartLatest.String())
	require.Equal(t, "GroupStart(9)", engine.GroupStart(9).String())
	for _, bad := range []string{"", "Latest", "end", "newest"} {
		_, err := engine.ParseGroupStart(bad)
		ftInvalid(t, err, "ParseGroupStart("+bad+")")
	}
}

// TestCreateGroupAtLatestConcurrent: with publishers running on every
// partition, a StartLatest group is delivered every record published after
// CreateGroupAt returned and none published before it was called. Each
// publisher records the offsets it got before the call began and after it
// returned; what it published during the call may go either way.
func TestCreateGroupAtLatestConcurrent(t *testing.T) {
	const partitions, rounds = 4, 40
	for round := range rounds {
		b, err := engine.New(1000)
		require.NoError(t, err)
		_, err = b.Create("t", partitions)
		require.NoError(t, err)
		_, err = b.CreateGroup("t", "keep", engine.RoundRobin) // holds retention
		require.NoError(t, err)

		var phase atomic.Int32 // 0 before the call, 1 during it, 2 after it returned
		var before, after [partitions]atomic.Int64
		for p := range partitions {
			before[p].Store(-1)
			after[p].Store(-1)
		}
		var wg sync.WaitGroup
		for p := range int32(partitions) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 900 { // capacity 1000: the partitions never fill
					ph := phase.Load()
					off, err := b.Publish("t", p, "x")
					if err != nil || off < 0 {
						t.Errorf("Publish: %d, %v", off, err)
						return
					}
					switch {
					case phase.Load() == 0: // returned before the call began
						before[p].Store(off) // offsets rise: the last one wins
					case ph == 2: // began after the call returned
						after[p].Store(off)
						return
					}
				}
			}()
		}
		for range round % 7 * 20 {
			_, _ = b.Describe("t") // let the publishers run a while
		}
		phase.Store(1)
		ok, err := b.CreateGroupAt("t", "g", engine.RoundRobin, engine.StartLatest)
		phase.Store(2)
		require.NoError(t, err)
		require.True(t, ok)
		wg.Wait()
		for p := range int32(partitions) {
			c, err := b.Committed("t", "g", p)
			require.NoError(t, err)
			if bo := before[p].Load(); c <= bo {
				t.Fatalf("round %d partition %d: the group starts at %d: it would receive offset %d, published before CreateGroupAt", round, p, c, bo)
			}
			if ao := after[p].Load(); ao >= 0 && c > ao {
				t.Fatalf("round %d partition %d: the group starts at %d: it would miss offset %d, published after CreateGroupAt returned", round, p, c, ao)
			}
		}
	}
}
