package faults

import (
	"strings"
	"testing"
)

var table = Table{None, "drops-key", "acks-twice"}

func TestTableNameAndParse(t *testing.T) {
	for i, name := range table {
		if got := table.Name(i); got != name {
			t.Errorf("Name(%d) = %q, want %q", i, got, name)
		}
		if got, err := table.Parse(name); err != nil || got != i {
			t.Errorf("Parse(%q) = %d, %v; want %d, nil", name, got, err, i)
		}
	}
	for _, i := range []int{-1, len(table)} {
		if got, want := table.Name(i), "fault("; !strings.HasPrefix(got, want) {
			t.Errorf("Name(%d) = %q, want a %q… placeholder", i, got, want)
		}
	}
	if _, err := table.Parse("Drops-Key"); err == nil || !strings.Contains(err.Error(), "acks-twice") {
		t.Errorf("Parse of an unknown name: %v, want an error listing the names", err)
	}
}

func TestTableFromEnv(t *testing.T) {
	for _, c := range []struct {
		env   string
		wnum  int
		wfail bool
	}{
		{"", 0, false},
		{None, 0, false},
		{"acks-twice", 2, false},
		{"nope", 0, true},
		{"drops-key,acks-twice", 0, true},
		{"drops-key acks-twice", 0, true},
		{" acks-twice", 0, true},
		{"acks-twice\n", 0, true},
		{"ACKS-TWICE", 0, true},
		{"2", 0, true},
	} {
		t.Setenv(Env, c.env)
		got, err := table.FromEnv()
		if got != c.wnum || (err != nil) != c.wfail {
			t.Errorf("%s=%q: FromEnv() = %d, %v; want %d, error %v", Env, c.env, got, err, c.wnum, c.wfail)
		}
		if err != nil && !strings.Contains(err.Error(), Env) {
			t.Errorf("%s=%q: error %q does not name %s", Env, c.env, err, Env)
		}
	}
}
