package porcupine_test

import (
	"testing"

	porc "github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/porcupine"
)

// engineBackend returns the typed library's in-memory backend made with w's
// capacity and options, closed when the test ends.
func engineBackend(t *testing.T, w porcupine.Workload) tributary.Backend {
	t.Helper()
	w, err := w.Resolve()
	require.NoError(t, err)
	// Exactly the workload's options: NewCluster would add the library's
	// default session timeout, which the workload's model does not have.
	b, err := tributary.NewEngineBackend(w.Capacity, w.Options.EngineOptions()...)
	require.NoError(t, err)
	c, err := tributary.NewClusterOn(b)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c.Backend()
}

// TestBackendTargetLinearizable records every mix that needs no test clock
// through BackendTarget on the typed library's in-memory backend (the path
// a distributed backend's check takes: names resolved to handles per call,
// the backend's errors mapped onto the engine's) and requires each history
// to be Ok.
func TestBackendTargetLinearizable(t *testing.T) {
	n := 0
	for i, mix := range porcupine.Mixes() {
		if mix.Options.TestClock {
			continue
		}
		w := porcupine.Workload{Seed: uint64(100 + i), Mix: mix.Name, Topics: 2, Clients: 6, OpsPerClient: 60}
		h, err := porcupine.RunOn(w, porcupine.BackendTarget(engineBackend(t, w)))
		require.NoError(t, err)
		res := porcupine.Check(h, checkTimeout)
		require.Equal(t, porc.Ok, res.Verdict, "mix %s (%v): topic %q\n%s", mix.Name, h.Workload, res.Topic, keep(t, h, res))
		n++
	}
	require.Greater(t, n, 5, "mixes checked")
}

// TestBackendTargetCatchesFaultyBackend: a backend that hands out a record
// and at once cancels its delivery (as if a rebalance had, with no
// rebalance) must be caught: the owner's Ack of what it just polled then
// returns false, which no order of the calls explains.
func TestBackendTargetCatchesFaultyBackend(t *testing.T) {
	caught := 0
	for seed := range uint64(5) {
		w := porcupine.Workload{Seed: seed, Mix: "balanced", Topics: 2, Clients: 6, OpsPerClient: 60}
		h, err := porcupine.RunOn(w, porcupine.BackendTarget(porcupine.ForgetfulBackend(engineBackend(t, w))))
		require.NoError(t, err)
		if porcupine.Check(h, checkTimeout).Verdict == porc.Illegal {
			caught++
		}
	}
	require.Positive(t, caught, "the forgetful backend passed 5 histories")
	t.Logf("forgetful backend: %d of 5 histories Illegal", caught)
}

func TestRunOnRefusesTestClock(t *testing.T) {
	w := porcupine.Workload{Seed: 1, Mix: "acktimeout", Topics: 1, Clients: 2, OpsPerClient: 10}
	_, err := porcupine.RunOn(w, porcupine.BackendTarget(engineBackend(t, w)))
	require.ErrorContains(t, err, "test clock")
}
