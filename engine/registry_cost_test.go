package engine_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
)

// The cost of the N-th topic or group: the registries (registry.go) make
// adding one amortised O(1) in the number already there, so creating the
// 100,000th group or topic should cost about what the 10th costs, not
// 10,000 times more (a copy-on-write map would copy all N-1 before it).

// BenchmarkCreateGroup measures CreateGroup of the N-th group of a
// 4-partition topic: N-1 groups are created untimed, then each iteration
// creates one more (so the timed groups are the N-th, N+1-th, …; run it
// with a small -benchtime such as 100x to stay near N).
func BenchmarkCreateGroup(b *testing.B) {
	benchCreateNth(b, "g", "ns/group", func(br *engine.Broker) error {
		_, err := br.Create("t", 4)
		return err
	}, func(br *engine.Broker, name string) (bool, error) {
		return br.CreateGroup("t", name, engine.RoundRobin)
	})
}

// BenchmarkCreateTopic measures Create of the N-th topic (1 partition
// each), as BenchmarkCreateGroup does for groups.
func BenchmarkCreateTopic(b *testing.B) {
	benchCreateNth(b, "t", "ns/topic", func(*engine.Broker) error { return nil },
		func(br *engine.Broker, name string) (bool, error) { return br.Create(name, 1) })
}

// benchCreateNth times create of the N-th name prefix0, prefix1, … on a
// broker set up by setup, for N = 10, 1,000 and 100,000, reporting metric.
func benchCreateNth(b *testing.B, prefix, metric string, setup func(*engine.Broker) error, create func(*engine.Broker, string) (bool, error)) {
	for _, n := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			br, err := engine.New(1)
			require.NoError(b, err)
			require.NoError(b, setup(br))
			for i := range n - 1 {
				if _, err := create(br, prefix+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			names := make([]string, 0, 1024)
			i := n - 1
			b.ReportAllocs()
			for b.Loop() {
				if len(names) == 0 { // names are made outside the timing
					b.StopTimer()
					for k := range cap(names) {
						names = append(names, prefix+strconv.Itoa(i+k))
					}
					b.StartTimer()
				}
				name := names[0]
				names = names[1:]
				if ok, err := create(br, name); err != nil || !ok {
					b.Fatalf("create(%q) = %v, %v", name, ok, err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), metric)
		})
	}
}

// TestHundredThousandGroups: 100,000 groups on one topic can be created,
// all of them hold retention, and Describe lists every one, sorted.
func TestHundredThousandGroups(t *testing.T) {
	const n = 100000
	f := ftNew(t, 2)
	f.create("t", 2)
	f.pub("t", 0, "a")
	f.pub("t", 0, "b")
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("g%06d", i) // sorted as numbered
		ok, err := f.CreateGroup("t", names[i], engine.Range)
		if err != nil || !ok {
			t.Fatalf("CreateGroup(%q) = %v, %v", names[i], ok, err)
		}
	}
	ok, err := f.CreateGroup("t", names[n/2], engine.Sticky)
	require.NoError(t, err)
	require.False(t, ok, "a duplicate among 100,000")

	d := f.describe("t")
	require.Len(t, d.Groups, n)
	for i, g := range d.Groups {
		if g.Group != names[i] || g.Assignor != "Range" || len(g.Partitions) != 2 || g.Partitions[0].Committed != 0 || g.Partitions[0].Lag != 2 {
			t.Fatalf("group %d: %+v, want %s, range, committed 0, lag 2", i, g, names[i])
		}
	}

	// Every group holds the records: one consuming them frees nothing.
	f.join("t", names[n-1], "m")
	require.Equal(t, []string{"0/0 a #1", "0/1 b #1"}, f.drain("t", names[n-1], "m"))
	require.Equal(t, int64(0), f.logStart("t", 0))
	require.Equal(t, int64(-1), f.pub("t", 0, "c"), "capacity 2, held by 99,999 groups")
}
