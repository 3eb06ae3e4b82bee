package jetstream_test

// Concurrent calls on one server: consumers of two groups acking in order
// (and the order check itself), many goroutines on one member handle, and
// two Backends on one prefix (two processes) racing polls, acks, joins,
// rebalances, admin calls and Seeks. Each offset is acked once per group,
// never delivered after its ack returned, and the state stays within the
// contract.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// Concurrent members, a rebalance midway and a second group: every record
// is acked exactly once per group, in offset order per partition. With a
// replay window (rule 21), publishes evict window records while a third,
// member-less group seeks back into the window and forward again: no
// group's committed offset is ever below the log start, and no partition
// retains more than its capacity.
//
// The order is checked on the calls' intervals, not on the order in which
// the members record their acks: an Ack commits before it returns (its
// retention pass follows the commit), so the partition's next owner may
// poll and ack the next offset before the first Ack has returned.
func TestConcurrentConsumers(t *testing.T) {
	for _, w := range []int32{0, 4} {
		t.Run(fmt.Sprintf("window%d", w), func(t *testing.T) { concurrentConsumers(t, w) })
	}
}

// orderEvent is one delivery (kind 'd') or successful Ack (kind 'a') of
// offset off on partition p to group g: the call began after event begin
// and returned before event end of one counter shared by every member.
type orderEvent struct {
	kind       byte
	g          string
	p          int32
	off        int64
	begin, end int64
}

// checkAckOrder returns the per-partition order violations of events: a
// delivery of offset k (k > 0) whose Poll returned before the successful
// Ack of k − 1 was called (the backend delivered k while k − 1 was not yet
// committed; one delivery in flight per partition and group, SPEC rules 10
// and 11), and an offset acked other than once. The intervals make it
// independent of when the callers took note of their results.
func checkAckOrder(events []orderEvent, groups []string, parts int32, perPart int64) []string {
	type key struct {
		g   string
		p   int32
		off int64
	}
	acks := map[key][]orderEvent{}
	for _, e := range events {
		if e.kind == 'a' {
			k := key{e.g, e.p, e.off}
			acks[k] = append(acks[k], e)
		}
	}
	var bad []string
	for _, g := range groups {
		for p := range parts {
			for off := range perPart {
				if n := len(acks[key{g, p, off}]); n != 1 {
					bad = append(bad, fmt.Sprintf("%s %d/%d acked %d times", g, p, off, n))
				}
			}
		}
	}
	for _, e := range events {
		if e.kind != 'd' || e.off == 0 {
			continue
		}
		for _, a := range acks[key{e.g, e.p, e.off - 1}] {
			if e.end < a.begin {
				bad = append(bad, fmt.Sprintf("%s %d/%d delivered (poll returned at %d) before the Ack of %d was called (at %d)", e.g, e.p, e.off, e.end, e.off-1, a.begin))
			}
		}
	}
	return bad
}

// overlapping counts the successful Acks of events that returned after a
// Poll that delivered the next offset of the same group and partition had
// returned: the cases a check on the order the callers took note of their
// acks would have called a violation.
func overlapping(events []orderEvent) int {
	type key struct {
		g   string
		p   int32
		off int64
	}
	acks := map[key]orderEvent{}
	for _, e := range events {
		if e.kind == 'a' {
			acks[key{e.g, e.p, e.off}] = e
		}
	}
	n := 0
	for _, e := range events {
		if a, ok := acks[key{e.g, e.p, e.off - 1}]; e.kind == 'd' && ok && a.end > e.end {
			n++
		}
	}
	return n
}

// The order check passes a history whose acks were recorded out of order
// (an Ack returning after the next offset's) and fails one where an
// offset was delivered before its predecessor's Ack began, or acked twice.
func TestCheckAckOrder(t *testing.T) {
	groups := []string{"g"}
	ok := []orderEvent{
		{'d', "g", 0, 0, 1, 2},
		{'a', "g", 0, 0, 3, 9}, // commits, then its retention pass is slow
		{'d', "g", 0, 1, 4, 5}, // the next owner polls meanwhile
		{'a', "g", 0, 1, 6, 7}, // and returns first
	}
	if bad := checkAckOrder(ok, groups, 1, 2); len(bad) != 0 {
		t.Fatalf("overlapping acks: %v", bad)
	}
	early := slices.Clone(ok)
	early[2] = orderEvent{'d', "g", 0, 1, 0, 2} // returned before the Ack of 0 began
	if bad := checkAckOrder(early, groups, 1, 2); len(bad) != 1 || !strings.Contains(bad[0], "delivered") {
		t.Fatalf("early delivery: %v", bad)
	}
	twice := append(slices.Clone(ok), orderEvent{'a', "g", 0, 1, 10, 11})
	if bad := checkAckOrder(twice, groups, 1, 2); len(bad) != 1 || !strings.Contains(bad[0], "acked 2 times") {
		t.Fatalf("double ack: %v", bad)
	}
	if bad := checkAckOrder(ok[:2], groups, 1, 2); len(bad) != 1 || !strings.Contains(bad[0], "acked 0 times") {
		t.Fatalf("missing ack: %v", bad)
	}
}

func concurrentConsumers(t *testing.T, window int32) {
	const capacity = 8
	b, _ := start(t, jetstream.Config{Capacity: capacity, ReplayWindow: window})
	const parts, perPart = 3, 30
	bt := topic(t, b, "t", parts)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, g := range []string{"g1", "g2"} {
		ok, err := b.CreateGroup("t", g, engine.Sticky)
		wantBool(t, "CreateGroup", ok, err, true)
	}
	// A bound on a hang, not on speed: the run fails when no Ack
	// succeeds for stallBound (a loaded machine makes every call slower,
	// and the test then takes longer, but acks keep coming).
	const stallBound = 30 * time.Second
	var lastAck atomic.Int64 // time.Now().UnixNano() of the last successful Ack
	lastAck.Store(time.Now().UnixNano())
	stalled := make(chan time.Duration, 1)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if d := time.Since(time.Unix(0, lastAck.Load())); d > stallBound {
					stalled <- d
					cancel()
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the producer: waits for room
		defer wg.Done()
		for i := range perPart {
			for p := range int32(parts) {
				off, err := bt.Publish(ctx, nil, p, engine.Message{Payload: "x"})
				if err != nil || off != int64(i) {
					t.Errorf("Publish(%d) = %d, %v", p, off, err)
					return
				}
			}
		}
	}()
	var clock atomic.Int64 // orders the calls' beginnings and ends
	var mu sync.Mutex
	var events []orderEvent // guarded by mu
	total := 0              // successful acks; guarded by mu
	allDone := make(chan struct{})
	consume := func(g, name string, quitAfter int) {
		defer wg.Done()
		m := member(t, bt, g, name)
		if _, err := m.Join(); err != nil {
			t.Error(err)
			return
		}
		n := 0
		for {
			select {
			case <-allDone:
				return
			default:
			}
			if quitAfter > 0 && n >= quitAfter {
				if _, err := m.Leave(); err != nil {
					t.Error(err)
				}
				return
			}
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			pbegin := clock.Add(1)
			rs, err := m.Poll(pctx, nil, nil, 4)
			pend := clock.Add(1)
			pcancel()
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, r := range rs {
				events = append(events, orderEvent{'d', g, r.Partition, r.Offset, pbegin, pend})
			}
			mu.Unlock()
			for _, r := range rs {
				abegin := clock.Add(1)
				ok, err := m.Ack(r.Partition, r.Offset)
				aend := clock.Add(1)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue // cancelled by a rebalance: redelivered to the new owner
				}
				n++
				mu.Lock()
				events = append(events, orderEvent{'a', g, r.Partition, r.Offset, abegin, aend})
				lastAck.Store(time.Now().UnixNano())
				total++
				if total == 2*parts*perPart {
					close(allDone)
				}
				mu.Unlock()
			}
		}
	}
	if window > 0 {
		ok, err := b.CreateGroup("t", "g3", engine.RoundRobin)
		wantBool(t, "CreateGroup", ok, err, true)
		wg.Add(1)
		go func() { // the seeker: back to the log start, check, then forward to the log end
			defer wg.Done()
			seeks := 0
			defer func() { t.Logf("%d seeks into the window", seeks) }()
			for i := 0; ; i++ {
				select {
				case <-allDone:
					return
				case <-ctx.Done():
					return
				default:
				}
				p := int32(i % parts)
				d, err := b.Describe("t")
				if err != nil {
					t.Error(err)
					return
				}
				for _, pd := range d.Partitions {
					if n := pd.LogEndOffset - pd.LogStartOffset; n > capacity {
						t.Errorf("partition %d retains %d records", pd.Partition, n)
					}
					for _, g := range d.Groups {
						if c := g.Partitions[pd.Partition].Committed; c < pd.LogStartOffset {
							t.Errorf("group %s committed %d on %d, below the log start %d", g.Group, c, pd.Partition, pd.LogStartOffset)
						}
					}
				}
				ok, err := b.Seek("t", "g3", p, d.Partitions[p].LogStartOffset)
				switch {
				case errors.Is(err, engine.ErrOffsetOutOfRange): // a publish evicted it meanwhile
				case err != nil || !ok:
					t.Errorf("Seek back: %v, %v", ok, err)
					return
				default:
					seeks++
				}
				end := int64(perPart)
				if d, err = b.Describe("t"); err == nil {
					end = d.Partitions[p].LogEndOffset
				}
				if ok, err := b.Seek("t", "g3", p, end); err != nil || !ok {
					t.Errorf("Seek forward to %d: %v, %v", end, ok, err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Add(4)
	go consume("g1", "a", 0)
	go consume("g1", "b", 15)
	go consume("g1", "c", 0)
	go consume("g2", "a", 0)
	select {
	case <-allDone:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if total != 2*parts*perPart {
		var why string
		select {
		case d := <-stalled:
			why = fmt.Sprintf(" (no Ack for %v)", d.Round(time.Second))
		default:
		}
		d, err := b.Describe("t")
		t.Fatalf("acked %d records, want %d%s; topic now: %+v (%v)", total, 2*parts*perPart, why, d, err)
	}
	for _, v := range checkAckOrder(events, []string{"g1", "g2"}, parts, perPart) {
		t.Error(v)
	}
	t.Logf("%d acks returned after the next offset's delivery", overlapping(events))
}

// Many goroutines on one member handle, polling, acking and retrying the
// same records: each offset is acked true exactly once and never
// delivered after its ack returned; an acked offset cannot be retried.
func TestSameMemberRace(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage, Capacity: 100})
	bt := topic(t, b, "t", 2)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	const per = 30
	for i := range per {
		pub(t, bt, 0, fmt.Sprint(i))
		pub(t, bt, 1, fmt.Sprint(i))
	}
	var mu sync.Mutex
	acks := map[[2]int64]int{}
	ackedAt := map[[2]int64]time.Time{}
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var done atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < 2*per && ctx.Err() == nil {
				begin := time.Now()
				rs, err := m.TryPoll(nil, 2)
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range rs {
					k := [2]int64{int64(r.Partition), r.Offset}
					mu.Lock()
					if at, ok := ackedAt[k]; ok && at.Before(begin) {
						t.Errorf("%v delivered again (attempt %d) by a poll that began after its ack returned", k, r.Attempt)
					}
					mu.Unlock()
					if w%3 == 0 {
						if ok, err := m.Retry(r.Partition, r.Offset); err != nil {
							t.Error(err)
							return
						} else if ok {
							continue
						}
					}
					for range 2 { // the second Ack must be false
						ok, err := m.Ack(r.Partition, r.Offset)
						if err != nil {
							t.Error(err)
							return
						}
						if ok {
							mu.Lock()
							acks[k]++
							if acks[k] > 1 {
								t.Errorf("%v acked twice", k)
							}
							ackedAt[k] = time.Now()
							mu.Unlock()
							done.Add(1)
						}
					}
					// Retry of what was just acked: false.
					mu.Lock()
					_, acked := ackedAt[k]
					mu.Unlock()
					if acked {
						if ok, err := m.Retry(r.Partition, r.Offset); ok || err != nil {
							t.Errorf("Retry of acked %v = %v, %v", k, ok, err)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if done.Load() != 2*per {
		t.Fatalf("acked %d of %d", done.Load(), 2*per)
	}
	for p := range 2 {
		for off := range per {
			if n := acks[[2]int64{int64(p), int64(off)}]; n != 1 {
				t.Errorf("%d/%d acked %d times", p, off, n)
			}
		}
	}
	wantRecs(t, poll(t, m, 64))
	d := must(b.Describe("t")).of(t)
	for _, pd := range d.Partitions {
		if pd.LogStartOffset != per || pd.LogEndOffset != per {
			t.Errorf("partition %+v, want all removed", pd)
		}
	}
}

// raceEvent is one poll or ack of the two-backend race, for the checks after.
type raceEvent struct {
	member     string
	start, end time.Time
	ack, ok    bool
}

// Two Backends on one server and prefix act as two processes: consumers of
// group g1 on both poll and ack while members join and leave, the assignor
// changes, partitions are added, other groups are created, deleted and
// sought. Required: each (partition, offset) is acked by g1 exactly once;
// no record is delivered by a poll that began after its ack returned; a
// member's ack succeeds only if no other member was handed the same record
// between that member's poll and its ack; per member and partition the
// polled offsets never go down; Describe never shows a cursor below the
// log start or more than Capacity records.
func TestTwoBackends(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	const capacity = 16
	open := func() *jetstream.Backend {
		b, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: capacity, Storage: jetstream.MemoryStorage, RequestTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b1, b2 := open(), open()
	bt1 := topic(t, b1, "t", 3)
	bt2, _, err := b2.OpenTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	ok, err := b2.CreateGroup("t", "g1", engine.Sticky)
	wantBool(t, "CreateGroup g1", ok, err, true)
	const per = 40
	total := 4 * per // 3 partitions, then a fourth
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	var (
		mu     sync.Mutex
		events = map[[2]int64][]raceEvent{}
		acked  atomic.Int64
		last   = map[string]int64{} // member/p → last polled offset
	)
	allDone := make(chan struct{})
	var once sync.Once
	stopped := func() bool {
		select {
		case <-allDone:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	var wg sync.WaitGroup
	consume := func(bt tributary.BackendTopic, name string, churn bool) {
		defer wg.Done()
		m := member(t, bt, "g1", name)
		joined := false
		for i := 0; !stopped(); i++ {
			if churn && i%10 == 0 || !joined {
				var err error
				if joined && churn {
					_, err = m.Leave()
					joined = false
				} else {
					_, err = m.Join()
					joined = err == nil
				}
				if err != nil && !errors.Is(err, jetstream.ErrContention) {
					t.Errorf("%s membership: %v", name, err)
					return
				}
				continue
			}
			begin := time.Now()
			rs, err := m.TryPoll(nil, 4)
			end := time.Now()
			if err != nil {
				t.Errorf("%s poll: %v", name, err)
				return
			}
			if len(rs) == 0 {
				time.Sleep(2 * time.Millisecond)
			}
			mu.Lock()
			for _, r := range rs {
				k := [2]int64{int64(r.Partition), r.Offset}
				events[k] = append(events[k], raceEvent{member: name, start: begin, end: end})
				lk := fmt.Sprintf("%s/%d", name, r.Partition)
				if l, ok := last[lk]; ok && r.Offset < l {
					t.Errorf("%s polled %v after offset %d", name, k, l)
				}
				last[lk] = r.Offset
			}
			mu.Unlock()
			for j, r := range rs {
				if i%7 == 0 && j == 0 {
					if _, err := m.Retry(r.Partition, r.Offset); err != nil {
						t.Errorf("%s retry: %v", name, err)
						return
					}
					continue
				}
				begin := time.Now()
				ok, err := m.Ack(r.Partition, r.Offset)
				end := time.Now()
				if err != nil {
					t.Errorf("%s ack: %v", name, err)
					return
				}
				k := [2]int64{int64(r.Partition), r.Offset}
				mu.Lock()
				events[k] = append(events[k], raceEvent{member: name, start: begin, end: end, ack: true, ok: ok})
				mu.Unlock()
				if ok && acked.Add(1) == int64(total) {
					once.Do(func() { close(allDone) })
				}
			}
		}
		if joined {
			m.Leave() //nolint:errcheck
		}
	}
	wg.Add(5)
	go consume(bt1, "a", false)
	go consume(bt2, "b", false)
	go consume(bt1, "c", true)
	go consume(bt2, "d", true)
	go consume(bt2, "e", true)
	wg.Add(1)
	go func() { // producer on b1, then partition 3 after AddPartitions
		defer wg.Done()
		for i := range per {
			for p := range int32(3) {
				if _, err := bt1.Publish(ctx, nil, p, engine.Message{Payload: fmt.Sprint(i)}); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
			}
			if i == per/4 {
				if n, err := b2.AddPartitions("t", 1); err != nil || n != 4 {
					t.Errorf("AddPartitions = %d, %v", n, err)
					return
				}
			}
		}
		for i := range per {
			if _, err := bt2.Publish(ctx, nil, 3, engine.Message{Payload: fmt.Sprint(i)}); err != nil {
				t.Errorf("publish 3: %v", err)
				return
			}
		}
	}()
	wg.Add(1)
	go func() { // admin churn from both backends
		defer wg.Done()
		as := []engine.Assignor{engine.RoundRobin, engine.Range, engine.Sticky}
		bs := []*jetstream.Backend{b1, b2}
		for i := 0; !stopped(); i++ {
			b := bs[i%2]
			if _, err := b.SetAssignor("t", "g1", as[i%3]); err != nil && !errors.Is(err, jetstream.ErrContention) {
				t.Errorf("SetAssignor: %v", err)
				return
			}
			if _, err := b.CreateGroup("t", "gx", engine.Range); err != nil {
				t.Errorf("CreateGroup gx: %v", err)
				return
			}
			if _, err := bs[(i+1)%2].DeleteGroup("t", "gx"); err != nil {
				t.Errorf("DeleteGroup gx: %v", err)
				return
			}
			// gs: sought to its log end (and sometimes start) on every partition.
			d, err := b.Describe("t")
			if err != nil {
				t.Errorf("Describe: %v", err)
				return
			}
			for _, pd := range d.Partitions {
				if pd.LogEndOffset-pd.LogStartOffset > capacity || pd.LogStartOffset > pd.LogEndOffset {
					t.Errorf("partition %+v", pd)
				}
				for _, g := range d.Groups {
					if gp := g.Partitions[pd.Partition]; gp.Committed < pd.LogStartOffset || gp.Committed > pd.LogEndOffset || gp.Lag < 0 {
						t.Errorf("group %s partition %+v outside %+v", g.Group, gp, pd)
					}
				}
				off := pd.LogEndOffset
				if i%5 == 0 {
					off = pd.LogStartOffset
				}
				if _, err := b.Seek("t", "gs", pd.Partition, off); err != nil && !errors.Is(err, engine.ErrOffsetOutOfRange) {
					t.Errorf("Seek gs: %v", err)
					return
				}
			}
			if i == 3 {
				if _, err := bs[1].CreateGroup("t", "gs", engine.RoundRobin); err != nil {
					t.Errorf("CreateGroup gs: %v", err)
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	select {
	case <-allDone:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	if n := acked.Load(); n != int64(total) {
		t.Fatalf("acked %d of %d", n, total)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, evs := range events {
		nok := 0
		for _, e := range evs {
			if !e.ack || !e.ok {
				continue
			}
			nok++
			// The poll that handed e.member this record: its latest poll
			// that ended before the ack began.
			var pollEnd time.Time
			for _, d := range evs {
				if !d.ack && d.member == e.member && d.end.Before(e.start) && d.end.After(pollEnd) {
					pollEnd = d.end
				}
			}
			for _, d := range evs {
				if d.ack {
					continue
				}
				if d.start.After(e.end) {
					t.Errorf("%v delivered to %s by a poll begun after %s's ack returned", k, d.member, e.member)
				}
				if d.member != e.member && d.start.After(pollEnd) && d.end.Before(e.start) {
					t.Errorf("%v delivered to %s while %s held it, and %s's ack then succeeded", k, d.member, e.member, e.member)
				}
			}
		}
		if nok != 1 {
			t.Errorf("%v acked %d times", k, nok)
		}
	}
	if len(events) != total {
		t.Errorf("%d records seen, want %d", len(events), total)
	}
}

// Admin races between two Backends: exactly one of many concurrent
// CreateTopic / CreateGroup wins; concurrent AddPartitions each get a
// distinct new total; DeleteGroup racing Join never leaves a group that
// is deleted but has a member, or a member whose cursors are missing.
func TestConcurrentAdmin(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	var bs []*jetstream.Backend
	for range 2 {
		b, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 10, Storage: jetstream.MemoryStorage})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		bs = append(bs, b)
	}
	const n = 8
	run := func(f func(i int)) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); f(i) }()
		}
		wg.Wait()
	}
	var wins atomic.Int32
	run(func(i int) {
		ok, err := bs[i%2].CreateTopic("r", 2, fmt.Sprint("type", i))
		if err != nil {
			t.Errorf("CreateTopic: %v", err)
		}
		if ok {
			wins.Add(1)
		}
	})
	if wins.Load() != 1 {
		t.Fatalf("%d CreateTopic calls won", wins.Load())
	}
	wins.Store(0)
	as := []engine.Assignor{engine.RoundRobin, engine.Range, engine.Sticky}
	run(func(i int) {
		ok, err := bs[i%2].CreateGroup("r", "g", as[i%3])
		if err != nil {
			t.Errorf("CreateGroup: %v", err)
		}
		if ok {
			wins.Add(1)
		}
	})
	if wins.Load() != 1 {
		t.Fatalf("%d CreateGroup calls won", wins.Load())
	}
	var mu sync.Mutex
	totals := map[int32]bool{}
	run(func(i int) {
		got, err := bs[i%2].AddPartitions("r", 1)
		if err != nil {
			t.Errorf("AddPartitions: %v", err)
			return
		}
		mu.Lock()
		if totals[got] {
			t.Errorf("two AddPartitions returned %d", got)
		}
		totals[got] = true
		mu.Unlock()
	})
	d := must(bs[0].Describe("r")).of(t)
	if len(d.Partitions) != 2+n || len(d.Groups[0].Partitions) != 2+n {
		t.Fatalf("after %d AddPartitions: %d partitions, group sees %d", n, len(d.Partitions), len(d.Groups[0].Partitions))
	}
	// A handle opened before another Backend's AddPartitions publishes to
	// and acks on the new partitions.
	old, _, err := bs[1].OpenTopic("r")
	if err != nil {
		t.Fatal(err)
	}
	must(bs[0].AddPartitions("r", 1)).of(t)
	if off := pub(t, old, int32(2+n), "new"); off != 0 {
		t.Fatalf("publish to the new partition via an old handle: %d", off)
	}
	if p := old.Partitions(); p != 3+n && p != 2+n {
		t.Fatalf("Partitions = %d", p)
	}
	// Join, Leave and DeleteGroup of "h" racing from both backends.
	for round := range 5 {
		run(func(i int) {
			bt, _, err := bs[i%2].OpenTopic("r")
			if err != nil {
				t.Error(err)
				return
			}
			m := member(t, bt, "h", fmt.Sprint("m", i%3))
			switch i % 4 {
			case 0, 1:
				if _, err := m.Join(); err != nil && !errors.Is(err, jetstream.ErrContention) {
					t.Errorf("Join: %v", err)
				}
			case 2:
				if _, err := m.Leave(); err != nil && !errors.Is(err, jetstream.ErrContention) {
					t.Errorf("Leave: %v", err)
				}
			case 3:
				if _, err := bs[i%2].DeleteGroup("r", "h"); err != nil && !errors.Is(err, engine.ErrGroupNotEmpty) {
					t.Errorf("DeleteGroup: %v", err)
				}
			}
		})
		d := must(bs[round%2].Describe("r")).of(t)
		for _, g := range d.Groups {
			if g.Group != "h" {
				continue
			}
			owners := map[string]int{}
			for _, gp := range g.Partitions {
				if len(g.Members) > 0 && !slices.Contains(g.Members, gp.Owner) {
					t.Errorf("round %d: partition %d owned by %q, not a member of %v", round, gp.Partition, gp.Owner, g.Members)
				}
				owners[gp.Owner]++
			}
		}
		// Every member of h can poll and ack what it owns.
		bt, _, _ := bs[0].OpenTopic("r")
		for i := range 3 {
			m := member(t, bt, "h", fmt.Sprint("m", i))
			for _, p := range m.Assignment() {
				off := pub(t, bt, p, "z")
				rs := must(m.TryPollPartition(nil, p)).of(t)
				if len(rs) != 1 || rs[0].Offset > off {
					t.Errorf("round %d: m%d polled %v on %d, published %d", round, i, recs(rs), p, off)
					continue
				}
				ok, err := m.Ack(p, rs[0].Offset)
				wantBool(t, "Ack", ok, err, true)
			}
		}
	}
}

// Seek racing a consumer from another Backend, with targets that never go
// down: once Seek(target) returned true, no poll begun afterwards delivers
// an offset below target; a Seek's errors are only ErrOffsetOutOfRange.
func TestSeekRace(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	var bs []*jetstream.Backend
	for range 2 {
		b, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 8, ReplayWindow: 3, Storage: jetstream.MemoryStorage})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		bs = append(bs, b)
	}
	bt := topic(t, bs[0], "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var floor atomic.Int64 // the highest target a Seek returned true for
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // producer
		defer wg.Done()
		for ctx.Err() == nil {
			pctx, pc := context.WithTimeout(ctx, 200*time.Millisecond)
			bt.Publish(pctx, nil, 0, engine.Message{Payload: "x"}) //nolint:errcheck
			pc()
		}
	}()
	seeks := 0
	go func() { // seeker on the other backend
		defer wg.Done()
		target := int64(0)
		for ctx.Err() == nil {
			d, err := bs[1].Describe("t")
			if err != nil {
				t.Error(err)
				return
			}
			target = max(target, d.Partitions[0].LogEndOffset-1)
			ok, err := bs[1].Seek("t", "g", 0, target)
			switch {
			case errors.Is(err, engine.ErrOffsetOutOfRange):
			case err != nil || !ok:
				t.Errorf("Seek(%d) = %v, %v", target, ok, err)
				return
			default:
				seeks++
				if target > floor.Load() {
					floor.Store(target)
				}
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	go func() { // consumer
		defer wg.Done()
		for ctx.Err() == nil {
			f := floor.Load()
			rs, err := m.TryPoll(nil, 1)
			if err != nil {
				t.Error(err)
				return
			}
			for _, r := range rs {
				if r.Offset < f {
					t.Errorf("polled offset %d after Seek(%d) returned", r.Offset, f)
				}
				if _, err := m.Ack(0, r.Offset); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	wg.Wait()
	t.Logf("%d seeks", seeks)
	d := must(bs[0].Describe("t")).of(t)
	pd, gp := d.Partitions[0], d.Groups[0].Partitions[0]
	if gp.Committed < pd.LogStartOffset || pd.LogEndOffset-pd.LogStartOffset > 8 {
		t.Errorf("end state %+v %+v", pd, gp)
	}
}
