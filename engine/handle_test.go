package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// Tests of the bound handles (TopicHandle, MemberHandle) and of their
// wake-up signals (Ready, Room, NextTimeout). Helpers are prefixed h to keep
// out of the way of the other test files of the package.

// ---------------------------------------------------------------------------
// 1. Differential: handles against names.

// hOutcome is one call's result; every field is compared with cmp, so nil
// and empty slices differ, as they would for a caller.
type hOutcome struct {
	Err     string // errClass of the error
	Int     int64
	Bool    bool
	Parts   []int32
	Records []engine.Record
}

func hErrOnly(err error) hOutcome { return hOutcome{Err: errClass(err)} }

// hBadAssignor answers nothing: every rebalance it runs with members fails
// with ErrInvalidAssignment.
type hBadAssignor struct{}

func (hBadAssignor) Name() string                               { return "h-bad" }
func (hBadAssignor) Assign(members, previous []string) []string { return nil }

// hDiffConfig is one seed's broker configuration; both brokers get it.
type hDiffConfig struct {
	capacity   int32
	window     int32
	ackTimeout time.Duration // 0: none
	maxBytes   int           // 0: no limit
}

func (c hDiffConfig) options(clock *testclock.Clock) []engine.Option {
	opts := []engine.Option{engine.WithClock(clock.Now), engine.WithReplayWindow(c.window)}
	if c.ackTimeout > 0 {
		opts = append(opts, engine.WithAckTimeout(c.ackTimeout))
	}
	if c.maxBytes > 0 {
		opts = append(opts, engine.WithMaxMessageBytes(c.maxBytes))
	}
	return opts
}

// hDiff drives two identical brokers with one random sequence: names calls
// the by-name methods, handles the same operations through one TopicHandle
// and MemberHandles made before any group exists (some remade at random).
type hDiff struct {
	t              *testing.T
	rng            *rand.Rand
	cfg            hDiffConfig
	names, handles *engine.Broker
	clockN, clockH *testclock.Clock
	th             *engine.TopicHandle
	members        map[string]*engine.MemberHandle // by group + "/" + member
	history        []string
}

var (
	hGroups  = []string{"g1", "g2", "g3"}
	hMembers = []string{"a", "b", "c"}
)

func newHDiff(t *testing.T, seed uint64) *hDiff {
	rng := rand.New(rand.NewPCG(seed, 0x68616e646c65))
	cfg := hDiffConfig{capacity: []int32{2, 3, 5}[rng.IntN(3)], window: int32(rng.IntN(2))}
	if rng.IntN(2) == 0 {
		cfg.ackTimeout = 5 * time.Second
	}
	if rng.IntN(2) == 0 {
		cfg.maxBytes = 24
	}
	d := &hDiff{t: t, rng: rng, cfg: cfg, clockN: testclock.New(), clockH: testclock.New(), members: map[string]*engine.MemberHandle{}}
	var err error
	d.names, err = engine.New(cfg.capacity, cfg.options(d.clockN)...)
	require.NoError(t, err)
	d.handles, err = engine.New(cfg.capacity, cfg.options(d.clockH)...)
	require.NoError(t, err)
	for _, b := range []*engine.Broker{d.names, d.handles} {
		ok, err := b.Create("t", 2)
		require.NoError(t, err)
		require.True(t, ok)
	}
	d.th, err = d.handles.Topic("t")
	require.NoError(t, err)
	for _, g := range hGroups {
		for _, m := range hMembers {
			d.members[g+"/"+m], err = d.th.Member(g, m)
			require.NoError(t, err)
		}
	}
	return d
}

// group and member pick identifiers, now and then an invalid one.
func (d *hDiff) group() string {
	if d.rng.IntN(40) == 0 {
		return []string{"", "bad group", strings.Repeat("g", 65)}[d.rng.IntN(3)]
	}
	return hGroups[d.rng.IntN(len(hGroups))]
}

func (d *hDiff) member() string {
	if d.rng.IntN(40) == 0 {
		return []string{"", "bad/member"}[d.rng.IntN(2)]
	}
	return hMembers[d.rng.IntN(len(hMembers))]
}

// handle returns the MemberHandle of (group, member), or th.Member's error
// for an invalid identifier.
func (d *hDiff) handle(group, member string) (*engine.MemberHandle, error) {
	if h, ok := d.members[group+"/"+member]; ok {
		return h, nil
	}
	h, err := d.th.Member(group, member)
	if err == nil {
		d.t.Fatalf("th.Member(%q, %q) accepted an identifier the test meant as invalid", group, member)
	}
	return h, err
}

// partition picks -1..count: out of range now and then.
func (d *hDiff) partition() int32 {
	n := d.th.Partitions()
	return int32(d.rng.IntN(int(n)+2)) - 1
}

// offset picks an offset for Ack, Retry or Seek of group on p: mostly the
// committed one (the in-flight record, if any), else near it, the log
// bounds, a negative or a random one.
func (d *hDiff) offset(desc engine.TopicDescription, group string, p int32) int64 {
	var committed, start, end int64
	if int(p) >= 0 && int(p) < len(desc.Partitions) {
		start, end = desc.Partitions[p].LogStartOffset, desc.Partitions[p].LogEndOffset
		committed = start
		for _, g := range desc.Groups {
			if g.Group == group {
				committed = g.Partitions[p].Committed
			}
		}
	}
	switch d.rng.IntN(10) {
	case 0:
		return committed + 1
	case 1:
		return committed - 1 // negative at offset 0
	case 2:
		return start
	case 3:
		return end
	case 4:
		return -1 - int64(d.rng.IntN(3))
	case 5:
		return int64(d.rng.IntN(12))
	default:
		return committed
	}
}

func (d *hDiff) maxRecords() int32 {
	return []int32{1, 1, 2, 3, engine.MaxPollRecords, 0, engine.MaxPollRecords + 1, -1}[d.rng.IntN(8)]
}

func (d *hDiff) assignor() engine.Assignor {
	return []engine.Assignor{engine.RoundRobin, engine.Range, engine.Sticky, nil, hBadAssignor{}}[d.rng.IntN(5)]
}

func (d *hDiff) message(step int) engine.Message {
	m := engine.Message{Payload: fmt.Sprintf("m%d", step)}
	switch d.rng.IntN(4) {
	case 0:
		m.Key = "key"
	case 1:
		m.Headers = []engine.Header{{Key: "h", Value: "v"}, {Key: "trace", Value: fmt.Sprint(step)}}
	case 2:
		m.Payload = strings.Repeat("x", 30) // over WithMaxMessageBytes(24)
	}
	if d.rng.IntN(3) == 0 {
		m.Time = testclock.Epoch.Add(time.Duration(step) * time.Millisecond)
	}
	return m
}

// step applies one random operation to both brokers and returns its
// description and both outcomes.
func (d *hDiff) step(i int, desc engine.TopicDescription) (string, hOutcome, hOutcome) {
	n, th := d.names, d.th
	var on, oh hOutcome
	var what string
	switch k := d.rng.IntN(100); {
	case k < 14:
		p := d.partition()
		payload := fmt.Sprintf("p%d", i)
		what = fmt.Sprintf("Publish(%d, %q)", p, payload)
		off, err := n.Publish("t", p, payload)
		on = hOutcome{Err: errClass(err), Int: off}
		off, err = th.Publish(p, payload)
		oh = hOutcome{Err: errClass(err), Int: off}
	case k < 20:
		p := d.partition()
		m := d.message(i)
		what = fmt.Sprintf("PublishMessage(%d, %+v)", p, m)
		off, err := n.PublishMessage("t", p, m)
		on = hOutcome{Err: errClass(err), Int: off}
		off, err = th.PublishMessage(p, m)
		oh = hOutcome{Err: errClass(err), Int: off}
	case k < 27:
		g, m := d.group(), d.member()
		what = fmt.Sprintf("Join(%q, %q)", g, m)
		parts, err := n.Join("t", g, m)
		on = hOutcome{Err: errClass(err), Parts: parts}
		if h, err := d.handle(g, m); err != nil {
			oh = hErrOnly(err)
			on = hOutcome{Err: on.Err} // an invalid identifier: compare the error only
		} else {
			parts, err := h.Join()
			oh = hOutcome{Err: errClass(err), Parts: parts}
		}
	case k < 31:
		g, m := d.group(), d.member()
		what = fmt.Sprintf("Leave(%q, %q)", g, m)
		ok, err := n.Leave("t", g, m)
		on = hOutcome{Err: errClass(err), Bool: ok}
		if h, err := d.handle(g, m); err != nil {
			oh, on = hErrOnly(err), hOutcome{Err: on.Err}
		} else {
			ok, err := h.Leave()
			oh = hOutcome{Err: errClass(err), Bool: ok}
		}
	case k < 45:
		g, m, mr := d.group(), d.member(), d.maxRecords()
		what = fmt.Sprintf("Poll(%q, %q, %d)", g, m, mr)
		recs, err := n.Poll("t", g, m, mr)
		on = hOutcome{Err: errClass(err), Records: recs}
		if h, err := d.handle(g, m); err != nil {
			oh, on = hErrOnly(err), hOutcome{Err: on.Err}
		} else {
			recs, err := h.Poll(mr)
			oh = hOutcome{Err: errClass(err), Records: recs}
		}
	case k < 55:
		g, m, mr := d.group(), d.member(), d.maxRecords()
		what = fmt.Sprintf("AppendPoll(%q, %q, %d)", g, m, mr)
		prefix := []engine.Record{{Topic: "already", Payload: "in dst"}}
		recs, err := n.AppendPoll(prefix[:1:1], "t", g, m, mr)
		on = hOutcome{Err: errClass(err), Records: recs}
		if h, err := d.handle(g, m); err != nil {
			oh, on = hErrOnly(err), hOutcome{Err: on.Err}
		} else {
			recs, err := h.AppendPoll(prefix[:1:1], mr)
			oh = hOutcome{Err: errClass(err), Records: recs}
		}
	case k < 75:
		ack := k < 67
		g, m, p := d.group(), d.member(), d.partition()
		off := d.offset(desc, g, p)
		call := map[bool]string{true: "Ack", false: "Retry"}[ack]
		what = fmt.Sprintf("%s(%q, %q, %d, %d)", call, g, m, p, off)
		var ok bool
		var err error
		if ack {
			ok, err = n.Ack("t", g, m, p, off)
		} else {
			ok, err = n.Retry("t", g, m, p, off)
		}
		on = hOutcome{Err: errClass(err), Bool: ok}
		if h, err := d.handle(g, m); err != nil {
			oh, on = hErrOnly(err), hOutcome{Err: on.Err}
		} else {
			if ack {
				ok, err = h.Ack(p, off)
			} else {
				ok, err = h.Retry(p, off)
			}
			oh = hOutcome{Err: errClass(err), Bool: ok}
		}
	case k < 81:
		g, p := d.group(), d.partition()
		off := d.offset(desc, g, p)
		what = fmt.Sprintf("Seek(%q, %d, %d)", g, p, off)
		on, oh = d.onBoth(func(b *engine.Broker) (bool, error) { return b.Seek("t", g, p, off) })
	case k < 86:
		g := d.group()
		what = fmt.Sprintf("DeleteGroup(%q)", g)
		on, oh = d.onBoth(func(b *engine.Broker) (bool, error) { return b.DeleteGroup("t", g) })
	case k < 90:
		g, a := d.group(), d.assignor()
		what = fmt.Sprintf("CreateGroup(%q, %v)", g, a)
		on, oh = d.onBoth(func(b *engine.Broker) (bool, error) { return b.CreateGroup("t", g, a) })
	case k < 94:
		g, a := d.group(), d.assignor()
		what = fmt.Sprintf("SetAssignor(%q, %v)", g, a)
		on, oh = d.onBoth(func(b *engine.Broker) (bool, error) { return b.SetAssignor("t", g, a) })
	case k < 95:
		count := []int32{1, 1, 2, 0, -1, 70}[d.rng.IntN(6)]
		if n := d.th.Partitions(); n >= 8 {
			count = []int32{0, -1, 65 - n}[d.rng.IntN(3)] // keep records dense: only invalid adds
		}
		what = fmt.Sprintf("AddPartitions(%d)", count)
		total, err := n.AddPartitions("t", count)
		on = hOutcome{Err: errClass(err), Int: int64(total)}
		total, err = d.handles.AddPartitions("t", count)
		oh = hOutcome{Err: errClass(err), Int: int64(total)}
	case k < 98:
		g, m := hGroups[d.rng.IntN(len(hGroups))], hMembers[d.rng.IntN(len(hMembers))]
		what = fmt.Sprintf("remake the handle of %s/%s", g, m)
		h, err := d.th.Member(g, m)
		require.NoError(d.t, err)
		d.members[g+"/"+m] = h
	default:
		adv := time.Duration(d.rng.IntN(4000)) * time.Millisecond
		what = fmt.Sprintf("advance clocks %v", adv)
		d.clockN.Advance(adv)
		d.clockH.Advance(adv)
	}
	return what, on, oh
}

// checkHandleViews checks what only handles answer against the handle
// broker's description: each MemberHandle's Assignment, NextTimeout, Ready
// (closed at once when the group is absent) and Room's range check.
func (d *hDiff) checkHandleViews(desc engine.TopicDescription) string {
	groups := map[string]engine.GroupDescription{}
	for _, g := range desc.Groups {
		groups[g.Group] = g
	}
	for key, h := range d.members {
		g, exists := groups[h.Group()]
		want, inFlight := []int32{}, false
		for _, gp := range g.Partitions {
			if gp.Owner == h.Member() {
				want = append(want, gp.Partition)
				inFlight = inFlight || gp.InFlight
			}
		}
		if got := h.Assignment(); !cmp.Equal(got, want) {
			return fmt.Sprintf("%s: Assignment() = %v, Describe says %v", key, got, want)
		}
		dur, ok := h.NextTimeout()
		if wok := d.cfg.ackTimeout > 0 && inFlight; ok != wok || dur < 0 || dur > d.cfg.ackTimeout || !ok && dur != 0 {
			return fmt.Sprintf("%s: NextTimeout() = %v, %v; want ok %v within [0,%v]", key, dur, ok, wok, d.cfg.ackTimeout)
		}
		if !exists && !hClosed(h.Ready()) {
			return fmt.Sprintf("%s: Ready() of an absent group is not closed", key)
		}
	}
	n := int32(len(desc.Partitions))
	for _, p := range []int32{-1, 0, n - 1, n} {
		_, err := d.th.Room(p)
		if wantErr := p < 0 || p >= n; wantErr != errors.Is(err, engine.ErrInvalidArgument) {
			return fmt.Sprintf("Room(%d) of %d partitions: error %v", p, n, err)
		}
	}
	return ""
}

// hDiffOf is cmp.Diff(x, y), with reflect.DeepEqual as a fast path for the
// equal values of every step.
func hDiffOf(x, y any) string {
	if reflect.DeepEqual(x, y) {
		return ""
	}
	return cmp.Diff(x, y)
}

func (d *hDiff) fail(i int, format string, args ...any) {
	d.t.Helper()
	start := max(0, len(d.history)-25)
	d.t.Fatalf("seed config %+v, step %d: %s\nlast steps:\n  %s", d.cfg, i, fmt.Sprintf(format, args...),
		strings.Join(d.history[start:], "\n  "))
}

// TestHandlesMatchNames runs seeded random sequences of every call, valid
// and invalid (maxRecords 0/65, negative offsets, partitions out of range,
// bad identifiers, nil and failing assignors, oversized messages), on two
// brokers built alike: one driven by names, one through handles made before
// their groups exist and kept across DeleteGroup and re-creation. Every
// result, every error class and the Describe after every step must match.
func TestHandlesMatchNames(t *testing.T) {
	steps := 4000
	if testing.Short() || raceEnabled {
		steps = 1500
	}
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			d := newHDiff(t, seed)
			desc, err := d.names.Describe("t")
			require.NoError(t, err)
			calls := map[string]int{}
			for i := range steps {
				what, on, oh := d.step(i, desc)
				d.history = append(d.history, what)
				if diff := hDiffOf(on, oh); diff != "" {
					d.fail(i, "%s: results differ (-names +handles):\n%s", what, diff)
				}
				if on.Err == "" && (on.Bool || on.Int > 0 || len(on.Parts) > 0 || len(on.Records) > 0 && on.Records[len(on.Records)-1].Topic == "t") {
					calls[strings.FieldsFunc(what, func(r rune) bool { return r == '(' || r == ' ' })[0]]++
				}
				dn, errN := d.names.Describe("t")
				dh, errH := d.handles.Describe("t")
				if errN != nil || errH != nil {
					d.fail(i, "Describe: %v, %v", errN, errH)
				}
				if diff := hDiffOf(dn, dh); diff != "" {
					d.fail(i, "after %s: Describe differs (-names +handles):\n%s", what, diff)
				}
				if msg := d.checkHandleViews(dh); msg != "" {
					d.fail(i, "after %s: %s", what, msg)
				}
				desc = dn
			}
			t.Logf("config %+v; calls with an effect: %v", d.cfg, calls)
		})
	}
}

// ---------------------------------------------------------------------------
// 2. Wake-ups.

// hClosed reports whether ch is closed, without blocking.
func hClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// hFix is a broker of capacity 2 with topic "t" of 2 partitions and
// handles on it: a and b are members of group g, x of group h.
type hFix struct {
	t       *testing.T
	b       *engine.Broker
	th      *engine.TopicHandle
	a, bm   *engine.MemberHandle
	x       *engine.MemberHandle
	records []engine.Record // the last poll's
}

func newHFix(t *testing.T) *hFix {
	b, err := engine.New(2)
	require.NoError(t, err)
	_, err = b.Create("t", 2)
	require.NoError(t, err)
	f := &hFix{t: t, b: b}
	f.th, err = b.Topic("t")
	require.NoError(t, err)
	f.a, err = f.th.Member("g", "a")
	require.NoError(t, err)
	f.bm, err = f.th.Member("g", "b")
	require.NoError(t, err)
	f.x, err = f.th.Member("h", "x")
	require.NoError(t, err)
	return f
}

func (f *hFix) join(m *engine.MemberHandle) {
	f.t.Helper()
	_, err := m.Join()
	require.NoError(f.t, err)
}

func (f *hFix) pub(p int32, want int64) {
	f.t.Helper()
	off, err := f.th.Publish(p, "r")
	require.NoError(f.t, err)
	require.Equal(f.t, want, off, "Publish(%d)", p)
}

func (f *hFix) poll(m *engine.MemberHandle, want int) {
	f.t.Helper()
	recs, err := m.Poll(engine.MaxPollRecords)
	require.NoError(f.t, err)
	require.Len(f.t, recs, want)
	f.records = recs
}

func (f *hFix) ack(m *engine.MemberHandle, p int32, off int64, want bool) {
	f.t.Helper()
	ok, err := m.Ack(p, off)
	require.NoError(f.t, err)
	require.Equal(f.t, want, ok, "%s/%s: Ack(%d, %d)", m.Group(), m.Member(), p, off)
}

func (f *hFix) retry(m *engine.MemberHandle, p int32, off int64, want bool) {
	f.t.Helper()
	ok, err := m.Retry(p, off)
	require.NoError(f.t, err)
	require.Equal(f.t, want, ok, "%s/%s: Retry(%d, %d)", m.Group(), m.Member(), p, off)
}

func (f *hFix) ok(ok bool, err error) {
	f.t.Helper()
	require.NoError(f.t, err)
	require.True(f.t, ok)
}

func (f *hFix) room(p int32) <-chan struct{} {
	f.t.Helper()
	ch, err := f.th.Room(p)
	require.NoError(f.t, err)
	return ch
}

// TestWakeUps: for each call, take the channel it should (or should not)
// close, check it is open, make the call, and check it is closed (or still
// open).
func TestWakeUps(t *testing.T) {
	topicReady := func(f *hFix) <-chan struct{} { return f.th.Ready() }
	aReady := func(f *hFix) <-chan struct{} { return f.a.Ready() }
	bReady := func(f *hFix) <-chan struct{} { return f.bm.Ready() }
	room0 := func(f *hFix) <-chan struct{} { return f.room(0) }
	room1 := func(f *hFix) <-chan struct{} { return f.room(1) }
	// a (alone in g) holds offset 0 of partition 0 in flight.
	aHolds := func(f *hFix) { f.join(f.a); f.pub(0, 0); f.poll(f.a, 1) }
	// a and b in g; a owns partition 0 and holds offset 0 there.
	abHold := func(f *hFix) { f.join(f.a); f.join(f.bm); f.pub(0, 0); f.poll(f.a, 1) }
	// g (member a) and h (member x) both hold offset 0 of a full partition 0.
	bothHold := func(f *hFix) {
		f.join(f.a)
		f.join(f.x)
		f.pub(0, 0)
		f.pub(0, 1)
		f.poll(f.a, 1)
		f.poll(f.x, 1)
	}
	tests := []struct {
		name    string
		setup   func(f *hFix)
		ch      func(f *hFix) <-chan struct{}
		do      func(f *hFix)
		wclosed bool
	}{
		// TopicHandle.Ready.
		{"publish closes topic Ready", nil, topicReady, func(f *hFix) { f.pub(1, 0) }, true},
		{"PublishMessage closes topic Ready", nil, topicReady, func(f *hFix) {
			off, err := f.th.PublishMessage(0, engine.Message{Key: "k", Payload: "v"})
			require.NoError(f.t, err)
			require.Zero(f.t, off)
		}, true},
		{"by-name publish closes topic Ready", nil, topicReady, func(f *hFix) {
			off, err := f.b.Publish("t", 0, "v")
			require.NoError(f.t, err)
			require.Zero(f.t, off)
		}, true},
		{"AddPartitions closes topic Ready", nil, topicReady, func(f *hFix) {
			n, err := f.b.AddPartitions("t", 1)
			require.NoError(f.t, err)
			require.Equal(f.t, int32(3), n)
		}, true},
		{"publish to a full partition does not close topic Ready", func(f *hFix) { f.pub(0, 0); f.pub(0, 1) }, topicReady,
			func(f *hFix) { f.pub(0, -1) }, false},
		{"publish out of range does not close topic Ready", nil, topicReady, func(f *hFix) {
			_, err := f.th.Publish(2, "v")
			require.ErrorIs(f.t, err, engine.ErrInvalidArgument)
		}, false},
		{"poll does not close topic Ready", func(f *hFix) { f.join(f.a); f.pub(0, 0) }, topicReady,
			func(f *hFix) { f.poll(f.a, 1) }, false},
		{"ack does not close topic Ready", aHolds, topicReady, func(f *hFix) { f.ack(f.a, 0, 0, true) }, false},

		// MemberHandle.Ready.
		{"ack closes member Ready", aHolds, aReady, func(f *hFix) { f.ack(f.a, 0, 0, true) }, true},
		{"ack closes Ready of the group's other members", abHold, bReady, func(f *hFix) { f.ack(f.a, 0, 0, true) }, true},
		{"retry closes member Ready", aHolds, aReady, func(f *hFix) { f.retry(f.a, 0, 0, true) }, true},
		{"by-name ack closes member Ready", aHolds, aReady, func(f *hFix) {
			ok, err := f.b.Ack("t", "g", "a", 0, 0)
			f.ok(ok, err)
		}, true},
		{"Join closes member Ready", func(f *hFix) { f.join(f.a) }, aReady, func(f *hFix) { f.join(f.bm) }, true},
		{"Leave closes member Ready", func(f *hFix) { f.join(f.a); f.join(f.bm) }, aReady, func(f *hFix) {
			ok, err := f.bm.Leave()
			f.ok(ok, err)
		}, true},
		{"SetAssignor closes member Ready", func(f *hFix) { f.join(f.a); f.join(f.bm) }, aReady, func(f *hFix) {
			ok, err := f.b.SetAssignor("t", "g", engine.Range)
			f.ok(ok, err)
		}, true},
		{"AddPartitions closes member Ready", func(f *hFix) { f.join(f.a) }, aReady, func(f *hFix) {
			_, err := f.b.AddPartitions("t", 1)
			require.NoError(f.t, err)
		}, true},
		{"Seek closes member Ready", aHolds, aReady, func(f *hFix) {
			ok, err := f.b.Seek("t", "g", 0, 0)
			f.ok(ok, err)
		}, true},
		{"DeleteGroup closes member Ready", func(f *hFix) {
			ok, err := f.b.CreateGroup("t", "g", engine.RoundRobin)
			f.ok(ok, err)
		}, aReady, func(f *hFix) {
			ok, err := f.b.DeleteGroup("t", "g")
			f.ok(ok, err)
		}, true},
		{"ack after DeleteGroup and re-create closes member Ready", func(f *hFix) {
			aHolds(f)
			f.ack(f.a, 0, 0, true)
			ok, err := f.a.Leave()
			f.ok(ok, err)
			ok, err = f.b.DeleteGroup("t", "g")
			f.ok(ok, err)
			f.join(f.a) // a fresh g, at log start 1
			f.pub(0, 1)
			f.poll(f.a, 1)
		}, aReady, func(f *hFix) { f.ack(f.a, 0, 1, true) }, true},
		{"ack with the wrong offset does not close member Ready", aHolds, aReady, func(f *hFix) { f.ack(f.a, 0, 1, false) }, false},
		{"ack by a non-owner does not close member Ready", abHold, aReady, func(f *hFix) { f.ack(f.bm, 0, 0, false) }, false},
		{"ack of a partition out of range does not close member Ready", aHolds, aReady, func(f *hFix) {
			_, err := f.a.Ack(2, 0)
			require.ErrorIs(f.t, err, engine.ErrInvalidArgument)
		}, false},
		{"retry with the wrong offset does not close member Ready", aHolds, aReady, func(f *hFix) { f.retry(f.a, 0, 1, false) }, false},
		{"retry by a non-owner does not close member Ready", abHold, aReady, func(f *hFix) { f.retry(f.bm, 0, 0, false) }, false},
		{"ack of the other group does not close member Ready", bothHold, aReady, func(f *hFix) { f.ack(f.x, 0, 0, true) }, false},
		{"poll does not close member Ready", func(f *hFix) { f.join(f.a); f.pub(0, 0) }, aReady,
			func(f *hFix) { f.poll(f.a, 1) }, false},
		{"publish does not close member Ready", func(f *hFix) { f.join(f.a) }, aReady, func(f *hFix) { f.pub(0, 0) }, false},
		{"Join twice does not close member Ready", func(f *hFix) { f.join(f.a) }, aReady, func(f *hFix) { f.join(f.a) }, false},
		{"Leave of an absent member does not close member Ready", func(f *hFix) { f.join(f.a) }, aReady, func(f *hFix) {
			ok, err := f.bm.Leave()
			require.NoError(f.t, err)
			require.False(f.t, ok)
		}, false},
		{"DeleteGroup of a group with members does not close member Ready", func(f *hFix) { f.join(f.a) }, aReady, func(f *hFix) {
			_, err := f.b.DeleteGroup("t", "g")
			require.ErrorIs(f.t, err, engine.ErrGroupNotEmpty)
		}, false},
		{"Seek out of range does not close member Ready", func(f *hFix) { f.join(f.a) }, aReady, func(f *hFix) {
			_, err := f.b.Seek("t", "g", 0, 1)
			require.ErrorIs(f.t, err, engine.ErrOffsetOutOfRange)
		}, false},

		// TopicHandle.Room.
		{"ack of the slowest group closes Room", func(f *hFix) { bothHold(f); f.ack(f.x, 0, 0, true) }, room0,
			func(f *hFix) { f.ack(f.a, 0, 0, true) }, true},
		{"ack of the only group closes Room", func(f *hFix) { aHolds(f) }, room0,
			func(f *hFix) { f.ack(f.a, 0, 0, true) }, true},
		{"ack of a group that is not the slowest does not close Room", bothHold, room0,
			func(f *hFix) { f.ack(f.x, 0, 0, true) }, false},
		{"trimming partition 0 does not close Room(1)", func(f *hFix) { bothHold(f); f.ack(f.x, 0, 0, true) }, room1,
			func(f *hFix) { f.ack(f.a, 0, 0, true) }, false},
		{"retry does not close Room", aHolds, room0, func(f *hFix) { f.retry(f.a, 0, 0, true) }, false},
		{"failed ack does not close Room", aHolds, room0, func(f *hFix) { f.ack(f.a, 0, 1, false) }, false},
		{"forward Seek closes Room", func(f *hFix) { f.join(f.a); f.pub(0, 0); f.pub(0, 1) }, room0, func(f *hFix) {
			ok, err := f.b.Seek("t", "g", 0, 1)
			f.ok(ok, err)
		}, true},
		{"Seek to the committed offset does not close Room", func(f *hFix) { f.join(f.a); f.pub(0, 0) }, room0, func(f *hFix) {
			ok, err := f.b.Seek("t", "g", 0, 0)
			f.ok(ok, err)
		}, false},
		{"forward Seek of a group that is not the slowest does not close Room", func(f *hFix) {
			f.join(f.a)
			f.join(f.x)
			f.pub(0, 0)
			f.pub(0, 1)
		}, room0, func(f *hFix) {
			ok, err := f.b.Seek("t", "h", 0, 2)
			f.ok(ok, err)
		}, false},
		{"DeleteGroup of the slowest group closes Room", func(f *hFix) {
			f.ok(f.b.CreateGroup("t", "g", engine.RoundRobin))
			f.ok(f.b.CreateGroup("t", "h", engine.RoundRobin))
			f.pub(0, 0)
			f.pub(0, 1)
			f.ok(f.b.Seek("t", "h", 0, 2))
		}, room0, func(f *hFix) { f.ok(f.b.DeleteGroup("t", "g")) }, true},
		{"DeleteGroup of the last group closes no Room", func(f *hFix) {
			f.ok(f.b.CreateGroup("t", "g", engine.RoundRobin))
			f.pub(0, 0)
			f.pub(0, 1)
		}, room0, func(f *hFix) { f.ok(f.b.DeleteGroup("t", "g")) }, false}, // rule 13: with no group nothing is removed
		{"DeleteGroup with nothing to free does not close Room", func(f *hFix) {
			f.ok(f.b.CreateGroup("t", "g", engine.RoundRobin))
			f.ok(f.b.CreateGroup("t", "h", engine.RoundRobin))
			f.pub(0, 0)
		}, room0, func(f *hFix) { f.ok(f.b.DeleteGroup("t", "g")) }, false},
		{"publish does not close Room", func(f *hFix) { f.join(f.a) }, room0, func(f *hFix) { f.pub(0, 0) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newHFix(t)
			if tt.setup != nil {
				tt.setup(f)
			}
			ch := tt.ch(f)
			require.False(t, hClosed(ch), "closed before the call")
			tt.do(f)
			require.Equal(t, tt.wclosed, hClosed(ch), "closed after the call")
		})
	}
}

// TestReplayWindowClosesRoom: with a replay window, Room closes when a
// publish to the partition could succeed again: an ack that trims a record
// out of the window, and an ack that trims nothing but makes the oldest
// record of a full partition fully committed, which a publish gives up
// (SPEC rule 21). An ack on a partition that is not full, trimming
// nothing, leaves it open (nobody can be waiting for room there).
func TestReplayWindowClosesRoom(t *testing.T) {
	setup := func(t *testing.T, capacity, window int32, records int64) (*engine.TopicHandle, func()) {
		b, err := engine.New(capacity, engine.WithReplayWindow(window))
		require.NoError(t, err)
		_, err = b.Create("t", 1)
		require.NoError(t, err)
		th, m := joinedMember(t, b)
		for i := range records {
			off, err := th.Publish(0, "r")
			require.NoError(t, err)
			require.Equal(t, i, off)
		}
		return th, func() {
			recs, err := m.Poll(1)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			ok, err := m.Ack(0, recs[0].Offset)
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	room := func(t *testing.T, th *engine.TopicHandle) <-chan struct{} {
		ch, err := th.Room(0)
		require.NoError(t, err)
		return ch
	}
	t.Run("ack that trims out of the window", func(t *testing.T) {
		th, ackNext := setup(t, 3, 1, 3)
		ackNext() // offset 0 is fully committed and stays as the window
		ch := room(t, th)
		ackNext() // offset 1 takes the window; offset 0 is removed
		require.True(t, hClosed(ch), "ack that removed a record left Room open")
	})
	for _, window := range []int32{1, 2, 3} {
		t.Run(fmt.Sprintf("ack that makes a full log evictable, window %d of 3", window), func(t *testing.T) {
			th, ackNext := setup(t, 3, window, 3)
			off, err := th.Publish(0, "x")
			require.NoError(t, err)
			require.Equal(t, int64(-1), off, "full, nothing committed")
			ch := room(t, th)
			ackNext() // offset 0 fully committed, kept by the window
			require.True(t, hClosed(ch), "ack that made offset 0 evictable left Room open")
			off, err = th.Publish(0, "x")
			require.NoError(t, err)
			require.Equal(t, int64(3), off, "the publish Room announced")
		})
	}
	t.Run("ack on a partition with room", func(t *testing.T) {
		th, ackNext := setup(t, 3, 2, 2)
		ch := room(t, th)
		ackNext() // nothing trimmed, one slot free
		require.False(t, hClosed(ch), "ack on a partition that is not full closed Room")
	})
}

// TestMemberReadyOfAbsentGroupIsClosed: with no group, MemberHandle.Ready
// is closed at once (the waiter polls again); once the group exists it is
// open until a change.
func TestMemberReadyOfAbsentGroupIsClosed(t *testing.T) {
	f := newHFix(t)
	require.True(t, hClosed(f.a.Ready()), "no group yet")
	f.ok(f.b.CreateGroup("t", "g", engine.Sticky))
	require.False(t, hClosed(f.a.Ready()), "group exists")
	f.ok(f.b.DeleteGroup("t", "g"))
	require.True(t, hClosed(f.a.Ready()), "group deleted")
	f.join(f.a)
	require.False(t, hClosed(f.a.Ready()), "group re-created by Join")
}

// TestReadyIsSharedUntilWoken: two takes without a change are one channel;
// after a wake-up the next take is a new, open one.
func TestReadyIsSharedUntilWoken(t *testing.T) {
	f := newHFix(t)
	f.join(f.a)
	r1, r2 := f.th.Ready(), f.th.Ready()
	require.True(t, r1 == r2, "two takes of topic Ready differ")
	m1, m2 := f.a.Ready(), f.bm.Ready()
	require.True(t, m1 == m2, "members of one group have different Ready channels")
	f.pub(0, 0)
	require.True(t, hClosed(r1))
	r3 := f.th.Ready()
	require.False(t, hClosed(r3), "Ready taken after the wake-up is closed")
	f.poll(f.a, 1)
	f.ack(f.a, 0, 0, true)
	require.True(t, hClosed(m1))
	require.False(t, hClosed(f.a.Ready()), "member Ready taken after the wake-up is closed")
	require.False(t, hClosed(r3), "ack closed topic Ready")
}

// TestRoomRejectsPartitionOutOfRange: Room checks its partition like every
// call (rule 4), against the current count.
func TestRoomRejectsPartitionOutOfRange(t *testing.T) {
	f := newHFix(t)
	for _, p := range []int32{-1, 2, 64, -1 << 31} {
		ch, err := f.th.Room(p)
		require.ErrorIs(t, err, engine.ErrInvalidArgument, "Room(%d)", p)
		require.Nil(t, ch)
	}
	_, err := f.b.AddPartitions("t", 1)
	require.NoError(t, err)
	_, err = f.th.Room(2)
	require.NoError(t, err, "Room of an added partition")
	require.Equal(t, int32(3), f.th.Partitions())
}

// TestHandleConstructorsValidate: Topic and Member refuse what the by-name
// calls refuse.
func TestHandleConstructorsValidate(t *testing.T) {
	b, err := engine.New(1)
	require.NoError(t, err)
	_, err = b.Create("t", 1)
	require.NoError(t, err)
	for _, name := range []string{"absent", "", "bad name", strings.Repeat("t", 65)} {
		h, err := b.Topic(name)
		require.ErrorIs(t, err, engine.ErrInvalidArgument, "Topic(%q)", name)
		require.Nil(t, h)
	}
	_, err = new(engine.Broker).Topic("t")
	require.ErrorIs(t, err, engine.ErrInvalidArgument, "Topic on a zero Broker")
	th, err := b.Topic("t")
	require.NoError(t, err)
	require.Equal(t, "t", th.Name())
	for _, gm := range [][2]string{{"", "m"}, {"g", ""}, {"g g", "m"}, {"g", "m/"}, {strings.Repeat("g", 65), "m"}} {
		h, err := th.Member(gm[0], gm[1])
		require.ErrorIs(t, err, engine.ErrInvalidArgument, "Member(%q, %q)", gm[0], gm[1])
		require.Nil(t, h)
	}
	h, err := th.Member("g", "m")
	require.NoError(t, err)
	require.Equal(t, [3]string{"t", "g", "m"}, [3]string{h.Topic(), h.Group(), h.Member()})
	require.Equal(t, []int32{}, h.Assignment())
}

// ---------------------------------------------------------------------------
// 3. Waiters against notifiers.

// TestWaitersNeverMissAWakeUp: consumers of one group loop "take both Ready
// channels, poll; if empty, wait" and producers "take Room, publish; if
// full, wait", with a small capacity so that both sides block often. A lost
// wake-up leaves a waiter blocked past hWaitLimit and fails the test; every
// record must be acked exactly once.
func TestWaitersNeverMissAWakeUp(t *testing.T) {
	const (
		partitions = 4
		consumers  = 4
		producers  = 2
		hWaitLimit = 5 * time.Second
	)
	total := 20000
	if testing.Short() || raceEnabled {
		total = 3000
	}
	b, err := engine.New(4)
	require.NoError(t, err)
	_, err = b.Create("t", partitions)
	require.NoError(t, err)
	th, err := b.Topic("t")
	require.NoError(t, err)

	var (
		mu    sync.Mutex
		acked = map[string]int{} // payload → successful acks
		count atomic.Int64
		waits [2]atomic.Int64 // consumers' and producers' blocking waits
		stop  = make(chan struct{})
		once  sync.Once
	)
	wait := func(who string, chs ...<-chan struct{}) bool {
		waits[len(chs)%2].Add(1) // two channels: a consumer
		timer := time.NewTimer(hWaitLimit)
		defer timer.Stop()
		var c1 <-chan struct{}
		if len(chs) > 1 {
			c1 = chs[1]
		}
		select {
		case <-chs[0]:
		case <-c1:
		case <-stop:
			return false
		case <-timer.C:
			t.Errorf("%s: no wake-up within %v (%d of %d acked): lost wake-up", who, hWaitLimit, count.Load(), total)
			once.Do(func() { close(stop) })
			return false
		}
		return true
	}
	var fs []func()
	for c := range consumers {
		m, err := th.Member("g", fmt.Sprintf("m%d", c))
		require.NoError(t, err)
		if c < consumers-1 {
			_, err = m.Join() // the last one joins while records flow
			require.NoError(t, err)
		}
		fs = append(fs, func() {
			if c == consumers-1 {
				time.Sleep(time.Millisecond)
				if _, err := m.Join(); err != nil {
					t.Error(err)
					return
				}
			}
			buf := make([]engine.Record, 0, partitions)
			for {
				select {
				case <-stop:
					return
				default:
				}
				tr, mr := th.Ready(), m.Ready()
				recs, err := m.AppendPoll(buf[:0], partitions)
				if err != nil {
					t.Error(err)
					return
				}
				if len(recs) == 0 {
					if !wait(m.Member(), tr, mr) {
						return
					}
					continue
				}
				for _, r := range recs {
					ok, err := m.Ack(r.Partition, r.Offset)
					if err != nil {
						t.Errorf("%s: Ack(%d, %d): %v", m.Member(), r.Partition, r.Offset, err)
						return
					}
					if !ok {
						continue // the late Join moved the partition: redelivered to its new owner
					}
					mu.Lock()
					acked[r.Payload]++
					mu.Unlock()
					if count.Add(1) == int64(total) {
						once.Do(func() { close(stop) })
					}
				}
			}
		})
	}
	for pr := range producers {
		fs = append(fs, func() {
			for i := pr; i < total; i += producers {
				p := int32(i % partitions)
				payload := fmt.Sprint(i)
				for {
					room, err := th.Room(p)
					if err != nil {
						t.Error(err)
						return
					}
					off, err := th.Publish(p, payload)
					if err != nil {
						t.Error(err)
						return
					}
					if off >= 0 {
						break
					}
					if !wait(fmt.Sprintf("producer %d (partition %d)", pr, p), room) {
						return
					}
				}
			}
		})
	}
	runAll(t, 4*hWaitLimit, fs...)
	t.Logf("%d records; blocking waits: consumers %d, producers %d", total, waits[0].Load(), waits[1].Load())
	if t.Failed() {
		return
	}
	require.Len(t, acked, total)
	for i := range total {
		require.Equal(t, 1, acked[fmt.Sprint(i)], "record %d acked", i)
	}
}

// ---------------------------------------------------------------------------
// 4. NextTimeout.

// TestNextTimeout follows NextTimeout on a fake clock: none without an ack
// timeout or with nothing in flight; the timeout right after a poll; the
// time left as the clock moves; zero once passed; the oldest delivery
// counts.
func TestNextTimeout(t *testing.T) {
	const timeout = 10 * time.Second
	t.Run("without WithAckTimeout", func(t *testing.T) {
		f := newHFix(t)
		f.join(f.a)
		f.pub(0, 0)
		f.poll(f.a, 1)
		d, ok := f.a.NextTimeout()
		require.False(t, ok)
		require.Zero(t, d)
	})
	t.Run("with WithAckTimeout", func(t *testing.T) {
		clock := testclock.New()
		b, err := engine.New(4, engine.WithClock(clock.Now), engine.WithAckTimeout(timeout))
		require.NoError(t, err)
		_, err = b.Create("t", 2)
		require.NoError(t, err)
		th, err := b.Topic("t")
		require.NoError(t, err)
		m, err := th.Member("g", "m")
		require.NoError(t, err)
		other, err := th.Member("g", "other")
		require.NoError(t, err)
		next := func(wd time.Duration, wok bool, why string) {
			t.Helper()
			d, ok := m.NextTimeout()
			require.Equal(t, wok, ok, why)
			require.Equal(t, wd, d, why)
		}
		next(0, false, "no group")
		_, err = m.Join()
		require.NoError(t, err)
		next(0, false, "nothing in flight")
		_, err = th.Publish(0, "a")
		require.NoError(t, err)
		next(0, false, "a record, not polled")
		recs, err := m.Poll(1)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		next(timeout, true, "just polled")
		clock.Advance(4 * time.Second)
		next(6*time.Second, true, "4s later")
		_, err = th.Publish(1, "b")
		require.NoError(t, err)
		recs, err = m.Poll(1)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, int32(1), recs[0].Partition)
		next(6*time.Second, true, "the oldest delivery counts")
		clock.Advance(6 * time.Second)
		next(0, true, "exactly the timeout: passed")
		clock.Advance(time.Hour)
		next(0, true, "long past")
		ok, err := m.Ack(0, 0) // an expired delivery can still be acked (rule 22)
		require.NoError(t, err)
		require.True(t, ok)
		next(0, true, "partition 1's delivery is past too")
		recs, err = m.Poll(1)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, int32(2), recs[0].Attempt, "redelivered after the timeout")
		next(timeout, true, "redelivered now")
		ok, err = m.Retry(1, 0)
		require.NoError(t, err)
		require.True(t, ok)
		next(0, false, "retried: nothing in flight")
		recs, err = m.Poll(1)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		clock.Advance(time.Second)
		next(9*time.Second, true, "polled again")
		d, ok := other.NextTimeout()
		require.False(t, ok, "a handle of a member not in the group")
		require.Zero(t, d)
		_, err = other.Join() // partition 1 (in flight) moves to other: cancelled
		require.NoError(t, err)
		next(0, false, "the rebalance cancelled the delivery")
		d, ok = other.NextTimeout()
		require.False(t, ok, "other: nothing polled yet")
		require.Zero(t, d)
	})
}

// ---------------------------------------------------------------------------
// 5. Allocations.

// TestHandleHotPathsAllocateNothing: a steady publish → AppendPoll into a
// reused buffer → ack loop through handles allocates nothing, Retry neither,
// and nor do Ready, Room and NextTimeout once their channel exists, or a
// Publish or Ack that wakes nobody.
func TestHandleHotPathsAllocateNothing(t *testing.T) {
	clock := testclock.New()
	b, err := engine.New(8, engine.WithClock(clock.Now), engine.WithAckTimeout(time.Minute))
	require.NoError(t, err)
	_, err = b.Create("t", 1)
	require.NoError(t, err)
	th, m := joinedMember(t, b)
	absent, err := th.Member("nogroup", "m")
	require.NoError(t, err)

	// Wake a waiter once first, so that the runs below start from a signal
	// nobody holds (the state after every wake-up).
	ready := th.Ready()
	_, err = th.Publish(0, "warm")
	require.NoError(t, err)
	require.True(t, hClosed(ready))
	buf := make([]engine.Record, 0, 1)
	buf, err = m.AppendPoll(buf[:0], 1)
	require.NoError(t, err)
	require.Len(t, buf, 1)
	mready := m.Ready()
	ok, err := m.Ack(0, buf[0].Offset)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, hClosed(mready))

	bad := 0
	allocs := testing.AllocsPerRun(500, func() {
		off, err := th.Publish(0, "payload")
		if err != nil || off < 0 {
			bad++
		}
		buf, err = m.AppendPoll(buf[:0], 1)
		if err != nil || len(buf) != 1 || buf[0].Offset != off {
			bad++
			return
		}
		if ok, err := m.Retry(0, off); err != nil || !ok {
			bad++
		}
		buf, err = m.AppendPoll(buf[:0], 1)
		if err != nil || len(buf) != 1 {
			bad++
			return
		}
		if _, ok := m.NextTimeout(); !ok {
			bad++
		}
		if ok, err := m.Ack(0, off); err != nil || !ok {
			bad++
		}
	})
	require.Zero(t, bad, "unexpected results")
	require.Zero(t, allocs, "allocations per publish → AppendPoll → retry → AppendPoll → ack")

	// Taking an existing channel allocates nothing; nor does Ready of an
	// absent group (a shared closed channel).
	th.Ready()
	m.Ready()
	_, err = th.Room(0)
	require.NoError(t, err)
	allocs = testing.AllocsPerRun(500, func() {
		th.Ready()
		m.Ready()
		absent.Ready()
		if _, err := th.Room(0); err != nil {
			bad++
		}
	})
	require.Zero(t, bad)
	require.Zero(t, allocs, "allocations per take of existing channels")
}

// ---------------------------------------------------------------------------
// 6. Benchmarks.

// joinedMember returns the handle of b's topic "t" and that of member m of
// group g on it, joined (a no-op when m is already a member); it fails tb
// on any error.
func joinedMember(tb testing.TB, b *engine.Broker) (*engine.TopicHandle, *engine.MemberHandle) {
	tb.Helper()
	th, err := b.Topic("t")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := th.Member("g", "m")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := m.Join(); err != nil {
		tb.Fatal(err)
	}
	return th, m
}

// hRoundTripSetup returns a broker of capacity 1,000 made with opts, with
// topic "t" of one partition and group "g" with member "m" joined.
func hRoundTripSetup(b *testing.B, opts ...engine.Option) *engine.Broker {
	br, err := engine.New(1000, opts...)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := br.Create("t", 1); err != nil {
		b.Fatal(err)
	}
	if _, err := br.Join("t", "g", "m"); err != nil {
		b.Fatal(err)
	}
	return br
}

// BenchmarkRoundTripHandle: publish → AppendPoll(1) → ack through handles,
// in one goroutine; compare with BenchmarkRoundTripNames in the same run.
func BenchmarkRoundTripHandle(b *testing.B) {
	th, m := joinedMember(b, hRoundTripSetup(b))
	buf := make([]engine.Record, 0, 1)
	b.ReportAllocs()
	for b.Loop() {
		off, err := th.Publish(0, "payload")
		if err != nil || off < 0 {
			b.Fatalf("Publish: %d, %v", off, err)
		}
		buf, err = m.AppendPoll(buf[:0], 1)
		if err != nil || len(buf) != 1 {
			b.Fatalf("AppendPoll: %v, %v", buf, err)
		}
		if ok, err := m.Ack(0, off); err != nil || !ok {
			b.Fatalf("Ack: %v, %v", ok, err)
		}
	}
}

// BenchmarkRoundTripNames: BenchmarkRoundTripHandle through the by-name
// calls, the baseline.
func BenchmarkRoundTripNames(b *testing.B) {
	br := hRoundTripSetup(b)
	buf := make([]engine.Record, 0, 1)
	b.ReportAllocs()
	for b.Loop() {
		off, err := br.Publish("t", 0, "payload")
		if err != nil || off < 0 {
			b.Fatalf("Publish: %d, %v", off, err)
		}
		buf, err = br.AppendPoll(buf[:0], "t", "g", "m", 1)
		if err != nil || len(buf) != 1 {
			b.Fatalf("AppendPoll: %v, %v", buf, err)
		}
		if ok, err := br.Ack("t", "g", "m", 0, off); err != nil || !ok {
			b.Fatalf("Ack: %v, %v", ok, err)
		}
	}
}

// onBoth makes the same by-name admin call on both brokers and returns the
// outcomes: names first, then handles.
func (d *hDiff) onBoth(call func(b *engine.Broker) (bool, error)) (on, oh hOutcome) {
	ok, err := call(d.names)
	on = hOutcome{Err: errClass(err), Bool: ok}
	ok, err = call(d.handles)
	return on, hOutcome{Err: errClass(err), Bool: ok}
}

// TestPublishStampedReportsTheRecordTime: the time PublishStamped returns is
// the one a Poll gives the record, for a message with its own Time and for
// one the broker clock stamps; a full partition gives -1 and the zero time;
// a payload-only message allocates nothing.
func TestPublishStampedReportsTheRecordTime(t *testing.T) {
	clock := time.Unix(1000, 0)
	b, err := engine.New(2, engine.WithClock(func() time.Time { clock = clock.Add(time.Second); return clock }))
	require.NoError(t, err)
	_, err = b.Create("t", 1)
	require.NoError(t, err)
	h, err := b.Topic("t")
	require.NoError(t, err)
	own := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)

	off0, t0, err := h.PublishStamped(0, engine.Message{Payload: "a"})
	require.NoError(t, err)
	off1, t1, err := h.PublishStamped(0, engine.Message{Payload: "b", Time: own})
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, []int64{off0, off1})
	require.True(t, t0.Equal(time.Unix(1001, 0)), "stamped %v", t0)
	require.True(t, t1.Equal(own), "own %v", t1)

	off, tf, err := h.PublishStamped(0, engine.Message{Payload: "c"})
	require.NoError(t, err)
	require.Equal(t, int64(-1), off)
	require.True(t, tf.IsZero())
	_, _, err = h.PublishStamped(5, engine.Message{Payload: "c"})
	require.ErrorIs(t, err, engine.ErrInvalidArgument)

	_, err = b.Join("t", "g", "m")
	require.NoError(t, err)
	recs, err := b.Poll("t", "g", "m", 1)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.True(t, recs[0].Time.Equal(t0), "poll %v, stamped %v", recs[0].Time, t0)
	ok, err := b.Ack("t", "g", "m", 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	recs, err = b.Poll("t", "g", "m", 1)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.True(t, recs[0].Time.Equal(own), "poll %v, own %v", recs[0].Time, own)

	b2, err := engine.New(1000)
	require.NoError(t, err)
	_, err = b2.Create("t", 1)
	require.NoError(t, err)
	h2, err := b2.Topic("t")
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(500, func() {
		if _, _, err := h2.PublishStamped(0, engine.Message{Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}
