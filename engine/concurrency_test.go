package engine_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"errors"
	"strings"

	"github.com/f91dcac0/tributary/engine"
)

// Concurrency tests, meant for -race. Goroutines report with assert (never
// require, which must not be called off the test goroutine) and stop early
// through a shared flag. Every group of goroutines runs under runAll, which
// fails with every goroutine's stack instead of hanging: SPEC rule 14 says
// no call waits for a future event and nothing deadlocks, so a hang is a
// bug.

// limit bounds every runAll; the tests take a small fraction of it.
const limit = 45 * time.Second

// scale returns n, or short under -short.
func scale(n, short int) int {
	if testing.Short() {
		return short
	}
	return n
}

// runAll runs fs concurrently and waits for all of them, failing the test
// with all goroutine stacks if they are not done within d.
func runAll(t *testing.T, d time.Duration, fs ...func()) {
	t.Helper()
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Go(f)
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("goroutines not done within %v (deadlock, or a call waiting for a future event):\n%s", d, buf)
	}
}

// stallLimit is how long a test's goroutines may go without progress
// before it fails, instead of spinning until limit.
const stallLimit = 5 * time.Second

// watchdog notices when spinning goroutines stop making progress (a broken
// broker that never hands out a record again).
type watchdog struct{ last atomic.Int64 }

func newWatchdog() *watchdog {
	w := &watchdog{}
	w.tick()
	return w
}

// tick records progress.
func (w *watchdog) tick() { w.last.Store(time.Now().UnixNano()) }

// stalled reports whether there was no progress for stallLimit.
func (w *watchdog) stalled() bool {
	return time.Since(time.Unix(0, w.last.Load())) > stallLimit
}

// tgp names one group's cursor on one partition.
type tgp struct {
	topic, group string
	partition    int32
}

// ackEvent is one successful Ack, with ticks of a shared clock taken just
// before the call and just after it returned.
type ackEvent struct {
	offset    int64
	call, ret int64
}

// ackLog records successful acks, to check that every record was acked by
// every group exactly once and in offset order.
type ackLog struct {
	clock  atomic.Int64
	mu     sync.Mutex
	events map[tgp][]ackEvent
}

func newAckLog() *ackLog { return &ackLog{events: map[tgp][]ackEvent{}} }

// ack calls b.Ack and records it if it succeeded.
func (l *ackLog) ack(b *engine.Broker, topic, group, member string, partition int32, offset int64) (bool, error) {
	call := l.clock.Add(1)
	ok, err := b.Ack(topic, group, member, partition, offset)
	ret := l.clock.Add(1)
	if ok && err == nil {
		l.mu.Lock()
		k := tgp{topic, group, partition}
		l.events[k] = append(l.events[k], ackEvent{offset, call, ret})
		l.mu.Unlock()
	}
	return ok, err
}

// check requires, for every key of ends, that the group's successful acks on
// the partition are offsets 0..end-1, each exactly once, in offset order:
// no ack of an offset returned before the ack of an earlier offset was
// called. It also requires that no other cursor was acked.
func (l *ackLog) check(t *testing.T, ends map[tgp]int64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.events {
		_, ok := ends[k]
		require.True(t, ok, "acks on unexpected cursor %+v", k)
	}
	for k, end := range ends {
		evs := slices.Clone(l.events[k])
		sort.Slice(evs, func(i, j int) bool { return evs[i].offset < evs[j].offset })
		offsets := make([]int64, len(evs))
		for i, e := range evs {
			offsets[i] = e.offset
		}
		want := make([]int64, end)
		for i := range want {
			want[i] = int64(i)
		}
		require.Equal(t, want, offsets, "%+v: acked offsets (each published record acked exactly once)", k)
		maxCall := int64(-1)
		for _, e := range evs {
			require.Greater(t, e.ret, maxCall, "%+v: ack of offset %d returned before an ack of an earlier offset was called", k, e.offset)
			maxCall = max(maxCall, e.call)
		}
	}
}

// drain leaves every possible member of every group (cancelling whatever
// they had in flight), joins one member per group, polls and acks until
// nothing is left, and returns what it was given.
func drain(t *testing.T, b *engine.Broker, acks *ackLog, topic string, groups, members []string) []engine.Record {
	t.Helper()
	var all []engine.Record
	for _, g := range groups {
		for _, m := range members {
			_, err := b.Leave(topic, g, m)
			require.NoError(t, err)
		}
		_, err := b.Join(topic, g, "drainer")
		require.NoError(t, err)
		for {
			recs, err := b.Poll(topic, g, "drainer", engine.MaxPollRecords)
			require.NoError(t, err)
			if len(recs) == 0 {
				break
			}
			all = append(all, recs...)
			for _, r := range recs {
				ok, err := acks.ack(b, topic, g, "drainer", r.Partition, r.Offset)
				require.NoError(t, err)
				require.True(t, ok, "drain ack of %+v", r)
			}
		}
	}
	return all
}

// TestConcurrentPublishOffsets: concurrent publishes to one partition get
// distinct, consecutive offsets 0..n-1, each goroutine's in increasing
// order, and -1 only once the partition is full.
func TestConcurrentPublishOffsets(t *testing.T) {
	const capacity, partitions, workers = 300, 2, 8
	per := scale(150, 100) // 8*per/2 publishes per partition, more than capacity
	b := build(t, capacity, []step{create("t", partitions)})

	type published struct {
		partition int32
		offset    int64
		payload   string
	}
	results := make([][]published, workers)
	var fs []func()
	for w := range workers {
		fs = append(fs, func() {
			for i := range per {
				p := int32(i % partitions)
				payload := fmt.Sprintf("w%d-%d", w, i)
				off, err := b.Publish("t", p, payload)
				if !assert.NoError(t, err) {
					return
				}
				results[w] = append(results[w], published{p, off, payload})
			}
		})
	}
	runAll(t, limit, fs...)

	payloads := [partitions]map[int64]string{{}, {}}
	var fulls [partitions]int
	for w, rs := range results {
		last := [partitions]int64{-1, -1}
		var sawFull [partitions]bool
		for _, r := range rs {
			p := r.partition
			if r.offset == -1 {
				fulls[p]++
				sawFull[p] = true
				continue
			}
			require.False(t, sawFull[p], "worker %d: offset %d on partition %d after -1, though nothing was freed", w, r.offset, p)
			require.Greater(t, r.offset, last[p], "worker %d: offsets of one goroutine increase", w)
			last[p] = r.offset
			_, dup := payloads[p][r.offset]
			require.False(t, dup, "offset %d of partition %d given twice", r.offset, p)
			payloads[p][r.offset] = r.payload
		}
	}
	for p := range partitions {
		require.Len(t, payloads[p], capacity, "partition %d: successes", p)
		for off := range int64(capacity) {
			require.Contains(t, payloads[p], off, "partition %d: offsets are consecutive from 0", p)
		}
		require.Equal(t, workers*per/partitions-capacity, fulls[p], "partition %d: -1 exactly for the publishes beyond capacity", p)
	}

	// Each offset holds the payload its publisher was told it got, and
	// nothing is lost.
	acks := newAckLog()
	for _, r := range drain(t, b, acks, "t", []string{"g"}, nil) {
		require.Equal(t, payloads[r.Partition][r.Offset], r.Payload, "%+v", r)
	}
	ends := map[tgp]int64{}
	for p := range int32(partitions) {
		ends[tgp{"t", "g", p}] = capacity
	}
	acks.check(t, ends)
	for p := range int32(partitions) {
		off, err := b.Publish("t", p, "after")
		require.NoError(t, err)
		require.Equal(t, int64(capacity), off, "partition %d: the next offset follows on", p)
	}
}

// TestConcurrentPollsNeverReserveTwice: many goroutines polling as the same
// member of the same group never hold one delivery at the same time, and
// every record is acked once per group; different groups each reserve every
// record.
func TestConcurrentPollsNeverReserveTwice(t *testing.T) {
	const partitions, pollersPerGroup = 4, 4
	perPartition := scale(250, 80)
	groups := []string{"g", "h"}
	b := build(t, 1000, []step{create("t", partitions)})
	for i := range perPartition {
		for p := range int32(partitions) {
			off, err := b.Publish("t", p, fmt.Sprintf("%d/%d", p, i))
			require.NoError(t, err)
			require.Equal(t, int64(i), off)
		}
	}
	for _, g := range groups {
		play(t, b, []line{{join("t", g, "m"), owns(0, 1, 2, 3)}})
	}

	type key struct {
		group     string
		partition int32
		offset    int64
	}
	var (
		mu       sync.Mutex
		held     = map[key]int{} // delivery → poller holding it
		reserved = map[key]int{}
		acked    = map[key]int{}
		stop     atomic.Bool
	)
	remaining := map[string]*atomic.Int64{}
	for _, g := range groups {
		remaining[g] = new(atomic.Int64)
		remaining[g].Store(int64(partitions * perPartition))
	}
	fail := func(format string, args ...any) {
		stop.Store(true)
		t.Errorf(format, args...)
	}
	progress := newWatchdog()
	var fs []func()
	for gi, g := range groups {
		for i := range pollersPerGroup {
			rng := rand.New(rand.NewPCG(uint64(gi), uint64(i)))
			fs = append(fs, func() {
				for remaining[g].Load() > 0 && !stop.Load() {
					recs, err := b.Poll("t", g, "m", int32(1+rng.IntN(partitions)))
					if err != nil {
						fail("Poll: %v", err)
						return
					}
					if len(recs) == 0 {
						if progress.stalled() {
							fail("group %s: no progress for %v, %d records left", g, stallLimit, remaining[g].Load())
						}
						runtime.Gosched()
						continue
					}
					mu.Lock()
					for _, r := range recs {
						k := key{g, r.Partition, r.Offset}
						if other, ok := held[k]; ok {
							fail("%+v reserved to pollers %d and %d at once", k, other, i)
						}
						if r.Payload != fmt.Sprintf("%d/%d", r.Partition, r.Offset) {
							fail("%+v: wrong payload %q", k, r.Payload)
						}
						held[k] = i
						reserved[k]++
					}
					mu.Unlock()
					for _, r := range recs {
						k := key{g, r.Partition, r.Offset}
						// Release before the call: once it returns another
						// poller may rightly get this record (retry) or the
						// next one (ack).
						mu.Lock()
						delete(held, k)
						mu.Unlock()
						if rng.IntN(4) == 0 {
							if ok, err := b.Retry("t", g, "m", r.Partition, r.Offset); err != nil || !ok {
								fail("Retry(%+v) = %v, %v", k, ok, err)
							}
							continue
						}
						ok, err := b.Ack("t", g, "m", r.Partition, r.Offset)
						if err != nil || !ok {
							fail("Ack(%+v) = %v, %v", k, ok, err)
							continue
						}
						mu.Lock()
						acked[k]++
						mu.Unlock()
						remaining[g].Add(-1)
						progress.tick()
					}
				}
			})
		}
	}
	runAll(t, limit, fs...)
	require.False(t, stop.Load())
	for _, g := range groups {
		for p := range int32(partitions) {
			for off := range int64(perPartition) {
				k := key{g, p, off}
				require.Equal(t, 1, acked[k], "%+v acked", k)
				require.GreaterOrEqual(t, reserved[k], 1, "%+v reserved", k)
			}
		}
	}
	require.Len(t, acked, len(groups)*partitions*perPartition)
}

// TestAckRacesRetry: an Ack and a Retry racing on one delivery: exactly one
// succeeds, and the record is then committed (ack won) or delivered again
// (retry won).
func TestAckRacesRetry(t *testing.T) {
	rounds := scale(2000, 300)
	b := build(t, 4, []step{create("t", 1), join("t", "g", "m")})
	var ackWins, retryWins int
	deadline := time.Now().Add(limit)
	for k := range int64(rounds) {
		require.True(t, time.Now().Before(deadline), "round %d: out of time", k)
		payload := strconv.FormatInt(k, 10)
		play(t, b, []line{
			{publish("t", 0, payload), atOffset(k)},
			{poll("t", "g", "m", 1), delivers(rec("t", 0, k, payload))},
		})
		var (
			wg               sync.WaitGroup
			ackOK, retryOK   bool
			ackErr, retryErr error
		)
		start := make(chan struct{})
		wg.Go(func() { <-start; ackOK, ackErr = b.Ack("t", "g", "m", 0, k) })
		wg.Go(func() { <-start; retryOK, retryErr = b.Retry("t", "g", "m", 0, k) })
		close(start)
		wg.Wait()
		require.NoError(t, ackErr)
		require.NoError(t, retryErr)
		require.True(t, ackOK != retryOK, "round %d: exactly one succeeds: Ack %v, Retry %v", k, ackOK, retryOK)
		if ackOK {
			ackWins++
			play(t, b, []line{{poll("t", "g", "m", 1), delivers()}})
			continue
		}
		retryWins++
		play(t, b, []line{
			{poll("t", "g", "m", 1), delivers(rec("t", 0, k, payload))},
			{ack("t", "g", "m", 0, k), isTrue},
		})
	}
	t.Logf("ack won %d, retry won %d", ackWins, retryWins)
}

// TestPollIsAtomicAcrossPartitions: a poll over several partitions is one
// atomic snapshot (SPEC rule 14, engine doc: two-phase locking), so it never
// skips a record published before one it returns.
//
// A publisher publishes round k = 0, 1, 2, … as records k on partitions 0,
// 1, …, P-1 in that order, each publish after the previous returned. So if
// a poll's snapshot contains record k of partition j, it also contains
// record k of every partition i < j and record k-1 of every partition. A
// single poller owning every partition acks everything it gets before it
// polls again, so at each poll nothing is in flight and it knows each
// committed offset c[i]. Let (k, j) be the greatest (offset, partition) the
// poll returned. Then every partition i the poll did not return must have
// nothing left to give: c[i] > k for i < j, c[i] >= k for i > j.
//
// Why this catches a poll that locks and releases partitions one at a time:
// the poller keeps up with the publisher, so most polls start with every
// partition drained. Such a poll inspects partition 0 (empty), releases it,
// and moves on; if meanwhile the publisher completes round k on partitions
// 0..j, the poll finds record k on partition j but returns nothing for
// partition 0, whose record k was published before. With P = 16 a poll
// spends long enough between its first and last partition that this
// interleaving happens many times per run. A two-phase-locking poll holds
// partition 0 until it is done, so the publisher cannot publish round k on
// partition 0 and then on j within one poll.
func TestPollIsAtomicAcrossPartitions(t *testing.T) {
	const partitions = 16
	rounds := int64(scale(1000, 300)) // <= capacity: the publisher never sees -1
	b := build(t, 1000, []step{create("t", partitions), join("t", "g", "m")})

	var stop atomic.Bool
	var polls, multi, consumed atomic.Int64
	progress := newWatchdog()
	publisher := func() {
		for k := range rounds {
			// Most rounds start once the poller has taken the previous
			// round, so that polls find drained partitions and race with
			// the round being published; every fourth round does not
			// wait, so that polls also find several rounds at once.
			for k%4 != 0 && consumed.Load() < k*partitions && !stop.Load() {
				runtime.Gosched()
			}
			for p := range int32(partitions) {
				if stop.Load() {
					return
				}
				off, err := b.Publish("t", p, strconv.FormatInt(k, 10))
				if err != nil || off != k {
					stop.Store(true)
					t.Errorf("Publish(%d) round %d = %d, %v", p, k, off, err)
					return
				}
			}
		}
	}
	poller := func() {
		var c [partitions]int64 // committed offsets: everything polled is acked before the next poll
		total := rounds * partitions
		for got := int64(0); got < total && !stop.Load(); {
			recs, err := b.Poll("t", "g", "m", engine.MaxPollRecords)
			if err != nil {
				stop.Store(true)
				t.Errorf("Poll: %v", err)
				return
			}
			polls.Add(1)
			if len(recs) == 0 {
				if progress.stalled() {
					stop.Store(true)
					t.Errorf("no record for %v after %d of %d", stallLimit, got, total)
				}
				runtime.Gosched() // let the publisher run, even on one P
				continue
			}
			progress.tick()
			if len(recs) > 1 {
				multi.Add(1)
			}
			var in [partitions]bool
			top := recs[0]
			for _, r := range recs {
				if r.Offset != c[r.Partition] || r.Payload != strconv.FormatInt(r.Offset, 10) {
					stop.Store(true)
					t.Errorf("got %+v, committed offset is %d", r, c[r.Partition])
					return
				}
				in[r.Partition] = true
				if r.Offset > top.Offset || (r.Offset == top.Offset && r.Partition > top.Partition) {
					top = r
				}
			}
			for i := range int32(partitions) {
				need := top.Offset // records of partition i published before top
				if i < top.Partition {
					need = top.Offset + 1
				}
				if !in[i] && c[i] < need {
					stop.Store(true)
					t.Errorf("poll returned %d/%d but skipped partition %d, whose record %d was published before it: not an atomic snapshot; poll = %v",
						top.Partition, top.Offset, i, c[i], recs)
					return
				}
			}
			for _, r := range recs {
				ok, err := b.Ack("t", "g", "m", r.Partition, r.Offset)
				if err != nil || !ok {
					stop.Store(true)
					t.Errorf("Ack(%+v) = %v, %v", r, ok, err)
					return
				}
				c[r.Partition]++
				got++
				consumed.Add(1)
			}
		}
	}
	runAll(t, limit, publisher, poller)
	require.False(t, stop.Load())
	t.Logf("%d polls, %d with several records", polls.Load(), multi.Load())
}

// TestPollRacingJoinSeesOneAssignment: a Poll sees the group's assignment
// either wholly before or wholly after a concurrent Join or Leave (SPEC rule
// 9: the assignment is replaced at one instant; rule 14: the poll takes
// effect at one instant).
//
// Member "a" polls a two-partition topic in a loop and retries whatever it
// gets, so records stay available. The test goroutine repeatedly joins "b"
// (which then owns partition 1, cancelling a's delivery there), polls as b,
// retries and leaves. Once b's Join has returned, a cannot reserve
// partition 1, so b's poll must get partition 1's record. A poll that read
// a's assignment (both partitions) before the Join and reserved partition 1
// after it would leave b with nothing.
func TestPollRacingJoinSeesOneAssignment(t *testing.T) {
	rounds := scale(3000, 500)
	b := build(t, 4, []step{create("t", 2), publish("t", 0, "r0"), publish("t", 1, "r1"), join("t", "g", "a")})
	var stop atomic.Bool
	var polledOne atomic.Int64
	poller := func() {
		for !stop.Load() {
			recs, err := b.Poll("t", "g", "a", engine.MaxPollRecords)
			if err != nil {
				stop.Store(true)
				t.Errorf("Poll: %v", err)
				return
			}
			for _, r := range recs {
				if r.Partition == 1 {
					polledOne.Add(1)
				}
				if _, err := b.Retry("t", "g", "a", r.Partition, r.Offset); err != nil {
					stop.Store(true)
					t.Errorf("Retry: %v", err)
					return
				}
			}
		}
	}
	joiner := func() {
		defer stop.Store(true)
		lastAttempt := int32(0)
		for i := 0; i < rounds && !stop.Load(); i++ {
			parts, err := b.Join("t", "g", "b")
			if err != nil || !slices.Equal(parts, []int32{1}) {
				t.Errorf("round %d: Join(b) = %v, %v", i, parts, err)
				return
			}
			recs, err := b.Poll("t", "g", "b", engine.MaxPollRecords)
			if err != nil || !reflect.DeepEqual(coreRecords(recs), []engine.Record{rec("t", 1, 0, "r1")}) {
				t.Errorf("round %d: b owns partition 1 since its Join returned, but Poll(b) = %v, %v: a poll of a reserved it with an old assignment", i, recs, err)
				return
			}
			// Nothing ever acks partition 1, so every delivery of r1 (to a
			// or to b) counts one more attempt (SPEC rule 16).
			if recs[0].Attempt <= lastAttempt {
				t.Errorf("round %d: b got r1 as attempt %d after attempt %d: attempts went back", i, recs[0].Attempt, lastAttempt)
				return
			}
			lastAttempt = recs[0].Attempt
			if ok, err := b.Retry("t", "g", "b", 1, 0); err != nil || !ok {
				t.Errorf("round %d: Retry(b) = %v, %v", i, ok, err)
				return
			}
			if ok, err := b.Leave("t", "g", "b"); err != nil || !ok {
				t.Errorf("round %d: Leave(b) = %v, %v", i, ok, err)
				return
			}
		}
	}
	runAll(t, limit, poller, joiner)
	t.Logf("a polled partition 1 %d times", polledOne.Load())
}

// workload is the shared state of the random mixed workload.
type workload struct {
	b      *engine.Broker
	acks   *ackLog
	topics map[string]int32 // name → partition count
	names  []string         // topic names, sorted
	groups []string
	member []string

	mu        sync.Mutex
	published map[tgp]map[int64]string // group "" → payload by offset
	delivered []engine.Record
}

func newWorkload(t *testing.T, capacity int32, topics map[string]int32, groups, members []string) *workload {
	w := &workload{
		b:         newBroker(t, capacity),
		acks:      newAckLog(),
		topics:    topics,
		groups:    groups,
		member:    members,
		published: map[tgp]map[int64]string{},
	}
	for name, n := range topics {
		w.names = append(w.names, name)
		play(t, w.b, []line{{create(name, n), isTrue}})
		for p := range n {
			w.published[tgp{name, "", p}] = map[int64]string{}
		}
		// Every group exists before the first publish, so every group must
		// ack every record.
		for _, g := range groups {
			_, err := w.b.Join(name, g, members[0])
			require.NoError(t, err)
		}
	}
	sort.Strings(w.names)
	return w
}

// finish drains every group of every topic and checks that each published
// record was delivered with its payload and acked by every group exactly
// once, in offset order, and that retention then freed every partition.
func (w *workload) finish(t *testing.T) {
	t.Helper()
	for _, name := range w.names {
		recs := drain(t, w.b, w.acks, name, w.groups, w.member)
		w.delivered = append(w.delivered, recs...)
	}
	for _, r := range w.delivered {
		want, ok := w.published[tgp{r.Topic, "", r.Partition}][r.Offset]
		require.True(t, ok, "delivered %+v was never published", r)
		require.Equal(t, want, r.Payload, "%+v", r)
	}
	ends := map[tgp]int64{}
	for _, name := range w.names {
		for p := range w.topics[name] {
			end := int64(len(w.published[tgp{name, "", p}]))
			for _, g := range w.groups {
				ends[tgp{name, g, p}] = end
			}
			off, err := w.b.Publish(name, p, "last")
			require.NoError(t, err)
			require.Equal(t, end, off, "%s/%d: after the drain the partition is empty and the next offset follows on", name, p)
		}
	}
	w.acks.check(t, ends)
}

func (w *workload) recordPublish(topic string, p int32, off int64, payload string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.published[tgp{topic, "", p}]
	if _, dup := m[off]; dup {
		return false
	}
	m[off] = payload
	return true
}

func (w *workload) recordDelivered(recs []engine.Record) {
	w.mu.Lock()
	w.delivered = append(w.delivered, recs...)
	w.mu.Unlock()
}

// TestRandomWorkload: several goroutines run random calls of every method on
// several topics, with groups joining and leaving and records retried or
// left in flight. It must finish in bounded time; then a drain must find
// every published record acked by every group exactly once, in order.
func TestRandomWorkload(t *testing.T) {
	const workers = 4
	opsPerWorker := scale(20000, 2000)
	w := newWorkload(t, 16, map[string]int32{"t1": 4, "t2": 2, "t3": 1},
		[]string{"g1", "g2", "g3"}, []string{"m0", "m1", "m2", "m3"})

	var stop atomic.Bool
	fail := func(format string, args ...any) {
		stop.Store(true)
		t.Errorf(format, args...)
	}
	var fs []func()
	for wi := range workers {
		rng := rand.New(rand.NewPCG(uint64(wi), 99))
		fs = append(fs, func() {
			type held struct {
				r             engine.Record
				group, member string
			}
			var mine []held // deliveries this worker may later settle, as their poller or not
			for i := 0; i < opsPerWorker && !stop.Load(); i++ {
				topic := w.names[rng.IntN(len(w.names))]
				group := w.groups[rng.IntN(len(w.groups))]
				member := w.member[rng.IntN(len(w.member))]
				switch x := rng.IntN(100); {
				case x < 30:
					p := int32(rng.IntN(int(w.topics[topic])))
					payload := fmt.Sprintf("w%d-%d", wi, i)
					off, err := w.b.Publish(topic, p, payload)
					if err != nil {
						fail("Publish: %v", err)
					} else if off >= 0 && !w.recordPublish(topic, p, off, payload) {
						fail("%s/%d: offset %d given twice", topic, p, off)
					}
				case x < 38:
					if _, err := w.b.Join(topic, group, member); err != nil {
						fail("Join: %v", err)
					}
				case x < 43:
					if _, err := w.b.Leave(topic, group, member); err != nil {
						fail("Leave: %v", err)
					}
				case x < 80:
					recs, err := w.b.Poll(topic, group, member, int32(1+rng.IntN(4)))
					if err != nil {
						fail("Poll: %v", err)
						continue
					}
					w.recordDelivered(recs)
					for _, r := range recs {
						switch y := rng.IntN(100); {
						case y < 60:
							if _, err := w.acks.ack(w.b, topic, group, member, r.Partition, r.Offset); err != nil {
								fail("Ack: %v", err)
							}
						case y < 80:
							if _, err := w.b.Retry(topic, group, member, r.Partition, r.Offset); err != nil {
								fail("Retry: %v", err)
							}
						default: // left in flight, or settled later, maybe by another member
							mine = append(mine, held{r, group, member})
						}
					}
				default:
					// Settle an older delivery, as its poller or as
					// someone else; after rebalances many of these are
					// stale and must fail without effect.
					if len(mine) == 0 {
						continue
					}
					j := rng.IntN(len(mine))
					h := mine[j]
					mine = slices.Delete(mine, j, j+1)
					r := h.r
					if rng.IntN(2) == 0 {
						group, member = h.group, h.member
					}
					var err error
					if rng.IntN(2) == 0 {
						_, err = w.acks.ack(w.b, r.Topic, group, member, r.Partition, r.Offset)
					} else {
						_, err = w.b.Retry(r.Topic, group, member, r.Partition, r.Offset)
					}
					if err != nil {
						fail("settle: %v", err)
					}
				}
			}
		})
	}
	runAll(t, limit, fs...)
	require.False(t, stop.Load())
	w.finish(t)
	total := 0
	for _, m := range w.published {
		total += len(m)
	}
	require.Positive(t, total)
	t.Logf("%d records published, %d deliveries", total, len(w.delivered))
}

// TestMembershipChurn: members join and leave while others poll and ack and
// a publisher publishes. Rebalances cancel deliveries, so stale owners' acks
// must fail: no record is ever acked twice by the group, and after a drain
// every record was acked exactly once, in order.
func TestMembershipChurn(t *testing.T) {
	const partitions = 4
	records := scale(10000, 1000)
	members := []string{"m0", "m1", "m2", "m3", "m4", "m5"}
	w := newWorkload(t, 16, map[string]int32{"t": partitions}, []string{"g"}, members)

	var stop, published atomic.Bool
	fail := func(format string, args ...any) {
		stop.Store(true)
		t.Errorf(format, args...)
	}
	progress := newWatchdog()
	publisher := func() {
		defer published.Store(true)
		for i := 0; i < records && !stop.Load(); {
			p := int32(i % partitions)
			payload := strconv.Itoa(i)
			off, err := w.b.Publish("t", p, payload)
			switch {
			case err != nil:
				fail("Publish: %v", err)
			case off < 0: // full: wait for consumers
				if progress.stalled() {
					fail("partition %d full for %v: nothing consumed", p, stallLimit)
				}
				runtime.Gosched()
			default:
				w.recordPublish("t", p, off, payload)
				i++
				progress.tick()
			}
		}
	}
	churner := func(seed uint64) func() {
		return func() {
			rng := rand.New(rand.NewPCG(seed, 7))
			for !published.Load() && !stop.Load() {
				m := members[rng.IntN(len(members))]
				var err error
				if rng.IntN(2) == 0 {
					_, err = w.b.Join("t", "g", m)
				} else {
					_, err = w.b.Leave("t", "g", m)
				}
				if err != nil {
					fail("churn: %v", err)
				}
				runtime.Gosched()
			}
		}
	}
	consumer := func(member string, seed uint64) func() {
		return func() {
			rng := rand.New(rand.NewPCG(seed, 8))
			for !published.Load() && !stop.Load() {
				recs, err := w.b.Poll("t", "g", member, engine.MaxPollRecords)
				if err != nil {
					fail("Poll: %v", err)
					return
				}
				w.recordDelivered(recs)
				if len(recs) == 0 {
					runtime.Gosched()
				}
				for _, r := range recs {
					if rng.IntN(5) == 0 {
						_, err = w.b.Retry("t", "g", member, r.Partition, r.Offset)
					} else {
						_, err = w.acks.ack(w.b, "t", "g", member, r.Partition, r.Offset)
					}
					if err != nil {
						fail("settle: %v", err)
					}
				}
			}
		}
	}
	fs := []func(){publisher, churner(1), churner(2)}
	for i, m := range members {
		fs = append(fs, consumer(m, uint64(i)))
	}
	runAll(t, limit, fs...)
	require.False(t, stop.Load())

	// No record acked twice, even before the drain.
	w.acks.mu.Lock()
	for k, evs := range w.acks.events {
		seen := map[int64]bool{}
		for _, e := range evs {
			require.False(t, seen[e.offset], "%+v: offset %d acked twice", k, e.offset)
			seen[e.offset] = true
		}
	}
	w.acks.mu.Unlock()
	w.finish(t)
}

// hFailures collects failures from goroutines and stops them early.
type hFailures struct {
	mu   sync.Mutex
	msgs []string
	stop atomic.Bool
}

// fail records a failure and stops the goroutines.
func (f *hFailures) fail(format string, args ...any) {
	f.mu.Lock()
	if len(f.msgs) < 20 {
		f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	}
	f.mu.Unlock()
	f.stop.Store(true)
}

// report fails t with every recorded failure.
func (f *hFailures) report(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.msgs) > 0 {
		t.Fatalf("%d failure(s):\n%s", len(f.msgs), strings.Join(f.msgs, "\n"))
	}
}

// hDeadline bounds every runAll of the race tests.
const hDeadline = 30 * time.Second

// hNew builds the brokers of the race tests (exactly_once_test.go, the
// cursor_*_test.go files): a seam through which a test file built with
// the tributary_faults tag can replace it with a constructor calling
// InjectFault, to run them against a deliberately broken engine.
var hNew = engine.New

// TestConcurrentCreateAndUse: many goroutines Create the same topic
// with different partition counts while others call every method on it.
// Exactly one Create returns true; the topic has the winner's partition
// count; a call before the topic exists is ErrInvalidArgument and, once a
// goroutine has seen the topic, it never sees ErrInvalidArgument for it
// again; publishes to partition 0 get consecutive offsets.
func TestConcurrentCreateAndUse(t *testing.T) {
	for round := range 25 {
		b, err := hNew(1000)
		if err != nil {
			t.Fatal(err)
		}
		topic := fmt.Sprint("race", round)
		f := &hFailures{}
		var wins atomic.Int32
		var winner atomic.Int32
		var fs []func()
		for i := range 6 {
			n := int32(1 + (i*11+round)%64)
			fs = append(fs, func() {
				ok, err := b.Create(topic, n)
				if err != nil {
					f.fail("Create(%q,%d): %v", topic, n, err)
				}
				if ok {
					wins.Add(1)
					winner.Store(n)
				}
			})
		}
		var offs sync.Map
		for i := range 4 {
			fs = append(fs, func() {
				seen := false
				member := fmt.Sprint("m", i)
				for j := 0; j < 60; j++ {
					var errs [7]error
					_, errs[0] = b.Publish(topic, 0, "x")
					off, _ := b.Publish(topic, 0, fmt.Sprint(i, ".", j))
					_, errs[1] = b.Join(topic, "g", member)
					var recs []engine.Record
					recs, errs[2] = b.Poll(topic, "g", member, 64)
					for _, r := range recs {
						if _, err := b.Ack(topic, "g", member, r.Partition, r.Offset); err != nil {
							f.fail("Ack of a polled record: %v", err)
						}
					}
					_, errs[3] = b.Committed(topic, "g", 0)
					if errors.Is(errs[3], engine.ErrUnknownGroup) {
						errs[3] = nil
					}
					_, errs[4] = b.Retry(topic, "g", member, 0, 0)
					_, errs[5] = b.Leave(topic, "g", member)
					_, errs[6] = b.LogEndOffset(topic, 0)
					for k, err := range errs {
						switch {
						case err == nil:
							seen = true
						case !errors.Is(err, engine.ErrInvalidArgument):
							f.fail("call %d: %v", k, err)
						case seen:
							f.fail("call %d failed after the topic was seen: %v", k, err)
						}
					}
					if errs[0] == nil && off >= 0 {
						if _, dup := offs.LoadOrStore(off, true); dup {
							f.fail("publish offset %d duplicated", off)
						}
					}
				}
			})
		}
		runAll(t, hDeadline, fs...)
		f.report(t)
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d Creates returned true", round, wins.Load())
		}
		n, err := b.PartitionCount(topic)
		if err != nil || n != winner.Load() {
			t.Fatalf("round %d: partition count %d (%v), the winning Create asked %d", round, n, err, winner.Load())
		}
		end, _ := b.LogEndOffset(topic, 0)
		count := 0
		offs.Range(func(k, _ any) bool {
			if k.(int64) >= end {
				t.Errorf("offset %d beyond log end %d", k, end)
			}
			count++
			return true
		})
		// Every successful publish used one offset; the "x" publishes are
		// not recorded, so count ≤ end, and all offsets are below end.
		if int64(count) > end {
			t.Fatalf("round %d: %d distinct offsets, log end %d", round, count, end)
		}
		if ok, err := b.Create(topic, 3); ok || err != nil {
			t.Fatalf("late duplicate Create: %v %v", ok, err)
		}
	}
}
