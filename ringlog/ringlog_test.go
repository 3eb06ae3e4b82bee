package ringlog_test

import (
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
	for _, capacity := range []int{1, 2, 3, 7, 64} {
		t.Run(strconv.Itoa(capacity), func(t *testing.T) {
			l := ringlog.New[int64](capacity)
			var next int64 // offset the next append must get
			// Each round fills the log, checks every entry, then trims a
			// varying amount, so head visits every slot many times.
			for round := range 3*capacity + 50 {
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
					require.Same(t, e, l.InSlot(l.Slot(o)), "InSlot(Slot(%d)) is At's slot", o)
				}
				k := 1 + round%capacity
				require.Equal(t, k, l.TrimTo(l.StartOffset()+int64(k)))
				require.Equal(t, capacity-k, l.Len())
			}
			require.Greater(t, next, int64(10*capacity), "the ring wrapped many times")
		})
	}
}

// TestLogInSlotWhileAppending has one goroutine append and trim under a
// mutex, publishing the log end offset through an atomic, while another
// reads every published, untrimmed offset with InSlot and no lock, keeping
// the slot itself: under -race this checks that InSlot reads nothing that
// Append or TrimTo write
// (the engine's Poll reads records this way). The reader holds back trimming
// past its position, as a consumer group's committed offset does.
func TestLogInSlotWhileAppending(t *testing.T) {
	const capacity, total = 7, 20000
	l := ringlog.New[int64](capacity)
	var mu sync.Mutex
	var end, reader atomic.Int64 // published log end; the reader's next offset
	done := make(chan struct{})
	go func() {
		defer close(done)
		for off, slot := int64(0), 0; off < total; {
			if off >= end.Load() {
				runtime.Gosched()
				continue
			}
			if got := *l.InSlot(slot); got != off*3 {
				t.Errorf("InSlot(%d) at offset %d = %d, want %d", slot, off, got, off*3)
				return
			}
			off++
			if slot++; slot == l.Cap() {
				slot = 0
			}
			reader.Store(off)
		}
	}()
	for next := int64(0); next < total; {
		mu.Lock()
		l.TrimTo(reader.Load())
		if _, ok := l.Append(next * 3); ok {
			next++
			end.Store(next)
		}
		mu.Unlock()
	}
	<-done
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
