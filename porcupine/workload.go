package porcupine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/f91dcac0/tributary/engine"
)

// Mix is a named workload shape: the relative frequency of each call and the
// topic shape that makes one hard part of the engine likely to race. Fields
// of a Workload left zero take their Mix's values.
type Mix struct {
	Name  string
	About string // what the mix stresses, one line

	Partitions int32 // partitions per topic
	Capacity   int32 // records each partition retains
	Groups     int   // consumer groups per topic
	Members    int   // member ids per group ("m0" … "m<Members-1>")

	// Weights gives the relative frequency of each call, indexed by Kind;
	// Invalid the frequency of a deliberately invalid call (an argument
	// out of range, a bad identifier, an unknown topic).
	Weights [KindRetry + 1]int
	Invalid int

	// MaxPoll is the largest maxRecords a Poll asks for (1..64); 0 means
	// Partitions.
	MaxPoll int32
	// ShareMembers makes clients use their (group, member) identity in
	// pairs, so that two goroutines poll, ack and retry as the same member
	// and race on the same deliveries.
	ShareMembers bool
	// OtherMember is the percentage of Join and Leave calls that name a
	// random member of the group's pool instead of the client's own.
	OtherMember int
	// AimPolled is the percentage of Ack and Retry calls aimed at a record
	// the client itself polled; AimHint the percentage aimed at the latest
	// record any client polled for the group on a random partition. Of the
	// rest, half name that latest record as another member of the group (a
	// non-owner's settle), half a random partition and offset.
	AimPolled, AimHint int
}

func weights(create, join, leave, publish, poll, ack, retry int) [KindRetry + 1]int {
	return [...]int{0, create, join, leave, publish, poll, ack, retry}
}

// mixes are the named mixes, in the order Mixes returns them.
// yieldOneIn: before each call after its first, a client yields its
// processor (runtime.Gosched) with probability 1/yieldOneIn, so that clients
// interleave call by call even on a machine with few cores, instead of each
// running a long stretch of calls alone.
const yieldOneIn = 4

var mixes = []Mix{
	{
		Name: "balanced", About: "every call, a few groups and members, joins and leaves now and then",
		Partitions: 3, Capacity: 4, Groups: 2, Members: 3,
		Weights: weights(1, 6, 4, 22, 28, 25, 8), Invalid: 6,
		OtherMember: 30, AimPolled: 70, AimHint: 15,
	},
	{
		Name: "multipoll", About: "multi-partition polls racing publishes: each member owns several partitions",
		Partitions: 6, Capacity: 8, Groups: 1, Members: 2,
		Weights: weights(0, 1, 1, 35, 32, 28, 3), Invalid: 2,
		AimPolled: 85, AimHint: 10,
	},
	{
		Name: "rebalance", About: "joins and leaves of a member pool racing polls and acks",
		Partitions: 4, Capacity: 6, Groups: 1, Members: 4,
		Weights: weights(0, 12, 10, 18, 28, 26, 5), Invalid: 3,
		OtherMember: 50, AimPolled: 70, AimHint: 20,
	},
	{
		Name: "ackretry", About: "ack racing retry: client pairs share a member id and settle the same deliveries",
		Partitions: 2, Capacity: 4, Groups: 1, Members: 2,
		Weights: weights(0, 2, 1, 18, 30, 24, 22), Invalid: 3,
		ShareMembers: true, AimPolled: 50, AimHint: 40,
	},
	{
		Name: "full", About: "capacity 1: full partitions racing trims, memberless groups holding retention",
		Partitions: 2, Capacity: 1, Groups: 2, Members: 2,
		Weights: weights(0, 6, 6, 28, 26, 28, 3), Invalid: 3,
		OtherMember: 20, AimPolled: 80, AimHint: 10,
	},
	{
		Name: "groups", About: "four groups on one topic: retention is the slowest group's",
		Partitions: 3, Capacity: 3, Groups: 4, Members: 2,
		Weights: weights(0, 8, 7, 20, 28, 30, 4), Invalid: 3,
		OtherMember: 20, AimPolled: 75, AimHint: 15,
	},
}

// Mixes returns the named mixes, as a new slice owned by the caller.
func Mixes() []Mix { return append([]Mix(nil), mixes...) }

// MixNames returns the names of the mixes, in Mixes order.
func MixNames() []string {
	names := make([]string, len(mixes))
	for i, m := range mixes {
		names[i] = m.Name
	}
	return names
}

// LookupMix returns the mix named name, or an error listing the names.
func LookupMix(name string) (Mix, error) {
	for _, m := range mixes {
		if m.Name == name {
			return m, nil
		}
	}
	return Mix{}, fmt.Errorf("porcupine: unknown mix %q (want one of %s)", name, strings.Join(MixNames(), ", "))
}

// Workload describes one seeded run: Topics independent topics, each worked
// by Clients goroutines making OpsPerClient calls each. The seed fixes each
// goroutine's random choices (which call, which partition, …); the
// arguments also depend on what the goroutine's earlier calls returned and,
// for some Acks and Retries, on what other clients of its topic polled. The
// interleaving, and so the history, varies from run to run.
//
// Every field but Seed may be left zero: Mix "" means "balanced", Topics 0
// means 1, Clients 0 means 8, OpsPerClient 0 means 40, and the topic shape
// (Partitions, Capacity, Groups, Members) comes from the Mix.
type Workload struct {
	Seed         uint64 `json:"seed"`
	Mix          string `json:"mix"`
	Topics       int    `json:"topics"`         // 1..1000
	Clients      int    `json:"clients"`        // goroutines per topic, 1..64
	OpsPerClient int    `json:"ops_per_client"` // calls per goroutine, including its first Join; 1..100000
	Partitions   int32  `json:"partitions"`     // per topic, 1..64
	Capacity     int32  `json:"capacity"`       // per partition, 1..1000
	Groups       int    `json:"groups"`         // per topic, 1..100
	Members      int    `json:"members"`        // member ids per group, 1..100
}

// Resolve returns w with its zero fields filled in (see Workload), or an
// error for an unknown mix or a field out of range.
func (w Workload) Resolve() (Workload, error) {
	if w.Mix == "" {
		w.Mix = mixes[0].Name
	}
	mix, err := LookupMix(w.Mix)
	if err != nil {
		return w, err
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def32 := func(v *int32, d int32) {
		if *v == 0 {
			*v = d
		}
	}
	def(&w.Topics, 1)
	def(&w.Clients, 8)
	def(&w.OpsPerClient, 40)
	def32(&w.Partitions, mix.Partitions)
	def32(&w.Capacity, mix.Capacity)
	def(&w.Groups, mix.Groups)
	def(&w.Members, mix.Members)
	var errs []error
	check := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("porcupine: workload %s %d outside [%d,%d]", name, v, lo, hi))
		}
	}
	check("topics", w.Topics, 1, 1000)
	check("clients", w.Clients, 1, 64)
	check("ops per client", w.OpsPerClient, 1, 100000)
	check("partitions", int(w.Partitions), 1, engine.MaxPartitionCount)
	check("capacity", int(w.Capacity), engine.MinCapacity, engine.MaxCapacity)
	check("groups", w.Groups, 1, 100)
	check("members", w.Members, 1, 100)
	return w, errors.Join(errs...)
}

// Ops returns the number of calls a run of the resolved w records: one
// Create per topic, then OpsPerClient per client.
func (w Workload) Ops() int { return w.Topics * (1 + w.Clients*w.OpsPerClient) }

// String describes the resolved workload on one line.
func (w Workload) String() string {
	return fmt.Sprintf("mix=%s topics=%d clients=%d ops/client=%d partitions=%d capacity=%d groups=%d members=%d",
		w.Mix, w.Topics, w.Clients, w.OpsPerClient, w.Partitions, w.Capacity, w.Groups, w.Members)
}

// History is one recorded run: the broker's capacity, every call of every
// client sorted by call time, and, when it came from Run, the resolved
// Workload (and the injected fault's name, in fault tests).
type History struct {
	Capacity int32    `json:"capacity"`
	Workload Workload `json:"workload"`
	Fault    string   `json:"fault,omitempty"`
	Ops      []Op     `json:"ops"`
}

// Topics returns the topics named in h, in order of first call.
func (h History) Topics() []string {
	seen := map[string]bool{}
	var out []string
	for _, op := range h.Ops {
		if !seen[op.In.Topic] {
			seen[op.In.Topic] = true
			out = append(out, op.In.Topic)
		}
	}
	return out
}

// Topic returns the subhistory of the calls naming topic, with client ids
// renumbered 0, 1, 2, … in ascending order of the original ids (the
// visualization draws one row per client id; for a History from Run, a
// client's new id is its index among its topic's clients, the c in its
// payloads "c<c>.<k>"). The Ops slice is new; Outputs share their slices
// with h's, which nothing changes.
func (h History) Topic(topic string) History {
	sub := History{Capacity: h.Capacity, Workload: h.Workload, Fault: h.Fault}
	var ids []int
	for _, op := range h.Ops {
		if op.In.Topic == topic {
			sub.Ops = append(sub.Ops, op)
			ids = append(ids, op.Client)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for i := range sub.Ops {
		sub.Ops[i].Client, _ = slices.BinarySearch(ids, sub.Ops[i].Client)
	}
	return sub
}

// topicRun is the state shared by the clients of one topic in a run.
type topicRun struct {
	name    string
	index   int
	w       Workload
	mix     Mix
	unknown string // a valid topic id that is never created
	// hints[g][p] is 1 + the offset of the latest record a client polled
	// for group g on partition p (0: none yet). It steers Ack and Retry at
	// live deliveries; it is a workload aid, not broker state.
	hints [][]atomic.Int64
}

// Run resolves w, makes a broker with newBroker(w.Capacity) (engine.New when
// newBroker is nil), runs the workload on it and returns the recorded
// history. Each topic is created by its client 0 before any client starts;
// then all clients of all topics start together. Errors: an invalid
// workload, or newBroker's error.
func Run(w Workload, newBroker func(capacityPerPartition int32) (*engine.Broker, error)) (History, error) {
	w, err := w.Resolve()
	if err != nil {
		return History{}, err
	}
	mix, _ := LookupMix(w.Mix)
	if newBroker == nil {
		newBroker = func(c int32) (*engine.Broker, error) { return engine.New(c) }
	}
	b, err := newBroker(w.Capacity)
	if err != nil {
		return History{}, err
	}
	rec := NewRecorder(b)
	type client struct {
		tr *topicRun
		cl *Client
		ci int
	}
	var clients []client
	for ti := 0; ti < w.Topics; ti++ {
		tr := &topicRun{name: fmt.Sprintf("t%03d", ti), index: ti, w: w, mix: mix, unknown: "unknown"}
		tr.hints = make([][]atomic.Int64, w.Groups)
		for g := range tr.hints {
			tr.hints[g] = make([]atomic.Int64, w.Partitions)
		}
		for ci := 0; ci < w.Clients; ci++ {
			clients = append(clients, client{tr, rec.Client(), ci})
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
	return History{Capacity: w.Capacity, Workload: w, Ops: rec.Ops()}, nil
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
	cl.Join(tr.name, group, member)
	for k := 1; k < w.OpsPerClient; k++ {
		if rng.IntN(yieldOneIn) == 0 {
			runtime.Gosched()
		}
		pick := rng.IntN(total)
		kind := Kind(0)
		for kd := KindCreate; kd <= KindRetry; kd++ {
			if pick < mix.Weights[kd] {
				kind = kd
				break
			}
			pick -= mix.Weights[kd]
		}
		switch kind {
		case 0:
			tr.invalid(cl, rng, group, member)
		case KindCreate:
			cl.Create(tr.name, w.Partitions)
		case KindJoin:
			cl.Join(tr.name, group, poolMember())
		case KindLeave:
			cl.Leave(tr.name, group, poolMember())
		case KindPublish:
			cl.Publish(tr.name, rng.Int32N(w.Partitions), fmt.Sprintf("c%d.%d", ci, k))
		case KindPoll:
			recs, _ := cl.Poll(tr.name, group, member, 1+rng.Int32N(maxPoll))
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
				p = rng.Int32N(w.Partitions)
				off = max(tr.hints[gi][p].Load()-1, 0)
				if roll >= mix.AimPolled+mix.AimHint {
					m = fmt.Sprintf("m%d", rng.IntN(w.Members)) // maybe not the owner
				}
			default:
				p = rng.Int32N(w.Partitions)
				off = rng.Int64N(2*int64(w.Capacity) + 2)
			}
			if kind == KindAck {
				cl.Ack(tr.name, group, m, p, off)
			} else {
				cl.Retry(tr.name, group, m, p, off)
			}
		}
	}
}

// invalid makes one call that breaks SPEC rules 3 or 4.
func (tr *topicRun) invalid(cl *Client, rng *rand.Rand, group, member string) {
	parts := tr.w.Partitions
	switch rng.IntN(9) {
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
	}
}
