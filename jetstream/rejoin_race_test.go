package jetstream_test

// Rejoins of one member name racing across two processes (two Backends on
// one server): against each other, against a zombie incarnation that keeps
// polling and acking, and against admin calls. The last incarnation gets
// every record, each acked once; every earlier one is fenced; a superseded
// Rejoin changes nothing; an Ack of the current incarnation is never
// refused for a delivery nobody else took.

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestRejoinRace: two processes (Backends on one server) rejoin one member
// name over and over at once, each with a fresh Member per round, while
// the latest of each polls. Afterwards the Member that rejoined last is
// the member: its poll and acks work and it gets every record, each
// committed once, none left in flight; every earlier Member is fenced.
func TestRejoinRace(t *testing.T) {
	b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 64})
	bt1 := topic(t, b1, "t", 3)
	for p := int32(0); p < 3; p++ {
		pub(t, bt1, p, "x")
		pub(t, bt1, p, "y")
	}
	bt2, _, err := b2.OpenTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 15
	var (
		mu  sync.Mutex
		all []tributary.BackendMember
	)
	var wg sync.WaitGroup
	for _, bt := range []tributary.BackendTopic{bt1, bt2} {
		wg.Go(func() {
			for range rounds {
				m, err := bt.Member("g", "a")
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := m.Rejoin(); err != nil && !errors.Is(err, tributary.ErrFenced) {
					t.Errorf("Rejoin: %v", err)
					return
				}
				mu.Lock()
				all = append(all, m)
				mu.Unlock()
				if _, err := m.TryPoll(nil, 3); err != nil && !errors.Is(err, tributary.ErrFenced) {
					t.Errorf("TryPoll: %v", err)
				}
			}
		})
	}
	wg.Wait()
	final, err := bt1.Member("g", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := final.Rejoin(); err != nil {
		t.Fatalf("final Rejoin: %v", err)
	}
	for _, m := range all {
		if _, err := m.TryPoll(nil, 1); !errors.Is(err, tributary.ErrFenced) {
			t.Errorf("an earlier incarnation's TryPoll = %v, want ErrFenced", err)
		}
	}
	got := 0
	for range 20 {
		recs, err := final.TryPoll(nil, 3)
		if err != nil {
			t.Fatalf("final TryPoll: %v", err)
		}
		for _, r := range recs {
			ok, err := final.Ack(r.Partition, r.Offset)
			wantBool(t, "final Ack", ok, err, true)
			got++
		}
		if got == 6 {
			break
		}
	}
	d, err := b2.Describe("t")
	if err != nil {
		t.Fatal(err)
	}
	g := d.Groups[0]
	for _, p := range g.Partitions {
		if p.Committed != 2 || p.InFlight {
			t.Errorf("partition %+v: want committed 2, nothing in flight", p)
		}
	}
	if got != 6 || len(g.Members) != 1 {
		t.Fatalf("the final incarnation acked %d of 6; members %v", got, g.Members)
	}
}

// TestRejoinAttemptsUnique: two processes rejoin member "a" of
// g over and over on 64 partitions, each new incarnation polling (with
// its Member.owned hint going stale as the other process's Rejoins run)
// and acking some of what it got, retrying others. Two deliveries of the
// same record with the same Attempt mean one delivery was handed out
// twice (a stolen or duplicated reservation); a Member that was told it
// is fenced must never return records again; and an Ack refused while
// the Member is still current (Heartbeat true) means its delivery was
// taken from it.
func TestRejoinAttemptsUnique(t *testing.T) {
	b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 1000, Storage: jetstream.MemoryStorage})
	const parts = 64
	bt1 := topic(t, b1, "t", parts)
	for i := range 3 {
		for p := int32(0); p < parts; p++ {
			pub(t, bt1, p, fmt.Sprint(i))
		}
	}
	bt2 := must2(b2.OpenTopic("t")).of(t)
	var mu sync.Mutex
	seen := map[string]string{} // "p/off/attempt" → who
	var errs []string
	bad := func(format string, args ...any) {
		mu.Lock()
		if len(errs) < 10 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(8 * time.Second)
	for who, bt := range []tributary.BackendTopic{bt1, bt2} {
		wg.Go(func() {
			for round := 0; round < 400 && time.Now().Before(deadline); round++ {
				m, ok, stop := rejoined(t, bt)
				if stop {
					return
				}
				if !ok {
					continue
				}
				fenced := false
				for k := range 3 {
					rs, err := m.TryPoll(nil, parts)
					if fenced && len(rs) > 0 {
						bad("proc %d round %d: fenced Member returned %d records", who, round, len(rs))
					}
					if errors.Is(err, tributary.ErrFenced) {
						fenced = true
					}
					for _, r := range rs {
						key := fmt.Sprintf("%d/%d/%d", r.Partition, r.Offset, r.Attempt)
						me := fmt.Sprintf("proc %d round %d poll %d", who, round, k)
						mu.Lock()
						prev, dup := seen[key]
						seen[key] = me
						mu.Unlock()
						if dup {
							bad("%s delivered %s, already delivered with that attempt to %s", me, key, prev)
						}
						var ok bool
						if (r.Offset+int64(round))%3 == 0 {
							ok, err = m.Retry(r.Partition, r.Offset)
						} else {
							ok, err = m.Ack(r.Partition, r.Offset)
						}
						if err == nil && !ok {
							if hb, err := m.Heartbeat(); err == nil && hb {
								bad("%s: settle(%d,%d) refused while the Member is current", me, r.Partition, r.Offset)
							}
						}
					}
				}
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	t.Logf("%d deliveries", len(seen))
}

// Two processes rejoin "a" at once, round after round; each new Member
// polls and acks. An Ack of a delivery the Member was just given that is
// refused while the Member is still the current incarnation (its
// Heartbeat afterwards is not fenced) means someone else cancelled the
// current incarnation's delivery: only a superseded Rejoin can.
func TestRejoinRaceRefusedAcks(t *testing.T) {
	b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 1000})
	const parts = 64
	bt1 := topic(t, b1, "t", parts)
	for i := 0; i < 3; i++ {
		for p := int32(0); p < parts; p++ {
			pub(t, bt1, p, fmt.Sprint(i))
		}
	}
	bt2 := must2(b2.OpenTopic("t")).of(t)
	var bad atomic.Int32
	var mu sync.Mutex
	var examples []string
	var wg sync.WaitGroup
	for who, bt := range []any{bt1, bt2} {
		bt := bt.(memberMaker)
		wg.Go(func() {
			for round := 0; round < 40; round++ {
				m, ok, stop := rejoined(t, bt)
				if stop {
					return
				}
				if !ok {
					continue
				}
				rs, err := m.TryPoll(nil, parts)
				if err != nil {
					continue
				}
				for _, r := range rs {
					ok, err := m.Ack(r.Partition, r.Offset)
					if err != nil || ok {
						continue
					}
					if _, err := m.Heartbeat(); err == nil {
						bad.Add(1)
						mu.Lock()
						examples = append(examples, fmt.Sprintf("proc %d round %d: Ack(%d,%d) refused, Member still current", who, round, r.Partition, r.Offset))
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d acks of the current incarnation refused, e.g. %v", n, examples[:min(3, len(examples))])
	}
}

// Process A rejoins as "a"; right after its group write commits (before
// it cancels its deliveries) process B rejoins as "a" too and polls. A is
// superseded: its Rejoin must fail with ErrFenced and change nothing. In
// particular the deliveries now in flight to B must stay B's to ack.
func TestSupersededRejoinCancelsSuccessor(t *testing.T) {
	b1, b2, _ := twoBackends(t, jetstream.Config{})
	bt1 := topic(t, b1, "t", 2)
	pub(t, bt1, 0, "x")
	pub(t, bt1, 1, "y")
	bt2 := must2(b2.OpenTopic("t")).of(t)
	mA := member(t, bt1, "g", "a")
	must(mA.Join()).of(t)
	mB := member(t, bt2, "g", "a")
	var bRecs []engine.Record
	var bErr error
	var once atomic.Bool
	jetstream.SetLossy(b1, func(key string, written bool) bool {
		if written && key == "group.t.g" && once.CompareAndSwap(false, true) {
			if _, bErr = mB.Rejoin(); bErr == nil {
				bRecs, bErr = mB.TryPoll(nil, 4)
			}
		}
		return false
	})
	_, aErr := mA.Rejoin()
	jetstream.SetLossy(b1, nil)
	if bErr != nil || len(bRecs) != 2 {
		t.Fatalf("B: %v, %v", bRecs, bErr)
	}
	t.Logf("A's Rejoin = %v", aErr)
	d := must(b2.Describe("t")).of(t).Groups[0]
	for _, r := range bRecs {
		ok, err := mB.Ack(r.Partition, r.Offset)
		if err != nil || !ok {
			t.Errorf("B (the current incarnation) Ack(%d,%d) = %v, %v; group before the acks: %+v", r.Partition, r.Offset, ok, err, d.Partitions)
		}
	}
	if !errors.Is(aErr, tributary.ErrFenced) {
		t.Errorf("A's Rejoin = %v, want ErrFenced", aErr)
	}
}

// A zombie (process A's Member of "a") keeps polling and acking while
// process B rejoins as "a" over and over with fresh Members that poll and
// ack too, and records are published meanwhile. Every ack that returns
// true must be the next offset of its partition (exactly once, in order);
// at the end the last incarnation gets the rest; the zombie is fenced;
// counts: no Ack of the current incarnation refused for a record it was
// just delivered and nobody else touched.
func TestZombieVsRejoins(t *testing.T) {
	b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 1000})
	const parts, per = 3, 40
	bt1 := topic(t, b1, "t", parts)
	bt2 := must2(b2.OpenTopic("t")).of(t)
	zombie := member(t, bt1, "g", "a")
	must(zombie.Join()).of(t)

	var mu sync.Mutex
	next := make([]int64, parts)
	acked := func(who string, p int32, off int64) {
		mu.Lock()
		defer mu.Unlock()
		if next[p] != off {
			t.Errorf("%s acked %d/%d, want %d/%d next", who, p, off, p, next[p])
		}
		next[p] = off + 1
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var refused atomic.Int32
	wg.Go(func() { // publisher
		for i := 0; i < per; i++ {
			for p := int32(0); p < parts; p++ {
				if _, err := bt1.TryPublish(p, engineMsg(fmt.Sprint(i))); err != nil {
					t.Error(err)
					return
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	wg.Go(func() { // zombie
		for i := 0; i < 5000 && !stop.Load(); i++ {
			rs, err := zombie.TryPoll(nil, 3)
			if errors.Is(err, tributary.ErrFenced) {
				return
			}
			for _, r := range rs {
				ok, err := zombie.Ack(r.Partition, r.Offset)
				if errors.Is(err, tributary.ErrFenced) {
					return
				}
				if ok {
					acked("zombie", r.Partition, r.Offset)
				}
			}
		}
	})
	var last tributary.BackendMember
	for round := 0; round < 25; round++ {
		m := member(t, bt2, "g", "a")
		if _, err := m.Rejoin(); err != nil {
			t.Fatalf("round %d Rejoin: %v", round, err)
		}
		last = m
		for range 3 {
			rs, err := m.TryPoll(nil, 3)
			if err != nil {
				t.Fatalf("round %d TryPoll: %v", round, err)
			}
			for _, r := range rs {
				ok, err := m.Ack(r.Partition, r.Offset)
				if err != nil {
					t.Fatalf("round %d Ack: %v", round, err)
				}
				if ok {
					acked("current", r.Partition, r.Offset)
				} else {
					refused.Add(1)
				}
			}
		}
	}
	wg.Wait()
	stop.Store(true)
	if _, err := zombie.TryPoll(nil, 1); !errors.Is(err, tributary.ErrFenced) {
		t.Errorf("zombie TryPoll = %v, want ErrFenced", err)
	}
	for range 400 {
		rs, err := last.TryPoll(nil, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			ok, err := last.Ack(r.Partition, r.Offset)
			if err != nil || !ok {
				t.Fatalf("last Ack %d/%d = %v, %v", r.Partition, r.Offset, ok, err)
			}
			acked("last", r.Partition, r.Offset)
		}
		mu.Lock()
		done := next[0] == per && next[1] == per && next[2] == per
		mu.Unlock()
		if done {
			break
		}
	}
	mu.Lock()
	t.Logf("next %v; acks of the then-current incarnation refused: %d", next, refused.Load())
	for p := range parts {
		if next[p] != per {
			t.Errorf("partition %d: %d of %d acked", p, next[p], per)
		}
	}
	mu.Unlock()
	d := must(b2.Describe("t")).of(t).Groups[0]
	for _, p := range d.Partitions {
		if p.Committed != per || p.InFlight {
			t.Errorf("%+v", p)
		}
	}
}

// Rejoins of "a" (process B) race RemoveMember("a"), a third member's
// Join/Leave, AddPartitions and Seek (process A). Afterwards a fresh
// Rejoin of "a" with "c" gone gets every record of every partition,
// each acked once, nothing left in flight.
func TestRejoinVsAdmin(t *testing.T) {
	b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 1000})
	bt1 := topic(t, b1, "t", 2)
	bt2 := must2(b2.OpenTopic("t")).of(t)
	for i := 0; i < 5; i++ {
		pub(t, bt1, 0, fmt.Sprint(i))
		pub(t, bt1, 1, fmt.Sprint(i))
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 30 {
			m, _ := bt2.Member("g", "a")
			if _, err := m.Rejoin(); err != nil && !errors.Is(err, tributary.ErrFenced) {
				t.Errorf("Rejoin: %v", err)
			}
			m.TryPoll(nil, 4)
		}
	})
	wg.Go(func() {
		for i := range 30 {
			switch i % 5 {
			case 0:
				if _, err := b1.RemoveMember("t", "g", "a"); err != nil {
					t.Errorf("RemoveMember: %v", err)
				}
			case 1:
				c, _ := bt1.Member("g", "c")
				c.Join()
				c.TryPoll(nil, 4)
			case 2:
				c, _ := bt1.Member("g", "c")
				c.Leave()
			case 3:
				if i < 20 {
					if _, err := b1.AddPartitions("t", 1); err != nil {
						t.Errorf("AddPartitions: %v", err)
					}
				}
			case 4:
				if _, err := b1.Seek("t", "g", 0, 0); err != nil {
					t.Errorf("Seek: %v", err)
				}
			}
		}
	})
	wg.Wait()
	b1.RemoveMember("t", "g", "c")
	final := member(t, bt2, "g", "a")
	parts := must(final.Rejoin()).of(t)
	d := must(b1.Describe("t")).of(t)
	total := 0
	for _, p := range d.Groups[0].Partitions {
		total += int(p.Lag)
	}
	got := 0
	for range 100 {
		rs, err := final.TryPoll(nil, 8)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			ok, err := final.Ack(r.Partition, r.Offset)
			if err != nil || !ok {
				t.Fatalf("Ack %d/%d = %v, %v", r.Partition, r.Offset, ok, err)
			}
			got++
		}
		if got == total {
			break
		}
	}
	d = must(b1.Describe("t")).of(t)
	for _, p := range d.Groups[0].Partitions {
		if p.Lag != 0 || p.InFlight || p.Owner != "a" {
			t.Errorf("left: %+v", p)
		}
	}
	t.Logf("partitions %v, %d records consumed; members %v", parts, got, d.Groups[0].Members)
}

// A poll of a superseded incarnation that reads the group before a Rejoin
// elsewhere and reserves a record after it is not acked: its Ack (the
// fast path acts on the cursor its poll wrote, reading nothing) is
// refused, and the current incarnation takes the record again. With
// snapshot reads the zombie's poll is paused at its reservation write
// (its group and cursor read at one instant before the Rejoin): the
// Rejoin's stamp of the cursor fails that write. Key by key it is paused
// between its read of the group and its read of the cursor: the
// reservation lands after the Rejoin, and the poll keeps it for no fast
// Ack because the group moved since it read it (Member.groupAt).
func TestZombieReservationNotAcked(t *testing.T) {
	for _, snapshots := range []bool{true, false} {
		name := "snapshots"
		if !snapshots {
			name = "key-by-key"
		}
		t.Run(name, func(t *testing.T) {
			b1, b2, _ := twoBackends(t, jetstream.Config{})
			jetstream.SetSnapshots(b1, snapshots)
			bt1 := topic(t, b1, "t", 1)
			pub(t, bt1, 0, "x")
			bt2, _, err := b2.OpenTopic("t")
			if err != nil {
				t.Fatal(err)
			}
			zombie := member(t, bt1, "g", "a")
			must(zombie.Join()).of(t)
			current := member(t, bt2, "g", "a")
			var fired atomic.Bool
			rejoin := func() {
				if fired.CompareAndSwap(false, true) {
					if _, err := current.Rejoin(); err != nil {
						t.Errorf("Rejoin: %v", err)
					}
				}
			}
			if snapshots {
				jetstream.SetLossy(b1, func(key string, written bool) bool {
					if !written && key == "cursor.t.g.0" {
						rejoin()
					}
					return false
				})
			} else {
				jetstream.SetReading(b1, func(key string) {
					if key == "cursor.t.g.0" {
						rejoin()
					}
				})
			}
			rs, pollErr := zombie.TryPoll(nil, 1)
			jetstream.SetLossy(b1, nil)
			jetstream.SetReading(b1, nil)
			if !fired.Load() {
				t.Fatal("hook: the Rejoin did not run inside the zombie's poll")
			}
			if len(rs) == 1 {
				ok, err := zombie.Ack(0, rs[0].Offset)
				if ok {
					t.Fatalf("the superseded incarnation's Ack of its reservation made after the Rejoin = true (poll error %v)", pollErr)
				}
				if err != nil && !errors.Is(err, tributary.ErrFenced) {
					t.Fatalf("the superseded incarnation's Ack = %v, want false or ErrFenced", err)
				}
			}
			got := poll(t, current, 1)
			if len(got) != 1 || got[0].Off != 0 {
				t.Fatalf("the current incarnation's poll = %v, want record 0", got)
			}
			ok, err := current.Ack(0, 0)
			wantBool(t, "the current incarnation's Ack", ok, err, true)
		})
	}
}
