package jetstream_test

// Rule 25 on JetStream: incarnations of one member name. A Rejoin from
// another process makes it the current incarnation, fences the old one and
// takes its deliveries back; a Member's own Rejoin never fences it (against
// its own Heartbeat, in its commit window, retried after a lost reply); a
// reservation of the old incarnation whose reply was lost reaches the new
// one once.

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/jetstream"
)

// Rule 25 on JetStream, across processes: two Backends on one server (two
// connections, as two processes would have) name the same member. The
// second one's Rejoin makes it the current incarnation with no rebalance
// and cancels the first one's in-flight deliveries, which it then polls
// itself with Attempt 2 — a restarted process gets its predecessor's
// records back at once, without an ack timeout. The first one is fenced:
// its calls fail with ErrFenced (and ErrClosed), its Leave leaves
// nothing, and nothing it does changes the group.
func TestRejoinAcrossProcesses(t *testing.T) {
	b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 8})
	bt1 := topic(t, b1, "t", 2)
	pub(t, bt1, 0, "x")
	pub(t, bt1, 1, "y")
	bt2, _, err := b2.OpenTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	member := func(bt tributary.BackendTopic, name string) tributary.BackendMember {
		m, err := bt.Member("g", name)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	seen := func(recs []engine.Record) []string {
		out := []string{}
		for _, r := range recs {
			out = append(out, r.Payload+"#"+string(rune('0'+r.Attempt)))
		}
		return out
	}
	first := member(bt1, "a")
	if parts, err := first.Rejoin(); err != nil || len(parts) != 2 {
		t.Fatalf("first Rejoin = %v, %v; want [0 1]", parts, err)
	}
	recs, err := first.TryPoll(nil, 4)
	if err != nil || len(recs) != 2 {
		t.Fatalf("first TryPoll = %v, %v; want both records", seen(recs), err)
	}
	before, err := b1.Describe("t")
	if err != nil {
		t.Fatal(err)
	}

	second := member(bt2, "a") // the restarted process
	if parts, err := second.Rejoin(); err != nil || len(parts) != 2 {
		t.Fatalf("second Rejoin = %v, %v; want [0 1]", parts, err)
	}
	d, err := b1.Describe("t")
	if err != nil {
		t.Fatal(err)
	}
	g := d.Groups[0]
	if len(g.Members) != 1 || g.Partitions[0].InFlight || g.Partitions[1].InFlight || g.Partitions[0].Attempts != 1 {
		t.Fatalf("after the second Rejoin: %+v; want one member, nothing in flight, attempts kept", g)
	}
	if g.Partitions[0].Owner != "a" || g.Partitions[1].Owner != "a" || before.Groups[0].Members[0] != "a" {
		t.Fatalf("after the second Rejoin: %+v; want the same assignment", g)
	}

	fenced := func(err error, what string) {
		t.Helper()
		if !errors.Is(err, tributary.ErrFenced) || !errors.Is(err, tributary.ErrClosed) {
			t.Errorf("%s: %v, want ErrFenced and ErrClosed", what, err)
		}
	}
	_, err = first.Ack(0, 0)
	fenced(err, "the first incarnation's Ack")
	_, err = first.Retry(1, 0)
	fenced(err, "the first incarnation's Retry")
	_, err = first.TryPoll(nil, 4)
	fenced(err, "the first incarnation's TryPoll")
	_, err = first.Heartbeat()
	fenced(err, "the first incarnation's Heartbeat")
	_, err = first.Join()
	fenced(err, "the first incarnation's Join")
	_, err = first.Rejoin()
	fenced(err, "the first incarnation's Rejoin")
	if ok, err := first.Leave(); ok || err != nil {
		t.Errorf("the first incarnation's Leave = %v, %v; want false, nil", ok, err)
	}

	recs, err = second.TryPoll(nil, 4)
	if got := seen(recs); err != nil || len(got) != 2 || got[0] != "x#2" || got[1] != "y#2" {
		t.Fatalf("second TryPoll = %v, %v; want [x#2 y#2]", got, err)
	}
	for p := int32(0); p < 2; p++ {
		ok, err := second.Ack(p, 0)
		wantBool(t, "the second incarnation's Ack", ok, err, true)
	}
	ok, err := second.Leave()
	wantBool(t, "the second incarnation's Leave", ok, err, true)
	d, err = b2.Describe("t")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Groups[0].Members) != 0 || d.Groups[0].Partitions[0].Committed != 1 {
		t.Fatalf("after the second's Leave: %+v", d.Groups[0])
	}
}

// Rule 25's worked example on JetStream, without the session timeout it
// needs in backendtest: Join, poll both records, Rejoin of the same
// Member: still the one member, and its next poll returns both again with
// Attempt 2; an Ack of a delivery Rejoin cancelled is false.
func TestRejoinWorkedExample(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 10})
	bt := topic(t, b, "t", 2)
	pub(t, bt, 0, "x")
	pub(t, bt, 1, "y")
	m, err := bt.Member("g", "a")
	if err != nil {
		t.Fatal(err)
	}
	if parts, err := m.Join(); err != nil || len(parts) != 2 {
		t.Fatalf("Join = %v, %v", parts, err)
	}
	if recs, err := m.TryPoll(nil, 4); err != nil || len(recs) != 2 {
		t.Fatalf("TryPoll = %v, %v", recs, err)
	}
	if parts, err := m.Rejoin(); err != nil || len(parts) != 2 {
		t.Fatalf("Rejoin = %v, %v", parts, err)
	}
	ok, err := m.Ack(0, 0)
	wantBool(t, "Ack of a delivery Rejoin cancelled", ok, err, false)
	recs, err := m.TryPoll(nil, 4)
	if err != nil || len(recs) != 2 || recs[0].Attempt != 2 || recs[1].Attempt != 2 {
		t.Fatalf("TryPoll after Rejoin = %+v, %v; want both with Attempt 2", recs, err)
	}
	d, err := b.Describe("t")
	if err != nil || len(d.Groups[0].Members) != 1 {
		t.Fatalf("Describe = %+v, %v; want the one member", d, err)
	}
}

// SelfFence: one Member, used from two goroutines (a BackendMember is
// for concurrent use; the typed consumer's heartbeat loop and Run share
// one). Its own Rejoin must never fence it.
func TestSelfFenceRejoinVsHeartbeat(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 10})
	bt := topic(t, b, "t", 4)
	m := member(t, bt, "g", "a")
	must(m.Join()).of(t)
	var stop atomic.Bool
	var fencedBy atomic.Value
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < 100000 && !stop.Load(); i++ {
			if _, err := m.Heartbeat(); err != nil {
				if errors.Is(err, tributary.ErrFenced) {
					fencedBy.Store("heartbeat: " + err.Error())
				}
				return
			}
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	rounds := 0
	for ; rounds < 300 && time.Now().Before(deadline) && fencedBy.Load() == nil; rounds++ {
		if _, err := m.Rejoin(); err != nil {
			fencedBy.Store("rejoin: " + err.Error())
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if f := fencedBy.Load(); f != nil {
		t.Fatalf("after %d Rejoins of the one Member, it fenced itself: %v", rounds, f)
	}
}

// The same, deterministically: a Heartbeat of the Member that lands after
// its own Rejoin's group write reached the server, before the reply came
// back (SetLossy's written=true call is that window; the hook loses nothing).
func TestSelfFenceInCommitWindow(t *testing.T) {
	for _, expired := range []bool{false, true} {
		t.Run(map[bool]string{false: "member", true: "expired"}[expired], func(t *testing.T) {
			clk := testclock.New()
			b, _ := start(t, jetstream.Config{Capacity: 10, SessionTimeout: tributary.MinSessionTimeout, Clock: clk.Now})
			bt := topic(t, b, "t", 2)
			pub(t, bt, 0, "x")
			m := member(t, bt, "g", "a")
			other := member(t, bt, "g", "z")
			must(m.Join()).of(t)
			must(other.Join()).of(t)
			if expired {
				clk.Advance(2 * tributary.MinSessionTimeout)
				must(other.Heartbeat()).of(t) // expires a
				if ok := must(m.Heartbeat()).of(t); ok {
					t.Fatal("a not expired")
				}
			}
			var hbErr atomic.Value
			var once atomic.Bool
			jetstream.SetLossy(b, func(key string, written bool) bool {
				if written && key == "group.t.g" && once.CompareAndSwap(false, true) {
					_, err := m.Heartbeat()
					hbErr.Store([]error{err})
				}
				return false
			})
			_, rerr := m.Rejoin()
			jetstream.SetLossy(b, nil)
			hb := hbErr.Load()
			if hb == nil {
				t.Fatal("hook not run")
			}
			_, perr := m.TryPoll(nil, 4)
			d := must(b.Describe("t")).of(t)
			if herr := hb.([]error)[0]; herr != nil || rerr != nil || perr != nil {
				t.Fatalf("Rejoin = %v; Heartbeat of the same Member during it = %v; TryPoll after = %v; members now %v (nobody can consume as a)",
					rerr, herr, perr, d.Groups[0].Members)
			}
		})
	}
	_ = strings.HasPrefix
}

// A Member's own Rejoin whose group write took effect but whose reply was
// lost (ErrUnavailable, as in a server restart) must not leave the Member
// fenced by its own token: retrying (what the typed consumer's rejoin
// does after an outage) must work, since no other incarnation exists.
func TestLostReplyOfOwnRejoin(t *testing.T) {
	for _, expired := range []bool{false, true} {
		t.Run(map[bool]string{false: "member", true: "expired"}[expired], func(t *testing.T) {
			clk := testclock.New()
			b, _ := start(t, jetstream.Config{Capacity: 10, SessionTimeout: tributary.MinSessionTimeout, Clock: clk.Now})
			bt := topic(t, b, "t", 2)
			m := member(t, bt, "g", "a")
			other := member(t, bt, "g", "z")
			must(m.Join()).of(t)
			must(other.Join()).of(t)
			if expired {
				clk.Advance(2 * tributary.MinSessionTimeout)
				must(other.Heartbeat()).of(t)
			}
			var once atomic.Bool
			jetstream.SetLossy(b, func(key string, written bool) bool {
				return written && key == "group.t.g" && once.CompareAndSwap(false, true)
			})
			_, err1 := m.Rejoin()
			jetstream.SetLossy(b, nil)
			_, err2 := m.Rejoin()
			_, err3 := m.TryPoll(nil, 4)
			if err2 != nil || err3 != nil {
				t.Fatalf("Rejoin with its reply lost = %v; Rejoin again = %v; TryPoll = %v; members %v",
					err1, err2, err3, must(b.Describe("t")).of(t).Groups[0].Members)
			}
		})
	}
}

// One process (one Backend), two Members of "a": the old one's poll
// reserves a record just after the new one's Rejoin, and the reply of
// that reservation is lost (ErrUnavailable). The new incarnation's poll
// through the same Backend must deliver the record so that it can ack it
// (or leave it for its next poll), and never twice. Key by key: the old
// poll reads the group before the Rejoin and the cursor after it (with
// snapshot reads both are one instant, and the Rejoin's stamp of the
// cursor fails the old reservation: TestZombieReservationNotAcked).
func TestUnsureReservationOfOldIncarnation(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	jetstream.SetSnapshots(b, false)
	bt := topic(t, b, "t", 1)
	pub(t, bt, 0, "x")
	old := member(t, bt, "g", "a")
	must(old.Join()).of(t)
	nu := member(t, bt, "g", "a")
	var step atomic.Int32 // 0, 3 while the Rejoin runs, 1 after it, 2 once a reply is lost
	var rejoinErr error
	jetstream.SetReading(b, func(key string) {
		if key == "cursor.t.g.0" && step.CompareAndSwap(0, 3) {
			_, rejoinErr = nu.Rejoin() // between old's group read and its cursor read
			step.Store(1)
		}
	})
	jetstream.SetLossy(b, func(key string, written bool) bool {
		// The reservation took effect; its reply is lost.
		return written && strings.HasPrefix(key, "cursor.t.g.") && step.CompareAndSwap(1, 2)
	})
	_, err := old.TryPoll(nil, 1)
	jetstream.SetLossy(b, nil)
	jetstream.SetReading(b, nil)
	if rejoinErr != nil || !errors.Is(err, jetstream.ErrUnavailable) {
		t.Fatalf("setup: Rejoin %v, old TryPoll %v", rejoinErr, err)
	}
	var got []rec
	for range 3 {
		rs := poll(t, nu, 1)
		got = append(got, rs...)
		for _, r := range rs {
			ok, err := nu.Ack(r.P, r.Off)
			if err != nil || !ok {
				t.Errorf("the current incarnation's Ack of %+v = %v, %v", r, ok, err)
			}
		}
	}
	if len(got) != 1 {
		t.Errorf("the current incarnation was delivered %v, want the record once", got)
	}
	d := must(b.Describe("t")).of(t).Groups[0].Partitions[0]
	if d.Committed != 1 || d.InFlight {
		t.Errorf("after: %+v", d)
	}
}
