package engine_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"runtime"
	"sync/atomic"

	"github.com/f91dcac0/tributary/engine"
)

// Tests of the room signal (TopicHandle.Room): a producer blocked on a full
// partition is woken whenever a publish there could succeed again, whatever
// the replay window, while the groups keep acking.

// roomCase is one configuration of the room property: one partition of
// capacity records, a replay window, groups consuming groups, each with one
// member, and records published by one blocking producer.
type roomCase struct {
	capacity, window int32
	groups           int
	records          int
}

func (c roomCase) String() string {
	return fmt.Sprintf("capacity%d-window%d-groups%d-records%d", c.capacity, c.window, c.groups, c.records)
}

// roomCases returns the fixed cases (the shapes of the reported stall:
// window equal to the capacity, 10 and 1000, and one below it) and n random
// ones drawn by rng: capacities 1..16 or 17..1000, windows 0, the capacity
// or uniform in 0..capacity, 1 to 3 groups, 1 to 4 partitions' worth of
// records beyond the capacity.
func roomCases(rng *rand.Rand, n int) []roomCase {
	cases := []roomCase{
		{1, 1, 1, 50}, {10, 10, 1, 3000}, {1000, 1000, 1, 3000}, {1000, 999, 1, 3000},
		{2, 2, 3, 200}, {3, 1, 2, 200}, {5, 0, 3, 200},
	}
	for range n {
		var c roomCase
		if rng.IntN(3) == 0 {
			c.capacity = 17 + rng.Int32N(984)
		} else {
			c.capacity = 1 + rng.Int32N(16)
		}
		switch rng.IntN(3) {
		case 0:
			c.window = c.capacity
		case 1:
			c.window = 0
		default:
			c.window = rng.Int32N(c.capacity + 1)
		}
		c.groups = 1 + rng.IntN(3)
		c.records = int(c.capacity) * (2 + rng.IntN(4))
		cases = append(cases, c)
	}
	return cases
}

// roomRun runs c on a broker made by mk: each group's consumer waits on
// its Ready signals, polls one record and acks it; the producer publishes
// c.records records, waiting on Room (as the typed library's blocking
// Publish does: take the channel, publish again, wait) whenever the
// partition is full. It returns a description of the first failure, or "":
// a wait for room or for a record that lasted bound (a hang: the consumers
// keep acking, so there is always a record to consume or room to come), a
// record out of order (a consumer's wait is bounded by 2 × bound, so that
// a blocked producer reports first), or a final state other than every group committed
// at the log end with the window's records retained. bound is a no-hang
// bound, not a speed figure.
func roomRun(mk func(int32, ...engine.Option) (*engine.Broker, error), c roomCase, bound time.Duration) string {
	b, err := mk(c.capacity, engine.WithReplayWindow(c.window))
	if err != nil {
		return fmt.Sprintf("New: %v", err)
	}
	if _, err := b.Create("t", 1); err != nil {
		return fmt.Sprintf("Create: %v", err)
	}
	th, err := b.Topic("t")
	if err != nil {
		return fmt.Sprintf("Topic: %v", err)
	}
	members := make([]*engine.MemberHandle, c.groups)
	for g := range members {
		if members[g], err = th.Member(fmt.Sprintf("g%d", g), "m"); err != nil {
			return fmt.Sprintf("Member: %v", err)
		}
		if _, err := members[g].Join(); err != nil {
			return fmt.Sprintf("Join: %v", err)
		}
	}
	var (
		mu       sync.Mutex
		failures []string
	)
	stop := make(chan struct{})
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if failures == nil {
			close(stop)
		}
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	// wait blocks on ch and more for at most d: woken when one closed,
	// stopped when the run stopped.
	wait := func(d time.Duration, ch, more <-chan struct{}) (woken, stopped bool) {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-ch:
			return true, false
		case <-more:
			return true, false
		case <-stop:
			return false, true
		case <-timer.C:
			return false, false
		}
	}
	var wg sync.WaitGroup
	for g, m := range members {
		wg.Go(func() {
			buf := make([]engine.Record, 0, 1)
			for next := int64(0); next < int64(c.records); {
				topicReady, groupReady := th.Ready(), m.Ready()
				recs, err := m.AppendPoll(buf[:0], 1)
				if err != nil {
					fail("g%d: poll: %v", g, err)
					return
				}
				if len(recs) == 0 {
					if woken, stopped := wait(2*bound, topicReady, groupReady); stopped {
						return
					} else if !woken {
						fail("g%d: no record at offset %d for %v while the producer publishes", g, next, 2*bound)
						return
					}
					continue
				}
				if r := recs[0]; r.Offset != next || r.Payload != roomPayload(next) {
					fail("g%d: polled offset %d %q, want %d %q", g, r.Offset, r.Payload, next, roomPayload(next))
					return
				}
				if ok, err := m.Ack(0, next); !ok || err != nil {
					fail("g%d: Ack(0, %d) = %v, %v", g, next, ok, err)
					return
				}
				next++
			}
		})
	}
	wg.Go(func() {
		for i := range int64(c.records) {
			for {
				off, err := th.Publish(0, roomPayload(i))
				if err == nil && off < 0 {
					var room <-chan struct{}
					if room, err = th.Room(0); err == nil {
						off, err = th.Publish(0, roomPayload(i))
						if err == nil && off < 0 {
							woken, stopped := wait(bound, room, nil)
							if stopped {
								return
							}
							if !woken {
								d, _ := b.Describe("t")
								fail("publish of record %d waited %v for room while %d groups kept acking: %s", i, bound, c.groups, roomState(d))
								return
							}
							continue
						}
					}
				}
				if err != nil || off != i {
					fail("publish of record %d: offset %d, %v", i, off, err)
					return
				}
				break
			}
		}
	})
	wg.Wait()
	if failures != nil {
		return strings.Join(failures, "; ")
	}
	d, err := b.Describe("t")
	if err != nil {
		return fmt.Sprintf("Describe: %v", err)
	}
	n := int64(c.records)
	if p := d.Partitions[0]; p.LogEndOffset != n || p.LogStartOffset != max(0, n-int64(c.window)) {
		return fmt.Sprintf("after %d records every group acked, want log [%d, %d): %s", n, max(0, n-int64(c.window)), n, roomState(d))
	}
	for _, g := range d.Groups {
		if gp := g.Partitions[0]; gp.Committed != n || gp.InFlight {
			return fmt.Sprintf("group %s: committed %d in flight %v, want %d and none", g.Group, gp.Committed, gp.InFlight, n)
		}
	}
	return ""
}

func roomPayload(off int64) string { return fmt.Sprintf("r%d", off) }

// roomState is partition 0's log and every group's committed offset there.
func roomState(d engine.TopicDescription) string {
	var sb strings.Builder
	p := d.Partitions[0]
	fmt.Fprintf(&sb, "log [%d, %d)", p.LogStartOffset, p.LogEndOffset)
	for _, g := range d.Groups {
		gp := g.Partitions[0]
		fmt.Fprintf(&sb, ", %s committed %d in flight %v", g.Group, gp.Committed, gp.InFlight)
	}
	return sb.String()
}

// roomBound is the no-hang bound of TestBlockedPublishWakesWhileGroupsAck:
// a wait that long for room or for a record is a hang.
const roomBound = 10 * time.Second

// TestBlockedPublishWakesWhileGroupsAck: over random capacities, replay
// windows (0..capacity, the capacity included) and 1 to 3 groups that keep
// polling and acking, a producer that waits on Room whenever the partition
// is full always publishes every record: an ack that makes the oldest
// record fully committed, and so evictable by the window (SPEC rule 21),
// wakes it even when it removes nothing. Each group sees every offset in
// order, and at the end each has committed the log end and the log keeps
// the window's records.
func TestBlockedPublishWakesWhileGroupsAck(t *testing.T) {
	n := 100
	if raceEnabled {
		n = 30
	}
	for _, c := range roomCases(rand.New(rand.NewPCG(20, 1)), n) {
		t.Run(c.String(), func(t *testing.T) {
			if msg := roomRun(engine.New, c, roomBound); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// TestCursorRoomAfterLastAck: a full partition of capacity C holds
// [k, k+C); every one of G groups has k in flight (so all are pinned at the
// least committed offset) and, optionally, a memberless group also holds k
// (or less, with a window). All G acks and the DeleteGroup of the holder
// are released at once while a publisher hammers the partition. A publish
// that began after every ack and the delete returned must succeed; exactly
// one publish succeeds in the round (offset k+C), the log is then
// [k+1, k+C+1), every group committed k+1, nothing in flight.
func TestCursorRoomAfterLastAck(t *testing.T) {
	cfgs := []struct {
		groups           int
		capacity, window int32
		holder           bool
	}{
		{32, 1, 0, false}, {32, 1, 1, false}, {16, 3, 0, true}, {16, 3, 2, true}, {24, 2, 2, false}, {8, 1, 0, true},
	}
	for _, c := range cfgs {
		t.Run(fmt.Sprintf("G%d-C%d-W%d-holder%v", c.groups, c.capacity, c.window, c.holder), func(t *testing.T) {
			cxRoom(t, c.groups, c.capacity, c.window, c.holder)
		})
	}
}

func cxRoom(t *testing.T, G int, capacity, window int32, holder bool) {
	const topic = "room"
	b, names := cxGroupsOnOnePartition(t, topic, "r%02d", G, capacity, window)
	C := int64(capacity)
	for off := range C {
		if got, _ := b.Publish(topic, 0, cxPayload(0, off)); got != off {
			t.Fatalf("initial publish got %d", got)
		}
	}
	rounds := 300
	if raceEnabled {
		rounds = 120
	}
	rng := rand.New(rand.NewPCG(uint64(G), uint64(capacity)))
	for k := int64(0); k < int64(rounds); k++ {
		for g := range G {
			recs, err := b.Poll(topic, names[g], "m", 1)
			if err != nil || len(recs) != 1 || recs[0].Offset != k || recs[0].Payload != cxPayload(0, k) {
				t.Fatalf("round %d: %s polled %+v, %v; want offset %d", k, names[g], recs, err, k)
			}
		}
		useHolder := holder && k%2 == 0
		if useHolder {
			if ok, err := b.CreateGroup(topic, "holder", engine.RoundRobin); !ok || err != nil {
				t.Fatalf("round %d: CreateGroup holder: %v %v", k, ok, err)
			}
		}
		// Some groups ack early, in random order, so the racing ones are a
		// random subset (always at least two, for the compare-and-swap race).
		order := rng.Perm(G)
		early := rng.IntN(G - 1)
		for _, g := range order[:early] {
			if ok, _ := b.Ack(topic, names[g], "m", 0, k); !ok {
				t.Fatalf("round %d: early ack of %s failed", k, names[g])
			}
		}
		if off, _ := b.Publish(topic, 0, "x"); off != -1 {
			t.Fatalf("round %d: publish got %d while %d groups still hold %d", k, off, G-early, k)
		}
		racers := order[early:]
		total := int64(len(racers))
		if useHolder {
			total++
		}
		var done, succeeded atomic.Int64
		succeeded.Store(-1)
		var f hFailures
		gate := make(chan struct{})
		var fs []func()
		for _, g := range racers {
			fs = append(fs, func() {
				<-gate
				ok, err := b.Ack(topic, names[g], "m", 0, k)
				if !ok || err != nil {
					f.fail("round %d: ack of %s: %v %v", k, names[g], ok, err)
				}
				done.Add(1)
			})
		}
		if useHolder {
			fs = append(fs, func() {
				<-gate
				ok, err := b.DeleteGroup(topic, "holder")
				if !ok || err != nil {
					f.fail("round %d: DeleteGroup holder: %v %v", k, ok, err)
				}
				done.Add(1)
			})
		}
		fs = append(fs, func() {
			close(gate)
			for {
				before := done.Load()
				off, err := b.Publish(topic, 0, cxPayload(0, k+C))
				if err != nil {
					f.fail("publish: %v", err)
					return
				}
				if off >= 0 {
					if before < total && off != k+C {
						f.fail("round %d: publish got %d, want %d", k, off, k+C)
					}
					succeeded.Store(off)
					return
				}
				if before == total {
					f.fail("round %d: publish refused (-1) although every group (and the holder's delete) had returned: full partition without room", k)
					return
				}
				runtime.Gosched()
			}
		})
		runAll(t, hDeadline, fs...)
		f.report(t)
		if s := succeeded.Load(); s != k+C {
			t.Fatalf("round %d: racing publish got %d, want %d", k, s, k+C)
		}
		if off, _ := b.Publish(topic, 0, "y"); off != -1 {
			t.Fatalf("round %d: a second publish got %d: the partition of capacity %d took %d records past the least committed offset %d", k, off, C, C+1, k+1)
		}
		d, _ := b.Describe(topic)
		pd := d.Partitions[0]
		if pd.LogStartOffset != k+1 || pd.LogEndOffset != k+C+1 {
			t.Fatalf("round %d: log [%d,%d), want [%d,%d)", k, pd.LogStartOffset, pd.LogEndOffset, k+1, k+C+1)
		}
		if len(d.Groups) != G {
			t.Fatalf("round %d: %d groups", k, len(d.Groups))
		}
		for _, g := range d.Groups {
			if gp := g.Partitions[0]; gp.Committed != k+1 || gp.InFlight || gp.Attempts != 0 {
				t.Fatalf("round %d: %s: %+v", k, g.Group, gp)
			}
		}
		if err := cxCheckDesc(d, C, int64(window)); err != nil {
			t.Fatalf("round %d: %v", k, err)
		}
	}
}
