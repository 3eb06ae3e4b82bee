package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/engine/assign"
)

// The program names each assignor as the engine does: the word a command
// takes is the assignor's Name(), and every output (create consumer group,
// create consumer, show consumer group, set consumer group rebalancing)
// prints that same word, which is also what the cluster's Describe holds.
func TestAssignorNamesAgree(t *testing.T) {
	for i, name := range assign.Names() {
		t.Run(name, func(t *testing.T) {
			s, out := testSession(t, nil)
			mustExec(t, s, "create topic t String 2")
			group := fmt.Sprintf("g%d", i)
			for _, line := range []string{
				"create consumer group " + group + " t " + name,
				"create consumer " + group + " c",
				"show consumer group " + group,
				"set consumer group rebalancing " + group + " " + name,
			} {
				out.Reset()
				mustExec(t, s, line)
				if !strings.Contains(out.String(), name) {
					t.Errorf("%s printed no %q:\n%s", line, name, out)
				}
				for _, other := range []string{"round-robin", "range", "sticky"} {
					if strings.Contains(out.String(), other) {
						t.Errorf("%s printed %q, a second name of an assignor:\n%s", line, other, out)
					}
				}
			}
			d, err := s.c.Describe("t")
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Groups) != 1 || d.Groups[0].Assignor != name {
				t.Errorf("Describe's groups = %+v, want one with assignor %q", d.Groups, name)
			}
			if a, ok := assign.Lookup(name); !ok || a.Name() != name {
				t.Errorf("assign.Lookup(%q) = %v, %v", name, a, ok)
			}
		})
	}
	if got, want := len(assign.Names()), len(assignors); got != want {
		t.Errorf("the engine has %d built-in assignors, the program offers %d", got, want)
	}
	for _, a := range []engine.Assignor{engine.RoundRobin, engine.Range, engine.Sticky} {
		if _, err := parseAssignor(a.Name()); err != nil {
			t.Errorf("the program refuses %s by its name: %v", a.Name(), err)
		}
	}
}

// Each create producer strategy word of docs/cli.md makes a producer whose
// printed strategy is its partitioner's Name(), and that printed name is
// accepted back by the program and by tributary.ParsePartitioner: one name
// per partitioner, Key being the program's word for KeyHash.
func TestStrategyNamesAgree(t *testing.T) {
	for _, word := range []string{"Random", "Manual", "RoundRobin", "Key"} {
		t.Run(word, func(t *testing.T) {
			s, out := testSession(t, nil)
			mustExec(t, s, "create producer p String "+word)
			_, printed, ok := strings.Cut(strings.TrimSpace(out.String()), "strategy ")
			if !ok {
				t.Fatalf("create producer printed no strategy: %q", out)
			}
			pt, err := tributary.ParsePartitioner(printed)
			if err != nil || pt.Name() != printed {
				t.Fatalf("printed strategy %q is no library partitioner's name: %v, %v", printed, pt, err)
			}
			want, err := parseStrategy(word)
			if err != nil || want.Name() != printed {
				t.Errorf("strategy %s printed as %q, its partitioner is named %q (%v)", word, printed, want.Name(), err)
			}
			out.Reset()
			mustExec(t, s, "create producer q String "+printed)
			if !strings.HasSuffix(strings.TrimSpace(out.String()), "strategy "+printed) {
				t.Errorf("create producer q String %s printed %q", printed, out)
			}
		})
	}
}
