// Package faults holds what every package's deliberate bugs share: the
// fault table that names them, and the one environment variable (Env) that
// switches one on in a test binary run as a subprocess. docs/testing.md
// ("Deliberate faults") describes the mechanism: each fault is a broken
// variant of one seam, compiled only with -tags tributary_faults.
//
// Only the build-tagged files of the packages with faults (faults_on.go)
// use this package, so a normal build links none of it.
package faults

import (
	"fmt"
	"os"
	"slices"
)

// Env is the environment variable that names the fault a test binary
// switches on when a test must run the broken build in a subprocess (the
// Watermill adapter's suite): a name from the package's Table, or empty
// for none. Table.FromEnv is the one place that reads it.
const Env = "TRIBUTARY_FAULT"

// None is the name of entry 0 of every Table: the correct code.
const None = "none"

// Table is one package's fault table: the name of each of its faults,
// indexed by the fault's number. Entry 0 is None; the names are distinct.
type Table []string

// Name returns the name of fault i, or "fault(i)" for a number outside t.
func (t Table) Name(i int) string {
	if i >= 0 && i < len(t) {
		return t[i]
	}
	return fmt.Sprintf("fault(%d)", i)
}

// Parse returns the number of the fault named name, or an error naming
// the table's names when no fault has that name.
func (t Table) Parse(name string) (int, error) {
	if i := slices.Index(t, name); i >= 0 {
		return i, nil
	}
	return 0, fmt.Errorf("unknown fault %q (want one of %q)", name, []string(t))
}

// FromEnv returns the number of the fault that Env names: 0 (None) when
// Env is unset or empty, and Parse's error, prefixed with Env, for a name
// not in t.
func (t Table) FromEnv() (int, error) {
	name := os.Getenv(Env)
	if name == "" {
		return 0, nil
	}
	i, err := t.Parse(name)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", Env, err)
	}
	return i, nil
}
