// Package shard holds the small locking pieces the engine shares: the cache
// line size used to pad per-partition state, and Mask, a set of partition
// indexes whose ascending iteration is the engine's partition lock order.
//
// A topic has at most 64 partitions (SPEC rule 2), so any set of a topic's
// partitions — a member's assignment, the partitions a call must lock — fits
// in one uint64. Iterating a Mask yields indexes in ascending order, which is
// exactly the order in which the engine must take partition locks; code that
// locks "the partitions in m" by ranging over m cannot get the order wrong.
package shard

import (
	"math/bits"
	"strconv"
	"strings"
)

// CacheLineSize is the padding unit, in bytes, for per-partition hot state.
// It is two 64-byte lines because the amd64 spatial prefetcher pulls lines in
// adjacent pairs, so state 64 bytes apart still ping-pongs between cores.
const CacheLineSize = 128

// MaxPartitions is the number of partition indexes a Mask can hold (0..63).
const MaxPartitions = 64

// Mask is a set of partition indexes in [0, 64). The zero Mask is empty.
type Mask uint64

// Of returns the set holding exactly the given partitions. It panics on an
// index outside [0, 64), a caller bug.
func Of(partitions ...int32) Mask {
	var m Mask
	for _, p := range partitions {
		m = m.With(p)
	}
	return m
}

// With returns m with partition p added. It panics if p is outside [0, 64).
func (m Mask) With(p int32) Mask {
	if p < 0 || p >= MaxPartitions {
		panic("shard: partition index " + strconv.Itoa(int(p)) + " outside [0,64)")
	}
	return m | 1<<uint(p)
}

// Has reports whether p is in m; false for any p outside [0, 64).
func (m Mask) Has(p int32) bool {
	return p >= 0 && p < MaxPartitions && m&(1<<uint(p)) != 0
}

// Len returns the number of partitions in m.
func (m Mask) Len() int { return bits.OnesCount64(uint64(m)) }

// First returns the lowest partition in m and m without it; ok is false when
// m is empty. Looping `for p, rest, ok := m.First(); ok; p, rest, ok =
// rest.First()` visits m in ascending order, the lock order, allocation-free.
func (m Mask) First() (p int32, rest Mask, ok bool) {
	if m == 0 {
		return 0, 0, false
	}
	return int32(bits.TrailingZeros64(uint64(m))), m & (m - 1), true
}

// AppendTo appends m's partitions in ascending order to dst and returns the
// extended slice; dst may be nil.
func (m Mask) AppendTo(dst []int32) []int32 {
	for p, rest, ok := m.First(); ok; p, rest, ok = rest.First() {
		dst = append(dst, p)
	}
	return dst
}

// String formats m as its ascending partition list, e.g. "[0 2 5]".
func (m Mask) String() string {
	var sb strings.Builder
	sb.WriteByte('[')
	for p, rest, ok := m.First(); ok; p, rest, ok = rest.First() {
		if sb.Len() > 1 {
			sb.WriteByte(' ')
		}
		sb.WriteString(strconv.Itoa(int(p)))
	}
	sb.WriteByte(']')
	return sb.String()
}
