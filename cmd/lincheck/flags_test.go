package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// parsed returns the config args parse into, not yet validated.
func parsed(t *testing.T, args ...string) *config {
	t.Helper()
	var c config
	fs, _ := newFlagSet(&c, &bytes.Buffer{})
	require.NoError(t, fs.Parse(args))
	return &c
}

// TestValidate: every bad value is refused with one line naming the flag,
// the value and the allowed range; the defaults and the ends of the ranges
// pass.
func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		args []string
		werr []string // substrings of the error; nil: valid
	}{
		{nil, nil},
		{[]string{"-count", "0", "-duration", "0s"}, nil},
		{[]string{"-count", "1000000000", "-duration", "168h"}, nil},
		{[]string{"-topics", "1", "-clients", "1", "-ops", "1"}, nil},
		{[]string{"-topics", "1000", "-clients", "64", "-ops", "100000"}, nil},
		{[]string{"-partitions", "64", "-capacity", "1000", "-groups", "100", "-members", "100", "-window", "1000", "-max-message-bytes", "1048576"}, nil},
		{[]string{"-partitions", "1", "-capacity", "1", "-groups", "1", "-members", "1", "-window", "1", "-max-message-bytes", "1"}, nil},
		{[]string{"-timeout", "1ms", "-ack-timeout", "24h"}, nil},
		{[]string{"-timeout", "24h", "-ack-timeout", "0s"}, nil},
		{[]string{"-session-timeout", "24h"}, nil},
		{[]string{"-session-timeout", "0s", "-mix", "session"}, nil},
		{[]string{"-mix", "window", "-window", "2"}, nil},
		{[]string{"-mix", "window", "-capacity", "5", "-window", "5"}, nil},
		{[]string{"-count", "1", "-window", "3"}, nil}, // seed 1's mix is not window

		{[]string{"-count", "-1"}, []string{"-count -1:", "0..1000000000", "0: 100"}},
		{[]string{"-count", "1000000001"}, []string{"-count 1000000001:", "0..1000000000"}},
		{[]string{"-duration", "-1s"}, []string{"-duration -1s:", "0..168h"}},
		{[]string{"-duration", "169h"}, []string{"-duration 169h0m0s:", "0..168h"}},
		{[]string{"-topics", "0"}, []string{"-topics 0:", "1..1000"}},
		{[]string{"-topics", "1001"}, []string{"-topics 1001:", "1..1000"}},
		{[]string{"-clients", "0"}, []string{"-clients 0:", "1..64"}},
		{[]string{"-clients", "65"}, []string{"-clients 65:", "1..64"}},
		{[]string{"-ops", "0"}, []string{"-ops 0:", "1..100000"}},
		{[]string{"-ops", "-5"}, []string{"-ops -5:", "1..100000"}},
		{[]string{"-ops", "100001"}, []string{"-ops 100001:", "1..100000"}},
		{[]string{"-partitions", "-1"}, []string{"-partitions -1:", "0..64", "0: the mix's"}},
		{[]string{"-partitions", "65"}, []string{"-partitions 65:", "0..64"}},
		{[]string{"-partitions", "4294967297"}, []string{"-partitions 4294967297:", "0..64"}}, // not truncated to int32 1
		{[]string{"-capacity", "16777217"}, []string{"-capacity 16777217:", "0..16777216"}},
		{[]string{"-capacity", "-1"}, []string{"-capacity -1:", "0..16777216"}},
		{[]string{"-groups", "101"}, []string{"-groups 101:", "0..100"}},
		{[]string{"-members", "-1"}, []string{"-members -1:", "0..100"}},
		{[]string{"-window", "-1"}, []string{"-window -1:", "0..16777216"}},
		{[]string{"-window", "16777217"}, []string{"-window 16777217:", "0..16777216"}},
		{[]string{"-mix", "window", "-window", "3"}, []string{"-window 3:", "0..2", "mix window"}},
		{[]string{"-window", "3"}, []string{"-window 3:", "must be in 0..", "the capacity of a partition with mix"}}, // -mix all reaches mixes of capacity < 3
		{[]string{"-mix", "seek", "-capacity", "1"}, []string{"-capacity 1:", "2..16777216", "mix seek", "replay window is 2"}},
		{[]string{"-max-message-bytes", "-1"}, []string{"-max-message-bytes -1:", "0..1048576"}},
		{[]string{"-max-message-bytes", "1048577"}, []string{"-max-message-bytes 1048577:", "0..1048576"}},
		{[]string{"-timeout", "0s"}, []string{"-timeout 0s:", "1ms..24h"}},
		{[]string{"-timeout", "25h"}, []string{"-timeout 25h0m0s:", "1ms..24h"}},
		{[]string{"-ack-timeout", "-1s"}, []string{"-ack-timeout -1s:", "0..24h"}},
		{[]string{"-ack-timeout", "25h"}, []string{"-ack-timeout 25h0m0s:", "0..24h"}},
		{[]string{"-session-timeout", "-1ns"}, []string{"-session-timeout -1ns:", "0..24h"}},
		{[]string{"-session-timeout", "25h"}, []string{"-session-timeout 25h0m0s:", "0..24h"}},
		{[]string{"-mix", "nope"}, []string{"-mix nope:", "all or one of", "balanced"}},
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

// TestCheckOut: -out must be a directory that can be written, or one that
// can be created; the check creates nothing.
func TestCheckOut(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tt := range []struct {
		out  string
		werr []string
	}{
		{dir, nil},
		{filepath.Join(dir, "new"), nil},
		{filepath.Join(dir, "new", "deeper"), nil},
		{"", []string{`-out "":`, "must name a directory"}},
		{file, []string{"-out " + file + ":", "is not a directory"}},
		{filepath.Join(file, "sub"), []string{"-out " + filepath.Join(file, "sub") + ": " + file + " is not a directory"}},
	} {
		t.Run(tt.out, func(t *testing.T) {
			err := checkOut(tt.out)
			if tt.werr == nil {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				require.NotContains(t, err.Error(), "\n")
				for _, w := range tt.werr {
					require.Contains(t, err.Error(), w)
				}
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "only file: the check creates nothing")
		})
	}
}

// TestBadFlagExitsFast runs the command on bad flags: exit status 2, one
// line on standard error naming the flag, nothing on standard output,
// nothing run and no -out directory created.
func TestBadFlagExitsFast(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tt := range []struct {
		args  []string
		wline string
	}{
		{[]string{"-topics", "0", "-out", out}, "lincheck: -topics 0: must be in 1..1000\n"},
		{[]string{"-clients", "0", "-out", out}, "lincheck: -clients 0: must be in 1..64\n"},
		{[]string{"-ops", "0", "-out", out}, "lincheck: -ops 0: must be in 1..100000\n"},
		{[]string{"-count", "-1", "-out", out}, "lincheck: -count -1: must be in 0..1000000000; 0: 100, or unlimited with -duration\n"},
		{[]string{"-timeout", "0s", "-out", out}, "lincheck: -timeout 0s: must be in 1ms..24h\n"},
		{[]string{"-mix", "window", "-window", "3", "-out", out}, "lincheck: -window 3: must be in 0..2, the capacity of a partition with mix window (-capacity sets it)\n"},
		{[]string{"-count", "1", "-out", filepath.Join(file, "out")}, "lincheck: -out " + filepath.Join(file, "out") + ": " + file + " is not a directory\n"},
		{[]string{"-count", "1", "-out", file}, "lincheck: -out " + file + ": " + file + " is not a directory\n"},
		{[]string{"-out", out, "stray"}, `lincheck: unexpected arguments ["stray"] (every setting is a flag; lincheck -h lists them)` + "\n"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			start := time.Now()
			code, stdout, stderr := lincheck(t, tt.args...)
			require.Less(t, time.Since(start), 2*time.Second, "fails before running")
			require.Equal(t, 2, code, stderr)
			require.Empty(t, stdout)
			require.Equal(t, tt.wline, stderr)
			_, err := os.Stat(out)
			require.ErrorIs(t, err, os.ErrNotExist, "no -out directory created")
		})
	}
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
	bin := filepath.Join(dir, "lincheck")
	outb, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(outb))
	for _, args := range [][]string{{"-topics", "0"}, {"-out", filepath.Join(bin, "out")}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%q: %v", args, err)
		require.Equal(t, 2, ee.ExitCode(), "%q: %s", args, stderr.String())
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%q", stderr.String())
		require.True(t, strings.HasPrefix(stderr.String(), "lincheck: "+args[0]+" "), "%q", stderr.String())
		require.Empty(t, stdout.String())
	}
}
