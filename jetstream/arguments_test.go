package jetstream_test

// Input validation of the calls' arguments: identifiers (topics, groups,
// members) and numbers (partitions, offsets, counts) at and past their
// limits are refused with ErrInvalidArgument and change nothing; 64-byte
// identifiers work end to end.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

func TestInvalidArguments(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 2)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	isInvalid := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
	_, err := b.CreateTopic("bad name", 1, "")
	isInvalid("CreateTopic name", err)
	_, err = b.CreateTopic("u", 65, "")
	isInvalid("CreateTopic count", err)
	_, err = b.CreateGroup("t", "g2", nil)
	isInvalid("nil assignor", err)
	_, err = b.CreateGroup("nope", "g", engine.RoundRobin)
	isInvalid("unknown topic", err)
	if !errors.Is(err, tributary.ErrUnknownTopic) {
		t.Errorf("unknown topic: %v", err)
	}
	if _, _, err := b.OpenTopic("nope"); !errors.Is(err, tributary.ErrUnknownTopic) {
		t.Errorf("OpenTopic: %v", err)
	}
	_, err = bt.TryPublish(2, engine.Message{})
	isInvalid("publish partition", err)
	_, err = bt.Member("g", "")
	isInvalid("member id", err)
	_, err = m.TryPoll(nil, 0)
	isInvalid("max 0", err)
	_, err = m.TryPoll(nil, 65)
	isInvalid("max 65", err)
	_, err = m.Ack(0, -1)
	isInvalid("negative ack", err)
	_, err = m.Retry(5, 0)
	isInvalid("retry partition", err)
	_, err = b.Describe("nope")
	isInvalid("Describe", err)
	// Nothing changed.
	d := must(b.Describe("t")).of(t)
	if len(d.Groups) != 1 || d.Partitions[0].LogEndOffset != 0 || slices.Contains(b.Topics(), "u") {
		t.Fatalf("state changed: %+v %v", d, b.Topics())
	}
	if ts := b.Topics(); !slices.Equal(ts, []string{"t"}) {
		t.Fatalf("Topics = %v", ts)
	}
	if _, err := jetstream.Open(jetstream.Config{URL: "nats://x", Capacity: 1, ReplayWindow: 2}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("replay window over the capacity: %v", err)
	}
	if _, err := jetstream.Open(jetstream.Config{URL: "nats://x", Capacity: engine.MaxExtendedCapacity + 1}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("capacity: %v", err)
	}
}

var badIDs = []string{
	"",
	strings.Repeat("a", 65),
	strings.Repeat("é", 32), // 64 bytes, not ASCII
	"a.b", "a>", ">", "*", "a*", "a b", " a", "a ", "\t", "a\x00", "a\nb", "é", "a/b", "a:b",
	"$SYS", "a$", "%", "a\u200b",
}

// Every identifier argument at and past its limits: each bad call returns
// ErrInvalidArgument and changes nothing; 64-byte identifiers work end to
// end.
func TestIdentifiers(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 2)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	pub(t, bt, 0, "x")
	before := stateOf(t, b, "t")
	for _, id := range badIDs {
		q := fmt.Sprintf("%q", id)
		_, err := b.CreateTopic(id, 1, "string")
		wantInvalid(t, "CreateTopic "+q, err)
		_, _, err = b.OpenTopic(id)
		wantInvalid(t, "OpenTopic "+q, err)
		_, err = b.CreateGroup(id, "g", engine.RoundRobin)
		wantInvalid(t, "CreateGroup topic "+q, err)
		_, err = b.CreateGroup("t", id, engine.RoundRobin)
		wantInvalid(t, "CreateGroup group "+q, err)
		_, err = b.DeleteGroup(id, "g")
		wantInvalid(t, "DeleteGroup topic "+q, err)
		_, err = b.DeleteGroup("t", id)
		wantInvalid(t, "DeleteGroup group "+q, err)
		_, err = b.SetAssignor(id, "g", engine.Range)
		wantInvalid(t, "SetAssignor topic "+q, err)
		_, err = b.SetAssignor("t", id, engine.Range)
		wantInvalid(t, "SetAssignor group "+q, err)
		_, err = b.AddPartitions(id, 1)
		wantInvalid(t, "AddPartitions "+q, err)
		_, err = b.Seek(id, "g", 0, 0)
		wantInvalid(t, "Seek topic "+q, err)
		_, err = b.Seek("t", id, 0, 0)
		wantInvalid(t, "Seek group "+q, err)
		_, err = b.Describe(id)
		wantInvalid(t, "Describe "+q, err)
		_, err = b.Snapshot(id)
		wantInvalid(t, "Snapshot "+q, err)
		_, err = bt.Member(id, "m")
		wantInvalid(t, "Member group "+q, err)
		_, err = bt.Member("g", id)
		wantInvalid(t, "Member member "+q, err)
	}
	wantSame(t, "bad identifiers", before, stateOf(t, b, "t"))

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
func TestNumbers(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 3)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	pub(t, bt, 0, "a")
	pub(t, bt, 1, "b")
	wantRecs(t, poll(t, m, 1), rec{0, 0, "a", 1})
	before := stateOf(t, b, "t")
	for _, c := range []int32{0, -1, 65, math.MaxInt32, math.MinInt32} {
		_, err := b.CreateTopic("u", c, "string")
		wantInvalid(t, fmt.Sprintf("CreateTopic count %d", c), err)
	}
	for _, c := range []int32{0, -1, 62, 64, math.MaxInt32, math.MinInt32} {
		_, err := b.AddPartitions("t", c)
		wantInvalid(t, fmt.Sprintf("AddPartitions %d", c), err)
	}
	for _, p := range []int32{-1, 3, 64, math.MaxInt32, math.MinInt32} {
		_, err := bt.TryPublish(p, engine.Message{Payload: "x"})
		wantInvalid(t, fmt.Sprintf("TryPublish p %d", p), err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = bt.Publish(ctx, nil, p, engine.Message{Payload: "x"})
		cancel()
		wantInvalid(t, fmt.Sprintf("Publish p %d", p), err)
		_, err = m.Ack(p, 0)
		wantInvalid(t, fmt.Sprintf("Ack p %d", p), err)
		_, err = m.Retry(p, 0)
		wantInvalid(t, fmt.Sprintf("Retry p %d", p), err)
		_, err = m.TryPollPartition(nil, p)
		wantInvalid(t, fmt.Sprintf("TryPollPartition p %d", p), err)
		_, err = b.Seek("t", "g", p, 0)
		wantInvalid(t, fmt.Sprintf("Seek p %d", p), err)
		// Invalid and about an absent group: still an error (rule 4).
		_, err = b.Seek("t", "nogroup", p, 0)
		wantInvalid(t, fmt.Sprintf("Seek absent group p %d", p), err)
	}
	for _, off := range []int64{-1, math.MinInt64} {
		_, err := m.Ack(0, off)
		wantInvalid(t, fmt.Sprintf("Ack off %d", off), err)
		_, err = m.Retry(0, off)
		wantInvalid(t, fmt.Sprintf("Retry off %d", off), err)
		_, err = b.Seek("t", "g", 0, off)
		wantInvalid(t, fmt.Sprintf("Seek off %d", off), err)
		_, err = b.Seek("t", "nogroup", 0, off)
		wantInvalid(t, fmt.Sprintf("Seek absent group off %d", off), err)
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
		wantInvalid(t, fmt.Sprintf("TryPoll max %d", mx), err)
		if len(out) != 1 || out[0].Payload != "keep" {
			t.Errorf("TryPoll max %d changed dst: %v", mx, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = m.Poll(ctx, nil, nil, mx)
		cancel()
		wantInvalid(t, fmt.Sprintf("Poll max %d", mx), err)
	}
	wantSame(t, "bad numbers", before, stateOf(t, b, "t"))

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
