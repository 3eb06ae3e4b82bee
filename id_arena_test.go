package tributary

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/f91dcac0/tributary/engine"
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

// TestDecimalLenMatchesStrconv: decimalLen is the length of strconv's
// decimal form at 0, the largest value, every power of two and of ten and
// their neighbours, and at random.
func TestDecimalLenMatchesStrconv(t *testing.T) {
	check := func(v uint64) {
		t.Helper()
		if got, want := decimalLen(v), len(strconv.FormatUint(v, 10)); got != want {
			t.Fatalf("decimalLen(%d) = %d, want %d", v, got, want)
		}
	}
	check(0)
	check(math.MaxUint64)
	for i := range 64 {
		p := uint64(1) << i
		check(p - 1)
		check(p)
		check(p + 1)
	}
	for p, i := uint64(1), 0; i < 20; i++ {
		check(p - 1)
		check(p)
		check(p + 1)
		if i < 19 {
			p *= 10
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200_000 {
		check(r.Uint64() >> r.IntN(64))
	}
}

// TestAppendIDsMatchMessageID: a batch's IDs are messageID's, in order,
// appended after what dst held: every partition of a topic and the edges
// of the offsets, negative values (messageID's fallback), batches of 64
// whose IDs need more than one block, and an empty batch.
func TestAppendIDsMatchMessageID(t *testing.T) {
	var a idArena
	offs := []int64{0, 1, 9, 10, 99, 100, math.MaxInt64, math.MaxInt64 - 1, 999999999999999999, 1e18, -1, math.MinInt64}
	var recs []engine.Record
	for p := int32(-1); p < 64; p++ {
		for _, o := range offs {
			recs = append(recs, engine.Record{Partition: p, Offset: o})
		}
	}
	recs = append(recs, engine.Record{Partition: math.MaxInt32, Offset: math.MaxInt64}, engine.Record{Partition: math.MinInt32, Offset: 5})
	for i := range 64 { // 64 IDs of 30 bytes: more than a block
		recs = append(recs, engine.Record{Partition: 1_000_000_000 + int32(i), Offset: math.MaxInt64 - int64(i)})
	}
	for start := 0; start < len(recs); start += engine.MaxPollRecords {
		batch := recs[start:min(start+engine.MaxPollRecords, len(recs))]
		got := a.appendIDs([]string{"kept"}, batch)
		if len(got) != 1+len(batch) || got[0] != "kept" {
			t.Fatalf("appendIDs of %d records after one: %d IDs, first %q", len(batch), len(got), got[0])
		}
		for i, r := range batch {
			if want := messageID(r.Partition, r.Offset); got[1+i] != want {
				t.Fatalf("ID %d of the batch = %q, want %q", i, got[1+i], want)
			}
		}
	}
	if got := a.appendIDs(nil, nil); len(got) != 0 {
		t.Fatalf("appendIDs of no records = %v", got)
	}
	all := make([]engine.Record, 8)
	for i := range all {
		all[i] = engine.Record{Partition: -1, Offset: int64(i)}
	}
	var fresh idArena // only messageID's fallbacks, on an arena with no block yet
	for i, id := range fresh.appendIDs(nil, all) {
		if want := messageID(-1, int64(i)); id != want {
			t.Fatalf("fallback ID %d = %q, want %q", i, id, want)
		}
	}
}

// TestAppendIDsStayPut: IDs built by many goroutines at once, one at a
// time (id) and by batches (appendIDs), each keep their value after every
// goroutine is done (no byte reserved twice or written after it was
// handed out); run under -race.
func TestAppendIDsStayPut(t *testing.T) {
	var a idArena
	type built struct {
		ids  []string
		recs []engine.Record
	}
	out := make([][]built, 8)
	var wg sync.WaitGroup
	for g := range out {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 5))
			for range 1000 {
				recs := make([]engine.Record, 1+r.IntN(engine.MaxPollRecords))
				for i := range recs {
					recs[i] = engine.Record{Partition: int32(r.IntN(64)), Offset: r.Int64() >> r.IntN(63)}
				}
				var ids []string
				if len(recs) == 1 {
					ids = []string{a.id(recs[0].Partition, recs[0].Offset)}
				} else {
					ids = a.appendIDs(nil, recs)
				}
				out[g] = append(out[g], built{ids, recs})
			}
		})
	}
	wg.Wait()
	for _, bs := range out {
		for _, b := range bs {
			for i, r := range b.recs {
				if want := messageID(r.Partition, r.Offset); b.ids[i] != want {
					t.Fatalf("ID %q, want %q", b.ids[i], want)
				}
			}
		}
	}
}

// TestAppendIDsFillBlocksAsIDDoes: building a poll's IDs at once takes no
// more blocks than building them one by one: each reservation is sized to
// the current block's free tail. (Reserving a whole block's worth per
// batch instead abandons the tails: 13 % more blocks for polls of 16.)
func TestAppendIDsFillBlocksAsIDDoes(t *testing.T) {
	mallocs := func(runs int, f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	for _, n := range []int{16, 64} {
		for _, base := range []int64{1e6, 1e9} {
			recs := make([]engine.Record, n)
			ids := make([]string, 0, engine.MaxPollRecords)
			fill := func(off int64) {
				for i := range recs {
					recs[i] = engine.Record{Partition: int32(i % 16), Offset: off + int64(i)}
				}
			}
			var batched, single idArena
			off := base
			byBatch := mallocs(4000, func() { fill(off); off += int64(n); ids = batched.appendIDs(ids[:0], recs) })
			off = base
			oneByOne := mallocs(4000, func() {
				fill(off)
				off += int64(n)
				ids = ids[:0]
				for _, r := range recs {
					ids = append(ids, single.id(r.Partition, r.Offset))
				}
			})
			if byBatch > oneByOne+oneByOne/100+2 {
				t.Errorf("polls of %d at offsets from %g: %d allocations by batch, %d one by one", n, float64(base), byBatch, oneByOne)
			}
		}
	}
}
