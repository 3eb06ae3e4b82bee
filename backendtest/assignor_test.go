package backendtest_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/backendtest"
	"github.com/f91dcac0/tributary/engine"
)

// brokenAssignor is an Assignor whose methods do what its fields say:
// name (nil: "Broken") answers Name, and assign (nil: RoundRobin's) Assign.
type brokenAssignor struct {
	name   func() string
	assign func(members, previous []string) []string
}

func (a *brokenAssignor) Name() string {
	if a.name == nil {
		return "Broken"
	}
	return a.name()
}

func (a *brokenAssignor) Assign(members, previous []string) []string {
	if a.assign == nil {
		return engine.RoundRobin.Assign(members, previous)
	}
	return a.assign(members, previous)
}

func TestCheckAssignorReportsBrokenAssignors(t *testing.T) {
	shortWait(t, 100*time.Millisecond)
	block := blocked(t)
	var calls atomic.Int64
	// everyOther panics on every second call, from the second.
	everyOther := func(members, previous []string) []string {
		if calls.Add(1)%2 == 0 {
			panic("assign")
		}
		return engine.RoundRobin.Assign(members, previous)
	}
	hugeMember := func(members, _ []string) []string {
		return slices.Repeat([]string{members[0]}, 1<<20)
	}
	// thenHuge answers correctly, then, called again, a huge answer.
	thenHuge := func(members, previous []string) []string {
		if calls.Add(1)%2 == 0 {
			return hugeMember(members, previous)
		}
		return engine.RoundRobin.Assign(members, previous)
	}
	for name, a := range map[string]tributary.Assignor{
		"nil":                         nil,
		"typed nil":                   (*brokenAssignor)(nil),
		"empty name":                  &brokenAssignor{name: func() string { return "" }},
		"name panics":                 &brokenAssignor{name: func() string { panic("name") }},
		"name blocks":                 &brokenAssignor{name: func() string { <-block; return "Broken" }},
		"assign panics":               &brokenAssignor{assign: func([]string, []string) []string { panic("assign") }},
		"assign panics the 2nd time":  &brokenAssignor{assign: everyOther},
		"assign blocks":               &brokenAssignor{assign: func(m, p []string) []string { <-block; return nil }},
		"assign answers huge":         &brokenAssignor{assign: hugeMember},
		"assign answers huge the 2nd": &brokenAssignor{assign: thenHuge},
		"name panics after the first": &brokenAssignor{
			name: func() string {
				if calls.Add(1) > 1 {
					panic("name")
				}
				return "Broken"
			},
			assign: func([]string, []string) []string { return nil },
		},
	} {
		t.Run(name, func(t *testing.T) {
			calls.Store(0)
			wantReported(t, recordedCheck(t, guardWait, func(tb testing.TB) {
				backendtest.CheckAssignor(tb, a)
			}))
		})
	}
	t.Run("built-in", func(t *testing.T) {
		if f := recordedCheck(t, guardWait, func(tb testing.TB) { backendtest.CheckAssignor(tb, engine.Sticky) }); len(f) > 0 {
			t.Errorf("Sticky: %q", f)
		}
	})
}
