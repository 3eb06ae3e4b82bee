package engine_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
)

// Table tests of the core rules (1–14, docs/contract.md) on the engine's
// own API. Scripts are lists of lines (a call and the result it must
// have); "changes nothing" is checked on twin brokers with
// requireNoEffect. contract.md's worked examples and the rules that
// backendtest checks as fully on every Backend (rules 5, 6's no-effect
// calls, 11 and 12) are backendtest's checks (backendtest/rules.go), run
// on the engine by backendtest/engine_test.go.

func TestRule1New(t *testing.T) {
	tests := []struct {
		name     string
		capacity int32
		winvalid bool
	}{
		{"zero", 0, true},
		{"negative", -1, true},
		{"1001", 1001, true},
		{"min int32", math.MinInt32, true},
		{"max int32", math.MaxInt32, true},
		{"1", 1, false},
		{"2", 2, false},
		{"1000", 1000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := engine.New(tt.capacity)
			if tt.winvalid {
				require.Error(t, err)
				assert.True(t, errors.Is(err, engine.ErrInvalidArgument), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.capacity, b.Capacity())
			// The capacity is what a partition retains.
			play(t, b, []line{{create("t", 1), isTrue}})
			for off := range int64(tt.capacity) {
				play(t, b, []line{{publish("t", 0, "p"), atOffset(off)}})
			}
			play(t, b, []line{{publish("t", 0, "p"), atOffset(-1)}})
		})
	}
}

func TestRule2Create(t *testing.T) {
	tests := []struct {
		name     string
		count    int32
		winvalid bool
	}{
		{"1", 1, false},
		{"3", 3, false},
		{"64", 64, false},
		{"0", 0, true},
		{"65", 65, true},
		{"-1", -1, true},
		{"min int32", math.MinInt32, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBroker(t, 4)
			if tt.winvalid {
				play(t, b, []line{
					{create("t", tt.count), isInvalid},
					{publish("t", 0, "p"), isInvalid}, // no topic was made
					{create("t", 1), isTrue},
				})
				return
			}
			wlast := int64(0)
			if tt.count == 1 {
				wlast = 1 // the same partition as "first"
			}
			play(t, b, []line{
				{create("t", tt.count), isTrue},
				{publish("t", 0, "first"), atOffset(0)},
				{publish("t", tt.count-1, "last"), atOffset(wlast)},
				{publish("t", tt.count, "beyond"), isInvalid},
				{create("t", tt.count), isFalse},
			})
		})
	}

	t.Run("duplicate leaves the existing topic untouched", func(t *testing.T) {
		play(t, newBroker(t, 4), []line{
			{create("t", 1), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{join("t", "g", "m"), owns(0)},
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 0, "a"))},
			{create("t", 5), isFalse},
			{create("t", 1), isFalse},
			{create("t", 64), isFalse},
			{publish("t", 1, "b"), isInvalid},   // still one partition
			{ack("t", "g", "m", 0, 0), isTrue},  // in-flight delivery survived
			{publish("t", 0, "b"), atOffset(1)}, // offsets were not reset
			{join("t", "g", "m"), owns(0)},      // the group survived
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 1, "b"))},
		})
	})
	t.Run("topics are independent", func(t *testing.T) {
		play(t, newBroker(t, 4), []line{
			{create("t", 1), isTrue},
			{create("u", 2), isTrue},
			{publish("t", 0, "t0"), atOffset(0)},
			{publish("u", 1, "u1"), atOffset(0)},
			{publish("t", 1, "x"), isInvalid},
			{join("u", "g", "m"), owns(0, 1)},
			{join("t", "g", "m"), owns(0)},
			{poll("u", "g", "m", 64), delivers(rec("u", 1, 0, "u1"))},
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 0, "t0"))},
		})
	})
}

func TestRule3Identifiers(t *testing.T) {
	valid := []struct {
		name string
		id   string
	}{
		{"one lower", "a"},
		{"one upper", "Z"},
		{"one digit", "0"},
		{"underscore", "_"},
		{"hyphen", "-"},
		{"64 chars", strings.Repeat("a", 64)},
		{"every allowed byte", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"},
		{"mixed", "Order-Events_2024"},
	}
	for _, tt := range valid {
		t.Run("valid/"+tt.name, func(t *testing.T) {
			require.LessOrEqual(t, len(tt.id), 64)
			id := tt.id
			play(t, newBroker(t, 4), []line{
				{create(id, 2), isTrue},
				{publish(id, 1, "p"), atOffset(0)},
				{join(id, id, id), owns(0, 1)},
				{poll(id, id, id, 64), delivers(rec(id, 1, 0, "p"))},
				{retry(id, id, id, 1, 0), isTrue},
				{poll(id, id, id, 64), delivers(rec(id, 1, 0, "p"))},
				{ack(id, id, id, 1, 0), isTrue},
				{leave(id, id, id), isTrue},
				{create(id, 2), isFalse},
			})
		})
	}

	t.Run("case sensitive topics", func(t *testing.T) {
		play(t, newBroker(t, 4), []line{
			{create("A", 1), isTrue},
			{create("a", 1), isTrue},
			{publish("A", 0, "upper"), atOffset(0)},
			{publish("a", 0, "lower"), atOffset(0)},
			{join("A", "g", "m"), owns(0)},
			{join("a", "g", "m"), owns(0)},
			{poll("A", "g", "m", 64), delivers(rec("A", 0, 0, "upper"))},
			{poll("a", "g", "m", 64), delivers(rec("a", 0, 0, "lower"))},
		})
	})
	t.Run("case sensitive groups", func(t *testing.T) {
		play(t, newBroker(t, 4), []line{
			{create("t", 1), isTrue},
			{publish("t", 0, "p"), atOffset(0)},
			{join("t", "G", "m"), owns(0)},
			{join("t", "g", "m"), owns(0)},
			{poll("t", "G", "m", 64), delivers(rec("t", 0, 0, "p"))},
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 0, "p"))},
			{ack("t", "G", "m", 0, 0), isTrue},
			{ack("t", "g", "m", 0, 0), isTrue},
		})
	})
	t.Run("case sensitive members", func(t *testing.T) {
		play(t, newBroker(t, 4), []line{
			{create("t", 2), isTrue},
			{join("t", "g", "m"), owns(0, 1)},
			{join("t", "g", "M"), owns(0)}, // "M" < "m": two members
			{join("t", "g", "m"), owns(1)},
			{leave("t", "g", "M"), isTrue},
			{leave("t", "g", "M"), isFalse},
			{join("t", "g", "m"), owns(0, 1)},
		})
	})
}

// baseScript builds a broker with a bit of everything, for the "an invalid
// call changes nothing" checks: two topics, records, a group with two
// members, a second group, a member-less group, acked records and in-flight
// deliveries. baseWorld names what the probe looks at.
var baseScript = []step{
	create("t", 3),
	create("u", 1),
	publish("t", 0, "a0"), publish("t", 0, "a1"), publish("t", 0, "a2"),
	publish("t", 1, "b0"), publish("t", 2, "c0"),
	publish("u", 0, "u0"),
	join("t", "g", "m1"),
	join("t", "g", "m2"), // m1 owns [0 2], m2 owns [1]
	join("t", "g2", "m1"),
	join("t", "idle", "x"), leave("t", "idle", "x"), // member-less
	poll("t", "g", "m1", 64), // t/0/0, t/2/0
	ack("t", "g", "m1", 0, 0),
	ack("t", "g", "m1", 2, 0),
	poll("t", "g", "m1", 64), // t/0/1 in flight
	poll("t", "g", "m2", 64), // t/1/0 in flight
	join("u", "g", "m1"),
	poll("u", "g", "m1", 64), // u/0/0 in flight
}

var baseWorld = world{capacity: 4, topics: []worldTopic{
	{"t", 3, []worldGroup{
		{"g", []string{"m1", "m2", "m3"}},
		{"g2", []string{"m1"}},
		{"idle", []string{"x"}},
		{"absent", []string{"m1"}},
	}},
	{"u", 1, []worldGroup{{"g", []string{"m1"}}}},
}}

// baseCalls are valid calls, each of which changes the base broker; the
// invalid cases are these with one argument broken.
var baseCalls = []step{
	create("fresh", 1),
	join("t", "g", "m3"),
	leave("t", "g", "m2"),
	publish("t", 0, "x"),
	poll("t", "g2", "m1", 64),
	ack("t", "g", "m1", 0, 1),
	retry("t", "g", "m1", 0, 1),
}

// TestProbeSeesValidCalls shows that the probe used by the no-effect checks
// would see each base call had it been accepted.
func TestProbeSeesValidCalls(t *testing.T) {
	for _, c := range baseCalls {
		t.Run(c.Op, func(t *testing.T) {
			requireEffect(t, baseWorld, baseScript, c)
		})
	}
	// Also calls that only a careless implementation would accept as valid:
	// a trimmed member, a new group, a new member.
	for _, c := range []step{join("t", "g", "m4"), join("t", "new", "m1"), join("u", "g", "m0")} {
		t.Run(c.String(), func(t *testing.T) {
			requireEffect(t, baseWorld, baseScript, c)
		})
	}
}

type namedID struct{ name, id string }

// badIDs returns invalid identifiers, several derived from the valid id so
// that an implementation that trims or normalises would hit a real name.
func badIDs(valid string) []namedID {
	return []namedID{
		{"empty", ""},
		{"65 chars", strings.Repeat("a", 65)},
		{"65 chars with valid prefix", valid + strings.Repeat("x", 65-len(valid))},
		{"space inside", valid + " x"},
		{"only space", " "},
		{"leading space", " " + valid},
		{"trailing space", valid + " "},
		{"tab", valid + "\t"},
		{"newline", valid + "\n"},
		{"dot", valid + ".x"},
		{"slash", valid + "/x"},
		{"e acute", "é"},
		{"u umlaut", "ü"},
		{"non-ASCII suffix", valid + "é"},
		{"Latin-1 byte", valid + "\xe9"},
		{"NUL byte", valid + "\x00"},
		{"only NUL", "\x00"},
	}
}

func withField(s step, field, v string) step {
	switch field {
	case "topic":
		s.Topic = v
	case "group":
		s.Group = v
	case "member":
		s.Member = v
	default:
		panic(field)
	}
	return s
}

func fieldOf(s step, field string) string {
	return map[string]string{"topic": s.Topic, "group": s.Group, "member": s.Member}[field]
}

type invalidCase struct {
	name string
	call step
}

// invalidCases lists every invalid-argument case for the base broker.
func invalidCases() []invalidCase {
	var cases []invalidCase
	add := func(name string, s step) { cases = append(cases, invalidCase{s.Op + "/" + name, s}) }
	for _, s := range baseCalls {
		fields := []string{"topic", "group", "member"}
		if s.Op == "create" || s.Op == "publish" {
			fields = fields[:1]
		}
		for _, f := range fields {
			for _, bad := range badIDs(fieldOf(s, f)) {
				add(f+" "+bad.name, withField(s, f, bad.id))
			}
		}
		if s.Op != "create" {
			add("unknown topic", withField(s, "topic", "nope"))
			add("unknown topic differing in case", withField(s, "topic", "T"))
			add("unknown topic of 64 chars", withField(s, "topic", strings.Repeat("t", 64)))
		}
	}
	for _, n := range []int32{0, 65, -1, math.MinInt32, math.MaxInt32} {
		add(fmt.Sprintf("partitionCount %d", n), create("fresh", n))
	}
	for _, p := range []int32{-1, 3, 64, math.MinInt32, math.MaxInt32} {
		add(fmt.Sprintf("partition %d", p), publish("t", p, "x"))
		add(fmt.Sprintf("partition %d", p), ack("t", "g", "m1", p, 1))
		add(fmt.Sprintf("partition %d", p), retry("t", "g", "m1", p, 1))
	}
	for _, off := range []int64{-1, math.MinInt64} {
		add(fmt.Sprintf("offset %d", off), ack("t", "g", "m1", 0, off))
		add(fmt.Sprintf("offset %d", off), retry("t", "g", "m1", 0, off))
	}
	for _, n := range []int32{0, 65, -1, math.MinInt32, math.MaxInt32} {
		add(fmt.Sprintf("maxRecords %d", n), poll("t", "g2", "m1", n))
	}
	return cases
}

func TestRule4InvalidArgument(t *testing.T) {
	for _, tc := range invalidCases() {
		t.Run(tc.name, func(t *testing.T) {
			requireNoEffect(t, baseWorld, baseScript, tc.call, isInvalid)
		})
	}
}

// TestRule4InvalidArgumentError checks the error itself: non-nil, wrapping
// the sentinel, and with a message.
func TestRule4InvalidArgumentError(t *testing.T) {
	b := build(t, baseWorld.capacity, baseScript)
	_, err := b.Publish("t", 3, "x")
	require.Error(t, err)
	assert.ErrorIs(t, err, engine.ErrInvalidArgument)
	assert.NotEqual(t, engine.ErrInvalidArgument.Error(), err.Error(), "context is added")
	_, err = engine.New(0)
	assert.ErrorIs(t, err, engine.ErrInvalidArgument)
}

// TestRule4ValidationBeforeState: a call that is both invalid and about an
// absent topic, group or member is an error, not false or empty.
func TestRule4ValidationBeforeState(t *testing.T) {
	tests := []struct {
		name string
		call step
	}{
		{"ack absent group, partition -1", ack("t", "absent", "m1", -1, 0)},
		{"ack absent group, partition count", ack("t", "absent", "m1", 3, 0)},
		{"ack absent group, offset -1", ack("t", "absent", "m1", 0, -1)},
		{"ack absent group, bad member", ack("t", "absent", "m 1", 0, 0)},
		{"ack absent member, offset -1", ack("t", "g", "m3", 0, -1)},
		{"ack absent member, bad partition", ack("t", "g", "m3", 9, 0)},
		{"retry absent group, partition -1", retry("t", "absent", "m1", -1, 0)},
		{"retry absent group, offset -1", retry("t", "absent", "m1", 0, -1)},
		{"retry absent member, offset -1", retry("t", "g", "m3", 0, -1)},
		{"poll absent group, maxRecords 0", poll("t", "absent", "m1", 0)},
		{"poll absent group, maxRecords 65", poll("t", "absent", "m1", 65)},
		{"poll absent member, maxRecords 0", poll("t", "g", "m3", 0)},
		{"poll absent group, bad member", poll("t", "absent", "m1.", 1)},
		{"leave absent group, bad member", leave("t", "absent", "m1 ")},
		{"leave absent group, empty member", leave("t", "absent", "")},
		{"leave absent member, bad group", leave("t", "g.", "m3")},
		{"leave member-less group, bad member", leave("t", "idle", "x\x00")},
		{"create existing topic, partitionCount 0", create("t", 0)},
		{"create existing topic, partitionCount 65", create("t", 65)},
		{"unknown topic and bad partition", publish("nope", -1, "x")},
		{"unknown topic and maxRecords 0", poll("nope", "absent", "m1", 0)},
		{"join unknown topic", join("nope", "absent", "m1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireNoEffect(t, baseWorld, baseScript, tt.call, isInvalid)
		})
	}
}

func TestRule6Ownership(t *testing.T) {
	tests := []struct {
		name       string
		partitions int32
		joins      []string // in join order
		wowns      map[string][]int32
	}{
		{"one member owns all", 3, []string{"a"},
			map[string][]int32{"a": {0, 1, 2}}},
		{"upper case sorts before lower case", 3, []string{"a", "B"},
			map[string][]int32{"B": {0, 2}, "a": {1}}},
		{"bytewise, not numeric", 3, []string{"a9", "a10"},
			map[string][]int32{"a10": {0, 2}, "a9": {1}}},
		{"prefix sorts first", 2, []string{"ab", "a"},
			map[string][]int32{"a": {0}, "ab": {1}}},
		{"hyphen digit upper underscore lower", 5, []string{"a", "_", "A", "0", "-"},
			map[string][]int32{"-": {0}, "0": {1}, "A": {2}, "_": {3}, "a": {4}}},
		{"join order does not matter", 4, []string{"c", "a", "b"},
			map[string][]int32{"a": {0, 3}, "b": {1}, "c": {2}}},
		{"p mod n", 7, []string{"x", "y", "z"},
			map[string][]int32{"x": {0, 3, 6}, "y": {1, 4}, "z": {2, 5}}},
		{"more members than partitions", 2, []string{"c", "b", "a"},
			map[string][]int32{"a": {0}, "b": {1}, "c": {}}},
		{"64 partitions, 60 members", 64, nil, nil}, // filled in below
	}
	for i := range 60 {
		m := fmt.Sprintf("m%02d", 59-i)
		tests[len(tests)-1].joins = append(tests[len(tests)-1].joins, m)
	}
	wide := map[string][]int32{}
	for p := range int32(64) {
		m := fmt.Sprintf("m%02d", p%60)
		wide[m] = append(wide[m], p)
	}
	tests[len(tests)-1].wowns = wide

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBroker(t, 4)
			play(t, b, []line{{create("t", tt.partitions), isTrue}})
			for p := range tt.partitions {
				play(t, b, []line{{publish("t", p, fmt.Sprint("r", p)), atOffset(0)}})
			}
			for _, m := range tt.joins {
				_, err := b.Join("t", "g", m)
				require.NoError(t, err)
			}
			require.Len(t, tt.wowns, len(tt.joins))
			for m, want := range tt.wowns {
				// Joining twice returns the current partitions.
				got, err := b.Join("t", "g", m)
				require.NoError(t, err)
				assert.Equal(t, append([]int32{}, want...), got, "Join(%q)", m)
				// And those are the partitions it is given records of.
				recs, err := b.Poll("t", "g", m, 64)
				require.NoError(t, err)
				var polled []int32
				for _, r := range recs {
					polled = append(polled, r.Partition)
				}
				assert.Equal(t, want, append([]int32{}, polled...), "Poll(%q)", m)
			}
		})
	}
}

func TestRule7Join(t *testing.T) {
	tests := []struct {
		name     string
		capacity int32
		script   []line
	}{
		{"returns partitions ascending", 4, []line{
			{create("t", 5), isTrue},
			{join("t", "g", "b"), owns(0, 1, 2, 3, 4)},
			{join("t", "g", "a"), owns(0, 2, 4)},
			{join("t", "g", "b"), owns(1, 3)},
		}},
		{"empty, not nil, with more members than partitions", 4, []line{
			{create("t", 1), isTrue},
			{join("t", "g", "a"), owns(0)},
			{join("t", "g", "b"), owns()},
		}},
		{"new group on an empty partition starts at its next offset", 4, []line{
			{create("t", 1), isTrue},
			{join("t", "g", "m"), owns(0)},
			{poll("t", "g", "m", 1), delivers()},
			{publish("t", 0, "a"), atOffset(0)},
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 0, "a"))},
		}},
		{"new group with no trims starts at 0", 4, []line{
			{create("t", 1), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{join("t", "g", "m"), owns(0)},
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 0, "a"))},
		}},
		{"new group starts at the log start after trims", 4, []line{
			{create("t", 1), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{publish("t", 0, "c"), atOffset(2)},
			{join("t", "g1", "m"), owns(0)},
			{poll("t", "g1", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g1", "m", 0, 0), isTrue},
			{poll("t", "g1", "m", 1), delivers(rec("t", 0, 1, "b"))},
			{ack("t", "g1", "m", 0, 1), isTrue}, // log start is now 2
			{join("t", "g2", "m"), owns(0)},
			{poll("t", "g2", "m", 1), delivers(rec("t", 0, 2, "c"))},
		}},
		{"new group on a partition emptied by trims starts at its next offset", 4, []line{
			{create("t", 1), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{join("t", "g1", "m"), owns(0)},
			{poll("t", "g1", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g1", "m", 0, 0), isTrue},
			{poll("t", "g1", "m", 1), delivers(rec("t", 0, 1, "b"))},
			{ack("t", "g1", "m", 0, 1), isTrue},
			{join("t", "g2", "m"), owns(0)},
			{poll("t", "g2", "m", 1), delivers()},
			{publish("t", 0, "c"), atOffset(2)},
			{poll("t", "g2", "m", 1), delivers(rec("t", 0, 2, "c"))},
		}},
		{"new group starts at the log start, not at another group's position", 4, []line{
			{create("t", 1), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{join("t", "slow", "m"), owns(0)},
			{join("t", "fast", "m"), owns(0)},
			{poll("t", "fast", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "fast", "m", 0, 0), isTrue}, // slow still at 0: no trim
			{join("t", "new", "m"), owns(0)},
			{poll("t", "new", "m", 1), delivers(rec("t", 0, 0, "a"))},
		}},
		{"each partition starts at its own log start", 4, []line{
			{create("t", 2), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{publish("t", 1, "c"), atOffset(0)},
			{join("t", "g1", "m"), owns(0, 1)},
			{poll("t", "g1", "m", 64), delivers(rec("t", 0, 0, "a"), rec("t", 1, 0, "c"))},
			{ack("t", "g1", "m", 0, 0), isTrue},
			{join("t", "g2", "m"), owns(0, 1)},
			{poll("t", "g2", "m", 64), delivers(rec("t", 0, 1, "b"), rec("t", 1, 0, "c"))},
		}},
		{"groups are per topic", 4, []line{
			{create("t", 1), isTrue},
			{create("u", 1), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{join("t", "g", "m"), owns(0)},
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g", "m", 0, 0), isTrue},
			{leave("u", "g", "m"), isFalse},
			{join("u", "g", "n"), owns(0)},
			{join("t", "g", "m"), owns(0)}, // n is not a member on t
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			play(t, newBroker(t, tt.capacity), tt.script)
		})
	}
}

func TestRule8Leave(t *testing.T) {
	tests := []struct {
		name     string
		capacity int32
		script   []line
	}{
		{"absent group is false", 4, []line{
			{create("t", 1), isTrue},
			{leave("t", "g", "m"), isFalse},
			{join("t", "h", "m"), owns(0)},
			{leave("t", "g", "m"), isFalse},
		}},
		{"absent member is false", 4, []line{
			{create("t", 1), isTrue},
			{join("t", "g", "a"), owns(0)},
			{leave("t", "g", "b"), isFalse},
			{join("t", "g", "a"), owns(0)},
		}},
		{"present member is true once", 4, []line{
			{create("t", 1), isTrue},
			{join("t", "g", "a"), owns(0)},
			{leave("t", "g", "a"), isTrue},
			{leave("t", "g", "a"), isFalse},
		}},
		{"remaining members take over", 4, []line{
			{create("t", 3), isTrue},
			{join("t", "g", "a"), owns(0, 1, 2)},
			{join("t", "g", "b"), owns(1)},
			{join("t", "g", "c"), owns(2)},
			{leave("t", "g", "a"), isTrue},
			{join("t", "g", "b"), owns(0, 2)},
			{join("t", "g", "c"), owns(1)},
		}},
		{"member-less group keeps its committed offsets", 4, []line{
			{create("t", 1), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{join("t", "g", "m"), owns(0)},
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g", "m", 0, 0), isTrue},
			{leave("t", "g", "m"), isTrue},
			{poll("t", "g", "m", 1), delivers()},
			{join("t", "g", "other"), owns(0)},
			{poll("t", "g", "other", 1), delivers(rec("t", 0, 1, "b"))},
		}},
		{"member-less group counts for retention", 2, []line{
			{create("t", 1), isTrue},
			{join("t", "idle", "x"), owns(0)},
			{leave("t", "idle", "x"), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{join("t", "g", "m"), owns(0)},
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g", "m", 0, 0), isTrue},
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 1, "b"))},
			{ack("t", "g", "m", 0, 1), isTrue},
			{publish("t", 0, "c"), atOffset(-1)},
			{join("t", "idle", "x"), owns(0)},
			{poll("t", "idle", "x", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "idle", "x", 0, 0), isTrue},
			{publish("t", 0, "c"), atOffset(2)},
			{publish("t", 0, "d"), atOffset(-1)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			play(t, newBroker(t, tt.capacity), tt.script)
		})
	}
}

func TestRule9Rebalance(t *testing.T) {
	// Three partitions with two records each; a owns all three and has
	// each partition's first record in flight.
	setup := []line{
		{create("t", 3), isTrue},
		{publish("t", 0, "a0"), atOffset(0)},
		{publish("t", 0, "a1"), atOffset(1)},
		{publish("t", 1, "b0"), atOffset(0)},
		{publish("t", 1, "b1"), atOffset(1)},
		{publish("t", 2, "c0"), atOffset(0)},
		{publish("t", 2, "c1"), atOffset(1)},
		{join("t", "g", "a"), owns(0, 1, 2)},
		{poll("t", "g", "a", 64), delivers(rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0"))},
	}
	tests := []struct {
		name   string
		script []line
	}{
		{"moved partition loses its in-flight delivery", []line{
			{join("t", "g", "b"), owns(1)},
			{ack("t", "g", "a", 1, 0), isFalse},
			{retry("t", "g", "a", 1, 0), isFalse},
			{poll("t", "g", "b", 64), delivers(rec("t", 1, 0, "b0")).tries(2)},
			{ack("t", "g", "b", 1, 0), isTrue},
			{poll("t", "g", "b", 64), delivers(rec("t", 1, 1, "b1")).tries(1)},
		}},
		{"kept partitions keep their in-flight deliveries", []line{
			{join("t", "g", "b"), owns(1)},
			{poll("t", "g", "a", 64), delivers()},
			{ack("t", "g", "a", 0, 0), isTrue},
			{retry("t", "g", "a", 2, 0), isTrue},
			{poll("t", "g", "a", 64), delivers(rec("t", 0, 1, "a1"), rec("t", 2, 0, "c0")).tries(1, 2)},
		}},
		{"moved back on leave, the delivery is lost again", []line{
			{join("t", "g", "b"), owns(1)},
			{poll("t", "g", "b", 64), delivers(rec("t", 1, 0, "b0"))},
			{leave("t", "g", "b"), isTrue},
			{ack("t", "g", "b", 1, 0), isFalse},
			{poll("t", "g", "a", 64), delivers(rec("t", 1, 0, "b0"))},
			{ack("t", "g", "a", 1, 0), isTrue},
			{ack("t", "g", "a", 0, 0), isTrue}, // never moved
		}},
		{"moved partition keeps its committed offset", []line{
			{ack("t", "g", "a", 1, 0), isTrue},
			{join("t", "g", "b"), owns(1)},
			{poll("t", "g", "b", 64), delivers(rec("t", 1, 1, "b1"))},
		}},
		{"a third member moves only some partitions", []line{
			{join("t", "g", "b"), owns(1)}, // a: 0 2, b: 1
			{poll("t", "g", "b", 64), delivers(rec("t", 1, 0, "b0"))},
			{join("t", "g", "c"), owns(2)}, // a: 0, b: 1, c: 2
			{ack("t", "g", "a", 0, 0), isTrue},
			{ack("t", "g", "b", 1, 0), isTrue},
			{ack("t", "g", "a", 2, 0), isFalse},
			{poll("t", "g", "c", 64), delivers(rec("t", 2, 0, "c0"))},
		}},
		{"last member leaving loses every delivery", []line{
			{leave("t", "g", "a"), isTrue},
			{join("t", "g", "a"), owns(0, 1, 2)},
			{ack("t", "g", "a", 0, 0), isFalse},
			{poll("t", "g", "a", 64), delivers(rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0"))},
		}},
		{"committed offsets survive the last member leaving and rejoining", []line{
			{ack("t", "g", "a", 0, 0), isTrue},
			{ack("t", "g", "a", 1, 0), isTrue},
			{leave("t", "g", "a"), isTrue},
			{join("t", "g", "a"), owns(0, 1, 2)},
			{poll("t", "g", "a", 64), delivers(rec("t", 0, 1, "a1"), rec("t", 1, 1, "b1"), rec("t", 2, 0, "c0"))},
		}},
		{"joining twice is no rebalance", []line{
			{join("t", "g", "a"), owns(0, 1, 2)},
			{poll("t", "g", "a", 64), delivers()},
			{ack("t", "g", "a", 1, 0), isTrue},
		}},
		{"leaving when absent is no rebalance", []line{
			{leave("t", "g", "b"), isFalse},
			{ack("t", "g", "a", 1, 0), isTrue},
		}},
		{"other groups are untouched", []line{
			{join("t", "h", "z"), owns(0, 1, 2)},
			{poll("t", "h", "z", 64), delivers(rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0"))},
			{join("t", "g", "b"), owns(1)},
			{ack("t", "h", "z", 1, 0), isTrue},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBroker(t, 4)
			play(t, b, setup)
			play(t, b, tt.script)
		})
	}
}

func TestRule10Poll(t *testing.T) {
	// Records published in reverse partition order.
	setup := []line{
		{create("t", 3), isTrue},
		{publish("t", 2, "c0"), atOffset(0)},
		{publish("t", 1, "b0"), atOffset(0)},
		{publish("t", 0, "a0"), atOffset(0)},
		{publish("t", 0, "a1"), atOffset(1)},
		{join("t", "g", "m"), owns(0, 1, 2)},
	}
	tests := []struct {
		name   string
		script []line
	}{
		{"ascending partition order", []line{
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0"))},
		}},
		{"maxRecords limits, lowest partitions first", []line{
			{poll("t", "g", "m", 2), delivers(rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"))},
			{poll("t", "g", "m", 2), delivers(rec("t", 2, 0, "c0"))},
			{poll("t", "g", "m", 2), delivers()},
		}},
		{"maxRecords 1", []line{
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 0, "a0"))},
			{poll("t", "g", "m", 1), delivers(rec("t", 1, 0, "b0"))},
			{poll("t", "g", "m", 1), delivers(rec("t", 2, 0, "c0"))},
			{poll("t", "g", "m", 1), delivers()},
		}},
		{"one in-flight delivery per partition", []line{
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0"))},
			{poll("t", "g", "m", 64), delivers()},
			{ack("t", "g", "m", 0, 0), isTrue},
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 1, "a1"))},
		}},
		{"in-flight partitions are skipped without counting", []line{
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 0, "a0"))},
			{poll("t", "g", "m", 1), delivers(rec("t", 1, 0, "b0"))},
			{ack("t", "g", "m", 0, 0), isTrue},
			{poll("t", "g", "m", 2), delivers(rec("t", 0, 1, "a1"), rec("t", 2, 0, "c0"))},
		}},
		{"nothing eligible once consumed", []line{
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0"))},
			{ack("t", "g", "m", 1, 0), isTrue},
			{ack("t", "g", "m", 2, 0), isTrue},
			{poll("t", "g", "m", 64), delivers()},
			{publish("t", 2, "c1"), atOffset(1)},
			{poll("t", "g", "m", 64), delivers(rec("t", 2, 1, "c1"))},
		}},
		{"absent group", []line{
			{poll("t", "nog", "m", 64), delivers()},
		}},
		{"absent member", []line{
			{poll("t", "g", "nobody", 64), delivers()},
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0"))},
		}},
		{"member owning nothing", []line{
			{join("t", "g", "n"), owns(1)},
			{join("t", "g", "o"), owns(2)},
			{join("t", "g", "p"), owns()},
			{poll("t", "g", "p", 64), delivers()},
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 0, "a0"))},
		}},
		{"only the member's own partitions", []line{
			{join("t", "g", "n"), owns(1)},
			{poll("t", "g", "n", 64), delivers(rec("t", 1, 0, "b0"))},
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 0, "a0"), rec("t", 2, 0, "c0"))},
		}},
		{"groups poll independently", []line{
			{poll("t", "g", "m", 64), delivers(rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0"))},
			{join("t", "h", "m"), owns(0, 1, 2)},
			{poll("t", "h", "m", 64), delivers(rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0"))},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBroker(t, 4)
			play(t, b, setup)
			play(t, b, tt.script)
		})
	}

	t.Run("maxRecords 64 over 64 partitions", func(t *testing.T) {
		b := newBroker(t, 1)
		play(t, b, []line{{create("t", 64), isTrue}})
		var want []engine.Record
		for p := int32(63); p >= 0; p-- {
			play(t, b, []line{{publish("t", p, fmt.Sprint(p)), atOffset(0)}})
		}
		for p := range int32(64) {
			want = append(want, rec("t", p, 0, fmt.Sprint(p)))
		}
		play(t, b, []line{
			{join("t", "g", "m"), result{Parts: func() []int32 {
				ps := make([]int32, 64)
				for i := range ps {
					ps[i] = int32(i)
				}
				return ps
			}()}},
			{poll("t", "g", "m", 63), delivers(want[:63]...)},
			{poll("t", "g", "m", 64), delivers(want[63])},
			{retry("t", "g", "m", 5, 0), isTrue},
			{retry("t", "g", "m", 63, 0), isTrue},
			{poll("t", "g", "m", 64), delivers(want[5], want[63])},
		})
	})
}

// TestRule10PollEmptyIsNotNil checks the "empty result, no error" cases
// directly: the slice is empty and non-nil.
func TestRule10PollEmptyIsNotNil(t *testing.T) {
	b := build(t, 4, []step{create("t", 2), join("t", "g", "m"), publish("t", 0, "a"), poll("t", "g", "m", 64)})
	for _, c := range []step{
		poll("t", "nog", "m", 64), // absent group
		poll("t", "g", "n", 64),   // absent member
		poll("t", "g", "m", 64),   // partition 0 in flight, partition 1 empty
	} {
		got, err := b.Poll(c.Topic, c.Group, c.Member, c.N)
		require.NoError(t, err, "%v", c)
		assert.NotNil(t, got, "%v", c)
		assert.Empty(t, got, "%v", c)
	}
}

func TestRule13Retention(t *testing.T) {
	tests := []struct {
		name     string
		capacity int32
		script   []line
	}{
		{"no groups: the partition fills up and no offset is used up", 3, []line{
			{create("t", 1), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{publish("t", 0, "c"), atOffset(2)},
			{publish("t", 0, "d"), atOffset(-1)},
			{publish("t", 0, "e"), atOffset(-1)},
			{join("t", "g", "m"), owns(0)},
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g", "m", 0, 0), isTrue},
			{publish("t", 0, "f"), atOffset(3)}, // not 5
			{publish("t", 0, "g"), atOffset(-1)},
		}},
		{"trimmed only after every group acked, member-less included", 2, []line{
			{create("t", 1), isTrue},
			{join("t", "g1", "m"), owns(0)},
			{join("t", "g2", "m"), owns(0)},
			{join("t", "idle", "m"), owns(0)},
			{leave("t", "idle", "m"), isTrue},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{publish("t", 0, "c"), atOffset(-1)},
			{poll("t", "g1", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g1", "m", 0, 0), isTrue},
			{poll("t", "g1", "m", 1), delivers(rec("t", 0, 1, "b"))},
			{ack("t", "g1", "m", 0, 1), isTrue},
			{publish("t", 0, "c"), atOffset(-1)},
			{poll("t", "g2", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g2", "m", 0, 0), isTrue},
			{poll("t", "g2", "m", 1), delivers(rec("t", 0, 1, "b"))},
			{ack("t", "g2", "m", 0, 1), isTrue},
			{publish("t", 0, "c"), atOffset(-1)}, // idle has acked nothing
			{join("t", "idle", "m"), owns(0)},
			{poll("t", "idle", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "idle", "m", 0, 0), isTrue},
			{publish("t", 0, "c"), atOffset(2)}, // one slot freed
			{publish("t", 0, "d"), atOffset(-1)},
			{poll("t", "idle", "m", 1), delivers(rec("t", 0, 1, "b"))},
			{ack("t", "idle", "m", 0, 1), isTrue},
			{publish("t", 0, "d"), atOffset(3)},
		}},
		{"the slowest group decides, whatever the order of acks", 3, []line{
			{create("t", 1), isTrue},
			{join("t", "g1", "m"), owns(0)},
			{join("t", "g2", "m"), owns(0)},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{publish("t", 0, "c"), atOffset(2)},
			{poll("t", "g2", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g2", "m", 0, 0), isTrue},
			{poll("t", "g2", "m", 1), delivers(rec("t", 0, 1, "b"))},
			{ack("t", "g2", "m", 0, 1), isTrue},
			{publish("t", 0, "d"), atOffset(-1)},
			{poll("t", "g1", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g1", "m", 0, 0), isTrue},
			{publish("t", 0, "d"), atOffset(3)},
			{publish("t", 0, "e"), atOffset(-1)},
			{poll("t", "g1", "m", 1), delivers(rec("t", 0, 1, "b"))},
			{ack("t", "g1", "m", 0, 1), isTrue},
			{publish("t", 0, "e"), atOffset(4)},
		}},
		{"a group created after trims starts at the log start and holds it", 2, []line{
			{create("t", 1), isTrue},
			{join("t", "g1", "m"), owns(0)},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 0, "b"), atOffset(1)},
			{poll("t", "g1", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g1", "m", 0, 0), isTrue}, // log is [1]
			{join("t", "g2", "m"), owns(0)},     // starts at 1
			{poll("t", "g1", "m", 1), delivers(rec("t", 0, 1, "b"))},
			{ack("t", "g1", "m", 0, 1), isTrue}, // g2 still needs 1
			{publish("t", 0, "c"), atOffset(2)},
			{publish("t", 0, "d"), atOffset(-1)},
			{poll("t", "g2", "m", 1), delivers(rec("t", 0, 1, "b"))},
			{ack("t", "g2", "m", 0, 1), isTrue},
			{publish("t", 0, "d"), atOffset(3)},
		}},
		{"retention is per partition", 1, []line{
			{create("t", 2), isTrue},
			{join("t", "g", "m"), owns(0, 1)},
			{publish("t", 0, "a"), atOffset(0)},
			{publish("t", 1, "b"), atOffset(0)},
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g", "m", 0, 0), isTrue},
			{publish("t", 0, "c"), atOffset(1)},
			{publish("t", 1, "d"), atOffset(-1)},
		}},
		{"retention is per topic", 1, []line{
			{create("t", 1), isTrue},
			{create("u", 1), isTrue},
			{join("u", "slow", "m"), owns(0)}, // a group of u, not of t
			{join("t", "g", "m"), owns(0)},
			{publish("t", 0, "a"), atOffset(0)},
			{poll("t", "g", "m", 1), delivers(rec("t", 0, 0, "a"))},
			{ack("t", "g", "m", 0, 0), isTrue},
			{publish("t", 0, "b"), atOffset(1)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			play(t, newBroker(t, tt.capacity), tt.script)
		})
	}
}

// TestReturnedSlicesAreCallers: changing a returned slice never changes the
// broker, and results do not share memory.
func TestReturnedSlicesAreCallers(t *testing.T) {
	b := build(t, 4, []step{
		create("t", 3),
		publish("t", 0, "a0"), publish("t", 0, "a1"), publish("t", 1, "b0"), publish("t", 2, "c0"),
	})

	parts, err := b.Join("t", "g", "m")
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1, 2}, parts)
	parts[0], parts[1], parts[2] = 2, 9, -1
	_ = append(parts[:1], 7, 7) // writes within capacity, if any

	recs, err := b.Poll("t", "g", "m", 64)
	require.NoError(t, err)
	want := []engine.Record{rec("t", 0, 0, "a0"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0")}
	require.Equal(t, want, coreRecords(recs))
	requireAttempts(t, recs, 1, 1, 1)
	for i := range recs {
		recs[i].Topic, recs[i].Partition, recs[i].Offset, recs[i].Payload = "x", 2, 99, "changed"
		recs[i].Attempt = 42
	}
	_ = append(recs[:1], engine.Record{Topic: "junk"})

	// The broker's state is what it was: ownership, in-flight deliveries,
	// payloads.
	play(t, b, []line{
		{join("t", "g", "m"), owns(0, 1, 2)},
		{ack("t", "g", "m", 0, 0), isTrue},
		{retry("t", "g", "m", 1, 0), isTrue},
		{retry("t", "g", "m", 2, 0), isTrue},
	})
	again, err := b.Poll("t", "g", "m", 64)
	require.NoError(t, err)
	require.Equal(t, []engine.Record{rec("t", 0, 1, "a1"), rec("t", 1, 0, "b0"), rec("t", 2, 0, "c0")}, coreRecords(again))
	requireAttempts(t, again, 1, 2, 2)

	// Two results share nothing.
	again2, err := b.Join("t", "g", "m")
	require.NoError(t, err)
	again2[0] = 42
	third, err := b.Join("t", "g", "m")
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 2}, third)
	assert.Equal(t, "changed", recs[2].Payload, "the first result is still the caller's own")
	again[0].Payload = "mine"
	require.NoError(t, func() error {
		_, err := b.Retry("t", "g", "m", 0, 1)
		return err
	}())
	fourth, err := b.Poll("t", "g", "m", 64)
	require.NoError(t, err)
	assert.Equal(t, []engine.Record{rec("t", 0, 1, "a1")}, coreRecords(fourth))
	requireAttempts(t, fourth, 2)
	assert.Equal(t, "mine", again[0].Payload)
	assert.Empty(t, cmp.Diff(want[0], rec("t", 0, 0, "a0")))
}
