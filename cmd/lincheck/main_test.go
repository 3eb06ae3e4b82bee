package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/f91dcac0/tributary/porcupine"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// lincheck runs the command in-process and returns its exit status and
// standard output and error.
func lincheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestAllOk(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := lincheck(t, "-count", "3", "-topics", "2", "-ops", "10", "-out", out)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 4, stdout)
	for i, seed := range []string{"seed=1 ", "seed=2 ", "seed=3 "} {
		require.True(t, strings.HasPrefix(lines[i], seed), lines[i])
		require.Contains(t, lines[i], "verdict=Ok")
		require.Contains(t, lines[i], "ops=162 ") // 2 topics × (1 Create + 8 clients × 10 calls)
	}
	require.Contains(t, lines[3], "summary: 3 histories, 486 ops")
	require.Contains(t, lines[3], "Ok 3, Illegal 0, Unknown 0")
	entries, _ := os.ReadDir(out)
	require.Empty(t, entries, "nothing written without a violation")
}

func TestDurationAndProgress(t *testing.T) {
	code, stdout, stderr := lincheck(t, "-duration", "300ms", "-ops", "5", "-mix", "full", "-progress", "-out", t.TempDir())
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "mix=full")
	require.NotEmpty(t, stderr, "the progress bar draws on stderr")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-count", "-1"},
		{"-mix", "nope"},
		{"-timeout", "0s"},
		{"-clients", "65", "-count", "1"},
		{"stray"},
		{"-nosuchflag"},
		{"-mix", "window", "-window", "3"}, // above the mix's capacity 2
		{"-ack-timeout", "-1s"},
		{"-max-message-bytes", "-1"},
		{"-topics", "0"},
		{"-clients", "0"},
		{"-ops", "0"},
		{"-partitions", "4294967297"},
	} {
		code, _, stderr := lincheck(t, args...)
		require.Equal(t, 2, code, "%q", args)
		require.NotEmpty(t, stderr, "%q", args)
	}
	code, _, stderr := lincheck(t, "-h")
	require.Equal(t, 0, code)
	for _, want := range []string{"Mixes (-mix):", "acktimeout", "[window=2 maxbytes=48]", "SetAssignor", "Advance"} {
		require.Contains(t, stderr, want)
	}
}

// TestEveryMix runs one short history of each mix (-mix all cycles through
// them by seed) and one with the broker options overridden.
func TestEveryMix(t *testing.T) {
	mixes := porcupine.MixNames()
	code, stdout, stderr := lincheck(t, "-count", strconv.Itoa(len(mixes)), "-topics", "1", "-ops", "15", "-out", t.TempDir())
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	for _, m := range mixes {
		require.Contains(t, stdout, " mix="+m+" ")
	}
	code, stdout, stderr = lincheck(t, "-count", "2", "-mix", "groups", "-window", "2", "-ack-timeout", "1s", "-max-message-bytes", "4", "-out", t.TempDir())
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	require.Contains(t, stdout, "Ok 2,")
}

// TestReproduceNamesOptions checks that the rerun command of a history
// carries its broker options.
func TestReproduceNamesOptions(t *testing.T) {
	w, err := porcupine.Workload{Seed: 7, Mix: "acktimeout", Options: porcupine.Options{ReplayWindow: 2, MaxMessageBytes: 9}}.Resolve()
	require.NoError(t, err)
	cmd := reproduce(config{}, porcupine.History{Workload: w})
	require.Contains(t, cmd, "-seed 7 -mix acktimeout ")
	require.True(t, strings.HasSuffix(cmd, " -window 2 -ack-timeout 10s -max-message-bytes 9 -test-clock"), cmd)

	w, err = porcupine.Workload{Seed: 8, Mix: "session"}.Resolve()
	require.NoError(t, err)
	cmd = reproduce(config{}, porcupine.History{Workload: w})
	require.True(t, strings.HasSuffix(cmd, " -session-timeout 10s -test-clock"), cmd)
}

func TestReplay(t *testing.T) {
	out := t.TempDir()
	code, stdout, _ := lincheck(t, "-replay", filepath.Join("..", "..", "porcupine", "testdata", "ok-engine.json"), "-out", out)
	require.Equal(t, 0, code, stdout)
	require.Contains(t, stdout, "verdict=Ok")

	code, stdout, _ = lincheck(t, "-replay", filepath.Join("..", "..", "porcupine", "testdata", "illegal-ack-skips-owner.json"), "-out", out)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, "verdict=Illegal")
	html, err := filepath.Glob(filepath.Join(out, "illegal-ack-skips-owner-*.html"))
	require.NoError(t, err)
	require.Len(t, html, 1)

	code, _, stderr := lincheck(t, "-replay", filepath.Join(out, "missing.json"))
	require.Equal(t, 2, code)
	require.NotEmpty(t, stderr)
}
