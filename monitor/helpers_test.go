package monitor

// The helpers of this package's tests: a cluster and a Monitor closed with
// their test, sends that fail the test on error, and the decoded /api/state.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
)

// guard bounds every wait of these tests; a failure guard, not a speed
// assertion.
const guard = 10 * time.Second

// testCluster returns a cluster closed when the test ends.
func testCluster(t testing.TB) *tributary.Cluster {
	t.Helper()
	c, err := tributary.NewCluster(100000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testMonitor returns a Monitor of c closed when the test ends.
func testMonitor(t testing.TB, c *tributary.Cluster, opts ...Option) *Monitor {
	t.Helper()
	m := New(c, opts...)
	t.Cleanup(func() { m.Close() })
	return m
}

// send publishes n records with producer p to partition part of tp.
func send(t testing.TB, p *tributary.Producer[string], tp *tributary.Topic[string], part int32, n int) {
	t.Helper()
	for range n {
		if _, err := p.TrySend(tp, tributary.Message[string]{Partition: part, Value: "v"}); err != nil {
			t.Fatal(err)
		}
	}
}

// getState fetches and decodes h's /api/state with query q.
func getState(t testing.TB, h http.Handler, q string) State {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/state"+q, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/state%s: %d %s", q, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	var st State
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("decoding the state: %v\n%s", err, rec.Body)
	}
	return st
}
