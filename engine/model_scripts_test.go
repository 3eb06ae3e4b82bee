package engine_test

// Sequential scripts against the model (rules 1–14): hand-written corner
// cases, long random scripts over a few topics, groups and members, and
// ownership with many members whose ids sort surprisingly, every outcome
// and the whole observable state compared with model.Broker after every
// step.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestEdgeScriptsMatchModel replays hand-written corner cases of rules
// 1–14, checking every outcome and the whole state after every step.
func TestEdgeScriptsMatchModel(t *testing.T) {
	scripts := map[string][]hOp{
		"leave of last member clears in-flight, rejoin redelivers": {
			hC("t", 2), hPub("t", 0, "a"), hPub("t", 1, "b"), hJ("t", "g", "m"), hQ("t", "g", "m", 64),
			hL("t", "g", "m"), hA("t", "g", "m", 0, 0), hJ("t", "g", "m"), hA("t", "g", "m", 0, 0),
			hQ("t", "g", "m", 64), hA("t", "g", "m", 0, 0), hR("t", "g", "m", 1, 0), hQ("t", "g", "m", 1),
		},
		"join twice returns current partitions after others joined": {
			hC("t", 5), hJ("t", "g", "b"), hJ("t", "g", "a"), hJ("t", "g", "b"), hJ("t", "g", "c"),
			hJ("t", "g", "a"), hL("t", "g", "b"), hJ("t", "g", "c"), hL("t", "g", "b"), hL("t", "nog", "a"),
		},
		"poll maxRecords below eligible takes lowest partitions": {
			hC("t", 4), hPub("t", 3, "d"), hPub("t", 1, "b"), hPub("t", 2, "c"), hJ("t", "g", "m"),
			hQ("t", "g", "m", 1), hQ("t", "g", "m", 1), hQ("t", "g", "m", 1), hQ("t", "g", "m", 1),
			hR("t", "g", "m", 2, 0), hQ("t", "g", "m", 2),
		},
		"rebalance keeps in-flight of unmoved partitions only": {
			hC("t", 3), hPub("t", 0, "x"), hPub("t", 1, "y"), hPub("t", 2, "z"), hJ("t", "g", "a"),
			hQ("t", "g", "a", 64), hJ("t", "g", "b"), hA("t", "g", "a", 1, 0), hA("t", "g", "a", 0, 0),
			hA("t", "g", "a", 2, 0), hQ("t", "g", "b", 64), hJ("t", "g", "0"), hA("t", "g", "b", 1, 0),
			hQ("t", "g", "0", 9), hQ("t", "g", "a", 9), hQ("t", "g", "b", 9),
		},
		"memberless group pins retention; publish returns -1": {
			hC("t", 1), hJ("t", "g", "a"), hJ("t", "h", "a"), hL("t", "h", "a"), hPub("t", 0, "1"),
			hPub("t", 0, "2"), hPub("t", 0, "3"), hQ("t", "g", "a", 1), hA("t", "g", "a", 0, 0),
			hQ("t", "g", "a", 1), hA("t", "g", "a", 0, 1), hPub("t", 0, "4"), hJ("t", "h", "z"),
			hQ("t", "h", "z", 1), hA("t", "h", "z", 0, 0), hPub("t", 0, "5"), hPub("t", 0, "6"),
		},
		"new group starts at the log start after trims": {
			hC("t", 2), hJ("t", "g", "a"), hPub("t", 0, "1"), hPub("t", 0, "2"), hPub("t", 1, "3"),
			hQ("t", "g", "a", 64), hA("t", "g", "a", 0, 0), hA("t", "g", "a", 1, 0), hJ("t", "n", "a"),
			hQ("t", "n", "a", 64), hA("t", "n", "a", 0, 1), hQ("t", "g", "a", 64), hA("t", "g", "a", 0, 1),
		},
		"create duplicates and invalid counts": {
			hC("t", 2), hC("t", 2), hC("t", 3), hC("t", 0), hC("t", 65), hC("u", 64), hC("u", 1),
			hPub("t", 2, "x"), hPub("u", 63, "x"), hPub("u", 64, "x"),
		},
		"validation before state: invalid call about absent group": {
			hC("t", 2), hL("t", "nog", "é"), hL("t", "nog", ""), hQ("t", "nog", "a", 0), hQ("t", "nog", "", 1),
			hA("t", "nog", "a", 0, -1), hA("t", "nog", "a", 2, 0), hA("t", "nog", "a b", 0, 0),
			hR("t", "no g", "a", 0, 0), hQ("t", "nog", "a", 1), hA("t", "nog", "a", 0, 0),
			hJ("t", "g", "a"), hQ("t", "g", "zz", 65), hA("t", "g", "zz", 0, -5), hL("t", "g", "a-"),
		},
		"retry of wrong offset or partition, ack after retry": {
			hC("t", 2), hJ("t", "g", "a"), hPub("t", 0, "x"), hPub("t", 0, "y"), hQ("t", "g", "a", 64),
			hR("t", "g", "a", 0, 1), hR("t", "g", "a", 1, 0), hA("t", "g", "a", 0, 1), hR("t", "g", "a", 0, 0),
			hA("t", "g", "a", 0, 0), hQ("t", "g", "a", 64), hA("t", "g", "a", 0, 0), hA("t", "g", "a", 0, 1),
			hA("t", "g", "a", 0, 1),
		},
		"capacity 1 churn": {
			hC("t", 1), hPub("t", 0, "x"), hPub("t", 0, "y"), hJ("t", "g", "a"), hPub("t", 0, "y"),
			hQ("t", "g", "a", 1), hA("t", "g", "a", 0, 0), hPub("t", 0, "y"), hPub("t", 0, "z"),
			hJ("t", "h", "a"), hQ("t", "h", "a", 1), hA("t", "h", "a", 0, 1), hPub("t", 0, "z"),
		},
	}
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			capacity := int32(2)
			if strings.HasPrefix(name, "capacity 1") {
				capacity = 1
			}
			h := hNewPair(t, capacity)
			for _, o := range script {
				h.do(o)
				h.same([]string{"t", "u"}, []string{"g", "h", "n", "nog"})
			}
		})
	}
}

// TestRandomScriptsMatchModel runs random scripts over small pools of
// valid and invalid names, surprising member orders ("Z" < "_" < "a",
// "a-" < "a0" < "a_", "10" < "9") and extreme integers, checking every
// outcome and the whole state after every step.
func TestRandomScriptsMatchModel(t *testing.T) {
	topics := []string{"t", "t", "t", "U", "U", "nope", "t.x", "ｔ"}
	groups := []string{"g", "g", "G", "g-", "g_", "0", "é", "g\x00"}
	members := []string{"a", "Z", "a-", "a_", "a0", "9", "10", "_", "b", "\xff", "а", ""}
	parts := []int32{0, 0, 1, 1, 2, 3, -1, 4, math.MaxInt32, math.MinInt32}
	counts := []int32{1, 2, 3, 0, 65, math.MaxInt32}
	polls := []int32{1, 1, 2, 3, 64, 0, 65, -1}
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		h := hNewPair(t, int32(1+rng.IntN(3)))
		pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
		for step := range 150 {
			tp, g, m := pick(topics), pick(groups), pick(members)
			p := parts[rng.IntN(len(parts))]
			var o hOp
			switch k := rng.IntN(20); {
			case k < 2:
				o = hC(tp, counts[rng.IntN(len(counts))])
			case k < 5:
				o = hJ(tp, g, m)
			case k < 6:
				o = hL(tp, g, m)
			case k < 9:
				o = hPub(tp, p, fmt.Sprint(rng.IntN(100)))
			case k < 13:
				o = hQ(tp, g, m, polls[rng.IntN(len(polls))])
			default:
				// Aim at the in-flight record most of the time.
				off, err := h.m.Committed(tp, g, p)
				if err != nil || rng.IntN(5) == 0 {
					off = []int64{-1, 0, 1, math.MaxInt64, math.MinInt64}[rng.IntN(5)]
				}
				if k < 18 {
					o = hA(tp, g, m, p, off)
				} else {
					o = hR(tp, g, m, p, off)
				}
			}
			h.do(o)
			// The whole state every few steps (the model's topics and groups,
			// an absent topic, an absent and an invalid group).
			if step%3 == 2 {
				h.same([]string{"nope"}, []string{"zz", "é"})
			}
		}
		h.same(topics, groups)
	}
}

// TestManyMembersOwnership: 64 partitions and up to 100 members with
// ids whose byte order surprises (digits < upper < "_" < lower, "a-" < "a0"
// < "a_"), joined and left in random order; every Join and Poll must match
// the model, and members beyond the partition count own nothing (an empty,
// non-nil slice).
func TestManyMembersOwnership(t *testing.T) {
	ids := []string{"-", "0", "9", "10", "A", "Z", "_", "a", "a-", "a0", "a_", "aa", "z", "Z-", "z_", "zz"}
	for i := 0; len(ids) < 100; i++ {
		ids = append(ids, fmt.Sprintf("%c%dx", "aZ_-0"[i%5], i)) // distinct from the list above
	}
	rng := rand.New(rand.NewPCG(7, 7))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	h := hNewPair(t, 3)
	h.do(hC("T", 64))
	for p := int32(0); p < 64; p++ {
		h.do(hPub("T", p, fmt.Sprint(p)))
	}
	// One member of another group owns all 64: a poll takes at most
	// maxRecords, lowest partitions first, then the rest.
	h.do(hJ("T", "S", "solo"))
	if n := len(h.do(hQ("T", "S", "solo", 63)).Recs); n != 63 {
		t.Fatalf("Poll(63) over 64 eligible partitions took %d", n)
	}
	h.do(hQ("T", "S", "solo", 64))
	h.do(hL("T", "S", "solo"))
	for i, id := range ids {
		h.do(hJ("T", "G", id))
		if i == 63 {
			// 64 members on 64 partitions: each owns exactly the partition of
			// its sorted index; each polls exactly that record.
			sorted := slices.Clone(ids[:64])
			slices.Sort(sorted)
			for p, m := range sorted {
				parts := h.do(hJ("T", "G", m)).Parts
				if !slices.Equal(parts, []int32{int32(p)}) {
					t.Fatalf("sorted member %d %q owns %v, want [%d]", p, m, parts, p)
				}
				h.do(hQ("T", "G", m, 64))
			}
			h.same(nil, []string{"G"})
		}
	}
	h.same(nil, []string{"G"})
	// 100 members: the 64 lowest own one partition each, the rest an empty,
	// non-nil slice.
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i, m := range sorted {
		parts := h.do(hJ("T", "G", m)).Parts
		want := []int32{}
		if i < 64 {
			want = []int32{int32(i)}
		}
		if parts == nil || !slices.Equal(parts, want) {
			t.Fatalf("sorted member %d %q of 100 owns %v (nil=%v), want %v", i, m, parts, parts == nil, want)
		}
	}
	for _, m := range ids {
		h.do(hQ("T", "G", m, 64))
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for i, id := range ids {
		h.do(hL("T", "G", id))
		if i%9 == 0 {
			for _, m := range ids[i+1:] {
				out := h.do(hQ("T", "G", m, 64))
				for _, r := range out.Recs {
					h.do(hA("T", "G", m, r.Partition, r.Offset))
				}
			}
			h.same(nil, []string{"G"})
		}
	}
	h.same(nil, []string{"G"})
}
