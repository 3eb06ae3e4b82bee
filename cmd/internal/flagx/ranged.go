package flagx

import (
	"errors"
	"flag"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// RangeError is a flag value that its ranged flag (Int, Uint64, Float,
// Duration) refused: outside Min..Max, or not a value of the flag's kind
// at all ("many" for an integer). Its message names the flag, the value
// and the range on one line: "-records 0: must be in 1..1000000",
// "-churn 2h: must be 0 or in 1ms..1h".
type RangeError struct {
	Flag     string // the flag's name, without the leading dash
	Value    string // the value as given on the command line
	Min, Max string // the range's ends, as the flag writes values: "1", "0.5", "1ms"
	Zero     bool   // 0 is accepted too, outside Min..Max (a Duration's "0: off")
}

func (e *RangeError) Error() string {
	want := "in " + e.Min + ".." + e.Max
	if e.Zero {
		want = "0 or " + want
	}
	return "-" + e.Flag + " " + Shown(e.Value) + ": must be " + want
}

// maxShown is the most bytes of a value Shown writes.
const maxShown = 64

// Shown returns a command-line value as a message shows it: as typed, or
// quoted (strconv.Quote) when it is empty or holds spaces, unprintable
// characters or bytes that are not UTF-8; cut to its first 64 bytes, on a
// character boundary, and marked "…" when longer.
func Shown(s string) string {
	head, more := s, false
	if len(s) > maxShown {
		n := maxShown
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		head, more = s[:n], true
	}
	// Bytes that are not UTF-8 decode as U+FFFD, which IsPrint accepts:
	// they are quoted too, so that no raw byte reaches the terminal.
	if s == "" || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		head = strconv.Quote(head)
	}
	if more {
		head += "…"
	}
	return head
}

// Parse is fs.Parse(args), but a value refused by a flag of this package
// is returned as that flag's *RangeError alone, not inside the flag
// package's "invalid value … for flag …" sentence. Other errors
// (flag.ErrHelp, an unknown flag, a missing value) are fs.Parse's.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	var refused *RangeError
	fs.VisitAll(func(f *flag.Flag) {
		if r, ok := f.Value.(interface{ refusal() *RangeError }); ok && r.refusal() != nil && refused == nil {
			refused = r.refusal()
		}
	})
	if refused != nil {
		return refused
	}
	return err
}

// ranged is the flag.Value of every ranged flag: parse reads a value of
// the kind, in reads whether it is within the range; the last refusal
// stays in err until a later Set succeeds (Parse reads it). String is safe
// on the zero value, as flag.PrintDefaults requires.
type ranged[T any] struct {
	p      *T
	name   string
	lo, hi T
	zero   bool // the kind's zero value is accepted too
	parse  func(string) (T, error)
	in     func(v, lo, hi T) bool
	format func(T) string
	err    *RangeError
}

func (v *ranged[T]) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return v.format(*v.p)
}

func (v *ranged[T]) Set(s string) error {
	x, err := v.parse(s)
	var zero T
	if err != nil || !v.in(x, v.lo, v.hi) && !(v.zero && any(x) == any(zero)) {
		v.err = &RangeError{Flag: v.name, Value: s, Min: v.format(v.lo), Max: v.format(v.hi), Zero: v.zero}
		return v.err
	}
	*v.p, v.err = x, nil
	return nil
}

func (v *ranged[T]) refusal() *RangeError { return v.err }

func define[T any](fs *flag.FlagSet, v *ranged[T], value T, usage string) {
	*v.p = value
	fs.Var(v, v.name, usage)
}

// Int defines an integer flag of type T that accepts min..max written in
// decimal (an optional sign and digits; 010 is ten), with default value.
// Anything else, an integer too large for T included, is a *RangeError
// (which Parse returns). usage is the flag's usage as given: it should
// say the range.
func Int[T int | int32 | int64](fs *flag.FlagSet, p *T, name string, value, min, max T, usage string) {
	define(fs, &ranged[T]{p: p, name: name, lo: min, hi: max,
		parse: func(s string) (T, error) {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || int64(T(n)) != n {
				return 0, strconv.ErrRange
			}
			return T(n), nil
		},
		in:     func(v, lo, hi T) bool { return v >= lo && v <= hi },
		format: func(v T) string { return strconv.FormatInt(int64(v), 10) },
	}, value, usage)
}

// Uint64 is Int for a uint64 (no sign: -1 is refused).
func Uint64(fs *flag.FlagSet, p *uint64, name string, value, min, max uint64, usage string) {
	define(fs, &ranged[uint64]{p: p, name: name, lo: min, hi: max,
		parse:  func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) },
		in:     func(v, lo, hi uint64) bool { return v >= lo && v <= hi },
		format: func(v uint64) string { return strconv.FormatUint(v, 10) },
	}, value, usage)
}

// Float defines a float64 flag that accepts min..max as strconv.ParseFloat
// reads it; NaN, infinities and anything outside the range are a
// *RangeError.
func Float(fs *flag.FlagSet, p *float64, name string, value, min, max float64, usage string) {
	define(fs, &ranged[float64]{p: p, name: name, lo: min, hi: max,
		parse: func(s string) (float64, error) {
			f, err := strconv.ParseFloat(s, 64)
			if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
				err = strconv.ErrRange
			}
			return f, err
		},
		in:     func(v, lo, hi float64) bool { return v >= lo && v <= hi },
		format: func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) },
	}, value, usage)
}

// Duration defines a time.Duration flag that accepts min..max as
// time.ParseDuration reads it ("250ms", "1h"); with orZero, 0 too (a flag
// whose 0 turns something off). Anything else is a *RangeError, whose
// range is written without trailing zero units ("1h", not "1h0m0s").
func Duration(fs *flag.FlagSet, p *time.Duration, name string, value, min, max time.Duration, orZero bool, usage string) {
	define(fs, &ranged[time.Duration]{p: p, name: name, lo: min, hi: max, zero: orZero,
		parse:  time.ParseDuration,
		in:     func(v, lo, hi time.Duration) bool { return v >= lo && v <= hi },
		format: FormatDuration,
	}, value, usage)
}

// FormatDuration formats d as a flag value, without time.Duration's
// trailing zero units: "1h", "1m30s", not "1h0m0s", "1m30s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}
