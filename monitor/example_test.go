package monitor_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/monitor"
)

// The Monitor mounted on a mux under /debug/tributary/, and its JSON read
// back: group billing has not consumed the three records sent.
func Example() {
	c, _ := tributary.NewCluster(1000)
	defer c.Close()
	orders, _ := tributary.CreateTopic(c, "orders", 2, tributary.String())
	c.CreateGroup("orders", "billing", engine.Range)
	p, _ := tributary.NewProducer[string](c, "web", tributary.RoundRobin())
	for range 3 {
		p.TrySend(orders, tributary.Message[string]{Value: "pizza"})
	}

	m := monitor.New(c) // samples every second from the first request
	defer m.Close()
	mux := http.NewServeMux()
	mux.Handle("/debug/tributary/", http.StripPrefix("/debug/tributary", m))
	srv := httptest.NewServer(mux) // or http.ListenAndServe("127.0.0.1:8080", mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/debug/tributary/api/state?history=0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var st monitor.State
	json.NewDecoder(resp.Body).Decode(&st)
	for _, t := range st.Topics {
		for _, p := range t.Partitions {
			fmt.Printf("%s p%d: log %d..%d\n", t.Topic, p.Partition, p.LogStart, p.LogEnd)
		}
		for _, g := range t.Groups {
			fmt.Printf("%s %s (%s): lag %d\n", t.Topic, g.Group, g.Assignor, g.Lag)
		}
	}
	// Output:
	// orders p0: log 0..2
	// orders p1: log 0..1
	// orders billing (Range): lag 3
}
