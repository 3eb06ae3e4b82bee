package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/brokenassign"
	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/model"
	"github.com/f91dcac0/tributary/ringlog"
)

// The differential test runs the same operation sequence on engine and on the
// sequential reference model, both on one deterministic clock (internal/testclock),
// and compares every result, records on every field (Key, Headers, Time as
// an instant, Attempt), and after every call the whole observable state:
// Topics and Describe of every topic, and, every few calls, each inspection
// helper (log offsets, committed offsets, in-flight flags, attempts) and the
// model's own invariants. Sequences are decoded from bytes so that the
// random test and the fuzz target share one generator; on a mismatch the
// sequence is shrunk to a short failing one and printed.
//
// Every call of docs/contract.md is generated, and the additions
// MemberHandle.AppendPollPartition (against model.PollPartition) and
// Snapshot (against model.Snapshot, also compared every few calls), with
// valid and invalid arguments, on brokers built with random options (WithReplayWindow,
// WithAckTimeout, WithMaxMessageBytes, rarely an option out of range).
// Member liveness (rules 24–25): the session profile makes Heartbeat and
// Rejoin, on the broker and on a MemberHandle, and in three sequences of
// four sets WithSessionTimeout (a few milliseconds of the test clock, which
// Advance moves by whole milliseconds, so members are often last seen
// exactly the timeout before a call); every Describe compared carries
// LastSeen. The other profiles are as they were before it, without the
// option: rules 1–23 hold exactly there.
// Besides single calls the generator has three macros, each a run of
// ordinary calls compared one by one: Burst (many publishes to one
// partition), Drain (a group's members poll and ack until nothing is left,
// retrying some records and re-acking the offset just committed while the
// next is in flight) and Pump (bursts and drains of every group, so that
// partitions wrap their ring buffers and reach offsets in the thousands).
// Sequences come in six profiles (small capacities; many groups; large
// capacities; deep offsets; capacities beyond rule 1, with
// WithExtendedCapacity, whose logs are paged; and the session timeout); TestDiffGeneratorCoverage counts what the
// standard run reaches, so that coverage cannot silently regress.

// ---------------------------------------------------------------------------
// Configuration and operations.

// profile is the shape of a generated sequence.
type profile uint8

const (
	profSmall   profile = iota // capacity 1..4, every call, few names
	profGroups                 // capacity 1..8, up to 12 groups created and deleted
	profBig                    // capacity 257..1000: bursts and pumps wrap the ring
	profDeep                   // capacity 2..31 or 257..1000, long pumps: offsets in the thousands
	profHuge                   // capacity 1001..2600, WithExtendedCapacity: paged logs, pumps across pages
	profSession                // capacity 1..4, WithSessionTimeout(4..11 ms): expiry, heartbeats, rejoins
)

var profileNames = [...]string{"small", "groups", "big", "deep", "huge", "session"}

// profileSchedule maps a sequence's first byte (mod its length) to its
// profile: of 50, 32 small, 6 groups, 4 big, 1 deep, 1 huge and 6 session
// (a big, deep or huge sequence makes thousands of calls). A session
// sequence has as many bytes as a small one, so the others are the same
// sequences as in a schedule without the session profile.
var profileSchedule = [50]profile{
	3: profGroups, 13: profGroups, 23: profGroups, 33: profGroups, 43: profGroups, 47: profGroups,
	7: profBig, 17: profBig, 27: profBig, 37: profBig,
	49: profDeep,
	41: profHuge,
	5:  profSession, 11: profSession, 19: profSession, 29: profSession, 35: profSession, 45: profSession,
}

// diffConfig is what a sequence builds its two brokers with.
type diffConfig struct {
	profile    profile
	capacity   int32
	window     int32 // WithReplayWindow, when windowSet
	windowSet  bool
	ackTimeout time.Duration // WithAckTimeout, when ackSet
	ackSet     bool
	maxBytes   int // WithMaxMessageBytes, when maxSet
	maxSet     bool
	session    time.Duration // WithSessionTimeout, when sessionSet
	sessionSet bool
	nilOption  bool // a nil Option too: New must refuse
	extended   bool // WithExtendedCapacity (huge profile, but one sequence in 32 of it: both New refuse)
	budget     int  // the most calls to make (not decoded: callBudget, or fuzzCallBudget)
}

func (c diffConfig) String() string {
	s := fmt.Sprintf("%s profile, capacity %d", profileNames[c.profile], c.capacity)
	if c.windowSet {
		s += fmt.Sprintf(", WithReplayWindow(%d)", c.window)
	}
	if c.ackSet {
		s += fmt.Sprintf(", WithAckTimeout(%v)", c.ackTimeout)
	}
	if c.maxSet {
		s += fmt.Sprintf(", WithMaxMessageBytes(%d)", c.maxBytes)
	}
	if c.sessionSet {
		s += fmt.Sprintf(", WithSessionTimeout(%v)", c.session)
	}
	if c.nilOption {
		s += ", nil Option"
	}
	if c.extended {
		s += ", WithExtendedCapacity()"
	}
	return s
}

// engineOptions and modelOptions are c's options for each implementation,
// both on clock.
func (c diffConfig) engineOptions(clock *testclock.Clock) []engine.Option {
	opts := []engine.Option{engine.WithClock(clock.Now)}
	if c.windowSet {
		opts = append(opts, engine.WithReplayWindow(c.window))
	}
	if c.ackSet {
		opts = append(opts, engine.WithAckTimeout(c.ackTimeout))
	}
	if c.maxSet {
		opts = append(opts, engine.WithMaxMessageBytes(c.maxBytes))
	}
	if c.sessionSet {
		opts = append(opts, engine.WithSessionTimeout(c.session))
	}
	if c.nilOption {
		opts = append(opts, nil)
	}
	if c.extended {
		opts = append(opts, engine.WithExtendedCapacity())
	}
	return opts
}

func (c diffConfig) modelOptions(clock *testclock.Clock) []model.Option {
	opts := []model.Option{model.WithClock(clock.Now)}
	if c.windowSet {
		opts = append(opts, model.WithReplayWindow(c.window))
	}
	if c.ackSet {
		opts = append(opts, model.WithAckTimeout(c.ackTimeout))
	}
	if c.maxSet {
		opts = append(opts, model.WithMaxMessageBytes(c.maxBytes))
	}
	if c.sessionSet {
		opts = append(opts, model.WithSessionTimeout(c.session))
	}
	if c.nilOption {
		opts = append(opts, nil)
	}
	if c.extended {
		opts = append(opts, model.WithExtendedCapacity())
	}
	return opts
}

// op is one decoded call or macro. kind selects it; unused fields are zero.
type op struct {
	kind      string
	topic     string
	group     string
	member    string
	partition int32
	offset    int64
	// n is partitionCount (Create), maxRecords (Poll), count
	// (AddPartitions), publishes (Burst, Pump) or rounds (Drain).
	n       int32
	payload string
	key     string
	headers []engine.Header
	time    time.Time         // PublishMessage's Message.Time; zero: the broker clock
	assign  int               // CreateGroup, CreateGroupAt, SetAssignor: index in diffAssignors
	start   engine.GroupStart // CreateGroupAt: where the group starts (2: invalid)
	advance time.Duration     // Advance: how far the clock moves
	sel     byte              // macros: the pattern of messages, retries and re-acks
	handle  bool              // Heartbeat, Rejoin, Poll: through a MemberHandle

	// Aims, resolved against the model's state just before the call, so
	// that successful and interesting calls are common (and stay so while
	// the shrinker removes calls). aim, for Ack and Retry, targets record
	// aim-1 (modulo) of the latest non-empty poll, with that poll's group and
	// member (ownMember keeps the decoded member: a non-owner's call).
	// again, for Ack, repeats the latest successful ack. pick, for Poll,
	// Join, Leave and DeleteGroup, takes the group (pick-1, modulo) of the
	// topic's groups and, for Poll and Leave, one of its members. target, for Seek
	// and SetAssignor, takes the latest poll's group (and, for Seek, the
	// partition of one of its records). seek, for Seek, picks the offset
	// from the partition's state: 1 committed, 2 log start, 3 log end,
	// 4 log start − 1, 5 log end + 1, 6 the middle, 7 committed − 1; 0
	// keeps the decoded offset.
	aim       int
	ownMember bool
	again     bool
	pick      int
	target    bool
	seek      int
}

func (o op) String() string {
	switch o.kind {
	case "Create":
		return fmt.Sprintf("Create(%q, %d)", o.topic, o.n)
	case "Join", "Leave":
		return fmt.Sprintf("%s(%q, %q, %q)", o.kind, o.topic, o.group, o.member)
	case "Heartbeat", "Rejoin":
		if o.handle {
			return fmt.Sprintf("Member(%q, %q, %q).%s()", o.topic, o.group, o.member, o.kind)
		}
		return fmt.Sprintf("%s(%q, %q, %q)", o.kind, o.topic, o.group, o.member)
	case "Publish":
		return fmt.Sprintf("Publish(%q, %d, %q)", o.topic, o.partition, o.payload)
	case "PublishMessage":
		tm := "0"
		if !o.time.IsZero() {
			tm = o.time.Format(time.RFC3339Nano)
		}
		return fmt.Sprintf("PublishMessage(%q, %d, {Key: %q, Headers: %q, Payload: %q, Time: %s})", o.topic, o.partition, o.key, o.headers, o.payload, tm)
	case "Poll":
		if o.handle {
			return fmt.Sprintf("Member(%q, %q, %q).Poll(%d)", o.topic, o.group, o.member, o.n)
		}
		return fmt.Sprintf("Poll(%q, %q, %q, %d)", o.topic, o.group, o.member, o.n)
	case "PollPartition":
		return fmt.Sprintf("PollPartition(%q, %q, %q, %d)", o.topic, o.group, o.member, o.partition)
	case "CreateGroup", "SetAssignor":
		return fmt.Sprintf("%s(%q, %q, %s)", o.kind, o.topic, o.group, assignorName(o.assign))
	case "CreateGroupAt":
		return fmt.Sprintf("CreateGroupAt(%q, %q, %s, %v)", o.topic, o.group, assignorName(o.assign), o.start)
	case "DeleteGroup":
		return fmt.Sprintf("DeleteGroup(%q, %q)", o.topic, o.group)
	case "AddPartitions":
		return fmt.Sprintf("AddPartitions(%q, %d)", o.topic, o.n)
	case "Seek":
		return fmt.Sprintf("Seek(%q, %q, %d, %d)", o.topic, o.group, o.partition, o.offset)
	case "Describe", "Snapshot":
		return fmt.Sprintf("%s(%q)", o.kind, o.topic)
	case "Advance":
		return fmt.Sprintf("clock.Advance(%v)", o.advance)
	case "Burst":
		return fmt.Sprintf("Burst(%q, %d, %d publishes, pattern %d)", o.topic, o.partition, o.n, o.sel)
	case "Drain":
		return fmt.Sprintf("Drain(%q, %q, %d rounds, pattern %d)", o.topic, o.group, o.n, o.sel)
	case "Pump":
		return fmt.Sprintf("Pump(%q, %d, %d publishes, pattern %d)", o.topic, o.partition, o.n, o.sel)
	default: // Ack, Retry
		return fmt.Sprintf("%s(%q, %q, %q, %d, %d)", o.kind, o.topic, o.group, o.member, o.partition, o.offset)
	}
}

// diffUserAssignor is a user's assignor that answers garbage for most
// inputs, deterministically: one member gets everything; an even number of
// members on an even number of partitions gets a valid reversed round robin;
// otherwise the answer is too short, has an empty owner, names a stranger,
// or the assignor panics. Both implementations get the same instance.
type diffUserAssignor struct{}

func (diffUserAssignor) Name() string { return "diff-user" }

func (diffUserAssignor) Assign(members, previous []string) []string {
	n, p := len(members), len(previous)
	owner := make([]string, p)
	if n == 1 || n%2 == 0 && p%2 == 0 {
		for i := range owner {
			owner[i] = members[n-1-i%n]
		}
		return owner
	}
	switch (n + p) % 4 {
	case 0:
		return owner[:p-1] // too short
	case 1:
		return owner // "" owners
	case 2:
		for i := range owner {
			owner[i] = "stranger"
		}
		return owner
	default:
		panic("diff-user assignor: no answer")
	}
}

// diffAssignors are the assignors CreateGroup and SetAssignor are given; nil
// is an invalid argument.
var diffAssignors = []engine.Assignor{nil, engine.RoundRobin, engine.Range, engine.Sticky, diffUserAssignor{}}

// assignorByte weights the assignors: nil 1/16, the built-ins 13/16, the
// user's 2/16.
func assignorByte(b byte) int {
	switch b %= 16; {
	case b == 0:
		return 0
	case b <= 4:
		return 1
	case b <= 8:
		return 2
	case b <= 13:
		return 3
	default:
		return 4
	}
}

func assignorName(i int) string {
	if diffAssignors[i] == nil {
		return "nil"
	}
	return diffAssignors[i].Name()
}

// byteSource hands out bytes of a fuzz input, then zeros.
type byteSource struct{ b []byte }

func (s *byteSource) next() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *byteSource) pick(xs ...string) string { return xs[int(s.next())%len(xs)] }

// Mostly valid names, some invalid or unknown, so that errors and absent
// groups and members are exercised alongside the happy path.
var (
	topicNames    = []string{"t0", "t0", "t0", "t1", "t1", "nope", "bad.id", ""}
	bigTopicNames = []string{"t0", "t0", "t0", "t0", "t0", "t1", "t1", "nope"}
	groupNames    = []string{"g0", "g0", "g1", "g1", "G", "g 2", strings.Repeat("g", 65)}
	// manyGroupNames has twelve valid names (and two invalid ones): more
	// than two padding units of cursors.
	manyGroupNames = []string{"g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9", "g10", "g11", "g0", "g1", "g.x", ""}
	bigGroupNames  = []string{"g0", "g0", "g0", "g0", "g1", "g1", "G", ""}
	memberNames    = []string{"a", "a", "b", "b", "c", "B", "a10", "a9", "é", ""}
	bigMemberNames = []string{"a", "a", "b", "b", "c", "B", "a9", ""}
	keys           = []string{"", "", "k", "key-1", "\x00\xff", strings.Repeat("k", 20)}
	headerSets     = [][]engine.Header{
		nil, nil, {}, {{Key: "a", Value: "1"}}, {{Key: "a", Value: "1"}, {Key: "a", Value: "2"}},
		{{Key: "", Value: ""}}, {{Key: "h", Value: strings.Repeat("v", 10)}},
	}
	times = []time.Time{
		{}, {}, {}, {},
		time.Unix(0, 0),                          // the Unix epoch: not the zero Time
		time.Unix(0, 0).Add(-1),                  // before it
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), // a nanosecond after the zero Time
		testclock.Epoch.Add(-time.Hour).In(time.FixedZone("X", 3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), // beyond Unix nanoseconds
	}
)

// kindWeights are the relative frequencies of the kinds per profile.
var kindWeights = [...][]struct {
	kind string
	w    int
}{
	profSmall: {
		{"Create", 2}, {"Join", 6}, {"Leave", 2}, {"Publish", 7}, {"PublishMessage", 3}, {"Poll", 8},
		{"Ack", 8}, {"Retry", 3}, {"CreateGroup", 2}, {"DeleteGroup", 2}, {"SetAssignor", 3},
		{"AddPartitions", 1}, {"Seek", 3}, {"Describe", 1}, {"Advance", 3}, {"Burst", 1}, {"Drain", 1},
		{"PollPartition", 3}, {"Snapshot", 1}, {"CreateGroupAt", 2},
	},
	profGroups: {
		{"Create", 1}, {"Join", 8}, {"Leave", 3}, {"Publish", 5}, {"PublishMessage", 2}, {"Poll", 6},
		{"Ack", 6}, {"Retry", 2}, {"CreateGroup", 12}, {"DeleteGroup", 4}, {"SetAssignor", 2},
		{"AddPartitions", 1}, {"Seek", 2}, {"Describe", 1}, {"Advance", 1}, {"Burst", 1}, {"Drain", 2},
		{"PollPartition", 2}, {"Snapshot", 1}, {"CreateGroupAt", 6},
	},
	profBig: {
		{"Create", 1}, {"Join", 4}, {"Leave", 2}, {"Publish", 3}, {"PublishMessage", 2}, {"Poll", 4},
		{"Ack", 4}, {"Retry", 2}, {"CreateGroup", 1}, {"DeleteGroup", 1}, {"SetAssignor", 2},
		{"AddPartitions", 1}, {"Seek", 3}, {"Describe", 1}, {"Advance", 2}, {"Burst", 3}, {"Drain", 3}, {"Pump", 3},
		{"PollPartition", 2}, {"Snapshot", 1}, {"CreateGroupAt", 1},
	},
	profDeep: {
		{"Join", 3}, {"Publish", 2}, {"PublishMessage", 1}, {"Poll", 2}, {"Ack", 2},
		{"Retry", 1}, {"DeleteGroup", 1}, {"SetAssignor", 1}, {"Seek", 2}, {"Advance", 2},
		{"Burst", 1}, {"Drain", 2}, {"Pump", 4},
	},
	profHuge: {
		{"Join", 3}, {"Leave", 1}, {"Publish", 2}, {"PublishMessage", 1}, {"Poll", 2}, {"Ack", 2},
		{"Retry", 1}, {"CreateGroup", 1}, {"DeleteGroup", 1}, {"Seek", 3}, {"Describe", 1},
		{"Advance", 3}, {"Burst", 2}, {"Drain", 2}, {"Pump", 4}, {"Snapshot", 1},
	},
	profSession: {
		{"Create", 1}, {"Join", 8}, {"Leave", 1}, {"Publish", 9}, {"PublishMessage", 2}, {"Poll", 12},
		{"Ack", 5}, {"Retry", 3}, {"CreateGroup", 1}, {"DeleteGroup", 2}, {"SetAssignor", 3},
		{"AddPartitions", 1}, {"Seek", 1}, {"Describe", 1}, {"Advance", 7}, {"Burst", 1}, {"Drain", 1},
		{"PollPartition", 2}, {"Snapshot", 1}, {"CreateGroupAt", 1}, {"Heartbeat", 6}, {"Rejoin", 6},
	},
}

// decode turns bytes into a configuration and a sequence of operations. The
// first bytes choose the profile, the capacity and the options; the first
// operation creates topic t0; every further operation takes a few bytes.
func decode(data []byte) (diffConfig, []op) {
	s := &byteSource{b: data}
	c := diffConfig{budget: callBudget}
	c.profile = profileSchedule[int(s.next())%len(profileSchedule)]
	b1, b2 := s.next(), s.next()
	wide := 257 + int32((int(b1)<<8|int(b2))%744) // 257..1000
	switch c.profile {
	case profSmall:
		c.capacity = int32(b1%4) + 1
	case profGroups:
		c.capacity = int32(b1%8) + 1
	case profBig:
		c.capacity = wide
	case profDeep:
		c.capacity = wide
		if b1%2 == 0 {
			c.capacity = 2 + int32(b2%30)
		}
	case profHuge:
		c.capacity = 1001 + int32((int(b1)<<8|int(b2))%1600) // 1001..2600
		c.extended = b2%32 != 0
	case profSession:
		c.capacity = int32(b1%4) + 1
		c.session, c.sessionSet = time.Duration(4+b2%8)*time.Millisecond, true
		switch b2 / 8 % 32 {
		case 0:
			c.session = 0 // WithSessionTimeout(0): out of range
		case 1:
			c.session = -time.Millisecond
		case 2, 3, 4, 5, 6, 7, 8, 9:
			c.session, c.sessionSet = 0, false // Heartbeat and Rejoin without the option
		}
	}
	switch w := s.next(); {
	case w == 255:
		c.window, c.windowSet = c.capacity+1, true // out of range
	case w%4 == 0:
		c.window, c.windowSet = int32(w/4)%(c.capacity+1), true
	case w%4 == 1:
		c.windowSet = true // WithReplayWindow(0): rule 13 exactly
	}
	switch a := s.next(); {
	case a == 255:
		c.ackSet = true // WithAckTimeout(0): out of range
	case a == 251:
		c.ackTimeout, c.ackSet = -time.Millisecond, true
	case a%3 == 0:
		c.ackTimeout, c.ackSet = time.Duration(1+a/4%4)*time.Millisecond, true
	}
	switch x := s.next(); {
	case x == 255:
		c.maxSet = true // WithMaxMessageBytes(0): out of range
	case x == 254:
		c.nilOption = true
	case x%4 == 0:
		c.maxBytes, c.maxSet = 1+int(x/4%16), true
		if c.profile >= profBig {
			c.maxBytes += 8 // most of the macros' messages pass
		}
	}
	if c.profile == profSession && !c.ackSet && b1%2 == 0 {
		// Half the session sequences without an ack timeout get one: its
		// redeliveries and the expiry's cancellations meet.
		c.ackTimeout, c.ackSet = time.Duration(1+b1/2%4)*time.Millisecond, true
	}
	parts := int32(s.next()%4) + 1
	if c.profile == profDeep || c.profile == profHuge {
		parts = parts%2 + 1
	}
	ops := []op{{kind: "Create", topic: "t0", n: parts}}
	if c.profile >= profBig {
		// A consumer from the start, so that pumps can drain.
		ops = append(ops, op{kind: "Join", topic: "t0", group: "g0", member: "a"})
	}
	for len(s.b) > 0 {
		ops = append(ops, decodeOp(s, c))
	}
	return c, ops
}

// decodeOp decodes one operation for a sequence of configuration c.
func decodeOp(s *byteSource, c diffConfig) op {
	weights := kindWeights[c.profile]
	total := 0
	for _, kw := range weights {
		total += kw.w
	}
	k := int(s.next()) % total
	var o op
	for _, kw := range weights {
		if k < kw.w {
			o.kind = kw.kind
			break
		}
		k -= kw.w
	}
	topics, groups, members := topicNames, groupNames, memberNames
	switch c.profile {
	case profGroups:
		topics, groups = bigTopicNames, manyGroupNames
	case profBig, profDeep, profHuge:
		topics, groups, members = bigTopicNames, bigGroupNames, bigMemberNames
	}
	o.topic = s.pick(topics...)
	partition := func() int32 { return int32(s.next()%6) - 1 } // -1..4: -1 invalid, high ones often
	switch o.kind {
	case "Create":
		o.n = int32(s.next()%6) - 1 // -1..4, so 0 and -1 are invalid
	case "Join", "Leave":
		o.group, o.member = s.pick(groups...), s.pick(members...)
		if a := s.next(); a%3 != 0 {
			o.pick = 1 + int(a)
		}
	case "Heartbeat", "Rejoin":
		o.group, o.member = s.pick(groups...), s.pick(members...)
		a := s.next()
		if a%4 != 0 {
			o.pick = 1 + int(a) // a current member, mostly
		}
		o.handle = a/4%3 == 0
	case "Publish", "PublishMessage":
		o.partition = partition()
		if p := s.next(); p%16 != 0 {
			o.payload = fmt.Sprintf("p%d", p)
		}
		if o.kind == "PublishMessage" {
			o.key = s.pick(keys...)
			o.headers = headerSets[int(s.next())%len(headerSets)]
			o.time = times[int(s.next())%len(times)]
		}
	case "Poll":
		o.group, o.member = s.pick(groups...), s.pick(members...)
		o.n = int32(s.next() % 5) // 0..4, 0 invalid
		if s.next()%16 == 0 {
			o.n = 64 + o.n%2 // 64, or 65: invalid
		}
		if a := s.next(); a%4 != 0 {
			o.pick = 1 + int(a)
		}
	case "PollPartition":
		o.group, o.member = s.pick(groups...), s.pick(members...)
		o.partition = partition()
		if a := s.next(); a%4 != 0 {
			o.pick = 1 + int(a) // and, unless pick%3 == 0, a partition the member owns
		}
	case "Ack", "Retry":
		o.group, o.member = s.pick(groups...), s.pick(members...)
		o.partition = partition()
		o.offset = int64(s.next()%8) - 1
		switch a := s.next(); a % 8 {
		case 0: // as decoded
		case 4:
			o.again = o.kind == "Ack"
			o.aim = int(a) // a Retry aims
		default:
			o.aim, o.ownMember = int(a), a%8 == 7
		}
	case "CreateGroup", "SetAssignor":
		o.group = s.pick(groups...)
		a := s.next()
		o.assign = assignorByte(a)
		o.target = o.kind == "SetAssignor" && a/16%4 != 0
	case "CreateGroupAt":
		o.group = s.pick(groups...)
		o.assign = assignorByte(s.next())
		switch st := s.next() % 8; {
		case st == 0:
			o.start = 2 // neither: invalid
		case st < 3:
			o.start = engine.StartEarliest
		default:
			o.start = engine.StartLatest
		}
	case "DeleteGroup":
		o.group = s.pick(groups...)
		if a := s.next(); a%2 != 0 {
			o.pick = 1 + int(a)
		}
	case "AddPartitions":
		switch n := s.next() % 16; {
		case n == 0:
			o.n = 0
		case n == 1:
			o.n = -1
		case n == 2:
			o.n = 64
		default:
			o.n = int32(n%3) + 1
		}
	case "Seek":
		o.group = s.pick(groups...)
		o.partition = partition()
		o.offset = int64(s.next()%8) - 1
		t := s.next()
		o.target, o.seek = t%2 == 0, int(t/2%8)
		o.sel = t / 16
	case "Describe", "Snapshot":
	case "Advance":
		o.advance = time.Duration(s.next()%8) * time.Millisecond
	case "Burst":
		o.partition = int32(s.next() % 4)
		o.n = 1 + int32(int(s.next())*int(c.capacity+1)/256) // 1..capacity+1
		if c.capacity > 256 {
			o.n = 1 + o.n/4
		}
		o.sel = s.next()
	case "Drain":
		o.group = s.pick(groups...)
		o.n = 2*c.capacity + 4
		o.sel = s.next()
	case "Pump":
		o.partition = int32(s.next() % 4 / 3) // 0 three times in four
		switch n := int32(s.next()); c.profile {
		case profDeep:
			o.n = 700 + 4*n // 700..1720
		default:
			o.n = c.capacity + 1 + n*c.capacity/256 // just past the capacity: the ring wraps
		}
		o.sel = s.next()
	}
	return o
}

// ---------------------------------------------------------------------------
// Calls and their outcomes.

// outcome is a call's result in the engine's types: the model's records
// and descriptions are converted. Every field is compared, also on errors:
// a failed call must return zero values (Publish: -1).
type outcome struct {
	Err     string // errClass of the error
	Bool    bool
	Int     int64
	Parts   []int32
	Records []engine.Record
	Desc    engine.TopicDescription
	Snap    [][]engine.Record // Snapshot's records; Desc holds its description
}

// sameOutcome compares two outcomes exactly, records with sameRecord.
func sameOutcome(a, b outcome) bool {
	return a.Err == b.Err && a.Bool == b.Bool && a.Int == b.Int &&
		(a.Parts == nil) == (b.Parts == nil) && slices.Equal(a.Parts, b.Parts) &&
		sameRecords(a.Records, b.Records) && reflect.DeepEqual(a.Desc, b.Desc) &&
		(a.Snap == nil) == (b.Snap == nil) && slices.EqualFunc(a.Snap, b.Snap, sameRecords)
}

// errClass names the sentinels err wraps, of either implementation, or
// gives its text when it wraps none.
func errClass(err error) string {
	if err == nil {
		return ""
	}
	var class []string
	for _, s := range []struct {
		name string
		errs []error
	}{
		{"invalid", []error{engine.ErrInvalidArgument, model.ErrInvalidArgument}},
		{"out-of-range", []error{engine.ErrOffsetOutOfRange, model.ErrOffsetOutOfRange}},
		{"not-empty", []error{engine.ErrGroupNotEmpty, model.ErrGroupNotEmpty}},
		{"invalid-assignment", []error{engine.ErrInvalidAssignment, model.ErrInvalidAssignment}},
		{"unknown-group", []error{engine.ErrUnknownGroup, model.ErrUnknownGroup}},
	} {
		for _, e := range s.errs {
			if errors.Is(err, e) {
				class = append(class, s.name)
				break
			}
		}
	}
	if class == nil {
		return "other: " + err.Error()
	}
	return strings.Join(class, "+")
}

// subject is the engine's API as the differential test drives it, so that a
// deliberately broken wrapper can be checked too.
type subject interface {
	Create(topic string, partitionCount int32) (bool, error)
	Join(topic, group, member string) ([]int32, error)
	Leave(topic, group, member string) (bool, error)
	Publish(topic string, partition int32, payload string) (int64, error)
	PublishMessage(topic string, partition int32, m engine.Message) (int64, error)
	Poll(topic, group, member string, maxRecords int32) ([]engine.Record, error)
	Ack(topic, group, member string, partition int32, offset int64) (bool, error)
	Retry(topic, group, member string, partition int32, offset int64) (bool, error)
	CreateGroup(topic, group string, a engine.Assignor) (bool, error)
	CreateGroupAt(topic, group string, a engine.Assignor, start engine.GroupStart) (bool, error)
	DeleteGroup(topic, group string) (bool, error)
	SetAssignor(topic, group string, a engine.Assignor) (bool, error)
	AddPartitions(topic string, count int32) (int32, error)
	Seek(topic, group string, partition int32, offset int64) (bool, error)
	Describe(topic string) (engine.TopicDescription, error)
	Snapshot(topic string) (engine.TopicSnapshot, error)
	Heartbeat(topic, group, member string) (bool, error)
	Rejoin(topic, group, member string) ([]int32, error)
	Topic(topic string) (*engine.TopicHandle, error) // for AppendPollPartition, Heartbeat and Rejoin
	Topics() []string
	hInspector // PartitionCount, LogStartOffset, LogEndOffset, Committed, InFlight, Attempts
}

// newSubject builds the implementation under test.
type newSubject func(capacity int32, opts ...engine.Option) (subject, error)

func realEngine(capacity int32, opts ...engine.Option) (subject, error) {
	b, err := engine.New(capacity, opts...)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func engineCall(b subject, o op) outcome {
	var (
		out outcome
		err error
	)
	switch o.kind {
	case "Create":
		out.Bool, err = b.Create(o.topic, o.n)
	case "Join":
		out.Parts, err = b.Join(o.topic, o.group, o.member)
	case "Leave":
		out.Bool, err = b.Leave(o.topic, o.group, o.member)
	case "Heartbeat":
		if o.handle {
			out.Bool, err = engineHeartbeat(b, o)
		} else {
			out.Bool, err = b.Heartbeat(o.topic, o.group, o.member)
		}
	case "Rejoin":
		if o.handle {
			out.Parts, err = engineRejoin(b, o)
		} else {
			out.Parts, err = b.Rejoin(o.topic, o.group, o.member)
		}
	case "Publish":
		out.Int, err = b.Publish(o.topic, o.partition, o.payload)
	case "PublishMessage":
		out.Int, err = b.PublishMessage(o.topic, o.partition, engine.Message{Key: o.key, Headers: o.headers, Payload: o.payload, Time: o.time})
	case "Poll":
		if o.handle {
			out.Records, err = enginePoll(b, o)
		} else {
			out.Records, err = b.Poll(o.topic, o.group, o.member, o.n)
		}
	case "PollPartition":
		out.Records, err = enginePollPartition(b, o)
	case "Ack":
		out.Bool, err = b.Ack(o.topic, o.group, o.member, o.partition, o.offset)
	case "Retry":
		out.Bool, err = b.Retry(o.topic, o.group, o.member, o.partition, o.offset)
	case "CreateGroup":
		out.Bool, err = b.CreateGroup(o.topic, o.group, diffAssignors[o.assign])
	case "CreateGroupAt":
		out.Bool, err = b.CreateGroupAt(o.topic, o.group, diffAssignors[o.assign], o.start)
	case "DeleteGroup":
		out.Bool, err = b.DeleteGroup(o.topic, o.group)
	case "SetAssignor":
		out.Bool, err = b.SetAssignor(o.topic, o.group, diffAssignors[o.assign])
	case "AddPartitions":
		var n int32
		n, err = b.AddPartitions(o.topic, o.n)
		out.Int = int64(n)
	case "Seek":
		out.Bool, err = b.Seek(o.topic, o.group, o.partition, o.offset)
	case "Describe":
		out.Desc, err = b.Describe(o.topic)
		utcLastSeen(&out.Desc)
	case "Snapshot":
		var s engine.TopicSnapshot
		s, err = b.Snapshot(o.topic)
		out.Desc, out.Snap = s.TopicDescription, s.Records
		utcLastSeen(&out.Desc)
	default:
		panic("engineCall: not a call: " + o.kind)
	}
	out.Err = errClass(err)
	return out
}

// utcLastSeen puts d's last-seen instants in UTC, so that descriptions
// compare them as instants (reflect.DeepEqual would see the location).
func utcLastSeen(d *engine.TopicDescription) {
	for i := range d.Groups {
		for j, t := range d.Groups[i].LastSeen {
			d.Groups[i].LastSeen[j] = t.UTC()
		}
	}
}

// memberHandle resolves o's member handle on b (an invalid identifier or
// unknown topic is the handle's error).
func memberHandle(b subject, o op) (*engine.MemberHandle, error) {
	th, err := b.Topic(o.topic)
	if err != nil {
		return nil, err
	}
	return th.Member(o.group, o.member)
}

// engineHeartbeat is o, a Heartbeat, through a member handle.
func engineHeartbeat(b subject, o op) (bool, error) {
	m, err := memberHandle(b, o)
	if err != nil {
		return false, err
	}
	return m.Heartbeat()
}

// engineRejoin is o, a Rejoin, through a member handle.
func engineRejoin(b subject, o op) ([]int32, error) {
	m, err := memberHandle(b, o)
	if err != nil {
		return nil, err
	}
	return m.Rejoin()
}

// enginePoll is o, a Poll, through a member handle.
func enginePoll(b subject, o op) ([]engine.Record, error) {
	m, err := memberHandle(b, o)
	if err != nil {
		return nil, err
	}
	return m.Poll(o.n)
}

// pollPartitionDst is what enginePollPartition hands AppendPollPartition as
// dst: a record of the caller's, which must stay first and untouched.
var pollPartitionDst = engine.Record{Topic: "caller's", Partition: -1, Offset: -1}

// enginePollPartition is o, a PollPartition, on b through a member handle:
// AppendPollPartition after the caller's record. Its records are those
// appended, non-nil on success as the model's; on error, nil, and nothing
// may have been appended. A clobbered or missing caller's record is an
// error of its own.
func enginePollPartition(b subject, o op) ([]engine.Record, error) {
	th, err := b.Topic(o.topic)
	if err != nil {
		return nil, err
	}
	m, err := th.Member(o.group, o.member)
	if err != nil {
		return nil, err
	}
	got, err := m.AppendPollPartition([]engine.Record{pollPartitionDst}, o.partition)
	switch {
	case len(got) == 0 || !reflect.DeepEqual(got[0], pollPartitionDst):
		return nil, fmt.Errorf("AppendPollPartition lost the caller's record: %v", got)
	case err != nil && len(got) != 1:
		return nil, fmt.Errorf("AppendPollPartition appended %v with error %w", got[1:], err)
	case err != nil:
		return nil, err
	}
	return got[1:], nil
}

func modelCall(b *model.Broker, o op) outcome {
	var (
		out outcome
		err error
	)
	switch o.kind {
	case "Create":
		out.Bool, err = b.Create(o.topic, o.n)
	case "Join":
		out.Parts, err = b.Join(o.topic, o.group, o.member)
	case "Leave":
		out.Bool, err = b.Leave(o.topic, o.group, o.member)
	case "Heartbeat":
		out.Bool, err = b.Heartbeat(o.topic, o.group, o.member)
	case "Rejoin":
		out.Parts, err = b.Rejoin(o.topic, o.group, o.member)
	case "Publish":
		out.Int, err = b.Publish(o.topic, o.partition, o.payload)
	case "PublishMessage":
		var hs []model.Header
		if o.headers != nil {
			hs = make([]model.Header, len(o.headers))
			for i, h := range o.headers {
				hs[i] = model.Header{Key: h.Key, Value: h.Value}
			}
		}
		out.Int, err = b.PublishMessage(o.topic, o.partition, model.Message{Key: o.key, Headers: hs, Payload: o.payload, Time: o.time})
	case "Poll":
		var recs []model.Record
		recs, err = b.Poll(o.topic, o.group, o.member, o.n)
		out.Records = engineRecords(recs)
	case "PollPartition":
		var recs []model.Record
		recs, err = b.PollPartition(o.topic, o.group, o.member, o.partition)
		out.Records = engineRecords(recs)
	case "Ack":
		out.Bool, err = b.Ack(o.topic, o.group, o.member, o.partition, o.offset)
	case "Retry":
		out.Bool, err = b.Retry(o.topic, o.group, o.member, o.partition, o.offset)
	case "CreateGroup":
		out.Bool, err = b.CreateGroup(o.topic, o.group, diffAssignors[o.assign])
	case "CreateGroupAt":
		out.Bool, err = b.CreateGroupAt(o.topic, o.group, diffAssignors[o.assign], model.GroupStart(o.start))
	case "DeleteGroup":
		out.Bool, err = b.DeleteGroup(o.topic, o.group)
	case "SetAssignor":
		out.Bool, err = b.SetAssignor(o.topic, o.group, diffAssignors[o.assign])
	case "AddPartitions":
		var n int32
		n, err = b.AddPartitions(o.topic, o.n)
		out.Int = int64(n)
	case "Seek":
		out.Bool, err = b.Seek(o.topic, o.group, o.partition, o.offset)
	case "Describe":
		var d model.TopicDescription
		d, err = b.Describe(o.topic)
		out.Desc = engineDescription(d)
	case "Snapshot":
		var s model.TopicSnapshot
		s, err = b.Snapshot(o.topic)
		out.Desc, out.Snap = engineSnapshot(s)
	default:
		panic("modelCall: not a call: " + o.kind)
	}
	out.Err = errClass(err)
	return out
}

// engineRecords is model records as engine records, nil kept nil.
func engineRecords(recs []model.Record) []engine.Record {
	if recs == nil {
		return nil
	}
	out := make([]engine.Record, len(recs))
	for i, r := range recs {
		out[i] = engineRecord(r)
	}
	return out
}

// engineSnapshot is a model snapshot in the engine's types, nil slices kept
// nil: its description and its records.
func engineSnapshot(s model.TopicSnapshot) (engine.TopicDescription, [][]engine.Record) {
	var recs [][]engine.Record
	if s.Records != nil {
		recs = make([][]engine.Record, len(s.Records))
		for p, rs := range s.Records {
			recs[p] = engineRecords(rs)
		}
	}
	return engineDescription(s.TopicDescription), recs
}

// engineDescription is a model description in the engine's types, nil
// slices kept nil.
func engineDescription(d model.TopicDescription) engine.TopicDescription {
	out := engine.TopicDescription{Topic: d.Topic}
	if d.Partitions != nil {
		out.Partitions = make([]engine.PartitionDescription, len(d.Partitions))
		for i, p := range d.Partitions {
			out.Partitions[i] = engine.PartitionDescription{Partition: p.Partition, LogStartOffset: p.LogStartOffset, LogEndOffset: p.LogEndOffset}
		}
	}
	if d.Groups != nil {
		out.Groups = make([]engine.GroupDescription, len(d.Groups))
		for i, g := range d.Groups {
			eg := engine.GroupDescription{Group: g.Group, Assignor: g.Assignor, Members: g.Members}
			if g.LastSeen != nil {
				eg.LastSeen = make([]time.Time, len(g.LastSeen))
				for j, t := range g.LastSeen {
					eg.LastSeen[j] = t.UTC()
				}
			}
			if g.Partitions != nil {
				eg.Partitions = make([]engine.GroupPartition, len(g.Partitions))
				for j, p := range g.Partitions {
					eg.Partitions[j] = engine.GroupPartition{
						Partition: p.Partition, Owner: p.Owner, Committed: p.Committed,
						InFlight: p.InFlight, Attempts: p.Attempts, Lag: p.Lag,
					}
				}
			}
			out.Groups[i] = eg
		}
	}
	return out
}

// sameDescription reports whether an engine description equals a model one
// field by field (as reflect.DeepEqual of e and engineDescription(m), which
// it is faster than).
func sameDescription(e engine.TopicDescription, m model.TopicDescription) bool {
	if e.Topic != m.Topic || (e.Partitions == nil) != (m.Partitions == nil) || len(e.Partitions) != len(m.Partitions) ||
		(e.Groups == nil) != (m.Groups == nil) || len(e.Groups) != len(m.Groups) {
		return false
	}
	for i, p := range e.Partitions {
		if q := m.Partitions[i]; p.Partition != q.Partition || p.LogStartOffset != q.LogStartOffset || p.LogEndOffset != q.LogEndOffset {
			return false
		}
	}
	for i, g := range e.Groups {
		h := m.Groups[i]
		if g.Group != h.Group || g.Assignor != h.Assignor || (g.Members == nil) != (h.Members == nil) || !slices.Equal(g.Members, h.Members) ||
			(g.Partitions == nil) != (h.Partitions == nil) || len(g.Partitions) != len(h.Partitions) ||
			(g.LastSeen == nil) != (h.LastSeen == nil) || !slices.EqualFunc(g.LastSeen, h.LastSeen, time.Time.Equal) {
			return false
		}
		for j, p := range g.Partitions {
			if q := h.Partitions[j]; p.Partition != q.Partition || p.Owner != q.Owner || p.Committed != q.Committed ||
				p.InFlight != q.InFlight || p.Attempts != q.Attempts || p.Lag != q.Lag {
				return false
			}
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Running a sequence.

// callBudget bounds the calls of one sequence (macros expand to many);
// fuzzCallBudget is the fuzz target's, so that each input runs fast.
const (
	callBudget     = 25000
	fuzzCallBudget = 2000
)

// helperEvery is how often, in calls, the state comparison also goes
// through every inspection helper and the model's invariants.
const helperEvery = 32

// snapshotEvery is how often, in calls, the state comparison also compares
// Snapshot (records included): a multiple of helperEvery, rarer because a
// snapshot of a big profile copies thousands of records.
const snapshotEvery = 8 * helperEvery

// traceLen is how many of the latest calls a report lists.
const traceLen = 12

// runner runs one sequence on the model and, unless it is nil, on the
// engine, comparing as it goes.
type runner struct {
	t     testing.TB
	cfg   diffConfig
	e     subject // nil: the model alone (coverage counting)
	m     *model.Broker
	clock *testclock.Clock
	cov   *coverage // nil: no counting
	calls int
	trace [traceLen]op // the latest calls, trace[calls%traceLen] the next

	lastPoll op              // the latest poll that returned records
	lastRecs []engine.Record // and its records
	lastAck  op              // the latest successful ack
	haveAck  bool
	maxGroup map[string]int // per topic: most groups it ever had at once (the engine's cursor slots)
	// rooms holds, per partition the model says is full, the engine's Room
	// channel taken after the call that found it so (sameRoom).
	rooms map[roomKey]<-chan struct{}
}

// roomKey names one partition of one topic.
type roomKey struct {
	topic     string
	partition int32
}

// newRunner builds the brokers of cfg. It returns a divergence when the
// two New calls disagree, and a nil runner when both refuse the options.
func newRunner(t testing.TB, mk newSubject, cfg diffConfig, cov *coverage) (*runner, string) {
	clock := testclock.New()
	m, merr := model.New(cfg.capacity, cfg.modelOptions(clock)...)
	r := &runner{t: t, cfg: cfg, m: m, clock: clock, cov: cov, maxGroup: map[string]int{}, rooms: map[roomKey]<-chan struct{}{}}
	if mk != nil {
		e, eerr := mk(cfg.capacity, cfg.engineOptions(clock)...)
		if errClass(eerr) != errClass(merr) {
			return nil, fmt.Sprintf("New(%v): engine error %v, model error %v", cfg, eerr, merr)
		}
		r.e = e
	}
	if merr != nil {
		return nil, ""
	}
	return r, ""
}

// run runs ops, resolving each in place (so that a report shows the calls
// as made), and returns the index of the first operation whose result or
// resulting state differs, with a description, or -1 and "".
func (r *runner) run(ops []op) (int, string) {
	for i := range ops {
		if r.calls >= r.cfg.budget {
			break
		}
		ops[i] = r.resolve(ops[i])
		if msg := r.exec(ops[i]); msg != "" {
			return i, fmt.Sprintf("op %d %v: %s", i, ops[i], msg)
		}
	}
	return -1, ""
}

// resolve fills in the aimed fields of o from the model's state.
func (r *runner) resolve(o op) op {
	switch o.kind {
	case "Ack", "Retry":
		switch {
		case o.again && r.haveAck:
			a := r.lastAck
			o.topic, o.group, o.member, o.partition, o.offset = a.topic, a.group, a.member, a.partition, a.offset
		case o.aim != 0 && len(r.lastRecs) > 0:
			rec := r.lastRecs[(o.aim-1)%len(r.lastRecs)]
			o.topic, o.group = r.lastPoll.topic, r.lastPoll.group
			if !o.ownMember {
				o.member = r.lastPoll.member
			}
			o.partition, o.offset = rec.Partition, rec.Offset
		}
	case "Poll", "PollPartition", "Join", "Leave", "DeleteGroup", "Heartbeat", "Rejoin":
		if o.pick == 0 {
			break
		}
		groups, err := r.m.Groups(o.topic)
		if err != nil || len(groups) == 0 {
			break
		}
		if o.kind == "Join" {
			o.group = groups[(o.pick-1)%len(groups)]
			break
		}
		// Poll, Leave, Heartbeat and Rejoin: the first group from pick-1
		// with members, and one of them; DeleteGroup: the first without
		// (it can be deleted).
		for i := range groups {
			g := groups[(o.pick-1+i)%len(groups)]
			members, _ := r.m.Members(o.topic, g)
			if o.kind == "DeleteGroup" {
				if len(members) == 0 {
					o.group = g
					break
				}
				continue
			}
			if len(members) > 0 {
				o.group, o.member = g, members[(o.pick-1)/7%len(members)]
				if a, err := r.m.Assignment(o.topic, g); err == nil && o.kind == "PollPartition" && o.pick%3 != 0 {
					if own := a[o.member]; len(own) > 0 {
						o.partition = own[o.pick/3%len(own)]
					}
				}
				break
			}
		}
	case "SetAssignor":
		if o.target && len(r.lastRecs) > 0 {
			o.topic, o.group = r.lastPoll.topic, r.lastPoll.group
		}
	case "Seek":
		if o.target && len(r.lastRecs) > 0 {
			o.topic, o.group = r.lastPoll.topic, r.lastPoll.group
			o.partition = r.lastRecs[int(o.sel)%len(r.lastRecs)].Partition
		}
		start, err1 := r.m.LogStartOffset(o.topic, o.partition)
		end, err2 := r.m.LogEndOffset(o.topic, o.partition)
		committed, err3 := r.m.Committed(o.topic, o.group, o.partition)
		if err3 != nil {
			committed = start
		}
		if err1 == nil && err2 == nil {
			switch o.seek {
			case 1:
				o.offset = committed
			case 2:
				o.offset = start
			case 3:
				o.offset = end
			case 4:
				o.offset = start - 1 // out of range, or negative: invalid
			case 5:
				o.offset = end + 1 // out of range
			case 6:
				o.offset = (start + end) / 2
			case 7:
				o.offset = max(committed-1, 0) // replay one record, if retained
			}
		}
	}
	o.aim, o.ownMember, o.again, o.pick, o.target, o.seek = 0, false, false, 0, false, 0
	return o
}

// exec runs one operation: a call, a macro or a clock step.
func (r *runner) exec(o op) string {
	switch o.kind {
	case "Advance":
		r.clock.Advance(o.advance)
		return ""
	case "Burst":
		for i := range int(o.n) {
			out, msg := r.call(burstMessage(o, i))
			if msg != "" || out.Int < 0 {
				return msg // stop at a full partition (or an error)
			}
		}
		return ""
	case "Drain":
		return r.drain(o.topic, o.group, int(o.n), o.sel)
	case "Pump":
		return r.pump(o)
	default:
		_, msg := r.call(o)
		return msg
	}
}

// burstMessage is publish i of macro o: mostly Publish, every few a
// PublishMessage with a key, headers, no extras or an explicit time.
func burstMessage(o op, i int) op {
	c := op{kind: "PublishMessage", topic: o.topic, partition: o.partition, payload: fmt.Sprintf("b%d", i)}
	switch (i + int(o.sel)) % 8 {
	case 0:
		c.key = fmt.Sprintf("k%d", i%3)
	case 1:
		c.headers = []engine.Header{{Key: "h", Value: fmt.Sprint(i)}}
	case 2:
	case 3:
		c.time = testclock.Epoch.Add(-time.Duration(i) * time.Second)
	default:
		c.kind = "Publish"
	}
	return c
}

// drain has the members of group poll and settle until a round delivers
// nothing or rounds rounds are done: each record is acked, but every few
// (pattern sel) is retried instead, up to a few attempts; and every few
// times a poll delivers the offset after one this drain acked, that acked
// offset is acked again first (the next one in flight: it must be false).
func (r *runner) drain(topic, group string, rounds int, sel byte) string {
	members, err := r.m.Members(topic, group)
	if err != nil || len(members) == 0 {
		return ""
	}
	retryEvery, reackEvery, attempts := 4+int(sel%5), 1+int(sel/8%4), 2+int32(sel/32%2)
	acked := map[int32]int64{} // per partition, the offset this drain last acked
	settled, chances := 0, 0
	for range rounds {
		delivered := false
		for _, m := range members {
			out, msg := r.call(op{kind: "Poll", topic: topic, group: group, member: m, n: engine.MaxPollRecords})
			if msg != "" {
				return msg
			}
			for _, rec := range out.Records {
				delivered = true
				if prev, ok := acked[rec.Partition]; ok && prev == rec.Offset-1 {
					if chances++; chances%reackEvery == 0 {
						if _, msg := r.call(op{kind: "Ack", topic: topic, group: group, member: m, partition: rec.Partition, offset: prev}); msg != "" {
							return msg
						}
					}
				}
				settle := op{kind: "Ack", topic: topic, group: group, member: m, partition: rec.Partition, offset: rec.Offset}
				if settled++; rec.Attempt < attempts && (rec.Attempt > 1 || settled%retryEvery == 0) {
					settle.kind = "Retry" // and again, once retried, until attempts
				}
				out, msg := r.call(settle)
				if msg != "" {
					return msg
				}
				if out.Bool && settle.kind == "Ack" {
					acked[rec.Partition] = rec.Offset
				}
			}
		}
		if !delivered {
			break
		}
	}
	return ""
}

// pump publishes o.n records to one partition in bursts of up to the
// capacity, draining every group of the topic after each burst; it stops
// early when a burst gets nothing in (a group that cannot be drained).
func (r *runner) pump(o op) string {
	published := 0
	for published < int(o.n) && r.calls < r.cfg.budget {
		in := 0
		for i := 0; i < int(r.cfg.capacity) && published < int(o.n); i++ {
			out, msg := r.call(burstMessage(o, published))
			if msg != "" {
				return msg
			}
			if out.Int < 0 {
				break
			}
			in++
			published++
		}
		groups, err := r.m.Groups(o.topic)
		if err != nil {
			return ""
		}
		for _, g := range groups {
			if msg := r.drain(o.topic, g, 2*int(r.cfg.capacity)+4, o.sel); msg != "" {
				return msg
			}
		}
		if in == 0 {
			break
		}
	}
	return ""
}

// call makes one call on the model and the engine and compares the results
// and then the states. It returns the model's outcome and a description of
// any difference.
func (r *runner) call(o op) (outcome, string) {
	r.trace[r.calls%traceLen] = o
	r.calls++
	var pre preState
	if r.cov != nil {
		pre = r.cov.before(r, o)
	}
	want := modelCall(r.m, o)
	if r.e != nil {
		got := engineCall(r.e, o)
		if !sameOutcome(want, got) {
			return want, fmt.Sprintf("call %d %v: result (-model +engine):\n%s%s", r.calls, o, cmp.Diff(want, got), r.lastCalls())
		}
		if msg := r.sameState(o, r.calls%helperEvery == 0); msg != "" {
			return want, fmt.Sprintf("after call %d %v: %s%s", r.calls, o, msg, r.lastCalls())
		}
		if msg := r.sameRoom(); msg != "" {
			return want, fmt.Sprintf("after call %d %v: %s%s", r.calls, o, msg, r.lastCalls())
		}
	}
	switch {
	case (o.kind == "Poll" || o.kind == "PollPartition") && len(want.Records) > 0:
		r.lastPoll, r.lastRecs = o, want.Records
	case o.kind == "Ack" && want.Bool:
		r.lastAck, r.haveAck = o, true
	}
	if r.cov != nil {
		r.cov.after(r, o, want, pre)
	}
	return want, ""
}

// lastCalls lists the latest calls made, for a report.
func (r *runner) lastCalls() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "the last calls made (of %d):\n", r.calls)
	for i := max(0, r.calls-traceLen); i < r.calls; i++ {
		fmt.Fprintf(&sb, "  %d: %v\n", i+1, r.trace[i%traceLen])
	}
	return sb.String()
}

// sameState compares the observable state of the two brokers: Describe of
// every topic; Topics after a Create; and with helpers Topics, every
// inspection helper on every partition and group (an absent group and
// partitions out of range included), every snapshotEvery calls Snapshot,
// and the model's invariants.
func (r *runner) sameState(o op, helpers bool) string {
	topics := r.m.Topics()
	if o.kind == "Create" || helpers {
		if et := r.e.Topics(); !reflect.DeepEqual(et, topics) {
			return fmt.Sprintf("Topics() = %q, model %q", et, topics)
		}
	}
	for _, name := range topics {
		ed, eerr := r.e.Describe(name)
		md, merr := r.m.Describe(name)
		if eerr != nil || merr != nil || !sameDescription(ed, md) {
			return fmt.Sprintf("Describe(%q): engine error %v, model error %v (-model +engine):\n%s", name, eerr, merr, cmp.Diff(engineDescription(md), ed))
		}
		if helpers {
			if msg := r.sameHelpers(name, md); msg != "" {
				return msg
			}
			if every := snapshotEvery; r.calls%every == 0 && (r.cfg.profile != profHuge || r.calls%(8*every) == 0) {
				if msg := r.sameSnapshot(name); msg != "" {
					return msg
				}
			}
		}
	}
	if helpers {
		if err := r.m.CheckInvariants(); err != nil {
			return fmt.Sprintf("model invariant broken (a model bug): %v", err)
		}
	}
	return ""
}

// sameRoom checks the engine's room signal against the model, as a
// producer blocked on a full partition sees it: a Room channel taken while
// the model says a publish to its partition is refused must be closed by
// the first call after which the model says a publish there succeeds
// (SPEC rules 5, 21; TopicHandle.Room). A channel closed while the
// partition stays full is a harmless early wake-up: it is replaced. Then
// it takes a channel for every partition the model says is full.
func (r *runner) sameRoom() string {
	for _, name := range r.m.Topics() {
		n, err := r.m.PartitionCount(name)
		if err != nil {
			return fmt.Sprintf("model PartitionCount(%q): %v", name, err)
		}
		var th *engine.TopicHandle
		for p := range n {
			full, err := r.m.Full(name, p)
			if err != nil {
				return fmt.Sprintf("model Full(%q, %d): %v", name, p, err)
			}
			key := roomKey{name, p}
			if ch, held := r.rooms[key]; held {
				switch closed := hClosed(ch); {
				case !full && !closed:
					return fmt.Sprintf("Room(%d) of topic %q still open, although the model accepts a publish there now\n", p, name)
				case full && !closed:
					continue
				}
				delete(r.rooms, key)
			}
			if !full {
				continue
			}
			if th == nil {
				if th, err = r.e.Topic(name); err != nil {
					return fmt.Sprintf("Topic(%q): %v", name, err)
				}
			}
			ch, err := th.Room(p)
			if err != nil {
				return fmt.Sprintf("Room(%d) of topic %q: %v", p, name, err)
			}
			r.rooms[key] = ch
		}
	}
	return ""
}

// sameSnapshot compares Snapshot of topic, description and records.
func (r *runner) sameSnapshot(topic string) string {
	es, eerr := r.e.Snapshot(topic)
	ms, merr := r.m.Snapshot(topic)
	md, mrecs := engineSnapshot(ms)
	want := outcome{Err: errClass(merr), Desc: md, Snap: mrecs}
	got := outcome{Err: errClass(eerr), Desc: es.TopicDescription, Snap: es.Records}
	if !sameOutcome(want, got) {
		return fmt.Sprintf("Snapshot(%q) (-model +engine):\n%s", topic, cmp.Diff(want, got))
	}
	return ""
}

// sameHelpers compares every inspection helper on topic, whose model
// description is d.
func (r *runner) sameHelpers(topic string, d model.TopicDescription) string {
	type reading struct {
		V   any
		Err string
	}
	var got, want []reading
	read := func(g, w any, gerr, werr error) {
		got, want = append(got, reading{g, errClass(gerr)}), append(want, reading{w, errClass(werr)})
	}
	{
		g, gerr := r.e.PartitionCount(topic)
		w, werr := r.m.PartitionCount(topic)
		read(g, w, gerr, werr)
	}
	groups := []string{}
	for _, g := range d.Groups {
		groups = append(groups, g.Group)
	}
	count := int32(len(d.Partitions))
	for p := int32(-1); p <= count; p++ {
		{
			g, gerr := r.e.LogStartOffset(topic, p)
			w, werr := r.m.LogStartOffset(topic, p)
			read(g, w, gerr, werr)
		}
		{
			g, gerr := r.e.LogEndOffset(topic, p)
			w, werr := r.m.LogEndOffset(topic, p)
			read(g, w, gerr, werr)
		}
		grps := groups
		switch {
		case p == 0:
			grps = append(slices.Clip(groups), "absent") // ErrUnknownGroup
		case p < 0 && len(groups) > 0:
			grps = groups[:1] // ErrInvalidArgument, once
		case p < 0 || p == count:
			grps = nil
		}
		for _, grp := range grps {
			{
				g, gerr := r.e.Committed(topic, grp, p)
				w, werr := r.m.Committed(topic, grp, p)
				read(g, w, gerr, werr)
			}
			{
				g, gerr := r.e.InFlight(topic, grp, p)
				w, werr := r.m.InFlight(topic, grp, p)
				read(g, w, gerr, werr)
			}
			{
				g, gerr := r.e.Attempts(topic, grp, p)
				w, werr := r.m.Attempts(topic, grp, p)
				read(g, w, gerr, werr)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("inspection helpers of %q (partitions -1..count, groups %q; -model +engine):\n%s", topic, groups, cmp.Diff(want, got))
	}
	return ""
}

// divergence runs ops on a fresh engine and model of configuration cfg and
// returns the index of the first operation that differs and a description
// of the difference, or -1 and "" when they agree throughout.
func divergence(t testing.TB, mk newSubject, cfg diffConfig, ops []op) (int, string) {
	r, msg := newRunner(t, mk, cfg, nil)
	if msg != "" {
		return 0, msg
	}
	if r == nil {
		return -1, "" // both refused the options
	}
	return r.run(ops)
}

// shrink returns a short failing subsequence of ops: it cuts the tail
// after the failing operation, removes chunks of halving sizes while the
// sequence still fails, halves the macros' counts, and finally tries to
// drop each operation once more.
func shrink(t testing.TB, mk newSubject, cfg diffConfig, ops []op) []op {
	fails := func(cand []op) ([]op, bool) {
		cand = slices.Clone(cand)
		at, _ := divergence(t, mk, cfg, cand)
		if at < 0 {
			return nil, false
		}
		return cand[:at+1], true // resolved, and cut after the failure
	}
	ops, ok := fails(ops)
	if !ok {
		return ops
	}
	// without tries ops without ops[i:i+n] (clamped): if that still fails,
	// ops becomes it.
	without := func(i, n int) {
		if i < 0 || i >= len(ops) {
			return
		}
		if cand, ok := fails(append(slices.Clone(ops[:i]), ops[min(i+n, len(ops)):]...)); ok {
			ops = cand
		}
	}
	for chunk := len(ops) / 2; chunk > 1; chunk /= 2 {
		for i := len(ops) - chunk; i >= 0; i -= chunk {
			without(i, chunk)
		}
	}
	for i := len(ops) - 1; i >= 0; i-- {
		without(i, 1)
	}
	for i := 0; i < len(ops); i++ {
		for i < len(ops) && ops[i].n > 1 && (ops[i].kind == "Burst" || ops[i].kind == "Pump" || ops[i].kind == "Drain") {
			cand := slices.Clone(ops)
			cand[i].n /= 2
			c, ok := fails(cand)
			if !ok {
				break
			}
			ops = c
		}
	}
	for i := len(ops) - 1; i >= 0; i-- {
		without(i, 1)
	}
	return ops
}

// compareWithModel decodes data, runs it on mk's implementation and on the
// model, and returns "" when they agree, or a report with the shortest
// failing sequence found and its length in operations.
func compareWithModel(t testing.TB, mk newSubject, data []byte) (report string, shrunk int) {
	cfg, ops := decode(data)
	return compareSequence(t, mk, cfg, ops)
}

// compareSequence is compareWithModel of a decoded sequence.
func compareSequence(t testing.TB, mk newSubject, cfg diffConfig, ops []op) (report string, shrunk int) {
	if at, _ := divergence(t, mk, cfg, slices.Clone(ops)); at < 0 {
		return "", 0
	}
	short := shrink(t, mk, cfg, ops)
	var sb strings.Builder
	fmt.Fprintf(&sb, "engine and model diverge; shortest failing sequence found (%v; %d of %d ops):\n", cfg, len(short), len(ops))
	for _, o := range short {
		fmt.Fprintf(&sb, "  %v\n", o)
	}
	_, msg := divergence(t, mk, cfg, slices.Clone(short))
	sb.WriteString(msg)
	return sb.String(), len(short)
}

// checkFuzzInput is the fuzz target's check: compareWithModel with the
// smaller fuzzCallBudget.
func checkFuzzInput(t *testing.T, data []byte) {
	cfg, ops := decode(data)
	cfg.budget = fuzzCallBudget
	if report, _ := compareSequence(t, realEngine, cfg, ops); report != "" {
		t.Fatal(report)
	}
}

// ---------------------------------------------------------------------------
// The standard run.

// opsPerProfile is how many operations a random sequence of each profile
// has, roughly.
var opsPerProfile = [...]int{profSmall: 120, profGroups: 150, profBig: 30, profDeep: 24, profHuge: 20, profSession: 120}

// randomSequence returns the bytes of random sequence i: its profile is
// profileSchedule[i mod 50], so every stretch of 50 sequences has the same
// mix.
func randomSequence(rng *rand.Rand, i int) []byte {
	prof := profileSchedule[i%len(profileSchedule)]
	data := make([]byte, 8+opsPerProfile[prof]*6)
	for j := range data {
		data[j] = byte(rng.Uint32())
	}
	data[0] = byte(i % len(profileSchedule))
	return data
}

// standardSequences is the number of sequences of the standard run:
// TestEngineMatchesModel runs them, TestDiffGeneratorCoverage counts what
// the first raceSequences of them reach (so both builds are covered), and
// the fault tests must be caught within them.
func standardSequences() int {
	if raceEnabled || testing.Short() {
		return raceSequences
	}
	return 1500
}

const raceSequences = 500

// standardRNG is the random source of the standard run.
func standardRNG() *rand.Rand { return rand.New(rand.NewPCG(2026, 11)) }

// TestEngineMatchesModel runs the standard run: random sequences of valid
// and invalid calls of every kind, on random options, compared call by
// call with the model (1500 sequences, about 1.2 million calls; 500 under
// the race detector or -short).
func TestEngineMatchesModel(t *testing.T) {
	rng := standardRNG()
	n := standardSequences()
	for i := range n {
		if report, _ := compareWithModel(t, realEngine, randomSequence(rng, i)); report != "" {
			t.Fatalf("sequence %d of the standard run: %s", i+1, report)
		}
	}
}

// ---------------------------------------------------------------------------
// What the generator reaches.

// coverage counts the situations the generator reaches: events, and the
// sequences with at least one.
type coverage struct {
	sequences int
	events    map[string]int
	seqs      map[string]int
	seen      map[string]bool // in the current sequence
	calls     map[string]int  // calls per kind
}

func newCoverage() *coverage {
	return &coverage{events: map[string]int{}, seqs: map[string]int{}, calls: map[string]int{}}
}

func (c *coverage) startSequence() {
	c.sequences++
	c.seen = map[string]bool{}
}

func (c *coverage) hit(situation string) {
	c.events[situation]++
	if !c.seen[situation] {
		c.seen[situation] = true
		c.seqs[situation]++
	}
}

// preState is what coverage reads before a call: the topic's description
// for the calls whose effect coverage measures by it, and the called
// partition's log offsets for publishes.
type preState struct {
	desc       model.TopicDescription
	ok         bool // desc is set
	start, end int64
	logOK      bool // start and end are set
	// looks are, in the session profile, the topic's groups as the model's
	// read-only helpers see them before the call (before any expiry).
	looks map[string]groupLook
}

// groupLook is one group as the model's read-only helpers show it.
type groupLook struct {
	members  []string
	seen     map[string]time.Time
	owned    map[string][]int32
	inFlight []bool
}

// lookGroups reads topic's groups through the model's helpers, which
// expire nobody; nil for a topic that is not there.
func lookGroups(m *model.Broker, topic string) map[string]groupLook {
	groups, err := m.Groups(topic)
	if err != nil {
		return nil
	}
	n, _ := m.PartitionCount(topic)
	out := map[string]groupLook{}
	for _, g := range groups {
		var l groupLook
		l.members, _ = m.Members(topic, g)
		l.seen, _ = m.LastSeen(topic, g)
		l.owned, _ = m.Assignment(topic, g)
		for p := range n {
			f, _ := m.InFlight(topic, g, p)
			l.inFlight = append(l.inFlight, f)
		}
		out[g] = l
	}
	return out
}

func inFlightCount(d model.TopicDescription) int {
	n := 0
	for _, g := range d.Groups {
		for _, p := range g.Partitions {
			if p.InFlight {
				n++
			}
		}
	}
	return n
}

// describes are the kinds whose coverage compares descriptions before and
// after (a poll only under an ack timeout).
var describes = map[string]bool{
	"CreateGroup": true, "CreateGroupAt": true, "Join": true, "Leave": true, "DeleteGroup": true, "SetAssignor": true,
	"AddPartitions": true, "Seek": true,
}

func (c *coverage) before(r *runner, o op) preState {
	var s preState
	if r.cfg.profile == profSession {
		s.looks = lookGroups(r.m, o.topic)
	}
	switch {
	case describes[o.kind] || (o.kind == "Poll" || o.kind == "PollPartition") && r.cfg.ackTimeout > 0:
		d, err := r.m.Describe(o.topic)
		s.desc, s.ok = d, err == nil
	case o.kind == "Publish" || o.kind == "PublishMessage":
		start, err1 := r.m.LogStartOffset(o.topic, o.partition)
		end, err2 := r.m.LogEndOffset(o.topic, o.partition)
		s.start, s.end, s.logOK = start, end, err1 == nil && err2 == nil
	case o.kind == "Ack":
		committed, err1 := r.m.Committed(o.topic, o.group, o.partition)
		inFlight, err2 := r.m.InFlight(o.topic, o.group, o.partition)
		if err1 == nil && err2 == nil && inFlight && committed == o.offset+1 {
			if a, err := r.m.Assignment(o.topic, o.group); err == nil && slices.Contains(a[o.member], o.partition) {
				c.hit("re-ack of the committed offset, next in flight")
			}
		}
	}
	return s
}

func (c *coverage) after(r *runner, o op, out outcome, pre preState) {
	c.calls[o.kind]++
	if out.Err != "" {
		c.hit("error " + out.Err + " from " + o.kind)
	}
	if pre.looks != nil && out.Err != "invalid" {
		c.liveness(r, o, out, pre.looks, lookGroups(r.m, o.topic))
	}
	switch o.kind {
	case "Publish", "PublishMessage":
		if !pre.logOK {
			return
		}
		if out.Int >= int64(r.cfg.capacity) && r.cfg.capacity > 256 {
			c.hit("ring wrapped with capacity > 256")
		}
		if r.cfg.capacity > ringlog.PageLen && out.Int > 0 && out.Int%ringlog.PageLen == 0 {
			c.hit("publish started a page of a paged log")
			if pre.start >= ringlog.PageLen {
				c.hit("publish started a page after the log gave one up")
			}
		}
		if out.Int >= 0 && pre.end-pre.start == int64(r.cfg.capacity) {
			c.hit("replay window gave up a record for a publish")
		}
		if out.Int < 0 && out.Err == "" && r.cfg.window > 0 {
			c.hit("full partition refused a publish despite the replay window")
		}
		if out.Int >= 0 && (o.key != "" || len(o.headers) > 0 || !o.time.IsZero()) {
			c.hit("message with key, headers or time")
		}
		size := len(o.key) + len(o.payload)
		for _, h := range o.headers {
			size += len(h.Key) + len(h.Value)
		}
		if r.cfg.maxSet && size > r.cfg.maxBytes {
			c.hit(o.kind + " over WithMaxMessageBytes")
		}
		return
	case "PollPartition":
		if out.Err != "" {
			return
		}
		a, err := r.m.Assignment(o.topic, o.group)
		owns := err == nil && slices.Contains(a[o.member], o.partition)
		switch {
		case len(out.Records) > 0 && out.Records[0].Attempt > 1:
			c.hit("PollPartition redelivery")
		case len(out.Records) > 0:
			c.hit("PollPartition delivery")
		case !owns:
			c.hit("PollPartition of a partition not owned")
		default:
			c.hit("PollPartition of an owned partition, nothing eligible")
		}
		for _, g := range pre.desc.Groups {
			if len(out.Records) > 0 && g.Group == o.group && g.Partitions[o.partition].InFlight {
				c.hit("PollPartition redelivery after an ack timeout")
			}
		}
		return
	case "Snapshot":
		for p, rs := range out.Snap {
			if len(rs) > 0 && len(out.Desc.Groups) > 0 && rs[0].Offset < out.Desc.Groups[0].Partitions[p].Committed {
				c.hit("snapshot with fully committed records")
			}
		}
		return
	case "Poll":
		for _, rec := range out.Records {
			if rec.Offset >= 2000 {
				c.hit("delivery at offset 2000 or more")
			}
			if rec.Offset >= 4096 {
				c.hit("delivery at offset 4096 or more")
			}
			if rec.Attempt >= 3 {
				c.hit("delivery with attempt 3 or more")
			}
			for _, g := range pre.desc.Groups {
				if g.Group == o.group && g.Partitions[rec.Partition].InFlight {
					c.hit("redelivery after an ack timeout")
				}
			}
		}
		return
	case "Describe":
		if out.Err == "" && len(out.Desc.Groups) > 0 {
			c.hit("describe of a topic with groups")
		}
		return
	}
	if !pre.ok {
		return
	}
	d, _ := r.m.Describe(o.topic)
	moved := func() bool { // some log start moved up
		for p := range pre.desc.Partitions {
			if d.Partitions[p].LogStartOffset > pre.desc.Partitions[p].LogStartOffset {
				return true
			}
		}
		return false
	}
	if groups := len(pre.desc.Groups); len(d.Groups) > groups {
		if len(d.Groups) >= 9 {
			c.hit("group created with 9 or more on the topic")
		}
		if groups < r.maxGroup[o.topic] {
			c.hit("group created in a freed cursor slot")
			if r.maxGroup[o.topic] > 4 {
				c.hit("group created in a freed slot past the first padding unit")
			}
		}
		r.maxGroup[o.topic] = max(r.maxGroup[o.topic], len(d.Groups))
	}
	switch o.kind {
	case "Seek":
		if out.Bool {
			c.hit("seek")
			if inFlightCount(d) < inFlightCount(pre.desc) {
				c.hit("seek cancelled an in-flight delivery")
			}
			if moved() {
				c.hit("seek freed records")
			}
		}
	case "SetAssignor", "Join", "Leave":
		if out.Err == "" && inFlightCount(d) < inFlightCount(pre.desc) {
			c.hit(o.kind + " cancelled an in-flight delivery")
		}
	case "DeleteGroup":
		if out.Bool && moved() {
			c.hit("group deletion freed records")
		}
	case "CreateGroupAt":
		if !out.Bool || o.start != engine.StartLatest {
			break
		}
		for _, p := range d.Partitions {
			if p.LogEndOffset > pre.desc.Partitions[p.Partition].LogStartOffset {
				c.hit("latest group created past retained records")
				break
			}
		}
		if moved() {
			c.hit("latest group creation freed records")
		}
	case "AddPartitions":
		if out.Err == "" && len(pre.desc.Groups) > 0 && pre.desc.Partitions[0].LogEndOffset > 0 {
			c.hit("partitions added to a used topic with groups")
		}
	}
}

// liveness counts the situations of rules 24–25 in one call of the
// session profile, from the topic's groups before and after it.
func (c *coverage) liveness(r *runner, o op, out outcome, pre, post map[string]groupLook) {
	now, d := r.clock.Now(), r.cfg.session
	for name, g := range pre {
		after, kept := post[name]
		for _, m := range g.members {
			if kept && slices.Contains(after.members, m) {
				if d > 0 && now.Sub(g.seen[m]) >= d {
					c.hit("expired member kept: the assignor refused the rebalance")
				}
				if after.seen[m].After(g.seen[m]) && (o.kind == "Ack" || o.kind == "Retry") && o.member == m {
					c.hit("Ack or Retry refreshed a member")
				}
				continue
			}
			if o.kind == "Leave" && o.group == name && o.member == m || o.kind == "DeleteGroup" {
				continue
			}
			c.hit("expiry removed a member")
			if now.Sub(g.seen[m]) == d {
				c.hit("expiry of a member last seen exactly the timeout before")
			}
			if o.kind == "Heartbeat" && o.group == name && o.member == m && !out.Bool {
				c.hit("Heartbeat of an expired member")
			}
			if (o.kind == "Ack" || o.kind == "Retry") && o.group == name && o.member == m && !out.Bool {
				c.hit(o.kind + " of an expired member")
			}
			if o.kind == "Rejoin" && o.group == name && o.member == m {
				c.hit("Rejoin of an expired member")
			}
			for _, p := range g.owned[m] {
				if g.inFlight[p] && kept && !after.inFlight[p] {
					c.hit("expiry cancelled an in-flight delivery")
				}
			}
		}
	}
	if o.kind == "Rejoin" && out.Err == "" {
		g, was := pre[o.group]
		switch {
		case was && slices.Contains(g.members, o.member) && (d == 0 || now.Sub(g.seen[o.member]) < d):
			c.hit("Rejoin of a member")
			for _, p := range g.owned[o.member] {
				if g.inFlight[p] {
					c.hit("Rejoin of a member cancelled its delivery")
					break
				}
			}
		default:
			c.hit("Rejoin of a non-member: a Join")
		}
		if o.handle {
			c.hit("Rejoin through a member handle")
		}
	}
	if o.kind == "Heartbeat" && out.Err == "" {
		c.hit(fmt.Sprintf("Heartbeat %t", out.Bool))
		if o.handle {
			c.hit("Heartbeat through a member handle")
		}
	}
}

// coverageRun runs the first sequences of the standard run on the model
// alone and counts what they reach.
func coverageRun(t testing.TB, sequences int) *coverage {
	cov := newCoverage()
	rng := standardRNG()
	for i := range sequences {
		cfg, ops := decode(randomSequence(rng, i))
		cov.startSequence()
		r, _ := newRunner(t, nil, cfg, cov)
		if r == nil {
			cov.hit("options refused")
			continue
		}
		r.run(ops)
		cov.events["calls"] += r.calls
	}
	return cov
}

// TestDiffGeneratorCoverage requires the standard run to reach, in enough
// sequences, each situation a broken engine has been seen to get wrong
// where only slower or unrelated tests noticed: ring buffers that wrap with
// capacities above 256, nine or more groups on a topic (cursor slices past
// two padding units) and cursor slots reused after DeleteGroup, a repeated
// ack of the offset just committed while the next one is in flight, and
// offsets in the thousands; the situations of every feature of rules
// 15–23 and 24–25; and those of the additions AppendPollPartition and
// Snapshot.
func TestDiffGeneratorCoverage(t *testing.T) {
	cov := coverageRun(t, raceSequences)
	// Each minimum is about half of what the run reached when it was
	// written (the run is deterministic: a shortfall means the generator
	// changed, not bad luck).
	want := []struct {
		situation string
		seqs      int // sequences with at least one
	}{
		// The four a broken engine got past this test before.
		{"ring wrapped with capacity > 256", 15},
		{"group created with 9 or more on the topic", 15},
		{"group created in a freed cursor slot", 55},
		{"group created in a freed slot past the first padding unit", 25},
		{"re-ack of the committed offset, next in flight", 35},
		{"delivery at offset 2000 or more", 6},
		{"delivery at offset 4096 or more", 2},
		// Rules 15–23.
		{"message with key, headers or time", 180},
		{"PublishMessage over WithMaxMessageBytes", 30},
		{"Publish over WithMaxMessageBytes", 8},
		{"delivery with attempt 3 or more", 25},
		{"Join cancelled an in-flight delivery", 35},
		{"Leave cancelled an in-flight delivery", 30},
		{"SetAssignor cancelled an in-flight delivery", 10},
		{"error invalid-assignment from Join", 14},
		{"error invalid-assignment from SetAssignor", 15},
		{"error invalid-assignment from AddPartitions", 2},
		{"error not-empty from DeleteGroup", 85},
		{"group deletion freed records", 4},
		{"latest group created past retained records", 55},
		{"latest group creation freed records", 13},
		{"partitions added to a used topic with groups", 60},
		{"error invalid from AddPartitions", 100},
		{"seek", 120},
		{"seek cancelled an in-flight delivery", 40},
		{"seek freed records", 15},
		{"error out-of-range from Seek", 75},
		{"replay window gave up a record for a publish", 7},
		{"full partition refused a publish despite the replay window", 18},
		{"redelivery after an ack timeout", 9},
		{"describe of a topic with groups", 130},
		// The additions AppendPollPartition and Snapshot.
		{"PollPartition delivery", 70},
		{"PollPartition redelivery", 8},
		{"PollPartition redelivery after an ack timeout", 1},
		{"PollPartition of a partition not owned", 90},
		{"PollPartition of an owned partition, nothing eligible", 100},
		{"error invalid from PollPartition", 200},
		{"snapshot with fully committed records", 15},
		// Capacities beyond rule 1 (WithExtendedCapacity): paged logs.
		{"publish started a page of a paged log", 3},
		{"publish started a page after the log gave one up", 2},
		// Member liveness, rules 24–25 (the session profile).
		{"expiry removed a member", 18},
		{"expiry of a member last seen exactly the timeout before", 7},
		{"expiry cancelled an in-flight delivery", 3},
		{"expired member kept: the assignor refused the rebalance", 5},
		{"Heartbeat of an expired member", 3},
		{"Heartbeat true", 22},
		{"Heartbeat false", 15},
		{"Heartbeat through a member handle", 17},
		{"Ack or Retry refreshed a member", 10},
		{"Rejoin of a member", 22},
		{"Rejoin of a member cancelled its delivery", 6},
		{"Rejoin of a non-member: a Join", 16},
		{"Rejoin through a member handle", 17},
		{"error invalid from Heartbeat", 27},
		{"error invalid from Rejoin", 27},
	}
	names := make([]string, 0, len(cov.seqs))
	for s := range cov.seqs {
		names = append(names, s)
	}
	slices.Sort(names)
	for _, s := range names {
		t.Logf("%6d events in %4d sequences: %s", cov.events[s], cov.seqs[s], s)
	}
	t.Logf("%d sequences, %d calls; calls per kind: %v", cov.sequences, cov.events["calls"], cov.calls)
	for _, w := range want {
		if cov.seqs[w.situation] < w.seqs {
			t.Errorf("%q reached in %d of %d sequences, want at least %d", w.situation, cov.seqs[w.situation], cov.sequences, w.seqs)
		}
	}
}

// ---------------------------------------------------------------------------
// The differential test can fail.

// retryCommits is a broken broker whose Retry commits like Ack.
type retryCommits struct{ *engine.Broker }

func (b retryCommits) Retry(topic, group, member string, partition int32, offset int64) (bool, error) {
	return b.Ack(topic, group, member, partition, offset)
}

// pollSkipsFirst is a broken broker whose Poll loses the first record of a
// multi-record result.
type pollSkipsFirst struct{ *engine.Broker }

// Poll hides the first record of a multi-record result (it stays in flight).
func (b pollSkipsFirst) Poll(topic, group, member string, maxRecords int32) ([]engine.Record, error) {
	recs, err := b.Broker.Poll(topic, group, member, maxRecords)
	if len(recs) > 1 {
		recs = recs[1:]
	}
	return recs, err
}

// publishIgnoresFull is a broken broker that reports 0 instead of -1 for a
// full partition.
type publishIgnoresFull struct{ *engine.Broker }

func (b publishIgnoresFull) Publish(topic string, partition int32, payload string) (int64, error) {
	off, err := b.Broker.Publish(topic, partition, payload)
	if off == -1 {
		off = 0
	}
	return off, err
}

// snapshotHidesOldest is a broken broker whose Snapshot leaves out each
// partition's oldest retained record.
type snapshotHidesOldest struct{ *engine.Broker }

func (b snapshotHidesOldest) Snapshot(topic string) (engine.TopicSnapshot, error) {
	s, err := b.Broker.Snapshot(topic)
	for p, rs := range s.Records {
		if len(rs) > 0 {
			s.Records[p] = rs[1:]
		}
	}
	return s, err
}

// rangeGivesExtraLast is a broken broker whose Range assignor gives the
// larger blocks to the last members instead of the first (rule 18). The
// model computes the built-ins' answers itself, so an engine assignor bug
// like this one shows as a different assignment.
type rangeGivesExtraLast struct{ *engine.Broker }

func (b rangeGivesExtraLast) swap(a engine.Assignor) engine.Assignor {
	if a == engine.Range {
		return brokenassign.Range{}
	}
	return a
}

func (b rangeGivesExtraLast) CreateGroup(topic, group string, a engine.Assignor) (bool, error) {
	return b.Broker.CreateGroup(topic, group, b.swap(a))
}

func (b rangeGivesExtraLast) CreateGroupAt(topic, group string, a engine.Assignor, start engine.GroupStart) (bool, error) {
	return b.Broker.CreateGroupAt(topic, group, b.swap(a), start)
}

func (b rangeGivesExtraLast) SetAssignor(topic, group string, a engine.Assignor) (bool, error) {
	return b.Broker.SetAssignor(topic, group, b.swap(a))
}

// wrapped returns a newSubject building the engine wrapped by wrap.
func wrapped(wrap func(*engine.Broker) subject) newSubject {
	return func(capacity int32, opts ...engine.Option) (subject, error) {
		b, err := engine.New(capacity, opts...)
		if err != nil {
			return nil, err
		}
		return wrap(b), nil
	}
}

// caughtBy runs up to n sequences of rng against mk and returns the number
// of the first that finds a mismatch (from 1), with the report and the
// shrunk length, or 0. A sequence counts only if the correct engine passes
// it, so that a bug of the real engine cannot stand in for mk's.
func caughtBy(t testing.TB, mk newSubject, rng *rand.Rand, n int) (seq int, report string, shrunk int) {
	for i := range n {
		data := randomSequence(rng, i)
		cfg, ops := decode(data)
		if at, _ := divergence(t, mk, cfg, ops); at < 0 {
			continue
		}
		if real, _ := compareWithModel(t, realEngine, data); real != "" {
			t.Logf("sequence %d also fails on the correct engine; not counted:\n%s", i+1, real)
			continue
		}
		report, shrunk := compareWithModel(t, mk, data)
		return i + 1, report, shrunk
	}
	return 0, "", 0
}

// TestDifferentialCatchesBrokenBrokers shows the differential check can
// fail: each broken wrapper must be caught within a bounded number of random
// sequences, and the shrinker must cut the failing sequence down.
func TestDifferentialCatchesBrokenBrokers(t *testing.T) {
	broken := map[string]struct {
		mk        newSubject
		maxShrunk int
	}{
		"retry commits":          {wrapped(func(b *engine.Broker) subject { return retryCommits{b} }), 12},
		"poll hides a record":    {wrapped(func(b *engine.Broker) subject { return pollSkipsFirst{b} }), 12},
		"publish ignores full":   {wrapped(func(b *engine.Broker) subject { return publishIgnoresFull{b} }), 12},
		"snapshot hides oldest":  {wrapped(func(b *engine.Broker) subject { return snapshotHidesOldest{b} }), 12},
		"range gives extra last": {wrapped(func(b *engine.Broker) subject { return rangeGivesExtraLast{b} }), 12},
	}
	for name, tt := range broken {
		t.Run(name, func(t *testing.T) {
			seq, report, shrunk := caughtBy(t, tt.mk, rand.New(rand.NewPCG(7, 7)), 200)
			if seq == 0 {
				t.Fatal("broken broker not caught in 200 sequences")
			}
			t.Logf("caught by sequence %d, shrunk to %d ops", seq, shrunk)
			if shrunk > tt.maxShrunk {
				t.Errorf("shrunk sequence has %d ops, want at most %d:\n%s", shrunk, tt.maxShrunk, report)
			}
		})
	}
}

// FuzzEngineMatchesModel is the same check driven by the fuzzer, each input
// cut at fuzzCallBudget calls (a short -fuzzminimizetime keeps the fuzzer
// from spending a minute minimizing each new input):
//
//	go test -run '^$' -fuzz FuzzEngineMatchesModel -fuzzminimizetime 2s ./engine/
func FuzzEngineMatchesModel(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 3, 4, 2, 1, 0, 0, 3, 1, 0, 0, 0, 4, 0, 0, 1, 8, 0, 0, 0, 0, 1})
	f.Add([]byte("tributary differential seed with some bytes in it"))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, i := range []int{0, 3, 7, 49, 41, 5} { // one sequence of each profile
		f.Add(randomSequence(rng, i))
	}
	f.Fuzz(checkFuzzInput)
}

// ---------------------------------------------------------------------------
// Targeted sequences.

// TestDiffMemberEdgesMatchModel runs hand-written sequences on the edges of
// a member's call, with and without a session timeout and an ack timeout:
// a member last seen exactly the timeout before the call (expired) and one
// nanosecond less (not), every member call on an absent group or member
// (by name and through a MemberHandle), a member that expired being polled,
// acked, retried, heartbeated, rejoined and left, a deleted and re-created
// group, and identifiers at the edges of rule 3 on an absent group (empty,
// 64 and 65 bytes, NUL, a control byte, invalid UTF-8). Every result and
// the whole observable state after every call are compared with the model.
func TestDiffMemberEdgesMatchModel(t *testing.T) {
	scripts, configs := memberEdgeSequences()
	for name, ops := range scripts {
		for _, cfg := range configs {
			t.Run(name+"/"+cfg.String(), func(t *testing.T) {
				if report, _ := compareSequence(t, realEngine, cfg, ops); report != "" {
					t.Fatal(report)
				}
			})
		}
	}
}

// memberEdgeSequences returns TestDiffMemberEdgesMatchModel's sequences, by
// name, and the configurations each runs under.
func memberEdgeSequences() (map[string][]op, []diffConfig) {
	const ms = time.Millisecond
	c := func(topic string, n int32) op { return op{kind: "Create", topic: topic, n: n} }
	pub := func(p int32, s string) op { return op{kind: "Publish", topic: "t", partition: p, payload: s} }
	call := func(kind, group, member string) op { return op{kind: kind, topic: "t", group: group, member: member} }
	poll := func(group, member string, n int32) op {
		return op{kind: "Poll", topic: "t", group: group, member: member, n: n}
	}
	pp := func(group, member string, p int32) op {
		return op{kind: "PollPartition", topic: "t", group: group, member: member, partition: p}
	}
	settle := func(kind, group, member string, p int32, off int64) op {
		return op{kind: kind, topic: "t", group: group, member: member, partition: p, offset: off}
	}
	handle := func(o op) op { o.handle = true; return o }
	adv := func(d time.Duration) op { return op{kind: "Advance", advance: d} }
	desc := op{kind: "Describe", topic: "t"}
	long := strings.Repeat("m", engine.MaxIDLength)
	absent := func(group, member string) []op {
		return []op{
			poll(group, member, 1), handle(poll(group, member, 1)), pp(group, member, 0), settle("Ack", group, member, 0, 0),
			settle("Retry", group, member, 0, 0), call("Heartbeat", group, member),
			handle(call("Heartbeat", group, member)), call("Leave", group, member), desc,
		}
	}
	var edgeIDs []op
	for _, id := range []string{"", long, long + "x", "a\x00", "a\x01b", "\xff", "é", "a b"} {
		edgeIDs = append(edgeIDs, absent("g", id)...)
		edgeIDs = append(edgeIDs, absent(id, "m")...)
		edgeIDs = append(edgeIDs, absent("nog", id)...)
		edgeIDs = append(edgeIDs, call("Join", id, "m"), call("Rejoin", "g", id), handle(call("Rejoin", id, "m")))
	}
	scripts := map[string][]op{
		"expiry at the exact instant and one nanosecond before": {
			c("t", 2), pub(0, "a"), pub(1, "b"), call("Join", "g", "a"), call("Join", "g", "b"),
			poll("g", "a", 64), adv(5*ms - 1), poll("g", "b", 64), desc, adv(1), desc,
			poll("g", "b", 64), settle("Ack", "g", "a", 0, 0), poll("g", "a", 64), desc,
			adv(5 * ms), settle("Ack", "g", "b", 1, 0), call("Heartbeat", "g", "b"), desc,
		},
		"every call of an expired member": {
			c("t", 3), pub(0, "a"), pub(1, "b"), pub(2, "c"), call("Join", "g", "a"), call("Join", "g", "b"),
			poll("g", "a", 64), poll("g", "b", 64), adv(5 * ms), call("Heartbeat", "g", "b"),
			handle(call("Heartbeat", "g", "a")), poll("g", "a", 64), pp("g", "a", 0),
			handle(poll("g", "a", 64)), settle("Ack", "g", "a", 0, 0), settle("Retry", "g", "a", 1, 0), call("Leave", "g", "a"),
			handle(call("Rejoin", "g", "a")), poll("g", "a", 64), adv(5 * ms), pp("g", "a", 1),
			adv(5 * ms), settle("Retry", "g", "a", 0, 0), call("Rejoin", "g", "a"), desc,
		},
		"a settle refreshes, whatever it answers": {
			c("t", 2), pub(0, "a"), pub(1, "b"), call("Join", "g", "a"), poll("g", "a", 64), adv(4 * ms),
			settle("Retry", "g", "a", 0, 9), desc, adv(4 * ms), settle("Ack", "g", "a", 1, 0), desc,
			adv(4 * ms), settle("Ack", "g", "a", 1, 0), adv(4 * ms), poll("g", "a", 64), desc,
		},
		"a poll that expires the other members, then its own refresh": {
			c("t", 4), pub(0, "a"), pub(1, "b"), pub(2, "c"), pub(3, "d"), call("Join", "g", "a"),
			call("Join", "g", "b"), call("Join", "h", "a"), adv(3 * ms), call("Heartbeat", "g", "a"),
			adv(2 * ms), handle(poll("g", "a", 64)), poll("h", "a", 64), desc, adv(5*ms - 1), pp("g", "a", 3),
			adv(1), pp("g", "a", 3), desc,
		},
		"an absent group and member, by name and by handle": append(append([]op{
			c("t", 2), pub(0, "a"), call("Join", "g", "a"), poll("g", "a", 1),
		}, absent("nog", "a")...), append(absent("g", "zz"),
			adv(5*ms), poll("nog", "a", 1), desc, call("Join", "g", "b"), adv(5*ms),
			handle(call("Heartbeat", "nog", "b")), desc)...),
		"a deleted and re-created group under an expired member": {
			c("t", 2), pub(0, "a"), call("Join", "g", "a"), poll("g", "a", 1), call("Leave", "g", "a"),
			op{kind: "DeleteGroup", topic: "t", group: "g"}, poll("g", "a", 1), call("Join", "g", "a"),
			poll("g", "a", 1), adv(5 * ms), op{kind: "DeleteGroup", topic: "t", group: "g"},
			poll("g", "a", 1), pp("g", "a", 0), call("Join", "g", "a"), poll("g", "a", 1),
			handle(call("Rejoin", "g", "a")), handle(poll("g", "a", 1)), adv(5 * ms), handle(poll("g", "a", 1)), desc,
		},
		"identifiers at the edges of rule 3": append([]op{c("t", 2), call("Join", "g", "m"), call("Join", "g", long)}, edgeIDs...),
	}
	configs := []diffConfig{
		{profile: profSmall, capacity: 4, budget: callBudget},
		{profile: profSession, capacity: 4, session: 5 * ms, sessionSet: true, budget: callBudget},
		{profile: profSession, capacity: 4, session: 5 * ms, sessionSet: true, ackTimeout: 5 * ms, ackSet: true, budget: callBudget},
		{profile: profSmall, capacity: 4, ackTimeout: 5 * ms, ackSet: true, budget: callBudget},
	}
	return scripts, configs
}
