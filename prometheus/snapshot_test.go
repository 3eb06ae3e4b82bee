package tribprom_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/f91dcac0/tributary"
	tribprom "github.com/f91dcac0/tributary/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Scrapes running concurrently with a producer and a consumer each see one
// snapshot per topic (SPEC rule 23): within a scrape, every lag is the log
// end offset minus the committed offset, the group lag is their sum, the
// committed offset lies in [log start, log end] (rule 13: nothing a group
// has not committed is removed), and retained records are end − start.
// Two Describe calls for one topic in a scrape would break these under
// load.
func TestScrapeSeesOneSnapshotPerTopic(t *testing.T) {
	const records = 2000
	c, err := tributary.NewCluster(100)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topic, err := tributary.CreateTopic(c, "orders", 4, tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	prod, err := tributary.NewProducer[string](c, "web", tributary.RoundRobin())
	if err != nil {
		t.Fatal(err)
	}
	cons, err := tributary.NewConsumer(topic, "billing", "b1")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tribprom.NewCollector(c))

	ctx := t.Context()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range records {
			if _, err := prod.Send(ctx, topic, tributary.Message[string]{Value: fmt.Sprint(i)}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Go(func() {
		for acked := 0; acked < records; {
			ms, err := cons.Poll(ctx, 8)
			if err != nil {
				t.Error(err)
				return
			}
			for _, m := range ms {
				if err := cons.Ack(m); err != nil {
					t.Error(err)
					return
				}
				acked++
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 100 {
				mfs, err := reg.Gather()
				if err != nil {
					t.Error(err)
					return
				}
				if err := checkScrape(mfs); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	cons.Close()
	prod.Close()
}

// checkScrape checks one scrape's figures against one another.
func checkScrape(mfs []*dto.MetricFamily) error {
	type key struct{ group, partition string }
	values := map[string]map[key]float64{}
	for _, mf := range mfs {
		m := map[key]float64{}
		for _, s := range mf.GetMetric() {
			var k key
			for _, l := range s.GetLabel() {
				switch l.GetName() {
				case "group":
					k.group = l.GetValue()
				case "partition":
					k.partition = l.GetValue()
				}
			}
			m[k] = s.GetGauge().GetValue() + s.GetCounter().GetValue()
		}
		values[mf.GetName()] = m
	}
	start, end := values["tributary_partition_log_start_offset"], values["tributary_partition_log_end_offset"]
	for k, r := range values["tributary_partition_retained_records"] {
		if r != end[k]-start[k] {
			return fmt.Errorf("partition %s: retained %v, want end %v − start %v", k.partition, r, end[k], start[k])
		}
	}
	sums := map[string]float64{}
	for k, lag := range values["tributary_group_partition_lag"] {
		p := key{partition: k.partition}
		committed := values["tributary_group_partition_committed_offset"][k]
		if lag != end[p]-committed {
			return fmt.Errorf("%s/%s: lag %v, want end %v − committed %v", k.group, k.partition, lag, end[p], committed)
		}
		if committed < start[p] || committed > end[p] {
			return fmt.Errorf("%s/%s: committed %v outside [%v, %v]", k.group, k.partition, committed, start[p], end[p])
		}
		sums[k.group] += lag
	}
	if len(sums) != 1 {
		return fmt.Errorf("lags of %d groups, want 1", len(sums))
	}
	for k, lag := range values["tributary_group_lag"] {
		if lag != sums[k.group] {
			return fmt.Errorf("group %s: lag %v, want the partitions' sum %v", k.group, lag, sums[k.group])
		}
	}
	return nil
}
