package engine_test

// Linearizability of small concurrent histories: a few goroutines' calls,
// each with the ticks of a shared counter just before it and just after it
// returned, must be explained by some order that respects real time in
// which model.Broker gives exactly their outcomes and the final state,
// found by brute force (hExplain).

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/f91dcac0/tributary/model"
)

// hTimed is one call of a concurrent history, with ticks of a shared clock
// taken just before the call and just after it returned.
type hTimed struct {
	op        hOp
	out       hOut
	call, ret int64
}

// hExplain reports whether the calls of ev not yet done can be put in an
// order that respects real time (a call that returned before another was
// called comes first) and gives, in the model m, exactly their outcomes and
// then the final state want.
func hExplain(m *model.Broker, ev []hTimed, done []bool, left int, final func(*model.Broker) string, want string) bool {
	if left == 0 {
		return final(m) == want
	}
	for j := range ev {
		if done[j] {
			continue
		}
		minimal := true
		for i := range ev {
			if !done[i] && i != j && ev[i].ret < ev[j].call {
				minimal = false
				break
			}
		}
		if !minimal {
			continue
		}
		c := m.Clone()
		if !hSame(hModel(c, ev[j].op), ev[j].out) {
			continue
		}
		done[j] = true
		if hExplain(c, ev, done, left-1, final, want) {
			return true
		}
		done[j] = false
	}
	return false
}

// TestConcurrentHistoriesLinearize: from random states (records in
// flight, memberless groups, full partitions), 2 or 3 goroutines each make
// 1 to 3 calls at once — acks, retries, polls over several partitions,
// publishes, joins and leaves (rebalances), group creation, invalid calls —
// and some order of all the calls that respects real time and program order
// must give, in the model, exactly the engine's outcomes and resulting state
// (offsets, in-flight flags and, through a final Leave of every member,
// memberships). Some rounds use templates aimed at known hazards: a poll
// over every partition racing ordered publishes or acks on its first and
// last partitions, an ack racing a rebalance and the new owner's poll, and a
// poll of the last partition racing the Leave that moves it.
func TestConcurrentHistoriesLinearize(t *testing.T) {
	const topic, P = "t", 3
	groups := []string{"g", "h", "k"}
	members := []string{"a", "b", "c"}
	rng := rand.New(rand.NewPCG(11, 13))
	gen := func(m *model.Broker) hOp {
		g := groups[rng.IntN(len(groups))]
		mb := members[rng.IntN(len(members))]
		p := int32(rng.IntN(P))
		switch k := rng.IntN(16); {
		case k < 2:
			return hJ(topic, g, mb)
		case k < 3:
			return hL(topic, g, mb)
		case k < 5:
			return hPub(topic, p, fmt.Sprint(rng.IntN(10)))
		case k < 8:
			return hQ(topic, g, mb, int32(1+rng.IntN(3)))
		case k < 15:
			off, err := m.Committed(topic, g, p)
			if err != nil {
				off = 0
			}
			if a, err := m.Assignment(topic, g); err == nil && rng.IntN(4) != 0 {
				for who, ps := range a {
					if slices.Contains(ps, p) {
						mb = who
					}
				}
			}
			if k < 12 {
				return hA(topic, g, mb, p, off)
			}
			return hR(topic, g, mb, p, off)
		default:
			bad := []hOp{hA(topic, g, mb, p, -1), hQ(topic, g, "é", 1), hJ(topic, g, "a.b"), hPub(topic, P, "x"), hL(topic, "", mb)}
			return bad[rng.IntN(len(bad))]
		}
	}
	probe := func(x hInspector) string { return hProbe(x, []string{topic}, groups) }
	final := func(m *model.Broker) string {
		var sb strings.Builder
		sb.WriteString(probe(m))
		for _, g := range groups {
			for _, mb := range members {
				fmt.Fprintf(&sb, "%s/%s:%s ", g, mb, hOutString(hModel(m, hL(topic, g, mb))))
			}
		}
		return sb.String()
	}
	rounds := 1000
	if testing.Short() {
		rounds = 300
	}
	for round := range rounds {
		h := hNewPair(t, int32(1+rng.IntN(3)))
		h.do(hC(topic, P))
		var scripts [][]hOp
		switch rng.IntN(5) {
		case 0: // a three-partition poll against ordered changes at both ends
			h.do(hJ(topic, "g", "a"))
			for range rng.IntN(3) {
				h.do(hPub(topic, 0, "x"))
				h.do(hPub(topic, 2, "y"))
			}
			h.do(hJ(topic, "h", "a"))
			if rng.IntN(2) == 0 {
				h.do(hQ(topic, "g", "a", 3))
			}
			second := []hOp{hPub(topic, 0, "p"), hPub(topic, 2, "q")}
			if rng.IntN(2) == 0 {
				c0, _ := h.m.Committed(topic, "g", 0)
				c2, _ := h.m.Committed(topic, "g", 2)
				second = []hOp{hA(topic, "g", "a", 0, c0), hA(topic, "g", "a", 2, c2)}
			}
			scripts = [][]hOp{{hQ(topic, "g", "a", 3), hQ(topic, "g", "a", 3)}, second}
		case 1: // an ack racing the rebalance that moves its partition
			h.do(hJ(topic, "g", "a"))
			h.do(hJ(topic, "g", "b"))
			h.do(hPub(topic, 2, "x"))
			h.do(hPub(topic, 2, "y"))
			h.do(hQ(topic, "g", "a", 3))
			c2, _ := h.m.Committed(topic, "g", 2)
			scripts = [][]hOp{
				{hA(topic, "g", "a", 2, c2), hR(topic, "g", "a", 2, c2)},
				{hJ(topic, "g", "c"), hQ(topic, "g", "c", 3)},
				{hQ(topic, "g", "a", 3), hA(topic, "g", "c", 2, c2)},
			}
		case 2: // a poll of the last partition racing the rebalance that takes it away
			for _, m := range members {
				h.do(hJ(topic, "g", m))
			}
			h.do(hPub(topic, 2, "x"))
			h.do(hPub(topic, 1, "y"))
			scripts = [][]hOp{
				{hQ(topic, "g", "c", 3)},
				{hL(topic, "g", "c"), hQ(topic, "g", "a", 3)},
				{hQ(topic, "g", "b", 1), hJ(topic, "g", "c")},
			}
		default:
			for range 4 + rng.IntN(14) {
				h.do(gen(h.m))
			}
			scripts = make([][]hOp, 2+rng.IntN(2))
			for i := range scripts {
				for range 1 + rng.IntN(3) {
					scripts[i] = append(scripts[i], gen(h.m))
				}
			}
		}
		var clock atomic.Int64
		got := make([][]hTimed, len(scripts))
		var ready sync.WaitGroup
		ready.Add(len(scripts))
		start := make(chan struct{})
		fs := make([]func(), len(scripts))
		for i, script := range scripts {
			fs[i] = func() {
				ready.Done()
				<-start
				for _, o := range script {
					call := clock.Add(1)
					out := hEngine(h.b, o)
					got[i] = append(got[i], hTimed{op: o, out: out, call: call, ret: clock.Add(1)})
				}
			}
		}
		go func() { ready.Wait(); close(start) }()
		runAll(t, hDeadline, fs...)
		var ev []hTimed
		for _, g := range got {
			ev = append(ev, g...)
		}
		var sb strings.Builder
		sb.WriteString(probe(h.b))
		for _, g := range groups {
			for _, mb := range members {
				fmt.Fprintf(&sb, "%s/%s:%s ", g, mb, hOutString(hEngine(h.b, hL(topic, g, mb))))
			}
		}
		gotState := sb.String()
		if !hExplain(h.m.Clone(), ev, make([]bool, len(ev)), len(ev), final, gotState) {
			var hist strings.Builder
			for i, g := range got {
				for _, e := range g {
					fmt.Fprintf(&hist, "  goroutine %d [%d,%d] %s -> %s\n", i, e.call, e.ret, e.op, hOutString(e.out))
				}
			}
			t.Fatalf("round %d: the concurrent history is not linearizable\nprefix:\n  %s\nhistory:\n%sengine state after:\n%s",
				round, strings.Join(h.tail(100), "\n  "), hist.String(), gotState)
		}
	}
}
