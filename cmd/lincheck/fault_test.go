//go:build tributary_faults

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	porc "github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/porcupine"
)

// TestFaultWritesEvidence runs lincheck against a broken broker and checks
// what a violation leaves behind: exit status 1, the visualization, the
// history as an Illegal fixture, and the command that reruns it.
func TestFaultWritesEvidence(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := lincheck(t, "-fault", "ack-skips-owner", "-mix", "rebalance", "-count", "20", "-ops", "25", "-out", out)
	require.Equal(t, 1, code, "stdout: %s\nstderr: %s", stdout, stderr)
	require.Contains(t, stdout, "verdict=Illegal")
	require.Contains(t, stdout, "Illegal 1,")
	for _, pattern := range []string{"seed-*-t*.html", "seed-*.json", "seed-*.txt"} {
		m, _ := filepath.Glob(filepath.Join(out, pattern))
		require.Len(t, m, 1, pattern)
	}
	m, _ := filepath.Glob(filepath.Join(out, "seed-*.json"))
	f, err := porcupine.ReadFixture(m[0])
	require.NoError(t, err)
	require.Equal(t, porc.Illegal, f.Verdict)
	require.Equal(t, "ack-skips-owner", f.Fault)
	require.Equal(t, porc.Illegal, porcupine.Check(f.History, 0).Verdict)
	txt, _ := filepath.Glob(filepath.Join(out, "seed-*.txt"))
	b, err := os.ReadFile(txt[0])
	require.NoError(t, err)
	require.True(t, strings.Contains(string(b), "-tags tributary_faults") && strings.Contains(string(b), "-fault ack-skips-owner"), string(b))

	code, _, stderr = lincheck(t, "-fault", "nope")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "unknown fault")
}
