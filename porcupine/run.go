package porcupine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// NewBroker makes the broker a run records: engine.New, or a wrapper of it
// (the fault tests inject a deliberate bug).
type NewBroker func(capacityPerPartition int32, opts ...engine.Option) (*engine.Broker, error)

// yieldOneIn: before each call after its first, a client yields its
// processor (runtime.Gosched) with probability 1/yieldOneIn, so that clients
// interleave call by call even on a machine with few cores, instead of each
// running a long stretch of calls alone.
const yieldOneIn = 4

// topicRun is the state shared by the clients of one topic in a run. Its
// counters are workload aids that steer arguments at live state, not broker
// state; they are read and written without order.
type topicRun struct {
	name      string
	index     int
	w         Workload
	mix       Mix
	unknown   string // a valid topic id that is never created
	growTo    int32  // AddPartitions grows the topic to this many partitions
	assignors []string

	// parts is the highest partition count a client has seen (Create,
	// AddPartitions, Describe); calls aim at partitions below it.
	parts atomic.Int32
	// ends[p] is the highest log end offset of partition p a client has
	// seen (a publish's offset + 1, or a Describe).
	ends [engine.MaxPartitionCount]atomic.Int64
	// hints[g][p] is 1 + the offset of the latest record a client polled
	// for group g on partition p (0: none yet). It steers Ack, Retry and
	// Seek at live deliveries.
	hints []hintRow
}

type hintRow [engine.MaxPartitionCount]atomic.Int64

// Run resolves w, makes the broker with newBroker (engine.New when nil),
// runs the workload on it and returns the recorded history (the options
// include engine.WithExtendedCapacity for a capacity above
// engine.MaxCapacity). Without a test
// clock every topic lives on one broker, newBroker(w.Capacity, options…);
// with one (Options.TestClock), each topic gets its own TestClock and so
// its own broker, newBroker(w.Capacity, options…, engine.WithClock(…)),
// since an engine has one clock. Each topic is created by its client 0
// before any client starts; then all clients of all topics start together.
// Errors: an invalid workload, or newBroker's error.
func Run(w Workload, newBroker NewBroker) (History, error) {
	w, err := w.Resolve()
	if err != nil {
		return History{}, err
	}
	if newBroker == nil {
		newBroker = engine.New
	}
	opts := w.Options.EngineOptions()
	if w.Capacity > engine.MaxCapacity {
		opts = append(opts, engine.WithExtendedCapacity())
	}
	var shared *engine.Broker
	if !w.Options.TestClock {
		if shared, err = newBroker(w.Capacity, opts...); err != nil {
			return History{}, err
		}
	}
	rec := NewRecorder(shared)
	return run(w, rec, func() (func() *Client, error) {
		if !w.Options.TestClock {
			return func() *Client { return rec.ClientFor(shared, nil) }, nil
		}
		clock := new(TestClock)
		b, err := newBroker(w.Capacity, append(slices.Clone(opts), engine.WithClock(clock.Now))...)
		if err != nil {
			return nil, err
		}
		return func() *Client { return rec.ClientFor(b, clock) }, nil
	})
}

// RunOn runs w, resolved, on t (BackendTarget of another backend, say) and
// returns the recorded history, to be checked with Check like one of Run's.
// t must be fresh (no topics) and made with w.Capacity and the options of
// w.Options (replay window, ack timeout, maximum message bytes), since the
// history is checked against a model made with them. Errors: an invalid
// workload, and a workload with Options.TestClock, which needs a clock
// per topic that only Run can give the engine.
func RunOn(w Workload, t Target) (History, error) {
	w, err := w.Resolve()
	if err != nil {
		return History{}, err
	}
	if w.Options.TestClock {
		return History{}, fmt.Errorf("porcupine: RunOn cannot drive a test clock (workload %s)", w)
	}
	mix, _ := LookupMix(w.Mix)
	if _, ok := t.(LivenessTarget); !ok && (mix.Weights[KindHeartbeat] > 0 || mix.Weights[KindRejoin] > 0) {
		return History{}, fmt.Errorf("porcupine: mix %s makes Heartbeat and Rejoin, which %T does not have (LivenessTarget)", w.Mix, t)
	}
	rec := NewRecorder(nil)
	return run(w, rec, func() (func() *Client, error) {
		return func() *Client { return rec.ClientOn(t) }, nil
	})
}

// run runs the resolved workload w, recording into rec. For each topic it
// calls topicClients once for a function that makes that topic's clients.
func run(w Workload, rec *Recorder, topicClients func() (func() *Client, error)) (History, error) {
	mix, _ := LookupMix(w.Mix)
	type client struct {
		tr *topicRun
		cl *Client
		ci int
	}
	var clients []client
	for ti := 0; ti < w.Topics; ti++ {
		tr := &topicRun{name: fmt.Sprintf("t%03d", ti), index: ti, w: w, mix: mix, unknown: "unknown",
			growTo: mix.GrowTo, assignors: mix.Assignors, hints: make([]hintRow, w.Groups)}
		if tr.growTo == 0 {
			tr.growTo = min(w.Partitions+4, engine.MaxPartitionCount)
		}
		if tr.assignors == nil {
			tr.assignors = []string{"RoundRobin", "Range", "Sticky"}
		}
		tr.parts.Store(w.Partitions)
		newClient, err := topicClients()
		if err != nil {
			return History{}, err
		}
		for ci := 0; ci < w.Clients; ci++ {
			clients = append(clients, client{tr, newClient(), ci})
		}
		if _, err := clients[len(clients)-w.Clients].cl.Create(tr.name, w.Partitions); err != nil {
			return History{}, fmt.Errorf("porcupine: creating %s: %w", tr.name, err)
		}
	}
	var (
		wg    sync.WaitGroup
		ready atomic.Int64 // clients at the start line
	)
	for _, c := range clients {
		wg.Go(func() {
			// Start together: a goroutine starts its calls only once every
			// client goroutine has been scheduled, so that all processors
			// are busy from the first call.
			ready.Add(1)
			for ready.Load() < int64(len(clients)) {
				runtime.Gosched()
			}
			c.tr.client(c.cl, c.ci)
		})
	}
	wg.Wait()
	return History{Config: w.Config(), Workload: w, Ops: rec.Ops()}, nil
}

// client runs client ci of the topic: a Join as its own member, then
// OpsPerClient-1 calls drawn from the mix.
func (tr *topicRun) client(cl *Client, ci int) {
	w, mix := tr.w, tr.mix
	rng := rand.New(rand.NewPCG(w.Seed, uint64(tr.index)<<16|uint64(ci)))
	gi := ci % w.Groups
	slot := ci / w.Groups
	if mix.ShareMembers {
		slot /= 2
	}
	group, member := fmt.Sprintf("g%d", gi), fmt.Sprintf("m%d", slot%w.Members)
	maxPoll := mix.MaxPoll
	if maxPoll == 0 {
		maxPoll = w.Partitions
	}
	maxPoll = min(maxPoll, engine.MaxPollRecords)
	total := mix.Invalid
	for _, wt := range mix.Weights {
		total += wt
	}
	poolMember := func() string {
		if rng.IntN(100) < mix.OtherMember {
			return fmt.Sprintf("m%d", rng.IntN(w.Members))
		}
		return member
	}
	var pending []engine.Record // deliveries this client polled and has not settled
	quiet := 0                  // calls left in a quiet spell (Mix.Quiet)
	rejoin := false             // the client's member was found gone: its next call joins again
	cl.Join(tr.name, group, member)
	for k := 1; k < w.OpsPerClient; k++ {
		if rng.IntN(yieldOneIn) == 0 {
			runtime.Gosched()
		}
		pick := rng.IntN(total)
		kind := Kind(0)
		for kd := KindCreate; kd < kindCount; kd++ {
			if pick < mix.Weights[kd] {
				kind = kd
				break
			}
			pick -= mix.Weights[kd]
		}
		switch {
		case quiet > 0:
			// Silent: only calls that do not name the member.
			quiet--
			kind = []Kind{KindPublish, KindPublish, KindDescribe, KindAdvance}[rng.IntN(4)]
			if mix.Weights[KindAdvance] == 0 {
				kind = KindPublish
			}
		case rejoin:
			// Found expired (or never a member): join again, as a consumer
			// whose heartbeat failed does, now and then as a new incarnation.
			rejoin = false
			kind = KindJoin
			if mix.Weights[KindRejoin] > 0 && rng.IntN(3) == 0 {
				kind = KindRejoin
			}
		case mix.Quiet > 0 && rng.IntN(100) < mix.Quiet:
			quiet = 4 + rng.IntN(13)
		}
		switch kind {
		case 0:
			tr.invalid(cl, rng, group, member)
		case KindCreate:
			cl.Create(tr.name, w.Partitions)
		case KindJoin:
			cl.Join(tr.name, group, poolMember())
		case KindHeartbeat:
			if ok, err := cl.Heartbeat(tr.name, group, member); err == nil && !ok {
				rejoin = true
			}
		case KindRejoin:
			// A new incarnation of the member; the deliveries this client
			// (or its twin, with ShareMembers) still holds are the old
			// incarnation's: settling them must fail.
			cl.Rejoin(tr.name, group, member)
		case KindLeave:
			cl.Leave(tr.name, group, poolMember())
		case KindPublish:
			p := tr.partition(rng)
			if off, err := cl.Publish(tr.name, p, fmt.Sprintf("c%d.%d", ci, k)); err == nil && off >= 0 {
				seeMax(&tr.ends[p], off+1)
			}
		case KindPublishMessage:
			p := tr.partition(rng)
			if off, err := cl.PublishMessage(tr.name, p, tr.message(rng, ci, k)); err == nil && off >= 0 {
				seeMax(&tr.ends[p], off+1)
			}
		case KindPoll:
			recs, _ := cl.Poll(tr.name, group, member, 1+rng.Int32N(maxPoll))
			for _, r := range recs {
				tr.hints[gi][r.Partition].Store(r.Offset + 1)
			}
			pending = append(pending, recs...)
			if n := len(pending); n > 8 {
				pending = append(pending[:0], pending[n-8:]...)
			}
		case KindPollPartition:
			p := tr.partition(rng)
			if rng.IntN(10) == 0 {
				p = []int32{-1, tr.parts.Load() + 2}[rng.IntN(2)] // invalid (out of range even after growth)
			}
			recs, _ := cl.PollPartition(tr.name, group, member, p)
			for _, r := range recs {
				tr.hints[gi][r.Partition].Store(r.Offset + 1)
			}
			pending = append(pending, recs...)
			if n := len(pending); n > 8 {
				pending = append(pending[:0], pending[n-8:]...)
			}
		case KindAck, KindRetry:
			var (
				m    = member
				p    int32
				off  int64
				roll = rng.IntN(100)
			)
			switch {
			case roll < mix.AimPolled && len(pending) > 0:
				i := rng.IntN(len(pending))
				p, off = pending[i].Partition, pending[i].Offset
				pending = append(pending[:i], pending[i+1:]...)
			case roll < mix.AimPolled+mix.AimHint || roll%2 == 0:
				p = tr.partition(rng)
				off = max(tr.hints[gi][p].Load()-1, 0)
				if roll >= mix.AimPolled+mix.AimHint {
					m = fmt.Sprintf("m%d", rng.IntN(w.Members)) // maybe not the owner
				}
			default:
				p = tr.partition(rng)
				off = rng.Int64N(2*int64(w.Capacity) + 2)
			}
			if kind == KindAck {
				cl.Ack(tr.name, group, m, p, off)
			} else {
				cl.Retry(tr.name, group, m, p, off)
			}
		case KindCreateGroup:
			cl.CreateGroup(tr.name, tr.someGroup(rng, group), tr.assignor(rng))
		case KindCreateGroupAt:
			start := uint8(engine.StartLatest)
			if rng.IntN(3) == 0 {
				start = uint8(engine.StartEarliest)
			}
			cl.CreateGroupAt(tr.name, tr.someGroup(rng, group), tr.assignor(rng), start)
		case KindDeleteGroup:
			cl.DeleteGroup(tr.name, tr.someGroup(rng, group))
		case KindSetAssignor:
			cl.SetAssignor(tr.name, tr.someGroup(rng, group), tr.assignor(rng))
		case KindAddPartitions:
			if n := tr.parts.Load(); n < tr.growTo {
				if total, err := cl.AddPartitions(tr.name, 1+rng.Int32N(min(2, tr.growTo-n))); err == nil {
					seeMax32(&tr.parts, total)
				}
			} else {
				tr.describe(cl)
			}
		case KindSeek:
			tr.seek(cl, rng, gi, group)
		case KindDescribe:
			tr.describe(cl)
		case KindAdvance:
			if d := w.Options.SessionTimeout; d > 0 {
				cl.Advance(tr.name, []time.Duration{d / 8, d / 4, d / 4, d / 2}[rng.IntN(4)])
				break
			}
			d := w.Options.AckTimeout
			cl.Advance(tr.name, []time.Duration{d / 4, d / 2, d / 2, d}[rng.IntN(4)])
		}
	}
}

// partition returns a random partition below the partition count seen.
func (tr *topicRun) partition(rng *rand.Rand) int32 { return rng.Int32N(tr.parts.Load()) }

// someGroup returns own most of the time, else a random group of the pool.
func (tr *topicRun) someGroup(rng *rand.Rand, own string) string {
	if rng.IntN(5) < 3 {
		return own
	}
	return fmt.Sprintf("g%d", rng.IntN(tr.w.Groups))
}

// assignor returns the name of a random assignor of the mix.
func (tr *topicRun) assignor(rng *rand.Rand) string { return tr.assignors[rng.IntN(len(tr.assignors))] }

// message returns client ci's k-th message: mostly keyed, with up to two
// headers and, under a test clock, sometimes an explicit time.
func (tr *topicRun) message(rng *rand.Rand, ci, k int) engine.Message {
	m := engine.Message{Payload: fmt.Sprintf("c%d.%d", ci, k)}
	if rng.IntN(4) > 0 {
		m.Key = fmt.Sprintf("k%d", rng.IntN(3))
	}
	for range rng.IntN(3) {
		m.Headers = append(m.Headers, engine.Header{Key: fmt.Sprintf("h%d", rng.IntN(2)), Value: strconv.Itoa(k)})
	}
	if tr.w.Options.TestClock && rng.IntN(4) == 0 {
		m.Time = Epoch.Add(time.Duration(rng.IntN(100)) * time.Second)
	}
	return m
}

// seek seeks group (or, now and then, another group) on a random partition:
// back to the latest delivery seen, further back into the replay window or
// past it, to the latest log end seen, or anywhere up to just past it.
func (tr *topicRun) seek(cl *Client, rng *rand.Rand, gi int, group string) {
	p := tr.partition(rng)
	end := tr.ends[p].Load()
	at := tr.hints[gi][p].Load() - 1
	var off int64
	switch roll := rng.IntN(10); {
	case roll < 4:
		off = at
	case roll < 7:
		off = at - 1 - rng.Int64N(int64(tr.w.Options.ReplayWindow)+2)
	case roll < 9:
		off = end
	default:
		off = rng.Int64N(end + 3)
	}
	if rng.IntN(5) == 0 {
		group = fmt.Sprintf("g%d", rng.IntN(tr.w.Groups))
	}
	cl.Seek(tr.name, group, p, max(off, 0))
}

// describe describes the topic and learns from it the partition count, the
// log ends and, for deliveries in flight, what to aim acks at.
func (tr *topicRun) describe(cl *Client) {
	d, err := cl.Describe(tr.name)
	if err != nil {
		return
	}
	seeMax32(&tr.parts, int32(len(d.Partitions)))
	for _, p := range d.Partitions {
		seeMax(&tr.ends[p.Partition], p.LogEndOffset)
	}
	for _, g := range d.Groups {
		gi, err := strconv.Atoi(strings.TrimPrefix(g.Group, "g"))
		if err != nil || gi < 0 || gi >= len(tr.hints) {
			continue
		}
		for _, p := range g.Partitions {
			if p.InFlight {
				tr.hints[gi][p.Partition].Store(p.Committed + 1)
			}
		}
	}
}

// seeMax raises v to x if x is higher.
func seeMax(v *atomic.Int64, x int64) {
	for old := v.Load(); x > old && !v.CompareAndSwap(old, x); old = v.Load() {
	}
}

func seeMax32(v *atomic.Int32, x int32) {
	for old := v.Load(); x > old && !v.CompareAndSwap(old, x); old = v.Load() {
	}
}

// invalid makes one call that breaks SPEC rules 3, 4, 15, 17, 18, 19 or 20
// (the last five only in mixes that use the Tributary calls), or, in a mix
// that makes CreateGroupAt, gives it a start that is neither, or, in a mix
// that makes Heartbeat or Rejoin, gives one of them a bad identifier (rules
// 4 and 24: an invalid call expires nobody).
func (tr *topicRun) invalid(cl *Client, rng *rand.Rand, group, member string) {
	parts := tr.parts.Load()
	n := 9
	if tr.mix.usesAdmin() {
		n = 16
	}
	if tr.mix.Weights[KindCreateGroupAt] > 0 {
		n = 17
	}
	if tr.mix.Weights[KindHeartbeat] > 0 || tr.mix.Weights[KindRejoin] > 0 {
		switch rng.IntN(6) {
		case 0:
			cl.Heartbeat(tr.name, group, "m.bad")
			return
		case 1:
			cl.Rejoin(tr.name, "", member)
			return
		case 2:
			cl.Heartbeat(tr.unknown, group, member)
			return
		}
	}
	switch rng.IntN(n) {
	case 0:
		cl.Publish(tr.name, parts+rng.Int32N(2), "x")
	case 1:
		cl.Publish(tr.unknown, 0, "x")
	case 2:
		cl.Poll(tr.name, group, member, []int32{0, -1, 65}[rng.IntN(3)])
	case 3:
		cl.Ack(tr.name, group, member, 0, -1-rng.Int64N(3))
	case 4:
		cl.Join(tr.name, "g.bad", member)
	case 5:
		cl.Leave(tr.name, group, "")
	case 6:
		cl.Retry(tr.name, group, member, -1, 0)
	case 7:
		cl.Create(tr.name, []int32{0, -3, 65}[rng.IntN(3)])
	case 8:
		cl.Poll(tr.name, group, strings.Repeat("m", 65), 1)
	case 9:
		limit := tr.w.Options.MaxMessageBytes
		switch {
		case limit > 0 && rng.IntN(2) == 0:
			cl.PublishMessage(tr.name, 0, engine.Message{Key: "k", Payload: strings.Repeat("x", limit)})
		case limit > 0:
			cl.Publish(tr.name, 0, strings.Repeat("x", limit+1)) // Publish is bound too (SPEC rule 15)
		default:
			cl.PublishMessage(tr.name, -1, engine.Message{Key: "k", Payload: "x"})
		}
	case 10:
		cl.CreateGroup(tr.name, group, "")
	case 11:
		cl.SetAssignor(tr.name, "g.bad", "Range")
	case 12:
		cl.AddPartitions(tr.name, []int32{0, -1, engine.MaxPartitionCount}[rng.IntN(3)])
	case 13:
		cl.Seek(tr.name, group, 0, -1-rng.Int64N(3))
	case 14:
		cl.Describe(tr.unknown)
	case 15:
		cl.DeleteGroup(tr.name, "")
	case 16:
		cl.CreateGroupAt(tr.name, group, "Range", 2+uint8(rng.IntN(254))) // neither start
	}
}
