package tributary

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestIDArenaMatchesMessageID: the arena's IDs are messageID's, at the
// edges of every digit count and at random, across many blocks.
func TestIDArenaMatchesMessageID(t *testing.T) {
	var a idArena
	check := func(p int32, o int64) {
		t.Helper()
		if got, want := a.id(p, o), messageID(p, o); got != want {
			t.Fatalf("id(%d, %d) = %q, want %q", p, o, got, want)
		}
	}
	for _, o := range []int64{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 12345, math.MaxInt64, -1} {
		for _, p := range []int32{0, 1, 9, 10, 63, 99, 100, math.MaxInt32, -1} {
			check(p, o)
		}
	}
	for p := int64(1); p > 0 && p <= math.MaxInt64/10; p *= 10 {
		check(7, p-1)
		check(7, p)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		check(r.Int32N(64), r.Int64N(1<<40))
	}
}

// TestIDArenaStringsStayPut: IDs built concurrently by many goroutines,
// across block boundaries, each keep their value (no range is handed out
// twice or written after it was returned); run under -race.
func TestIDArenaStringsStayPut(t *testing.T) {
	var a idArena
	const goroutines, each = 8, 5000
	got := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				got[g] = append(got[g], a.id(int32(g), int64(i)))
			}
		}()
	}
	wg.Wait()
	for g := range goroutines {
		for i, s := range got[g] {
			if want := messageID(int32(g), int64(i)); s != want {
				t.Fatalf("goroutine %d id %d = %q, want %q", g, i, s, want)
			}
		}
	}
}

// TestIDArenaAllocatesPerBlock: building an ID allocates once per block,
// not once per ID.
func TestIDArenaAllocatesPerBlock(t *testing.T) {
	var a idArena
	off := int64(0)
	allocs := testing.AllocsPerRun(10, func() {
		for range 1000 {
			a.id(3, off)
			off++
		}
	})
	// 1000 IDs of at most 1+1+5 bytes: under 7,000 bytes, at most 7 or 8
	// blocks of 1 KiB; one allocation per ID would be 1000.
	if max := float64(7000/idBlockSize + 2); allocs > max {
		t.Fatalf("%v allocations per 1000 IDs, want at most %v", allocs, max)
	}
}
