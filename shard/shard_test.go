package shard_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/shard"
)

// iterate collects m's partitions with the First loop the engine uses to
// take partition locks.
func iterate(m shard.Mask) []int32 {
	out := []int32{}
	for p, rest, ok := m.First(); ok; p, rest, ok = rest.First() {
		out = append(out, p)
	}
	return out
}

func TestMask(t *testing.T) {
	all := make([]int32, 64)
	for i := range all {
		all[i] = int32(i)
	}
	tests := []struct {
		name  string
		of    []int32
		wlist []int32 // ascending, what iteration and AppendTo yield
		wlen  int
		wstr  string
	}{
		{"empty", nil, []int32{}, 0, "[]"},
		{"zero", []int32{0}, []int32{0}, 1, "[0]"},
		{"top", []int32{63}, []int32{63}, 1, "[63]"},
		{"doc example", []int32{0, 2, 5}, []int32{0, 2, 5}, 3, "[0 2 5]"},
		{"unsorted input", []int32{5, 0, 2}, []int32{0, 2, 5}, 3, "[0 2 5]"},
		{"duplicates", []int32{7, 7, 3, 7}, []int32{3, 7}, 2, "[3 7]"},
		{"ends", []int32{63, 0}, []int32{0, 63}, 2, "[0 63]"},
		{"all 64", all, all, 64, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := shard.Of(tt.of...)
			assert.Equal(t, tt.wlist, iterate(m), "First iteration")
			assert.Equal(t, tt.wlist, m.AppendTo([]int32{}), "AppendTo")
			assert.Equal(t, tt.wlen, m.Len(), "Len")
			if tt.wstr != "" {
				assert.Equal(t, tt.wstr, m.String(), "String")
			}
			for p := int32(-2); p < 66; p++ {
				assert.Equal(t, slices.Contains(tt.wlist, p), m.Has(p), "Has(%d)", p)
			}
		})
	}
}

func TestMaskZeroValueIsEmpty(t *testing.T) {
	var m shard.Mask
	_, _, ok := m.First()
	assert.False(t, ok)
	assert.Equal(t, 0, m.Len())
	assert.Nil(t, m.AppendTo(nil), "AppendTo(nil) of an empty mask appends nothing")
	assert.Equal(t, "[]", m.String())
}

func TestMaskWith(t *testing.T) {
	tests := []struct {
		name  string
		start shard.Mask
		add   int32
		wlist []int32
	}{
		{"into empty", 0, 4, []int32{4}},
		{"below", shard.Of(9), 1, []int32{1, 9}},
		{"above", shard.Of(1), 9, []int32{1, 9}},
		{"already there", shard.Of(1, 9), 9, []int32{1, 9}},
		{"index 0", shard.Of(63), 0, []int32{0, 63}},
		{"index 63", shard.Of(0), 63, []int32{0, 63}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.start
			m := tt.start.With(tt.add)
			assert.Equal(t, tt.wlist, iterate(m))
			assert.True(t, m.Has(tt.add))
			assert.Equal(t, before, tt.start, "With returns a new value; the receiver is unchanged")
		})
	}
}

func TestMaskWithPanicsOutOfRange(t *testing.T) {
	for _, p := range []int32{-1, 64, 65, -1 << 31, 1<<31 - 1} {
		t.Run(strconv.Itoa(int(p)), func(t *testing.T) {
			assert.Panics(t, func() { shard.Mask(0).With(p) }, "With(%d)", p)
			assert.Panics(t, func() { shard.Of(0, p) }, "Of(0, %d)", p)
		})
	}
	for _, p := range []int32{0, 63} {
		assert.NotPanics(t, func() { shard.Mask(0).With(p) }, "With(%d)", p)
	}
}

func TestMaskAppendToKeepsPrefix(t *testing.T) {
	dst := []int32{-7, -8}
	got := shard.Of(3, 1).AppendTo(dst)
	assert.Equal(t, []int32{-7, -8, 1, 3}, got)
}

// TestMaskRandom checks iteration, AppendTo, Has and Len against a plain
// bool set on random masks.
func TestMaskRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var set [64]bool
		var m shard.Mask
		for range r.IntN(70) {
			p := int32(r.IntN(64))
			set[p] = true
			m = m.With(p)
		}
		want := []int32{}
		for p, in := range set {
			if in {
				want = append(want, int32(p))
			}
		}
		require.Equal(t, want, iterate(m))
		require.Equal(t, want, m.AppendTo(make([]int32, 0)))
		require.Equal(t, len(want), m.Len())
		require.True(t, slices.IsSorted(iterate(m)), "iteration is the ascending lock order")
		for p := range int32(64) {
			require.Equal(t, set[p], m.Has(p))
		}
	}
}

func TestMaskIterationAllocatesNothing(t *testing.T) {
	m := shard.Of(0, 5, 17, 63)
	var sum int32
	allocs := testing.AllocsPerRun(100, func() {
		for p, rest, ok := m.First(); ok; p, rest, ok = rest.First() {
			sum += p
		}
		m = m.With(30)
		_ = m.Has(30)
	})
	assert.Zero(t, allocs)
	assert.NotZero(t, sum)
}

func TestCacheLineSizeIsPowerOfTwo(t *testing.T) {
	assert.GreaterOrEqual(t, shard.CacheLineSize, 64)
	assert.Zero(t, shard.CacheLineSize&(shard.CacheLineSize-1))
	assert.Equal(t, 64, shard.MaxPartitions)
}
