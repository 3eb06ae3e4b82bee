package bench

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/f91dcac0/tributary/engine"
)

// Scenario is one workload, written once against Subject.
type Scenario struct {
	// Name is slash-separated; its first element is the family that one
	// Benchmark function of this package runs ("Parallel/groups=3").
	Name string
	// Unit is what the scenario counts: "record" (a published record,
	// delivered to and acknowledged by each group), "delivery" (one poll and
	// ack of one record by one group), "rebalance" (one Join or Leave) or
	// "call" (one broker call of any kind).
	Unit string
	// Parallel is true for scenarios that run b.RunParallel with one
	// goroutine per P, whose throughput can grow with GOMAXPROCS.
	Parallel bool
	// Subjects names the kinds the scenario is meaningful for, the engine
	// first.
	Subjects []string
	// Doc says what one op does, in a line.
	Doc string
	// Run runs the scenario on s. It calls b.ReportAllocs and Report, and
	// fails b if s misbehaves. (Given a *RawChan, RoundTrip and Batch64 time
	// the bare channel instead.)
	Run func(b *testing.B, s Subject)
}

// Family returns the first element of the scenario's name.
func (sc Scenario) Family() string {
	f, _, _ := strings.Cut(sc.Name, "/")
	return f
}

// Metric names the scenario reports through Report, in its Unit: units per
// op, nanoseconds per unit and units per second ("records/op", "ns/record",
// "records/s").
func (sc Scenario) Metric() (perOp, nsPer, perSec string) {
	return metricNames(sc.Unit)
}

func metricNames(unit string) (perOp, nsPer, perSec string) {
	return Plural(unit) + "/op", "ns/" + unit, Plural(unit) + "/s"
}

// Plural returns the plural of a Scenario unit: "records", "deliveries".
func Plural(unit string) string {
	if s, ok := strings.CutSuffix(unit, "y"); ok {
		return s + "ies"
	}
	return unit + "s"
}

// Report records units (the total counted over all b.N ops, in unit) as
// three metrics from b.Elapsed: units per op, nanoseconds per unit and units
// per second (see Scenario.Metric). Call it once, after the timed loop.
func Report(b *testing.B, unit string, units int64) {
	if units <= 0 || b.N <= 0 {
		return
	}
	perOp, nsPer, perSec := metricNames(unit)
	ns := float64(b.Elapsed().Nanoseconds())
	b.ReportMetric(float64(units)/float64(b.N), perOp)
	b.ReportMetric(ns/float64(units), nsPer)
	b.ReportMetric(float64(units)/ns*1e9, perSec)
}

// Benchmark parameters shared by the scenarios.
const (
	// Capacity is every subject's capacity per partition, in records.
	Capacity = 1000
	// BatchPartitions is the partition count, and so the poll size, of
	// Batch64: a member holds at most one in-flight record per partition.
	BatchPartitions = 64
	// ContendedMembers is the member (and partition) count of
	// Contended/members=64.
	ContendedMembers = 64
	// ContendedGroups is the group count of Contended/groups=16.
	ContendedGroups = 16
	// MixedPartitions and MixedGroups shape the Mixed topic.
	MixedPartitions = 16
	MixedGroups     = 2
	// Payload is the payload every scenario publishes.
	Payload = "payload-0123456789abcdef"
)

// topicName is the one topic every scenario uses.
const topicName = "t"

// Member and group identifiers, precomputed so that no scenario formats
// strings in its timed loop. Zero-padding makes byte order numeric order, so
// with n members of a group on n partitions, member i owns partition i.
var (
	memberNames [engine.MaxPartitionCount]string
	groupNames  [engine.MaxPartitionCount]string
	guestNames  [engine.MaxPartitionCount]string
)

func init() {
	for i := range memberNames {
		memberNames[i] = fmt.Sprintf("m%02d", i)
		groupNames[i] = fmt.Sprintf("g%02d", i)
		guestNames[i] = fmt.Sprintf("v%02d", i)
	}
}

// Scenarios returns every scenario, in the order tables list them.
func Scenarios() []Scenario {
	all := []string{KindEngine, KindEnginePoll, KindEngineRW, KindNaive, KindChan, KindChanRaw}
	engNaiveChan := []string{KindEngine, KindEngineRW, KindNaive, KindChan}
	engNaive := []string{KindEngine, KindEngineRW, KindNaive}
	s := []Scenario{
		{Name: "Publish", Unit: "record", Subjects: []string{KindEngine, KindNaive, KindChan},
			Doc: "one publish to one partition; a consumer empties it outside the timed region every 1000",
			Run: runPublish},
		{Name: "RoundTrip", Unit: "record", Subjects: all,
			Doc: "one goroutine: publish, poll(1), ack",
			Run: runRoundTrip},
		{Name: "RoundTrip/handles", Unit: "record", Subjects: []string{KindEngine, KindChanRaw},
			Doc: "one goroutine: publish, poll(1), ack through bound handles (engine.TopicHandle, MemberHandle): no name lookups",
			Run: runRoundTripHandles},
		{Name: "Batch64", Unit: "record", Subjects: all,
			Doc: "one goroutine: publish one record to each of 64 partitions, one poll(64), 64 acks",
			Run: runBatch64},
	}
	for _, groups := range []int{1, 3} {
		s = append(s, Scenario{
			Name: fmt.Sprintf("Parallel/groups=%d", groups), Unit: "record", Parallel: true, Subjects: engNaiveChan,
			Doc: fmt.Sprintf("goroutine i publishes to partition i, then polls(1) and acks as member i in each of %d group(s)", groups),
			Run: func(b *testing.B, s Subject) { runParallel(b, s, groups) },
		})
	}
	s = append(s, Scenario{
		Name: fmt.Sprintf("HotTopic/partitions=%d", HotTopicPartitions), Unit: "record", Parallel: true, Subjects: engNaive,
		Doc: fmt.Sprintf("one topic of %d partitions, one group of %d members, one goroutine per partition whatever GOMAXPROCS: publish, poll(1), ack", HotTopicPartitions, HotTopicPartitions),
		Run: runHotTopic,
	})
	s = append(s,
		Scenario{Name: fmt.Sprintf("Contended/members=%d", ContendedMembers), Unit: "record", Parallel: true, Subjects: engNaive,
			Doc: fmt.Sprintf("one group of %d members on %d partitions, the members dealt out to the goroutines: publish, poll(1), ack", ContendedMembers, ContendedMembers),
			Run: runContendedMembers},
		Scenario{Name: fmt.Sprintf("Contended/groups=%d", ContendedGroups), Unit: "delivery", Parallel: true, Subjects: engNaive,
			Doc: fmt.Sprintf("%d groups on one partition, dealt out to the goroutines: poll(1) and ack, publishing when the poll is empty", ContendedGroups),
			Run: runContendedGroups},
	)
	for _, members := range []int{1, 8, 64} {
		for _, partitions := range []int{1, 8, 64} {
			s = append(s, Scenario{
				Name: fmt.Sprintf("Rebalance/members=%d/partitions=%d", members, partitions), Unit: "rebalance", Subjects: engNaive,
				Doc: fmt.Sprintf("a %d-member group on %d partition(s): one more member joins, then leaves", members-1, partitions),
				Run: func(b *testing.B, s Subject) { runRebalance(b, s, members, partitions) },
			})
		}
	}
	s = append(s, Scenario{Name: "Mixed", Unit: "call", Parallel: true, Subjects: engNaive,
		Doc: fmt.Sprintf("%d partitions, %d groups, one member per goroutine in each: 49.5%% publish, 49.5%% poll(8) then ack (or 1 in 10 retry) each record, 1%% a guest member joins or leaves", MixedPartitions, MixedGroups),
		Run: runMixed})
	return s
}

// ScenarioByName returns the scenario called name.
func ScenarioByName(name string) (Scenario, bool) {
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc, true
		}
	}
	return Scenario{}, false
}

// setup creates the topic with the given partitions and joins members
// m00..m(members-1) to groups g00..g(groups-1). It fails b on any error.
func setup(b *testing.B, s Subject, partitions, groups, members int) {
	b.Helper()
	if ok, err := s.Create(topicName, int32(partitions)); err != nil || !ok {
		b.Fatalf("Create(%q, %d) = %v, %v", topicName, partitions, ok, err)
	}
	for g := range groups {
		for m := range members {
			if _, err := s.Join(topicName, groupNames[g], memberNames[m]); err != nil {
				b.Fatalf("Join: %v", err)
			}
		}
	}
}

// goroutines returns how many goroutines b.RunParallel will start (one per
// P), failing b when that exceeds the 64 partitions a topic may have.
func goroutines(b *testing.B) int {
	n := runtime.GOMAXPROCS(0)
	if n > engine.MaxPartitionCount {
		b.Fatalf("GOMAXPROCS %d: the parallel scenarios need one partition per goroutine, at most %d", n, engine.MaxPartitionCount)
	}
	return n
}

// runRawChan times one send and one receive of an engine.Record on a
// buffered channel per record, recordsPerOp per op, in one goroutine.
func runRawChan(b *testing.B, recordsPerOp int) {
	b.ReportAllocs()
	ch := make(chan engine.Record, Capacity)
	r := engine.Record{Topic: topicName, Payload: Payload}
	for b.Loop() {
		for range recordsPerOp {
			ch <- r
			r = <-ch
			r.Offset++
		}
	}
	if want := int64(b.N) * int64(recordsPerOp); r.Offset != want {
		b.Fatalf("received %d records, want %d", r.Offset, want)
	}
	Report(b, "record", int64(b.N)*int64(recordsPerOp))
}

func runPublish(b *testing.B, s Subject) {
	b.ReportAllocs()
	setup(b, s, 1, 1, 1)
	buf := make([]engine.Record, 0, engine.MaxPollRecords)
	next := int64(0)
	for b.Loop() {
		off, err := s.Publish(topicName, 0, Payload)
		if err != nil || off != next {
			b.Fatalf("Publish = %d, %v; want %d", off, err, next)
		}
		next++
		if next%Capacity == 0 {
			b.StopTimer()
			buf = drain(b, s, buf, groupNames[0], memberNames[0], Capacity)
			b.StartTimer()
		}
	}
	Report(b, "record", int64(b.N))
}

// drain polls and acks want records as member of group.
func drain(b *testing.B, s Subject, buf []engine.Record, group, member string, want int) []engine.Record {
	got := 0
	for got < want {
		var err error
		buf, err = s.PollInto(buf[:0], topicName, group, member, engine.MaxPollRecords)
		if err != nil || len(buf) == 0 {
			b.Fatalf("drain: poll = %d records, %v after %d of %d", len(buf), err, got, want)
		}
		for _, r := range buf {
			if ok, err := s.Ack(topicName, group, member, r.Partition, r.Offset); err != nil || !ok {
				b.Fatalf("drain: Ack(%d, %d) = %v, %v", r.Partition, r.Offset, ok, err)
			}
		}
		got += len(buf)
	}
	return buf
}

func runRoundTrip(b *testing.B, s Subject) {
	if _, ok := s.(*RawChan); ok {
		runRawChan(b, 1)
		return
	}
	b.ReportAllocs()
	setup(b, s, 1, 1, 1)
	g, m := groupNames[0], memberNames[0]
	buf := make([]engine.Record, 0, 1)
	for b.Loop() {
		off, err := s.Publish(topicName, 0, Payload)
		if err != nil || off < 0 {
			b.Fatalf("Publish = %d, %v", off, err)
		}
		buf, err = s.PollInto(buf[:0], topicName, g, m, 1)
		if err != nil || len(buf) != 1 || buf[0].Offset != off {
			b.Fatalf("Poll = %v, %v; want offset %d", buf, err, off)
		}
		if ok, err := s.Ack(topicName, g, m, 0, off); err != nil || !ok {
			b.Fatalf("Ack(0, %d) = %v, %v", off, ok, err)
		}
	}
	Report(b, "record", int64(b.N))
}

// runRoundTripHandles is RoundTrip through the engine's handles, which
// resolve the topic, group and member names once: TopicHandle.Publish,
// MemberHandle.AppendPoll into a reused buffer, MemberHandle.Ack.
func runRoundTripHandles(b *testing.B, s Subject) {
	if _, ok := s.(*RawChan); ok {
		runRawChan(b, 1)
		return
	}
	e, ok := s.(Engine)
	if !ok {
		b.Fatalf("RoundTrip/handles runs on the engine and chan-raw only, not %T", s)
	}
	b.ReportAllocs()
	setup(b, s, 1, 1, 1)
	th, err := e.Topic(topicName)
	if err != nil {
		b.Fatal(err)
	}
	mh, err := th.Member(groupNames[0], memberNames[0])
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]engine.Record, 0, 1)
	for b.Loop() {
		off, err := th.Publish(0, Payload)
		if err != nil || off < 0 {
			b.Fatalf("Publish = %d, %v", off, err)
		}
		buf, err = mh.AppendPoll(buf[:0], 1)
		if err != nil || len(buf) != 1 || buf[0].Offset != off {
			b.Fatalf("AppendPoll = %v, %v; want offset %d", buf, err, off)
		}
		if ok, err := mh.Ack(0, off); err != nil || !ok {
			b.Fatalf("Ack(0, %d) = %v, %v", off, ok, err)
		}
	}
	Report(b, "record", int64(b.N))
}

func runBatch64(b *testing.B, s Subject) {
	if _, ok := s.(*RawChan); ok {
		runRawChan(b, BatchPartitions)
		return
	}
	b.ReportAllocs()
	setup(b, s, BatchPartitions, 1, 1)
	g, m := groupNames[0], memberNames[0]
	buf := make([]engine.Record, 0, BatchPartitions)
	for b.Loop() {
		for p := range int32(BatchPartitions) {
			if off, err := s.Publish(topicName, p, Payload); err != nil || off < 0 {
				b.Fatalf("Publish(%d) = %d, %v", p, off, err)
			}
		}
		var err error
		buf, err = s.PollInto(buf[:0], topicName, g, m, BatchPartitions)
		if err != nil || len(buf) != BatchPartitions {
			b.Fatalf("Poll = %d records, %v; want %d", len(buf), err, BatchPartitions)
		}
		for _, r := range buf {
			if ok, err := s.Ack(topicName, g, m, r.Partition, r.Offset); err != nil || !ok {
				b.Fatalf("Ack(%d, %d) = %v, %v", r.Partition, r.Offset, ok, err)
			}
		}
	}
	Report(b, "record", int64(b.N)*BatchPartitions)
}

func runParallel(b *testing.B, s Subject, groups int) {
	b.ReportAllocs()
	n := goroutines(b)
	setup(b, s, n, groups, n)
	var next atomic.Int32
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1) - 1
		pipeline(b, pb, s, i, groups)
	})
	Report(b, "record", int64(b.N))
}

// pipeline is one goroutine of the parallel scenarios: partition p, member
// memberNames[p] of each of the first groups groups; per iteration it
// publishes one record, then polls(1) and acks it in every group.
func pipeline(b *testing.B, pb *testing.PB, s Subject, p int32, groups int) {
	m := memberNames[p]
	buf := ownBuffer(1)
	for pb.Next() {
		off, err := s.Publish(topicName, p, Payload)
		if err != nil || off < 0 {
			b.Errorf("Publish(%d) = %d, %v", p, off, err)
			return
		}
		for _, g := range groupNames[:groups] {
			buf, err = s.PollInto(buf[:0], topicName, g, m, 1)
			if err != nil || len(buf) != 1 || buf[0].Offset != off || buf[0].Partition != p {
				b.Errorf("%s: Poll = %v, %v; want %d/%d", g, buf, err, p, off)
				return
			}
			if ok, err := s.Ack(topicName, g, m, p, off); err != nil || !ok {
				b.Errorf("%s: Ack(%d, %d) = %v, %v", g, p, off, ok, err)
				return
			}
		}
	}
}

// HotTopicPartitions is the partition count, and the goroutine count, of the
// HotTopic scenario.
const HotTopicPartitions = 16

// runHotTopic is one hot topic of HotTopicPartitions partitions driven by
// one goroutine per partition (member i of the one group owns partition i),
// at any GOMAXPROCS: RunParallel starts at least HotTopicPartitions
// goroutines, and any beyond that return at once, leaving the iterations to
// the others.
func runHotTopic(b *testing.B, s Subject) {
	b.ReportAllocs()
	setup(b, s, HotTopicPartitions, 1, HotTopicPartitions)
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((HotTopicPartitions + procs - 1) / procs)
	var next atomic.Int32
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1) - 1
		if i >= HotTopicPartitions {
			return
		}
		pipeline(b, pb, s, i, 1)
	})
	Report(b, "record", int64(b.N))
}

// ownBuffer returns an empty poll buffer of capacity n for one goroutine,
// with four unused records (192 bytes) on each side, so that two
// goroutines' buffers never share a cache-line pair and the harness adds no
// false sharing of its own.
func ownBuffer(n int) []engine.Record {
	return make([]engine.Record, n+8)[4 : 4 : 4+n]
}

// dealt returns the indexes i < total with i mod n == k: the members or
// groups goroutine k of n drives.
func dealt(k, n, total int) []int {
	var out []int
	for i := k; i < total; i += n {
		out = append(out, i)
	}
	return out
}

func runContendedMembers(b *testing.B, s Subject) {
	b.ReportAllocs()
	n := goroutines(b)
	setup(b, s, ContendedMembers, 1, ContendedMembers)
	g := groupNames[0]
	var next atomic.Int32
	b.RunParallel(func(pb *testing.PB) {
		mine := dealt(int(next.Add(1)-1), n, ContendedMembers)
		buf := ownBuffer(1)
		for j := 0; pb.Next(); j++ {
			i := mine[j%len(mine)]
			p, m := int32(i), memberNames[i]
			off, err := s.Publish(topicName, p, Payload)
			if err != nil || off < 0 {
				b.Errorf("Publish(%d) = %d, %v", p, off, err)
				return
			}
			buf, err = s.PollInto(buf[:0], topicName, g, m, 1)
			if err != nil || len(buf) != 1 || buf[0].Offset != off || buf[0].Partition != p {
				b.Errorf("%s: Poll = %v, %v; want %d/%d", m, buf, err, p, off)
				return
			}
			if ok, err := s.Ack(topicName, g, m, p, off); err != nil || !ok {
				b.Errorf("%s: Ack(%d, %d) = %v, %v", m, p, off, ok, err)
				return
			}
		}
	})
	Report(b, "record", int64(b.N))
}

func runContendedGroups(b *testing.B, s Subject) {
	b.ReportAllocs()
	n := goroutines(b)
	setup(b, s, 1, ContendedGroups, 1)
	m := memberNames[0]
	var next atomic.Int32
	var delivered atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		mine := dealt(int(next.Add(1)-1), n, ContendedGroups)
		buf := ownBuffer(1)
		count := int64(0)
		defer func() { delivered.Add(count) }()
		for j := 0; pb.Next(); j++ {
			g := groupNames[mine[j%len(mine)]]
			var err error
			buf, err = s.PollInto(buf[:0], topicName, g, m, 1)
			if err != nil {
				b.Errorf("%s: Poll: %v", g, err)
				return
			}
			if len(buf) == 0 {
				// This group is up to date: publish for everyone. -1
				// (another group holds the log full) is an expected
				// outcome under contention.
				if _, err := s.Publish(topicName, 0, Payload); err != nil {
					b.Errorf("Publish: %v", err)
					return
				}
				continue
			}
			if ok, err := s.Ack(topicName, g, m, 0, buf[0].Offset); err != nil || !ok {
				b.Errorf("%s: Ack(0, %d) = %v, %v", g, buf[0].Offset, ok, err)
				return
			}
			count++
		}
	})
	Report(b, "delivery", delivered.Load())
}

func runRebalance(b *testing.B, s Subject, members, partitions int) {
	b.ReportAllocs()
	// "j" sorts before every "mNN", so its join and leave move every
	// partition of a group with more than one member.
	const guest = "j"
	setup(b, s, partitions, 1, members-1)
	g := groupNames[0]
	if members == 1 {
		// Create the group outside the timed loop: join and leave once.
		if _, err := s.Join(topicName, g, guest); err != nil {
			b.Fatalf("Join: %v", err)
		}
		if ok, err := s.Leave(topicName, g, guest); err != nil || !ok {
			b.Fatalf("Leave = %v, %v", ok, err)
		}
	}
	for b.Loop() {
		if _, err := s.Join(topicName, g, guest); err != nil {
			b.Fatalf("Join: %v", err)
		}
		if ok, err := s.Leave(topicName, g, guest); err != nil || !ok {
			b.Fatalf("Leave = %v, %v", ok, err)
		}
	}
	Report(b, "rebalance", 2*int64(b.N))
}

// xorshift is a tiny per-goroutine PRNG (Marsaglia's xorshift64): the
// Mixed workload draws its operations from it without shared state.
type xorshift uint64

func (x *xorshift) next() uint64 {
	v := uint64(*x)
	v ^= v << 13
	v ^= v >> 7
	v ^= v << 17
	*x = xorshift(v)
	return v
}

func runMixed(b *testing.B, s Subject) {
	b.ReportAllocs()
	n := goroutines(b)
	setup(b, s, MixedPartitions, MixedGroups, n)
	var next atomic.Int32
	var calls atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		k := int(next.Add(1) - 1)
		m, guest := memberNames[k], guestNames[k]
		rng := xorshift(0x9E3779B97F4A7C15 ^ uint64(k+1)*0xBF58476D1CE4E5B9)
		var joined [MixedGroups]bool
		buf := ownBuffer(8)
		count := int64(0)
		defer func() { calls.Add(count) }()
		for pb.Next() {
			r := rng.next()
			op, g := r%1000, groupNames[(r>>10)%MixedGroups]
			switch {
			case op < 495:
				if _, err := s.Publish(topicName, int32((r>>20)%MixedPartitions), Payload); err != nil {
					b.Errorf("Publish: %v", err)
					return
				}
				count++
			case op < 990:
				var err error
				buf, err = s.PollInto(buf[:0], topicName, g, m, 8)
				if err != nil {
					b.Errorf("Poll: %v", err)
					return
				}
				count++
				for i, rec := range buf {
					// false is expected: a guest's join or leave may have
					// moved the partition since the poll.
					if (r>>(30+i))%10 == 0 {
						_, err = s.Retry(topicName, g, m, rec.Partition, rec.Offset)
					} else {
						_, err = s.Ack(topicName, g, m, rec.Partition, rec.Offset)
					}
					if err != nil {
						b.Errorf("Ack/Retry: %v", err)
						return
					}
					count++
				}
			default:
				gi := (r >> 10) % MixedGroups
				var err error
				if joined[gi] {
					_, err = s.Leave(topicName, g, guest)
				} else {
					_, err = s.Join(topicName, g, guest)
				}
				if err != nil {
					b.Errorf("Join/Leave: %v", err)
					return
				}
				joined[gi] = !joined[gi]
				count++
			}
		}
	})
	Report(b, "call", calls.Load())
}

// Func returns the benchmark function that runs sc on a fresh subject of
// kind k for every b.N, for testing.Benchmark or b.Run. A subject that
// cannot be built fails b.
func Func(sc Scenario, k Kind) func(*testing.B) {
	return func(b *testing.B) {
		s, err := k.New(Capacity)
		if err != nil {
			b.Fatalf("%s: New(%d): %v", k.Name, Capacity, err)
		}
		sc.Run(b, s)
	}
}
