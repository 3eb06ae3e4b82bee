package bench_test

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/bench"
)

// TestEveryScenarioRuns runs each scenario on each of its subjects for a
// fixed, small number of iterations through testing.Benchmark, as
// cmd/brokerbench does, and checks that it neither fails nor loses its
// metrics. Publish gets enough iterations to empty its partition once.
func TestEveryScenarioRuns(t *testing.T) {
	f := flag.Lookup("test.benchtime")
	require.NotNil(t, f, "test.benchtime flag")
	saved := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(saved) })

	names := map[string]bool{}
	for _, sc := range bench.Scenarios() {
		require.False(t, names[sc.Name], "duplicate scenario %s", sc.Name)
		names[sc.Name] = true
		require.NotEmpty(t, sc.Subjects, sc.Name)
		require.Contains(t, []string{"record", "delivery", "rebalance", "call"}, sc.Unit, sc.Name)
		iterations := "20x"
		if sc.Name == "Publish" {
			iterations = "1500x"
		}
		require.NoError(t, f.Value.Set(iterations))
		for _, name := range sc.Subjects {
			k, ok := bench.KindByName(name)
			require.True(t, ok, "%s: unknown subject %q", sc.Name, name)
			r := testing.Benchmark(bench.Func(sc, k))
			require.Positive(t, r.N, "%s/%s failed", sc.Name, name)
			perOp, nsPer, perSec := sc.Metric()
			if sc.Unit != "delivery" { // a short run may only publish
				require.Positive(t, r.Extra[perOp], "%s/%s: %s", sc.Name, name, perOp)
				require.Positive(t, r.Extra[nsPer], "%s/%s: %s", sc.Name, name, nsPer)
				require.Positive(t, r.Extra[perSec], "%s/%s: %s", sc.Name, name, perSec)
			}
		}
	}
	for _, want := range []string{"Publish", "RoundTrip", "Batch64", "Parallel/groups=1", "Parallel/groups=3", "Mixed"} {
		require.True(t, names[want], "scenario %s missing", want)
	}
}
