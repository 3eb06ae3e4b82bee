//go:build tributary_faults

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	porc "github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
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

// TestEveryFaultCaught runs lincheck with each fault on its default mix
// (-mix all picks the mix that exposes the fault) and requires a violation
// within 20 histories; the rerun command it writes names the mix's options.
func TestEveryFaultCaught(t *testing.T) {
	for _, f := range engine.Faults() {
		t.Run(f.String(), func(t *testing.T) {
			mix, ok := porcupine.FaultMix(f.String())
			require.True(t, ok, "no mix for fault %v", f)
			out := t.TempDir()
			code, stdout, stderr := lincheck(t, "-fault", f.String(), "-count", "20", "-ops", "25", "-out", out)
			require.Equal(t, 1, code, "stdout: %s\nstderr: %s", stdout, stderr)
			require.Contains(t, stdout, "mix="+mix+" ")
			require.Contains(t, stdout, "verdict=Illegal")
			txt, _ := filepath.Glob(filepath.Join(out, "seed-*.txt"))
			require.Len(t, txt, 1)
			b, err := os.ReadFile(txt[0])
			require.NoError(t, err)
			w, _ := porcupine.Workload{Mix: mix}.Resolve()
			if w.Options.TestClock {
				require.Contains(t, string(b), " -test-clock")
			}
			if w.Options.ReplayWindow > 0 {
				require.Contains(t, string(b), " -window ")
			}
		})
	}
}
