package jetstream_test

// User assignors and the names kept in the state: an assignor that panics
// or answers wrong changes nothing; assignors are registered per group and
// per Backend (a name shared by two assignors, a built-in's name claimed);
// hostile assignor names and payload types are kept exactly or refused.

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// User assignors: a wrong answer changes nothing; a second Backend on the
// same server shares the state but not the process-local registry.
func TestUserAssignors(t *testing.T) {
	b, srv := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 2)
	ma, mb := member(t, bt, "g", "a"), member(t, bt, "g", "b")
	must(ma.Join()).of(t)
	must(mb.Join()).of(t)
	if _, err := b.SetAssignor("t", "g", badAssignor{}); !errors.Is(err, engine.ErrInvalidAssignment) {
		t.Fatalf("bad assignor: %v", err)
	}
	d := must(b.Describe("t")).of(t)
	if d.Groups[0].Assignor != "RoundRobin" || !slices.Equal(mb.Assignment(), []int32{1}) {
		t.Fatalf("changed: %+v", d.Groups[0])
	}
	ok, err := b.SetAssignor("t", "g", firstAssignor{})
	wantBool(t, "SetAssignor", ok, err, true)
	if a := ma.Assignment(); !slices.Equal(a, []int32{0, 1}) {
		t.Fatalf("a = %v", a)
	}
	b2, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	bt2, pt, err := b2.OpenTopic("t")
	if err != nil || pt != "string" {
		t.Fatalf("OpenTopic on a second backend: %v %q", err, pt)
	}
	mc := member(t, bt2, "g", "c")
	if _, err := mc.Join(); !errors.Is(err, jetstream.ErrUnknownAssignor) {
		t.Fatalf("Join with an unregistered assignor: %v", err)
	}
	ok, err = b2.SetAssignor("t", "g", engine.Sticky)
	wantBool(t, "SetAssignor on b2", ok, err, true)
	must(mc.Join()).of(t)
	if a, b, c := ma.Assignment(), mb.Assignment(), mc.Assignment(); len(a)+len(b)+len(c) != 2 || len(a) > 1 || len(b) > 1 || len(c) > 1 {
		t.Fatalf("sticky over 3 members, 2 partitions: a %v b %v c %v", ma.Assignment(), mb.Assignment(), mc.Assignment())
	}
}

func TestAssignors(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 3)
	ma, mb := member(t, bt, "g", "a"), member(t, bt, "g", "b")
	must(ma.Join()).of(t)
	must(mb.Join()).of(t)
	pub(t, bt, 1, "x")
	wantRecs(t, poll(t, mb, 1), rec{1, 0, "x", 1})
	before := stateOf(t, b, "t")
	var nilPtr *funcAssignor
	garbage := map[string]engine.Assignor{
		"panic-assign": panicAssignor{},
		"short":        newAssignor("h-short", func(m, p []string) []string { return []string{m[0]} }),
		"long":         newAssignor("h-long", func(m, p []string) []string { return append(allTo(m[0])(m, p), m[0]) }),
		"nil":          newAssignor("h-nil", func(m, p []string) []string { return nil }),
		"empty-owner":  newAssignor("h-empty", func(m, p []string) []string { return make([]string, len(p)) }),
		"non-member":   newAssignor("h-nonmember", allTo("zz")),
		"alias-input": newAssignor("h-alias", func(m, p []string) []string {
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
	for name, a := range map[string]engine.Assignor{"nil": nil, "typed nil": nilPtr, "fake round-robin": fakeRoundRobin{}} {
		_, err := b.SetAssignor("t", "g", a)
		wantInvalid(t, "SetAssignor "+name, err)
		_, err = b.CreateGroup("t", "g2", a)
		wantInvalid(t, "CreateGroup "+name, err)
		_, err = b.SetAssignor("t", "absent", a) // invalid beats absent
		wantInvalid(t, "SetAssignor absent group "+name, err)
	}
	if _, err := b.SetAssignor("t", "g", panicNameAssignor{}); err == nil {
		t.Errorf("SetAssignor with a panicking Name: no error")
	}
	if _, err := b.CreateGroup("t", "g2", panicNameAssignor{}); err == nil {
		t.Errorf("CreateGroup with a panicking Name: no error")
	}
	wantSame(t, "garbage assignors", before, stateOf(t, b, "t"))
	// The group still works: b holds its delivery.
	ok, err := mb.Ack(1, 0)
	wantBool(t, "Ack after garbage assignors", ok, err, true)

	// A group whose (valid) user assignor goes bad on a later rebalance:
	// the Join fails and changes nothing.
	flaky := newAssignor("h-flaky", func(m, p []string) []string {
		if len(m) > 2 {
			panic("three is a crowd")
		}
		return allTo(m[0])(m, p)
	})
	ok, err = b.SetAssignor("t", "g", flaky)
	wantBool(t, "SetAssignor flaky", ok, err, true)
	before = stateOf(t, b, "t")
	if _, err := member(t, bt, "g", "c").Join(); !errors.Is(err, engine.ErrInvalidAssignment) {
		t.Errorf("Join under a panicking assignor: %v", err)
	}
	if _, err := b.AddPartitions("t", 1); !errors.Is(err, engine.ErrInvalidAssignment) && err != nil {
		t.Errorf("AddPartitions: %v", err)
	}
	after := stateOf(t, b, "t")
	// AddPartitions may legitimately succeed (2 members): compare the
	// first three partitions only if it did.
	if len(after.snap.Partitions) == 3 {
		wantSame(t, "Join under a panicking assignor", before, after)
	}
	if a := ma.Assignment(); len(a) != len(after.snap.Partitions) {
		t.Errorf("a owns %v of %d partitions", a, len(after.snap.Partitions))
	}
}

// Two distinct user assignors with the same Name, on two groups of one
// Backend: each group must keep using its own (rule 18: every rebalance
// uses the group's current assignor), and an invalid call must change
// nothing.
func TestAssignorNameCollision(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 2)
	toA := newAssignor("custom", allTo("a"))
	ok, err := b.CreateGroup("t", "g1", toA)
	wantBool(t, "CreateGroup g1", ok, err, true)
	// A second, broken assignor of the same name on another group: the call
	// fails (ErrInvalidAssignment) and must change nothing.
	broken := newAssignor("custom", func(m, p []string) []string { panic("broken") })
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
func TestAssignorNameShared(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 2)
	ok, err := b.CreateGroup("t", "g1", newAssignor("custom", allTo("a")))
	wantBool(t, "CreateGroup g1", ok, err, true)
	ok, err = b.CreateGroup("t", "g2", newAssignor("custom", allTo("b")))
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

// Hostile assignor names and payload types: kept exactly or refused with a
// clear error, nothing changed.
func TestNamesInState(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 2)
	must(member(t, bt, "g", "a").Join()).of(t)
	for _, name := range []string{"", "a.b.>", "*", "\n", "é☃", strings.Repeat("n", 2<<20)} {
		before := stateOf(t, b, "t")
		ok, err := b.SetAssignor("t", "g", newAssignor(name, allTo("a")))
		if err != nil {
			wantSame(t, fmt.Sprintf("refused assignor name of %d bytes", len(name)), before, stateOf(t, b, "t"))
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
func TestInvalidUTF8Names(t *testing.T) {
	// The state values are JSON, which cannot keep bytes that are not
	// UTF-8: such an assignor name or payload type is refused, changing
	// nothing, rather than kept altered.
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 2)
	must(member(t, bt, "g", "a").Join()).of(t)
	before := must(b.Describe("t")).of(t)
	ok, err := b.SetAssignor("t", "g", newAssignor("\xff", allTo("a")))
	if ok || !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("SetAssignor(name \\xff) = %v, %v; want false, ErrInvalidArgument", ok, err)
	}
	if _, err := b.CreateGroup("t", "h", newAssignor("\xff", allTo("a"))); !errors.Is(err, engine.ErrInvalidArgument) {
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
