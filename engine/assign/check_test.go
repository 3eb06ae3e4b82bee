package assign_test

import (
	"errors"
	"testing"

	"github.com/f91dcac0/tributary/engine/assign"
)

type ptrAssignor struct{ name string }

func (a *ptrAssignor) Name() string                  { return a.name }
func (a *ptrAssignor) Assign(m, p []string) []string { return assign.RoundRobin.Assign(m, p) }

type panicName struct{}

func (panicName) Name() string                  { panic("name boom") }
func (panicName) Assign(m, p []string) []string { return assign.RoundRobin.Assign(m, p) }

func TestIsNil(t *testing.T) {
	var typedNil *ptrAssignor
	for _, c := range []struct {
		name string
		a    assign.Assignor
		w    bool
	}{
		{"nil interface", nil, true},
		{"typed nil pointer", typedNil, true},
		{"pointer", &ptrAssignor{name: "p"}, false},
		{"built-in", assign.Sticky, false},
		{"value type", panicName{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := assign.IsNil(c.a); got != c.w {
				t.Errorf("IsNil = %v, want %v", got, c.w)
			}
		})
	}
}

func TestName(t *testing.T) {
	name, err := assign.Name(assign.Range)
	if err != nil || name != "Range" {
		t.Errorf("Name(Range) = %q, %v; want \"range\", nil", name, err)
	}
	name, err = assign.Name(panicName{})
	if !errors.Is(err, assign.ErrInvalidAssignment) || name != "" {
		t.Errorf("Name(panicking) = %q, %v; want \"\", ErrInvalidAssignment", name, err)
	}
}
