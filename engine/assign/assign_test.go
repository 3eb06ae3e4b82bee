package assign_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/f91dcac0/tributary/engine/assign"
)

// TestBuiltins checks each built-in assignor on hand-checked tables, the
// SPEC rule 18 examples among them. wparts[i] lists the partitions of
// members[i].
func TestBuiltins(t *testing.T) {
	ab, abc, abcde := []string{"a", "b"}, []string{"a", "b", "c"}, []string{"a", "b", "c", "d", "e"}
	tests := []struct {
		name     string
		a        assign.Assignor
		members  []string
		previous []string
		wparts   [][]int
	}{
		// RoundRobin: p -> members[p mod n] (rules 6, 18); previous is ignored.
		{"rr/spec P7 n2", assign.RoundRobin, ab, none(7), [][]int{{0, 2, 4, 6}, {1, 3, 5}}},
		{"rr/ignores previous", assign.RoundRobin, ab, owners("bbbbbbb"), [][]int{{0, 2, 4, 6}, {1, 3, 5}}},
		{"rr/P1 n1", assign.RoundRobin, []string{"a"}, none(1), [][]int{{0}}},
		{"rr/P1 n3", assign.RoundRobin, abc, none(1), [][]int{{0}, {}, {}}},
		{"rr/n>P", assign.RoundRobin, abcde, none(2), [][]int{{0}, {1}, {}, {}, {}}},
		{"rr/P6 n3", assign.RoundRobin, abc, none(6), [][]int{{0, 3}, {1, 4}, {2, 5}}},
		{"rr/P64 n3", assign.RoundRobin, abc, none(64), [][]int{span(0, 63, 3), span(1, 62, 3), span(2, 62, 3)}},
		{"rr/P64 n1", assign.RoundRobin, []string{"a"}, none(64), [][]int{span(0, 63, 1)}},

		// Range: contiguous blocks, the first P mod n members take one more.
		{"range/spec P7 n2", assign.Range, ab, none(7), [][]int{{0, 1, 2, 3}, {4, 5, 6}}},
		{"range/ignores previous", assign.Range, ab, owners("bbbbaaa"), [][]int{{0, 1, 2, 3}, {4, 5, 6}}},
		{"range/P1 n1", assign.Range, []string{"a"}, none(1), [][]int{{0}}},
		{"range/P1 n3", assign.Range, abc, none(1), [][]int{{0}, {}, {}}},
		{"range/n>P", assign.Range, abcde, none(2), [][]int{{0}, {1}, {}, {}, {}}},
		{"range/P8 n3", assign.Range, abc, none(8), [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7}}},
		{"range/P6 n3", assign.Range, abc, none(6), [][]int{{0, 1}, {2, 3}, {4, 5}}},
		{"range/P64 n3", assign.Range, abc, none(64), [][]int{span(0, 21, 1), span(22, 42, 1), span(43, 63, 1)}},

		// Sticky: balanced, then as many partitions kept as balance allows.
		{"sticky/new group P7 n2", assign.Sticky, ab, none(7), [][]int{{0, 1, 2, 3}, {4, 5, 6}}},
		// c joins a round-robin pair: q=2, r=1; a (4 before) gets the 3,
		// each releases its highest partition to c; 2 moved (the minimum:
		// c must get 2).
		{"sticky/join", assign.Sticky, abc, owners("abababa"), [][]int{{0, 2, 4}, {1, 3}, {5, 6}}},
		// c leaves: q=3, r=1, nobody had 4 so a (member order) gets 4;
		// c's partitions 5, 6 are dealt in order to a then b.
		{"sticky/leave", assign.Sticky, ab, owners("aaabbcc"), [][]int{{0, 1, 2, 5}, {3, 4, 6}}},
		// Tie-break by larger previous count: q=2, r=1, b had 3 and c 4,
		// so c gets 3 and b releases its highest (2) to a.
		{"sticky/larger count first", assign.Sticky, abc, owners("bbbcccc"), [][]int{{2, 6}, {0, 1}, {3, 4, 5}}},
		// Departed (x) and unowned (-) partitions are dealt in order.
		{"sticky/departed and unowned", assign.Sticky, ab, owners("x-bxa"), [][]int{{0, 1, 4}, {2, 3}}},
		{"sticky/unchanged when balanced", assign.Sticky, abc, owners("cabbcaa"), [][]int{{1, 5, 6}, {2, 3}, {0, 4}}},
		// n > P: the members that owned something keep it.
		{"sticky/n>P keeps", assign.Sticky, []string{"a", "b", "c", "d"}, owners("dc"), [][]int{{}, {}, {1}, {0}}},
		{"sticky/n>P new", assign.Sticky, []string{"a", "b", "c", "d"}, none(2), [][]int{{0}, {1}, {}, {}}},
		{"sticky/P1 new", assign.Sticky, abc, none(1), [][]int{{0}, {}, {}}},
		{"sticky/P1 kept", assign.Sticky, abc, owners("c"), [][]int{{}, {}, {0}}},
		{"sticky/P1 departed", assign.Sticky, abc, owners("z"), [][]int{{0}, {}, {}}},
		{"sticky/P64 n1", assign.Sticky, []string{"a"}, none(64), [][]int{span(0, 63, 1)}},
		{"sticky/P64 n3 from rr", assign.Sticky, abc, assign.RoundRobin.Assign(abc, none(64)), [][]int{span(0, 63, 3), span(1, 62, 3), span(2, 62, 3)}},
		// b leaves a round-robin trio of 64: a keeps 22, c keeps 21 and gets
		// 11 of b's, a gets the other 10 (q=32, r=0).
		{"sticky/P64 leave", assign.Sticky, []string{"a", "c"}, assign.RoundRobin.Assign(abc, none(64)),
			[][]int{
				slices.Sorted(slices.Values(append(span(0, 63, 3), span(1, 28, 3)...))),
				slices.Sorted(slices.Values(append(span(2, 62, 3), span(31, 61, 3)...))),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owner := tt.a.Assign(tt.members, tt.previous)
			if diff := cmp.Diff(tt.wparts, parts(tt.members, owner)); diff != "" {
				t.Errorf("%s.Assign(%q, %q) = %q, partitions per member (-want +got):\n%s", tt.a.Name(), tt.members, tt.previous, owner, diff)
			}
			if err := assign.Validate(tt.members, len(tt.previous), owner); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ab := []string{"a", "b"}
	tests := []struct {
		name       string
		members    []string
		partitions int
		owner      []string
		wok        bool
		wmsg       string
	}{
		{"valid", ab, 3, owners("aba"), true, ""},
		{"valid one member", []string{"a"}, 1, owners("a"), true, ""},
		{"short", ab, 3, owners("ab"), false, "tributary: invalid assignment: 2 owners for 3 partitions"},
		{"long", ab, 1, owners("ab"), false, "tributary: invalid assignment: 2 owners for 1 partitions"},
		{"nil", ab, 2, nil, false, "tributary: invalid assignment: 0 owners for 2 partitions"},
		{"unowned", ab, 3, owners("a-b"), false, "tributary: invalid assignment: partition 1 has no owner"},
		{"unknown", ab, 3, owners("abc"), false, `tributary: invalid assignment: partition 2: owner "c" is not a member`},
		{"first fault", ab, 3, owners("zya"), false, `tributary: invalid assignment: partition 0: owner "z" is not a member`},
		{"prefix is not a member", []string{"ab"}, 1, []string{"a"}, false, `tributary: invalid assignment: partition 0: owner "a" is not a member`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := assign.Validate(tt.members, tt.partitions, tt.owner)
			if tt.wok {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, assign.ErrInvalidAssignment) {
				t.Fatalf("Validate = %v, want ErrInvalidAssignment", err)
			}
			if err.Error() != tt.wmsg {
				t.Errorf("Validate = %q, want %q", err, tt.wmsg)
			}
		})
	}
}

func TestMoved(t *testing.T) {
	tests := []struct {
		previous, owner string
		wmoved          int
	}{
		{"a", "a", 0},
		{"a", "b", 1},
		{"-", "a", 1}, // a partition that had no owner gets one
		{"-", "-", 0},
		{"abab", "abab", 0},
		{"abab", "baba", 4},
		{"aabbx", "aabba", 1},
		{"-----", "ababa", 5},
	}
	for _, tt := range tests {
		t.Run(tt.previous+"->"+tt.owner, func(t *testing.T) {
			if got := assign.Moved(owners(tt.previous), owners(tt.owner)); got != tt.wmoved {
				t.Errorf("Moved = %d, want %d", got, tt.wmoved)
			}
		})
	}
	t.Run("length mismatch panics", func(t *testing.T) {
		mustPanic(t, func() { assign.Moved(owners("ab"), owners("a")) })
	})
}

func TestLookupNames(t *testing.T) {
	if got, want := assign.Names(), []string{"RoundRobin", "Range", "Sticky"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}
	names := assign.Names()
	names[0] = "changed"
	if assign.Names()[0] != "RoundRobin" {
		t.Fatal("Names returned a shared slice")
	}
	tests := []struct {
		name string
		wa   assign.Assignor
		wok  bool
	}{
		{"RoundRobin", assign.RoundRobin, true},
		{"Range", assign.Range, true},
		{"Sticky", assign.Sticky, true},
		{"sticky", nil, false},
		{"round-robin", nil, false},
		{"roundrobin", nil, false},
		{"", nil, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.name), func(t *testing.T) {
			a, ok := assign.Lookup(tt.name)
			if a != tt.wa || ok != tt.wok {
				t.Errorf("Lookup(%q) = %v, %v; want %v, %v", tt.name, a, ok, tt.wa, tt.wok)
			}
			if ok && a.Name() != tt.name {
				t.Errorf("Lookup(%q).Name() = %q", tt.name, a.Name())
			}
		})
	}
}

// TestRunRejects checks that Run turns every faulty answer of a user's
// assignor into ErrInvalidAssignment and returns no owners.
func TestRunRejects(t *testing.T) {
	members, previous := []string{"a", "b"}, owners("ab-")
	tests := []struct {
		name string
		a    assign.Assignor
		wmsg string
	}{
		{"short", assignorFunc(func(_, _ []string) []string { return owners("ab") }),
			"tributary: invalid assignment: 2 owners for 3 partitions"},
		{"long", assignorFunc(func(_, _ []string) []string { return owners("abab") }),
			"tributary: invalid assignment: 4 owners for 3 partitions"},
		{"nil", assignorFunc(func(_, _ []string) []string { return nil }),
			"tributary: invalid assignment: 0 owners for 3 partitions"},
		{"unknown member", assignorFunc(func(_, _ []string) []string { return owners("abc") }),
			`tributary: invalid assignment: partition 2: owner "c" is not a member`},
		{"departed member", assignorFunc(func(_, _ []string) []string { return []string{"a", "b", "gone"} }),
			`tributary: invalid assignment: partition 2: owner "gone" is not a member`},
		{"empty owner", assignorFunc(func(_, _ []string) []string { return owners("a-b") }),
			"tributary: invalid assignment: partition 1 has no owner"},
		{"panics", assignorFunc(func(_, _ []string) []string { panic("boom") }),
			"tributary: invalid assignment: assignor panicked: boom"},
		{"panics with error", assignorFunc(func(m, _ []string) []string { return []string{m[5]} }),
			"tributary: invalid assignment: assignor panicked: runtime error: index out of range [5] with length 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owner, err := assign.Run(tt.a, members, previous)
			if !errors.Is(err, assign.ErrInvalidAssignment) {
				t.Fatalf("Run = %q, %v; want ErrInvalidAssignment", owner, err)
			}
			if owner != nil {
				t.Errorf("Run returned owners %q with an error", owner)
			}
			if err.Error() != tt.wmsg {
				t.Errorf("Run error = %q, want %q", err, tt.wmsg)
			}
		})
	}
}

// TestRunIsolates checks that an assignor cannot reach the caller's slices:
// not by modifying its inputs, not by appending into them, and not by
// modifying its answer after Run returned.
func TestRunIsolates(t *testing.T) {
	members, previous := []string{"a", "b", "c"}, owners("abc-")
	wmembers, wprevious := slices.Clone(members), slices.Clone(previous)
	var retained []string
	vandal := assignorFunc(func(m, p []string) []string {
		owner := assign.RoundRobin.Assign(m, p)
		m[0], p[0] = "zz", "zz"
		_ = append(m[:1], "yy", "yy")
		_ = append(p[:1], "yy", "yy")
		clear(m[1:])
		clear(p[1:])
		retained = owner
		return owner
	})
	owner, err := assign.Run(vandal, members, previous)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if !slices.Equal(members, wmembers) || !slices.Equal(previous, wprevious) {
		t.Errorf("caller's slices changed: members %q previous %q; want %q %q", members, previous, wmembers, wprevious)
	}
	wowner := owners("abca")
	retained[0] = "zz"
	if !slices.Equal(owner, wowner) {
		t.Errorf("Run's answer %q changed with the assignor's slice; want %q", owner, wowner)
	}
}

// TestRunBuiltins checks that Run agrees with each built-in's Assign.
func TestRunBuiltins(t *testing.T) {
	members, previous := ids(3), []string{"m02", "", "m00", "gone", "m02"}
	for _, a := range builtins {
		got, err := assign.Run(a, members, previous)
		if err != nil {
			t.Fatalf("Run(%s) = %v", a.Name(), err)
		}
		if want := a.Assign(members, previous); !slices.Equal(got, want) {
			t.Errorf("Run(%s) = %q, Assign = %q", a.Name(), got, want)
		}
	}
}

// TestRunPreconditions checks that Run panics on caller bugs instead of
// returning a wrong answer.
func TestRunPreconditions(t *testing.T) {
	tests := []struct {
		name     string
		a        assign.Assignor
		members  []string
		previous []string
	}{
		{"nil assignor", nil, []string{"a"}, none(1)},
		{"no members", assign.RoundRobin, nil, none(1)},
		{"unsorted", assign.RoundRobin, []string{"b", "a"}, none(1)},
		{"duplicate", assign.RoundRobin, []string{"a", "a"}, none(1)},
		{"empty id", assign.RoundRobin, []string{"", "a"}, none(1)},
		{"no partitions", assign.RoundRobin, []string{"a"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustPanic(t, func() { _, _ = assign.Run(tt.a, tt.members, tt.previous) })
		})
	}
}

func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Error("did not panic")
		}
	}()
	f()
}
