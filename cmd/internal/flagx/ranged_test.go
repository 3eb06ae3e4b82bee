package flagx

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// parseOne parses args with the one flag define makes and returns Parse's
// error.
func parseOne(define func(*flag.FlagSet), args ...string) error {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	define(fs)
	return Parse(fs, args)
}

// TestRangedFlags: each constructor accepts its range's ends and refuses a
// value just outside either end, and a value not of its kind, with a
// *RangeError naming the flag, the value and the range; the variable
// keeps its last accepted value.
func TestRangedFlags(t *testing.T) {
	var (
		i   int
		i32 int32
		u   uint64
		f   float64
		d   time.Duration
		dz  time.Duration
	)
	defs := map[string]func(*flag.FlagSet){
		"n":     func(fs *flag.FlagSet) { Int(fs, &i, "n", 5, 1, 64, "") },
		"p":     func(fs *flag.FlagSet) { Int(fs, &i32, "p", 8, 1, 64, "") },
		"seed":  func(fs *flag.FlagSet) { Uint64(fs, &u, "seed", 0, 0, 1<<64-1, "") },
		"small": func(fs *flag.FlagSet) { Uint64(fs, &u, "small", 3, 2, 9, "") },
		"retry": func(fs *flag.FlagSet) { Float(fs, &f, "retry", 0.1, 0, 0.5, "") },
		"wait":  func(fs *flag.FlagSet) { Duration(fs, &d, "wait", time.Second, time.Millisecond, time.Hour, false, "") },
		"churn": func(fs *flag.FlagSet) { Duration(fs, &dz, "churn", 0, time.Millisecond, time.Hour, true, "") },
	}
	for _, tt := range []struct {
		flag    string
		ok      []string // accepted
		refused []string // each refused with "-flag value: must be " + want
		want    string
	}{
		{"n", []string{"1", "64", "010"}, []string{"0", "65", "-1", "0x10", "many", "", "99999999999999999999"}, "in 1..64"},
		{"p", []string{"64"}, []string{"4294967297"}, "in 1..64"}, // int32 would wrap 4294967297 to 1
		{"seed", []string{"0", "18446744073709551615"}, []string{"-1", "18446744073709551616"}, "in 0..18446744073709551615"},
		{"small", []string{"2", "9"}, []string{"1", "10"}, "in 2..9"},
		{"retry", []string{"0", "0.5"}, []string{"-0.1", "0.51", "NaN", "Inf", "often"}, "in 0..0.5"},
		{"wait", []string{"1ms", "1h"}, []string{"0", "999us", "61m", "5"}, "in 1ms..1h"},
		{"churn", []string{"0", "1ms"}, []string{"999us", "-1ms", "2h"}, "0 or in 1ms..1h"},
	} {
		for _, v := range tt.ok {
			if err := parseOne(defs[tt.flag], "-"+tt.flag, v); err != nil {
				t.Errorf("-%s %q: %v, want accepted", tt.flag, v, err)
			}
		}
		for _, v := range tt.refused {
			err := parseOne(defs[tt.flag], "-"+tt.flag, v)
			var re *RangeError
			if want := "-" + tt.flag + " " + Shown(v) + ": must be " + tt.want; !errors.As(err, &re) || err.Error() != want {
				t.Errorf("-%s %q: error %v (%T), want *RangeError %q", tt.flag, v, err, err, want)
			} else if re.Flag != tt.flag || re.Value != v {
				t.Errorf("-%s %q: RangeError names -%s %q", tt.flag, v, re.Flag, re.Value)
			}
		}
	}
	if err := parseOne(defs["n"], "-n", ""); err == nil || err.Error() != `-n "": must be in 1..64` {
		t.Errorf(`-n "": %v`, err)
	}
}

// TestRangedFlagsKeepTheirValue: a refused value leaves the variable at
// its last accepted one; the default stands until a value is accepted.
func TestRangedFlagsKeepTheirValue(t *testing.T) {
	var n int
	define := func(fs *flag.FlagSet) { Int(fs, &n, "n", 5, 1, 64, "") }
	if err := parseOne(define); err != nil || n != 5 {
		t.Fatalf("no flag: n = %d, %v; want the default 5", n, err)
	}
	if err := parseOne(define, "-n", "7", "-n", "70"); err == nil || n != 7 {
		t.Fatalf("-n 7 -n 70: n = %d, %v; want 7 and an error", n, err)
	}
}

// TestParseKeepsOtherErrors: an unknown flag or a missing value is the
// flag package's error, and -h is flag.ErrHelp.
func TestParseKeepsOtherErrors(t *testing.T) {
	var n int
	define := func(fs *flag.FlagSet) { Int(fs, &n, "n", 5, 1, 64, "") }
	if err := parseOne(define, "-nope"); err == nil || !strings.Contains(err.Error(), "flag provided but not defined: -nope") {
		t.Errorf("-nope: %v", err)
	}
	if err := parseOne(define, "-n"); err == nil || !strings.Contains(err.Error(), "flag needs an argument: -n") {
		t.Errorf("-n: %v", err)
	}
	if err := parseOne(define, "-h"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
}

// TestShownCutsAndQuotes: a plain value shows bare, an empty or spaced one
// quoted, one with a control byte, NUL, an invisible character or bytes
// that are not UTF-8 quoted (a terminal never sees them raw), and a long
// one cut to 64 bytes on a character boundary.
func TestShownCutsAndQuotes(t *testing.T) {
	long := strings.Repeat("é", 40) // 80 bytes
	for _, tt := range []struct{ in, want string }{
		{"10", "10"},
		{"", `""`},
		{"two words", `"two words"`},
		{long, strings.Repeat("é", 32) + "…"},
		{" " + long, `" ` + strings.Repeat("é", 31) + `"…`},
		{"\xff", `"\xff"`},
		{"1\xe2\x80", `"1\xe2\x80"`},
		{"a\x1b[2J", `"a\x1b[2J"`},
		{"a\x00", `"a\x00"`},
		{"a\u200b", `"a\u200b"`},
	} {
		if got := Shown(tt.in); got != tt.want {
			t.Errorf("Shown(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRangedDefaultsPrint: a flag's default, as -h lists it, is its value
// in the flag's own form.
func TestRangedDefaultsPrint(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var d time.Duration
	var f float64
	Duration(fs, &d, "timeout", time.Minute, time.Millisecond, time.Hour, false, "")
	Float(fs, &f, "retry", 0.1, 0, 0.5, "")
	if got := fs.Lookup("timeout").DefValue; got != "1m" {
		t.Errorf("-timeout default %q, want 1m", got)
	}
	if got := fs.Lookup("retry").DefValue; got != "0.1" {
		t.Errorf("-retry default %q, want 0.1", got)
	}
}
