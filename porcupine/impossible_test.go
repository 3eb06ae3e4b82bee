package porcupine

import (
	"html"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/model"
)

// configs are the broker configurations the internal tests cover: the
// default, a replay window with a message size limit, an ack timeout on a
// test clock, a session timeout on a test clock (with and without an ack
// timeout), and the version 0 history format.
var configs = []Config{
	{Capacity: 3, Version: HistoryVersion},
	{Capacity: 3, Version: HistoryVersion, Options: Options{ReplayWindow: 2, MaxMessageBytes: 8}},
	{Capacity: 2, Version: HistoryVersion, Options: Options{AckTimeout: 4 * time.Second, TestClock: true}},
	{Capacity: 2, Version: HistoryVersion, Options: Options{SessionTimeout: 4 * time.Second, TestClock: true}},
	{Capacity: 2, Version: HistoryVersion, Options: Options{SessionTimeout: 4 * time.Second, AckTimeout: 4 * time.Second, TestClock: true}},
	{Capacity: 2},
}

// TestImpossibleIsSound checks the Step fast path: on random states of
// every config, it never rules out the output the model actually gives, and
// it does rule out some outputs the model does not give (so the test can
// fail either way: a wrong fast path, or a fast path that never fires).
func TestImpossibleIsSound(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	ruledOut, settled := 0, 0
	for seq := 0; seq < 400; seq++ {
		c := configs[seq%len(configs)]
		s := Model(c).Init().(*state)
		s.b.Create("t", 3)
		for i := 0; i < 100; i++ {
			in := randomCall(rng, c, s)
			if in.Kind == KindAdvance {
				s.now += in.Advance
				s.b.SetClock(clockAt(s.now))
				continue
			}
			want := Apply(s.b.Clone(), in)
			c.normalize(&want)
			if (in.Kind == KindAck || in.Kind == KindRetry) && want.OK {
				settled++
			}
			if impossible(c, s.b, in, want) {
				t.Fatalf("config %+v state\n%v\ncall %v: impossible rules out the model's own output %+v", c, s.b, in, want)
			}
			if wrong, ok := wrongOutput(in, want); ok && impossible(c, s.b, in, wrong) {
				ruledOut++
			}
			Apply(s.b, in)
		}
	}
	if ruledOut == 0 || settled == 0 {
		t.Fatalf("impossible ruled out %d wrong outputs, %d acks or retries succeeded; want some of both", ruledOut, settled)
	}
	t.Logf("ruled out %d wrong outputs; %d acks or retries succeeded", ruledOut, settled)
}

// wrongOutput returns an output differing from the model's want in a way
// the fast path may detect, and whether there is one.
func wrongOutput(in Input, want Output) (Output, bool) {
	wrong := want
	switch {
	case want.Err != ErrNone:
		return wrong, false
	case in.Kind == KindPublish || in.Kind == KindPublishMessage:
		wrong.Offset = want.Offset + 1
	case (in.Kind == KindAck || in.Kind == KindRetry) && !want.OK:
		wrong.OK = true
	case (in.Kind == KindPoll || in.Kind == KindPollPartition) && len(want.Records) > 0:
		wrong.Records = append([]Record(nil), want.Records...)
		if len(want.Records)%2 == 0 {
			wrong.Records[0].Offset--
		} else {
			wrong.Records[0].Attempt++
		}
	case in.Kind == KindDescribe && want.Desc != nil:
		d := *want.Desc
		d.Partitions = d.Partitions[1:]
		wrong.Desc = &d
	default:
		return wrong, false
	}
	return wrong, true
}

// randomCall returns a call of any Kind on topic t (or now and then the
// never-created topic u), valid or not, aimed at deliveries often enough
// that acks succeed, for a broker configured as c in state s. Advance is
// returned only under a test clock.
func randomCall(rng *rand.Rand, c Config, s *state) Input {
	b := s.b
	group := []string{"g0", "g1", "bad.g"}[rng.IntN(3)]
	member := []string{"m0", "m1", "m2"}[rng.IntN(3)]
	topic := []string{"t", "t", "t", "t", "u"}[rng.IntN(5)]
	p := rng.Int32N(4) - rng.Int32N(2)
	switch rng.IntN(18) {
	case 16:
		return Input{Kind: KindHeartbeat, Topic: topic, Group: group, Member: member}
	case 17:
		return Input{Kind: KindRejoin, Topic: topic, Group: group, Member: member}
	case 0:
		return Input{Kind: KindJoin, Topic: topic, Group: group, Member: member}
	case 1:
		return Input{Kind: KindLeave, Topic: topic, Group: group, Member: member}
	case 2:
		return Input{Kind: KindPublish, Topic: topic, Partition: p, Payload: "x"}
	case 3:
		in := Input{Kind: KindPublishMessage, Topic: topic, Partition: p, Payload: "y", Key: []string{"", "k", "long-key"}[rng.IntN(3)]}
		if rng.IntN(2) == 0 {
			in.Headers = []Header{{"h", "v"}}
		}
		if rng.IntN(3) == 0 {
			in.Time = Epoch.Add(time.Duration(rng.IntN(10)) * time.Second)
		}
		return in
	case 4, 5:
		if rng.IntN(3) == 0 {
			return Input{Kind: KindPollPartition, Topic: topic, Group: group, Member: member, Partition: p}
		}
		return Input{Kind: KindPoll, Topic: topic, Group: group, Member: member, N: rng.Int32N(4)}
	case 6:
		return Input{Kind: KindCreateGroup, Topic: topic, Group: group, Assignor: randomAssignor(rng)}
	case 7:
		return Input{Kind: KindDeleteGroup, Topic: topic, Group: group}
	case 8:
		return Input{Kind: KindSetAssignor, Topic: topic, Group: group, Assignor: randomAssignor(rng)}
	case 9:
		return Input{Kind: KindAddPartitions, Topic: topic, N: rng.Int32N(3)}
	case 10:
		return Input{Kind: KindSeek, Topic: topic, Group: group, Partition: p, Offset: rng.Int64N(6) - 1}
	case 11:
		return Input{Kind: KindDescribe, Topic: topic}
	case 12:
		if c.Options.TestClock {
			d := max(c.Options.AckTimeout, c.Options.SessionTimeout)
			return Input{Kind: KindAdvance, Topic: topic, Advance: d / time.Duration(1+rng.IntN(3))}
		}
		return Input{Kind: KindCreate, Topic: topic, N: rng.Int32N(4)}
	default:
		off := rng.Int64N(5) - 1
		for q := int32(0); q < 3 && rng.IntN(4) > 0; q++ { // aim at a delivery in flight
			if f, err := b.InFlight(topic, group, q); err == nil && f {
				p = q
				off, _ = b.Committed(topic, group, q)
				break
			}
		}
		kind := KindAck
		if rng.IntN(2) == 0 {
			kind = KindRetry
		}
		return Input{Kind: kind, Topic: topic, Group: group, Member: member, Partition: p, Offset: off}
	}
}

func randomAssignor(rng *rand.Rand) string {
	return []string{"", "RoundRobin", "Range", "Sticky", "Picky"}[rng.IntN(5)]
}

// TestStepIsPure checks, for every config, that Step never changes the
// state it is given (porcupine caches and backtracks to states), whether the
// call fits or not, and that Equal and Hash agree on the states it produces.
func TestStepIsPure(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, c := range configs {
		m := Model(c)
		st := m.Init()
		for i := 0; i < 2000; i++ {
			s := st.(*state)
			in := randomCall(rng, c, s)
			var want Output
			if in.Kind == KindAdvance {
				want = Output{Now: s.now + in.Advance}
			} else {
				b := s.b.Clone()
				b.SetClock(clockAt(s.now))
				want = Apply(b, in)
				c.normalize(&want)
			}
			before, text := m.Hash(st), s.b.String()
			wrong := want
			wrong.OK = !wrong.OK
			if wrong.Err == ErrNone {
				wrong.Err = ErrInvalid
			} else {
				wrong.Err = ErrNone
			}
			if fits, _ := m.Step(st, in, wrong); fits {
				t.Fatalf("config %+v call %d %v: Step accepted a wrong output %+v", c, i, in, wrong)
			}
			fits, next := m.Step(st, in, want)
			if !fits {
				t.Fatalf("config %+v call %d %v: Step refused the model's own output %+v", c, i, in, want)
			}
			if m.Hash(st) != before || s.b.String() != text {
				t.Fatalf("config %+v call %d %v: Step changed its input state", c, i, in)
			}
			n := next.(*state)
			if m.Equal(st, next) != (m.Hash(st) == m.Hash(next) && text == n.b.String() && s.now == n.now) {
				t.Fatalf("config %+v call %d %v: Equal and Hash/String disagree", c, i, in)
			}
			if err := n.b.CheckInvariants(); err != nil {
				t.Fatalf("config %+v call %d %v: %v", c, i, in, err)
			}
			st = next
		}
	}
}

func TestDescribeState(t *testing.T) {
	b, _ := model.New(1, model.WithClock(zeroClock))
	b.Create("t", 1)
	b.Publish("t", 0, "<b>&")
	desc := describeState(&state{b: b})
	if strings.Contains(desc, "\n") {
		t.Fatalf("newline in %q", desc)
	}
	want := "capacity=1<br>topic t partitions=1<br>&nbsp;&nbsp;log p0 [0,1) &#34;&lt;b&gt;&amp;&#34;"
	if desc != want {
		t.Fatalf("describeState = %q, want %q", desc, want)
	}
	desc = describeState(&state{b: b, now: 1500 * time.Millisecond})
	if !strings.HasPrefix(desc, "clock=+1.5s<br>capacity=1") || html.UnescapeString(desc) == desc {
		t.Fatalf("describeState with a clock = %q", desc)
	}
}

// TestImpossibleUnderExpiry: a Poll may return a record that is in flight
// in the state before it, when the poll's own expiry (SPEC rule 24)
// cancels that delivery first, as in SPEC section 3.4's worked example at
// t=15s: the fast path must not rule that out.
func TestImpossibleUnderExpiry(t *testing.T) {
	c := Config{Capacity: 10, Version: HistoryVersion, Options: Options{SessionTimeout: 10 * time.Second, TestClock: true}}
	s := Model(c).Init().(*state)
	at := func(d time.Duration) { s.now = d; s.b.SetClock(clockAt(d)) }
	s.b.Create("t", 2)
	s.b.Publish("t", 0, "r0")
	s.b.Publish("t", 1, "r1")
	s.b.Join("t", "g", "a")
	at(time.Second)
	s.b.Join("t", "g", "b")
	at(2 * time.Second)
	s.b.Poll("t", "g", "a", 1)
	at(9 * time.Second)
	s.b.Heartbeat("t", "g", "b")
	at(15 * time.Second)
	if f, _ := s.b.InFlight("t", "g", 0); !f {
		t.Fatal("a's delivery of p0 is not in flight before b's poll")
	}
	in := Input{Kind: KindPoll, Topic: "t", Group: "g", Member: "b", N: 64}
	want := Apply(s.b.Clone(), in)
	c.normalize(&want)
	if len(want.Records) != 2 || want.Records[0].Attempt != 2 {
		t.Fatalf("b's poll at 15s: %+v, want p0 (Attempt 2) and p1", want.Records)
	}
	if impossible(c, s.b, in, want) {
		t.Fatalf("impossible rules out the model's own output %+v", want)
	}
}
