package jetstream_test

// Hostile tests: bad inputs at and past every limit, hostile assignors,
// hostile messages, bad configurations, prefix isolation, races on one
// member handle and between two Backends sharing a prefix, and lifecycle
// (Close, server shutdown) under load. Run with -run Hostile.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
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

// hSnap returns the topic's snapshot and the topic list, for "changed
// nothing" checks.
type hState struct {
	snap   engine.TopicSnapshot
	topics []string
}

func hSnapshot(t *testing.T, b *jetstream.Backend, topic string) hState {
	t.Helper()
	s, err := b.Snapshot(topic)
	if err != nil {
		t.Fatalf("Snapshot(%q): %v", topic, err)
	}
	return hState{s, b.Topics()}
}

func hSame(t *testing.T, what string, before, after hState) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Errorf("%s changed the state:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

func hInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("%s: err %v, want ErrInvalidArgument", what, err)
	}
}

var hBadIDs = []string{
	"",
	strings.Repeat("a", 65),
	strings.Repeat("é", 32), // 64 bytes, not ASCII
	"a.b", "a>", ">", "*", "a*", "a b", " a", "a ", "\t", "a\x00", "a\nb", "é", "a/b", "a:b",
	"$SYS", "a$", "%", "a\u200b",
}

// Every identifier argument at and past its limits: each bad call returns
// ErrInvalidArgument and changes nothing; 64-byte identifiers work end to
// end.
func TestHostileIdentifiers(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 2)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	pub(t, bt, 0, "x")
	before := hSnapshot(t, b, "t")
	for _, id := range hBadIDs {
		q := fmt.Sprintf("%q", id)
		_, err := b.CreateTopic(id, 1, "string")
		hInvalid(t, "CreateTopic "+q, err)
		_, _, err = b.OpenTopic(id)
		hInvalid(t, "OpenTopic "+q, err)
		_, err = b.CreateGroup(id, "g", engine.RoundRobin)
		hInvalid(t, "CreateGroup topic "+q, err)
		_, err = b.CreateGroup("t", id, engine.RoundRobin)
		hInvalid(t, "CreateGroup group "+q, err)
		_, err = b.DeleteGroup(id, "g")
		hInvalid(t, "DeleteGroup topic "+q, err)
		_, err = b.DeleteGroup("t", id)
		hInvalid(t, "DeleteGroup group "+q, err)
		_, err = b.SetAssignor(id, "g", engine.Range)
		hInvalid(t, "SetAssignor topic "+q, err)
		_, err = b.SetAssignor("t", id, engine.Range)
		hInvalid(t, "SetAssignor group "+q, err)
		_, err = b.AddPartitions(id, 1)
		hInvalid(t, "AddPartitions "+q, err)
		_, err = b.Seek(id, "g", 0, 0)
		hInvalid(t, "Seek topic "+q, err)
		_, err = b.Seek("t", id, 0, 0)
		hInvalid(t, "Seek group "+q, err)
		_, err = b.Describe(id)
		hInvalid(t, "Describe "+q, err)
		_, err = b.Snapshot(id)
		hInvalid(t, "Snapshot "+q, err)
		_, err = bt.Member(id, "m")
		hInvalid(t, "Member group "+q, err)
		_, err = bt.Member("g", id)
		hInvalid(t, "Member member "+q, err)
	}
	hSame(t, "bad identifiers", before, hSnapshot(t, b, "t"))

	// Exactly 64 bytes: valid, full round trip.
	long := strings.Repeat("Z", 63) + "-"
	lt := topic(t, b, long, 1)
	lm := member(t, lt, strings.Repeat("g", 64), strings.Repeat("_", 64))
	if a := must(lm.Join()).of(t); !slices.Equal(a, []int32{0}) {
		t.Fatalf("Join = %v", a)
	}
	pub(t, lt, 0, "long")
	wantRecs(t, poll(t, lm, 1), rec{0, 0, "long", 1})
	ok, err := lm.Ack(0, 0)
	wantBool(t, "Ack", ok, err, true)
	if !slices.Contains(b.Topics(), long) {
		t.Fatalf("Topics = %v", b.Topics())
	}
	// Case-sensitive identifiers: "T" is another topic than "t", and "G"
	// another group than "g".
	bT := topic(t, b, "T", 1)
	pub(t, bT, 0, "upper")
	mG := member(t, bt, "G", "m")
	if a := must(mG.Join()).of(t); !slices.Equal(a, []int32{0, 1}) {
		t.Fatalf("G Join = %v", a)
	}
	wantRecs(t, poll(t, member(t, bT, "g", "m"), 1))
	d := must(b.Describe("T")).of(t)
	if d.Partitions[0].LogEndOffset != 1 || len(d.Groups) != 0 {
		t.Fatalf("T: %+v", d)
	}
	d = must(b.Describe("t")).of(t)
	if len(d.Groups) != 2 || d.Partitions[0].LogEndOffset != 1 {
		t.Fatalf("t: %+v", d)
	}
}

// Numbers at and past their limits: partitions, offsets, max, counts.
func TestHostileNumbers(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 3)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	pub(t, bt, 0, "a")
	pub(t, bt, 1, "b")
	wantRecs(t, poll(t, m, 1), rec{0, 0, "a", 1})
	before := hSnapshot(t, b, "t")
	for _, c := range []int32{0, -1, 65, math.MaxInt32, math.MinInt32} {
		_, err := b.CreateTopic("u", c, "string")
		hInvalid(t, fmt.Sprintf("CreateTopic count %d", c), err)
	}
	for _, c := range []int32{0, -1, 62, 64, math.MaxInt32, math.MinInt32} {
		_, err := b.AddPartitions("t", c)
		hInvalid(t, fmt.Sprintf("AddPartitions %d", c), err)
	}
	for _, p := range []int32{-1, 3, 64, math.MaxInt32, math.MinInt32} {
		_, err := bt.TryPublish(p, engine.Message{Payload: "x"})
		hInvalid(t, fmt.Sprintf("TryPublish p %d", p), err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = bt.Publish(ctx, nil, p, engine.Message{Payload: "x"})
		cancel()
		hInvalid(t, fmt.Sprintf("Publish p %d", p), err)
		_, err = m.Ack(p, 0)
		hInvalid(t, fmt.Sprintf("Ack p %d", p), err)
		_, err = m.Retry(p, 0)
		hInvalid(t, fmt.Sprintf("Retry p %d", p), err)
		_, err = m.TryPollPartition(nil, p)
		hInvalid(t, fmt.Sprintf("TryPollPartition p %d", p), err)
		_, err = b.Seek("t", "g", p, 0)
		hInvalid(t, fmt.Sprintf("Seek p %d", p), err)
		// Invalid and about an absent group: still an error (rule 4).
		_, err = b.Seek("t", "nogroup", p, 0)
		hInvalid(t, fmt.Sprintf("Seek absent group p %d", p), err)
	}
	for _, off := range []int64{-1, math.MinInt64} {
		_, err := m.Ack(0, off)
		hInvalid(t, fmt.Sprintf("Ack off %d", off), err)
		_, err = m.Retry(0, off)
		hInvalid(t, fmt.Sprintf("Retry off %d", off), err)
		_, err = b.Seek("t", "g", 0, off)
		hInvalid(t, fmt.Sprintf("Seek off %d", off), err)
		_, err = b.Seek("t", "nogroup", 0, off)
		hInvalid(t, fmt.Sprintf("Seek absent group off %d", off), err)
	}
	for _, off := range []int64{2, 1 << 40, math.MaxInt64} {
		if _, err := b.Seek("t", "g", 0, off); !errors.Is(err, engine.ErrOffsetOutOfRange) {
			t.Errorf("Seek off %d: %v, want ErrOffsetOutOfRange", off, err)
		}
		ok, err := m.Ack(0, off)
		wantBool(t, fmt.Sprintf("Ack off %d", off), ok, err, false)
		ok, err = m.Retry(0, off)
		wantBool(t, fmt.Sprintf("Retry off %d", off), ok, err, false)
	}
	// Seek of an absent group: false (after validation), even out of range.
	if ok, err := b.Seek("t", "nogroup", 0, math.MaxInt64); ok || err != nil {
		t.Errorf("Seek absent group, huge offset = %v, %v; want false, nil", ok, err)
	}
	for _, mx := range []int32{0, -1, 65, math.MaxInt32, math.MinInt32} {
		dst := []engine.Record{{Payload: "keep"}}
		out, err := m.TryPoll(dst, mx)
		hInvalid(t, fmt.Sprintf("TryPoll max %d", mx), err)
		if len(out) != 1 || out[0].Payload != "keep" {
			t.Errorf("TryPoll max %d changed dst: %v", mx, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = m.Poll(ctx, nil, nil, mx)
		cancel()
		hInvalid(t, fmt.Sprintf("Poll max %d", mx), err)
	}
	hSame(t, "bad numbers", before, hSnapshot(t, b, "t"))

	// Boundaries that are valid: max 64, AddPartitions to exactly 64,
	// partition 63, Seek to the log end.
	wantRecs(t, poll(t, m, 64), rec{1, 0, "b", 1})
	if n := must(b.AddPartitions("t", 61)).of(t); n != 64 {
		t.Fatalf("AddPartitions to 64 = %d", n)
	}
	if _, err := b.AddPartitions("t", 1); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("AddPartitions past 64: %v", err)
	}
	if off := pub(t, bt, 63, "last"); off != 0 {
		t.Fatalf("publish to 63: %d", off)
	}
	if ok, err := b.Seek("t", "g", 63, 1); !ok || err != nil {
		t.Fatalf("Seek to log end: %v %v", ok, err)
	}
	if _, err := bt.TryPublish(64, engine.Message{}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("publish to 64: %v", err)
	}
	ok, err := b.CreateTopic("u64", 64, "")
	wantBool(t, "CreateTopic 64", ok, err, true)
}

// Hostile assignors.
type hPanicAssign struct{}

func (hPanicAssign) Name() string                  { return "h-panic-assign" }
func (hPanicAssign) Assign(m, p []string) []string { panic("assign boom") }

type hPanicName struct{}

func (hPanicName) Name() string                  { panic("name boom") }
func (hPanicName) Assign(m, p []string) []string { return make([]string, len(p)) }

// hFunc is a user assignor whose name and answer are set per value.
type hFunc struct {
	name string
	f    func(members, previous []string) []string
}

func (a *hFunc) Name() string                                      { return a.name }
func (a *hFunc) Assign(members, previous []string) []string        { return a.f(members, previous) }
func hAssignor(name string, f func(m, p []string) []string) *hFunc { return &hFunc{name, f} }

// hFakeRoundRobin claims a built-in's name.
type hFakeRoundRobin struct{}

func (hFakeRoundRobin) Name() string { return "RoundRobin" }
func (hFakeRoundRobin) Assign(m, p []string) []string {
	out := make([]string, len(p))
	for i := range out {
		out[i] = m[0]
	}
	return out
}

func hAll(m string) func(members, previous []string) []string {
	return func(members, previous []string) []string {
		out := make([]string, len(previous))
		for i := range out {
			out[i] = m
		}
		return out
	}
}

func TestHostileAssignors(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 3)
	ma, mb := member(t, bt, "g", "a"), member(t, bt, "g", "b")
	must(ma.Join()).of(t)
	must(mb.Join()).of(t)
	pub(t, bt, 1, "x")
	wantRecs(t, poll(t, mb, 1), rec{1, 0, "x", 1})
	before := hSnapshot(t, b, "t")
	var nilPtr *hFunc
	garbage := map[string]engine.Assignor{
		"panic-assign": hPanicAssign{},
		"short":        hAssignor("h-short", func(m, p []string) []string { return []string{m[0]} }),
		"long":         hAssignor("h-long", func(m, p []string) []string { return append(hAll(m[0])(m, p), m[0]) }),
		"nil":          hAssignor("h-nil", func(m, p []string) []string { return nil }),
		"empty-owner":  hAssignor("h-empty", func(m, p []string) []string { return make([]string, len(p)) }),
		"non-member":   hAssignor("h-nonmember", hAll("zz")),
		"alias-input": hAssignor("h-alias", func(m, p []string) []string {
			for i := range p {
				p[i] = "zz"
			}
			return p
		}),
	}
	for name, a := range garbage {
		if _, err := b.SetAssignor("t", "g", a); !errors.Is(err, engine.ErrInvalidAssignment) || errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("SetAssignor %s: %v, want ErrInvalidAssignment only", name, err)
		}
	}
	for name, a := range map[string]engine.Assignor{"nil": nil, "typed nil": nilPtr, "fake round-robin": hFakeRoundRobin{}} {
		_, err := b.SetAssignor("t", "g", a)
		hInvalid(t, "SetAssignor "+name, err)
		_, err = b.CreateGroup("t", "g2", a)
		hInvalid(t, "CreateGroup "+name, err)
		_, err = b.SetAssignor("t", "absent", a) // invalid beats absent
		hInvalid(t, "SetAssignor absent group "+name, err)
	}
	if _, err := b.SetAssignor("t", "g", hPanicName{}); err == nil {
		t.Errorf("SetAssignor with a panicking Name: no error")
	}
	if _, err := b.CreateGroup("t", "g2", hPanicName{}); err == nil {
		t.Errorf("CreateGroup with a panicking Name: no error")
	}
	hSame(t, "garbage assignors", before, hSnapshot(t, b, "t"))
	// The group still works: b holds its delivery.
	ok, err := mb.Ack(1, 0)
	wantBool(t, "Ack after garbage assignors", ok, err, true)

	// A group whose (valid) user assignor goes bad on a later rebalance:
	// the Join fails and changes nothing.
	flaky := hAssignor("h-flaky", func(m, p []string) []string {
		if len(m) > 2 {
			panic("three is a crowd")
		}
		return hAll(m[0])(m, p)
	})
	ok, err = b.SetAssignor("t", "g", flaky)
	wantBool(t, "SetAssignor flaky", ok, err, true)
	before = hSnapshot(t, b, "t")
	if _, err := member(t, bt, "g", "c").Join(); !errors.Is(err, engine.ErrInvalidAssignment) {
		t.Errorf("Join under a panicking assignor: %v", err)
	}
	if _, err := b.AddPartitions("t", 1); !errors.Is(err, engine.ErrInvalidAssignment) && err != nil {
		t.Errorf("AddPartitions: %v", err)
	}
	after := hSnapshot(t, b, "t")
	// AddPartitions may legitimately succeed (2 members): compare the
	// first three partitions only if it did.
	if len(after.snap.Partitions) == 3 {
		hSame(t, "Join under a panicking assignor", before, after)
	}
	if a := ma.Assignment(); len(a) != len(after.snap.Partitions) {
		t.Errorf("a owns %v of %d partitions", a, len(after.snap.Partitions))
	}
}

// Two distinct user assignors with the same Name, on two groups of one
// Backend: each group must keep using its own (rule 18: every rebalance
// uses the group's current assignor), and an invalid call must change
// nothing.
func TestHostileAssignorNameCollision(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 2)
	toA := hAssignor("custom", hAll("a"))
	ok, err := b.CreateGroup("t", "g1", toA)
	wantBool(t, "CreateGroup g1", ok, err, true)
	// A second, broken assignor of the same name on another group: the call
	// fails (ErrInvalidAssignment) and must change nothing.
	broken := hAssignor("custom", func(m, p []string) []string { panic("broken") })
	ok, err = b.CreateGroup("t", "g2", engine.RoundRobin)
	wantBool(t, "CreateGroup g2", ok, err, true)
	must(member(t, bt, "g2", "x").Join()).of(t)
	if _, err := b.SetAssignor("t", "g2", broken); !errors.Is(err, engine.ErrInvalidAssignment) {
		t.Fatalf("SetAssignor broken: %v", err)
	}
	ma := member(t, bt, "g1", "a")
	if _, err := ma.Join(); err != nil {
		t.Fatal("a failed SetAssignor(g2, broken user assignor named \"custom\") replaced g1's assignor \"custom\" in the process-local registry (Backend.checkAssignor registers by name, overwriting any other assignor of that name, before the call succeeds): the invalid call changed g1, whose Join now fails with: " + err.Error())
	}
	if a := ma.Assignment(); !slices.Equal(a, []int32{0, 1}) {
		t.Fatalf("g1/a owns %v, want [0 1] (assignor toA)", a)
	}
}

// Same as above but with two valid assignors of one name: g1's rebalances
// then run g2's assignor.
func TestHostileAssignorNameShared(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 2)
	ok, err := b.CreateGroup("t", "g1", hAssignor("custom", hAll("a")))
	wantBool(t, "CreateGroup g1", ok, err, true)
	ok, err = b.CreateGroup("t", "g2", hAssignor("custom", hAll("b")))
	wantBool(t, "CreateGroup g2", ok, err, true)
	ma, mb := member(t, bt, "g1", "a"), member(t, bt, "g1", "b")
	_, err = ma.Join()
	if err == nil {
		_, err = mb.Join()
	}
	if a := ma.Assignment(); err != nil || !slices.Equal(a, []int32{0, 1}) {
		t.Fatalf("group g1's user assignor (everything to \"a\") was replaced by group g2's assignor of the same Name (everything to \"b\"): a Join of g1: %v; g1/a owns %v; the process-local registry (Backend.assignors) is keyed by Name only", err, a)
	}
}

// Messages: MaxMessageBytes boundaries, headers with hostile bytes, empty
// payloads and keys, times.
func TestHostileMessages(t *testing.T) {
	const max = 200
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage, MaxMessageBytes: max, Capacity: 50})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	// Exactly max bytes, split every way: accepted.
	exact := []engine.Message{
		{Payload: strings.Repeat("p", max)},
		{Key: strings.Repeat("k", max)},
		{Headers: []engine.Header{{Key: strings.Repeat("h", max)}}},
		{Headers: []engine.Header{{Value: strings.Repeat("v", max)}}},
		{Key: "kk", Payload: strings.Repeat("p", max-10), Headers: []engine.Header{{Key: "h", Value: strings.Repeat("v", 7)}}},
	}
	for i, msg := range exact {
		if _, err := bt.TryPublish(0, msg); err != nil {
			t.Errorf("exact %d: %v", i, err)
		}
	}
	before := hSnapshot(t, b, "t")
	over := []engine.Message{
		{Payload: strings.Repeat("p", max+1)},
		{Key: strings.Repeat("k", max+1)},
		{Key: "k", Payload: strings.Repeat("p", max)},
		{Payload: strings.Repeat("p", max), Headers: []engine.Header{{Key: "h"}}},
		{Payload: strings.Repeat("p", max), Headers: []engine.Header{{Value: "v"}}},
		{Headers: []engine.Header{{Key: strings.Repeat("h", max/2)}, {Value: strings.Repeat("v", max/2+1)}}},
		{Payload: strings.Repeat("é", max/2+1)}, // max+2 bytes, fewer runes
	}
	for i, msg := range over {
		_, err := bt.TryPublish(0, msg)
		hInvalid(t, fmt.Sprintf("over %d", i), err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = bt.Publish(ctx, nil, 0, msg)
		cancel()
		hInvalid(t, fmt.Sprintf("over %d (Publish)", i), err)
	}
	hSame(t, "oversized messages", before, hSnapshot(t, b, "t"))
	for range exact {
		rs := must(m.TryPoll(nil, 1)).of(t)
		if len(rs) != 1 {
			t.Fatalf("poll: %v", rs)
		}
		must(m.Ack(0, rs[0].Offset)).of(t)
	}

	// Hostile header and key bytes: kept exactly, in order, duplicates
	// included; empty payload; times at the edges.
	evil := []string{"", ":", "a:b", "\r\n", "X: y\r\nZ: w", "\x00", "\x00\x01\x7f", "é☃", "Tributary-Key", "Tributary-Time", "Nats-Msg-Id", "Nats-Expected-Last-Sequence"}
	for i, s := range evil {
		msg := engine.Message{Key: s, Payload: "", Headers: []engine.Header{{Key: s, Value: s}, {Key: s, Value: "dup"}, {Key: "k", Value: s}}}
		off := must(bt.TryPublish(0, msg)).of(t)
		rs := must(m.TryPoll(nil, 1)).of(t)
		if len(rs) != 1 || rs[0].Offset != off {
			t.Fatalf("evil %d: poll %v", i, rs)
		}
		r := rs[0]
		if r.Key != s || r.Payload != "" || !slices.Equal(r.Headers, msg.Headers) {
			t.Errorf("evil %d %q: got key %q payload %q headers %q", i, s, r.Key, r.Payload, r.Headers)
		}
		if r.Time.IsZero() {
			t.Errorf("evil %d: zero time", i)
		}
		must(m.Ack(0, off)).of(t)
	}
}

// Header bytes that are not UTF-8 must come back unchanged (the engine
// keeps strings as bytes).
func TestHostileHeaderInvalidUTF8(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	msg := engine.Message{Key: "\xff\xfe", Payload: "\xff", Headers: []engine.Header{{Key: "\xff", Value: "a\xc3"}}}
	must(bt.TryPublish(0, msg)).of(t)
	rs := must(m.TryPoll(nil, 1)).of(t)
	if len(rs) != 1 {
		t.Fatalf("poll: %v", rs)
	}
	if rs[0].Key != msg.Key || rs[0].Payload != msg.Payload {
		t.Fatalf("key %q payload %q", rs[0].Key, rs[0].Payload)
	}
	if !slices.Equal(rs[0].Headers, msg.Headers) {
		t.Fatalf("header bytes that are not valid UTF-8 are not kept: published %q, polled %q (topic.go encode: json.Marshal of the header pairs replaces invalid UTF-8 with U+FFFD)", msg.Headers, rs[0].Headers)
	}
}

// Message times outside int64 nanoseconds since 1970 (before 1678, after
// 2262) must come back as given, or be refused; never silently changed.
func TestHostileMessageTime(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	times := []time.Time{
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	var bad []string
	for _, ts := range times {
		off, err := bt.TryPublish(0, engine.Message{Payload: "x", Time: ts})
		if err != nil {
			continue // refused: acceptable
		}
		rs := must(m.TryPoll(nil, 1)).of(t)
		if len(rs) != 1 || rs[0].Offset != off {
			t.Fatalf("poll %v", rs)
		}
		if !rs[0].Time.Equal(ts) {
			bad = append(bad, fmt.Sprintf("published %v, polled %v", ts, rs[0].Time))
		}
		must(m.Ack(0, off)).of(t)
	}
	if len(bad) > 0 {
		t.Fatalf("message times outside the int64 UnixNano range are silently changed (topic.go encode: ts.UnixNano()): %s", strings.Join(bad, "; "))
	}
}

// Payloads near and over the server's max_payload (1 MiB): a clear error,
// nothing changed, the connection still usable; one that fits round-trips
// through Poll and Snapshot.
func TestHostileHugePayload(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	big := strings.Repeat("x", 1<<20-4096)
	off := must(bt.TryPublish(0, engine.Message{Payload: big})).of(t)
	rs := must(m.TryPoll(nil, 1)).of(t)
	if len(rs) != 1 || rs[0].Offset != off || rs[0].Payload != big {
		t.Fatalf("big record not polled back intact (%d records)", len(rs))
	}
	s := must(b.Snapshot("t")).of(t)
	if len(s.Records[0]) != 1 || s.Records[0][0].Payload != big {
		t.Fatalf("big record not in the snapshot")
	}
	before := hSnapshot(t, b, "t")
	for _, n := range []int{1 << 20, 1<<20 + 1, 2 << 20} {
		start := time.Now()
		_, err := bt.TryPublish(0, engine.Message{Payload: strings.Repeat("y", n)})
		if err == nil {
			t.Errorf("payload of %d bytes accepted over max_payload", n)
			continue
		}
		t.Logf("payload %d bytes: %v (engine.ErrInvalidArgument: %v, ErrUnavailable: %v) in %v", n, err,
			errors.Is(err, engine.ErrInvalidArgument), errors.Is(err, jetstream.ErrUnavailable), time.Since(start))
		if time.Since(start) > 3*time.Second {
			t.Errorf("oversized publish took %v", time.Since(start))
		}
	}
	// Headers count too: a payload that fits alone, plus a big header.
	_, err := bt.TryPublish(0, engine.Message{Payload: strings.Repeat("y", 1<<20-100), Headers: []engine.Header{{Key: "h", Value: strings.Repeat("v", 200)}}})
	if err == nil {
		t.Errorf("payload + headers over max_payload accepted")
	}
	hSame(t, "oversized publishes", before, hSnapshot(t, b, "t"))
	ok, err := m.Ack(0, off)
	wantBool(t, "Ack after oversized publishes", ok, err, true)
	pub(t, bt, 0, "small")
}

// A key or headers of some tens of KiB, far below max_payload and with no
// MaxMessageBytes, must publish and come back intact, or be refused as an
// invalid argument changing nothing; not fail as "server unavailable".
func TestHostileBigKeyHeaders(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	before := hSnapshot(t, b, "t")
	var bad []string
	for _, msg := range []engine.Message{
		{Key: strings.Repeat("k", 60<<10)},
		{Headers: []engine.Header{{Key: "h", Value: strings.Repeat("v", 60<<10)}}},
	} {
		off, err := bt.TryPublish(0, msg)
		switch {
		case errors.Is(err, engine.ErrInvalidArgument):
			hSame(t, "refused big key", before, hSnapshot(t, b, "t"))
		case err != nil:
			bad = append(bad, fmt.Sprintf("key %d bytes, headers %d bytes: %v", len(msg.Key), len(msg.Headers), err))
		default:
			rs := must(m.TryPoll(nil, 1)).of(t)
			if len(rs) != 1 || rs[0].Offset != off || rs[0].Key != msg.Key || !slices.Equal(rs[0].Headers, msg.Headers) {
				t.Fatalf("big key/headers not polled back intact")
			}
			must(m.Ack(0, off)).of(t)
			before = hSnapshot(t, b, "t")
		}
	}
	if len(bad) > 0 {
		t.Fatalf("a message whose key or headers exceed about 48 KiB (60 KiB here, payload empty, no MaxMessageBytes, far below the documented 1 MiB max_payload) is refused by the server's 64 KiB NATS header limit (API error 10097; topic.go encode puts the base64 key and headers in NATS headers) and reported as ErrUnavailable, not ErrInvalidArgument, while the engine accepts it: %s", strings.Join(bad, "; "))
	}
}

// Config: every field out of range is ErrInvalidArgument at once.
func TestHostileConfig(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	bad := map[string]jetstream.Config{
		"capacity 0":        {Server: srv},
		"capacity -1":       {Server: srv, Capacity: -1},
		"capacity 16777217": {Server: srv, Capacity: engine.MaxExtendedCapacity + 1},
		"neither":           {Capacity: 1},
		"both":              {Server: srv, URL: srv.ClientURL(), Capacity: 1},
		"replicas 2":        {Server: srv, Capacity: 1, Replicas: 2},
		"replicas -1":       {Server: srv, Capacity: 1, Replicas: -1},
		"replicas 5":        {Server: srv, Capacity: 1, Replicas: 5},
		"ack timeout < 0":   {Server: srv, Capacity: 1, AckTimeout: -1},
		"max bytes < 0":     {Server: srv, Capacity: 1, MaxMessageBytes: -1},
		"connect < 0":       {Server: srv, Capacity: 1, ConnectTimeout: -time.Second},
		"request < 0":       {Server: srv, Capacity: 1, RequestTimeout: -1},
		"window < 0":        {Server: srv, Capacity: 1, ReplayWindow: -1},
		"window > capacity": {Server: srv, Capacity: 1, ReplayWindow: 2},
		"storage 2":         {Server: srv, Capacity: 1, Storage: 2},
		"storage -1":        {Server: srv, Capacity: 1, Storage: -1},
		"prefix 33":         {Server: srv, Capacity: 1, Prefix: strings.Repeat("P", 33)},
	}
	for _, p := range []string{"a.b", "a>", "*", ">", "a b", "é", "a\x00", "$JS", "a/b", "\n"} {
		bad["prefix "+fmt.Sprintf("%q", p)] = jetstream.Config{Server: srv, Capacity: 1, Prefix: p}
	}
	for name, cfg := range bad {
		b, err := jetstream.Open(cfg)
		if b != nil {
			b.Close()
		}
		hInvalid(t, "Open "+name, err)
	}
	// No stream was created by the refused Opens: a fresh default-prefix
	// backend sees no topics.
	ok := jetstream.Config{Server: srv, Capacity: 1000, Prefix: strings.Repeat("P", 32), ReplayWindow: 1000}
	b, err := jetstream.Open(ok)
	if err != nil {
		t.Fatalf("Open at the limits: %v", err)
	}
	defer b.Close()
	if ts := b.Topics(); len(ts) != 0 {
		t.Fatalf("Topics = %v", ts)
	}
	bt := topic(t, b, strings.Repeat("T", 64), 64)
	pub(t, bt, 63, "x")
	// Unreachable URLs fail within the connect timeout.
	for _, u := range []string{"nats://127.0.0.1:1", "nats://192.0.2.1:4222", "not a url", "nats://", "tls://127.0.0.1:1"} {
		begin := time.Now()
		b, err := jetstream.Open(jetstream.Config{URL: u, Capacity: 1, ConnectTimeout: 300 * time.Millisecond, RequestTimeout: 300 * time.Millisecond})
		if b != nil {
			b.Close()
		}
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
		} else if !errors.Is(err, jetstream.ErrUnavailable) {
			t.Logf("Open(%q): %v (not ErrUnavailable)", u, err)
		}
		if d := time.Since(begin); d > 2*time.Second {
			t.Errorf("Open(%q) took %v", u, d)
		}
	}
}

// Prefix isolation: two prefixes on one server never see each other's
// topics, groups or records.
func TestHostilePrefixIsolation(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	open := func(prefix string) *jetstream.Backend {
		b, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 10, Prefix: prefix, Storage: jetstream.MemoryStorage})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b1, b2 := open("P1"), open("P2")
	t1 := topic(t, b1, "t", 1)
	t2 := topic(t, b2, "t", 1)
	pub(t, t1, 0, "one")
	if ts := b2.Topics(); !slices.Equal(ts, []string{"t"}) {
		t.Fatalf("P2 Topics = %v", ts)
	}
	m2 := member(t, t2, "g", "m")
	must(m2.Join()).of(t)
	wantRecs(t, poll(t, m2, 10))
	if d := must(b1.Describe("t")).of(t); len(d.Groups) != 0 {
		t.Fatalf("P1 sees P2's group: %+v", d.Groups)
	}
}

// Prefixes that differ by more than case, where one is the other plus
// "_x": the stream <Prefix>_<topic>_<p> of prefix "A" and topic "B_x" is the
// stream of prefix "A_B" and topic "x".
func TestHostilePrefixStreamNameCollision(t *testing.T) {
	// Prefix "A" with topic "B_x" and prefix "A_B" with topic "x" would
	// both name stream A_B_x_0: a prefix with an underscore is refused, and
	// prefixes that differ keep their records apart.
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	cfg := func(prefix string) jetstream.Config {
		return jetstream.Config{Server: srv, Capacity: 10, Prefix: prefix, Storage: jetstream.MemoryStorage, RequestTimeout: time.Second}
	}
	if _, err := jetstream.Open(cfg("A_B")); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("Open(prefix A_B): %v; want ErrInvalidArgument", err)
	}
	open := func(prefix string) *jetstream.Backend {
		b, err := jetstream.Open(cfg(prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b1, b2 := open("A"), open("A-B")
	t1 := topic(t, b1, "B_x", 1)
	pub(t, t1, 0, "secret of prefix A")
	t2 := topic(t, b2, "x", 1)
	m := member(t, t2, "g", "m")
	must(m.Join()).of(t)
	if rs, err := m.TryPoll(nil, 10); len(rs) > 0 || err != nil {
		t.Fatalf("prefix A-B polled %v, %v from prefix A's topic", recs(rs), err)
	}
	if got := b2.Topics(); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("prefix A-B lists topics %v", got)
	}
}

// Many goroutines on one member handle, polling, acking and retrying the
// same records: each offset is acked true exactly once and never
// delivered after its ack returned; an acked offset cannot be retried.
func TestHostileSameMemberRace(t *testing.T) {
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

// Calls after Close: an error (tributary.ErrClosed), no hang, no panic;
// Close twice is a no-op; blocked Poll and Publish end with ErrClosed.
func TestHostileAfterClose(t *testing.T) {
	b, srv := start(t, jetstream.Config{Storage: jetstream.MemoryStorage, Capacity: 1, RequestTimeout: time.Second})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	pub(t, bt, 0, "x")
	other, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 1, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ot, _, err := other.OpenTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	// Blocked calls: a Poll of another group member with nothing to poll,
	// a Publish to a full partition.
	idle := member(t, ot, "g2", "m")
	must(idle.Join()).of(t)
	wantRecs(t, poll(t, idle, 1), rec{0, 0, "x", 1}) // now in flight
	m2 := member(t, bt, "g2", "m")
	errs := make(chan error, 2)
	go func() { _, err := m2.Poll(context.Background(), nil, nil, 1); errs <- err }()
	go func() { _, err := bt.Publish(context.Background(), nil, 0, engine.Message{}); errs <- err }()
	time.Sleep(300 * time.Millisecond)
	begin := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, tributary.ErrClosed) {
				t.Errorf("blocked call after Close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("blocked call did not end after Close")
		}
	}
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, tributary.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", what, err)
		}
	}
	_, err = b.CreateTopic("u", 1, "")
	closed("CreateTopic", err)
	_, _, err = b.OpenTopic("t")
	closed("OpenTopic", err)
	if ts := b.Topics(); len(ts) != 0 {
		t.Errorf("Topics after Close = %v", ts)
	}
	_, err = b.CreateGroup("t", "g3", engine.RoundRobin)
	closed("CreateGroup", err)
	_, err = b.DeleteGroup("t", "g3")
	closed("DeleteGroup", err)
	_, err = b.SetAssignor("t", "g", engine.Range)
	closed("SetAssignor", err)
	_, err = b.AddPartitions("t", 1)
	closed("AddPartitions", err)
	_, err = b.Seek("t", "g", 0, 0)
	closed("Seek", err)
	_, err = b.Describe("t")
	closed("Describe", err)
	_, err = b.Snapshot("t")
	closed("Snapshot", err)
	_, err = bt.TryPublish(0, engine.Message{})
	closed("TryPublish", err)
	_, err = bt.Publish(context.Background(), nil, 0, engine.Message{})
	closed("Publish", err)
	_, err = m.Join()
	closed("Join", err)
	_, err = m.Leave()
	closed("Leave", err)
	if a := m.Assignment(); len(a) != 0 {
		t.Errorf("Assignment after Close = %v", a)
	}
	_, err = m.TryPoll(nil, 1)
	closed("TryPoll", err)
	_, err = m.Poll(context.Background(), nil, nil, 1)
	closed("Poll", err)
	_, err = m.TryPollPartition(nil, 0)
	closed("TryPollPartition", err)
	_, err = m.Ack(0, 0)
	closed("Ack", err)
	_, err = m.Retry(0, 0)
	closed("Retry", err)
	_ = bt.Partitions()
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("calls after Close took %v", d)
	}
	// Invalid arguments are still invalid after Close.
	_, err = b.CreateTopic("bad name", 1, "")
	hInvalid(t, "CreateTopic bad name after Close", err)
	// The other Backend is unaffected.
	ok, err := idle.Ack(0, 0)
	wantBool(t, "other backend's Ack", ok, err, true)
}

// hEvent is one poll or ack of the two-backend race, for the checks after.
type hEvent struct {
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
func TestHostileTwoBackends(t *testing.T) {
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
		events = map[[2]int64][]hEvent{}
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
				events[k] = append(events[k], hEvent{member: name, start: begin, end: end})
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
				events[k] = append(events[k], hEvent{member: name, start: begin, end: end, ack: true, ok: ok})
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

// The server shuts down under load: every call fails within about
// RequestTimeout (no hang), blocked calls end, Close works, and no
// goroutine is left behind.
func TestHostileServerShutdownUnderLoad(t *testing.T) {
	const rt = 500 * time.Millisecond
	b, srv := start(t, jetstream.Config{Storage: jetstream.MemoryStorage, Capacity: 5, RequestTimeout: rt, ConnectTimeout: rt})
	bt := topic(t, b, "t", 2)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var down atomic.Bool
	slow := func(what string, begin time.Time) {
		if d := time.Since(begin); down.Load() && d > hangBound(rt) {
			t.Errorf("%s took %v with the server down", what, d)
		}
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				begin := time.Now()
				switch w {
				case 0:
					bt.TryPublish(int32(w%2), engine.Message{Payload: "x"}) //nolint:errcheck
					slow("TryPublish", begin)
				case 1:
					pctx, pc := context.WithTimeout(ctx, 3*rt)
					rs, _ := m.Poll(pctx, nil, nil, 2)
					pc()
					slow("Poll", begin)
					for _, r := range rs {
						begin := time.Now()
						m.Ack(r.Partition, r.Offset) //nolint:errcheck
						slow("Ack", begin)
					}
				case 2:
					pctx, pc := context.WithTimeout(ctx, 3*rt)
					bt.Publish(pctx, nil, 1, engine.Message{Payload: "y"}) //nolint:errcheck
					pc()
					slow("Publish", begin)
				case 3:
					member(t, bt, "g", "z").Join() //nolint:errcheck
					slow("Join", begin)
					b.Describe("t") //nolint:errcheck
					slow("Describe", begin)
				}
				if down.Load() {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	srv.Shutdown()
	down.Store(true)
	begin := time.Now()
	calls := map[string]func() error{
		"CreateTopic": func() error { _, err := b.CreateTopic("u", 1, ""); return err },
		"TryPublish":  func() error { _, err := bt.TryPublish(0, engine.Message{}); return err },
		"TryPoll":     func() error { _, err := m.TryPoll(nil, 1); return err },
		"Ack":         func() error { _, err := m.Ack(0, 0); return err },
		"Seek":        func() error { _, err := b.Seek("t", "g", 0, 0); return err },
		"Snapshot":    func() error { _, err := b.Snapshot("t"); return err },
		"Leave":       func() error { _, err := m.Leave(); return err },
		"AddParts":    func() error { _, err := b.AddPartitions("t", 1); return err },
	}
	for name, f := range calls {
		c := time.Now()
		if err := f(); !errors.Is(err, jetstream.ErrUnavailable) {
			t.Errorf("%s with the server down: %v, want ErrUnavailable", name, err)
		}
		if d := time.Since(c); d > hangBound(rt) {
			t.Errorf("%s with the server down took %v", name, d)
		}
	}
	_ = b.Topics()
	_ = m.Assignment()
	t.Logf("calls with the server down: %v", time.Since(begin))
	time.Sleep(2 * rt)
	closeStart := time.Now()
	b.Close()
	cancel()
	wg.Wait()
	if d := time.Since(closeStart); d > hangBound(rt) {
		t.Errorf("workers took %v to stop after Close", d)
	}
}

// Admin races between two Backends: exactly one of many concurrent
// CreateTopic / CreateGroup wins; concurrent AddPartitions each get a
// distinct new total; DeleteGroup racing Join never leaves a group that
// is deleted but has a member, or a member whose cursors are missing.
func TestHostileConcurrentAdmin(t *testing.T) {
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
func TestHostileSeekRace(t *testing.T) {
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

// Close racing busy goroutines (server up): no panic, every call ends with
// an error soon after, blocked calls end with ErrClosed.
func TestHostileCloseUnderLoad(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage, Capacity: 4, RequestTimeout: time.Second})
	bt := topic(t, b, "t", 2)
	var wg sync.WaitGroup
	var closedAt atomic.Int64
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := bt.Member("g", fmt.Sprint("m", w%3))
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; ; i++ {
				var err error
				afterClose := closedAt.Load() != 0 // this op starts after Close
				switch (w + i) % 5 {
				case 0:
					_, err = bt.TryPublish(int32(i%2), engine.Message{Payload: "x"})
				case 1:
					_, err = m.Join()
				case 2:
					var rs []engine.Record
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
					rs, err = m.Poll(ctx, nil, nil, 2)
					cancel()
					for _, r := range rs {
						m.Ack(r.Partition, r.Offset) //nolint:errcheck
					}
				case 3:
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
					_, err = bt.Publish(ctx, nil, 0, engine.Message{})
					cancel()
				case 4:
					_, err = b.Describe("t")
				}
				if afterClose {
					if err == nil || errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("worker %d op %d after Close: %v", w, (w+i)%5, err)
					} else if !errors.Is(err, tributary.ErrClosed) {
						t.Errorf("worker %d op %d after Close: %v, want ErrClosed", w, (w+i)%5, err)
					}
					return
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	b.Close()
	closedAt.Store(time.Now().UnixNano()) // ops that start from here on must fail
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("workers did not stop after Close")
	}
}

// Hostile assignor names and payload types: kept exactly or refused with a
// clear error, nothing changed.
func TestHostileNamesInState(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 2)
	must(member(t, bt, "g", "a").Join()).of(t)
	for _, name := range []string{"", "a.b.>", "*", "\n", "é☃", strings.Repeat("n", 2<<20)} {
		before := hSnapshot(t, b, "t")
		ok, err := b.SetAssignor("t", "g", hAssignor(name, hAll("a")))
		if err != nil {
			hSame(t, fmt.Sprintf("refused assignor name of %d bytes", len(name)), before, hSnapshot(t, b, "t"))
			t.Logf("assignor name %.20q (%d bytes): %v", name, len(name), err)
			continue
		}
		wantBool(t, "SetAssignor", ok, err, true)
		d := must(b.Describe("t")).of(t)
		if d.Groups[0].Assignor != name {
			t.Errorf("assignor name %.20q described as %.20q", name, d.Groups[0].Assignor)
		}
		// The group still rebalances with it.
		mb := member(t, bt, "g", "b")
		if _, err := mb.Join(); err != nil {
			t.Errorf("Join under assignor %.20q: %v", name, err)
		}
		must(mb.Leave()).of(t)
	}
	for i, pt := range []string{"", "é☃", "a\x00b", strings.Repeat("p", 2<<20)} {
		name := fmt.Sprint("u", i)
		ok, err := b.CreateTopic(name, 1, pt)
		if err != nil {
			t.Logf("payload type of %d bytes: %v", len(pt), err)
			if slices.Contains(b.Topics(), name) {
				t.Errorf("refused CreateTopic left topic %q", name)
			}
			continue
		}
		wantBool(t, "CreateTopic", ok, err, true)
		_, got, err := b.OpenTopic(name)
		if err != nil || got != pt {
			t.Errorf("payload type %.20q reopened as %.20q, %v", pt, got, err)
		}
	}
}

// An assignor name or payload type that is not valid UTF-8 must be kept
// exactly (the engine keeps any string): the state's JSON replaces the bad
// bytes, so the stored name no longer matches the registered assignor.
func TestHostileInvalidUTF8Names(t *testing.T) {
	// The state values are JSON, which cannot keep bytes that are not
	// UTF-8: such an assignor name or payload type is refused, changing
	// nothing, rather than kept altered.
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 2)
	must(member(t, bt, "g", "a").Join()).of(t)
	before := must(b.Describe("t")).of(t)
	ok, err := b.SetAssignor("t", "g", hAssignor("\xff", hAll("a")))
	if ok || !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("SetAssignor(name \\xff) = %v, %v; want false, ErrInvalidArgument", ok, err)
	}
	if _, err := b.CreateGroup("t", "h", hAssignor("\xff", hAll("a"))); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("CreateGroup(name \\xff): %v; want ErrInvalidArgument", err)
	}
	if after := must(b.Describe("t")).of(t); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused call changed the topic:\n%+v\n%+v", before, after)
	}
	if ok, err := b.CreateTopic("u", 1, "T\xff"); ok || !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("CreateTopic(payload type T\\xff) = %v, %v; want false, ErrInvalidArgument", ok, err)
	}
	if got := b.Topics(); !slices.Equal(got, []string{"t"}) {
		t.Fatalf("Topics = %v after a refused CreateTopic", got)
	}
	if _, err := member(t, bt, "g", "b").Join(); err != nil {
		t.Fatalf("Join after the refusals: %v", err)
	}
}

// hangBound is how long a call may take, with requests bounded by rt,
// before a test calls it a hang: generous, since a call makes several
// requests and CI runs the tests beside other packages on 2 cores. It is
// not a speed figure.
func hangBound(rt time.Duration) time.Duration { return 12*rt + 2*time.Second }
