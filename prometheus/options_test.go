package tribprom_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/f91dcac0/tributary/engine"
	tribprom "github.com/f91dcac0/tributary/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// WithNamespace replaces the prefix and WithConstLabels adds its labels to
// every series; the map is copied, so changing it later changes nothing.
func TestNamespaceAndConstLabels(t *testing.T) {
	labels := prometheus.Labels{"cluster": "eu-1"}
	col := tribprom.NewCollector(knownCluster(t).c,
		tribprom.WithNamespace("shop"), tribprom.WithConstLabels(labels))
	labels["cluster"] = "changed"
	const want = `
# HELP shop_describe_errors_total Describe calls of a topic that failed, over the collector's life.
# TYPE shop_describe_errors_total counter
shop_describe_errors_total{cluster="eu-1"} 0
# HELP shop_group_lag Records of the topic the consumer group has not committed: the sum of its partition lags.
# TYPE shop_group_lag gauge
shop_group_lag{cluster="eu-1",group="audit",topic="orders"} 3
shop_group_lag{cluster="eu-1",group="billing",topic="orders"} 4
shop_group_lag{cluster="eu-1",group="idle",topic="orders"} 4
# HELP shop_topic_partitions Number of partitions of the topic.
# TYPE shop_topic_partitions gauge
shop_topic_partitions{cluster="eu-1",topic="orders"} 2
shop_topic_partitions{cluster="eu-1",topic="payments"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want),
		"shop_describe_errors_total", "shop_group_lag", "shop_topic_partitions"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(col, "tributary_group_lag", "tributary_topic_partitions"); n != 0 {
		t.Errorf("%d series under the default namespace, want 0", n)
	}
	if n := testutil.CollectAndCount(col); n != 48 {
		t.Errorf("%d series in all, want 48 (as without the options)", n)
	}
}

// countingSource counts Describe calls per topic.
type countingSource struct {
	tribprom.Source
	calls map[string]*atomic.Int32
}

func (s countingSource) Describe(topic string) (engine.TopicDescription, error) {
	s.calls[topic].Add(1)
	return s.Source.Describe(topic)
}

// WithTopicFilter's rejected topics are neither described nor exported.
func TestTopicFilter(t *testing.T) {
	src := countingSource{knownCluster(t).c, map[string]*atomic.Int32{"orders": {}, "payments": {}}}
	col := tribprom.NewCollector(src, tribprom.WithTopicFilter(func(topic string) bool { return topic == "payments" }))
	const want = `
# HELP tributary_topic_partitions Number of partitions of the topic.
# TYPE tributary_topic_partitions gauge
tributary_topic_partitions{topic="payments"} 1
# HELP tributary_topic_up 1 when the last scrape read the topic's snapshot (Describe succeeded), 0 when Describe failed.
# TYPE tributary_topic_up gauge
tributary_topic_up{topic="payments"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "tributary_topic_partitions", "tributary_topic_up"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(col, "tributary_group_lag", "tributary_group_members"); n != 0 {
		t.Errorf("%d group series of a filtered-out topic, want 0", n)
	}
	if got, want := src.calls["orders"].Load(), int32(0); got != want {
		t.Errorf("orders described %d times, want %d", got, want)
	}
	if got, want := src.calls["payments"].Load(), int32(2); got != want {
		t.Errorf("payments described %d times in 2 scrapes, want %d (one snapshot a scrape)", got, want)
	}
}

// What the options or a nil Source make invalid, Register refuses, and
// registers nothing.
func TestRegisterRefusesInvalid(t *testing.T) {
	c := knownCluster(t).c
	for _, tc := range []struct {
		name  string
		col   *tribprom.Collector
		wis   error // nil: any error
		wtext string
	}{
		{"nil source", tribprom.NewCollector(nil), engine.ErrInvalidArgument, "nil Source"},
		{"namespace", tribprom.NewCollector(c, tribprom.WithNamespace("my-shop")), engine.ErrInvalidArgument, "my-shop"},
		{"namespace starting with a digit", tribprom.NewCollector(c, tribprom.WithNamespace("1shop")), engine.ErrInvalidArgument, "1shop"},
		{"const label named like a variable one", tribprom.NewCollector(c,
			tribprom.WithConstLabels(prometheus.Labels{"topic": "x"})), nil, "topic"},
		{"const label name", tribprom.NewCollector(c,
			tribprom.WithConstLabels(prometheus.Labels{"1st": "x"})), engine.ErrInvalidArgument, "1st"},
		{"reserved const label name", tribprom.NewCollector(c,
			tribprom.WithConstLabels(prometheus.Labels{"__name__": "x"})), engine.ErrInvalidArgument, "__name__"},
		{"const label value", tribprom.NewCollector(c,
			tribprom.WithConstLabels(prometheus.Labels{"cluster": "\xff"})), nil, "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			err := reg.Register(tc.col)
			if err == nil || !strings.Contains(err.Error(), tc.wtext) || (tc.wis != nil && !errors.Is(err, tc.wis)) {
				t.Fatalf("Register: %v, want an error naming %q", err, tc.wtext)
			}
			if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
				t.Errorf("Gather after a refused Register: %d families, %v; want none", len(mfs), err)
			}
		})
	}
}

// An empty namespace leaves the names unprefixed.
func TestEmptyNamespace(t *testing.T) {
	col := tribprom.NewCollector(knownCluster(t).c, tribprom.WithNamespace(""))
	const want = `
# HELP topic_partitions Number of partitions of the topic.
# TYPE topic_partitions gauge
topic_partitions{topic="orders"} 2
topic_partitions{topic="payments"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "topic_partitions"); err != nil {
		t.Error(err)
	}
}
