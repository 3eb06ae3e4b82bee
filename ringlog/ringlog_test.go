package ringlog_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/ringlog"
)

// op is one step of a ring log script: an append of v (trim < 0) or a
// TrimTo(trim), with what it must return.
type op struct {
	append string // appended value, when trim is unset
	trim   int64  // TrimTo argument; used when isTrim
	isTrim bool

	woff     int64 // Append: returned offset (-1 when full)
	wok      bool  // Append: returned ok
	wremoved int   // TrimTo: returned count
}

func app(v string, woff int64) op { return op{append: v, woff: woff, wok: woff >= 0} }
func trim(off int64, wremoved int) op {
	return op{trim: off, isTrim: true, wremoved: wremoved}
}

// state is the observable state of a log of strings.
type state struct {
	start, end int64
	len        int
	full       bool
	entries    []string // At(start) … At(end-1)
}

func observe(l *ringlog.Log[string]) state {
	s := state{start: l.StartOffset(), end: l.EndOffset(), len: l.Len(), full: l.Full(), entries: []string{}}
	for off := s.start; off < s.end; off++ {
		e := l.At(off)
		if e == nil {
			s.entries = append(s.entries, "<nil>")
			continue
		}
		s.entries = append(s.entries, *e)
	}
	return s
}

func TestLogScripts(t *testing.T) {
	tests := []struct {
		name   string
		cap    int
		ops    []op
		wstate state
	}{
		{"empty", 3, nil, state{0, 0, 0, false, []string{}}},
		{"append until full", 3, []op{app("a", 0), app("b", 1), app("c", 2)},
			state{0, 3, 3, true, []string{"a", "b", "c"}}},
		{"full returns -1 and uses no offset", 3, []op{app("a", 0), app("b", 1), app("c", 2), app("d", -1), app("e", -1), trim(1, 1), app("f", 3)},
			state{1, 4, 3, true, []string{"b", "c", "f"}}},
		{"capacity 1", 1, []op{app("a", 0), app("b", -1), trim(1, 1), app("c", 1), app("d", -1)},
			state{1, 2, 1, true, []string{"c"}}},
		{"empty payloads are entries", 2, []op{app("", 0), app("", 1), app("x", -1)},
			state{0, 2, 2, true, []string{"", ""}}},
		{"trim partial", 4, []op{app("a", 0), app("b", 1), app("c", 2), trim(2, 2)},
			state{2, 3, 1, false, []string{"c"}}},
		{"trim everything", 4, []op{app("a", 0), app("b", 1), trim(2, 2)},
			state{2, 2, 0, false, []string{}}},
		{"trim beyond end stops at end", 4, []op{app("a", 0), app("b", 1), trim(10, 2), app("c", 2)},
			state{2, 3, 1, false, []string{"c"}}},
		{"trim backwards is a no-op", 4, []op{app("a", 0), app("b", 1), app("c", 2), trim(2, 2), trim(1, 0), trim(0, 0), trim(-5, 0)},
			state{2, 3, 1, false, []string{"c"}}},
		{"trim to start is a no-op", 4, []op{app("a", 0), trim(0, 0)},
			state{0, 1, 1, false, []string{"a"}}},
		{"trim empty log", 4, []op{trim(3, 0)},
			state{0, 0, 0, false, []string{}}},
		{"trim then refill wraps", 3, []op{app("a", 0), app("b", 1), app("c", 2), trim(2, 2), app("d", 3), app("e", 4), app("f", -1)},
			state{2, 5, 3, true, []string{"c", "d", "e"}}},
		{"trim in two steps", 5, []op{app("a", 0), app("b", 1), app("c", 2), app("d", 3), trim(1, 1), trim(3, 2)},
			state{3, 4, 1, false, []string{"d"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := ringlog.New[string](tt.cap)
			require.Equal(t, tt.cap, l.Cap())
			for i, o := range tt.ops {
				if o.isTrim {
					assert.Equal(t, o.wremoved, l.TrimTo(o.trim), "op %d: TrimTo(%d)", i, o.trim)
					continue
				}
				off, ok := l.Append(o.append)
				assert.Equal(t, o.woff, off, "op %d: Append(%q) offset", i, o.append)
				assert.Equal(t, o.wok, ok, "op %d: Append(%q) ok", i, o.append)
			}
			assert.Equal(t, tt.wstate, observe(l))
			assert.Equal(t, tt.cap, l.Cap(), "capacity never changes")
		})
	}
}

func TestLogAt(t *testing.T) {
	l := ringlog.New[string](4)
	for _, v := range []string{"a", "b", "c", "d"} {
		_, ok := l.Append(v)
		require.True(t, ok)
	}
	require.Equal(t, 2, l.TrimTo(2)) // retains 2:"c", 3:"d"
	tests := []struct {
		off  int64
		wnil bool
		w    string
	}{
		{-1, true, ""},
		{-1 << 63, true, ""},
		{0, true, ""}, // trimmed
		{1, true, ""}, // trimmed, just below start
		{2, false, "c"},
		{3, false, "d"},
		{4, true, ""}, // end: not yet appended
		{5, true, ""},
		{1<<63 - 1, true, ""},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatInt(tt.off, 10), func(t *testing.T) {
			e := l.At(tt.off)
			if tt.wnil {
				assert.Nil(t, e)
				return
			}
			require.NotNil(t, e)
			assert.Equal(t, tt.w, *e)
		})
	}
}

// TestLogAtPointerStable checks the doc promise: the pointer At returns keeps
// showing the same entry while later appends and trims of other entries run.
func TestLogAtPointerStable(t *testing.T) {
	l := ringlog.New[string](3)
	l.Append("a")
	l.Append("b")
	p := l.At(1)
	require.NotNil(t, p)
	l.TrimTo(1)
	l.Append("c")
	l.Append("d") // fills the slot freed by "a"
	assert.Equal(t, "b", *p)
	_, ok := l.Append("e")
	assert.False(t, ok)
	assert.Equal(t, "b", *p)
}

func TestLogWrapAroundManyTimes(t *testing.T) {
	for _, capacity := range []int{1, 2, 3, 7, 64, 1000, ringlog.PageLen, ringlog.PageLen + 1, 2500} {
		t.Run(strconv.Itoa(capacity), func(t *testing.T) {
			l := ringlog.New[int64](capacity)
			var next int64 // offset the next append must get
			// Each round fills the log, checks every entry, then trims a
			// varying amount, so that the ring's slots, or the pages and
			// directory slots, are reused many times.
			rounds := 3*capacity + 50
			if capacity > 64 {
				rounds = 60
			}
			for round := range rounds {
				for !l.Full() {
					off, ok := l.Append(next * 10)
					require.True(t, ok)
					require.Equal(t, next, off)
					next++
				}
				off, ok := l.Append(-1)
				require.False(t, ok)
				require.Equal(t, int64(-1), off)
				require.Equal(t, next, l.EndOffset(), "a failed append uses up no offset")
				for o := l.StartOffset(); o < l.EndOffset(); o++ {
					e := l.At(o)
					require.NotNil(t, e)
					require.Equal(t, o*10, *e, "offset %d", o)
					require.Same(t, e, l.Read(o), "Read(%d) is At's entry", o)
				}
				k := 1 + round*37%capacity
				require.Equal(t, k, l.TrimTo(l.StartOffset()+int64(k)))
				require.Equal(t, capacity-k, l.Len())
			}
			require.Greater(t, next, int64(10*capacity), "the log wrapped many times")
		})
	}
}

// TestLogReadWhileAppending has one goroutine append and trim under a
// mutex, publishing the log end offset through an atomic, while another
// reads every published, untrimmed offset with Read and no lock: under
// -race this checks that Read reads nothing that Append or TrimTo write
// while the entry stays retained (the engine's Poll reads records this
// way), on a ring and on paged logs whose pages, spare and directory are
// replaced many times (the last one grows its directory from 2 to 128
// slots while the reader reads).
func TestLogReadWhileAppending(t *testing.T) {
	for _, tt := range []struct{ capacity, total int }{
		{7, 20000}, {3 * ringlog.PageLen, 40 * ringlog.PageLen}, {100 * ringlog.PageLen, 120 * ringlog.PageLen},
	} {
		t.Run(strconv.Itoa(tt.capacity), func(t *testing.T) {
			if msg := readWhileAppending(tt.capacity, tt.total); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// readWhileAppending is TestLogReadWhileAppending's check of one log; it
// returns its first failure (a wrong entry, or a panic of either side), or
// "". The reader holds back trimming past its position, as a consumer
// group's committed offset does; the writer trims in bursts so that whole
// pages go at once.
func readWhileAppending(capacity, total int) (msg string) {
	l := ringlog.New[int64](capacity)
	var mu sync.Mutex
	var end, reader atomic.Int64 // published log end; the reader's next offset
	var failed atomic.Pointer[string]
	fail := func(format string, args ...any) {
		m := fmt.Sprintf(format, args...)
		failed.CompareAndSwap(nil, &m)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				fail("reader: panic: %v", v)
			}
		}()
		for off := int64(0); off < int64(total) && failed.Load() == nil; {
			if off >= end.Load() {
				runtime.Gosched()
				continue
			}
			if got := *l.Read(off); got != off*3 {
				fail("Read(%d) = %d, want %d", off, got, off*3)
				return
			}
			off++
			reader.Store(off)
		}
	}()
	func() {
		defer func() {
			if v := recover(); v != nil {
				fail("writer: panic: %v", v)
			}
		}()
		for next := int64(0); next < int64(total) && failed.Load() == nil; {
			mu.Lock()
			if l.Full() || next%512 == 0 {
				l.TrimTo(reader.Load())
			}
			if _, ok := l.Append(next * 3); ok {
				next++
				end.Store(next)
			}
			mu.Unlock()
		}
	}()
	<-done
	if m := failed.Load(); m != nil {
		return *m
	}
	return ""
}

// TestLogMatchesSlice drives logs of several capacities, rings and paged,
// with random appends and trims (single and in bursts of up to twice the
// capacity) and compares every observable with a plain slice after each
// step, and, for a paged log, that it holds memory for at most the pages
// its retained entries touch plus one spare.
func TestLogMatchesSlice(t *testing.T) {
	for _, capacity := range []int{1, 3, 1000, ringlog.PageLen, ringlog.PageLen + 1, 3000, 16_777_216} {
		t.Run(strconv.Itoa(capacity), func(t *testing.T) {
			if msg := matchesSlice(capacity, 2000); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// matchesSlice is TestLogMatchesSlice's check of one capacity over steps
// random steps; it returns its first failure (a panic included), or "".
func matchesSlice(capacity, steps int) (msg string) {
	defer func() {
		if v := recover(); v != nil {
			msg = fmt.Sprintf("panic: %v", v)
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(capacity), 7))
	l := ringlog.New[int64](capacity)
	var want []int64 // the retained entries
	var start int64
	limit := min(capacity, 5000)
	for step := range steps {
		switch r := rng.IntN(10); {
		case r < 6 || len(want) == 0:
			for range 1 + rng.IntN(2*limit/3+1) {
				off, ok := l.Append(start + int64(len(want)))
				if len(want) == capacity {
					if ok || off != -1 {
						return fmt.Sprintf("step %d: append to a full log = %d, %v", step, off, ok)
					}
					break
				}
				if !ok || off != start+int64(len(want)) {
					return fmt.Sprintf("step %d: Append = %d, %v, want %d", step, off, ok, start+int64(len(want)))
				}
				want = append(want, off)
				if len(want) == limit {
					break
				}
			}
		default:
			to := start + rng.Int64N(int64(len(want))+2)
			n := int(min(to, start+int64(len(want))) - start)
			if got := l.TrimTo(to); got != n {
				return fmt.Sprintf("step %d: TrimTo(%d) = %d, want %d", step, to, got, n)
			}
			want, start = want[n:], start+int64(n)
		}
		if l.StartOffset() != start || l.EndOffset() != start+int64(len(want)) || l.Full() != (len(want) == capacity) {
			return fmt.Sprintf("step %d: log [%d, %d) full %v, want [%d, %d)", step, l.StartOffset(), l.EndOffset(), l.Full(), start, start+int64(len(want)))
		}
		for i := 0; i < len(want); i += 1 + i%61 {
			if e := l.At(start + int64(i)); e == nil || *e != want[i] {
				return fmt.Sprintf("step %d: At(%d) = %v, want %d", step, start+int64(i), e, want[i])
			}
		}
		if capacity > ringlog.PageLen {
			pages := 0
			if len(want) > 0 {
				pages = int((start+int64(len(want))-1)/ringlog.PageLen - start/ringlog.PageLen + 1)
			} else if start%ringlog.PageLen != 0 {
				pages = 1 // the page the next append fills
			}
			if a := l.Allocated(); a > (pages+1)*ringlog.PageLen || a < pages*ringlog.PageLen {
				return fmt.Sprintf("step %d: %d entries allocated for %d retained from %d (%d pages)", step, a, len(want), start, pages)
			}
		}
	}
	return ""
}

// TestLogPagedMemory: a log of capacity 16,777,216 holds no page until its
// first append, then whole pages for what it retains, and after a trim of
// everything only its spare.
func TestLogPagedMemory(t *testing.T) {
	l := ringlog.New[string](16_777_216)
	require.Zero(t, l.Allocated(), "empty")
	for i := range 5000 {
		_, ok := l.Append(strconv.Itoa(i))
		require.True(t, ok)
	}
	require.Equal(t, 5*ringlog.PageLen, l.Allocated(), "5,000 entries in 5 pages")
	require.Equal(t, 5000, l.TrimTo(5000))
	require.Equal(t, 2*ringlog.PageLen, l.Allocated(), "page 4, which the next append fills, and one spare")
	for l.EndOffset() < 5*ringlog.PageLen {
		l.Append("x")
	}
	l.TrimTo(l.EndOffset())
	require.Equal(t, ringlog.PageLen, l.Allocated(), "empty at a page boundary: the spare only")
}

// TestLogTrimZeroesSlots checks that a trimmed entry is no longer kept
// reachable by the log: the slot is zeroed (visible through a pointer taken
// before the trim) and the garbage collector can free what it referenced.
func TestLogTrimZeroesSlots(t *testing.T) {
	type big struct {
		_ [256]byte // large enough to avoid the tiny allocator
		s string
	}
	l := ringlog.New[*big](2)
	v := &big{s: "payload"}
	w := weak.Make(v)
	_, ok := l.Append(v)
	require.True(t, ok)
	l.Append(&big{s: "kept"})
	slot := l.At(0)
	v = nil
	runtime.GC()
	require.NotNil(t, w.Value(), "a retained entry stays reachable")

	require.Equal(t, 1, l.TrimTo(1))
	assert.Nil(t, *slot, "the trimmed slot is zeroed")
	runtime.GC()
	assert.Nil(t, w.Value(), "a trimmed entry is not kept reachable by the log")
	require.NotNil(t, l.At(1))
	assert.Equal(t, "kept", (*l.At(1)).s)
	runtime.KeepAlive(l)
}

func TestLogTrimZeroesStringSlots(t *testing.T) {
	l := ringlog.New[string](3)
	l.Append("a")
	l.Append("b")
	l.Append("c")
	pa, pb, pc := l.At(0), l.At(1), l.At(2)
	l.TrimTo(2)
	assert.Empty(t, *pa)
	assert.Empty(t, *pb)
	assert.Equal(t, "c", *pc, "a retained entry is untouched")
}

func TestLogNewPanicsOnBadCapacity(t *testing.T) {
	for _, c := range []int{0, -1} {
		assert.Panics(t, func() { ringlog.New[int](c) }, "New(%d)", c)
		assert.Panics(t, func() { var l ringlog.Log[int]; l.Init(c) }, "Init(%d)", c)
	}
	assert.NotPanics(t, func() { ringlog.New[int](1) })
}

func TestLogZeroValueAcceptsNothing(t *testing.T) {
	var l ringlog.Log[int]
	assert.Equal(t, 0, l.Cap())
	assert.True(t, l.Full())
	off, ok := l.Append(1)
	assert.False(t, ok)
	assert.Equal(t, int64(-1), off)
	assert.Nil(t, l.At(0))
	assert.Equal(t, 0, l.TrimTo(5))
}

func TestLogInitResets(t *testing.T) {
	var l ringlog.Log[string]
	l.Init(2)
	l.Append("a")
	l.Append("b")
	l.TrimTo(1)
	l.Init(3)
	assert.Equal(t, 3, l.Cap())
	assert.Equal(t, int64(0), l.StartOffset())
	assert.Equal(t, int64(0), l.EndOffset())
	assert.Nil(t, l.At(0))
	off, ok := l.Append("x")
	assert.True(t, ok)
	assert.Equal(t, int64(0), off)
}

// TestLogPagedSteadyStateAllocatesNothing: a paged log whose length holds
// steady (a backlog of 3,000 entries, one append and one trim per step)
// reuses its spare page: once warmed up, appends and trims allocate
// nothing, page boundaries included.
func TestLogPagedSteadyStateAllocatesNothing(t *testing.T) {
	l := ringlog.New[string](16_777_216)
	for range 3000 {
		l.Append("payload")
	}
	step := func() {
		l.Append("payload")
		l.TrimTo(l.StartOffset() + 1)
	}
	for range 2 * ringlog.PageLen {
		step()
	}
	// Every allocation over three page boundaries, not AllocsPerRun's
	// average, which rounds one page in 1,024 steps down to 0.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 3 * ringlog.PageLen {
		step()
	}
	runtime.ReadMemStats(&after)
	assert.Zero(t, after.Mallocs-before.Mallocs, "allocations in 3,072 steps")
	assert.Equal(t, 3000, l.Len())
}

func TestLogAllocatesNothing(t *testing.T) {
	l := ringlog.New[string](8)
	payload := "payload"
	var sink *string
	tests := []struct {
		name string
		f    func()
	}{
		{"Append", func() {
			if _, ok := l.Append(payload); !ok {
				l.TrimTo(l.EndOffset())
			}
		}},
		{"At", func() { sink = l.At(l.StartOffset()) }},
		{"TrimTo", func() {
			l.TrimTo(l.StartOffset() + 1)
			l.Append(payload)
		}},
		{"Append at capacity", func() { l.Append(payload) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for !l.Full() {
				l.Append(payload)
			}
			l.TrimTo(l.StartOffset() + 3)
			if tt.name == "Append at capacity" {
				for !l.Full() {
					l.Append(payload)
				}
			}
			assert.Zero(t, testing.AllocsPerRun(200, tt.f))
		})
	}
	assert.NotNil(t, sink)
}
