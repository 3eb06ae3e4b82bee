package jetstream_test

// Tests that use SetLossy, the hook on state writes: lost requests and
// replies, and calls run inside a commit window.

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// A Poll whose reservation (the cursor write) reached the server but whose
// reply was lost returns ErrUnavailable; the member's next poll delivers
// the record it reserved, with the attempt it counted, instead of finding
// it in flight to nobody (with no ack timeout it would stay so until a
// rebalance: seen as a consumer stalled after a server restart). A write
// lost before it reached the server changes nothing: the next poll
// reserves the record as attempt 1.
func TestPollAfterLostReply(t *testing.T) {
	for _, written := range []bool{true, false} {
		name := "reply lost"
		if !written {
			name = "request lost"
		}
		t.Run(name, func(t *testing.T) {
			b, _ := start(t, jetstream.Config{})
			bt := topic(t, b, "t", 1)
			pub(t, bt, 0, "a")
			m := member(t, bt, "g", "m")
			must(m.Join()).of(t)
			var lose atomic.Bool
			lose.Store(true)
			jetstream.SetLossy(b, func(key string, w bool) bool {
				return w == written && strings.HasPrefix(key, "cursor.t.g.") && lose.CompareAndSwap(true, false)
			})
			rs, err := m.TryPoll(nil, 4)
			if !errors.Is(err, jetstream.ErrUnavailable) || len(rs) != 0 {
				t.Fatalf("TryPoll with its write lost = %v, %v; want no record, ErrUnavailable", rs, err)
			}
			p := must(b.Describe("t")).of(t).Groups[0].Partitions[0]
			if p.InFlight != written {
				t.Fatalf("after the lost write: %+v, want in flight %v", p, written)
			}
			wantRecs(t, poll(t, m, 4), rec{0, 0, "a", 1})
			wantRecs(t, poll(t, m, 4)) // delivered once
			ok, err := m.Ack(0, 0)
			wantBool(t, "Ack", ok, err, true)
			if p := must(b.Describe("t")).of(t).Groups[0].Partitions[0]; p.Committed != 1 || p.InFlight {
				t.Fatalf("after the Ack: %+v", p)
			}
		})
	}
}

// A poll of several partitions that reserved a record on one and then
// failed on another returns the reserved record with no error: the
// typed Consumer (Poll, TryPoll, Run) drops records returned with an
// error, and with no ack timeout the record would stay in flight to
// nobody (seen as Run stalled after a server restart). The failed
// partition is polled again at the next call.
func TestPollPartialFailureKeepsReserved(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	c := must(tributary.NewClusterOn(b)).of(t)
	defer c.Close()
	tp := must(tributary.CreateTopic(c, "t", 2, tributary.JSON[int]())).of(t)
	pr := must(tributary.NewProducer[int](c, "p", tributary.Manual())).of(t)
	for p := range int32(2) {
		must(pr.TrySend(tp, tributary.Message[int]{Partition: p, Value: int(p)})).of(t)
	}
	cons := must(tributary.NewConsumer(tp, "g", "c1")).of(t)
	var lose atomic.Bool
	lose.Store(true)
	jetstream.SetLossy(b, func(key string, written bool) bool {
		return !written && key == "cursor.t.g.1" && lose.CompareAndSwap(true, false)
	})
	ms, err := cons.TryPoll(4)
	if err != nil || len(ms) != 1 || ms[0].Partition != 0 {
		t.Fatalf("TryPoll with partition 1's write lost = %v, %v; want partition 0's message, no error", ms, err)
	}
	ms2, err := cons.TryPoll(4)
	if err != nil || len(ms2) != 1 || ms2[0].Partition != 1 || ms2[0].Attempt != 1 {
		t.Fatalf("next TryPoll = %v, %v; want partition 1's message, attempt 1", ms2, err)
	}
	for _, m := range append(ms, ms2...) {
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

// A rebalance of this process that reads a group just committed with a
// user assignor, before the committing SetAssignor has registered it, runs
// that assignor: it does not fail with ErrUnknownAssignor (which no
// sequential order explains; seen in the assignor mix of the
// linearizability check under load). The hook runs a Join in that window.
func TestUserAssignorKnownAtCommit(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 2)
	must(member(t, bt, "g", "a").Join()).of(t)
	mc := member(t, bt, "g", "c")
	var once atomic.Bool
	var joinErr error
	joined := false
	jetstream.SetLossy(b, func(key string, written bool) bool {
		if written && key == "group.t.g" && once.CompareAndSwap(false, true) {
			_, joinErr = mc.Join() // the group names "first" now; remember has not run
			joined = true
		}
		return false
	})
	ok, err := b.SetAssignor("t", "g", firstAssignor{})
	wantBool(t, "SetAssignor", ok, err, true)
	if !joined || joinErr != nil {
		t.Fatalf("Join in the commit window: ran %v, error %v", joined, joinErr)
	}
	d := must(b.Describe("t")).of(t)
	if g := d.Groups[0]; g.Assignor != "first" || !slices.Equal(g.Members, []string{"a", "c"}) || g.Partitions[0].Owner != "a" || g.Partitions[1].Owner != "a" {
		t.Fatalf("group %+v: want first's assignment of both partitions to a", g)
	}
}
