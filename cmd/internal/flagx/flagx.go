// Package flagx holds the flag.Values the programs share: integers written
// in plain decimal, and ranged flags (Int, Uint64, Float, Duration) that
// refuse a value outside their range with a one-line *RangeError, which
// Parse returns. The standard IntVar and Uint64Var also read 0x, 0o, 0b
// and a leading-0 octal form (-capacity 010 is 8), which no user of these
// programs means.
package flagx

import (
	"flag"
	"strconv"
)

// IntVar defines an int flag like flag.FlagSet.IntVar that accepts only
// decimal (an optional sign, digits, no base prefix; 010 is ten).
func IntVar(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	*p = value
	fs.Var((*decimalInt)(p), name, usage)
}

// Uint64Var is IntVar for a uint64.
func Uint64Var(fs *flag.FlagSet, p *uint64, name string, value uint64, usage string) {
	*p = value
	fs.Var((*decimalUint64)(p), name, usage)
}

type decimalInt int

func (v *decimalInt) String() string {
	if v == nil {
		return "0"
	}
	return strconv.Itoa(int(*v))
}

func (v *decimalInt) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, strconv.IntSize)
	if err != nil {
		return errParse(err)
	}
	*v = decimalInt(n)
	return nil
}

type decimalUint64 uint64

func (v *decimalUint64) String() string {
	if v == nil {
		return "0"
	}
	return strconv.FormatUint(uint64(*v), 10)
}

func (v *decimalUint64) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errParse(err)
	}
	*v = decimalUint64(n)
	return nil
}

// errParse is strconv's reason alone, "invalid syntax" or "value out of
// range": the flag package's message already quotes the input.
func errParse(err error) error {
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return strconv.ErrRange
	}
	return strconv.ErrSyntax
}
