package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// parsed returns the options args parse into, not yet validated.
func parsed(t *testing.T, args ...string) *options {
	t.Helper()
	var o options
	require.NoError(t, newFlagSet(&o, &bytes.Buffer{}).Parse(args))
	return &o
}

// TestValidate: every bad value is refused with one line naming the flag,
// the value and the allowed range; the defaults and values at the ends of
// the ranges pass.
func TestValidate(t *testing.T) {
	wide := fmt.Sprintf("1..%d", maxCPU())
	for _, tt := range []struct {
		args []string
		werr []string // substrings of the error; nil: valid
	}{
		{nil, nil},
		{[]string{"-benchtime", "1ms", "-count", "1", "-cpu", "1"}, nil},
		{[]string{"-benchtime", "1h", "-count", "100", "-cpu", "64,1,2,2"}, nil},
		{[]string{"-benchtime", "1x"}, nil},
		{[]string{"-benchtime", "1000000000x"}, nil},
		{[]string{"-cpu", "256", "-scenarios", "^RoundTrip$"}, nil},
		{[]string{"-cpu", "100000", "-from", "r.json"}, []string{"-cpu 100000:", wide}},

		{[]string{"-benchtime", "0s"}, []string{"-benchtime 0s:", "1ms..1h", "1x..1000000000x"}},
		{[]string{"-benchtime", "999us"}, []string{"-benchtime 999us:", "1ms..1h"}},
		{[]string{"-benchtime", "61m"}, []string{"-benchtime 61m:", "1ms..1h"}},
		{[]string{"-benchtime", "0x"}, []string{"-benchtime 0x:", "1x..1000000000x"}},
		{[]string{"-benchtime", "1000000001x"}, []string{"-benchtime 1000000001x:", "1x..1000000000x"}},
		{[]string{"-benchtime", "-1x"}, []string{"-benchtime -1x:", "1x..1000000000x"}},
		{[]string{"-benchtime", "soon"}, []string{"-benchtime soon:", "1ms..1h"}},
		{[]string{"-count", "0"}, []string{"-count 0:", "1..100"}},
		{[]string{"-count", "-3"}, []string{"-count -3:", "1..100"}},
		{[]string{"-count", "101"}, []string{"-count 101:", "1..100"}},
		{[]string{"-cpu", "100000"}, []string{"-cpu 100000:", "each value must be in 1..64", wide}},
		{[]string{"-cpu", "5000"}, []string{"-cpu 5000:", "1..64"}},
		{[]string{"-cpu", "1,2,65"}, []string{"-cpu 1,2,65:", "1..64", `"65"`}},
		{[]string{"-cpu", "0"}, []string{"-cpu 0:", "1..64"}},
		{[]string{"-cpu", "1,,2"}, []string{"-cpu 1,,2:", "1..64", `""`}},
		{[]string{"-cpu", "two"}, []string{"-cpu two:", "1..64"}},
		{[]string{"-cpu", "100000", "-scenarios", "^RoundTrip$"}, []string{"-cpu 100000:", wide, "no parallel scenario"}},
		{[]string{"-scenarios", "("}, []string{`-scenarios "(":`, "regular expression"}},
		{[]string{"-subjects", "("}, []string{`-subjects "(":`, "regular expression"}},
		{[]string{"-scenarios", "NoSuchScenario"}, []string{`-scenarios "NoSuchScenario"`, "select no"}},
		{[]string{"-scenarios", "^Publish$", "-subjects", "chan-raw"}, []string{`-subjects "chan-raw"`, "select no"}},
		{[]string{"-plot", "x.gif"}, []string{`-plot "x.gif"`, ".svg or .png"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			err := parsed(t, tt.args...).validate()
			if tt.werr == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.NotContains(t, err.Error(), "\n", "one line")
			for _, w := range tt.werr {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestCheckFiles: the output paths are checked before measuring, without
// creating or changing a file.
func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.json")
	require.NoError(t, os.WriteFile(existing, []byte("kept"), 0o644))
	for _, tt := range []struct {
		args []string
		werr []string
	}{
		{[]string{"-json", filepath.Join(dir, "r.json"), "-plot", filepath.Join(dir, "r.svg"), "-markdown", filepath.Join(dir, "r.md")}, nil},
		{[]string{"-json", existing}, nil},
		{[]string{"-json", os.DevNull}, nil},
		{[]string{"-from", existing}, nil},

		{[]string{"-json", filepath.Join(dir, "missing", "r.json")}, []string{"-json " + filepath.Join(dir, "missing", "r.json") + ":", "cannot create a file in directory", "no such file"}},
		{[]string{"-plot", filepath.Join(dir, "missing", "r.svg")}, []string{"-plot ", "cannot create a file in directory"}},
		{[]string{"-markdown", filepath.Join(dir, "missing", "r.md")}, []string{"-markdown ", "cannot create a file in directory"}},
		{[]string{"-markdown", dir}, []string{"-markdown " + dir + ":", "is a directory"}},
		{[]string{"-json", filepath.Join(existing, "r.json")}, []string{"-json ", "not a directory"}},
		{[]string{"-json", existing, "-markdown", existing}, []string{"-markdown " + existing + ":", "the same file as -json"}},
		{[]string{"-from", filepath.Join(dir, "none.json")}, []string{"-from ", "no such file"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			err := parsed(t, tt.args...).checkFiles()
			if tt.werr == nil {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				require.NotContains(t, err.Error(), "\n", "one line")
				for _, w := range tt.werr {
					require.Contains(t, err.Error(), w)
				}
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "only old.json: the check creates nothing")
			data, err := os.ReadFile(existing)
			require.NoError(t, err)
			require.Equal(t, "kept", string(data))
		})
	}
}

// TestBadFlagExitsFast runs the command's main logic on bad flags: exit
// status 2, one line on standard error naming the flag, nothing on
// standard output, no file written, nothing measured.
func TestBadFlagExitsFast(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	for _, tt := range []struct {
		args  []string
		wline string // the start of the line on stderr
	}{
		{[]string{"-cpu", "100000", "-json", out}, "brokerbench: -cpu 100000: each value must be in 1..64"},
		{[]string{"-cpu", "5000", "-json", out}, "brokerbench: -cpu 5000: each value must be in 1..64"},
		{[]string{"-count", "0", "-json", out}, "brokerbench: -count 0: must be in 1..100"},
		{[]string{"-benchtime", "0x", "-json", out}, "brokerbench: -benchtime 0x: must be a duration in 1ms..1h or an iteration count in 1x..1000000000x"},
		{[]string{"-benchtime", "1x", "-json", filepath.Join(dir, "no", "r.json")}, "brokerbench: -json " + filepath.Join(dir, "no", "r.json") + ": cannot create a file in directory"},
		{[]string{"-benchtime", "1x", "-json", out, "-plot", filepath.Join(dir, "no", "r.svg")}, "brokerbench: -plot " + filepath.Join(dir, "no", "r.svg") + ": cannot create a file in directory"},
		{[]string{"-benchtime", "1x", "-markdown", dir}, "brokerbench: -markdown " + dir + ": is a directory"},
		{[]string{"-json", out, "extra"}, `brokerbench: unexpected arguments ["extra"]`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := realMain(tt.args, &stdout, &stderr)
			require.Less(t, time.Since(start), 5*time.Second, "fails before measuring")
			require.Equal(t, 2, code, stderr.String())
			require.Empty(t, stdout.String())
			require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
			require.True(t, strings.HasPrefix(stderr.String(), tt.wline), "%q", stderr.String())
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, entries, "no output written")
		})
	}

	// The flag package's own errors: exit status 2, its line, then the usage.
	for _, args := range [][]string{{"-nosuchflag"}, {"-count", "many"}} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 2, realMain(args, &stdout, &stderr), "%q", args)
		require.Contains(t, stderr.String(), "usage: brokerbench", "%q", args)
		require.Empty(t, stdout.String())
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, realMain([]string{"-h"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "1..64")
}

// TestBinaryExitStatus builds the command and checks the exit status the
// operating system sees for a bad flag.
func TestBinaryExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "brokerbench")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	outb, err := build.CombinedOutput()
	require.NoError(t, err, string(outb))
	for _, args := range [][]string{{"-cpu", "100000"}, {"-json", filepath.Join(dir, "no", "r.json")}} {
		cmd := exec.Command(bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%q: %v", args, err)
		require.Equal(t, 2, ee.ExitCode(), "%q: %s", args, stderr.String())
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%q", stderr.String())
		require.Contains(t, stderr.String(), "brokerbench: "+args[0]+" ")
		require.Empty(t, stdout.String())
	}
}
