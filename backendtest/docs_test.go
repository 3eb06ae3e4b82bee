package backendtest_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/f91dcac0/tributary/backendtest"
)

// The suite's size as README and the docs state it: the number of checks
// is len(Checks()) and the number of faulty decorators is len(faults),
// wherever a page gives one.
func TestDocsStateSuiteSize(t *testing.T) {
	checks, nfaults := len(backendtest.Checks()), len(faults)
	for _, tt := range []struct {
		file  string
		re    string
		want  int
		least int // how many times the page states it
	}{
		{"../README.md", `(\d+)-check rule suite`, checks, 1},
		{"../docs/jetstream.md", `backendtest\x60, (\d+) checks|all (\d+) pass`, checks, 2},
		{"../docs/testing.md", `(\d+) sequential checks`, checks, 1},
		{"../docs/jetstream.md", `one of (\d+)\s+deliberate faults`, nfaults, 1},
		{"../docs/testing.md", `one of (\d+) deliberately faulty decorators`, nfaults, 1},
	} {
		text, err := os.ReadFile(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		ms := regexp.MustCompile(tt.re).FindAllStringSubmatch(string(text), -1)
		if len(ms) < tt.least {
			t.Errorf("%s: %d statements matching %q, want %d", tt.file, len(ms), tt.re, tt.least)
		}
		for _, m := range ms {
			for _, g := range m[1:] {
				if n, err := strconv.Atoi(g); err == nil && n != tt.want {
					t.Errorf("%s says %q: the suite has %d", tt.file, m[0], tt.want)
				}
			}
		}
	}
}
