package engine

import (
	"sync"
	"testing"
	"time"
)

// TestSessionWordProtocol holds the last-seen word to the protocol the
// package doc's Member liveness section relies on: a claim and a refresh
// are compare-and-swaps on one word, so exactly one of them wins, and the
// loser sees it. Sequentially: a refresh after a claim fails and leaves the
// claim; a claim after a refresh to an instant that is not expired fails;
// a refresh never lowers the word; a word given back refreshes again.
// Concurrently: claims and refreshes race on one word, and every refresh
// that reports success happened before the claim (its instant is in the
// word the claim replaced or earlier), every one after it fails.
func TestSessionWordProtocol(t *testing.T) {
	const d = int64(10 * time.Second)
	b := &Broker{session: d}
	tp := &topic{b: b}

	s := newSession(0)
	if w, ok := tp.claim(s, d-1); ok {
		t.Fatalf("claimed at d-1ns (word %d): not expired yet", w)
	}
	if w, ok := tp.claim(s, d); !ok || w != 0 {
		t.Fatalf("claim at exactly d: %d, %v; want 0, true", w, ok)
	}
	if s.refresh(d) {
		t.Fatal("a refresh succeeded on a claimed word")
	}
	if got := s.seen.Load(); got != sessionGone {
		t.Fatalf("word %d after the failed refresh, want sessionGone", got)
	}
	s.seen.Store(0) // given back, as a refused expiry does
	if !s.refresh(5) || s.seen.Load() != 5 {
		t.Fatalf("refresh of a word given back: word %d, want 5", s.seen.Load())
	}
	if !s.refresh(3) || s.seen.Load() != 5 {
		t.Fatalf("an older reading moved the word to %d, want it kept at 5", s.seen.Load())
	}
	if _, ok := tp.claim(s, d+4); ok {
		t.Fatal("claimed a member refreshed at 5 at instant d+4")
	}

	// The race: refreshers at instants 1, 2, … against one claim at an
	// instant that expires everything before d/2.
	for round := range 200 {
		s := newSession(0)
		now := d + d/2
		var wg sync.WaitGroup
		var mu sync.Mutex // guards won
		var won []int64
		for r := range 4 {
			wg.Go(func() {
				for i := int64(1); i <= 200; i++ {
					at := int64(r)*1000 + i
					if s.refresh(at) {
						mu.Lock()
						won = append(won, at)
						mu.Unlock()
					}
				}
			})
		}
		var claimed bool
		var replaced int64
		wg.Go(func() { replaced, claimed = tp.claim(s, now) })
		wg.Wait()
		if !claimed {
			t.Fatalf("round %d: the claim failed, every refresh being before d/2", round)
		}
		if got := s.seen.Load(); got != sessionGone {
			t.Fatalf("round %d: word %d after the race: a refresh undid the claim", round, got)
		}
		for _, at := range won {
			if at > replaced {
				// Words only grow before the claim, so a refresh to at that
				// came first left the word at at or later.
				t.Fatalf("round %d: refresh to %d succeeded after the claim replaced %d", round, at, replaced)
			}
		}
	}
}
