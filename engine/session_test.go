package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// Rules 24 (session timeout) and 25 (Rejoin) as table tests. Each case is
// a function of an lv, a broker on topic "t" with the test clock, whose
// calls go by name or through handles (lv.handles): every case runs both
// ways, since handles must behave exactly like the by-name calls. A
// mismatch stops the case with a message (lvFail), so that the same cases
// prove, in session_faults_test.go, that each liveness fault of the engine
// is caught.
//
//	go test -count=1 -run 'Liveness' ./engine/
//	go test -count=1 -tags tributary_faults -run 'LivenessFaults' ./engine/

// lvSession is the session timeout of every case but where it says.
const lvSession = 10 * time.Second

// lvCase is one case: a name, the broker's capacity, partitions and
// options beyond the clock, and the script.
type lvCase struct {
	name       string
	capacity   int32
	partitions int32
	noSession  bool // no WithSessionTimeout
	opts       []engine.Option
	run        func(c *lv)
}

// lv is one running case.
type lv struct {
	b       *engine.Broker
	clock   *testclock.Clock
	topic   *engine.TopicHandle
	handles bool
	members map[string]*engine.MemberHandle // group/member → handle
}

// lvFail is the panic value of a mismatch.
type lvFail struct{ msg string }

// failf stops the case with a message.
func (c *lv) failf(format string, args ...any) {
	panic(lvFail{fmt.Sprintf("at t=%v: ", c.elapsed()) + fmt.Sprintf(format, args...)})
}

// elapsed is the clock reading since the case began.
func (c *lv) elapsed() time.Duration { return c.clock.Now().Sub(testclock.Epoch) }

// at moves the clock to d after the case began (forward only).
func (c *lv) at(d time.Duration) {
	if d < c.elapsed() {
		panic("lv: the clock goes forward only")
	}
	c.clock.Advance(d - c.elapsed())
}

// noErr fails the case on a non-nil error.
func (c *lv) noErr(err error, what string) {
	if err != nil {
		c.failf("%s: unexpected error %v", what, err)
	}
}

// h returns the handle of member m of group g.
func (c *lv) h(g, m string) *engine.MemberHandle {
	k := g + "/" + m
	if h := c.members[k]; h != nil {
		return h
	}
	h, err := c.topic.Member(g, m)
	c.noErr(err, "Member")
	c.members[k] = h
	return h
}

func (c *lv) join(g, m string) []int32 {
	var ps []int32
	var err error
	if c.handles {
		ps, err = c.h(g, m).Join()
	} else {
		ps, err = c.b.Join("t", g, m)
	}
	c.noErr(err, "Join "+m)
	return ps
}

func (c *lv) rejoin(g, m string) []int32 {
	var ps []int32
	var err error
	if c.handles {
		ps, err = c.h(g, m).Rejoin()
	} else {
		ps, err = c.b.Rejoin("t", g, m)
	}
	c.noErr(err, "Rejoin "+m)
	return ps
}

func (c *lv) leave(g, m string) bool {
	var ok bool
	var err error
	if c.handles {
		ok, err = c.h(g, m).Leave()
	} else {
		ok, err = c.b.Leave("t", g, m)
	}
	c.noErr(err, "Leave "+m)
	return ok
}

func (c *lv) heartbeat(g, m string) bool {
	var ok bool
	var err error
	if c.handles {
		ok, err = c.h(g, m).Heartbeat()
	} else {
		ok, err = c.b.Heartbeat("t", g, m)
	}
	c.noErr(err, "Heartbeat "+m)
	return ok
}

// poll polls up to 64 records and returns them as "p/offset/attempt".
func (c *lv) poll(g, m string) []string {
	var rs []engine.Record
	var err error
	if c.handles {
		rs, err = c.h(g, m).Poll(64)
	} else {
		rs, err = c.b.Poll("t", g, m, 64)
	}
	c.noErr(err, "Poll "+m)
	out := []string{}
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%d/%d/%d", r.Partition, r.Offset, r.Attempt))
	}
	return out
}

// pollPartition is AppendPollPartition (handles only: it has no by-name
// form), in the same form as poll.
func (c *lv) pollPartition(g, m string, p int32) []string {
	rs, err := c.h(g, m).AppendPollPartition(nil, p)
	c.noErr(err, "AppendPollPartition "+m)
	out := []string{}
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%d/%d/%d", r.Partition, r.Offset, r.Attempt))
	}
	return out
}

func (c *lv) ack(g, m string, p int32, off int64) bool {
	var ok bool
	var err error
	if c.handles {
		ok, err = c.h(g, m).Ack(p, off)
	} else {
		ok, err = c.b.Ack("t", g, m, p, off)
	}
	c.noErr(err, "Ack "+m)
	return ok
}

func (c *lv) retry(g, m string, p int32, off int64) bool {
	var ok bool
	var err error
	if c.handles {
		ok, err = c.h(g, m).Retry(p, off)
	} else {
		ok, err = c.b.Retry("t", g, m, p, off)
	}
	c.noErr(err, "Retry "+m)
	return ok
}

func (c *lv) publish(p int32, payload string) int64 {
	var off int64
	var err error
	if c.handles {
		off, err = c.topic.Publish(p, payload)
	} else {
		off, err = c.b.Publish("t", p, payload)
	}
	c.noErr(err, "Publish")
	return off
}

func (c *lv) describe() engine.TopicDescription {
	d, err := c.b.Describe("t")
	c.noErr(err, "Describe")
	return d
}

// group returns g's description (from a Describe, which expires first).
func (c *lv) group(g string) engine.GroupDescription {
	for _, gd := range c.describe().Groups {
		if gd.Group == g {
			return gd
		}
	}
	c.failf("Describe: no group %q", g)
	return engine.GroupDescription{}
}

// eq fails the case unless got equals want (compared as printed).
func (c *lv) eq(what string, got, want any) {
	if fmt.Sprint(got) != fmt.Sprint(want) {
		c.failf("%s = %v, want %v", what, got, want)
	}
}

// seenAt returns member m's LastSeen in gd as an offset from the case's
// start.
func (c *lv) seenAt(gd engine.GroupDescription, m string) time.Duration {
	i := slices.Index(gd.Members, m)
	if i < 0 {
		c.failf("%s is not a member of %s (members %v)", m, gd.Group, gd.Members)
	}
	if len(gd.LastSeen) != len(gd.Members) {
		c.failf("LastSeen %v for members %v", gd.LastSeen, gd.Members)
	}
	return gd.LastSeen[i].Sub(testclock.Epoch)
}

// runLv runs case k, by name or through handles, and returns its first
// mismatch ("" when none). mk makes the broker.
func runLv(mk func(int32, ...engine.Option) (*engine.Broker, error), k lvCase, handles bool) (msg string) {
	clock := testclock.New()
	opts := append([]engine.Option{engine.WithClock(clock.Now)}, k.opts...)
	if !k.noSession {
		opts = append(opts, engine.WithSessionTimeout(lvSession))
	}
	capacity, partitions := k.capacity, k.partitions
	if capacity == 0 {
		capacity = 10
	}
	if partitions == 0 {
		partitions = 2
	}
	b, err := mk(capacity, opts...)
	if err != nil {
		return err.Error()
	}
	if _, err := b.Create("t", partitions); err != nil {
		return err.Error()
	}
	th, err := b.Topic("t")
	if err != nil {
		return err.Error()
	}
	c := &lv{b: b, clock: clock, topic: th, handles: handles, members: map[string]*engine.MemberHandle{}}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(lvFail)
			if !ok {
				panic(r)
			}
			msg = f.msg
		}
	}()
	k.run(c)
	return ""
}

// lvCases are the cases of rules 24 and 25.
var lvCases = []lvCase{
	{name: "rule 24 worked example", run: func(c *lv) {
		// SPEC 3.4, verbatim: capacity 10, WithSessionTimeout(10s), a test
		// clock at t=0, topic t with 2 partitions, one record on each.
		c.eq("publish p0", c.publish(0, "x0"), 0)
		c.eq("publish p1", c.publish(1, "x1"), 0)
		c.eq("Join a", c.join("g", "a"), []int32{0, 1})
		c.at(1 * time.Second)
		c.eq("Join b", c.join("g", "b"), []int32{1})
		c.eq("owners after b joined", ftOwners(c.group("g")), []string{"a", "b"})
		c.at(2 * time.Second)
		c.eq("a polls", c.poll("g", "a"), []string{"0/0/1"})
		c.at(9 * time.Second)
		c.eq("b heartbeats", c.heartbeat("g", "b"), true)
		gd := c.group("g") // a was last seen 7s before: not expired
		c.eq("members at 9s", gd.Members, []string{"a", "b"})
		c.eq("a last seen", c.seenAt(gd, "a"), 2*time.Second)
		c.eq("b last seen", c.seenAt(gd, "b"), 9*time.Second)
		c.at(15 * time.Second)
		c.eq("b polls at 15s", c.poll("g", "b"), []string{"0/0/2", "1/0/1"})
		gd = c.group("g")
		c.eq("members at 15s", gd.Members, []string{"b"})
		c.eq("owners at 15s", ftOwners(gd), []string{"b", "b"})
		c.at(16 * time.Second)
		c.eq("a's Ack at 16s", c.ack("g", "a", 0, 0), false)
		c.eq("a's Heartbeat at 16s", c.heartbeat("g", "a"), false)
		c.eq("members at 16s", c.group("g").Members, []string{"b"})
	}},
	{name: "rule 25 worked example", run: func(c *lv) {
		c.publish(0, "x0")
		c.publish(1, "x1")
		c.eq("Join a", c.join("g", "a"), []int32{0, 1})
		c.eq("a polls", c.poll("g", "a"), []string{"0/0/1", "1/0/1"})
		c.eq("Rejoin a", c.rejoin("g", "a"), []int32{0, 1})
		c.eq("members", c.group("g").Members, []string{"a"})
		c.eq("a polls again", c.poll("g", "a"), []string{"0/0/2", "1/0/2"})
	}},
	{name: "rule 25 without a session timeout", noSession: true, run: func(c *lv) {
		c.publish(0, "x0")
		c.eq("Join a", c.join("g", "a"), []int32{0, 1})
		c.eq("a polls", c.poll("g", "a"), []string{"0/0/1"})
		c.eq("Rejoin a", c.rejoin("g", "a"), []int32{0, 1})
		c.eq("a polls again", c.poll("g", "a"), []string{"0/0/2"})
	}},
	{name: "exactly the timeout expires", run: func(c *lv) {
		c.join("g", "a")
		c.at(lvSession - time.Nanosecond)
		c.eq("members just before", c.group("g").Members, []string{"a"}) // Describe does not refresh
		c.at(lvSession)
		c.eq("members at exactly d", c.group("g").Members, []string{})
	}},
	{name: "describe expires and does not refresh", run: func(c *lv) {
		c.join("g", "a")
		c.at(8 * time.Second)
		c.describe()
		c.publish(0, "x")
		c.at(10 * time.Second)
		c.eq("members", c.group("g").Members, []string{})
	}},
	{name: "an invalid call expires nobody", run: func(c *lv) {
		c.join("g", "a")
		h := c.h("g", "a")
		c.at(20 * time.Second)
		invalid := []struct {
			name string
			err  error
		}{
			{"Poll maxRecords 0", second(c.b.Poll("t", "g", "a", 0))},
			{"Poll bad member", second(c.b.Poll("t", "g", "a b", 1))},
			{"Poll bad group", second(c.b.Poll("t", "g g", "a", 1))},
			{"Handle poll maxRecords 65", second(h.Poll(65))},
			{"Ack negative offset", second(c.b.Ack("t", "g", "a", 0, -1))},
			{"Ack bad partition", second(c.b.Ack("t", "g", "a", 2, 0))},
			{"Retry bad member", second(c.b.Retry("t", "g", "", 0, 0))},
			{"Handle ack bad partition", second(h.Ack(-1, 0))},
			{"Heartbeat bad member", second(c.b.Heartbeat("t", "g", "a/"))},
			{"Heartbeat unknown topic", second(c.b.Heartbeat("nope", "g", "a"))},
			{"Rejoin bad member", second(c.b.Rejoin("t", "g", strings.Repeat("a", 65)))},
			{"Join bad group", second(c.b.Join("t", "", "a"))},
			{"Leave bad member", second(c.b.Leave("t", "g", "é"))},
			{"Publish bad partition", second(c.b.Publish("t", 7, "x"))},
			{"Seek negative", second(c.b.Seek("t", "g", 0, -1))},
			{"AddPartitions 0", second(c.b.AddPartitions("t", 0))},
			{"CreateGroup nil assignor", second(c.b.CreateGroup("t", "h", nil))},
			{"DeleteGroup bad group", second(c.b.DeleteGroup("t", "g!"))},
		}
		for _, k := range invalid {
			if !errors.Is(k.err, engine.ErrInvalidArgument) {
				c.failf("%s: error %v, want ErrInvalidArgument", k.name, k.err)
			}
			if !h.Joined() { // an inspection: it expires nobody
				c.failf("%s expired a", k.name)
			}
		}
		c.eq("members after a valid call", c.group("g").Members, []string{})
		if h.Joined() {
			c.failf("a still joined after Describe at 20s")
		}
	}},
	{name: "expired member: its own calls", run: func(c *lv) {
		c.publish(0, "x0")
		c.publish(1, "x1")
		c.join("g", "a")
		c.eq("a polls", c.poll("g", "a"), []string{"0/0/1", "1/0/1"})
		c.at(10 * time.Second)
		c.eq("a's Ack", c.ack("g", "a", 0, 0), false) // it expires a first
		c.eq("a's Retry", c.retry("g", "a", 1, 0), false)
		c.eq("a's Poll", c.poll("g", "a"), []string{})
		c.eq("a's Heartbeat", c.heartbeat("g", "a"), false)
		c.eq("a's Leave", c.leave("g", "a"), false)
		gd := c.group("g")
		c.eq("members", gd.Members, []string{})
		for _, p := range gd.Partitions {
			if p.InFlight || p.Committed != 0 || p.Attempts != 1 {
				c.failf("partition %d after expiry: %+v, want committed 0, attempts 1, not in flight", p.Partition, p)
			}
		}
		c.eq("Join a again", c.join("g", "a"), []int32{0, 1})
		c.eq("a polls again", c.poll("g", "a"), []string{"0/0/2", "1/0/2"})
		c.eq("a acks", c.ack("g", "a", 0, 0), true)
	}},
	{name: "every valid call on the topic expires first", run: func(c *lv) {
		c.join("other", "z")
		calls := []struct {
			name string
			call func() error
		}{
			{"Publish", func() error { return second(c.b.Publish("t", 1, "x")) }},
			{"PublishMessage", func() error {
				return second(c.b.PublishMessage("t", 1, engine.Message{Payload: "x", Time: testclock.Epoch}))
			}},
			{"Poll of another group", func() error { return second(c.b.Poll("t", "other", "y", 1)) }},
			{"Poll of an absent group", func() error { return second(c.b.Poll("t", "nope", "y", 1)) }},
			{"AppendPoll", func() error { return second(c.b.AppendPoll(nil, "t", "other", "y", 1)) }},
			{"Ack of another group", func() error { return second(c.b.Ack("t", "other", "y", 0, 0)) }},
			{"Retry of an absent group", func() error { return second(c.b.Retry("t", "nope", "y", 0, 0)) }},
			{"Heartbeat of another member", func() error { return second(c.b.Heartbeat("t", "other", "y")) }},
			{"Join of another group", func() error { return second(c.b.Join("t", "j", "y")) }},
			{"Rejoin of another group", func() error { return second(c.b.Rejoin("t", "j", "y")) }},
			{"Leave of another member", func() error { return second(c.b.Leave("t", "other", "y")) }},
			{"CreateGroup", func() error { return second(c.b.CreateGroup("t", "other", engine.Range)) }},
			{"CreateGroupAt", func() error { return second(c.b.CreateGroupAt("t", "other", engine.Range, engine.StartLatest)) }},
			{"SetAssignor of an absent group", func() error { return second(c.b.SetAssignor("t", "nope", engine.Range)) }},
			{"Seek out of range", func() error {
				_, err := c.b.Seek("t", "other", 0, 99)
				if !errors.Is(err, engine.ErrOffsetOutOfRange) {
					return fmt.Errorf("Seek to 99: %v, want ErrOffsetOutOfRange", err)
				}
				return nil
			}},
			{"DeleteGroup of a group with members", func() error {
				_, err := c.b.DeleteGroup("t", "g") // g's expired member goes first: g is empty then
				return err
			}},
			{"AddPartitions", func() error { return second(c.b.AddPartitions("t", 1)) }},
			{"Snapshot", func() error { return second(c.b.Snapshot("t")) }},
			{"handle Poll of an absent group", func() error { return second(c.h("nope", "y").Poll(1)) }},
			{"handle AppendPollPartition of an absent group", func() error { return second(c.h("nope", "y").AppendPollPartition(nil, 0)) }},
			{"handle Ack of an absent group", func() error { return second(c.h("nope", "y").Ack(0, 0)) }},
		}
		for i, k := range calls {
			m := fmt.Sprintf("a%d", i)
			start := c.elapsed()
			c.eq("Join "+m, c.join("g", m) != nil, true)
			c.eq("Heartbeat z", c.heartbeat("other", "z"), true)
			c.at(start + lvSession - time.Nanosecond)
			c.eq("Heartbeat z", c.heartbeat("other", "z"), true)
			c.at(start + lvSession)
			if err := k.call(); err != nil {
				c.failf("%s: %v", k.name, err)
			}
			if c.h("g", m).Joined() { // an inspection: it expires nobody
				c.failf("%s did not expire %s, last seen %v before", k.name, m, lvSession)
			}
			if !c.h("other", "z").Joined() {
				c.failf("%s expired z, last seen 1ns before", k.name)
			}
		}
	}},
	{name: "leave of an expired member is false", run: func(c *lv) {
		c.join("g", "a")
		c.join("g", "b")
		c.at(10 * time.Second)
		c.eq("a's Leave at 10s", c.leave("g", "a"), false) // it expires a and b first
		c.eq("b's Leave", c.leave("g", "b"), false)
	}},
	{name: "expiry is a leave: offsets kept, deliveries cancelled", run: func(c *lv) {
		for range 2 {
			c.publish(0, "x")
		}
		c.join("g", "a")
		c.eq("a polls", c.poll("g", "a"), []string{"0/0/1"})
		c.eq("a acks", c.ack("g", "a", 0, 0), true)
		c.eq("a polls", c.poll("g", "a"), []string{"0/1/1"})
		c.at(5 * time.Second)
		c.join("g", "b") // a keeps 0 (RoundRobin: a→0, b→1)
		c.at(12 * time.Second)
		c.eq("b polls", c.poll("g", "b"), []string{"0/1/2"})
		gd := c.group("g")
		c.eq("committed", gd.Partitions[0].Committed, 1)
		c.eq("lag", gd.Partitions[0].Lag, 1)
	}},
	{name: "every member call refreshes, whatever it returns", run: func(c *lv) {
		c.publish(0, "x0")
		c.join("g", "a")
		c.join("g", "b") // a: [0], b: [1]
		refresh := []struct {
			name string
			call func()
		}{
			{"Join", func() { c.eq("Join a", c.join("g", "a"), []int32{0}) }},
			{"Rejoin", func() { c.eq("Rejoin a", c.rejoin("g", "a"), []int32{0}) }},
			{"Heartbeat", func() { c.eq("Heartbeat a", c.heartbeat("g", "a"), true) }},
			{"Poll", func() { c.eq("a polls", c.poll("g", "a"), []string{"0/0/1"}) }},
			{"Poll empty", func() { c.eq("a polls", c.poll("g", "a"), []string{}) }},
			{"Ack false", func() { c.eq("a acks p1", c.ack("g", "a", 1, 0), false) }},
			{"Retry true", func() { c.eq("a retries", c.retry("g", "a", 0, 0), true) }},
			{"Retry false", func() { c.eq("a retries", c.retry("g", "a", 0, 0), false) }},
			{"Poll", func() { c.eq("a polls", c.poll("g", "a"), []string{"0/0/2"}) }},
			{"Ack true", func() { c.eq("a acks", c.ack("g", "a", 0, 0), true) }},
			{"Ack false", func() { c.eq("a acks", c.ack("g", "a", 0, 0), false) }},
			{"Retry not owner", func() { c.eq("a retries p1", c.retry("g", "a", 1, 5), false) }},
		}
		if c.handles {
			refresh = append(refresh, struct {
				name string
				call func()
			}{"AppendPollPartition of a partition it does not own", func() {
				c.eq("a polls p1", c.pollPartition("g", "a", 1), []string{})
			}})
		}
		now := time.Duration(0)
		for _, r := range refresh {
			now += 6 * time.Second // b is kept alive by heartbeats at the same instants
			c.at(now)
			r.call()
			c.eq(r.name+": b's heartbeat", c.heartbeat("g", "b"), true)
			gd := c.group("g")
			c.eq(r.name+": members", gd.Members, []string{"a", "b"})
			c.eq(r.name+": a last seen", c.seenAt(gd, "a"), now)
		}
	}},
	{name: "calls that do not refresh", run: func(c *lv) {
		c.join("g", "a")
		c.join("g", "b")
		c.at(5 * time.Second)
		c.heartbeat("g", "b")
		c.publish(0, "x")
		c.describe()
		_, err := c.b.Snapshot("t")
		c.noErr(err, "Snapshot")
		_, err = c.b.Seek("t", "g", 0, 0)
		c.noErr(err, "Seek")
		_, err = c.b.CreateGroup("t", "h", engine.Range)
		c.noErr(err, "CreateGroup")
		_, err = c.b.SetAssignor("t", "g", engine.RoundRobin)
		c.noErr(err, "SetAssignor")
		c.eq("Leave of another member", c.leave("g", "b"), true)
		c.eq("Heartbeat of another group", c.heartbeat("h", "a"), false)
		_, err = c.b.AddPartitions("t", 1)
		c.noErr(err, "AddPartitions")
		gd := c.group("g")
		c.eq("a last seen", c.seenAt(gd, "a"), time.Duration(0))
		c.at(10 * time.Second)
		c.eq("members", c.group("g").Members, []string{})
	}},
	{name: "expiry on publish and on calls of other groups", run: func(c *lv) {
		c.join("g", "a")
		c.join("h", "z")
		c.at(4 * time.Second)
		c.heartbeat("h", "z")
		c.at(10 * time.Second)
		c.publish(0, "x") // expires a, not z
		if c.h("g", "a").Joined() {
			c.failf("a still a member after the publish at 10s")
		}
		if !c.h("h", "z").Joined() {
			c.failf("z expired at 10s, last seen at 4s")
		}
		c.at(14 * time.Second)
		c.eq("z's heartbeat at 14s", c.heartbeat("h", "z"), false)
	}},
	{name: "several members expire in one rebalance", opts: []engine.Option{}, partitions: 6, run: func(c *lv) {
		_, err := c.b.CreateGroup("t", "g", engine.Sticky)
		c.noErr(err, "CreateGroup")
		for _, m := range []string{"a", "b", "c"} {
			c.join("g", m)
		}
		c.at(1 * time.Second)
		c.join("g", "d") // Sticky over a b c d keeps as much as it can
		c.at(10 * time.Second)
		c.eq("d's heartbeat at 10s", c.heartbeat("g", "d"), true) // a b c expire together
		gd := c.group("g")
		c.eq("members", gd.Members, []string{"d"})
		c.eq("owners", ftOwners(gd), []string{"d", "d", "d", "d", "d", "d"})
	}},
	{name: "rejoin of a member: no rebalance, own deliveries only", run: func(c *lv) {
		c.publish(0, "x0")
		c.publish(1, "x1")
		c.join("g", "a")
		c.join("g", "b")
		c.eq("a polls", c.poll("g", "a"), []string{"0/0/1"})
		c.eq("b polls", c.poll("g", "b"), []string{"1/0/1"})
		before := c.group("g")
		c.at(3 * time.Second)
		c.eq("Rejoin a", c.rejoin("g", "a"), []int32{0})
		gd := c.group("g")
		c.eq("members", gd.Members, before.Members)
		c.eq("owners", ftOwners(gd), ftOwners(before))
		c.eq("p0 in flight", gd.Partitions[0].InFlight, false)
		c.eq("p0 attempts", gd.Partitions[0].Attempts, 1)
		c.eq("p1 in flight", gd.Partitions[1].InFlight, true)
		c.eq("a last seen", c.seenAt(gd, "a"), 3*time.Second)
		c.eq("a's old Ack", c.ack("g", "a", 0, 0), false)
		c.eq("b's Ack", c.ack("g", "b", 1, 0), true)
		c.eq("a polls again", c.poll("g", "a"), []string{"0/0/2"})
	}},
	{name: "rejoin of a non-member is join", run: func(c *lv) {
		c.publish(0, "x0")
		c.eq("Rejoin a (no group)", c.rejoin("g", "a"), []int32{0, 1})
		gd := c.group("g")
		c.eq("assignor", gd.Assignor, "RoundRobin")
		c.eq("a polls", c.poll("g", "a"), []string{"0/0/1"})
		c.at(1 * time.Second)
		c.eq("Rejoin b (absent member)", c.rejoin("g", "b"), []int32{1})
		c.eq("owners", ftOwners(c.group("g")), []string{"a", "b"})
		c.at(11 * time.Second)
		c.eq("Rejoin a after its expiry", c.rejoin("g", "a"), []int32{0, 1}) // b expired too (last seen 1s)
		gd = c.group("g")
		c.eq("members", gd.Members, []string{"a"})
		c.eq("a polls", c.poll("g", "a"), []string{"0/0/2"})
	}},
	{name: "a refused expiry rebalance changes nothing", run: func(c *lv) {
		_, err := c.b.CreateGroup("t", "g", lvNoSolo{})
		c.noErr(err, "CreateGroup")
		c.join("g", "a")
		c.join("g", "b")
		c.at(5 * time.Second)
		c.heartbeat("g", "b")
		c.at(10 * time.Second)
		c.eq("publish", c.publish(0, "x"), 0) // a's expiry would leave b alone: refused
		gd := c.group("g")
		c.eq("members", gd.Members, []string{"a", "b"})
		c.at(15 * time.Second)
		c.eq("members at 15s", c.group("g").Members, []string{}) // both expire: no assignor run
	}},
	{name: "without the option nothing expires", noSession: true, run: func(c *lv) {
		c.join("g", "a")
		c.at(1000 * time.Hour)
		gd := c.group("g")
		c.eq("members", gd.Members, []string{"a"})
		if gd.LastSeen != nil {
			c.failf("LastSeen %v without a session timeout", gd.LastSeen)
		}
		c.eq("Heartbeat a", c.heartbeat("g", "a"), true)
		c.eq("Heartbeat z", c.heartbeat("g", "z"), false)
		c.eq("Heartbeat of an absent group", c.heartbeat("h", "a"), false)
		c.eq("SessionTimeout", c.b.SessionTimeout(), time.Duration(0))
	}},
	{name: "describe's last seen", run: func(c *lv) {
		_, err := c.b.CreateGroup("t", "empty", engine.Range)
		c.noErr(err, "CreateGroup")
		for _, gd := range c.describe().Groups {
			if gd.Group == "empty" && (gd.LastSeen == nil || len(gd.LastSeen) != 0) {
				c.failf("LastSeen of a memberless group: %#v, want empty, not nil", gd.LastSeen)
			}
		}
		c.at(2 * time.Second)
		c.join("g", "b")
		c.at(3 * time.Second)
		c.join("g", "a")
		gd := c.group("g")
		c.eq("members", gd.Members, []string{"a", "b"})
		c.eq("LastSeen", []time.Duration{c.seenAt(gd, "a"), c.seenAt(gd, "b")}, []time.Duration{3 * time.Second, 2 * time.Second})
		c.eq("SessionTimeout", c.b.SessionTimeout(), lvSession)
	}},
	{name: "heartbeat of an absent member stays absent", run: func(c *lv) {
		c.join("g", "a")
		c.eq("Heartbeat b", c.heartbeat("g", "b"), false)
		c.eq("members", c.group("g").Members, []string{"a"})
		c.leave("g", "a")
		c.eq("Heartbeat a after Leave", c.heartbeat("g", "a"), false)
		c.eq("members after", c.group("g").Members, []string{})
	}},
	{name: "expired group can be deleted", run: func(c *lv) {
		c.join("g", "a")
		c.at(10 * time.Second)
		ok, err := c.b.DeleteGroup("t", "g") // expires a first: the group is empty
		c.noErr(err, "DeleteGroup")
		c.eq("DeleteGroup", ok, true)
		c.eq("Heartbeat a", c.heartbeat("g", "a"), false)
	}},
}

// second returns the error of a two-result call.
func second[T any](_ T, err error) error { return err }

// lvNoSolo is RoundRobin, except that it refuses a group of b alone: an
// assignor that answers wrongly (SPEC rule 18), for the refused expiry.
type lvNoSolo struct{}

func (lvNoSolo) Name() string { return "NoSolo" }

func (lvNoSolo) Assign(members, previous []string) []string {
	if slices.Equal(members, []string{"b"}) {
		return nil
	}
	return engine.RoundRobin.Assign(members, previous)
}

// TestLiveness runs every case of rules 24 and 25, by name and through
// handles.
func TestLiveness(t *testing.T) {
	for _, k := range lvCases {
		for _, handles := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/handles=%v", k.name, handles), func(t *testing.T) {
				if msg := runLv(engine.New, k, handles); msg != "" {
					t.Fatal(msg)
				}
			})
		}
	}
}

// TestSessionTimeoutOption: WithSessionTimeout takes d > 0.
func TestSessionTimeoutOption(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Nanosecond, -time.Hour} {
		b, err := engine.New(10, engine.WithSessionTimeout(d))
		require.ErrorIs(t, err, engine.ErrInvalidArgument, "d=%v", d)
		require.Nil(t, b)
	}
	b, err := engine.New(10, engine.WithSessionTimeout(time.Nanosecond))
	require.NoError(t, err)
	require.Equal(t, time.Nanosecond, b.SessionTimeout())
}
