package tribprom_test

import (
	"slices"
	"strings"
	"testing"

	tribprom "github.com/f91dcac0/tributary/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every metric the collector exports passes promlint: base units, _total
// on the counter alone, snake_case, help text on each.
func TestLintClean(t *testing.T) {
	c := knownCluster(t).c
	for _, tc := range []struct {
		name string
		col  *tribprom.Collector
	}{
		{"default", tribprom.NewCollector(c)},
		{"namespace and const labels", tribprom.NewCollector(c,
			tribprom.WithNamespace("shop"), tribprom.WithConstLabels(prometheus.Labels{"cluster": "eu-1"}))},
		{"describe errors", tribprom.NewCollector(errSource{c, map[string]bool{"orders": true}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, err := testutil.CollectAndLint(tc.col)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("%s: %s", p.Metric, p.Text)
			}
		})
	}
}

// The lint is not vacuous: the same collector with three descriptors
// misnamed gets exactly those three names refused.
func TestLintCatchesBadNames(t *testing.T) {
	col := tribprom.NewCollector(knownCluster(t).c)
	tribprom.Misname(col)
	problems, err := testutil.CollectAndLint(col)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Metric+": "+p.Text)
	}
	slices.Sort(got)
	want := []string{
		`tributary_describe_errors: counter metrics should have "_total" suffix`,
		`tributary_group_lag_sum: non-histogram and non-summary metrics should not have "_sum" suffix`,
		`tributary_partition_retainedRecords: metric names should be written in 'snake_case' not 'camelCase'`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("lint problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
