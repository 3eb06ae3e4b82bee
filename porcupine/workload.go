package porcupine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// Mix is a named workload shape: the relative frequency of each call, the
// topic shape and the broker options that make one hard part of the engine
// likely to race. Fields of a Workload left zero take their Mix's values.
type Mix struct {
	Name  string
	About string // what the mix stresses, one line

	Partitions int32 // partitions per topic at Create
	Capacity   int32 // records each partition retains
	Groups     int   // consumer groups per topic ("g0" … "g<Groups-1>")
	Members    int   // member ids per group ("m0" … "m<Members-1>")
	// Options are the broker options (replay window, ack timeout, message
	// size limit, test clock).
	Options Options

	// Weights gives the relative frequency of each call, indexed by Kind;
	// Invalid the frequency of a deliberately invalid call (an argument
	// out of range, a bad identifier, an unknown topic, a nil assignor).
	Weights [kindCount]int
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
	// Quiet is the percentage of calls after which a client falls silent
	// for a spell of 4 to 16 calls, making only calls that do not name its
	// member (Publish, Describe, Advance), so that under a session timeout
	// its member expires while others go on (SPEC rule 24).
	Quiet int
	// GrowTo is the partition count AddPartitions grows a topic to; once a
	// client has seen it reached, it describes the topic instead. 0 means
	// Partitions + 4.
	GrowTo int32
	// Assignors are the names CreateGroup and SetAssignor draw from (see
	// AssignorNames); nil means RoundRobin, Range and Sticky.
	Assignors []string
}

// usesAdmin reports whether m makes any call beyond the seven core calls;
// its invalid calls then include invalid calls of the new kinds.
func (m Mix) usesAdmin() bool {
	for k := KindPublishMessage; k < kindCount; k++ {
		if m.Weights[k] > 0 {
			return true
		}
	}
	return false
}

// weights returns the weights of a mix of core calls only.
func weights(create, join, leave, publish, poll, ack, retry int) (w [kindCount]int) {
	copy(w[:], []int{0, create, join, leave, publish, poll, ack, retry})
	return w
}

// weighted returns the weights of a mix from a Kind → weight table.
func weighted(table map[Kind]int) (w [kindCount]int) {
	for k, n := range table {
		w[k] = n
	}
	return w
}

// mixes are the named mixes, in the order Mixes returns them: the six core
// mixes first, then one per Tributary feature.
var mixes = []Mix{
	{
		Name: "balanced", About: "every core call, a few groups and members, joins and leaves now and then",
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
	{
		Name: "seek", About: "controlled replay: seeks back into a replay window of 2 and forward, racing polls and acks; keyed messages",
		Partitions: 3, Capacity: 4, Groups: 2, Members: 2,
		Options: Options{ReplayWindow: 2, MaxMessageBytes: 48},
		Weights: weighted(map[Kind]int{KindJoin: 4, KindLeave: 3, KindPublish: 10, KindPublishMessage: 10,
			KindPoll: 26, KindAck: 22, KindRetry: 4, KindSeek: 16, KindDescribe: 4}),
		Invalid:     4,
		OtherMember: 30, AimPolled: 70, AimHint: 15,
	},
	{
		Name: "assignor", About: "assignor switching: SetAssignor among RoundRobin, Range, Sticky and Picky racing joins, leaves, polls and acks",
		Partitions: 5, Capacity: 4, Groups: 1, Members: 3,
		Weights: weighted(map[Kind]int{KindJoin: 10, KindLeave: 8, KindPublish: 14, KindPublishMessage: 4,
			KindPoll: 26, KindAck: 22, KindRetry: 4, KindSetAssignor: 12, KindDescribe: 4}),
		Invalid:     3,
		OtherMember: 50, AimPolled: 70, AimHint: 20,
		Assignors: []string{"RoundRobin", "Range", "Sticky", "Picky"},
	},
	{
		Name: "addpartitions", About: "AddPartitions racing publishes, polls (of all partitions and of one) and acks: topics start with one partition and grow to eight",
		Partitions: 1, Capacity: 4, Groups: 2, Members: 2, GrowTo: 8, MaxPoll: 4,
		Weights: weighted(map[Kind]int{KindJoin: 5, KindLeave: 4, KindPublish: 22, KindPublishMessage: 4,
			KindPoll: 28, KindPollPartition: 8, KindAck: 24, KindRetry: 3, KindAddPartitions: 4, KindDescribe: 3}),
		Invalid:     3,
		OtherMember: 30, AimPolled: 75, AimHint: 15,
	},
	{
		Name: "lifecycle", About: "group lifecycle: groups of one member id created and deleted while others consume; memberless groups holding retention",
		Partitions: 2, Capacity: 3, Groups: 3, Members: 1,
		Weights: weighted(map[Kind]int{KindCreateGroup: 6, KindDeleteGroup: 8, KindJoin: 8, KindLeave: 10,
			KindPublish: 20, KindPublishMessage: 4, KindPoll: 22, KindAck: 20, KindRetry: 2, KindDescribe: 4}),
		Invalid:     3,
		OtherMember: 50, AimPolled: 75, AimHint: 15,
	},
	{
		Name: "latest", About: "groups created at the log end (CreateGroupAt, StartLatest) and at the log start, and deleted, racing publishes, polls and acks; a replay window of 1",
		Partitions: 2, Capacity: 3, Groups: 3, Members: 1,
		Options: Options{ReplayWindow: 1},
		Weights: weighted(map[Kind]int{KindCreateGroupAt: 8, KindDeleteGroup: 6, KindJoin: 8, KindLeave: 10,
			KindPublish: 22, KindPublishMessage: 2, KindPoll: 22, KindAck: 20, KindRetry: 2, KindDescribe: 5}),
		Invalid:     3,
		OtherMember: 50, AimPolled: 75, AimHint: 15,
	},
	{
		Name: "window", About: "replay window 1 at capacity 2: publishes to full partitions giving up fully committed records",
		Partitions: 2, Capacity: 2, Groups: 2, Members: 2,
		Options: Options{ReplayWindow: 1},
		Weights: weighted(map[Kind]int{KindJoin: 5, KindLeave: 5, KindPublish: 26, KindPublishMessage: 4,
			KindPoll: 24, KindAck: 24, KindRetry: 2, KindSeek: 6, KindDescribe: 4}),
		Invalid:     3,
		OtherMember: 20, AimPolled: 80, AimHint: 10,
	},
	{
		Name: "extended", About: "capacity 2,000 (WithExtendedCapacity: paged logs) with a replay window of 2: seeks into the window and forward, racing publishes, polls and acks",
		Partitions: 2, Capacity: 2000, Groups: 2, Members: 2,
		Options: Options{ReplayWindow: 2},
		Weights: weighted(map[Kind]int{KindJoin: 4, KindLeave: 3, KindPublish: 30, KindPublishMessage: 6,
			KindPoll: 22, KindAck: 22, KindRetry: 2, KindSeek: 8, KindDescribe: 3}),
		Invalid:     3,
		OtherMember: 20, AimPolled: 80, AimHint: 10,
	},
	{
		Name: "acktimeout", About: "ack timeout on a test clock: Advance racing polls (of all partitions and of one), expired deliveries delivered again with Attempt + 1",
		Partitions: 2, Capacity: 4, Groups: 1, Members: 2,
		Options: Options{AckTimeout: ackTimeout, TestClock: true},
		Weights: weighted(map[Kind]int{KindJoin: 3, KindLeave: 2, KindPublish: 16, KindPublishMessage: 8,
			KindPoll: 30, KindPollPartition: 10, KindAck: 14, KindRetry: 6, KindAdvance: 10, KindDescribe: 3}),
		Invalid:   3,
		AimPolled: 60, AimHint: 30,
	},
	{
		Name: "session", About: "session timeout on a test clock: members falling silent expire at a call's instant (one rebalance, their deliveries cancelled) while heartbeats, polls and acks keep the others; expired members join again",
		Partitions: 3, Capacity: 4, Groups: 2, Members: 4,
		Options: Options{SessionTimeout: sessionTimeout, TestClock: true},
		Weights: weighted(map[Kind]int{KindJoin: 3, KindLeave: 1, KindPublish: 16, KindPublishMessage: 4,
			KindPoll: 24, KindPollPartition: 4, KindAck: 16, KindRetry: 4, KindHeartbeat: 10, KindRejoin: 2,
			KindSetAssignor: 2, KindDeleteGroup: 1, KindAdvance: 8, KindDescribe: 6}),
		Invalid:     3,
		Quiet:       4,
		OtherMember: 10, AimPolled: 70, AimHint: 20,
		Assignors: []string{"RoundRobin", "Range", "Sticky"},
	},
	{
		Name: "rejoin", About: "restarted incarnations: client pairs share a member id and one Rejoins while the other still holds deliveries, under a session timeout on a test clock",
		Partitions: 2, Capacity: 4, Groups: 1, Members: 2,
		Options: Options{SessionTimeout: sessionTimeout, TestClock: true},
		Weights: weighted(map[Kind]int{KindJoin: 2, KindLeave: 1, KindPublish: 18, KindPublishMessage: 2,
			KindPoll: 28, KindPollPartition: 4, KindAck: 20, KindRetry: 4, KindRejoin: 10, KindHeartbeat: 4,
			KindAdvance: 4, KindDescribe: 4}),
		Invalid:      3,
		ShareMembers: true, AimPolled: 60, AimHint: 30,
	},
}

// sessionTimeout is the session and rejoin mixes' session timeout, on the
// test clock; their Advance moves the clock by an eighth, a quarter or a
// half of it, so that a member is often last seen exactly the timeout
// before a call (the boundary of SPEC rule 24).
const sessionTimeout = 10 * time.Second

// ackTimeout is the acktimeout mix's timeout, on the test clock; Advance
// moves the clock by a quarter, a half or all of it.
const ackTimeout = 10 * time.Second

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

// faultMixes names, for each deliberate engine fault (engine.Fault's names
// in tributary_faults builds), the mix that exposes it.
var faultMixes = map[string]string{
	"poll-releases-each":            "multipoll",
	"rebalance-keeps-inflight":      "rebalance",
	"ack-skips-owner":               "rebalance",
	"publish-burns-offset":          "full",
	"trim-ignores-memberless":       "full",
	"poll-stale-assignment":         "rebalance",
	"rebalance-skips-lock":          "rebalance",
	"seek-keeps-inflight":           "seek",
	"setassignor-keeps-inflight":    "assignor",
	"window-evicts-needed":          "window",
	"delete-skips-retention":        "lifecycle",
	"added-partitions-wrong-offset": "addpartitions",
	"rebalance-resets-attempts":     "rebalance",
	"poll-skips-recheck":            "multipoll",
	"ack-ignores-pin":               "groups",
	"latest-starts-behind":          "latest",
	"expiry-skips-rebalance":        "session",
	"expiry-strict":                 "session",
	"rejoin-keeps-delivery":         "rejoin",
	"heartbeat-rejoins":             "session",
	"settle-skips-refresh":          "session",
	"join-keeps-deadline":           "session",
	"catch-up-skips-trim":           "ackretry",
}

// FaultMix returns the name of the mix that exposes the deliberate engine
// fault named fault (engine.Fault.String in a tributary_faults build), and
// false for an unknown name.
func FaultMix(fault string) (string, bool) {
	m, ok := faultMixes[fault]
	return m, ok
}

// Workload describes one seeded run: Topics independent topics, each worked
// by Clients goroutines making OpsPerClient calls each. The seed fixes each
// goroutine's random choices (which call, which partition, …); the
// arguments also depend on what the goroutine's earlier calls returned and,
// for some calls, on what other clients of its topic saw. The interleaving,
// and so the history, varies from run to run.
//
// Every field but Seed may be left zero: Mix "" means "balanced", Topics 0
// means 1, Clients 0 means 8, OpsPerClient 0 means 40, and the topic shape
// (Partitions, Capacity, Groups, Members) and each of the Options come from
// the Mix. An AckTimeout or a SessionTimeout turns TestClock on.
type Workload struct {
	Seed         uint64  `json:"seed"`
	Mix          string  `json:"mix"`
	Topics       int     `json:"topics"`           // 1..1000
	Clients      int     `json:"clients"`          // goroutines per topic, 1..64
	OpsPerClient int     `json:"ops_per_client"`   // calls per goroutine, including its first Join; 1..100000
	Partitions   int32   `json:"partitions"`       // per topic at Create, 1..64
	Capacity     int32   `json:"capacity"`         // per partition, 1..16777216 (above 1000: engine.WithExtendedCapacity)
	Groups       int     `json:"groups"`           // per topic, 1..100
	Members      int     `json:"members"`          // member ids per group, 1..100
	Options      Options `json:"options,omitzero"` // broker options
}

// Resolve returns w with its zero fields filled in (see Workload), or an
// error for an unknown mix, a field out of range or options the model
// cannot check (Config.Check).
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
	o := &w.Options
	def32(&o.ReplayWindow, mix.Options.ReplayWindow)
	def(&o.MaxMessageBytes, mix.Options.MaxMessageBytes)
	if o.AckTimeout == 0 {
		o.AckTimeout = mix.Options.AckTimeout
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = mix.Options.SessionTimeout
	}
	o.TestClock = o.TestClock || mix.Options.TestClock || o.AckTimeout > 0 || o.SessionTimeout > 0
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
	check("capacity", int(w.Capacity), engine.MinCapacity, engine.MaxExtendedCapacity)
	check("groups", w.Groups, 1, 100)
	check("members", w.Members, 1, 100)
	if len(errs) == 0 {
		errs = append(errs, w.Config().Check())
	}
	return w, errors.Join(errs...)
}

// Config returns the Config of the histories of the resolved w.
func (w Workload) Config() Config {
	return Config{Capacity: w.Capacity, Options: w.Options, Version: HistoryVersion}
}

// Ops returns the number of calls a run of the resolved w records: one
// Create per topic, then OpsPerClient per client.
func (w Workload) Ops() int { return w.Topics * (1 + w.Clients*w.OpsPerClient) }

// String describes the resolved workload on one line.
func (w Workload) String() string {
	s := fmt.Sprintf("mix=%s topics=%d clients=%d ops/client=%d partitions=%d capacity=%d groups=%d members=%d",
		w.Mix, w.Topics, w.Clients, w.OpsPerClient, w.Partitions, w.Capacity, w.Groups, w.Members)
	return s + w.Options.String()
}

// String lists the options that are not at their default, each with a
// leading space, e.g. " window=2 acktimeout=10s testclock".
func (o Options) String() string {
	var s string
	for _, opt := range o.NonDefault() {
		if opt.Field == "TestClock" {
			s += " testclock"
			continue
		}
		s += fmt.Sprintf(" %s=%v", optionLabels[opt.Field], opt.Value)
	}
	return s
}

// optionLabels are String's names of the options, by field.
var optionLabels = map[string]string{
	"ReplayWindow": "window", "AckTimeout": "acktimeout", "MaxMessageBytes": "maxbytes", "SessionTimeout": "sessiontimeout",
}

// EngineOptions returns the engine options of o, but for the clock: what a
// broker or backend given to RunOn must be made with, besides the capacity
// (and, for a capacity above engine.MaxCapacity, engine.WithExtendedCapacity,
// which Run adds and tributary.NewCluster passes).
func (o Options) EngineOptions() []engine.Option {
	var opts []engine.Option
	if o.ReplayWindow > 0 {
		opts = append(opts, engine.WithReplayWindow(o.ReplayWindow))
	}
	if o.AckTimeout > 0 {
		opts = append(opts, engine.WithAckTimeout(o.AckTimeout))
	}
	if o.MaxMessageBytes > 0 {
		opts = append(opts, engine.WithMaxMessageBytes(o.MaxMessageBytes))
	}
	if o.SessionTimeout > 0 {
		opts = append(opts, engine.WithSessionTimeout(o.SessionTimeout))
	}
	return opts
}

// History is one recorded run: the Config it is checked with (the broker's
// capacity and options, the format version), every call of every client
// sorted by call time, and, when it came from Run, the resolved Workload
// (and the injected fault's name, in fault tests).
type History struct {
	Config
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
	sub := History{Config: h.Config, Workload: h.Workload, Fault: h.Fault}
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
