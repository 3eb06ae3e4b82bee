package flagx

import (
	"flag"
	"io"
	"testing"
)

func TestDecimalOnly(t *testing.T) {
	tests := []struct {
		arg  string
		want int
		ok   bool
	}{
		{"10", 10, true},
		{"010", 10, true}, // decimal, not octal 8
		{"-3", -3, true},
		{"+5", 5, true},
		{"0x10", 0, false},
		{"0b1", 0, false},
		{"0o7", 0, false},
		{"1_0", 0, false},
		{"1e3", 0, false},
		{"", 0, false},
		{"99999999999999999999", 0, false},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var n int
		IntVar(fs, &n, "n", 7, "")
		err := fs.Parse([]string{"-n", tt.arg})
		if (err == nil) != tt.ok || (tt.ok && n != tt.want) {
			t.Errorf("-n %q: got %d, %v; want %d, ok %v", tt.arg, n, err, tt.want, tt.ok)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var u uint64
	Uint64Var(fs, &u, "u", 1, "")
	if u != 1 {
		t.Fatalf("default %d, want 1", u)
	}
	if err := fs.Parse([]string{"-u", "0x10"}); err == nil {
		t.Fatal("-u 0x10 accepted")
	}
	if err := fs.Parse([]string{"-u", "18446744073709551615"}); err != nil || u != 1<<64-1 {
		t.Fatalf("-u max: %d, %v", u, err)
	}
}
