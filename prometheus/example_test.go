package tribprom_test

import (
	"bufio"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/f91dcac0/tributary"
	tribprom "github.com/f91dcac0/tributary/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A collector registered with a registry and served over HTTP: with the
// default registry it is prometheus.MustRegister(tribprom.NewCollector(c))
// and http.Handle("/metrics", promhttp.Handler()).
func Example() {
	c, _ := tributary.NewCluster(1000)
	defer c.Close()
	orders, _ := tributary.CreateTopic(c, "orders", 1, tributary.String())
	p, _ := tributary.NewProducer[string](c, "web", tributary.RoundRobin())
	for _, v := range []string{"a", "b", "c"} {
		p.TrySend(orders, tributary.Message[string]{Value: v})
	}
	cons, _ := tributary.NewConsumer(orders, "billing", "b1")
	ms, _ := cons.TryPoll(1)
	cons.Ack(ms[0]) // billing has committed 1 of 3 records

	reg := prometheus.NewRegistry()
	reg.MustRegister(tribprom.NewCollector(c))
	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) // serve it: http.Handle("/metrics", handler)

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for sc := bufio.NewScanner(rec.Body); sc.Scan(); {
		if line := sc.Text(); strings.HasPrefix(line, "tributary_group_") {
			fmt.Println(line)
		}
	}
	// Output:
	// tributary_group_lag{group="billing",topic="orders"} 2
	// tributary_group_members{group="billing",topic="orders"} 1
	// tributary_group_partition_committed_offset{group="billing",partition="0",topic="orders"} 1
	// tributary_group_partition_delivery_attempts{group="billing",partition="0",topic="orders"} 0
	// tributary_group_partition_in_flight{group="billing",partition="0",topic="orders"} 0
	// tributary_group_partition_lag{group="billing",partition="0",topic="orders"} 2
	// tributary_group_partition_owner_info{group="billing",member="b1",partition="0",topic="orders"} 1
}
