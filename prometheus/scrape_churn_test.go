package tribprom_test

// Tests of scrapes racing topic and group churn: every exposition stays
// consistent and lint clean while topics, groups and partitions come and go.

import (
	"fmt"
	"sync"
	"testing"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tribprom "github.com/f91dcac0/tributary/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestScrapesDuringChurn: scrapes running at once with topics
// created, groups created and deleted and members joining and leaving
// (run under -race) never fail the gather (no duplicate series, no
// inconsistent label sets) and stay lint clean; 64 partitions (the most) too.
func TestScrapesDuringChurn(t *testing.T) {
	c, err := tributary.NewCluster(100)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wide, err := tributary.CreateTopic(c, "wide", 64, tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(tribprom.NewCollector(c)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tributary.CreateTopic(c, fmt.Sprintf("t-%d", i%20), int32(1+i%3), tributary.String()) //nolint:errcheck // exists, later
			g := fmt.Sprintf("g-%d", i%5)
			if _, err := c.CreateGroup("wide", g, engine.RoundRobin); err == nil {
				if m, err := tributary.NewConsumer(wide, g, fmt.Sprintf("m-%d", i%7)); err == nil {
					m.Close() //nolint:errcheck // leaves
				}
			}
			c.DeleteGroup("wide", g) //nolint:errcheck // may have a member
		}
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 30 {
		if _, err := reg.Gather(); err != nil {
			t.Error(err)
			break
		}
	}
	close(stop)
	wg.Wait()
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
