package monitor

// The Monitor's state and routes: the tables are Describe's snapshot, the
// throughput and its ring of samples on a test clock, the sampling goroutine
// and its lazy start, the routes, a nil cluster, and concurrent use.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// TestStateIsDescribe: the state's tables are Describe's snapshot of
// every topic, with each group's lag and in-flight count summed.
func TestStateIsDescribe(t *testing.T) {
	c := testCluster(t)
	orders, _ := tributary.CreateTopic(c, "orders", 2, tributary.String())
	if _, err := tributary.CreateTopic(c, "empty", 1, tributary.String()); err != nil {
		t.Fatal(err)
	}
	p, _ := tributary.NewProducer[string](c, "web", tributary.Manual())
	if _, err := c.CreateGroup("orders", "billing", engine.Range); err != nil {
		t.Fatal(err)
	}
	cons, err := tributary.NewConsumer(orders, "billing", "b1")
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	send(t, p, orders, 0, 5)
	send(t, p, orders, 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	ms, err := cons.Poll(ctx, 2) // one in flight on each partition
	if err != nil || len(ms) != 2 {
		t.Fatalf("Poll: %v, %v", ms, err)
	}
	if err := cons.Ack(ms[0]); err != nil {
		t.Fatal(err)
	}

	m := testMonitor(t, c)
	st := getState(t, m, "?history=0")
	if len(st.Topics) != 2 || st.Topics[0].Topic != "empty" || st.Topics[1].Topic != "orders" {
		t.Fatalf("topics %+v, want empty and orders", st.Topics)
	}
	d, _ := c.Describe("orders")
	got := st.Topics[1]
	for i, wp := range d.Partitions {
		gp := got.Partitions[i]
		if gp.Partition != wp.Partition || gp.LogStart != wp.LogStartOffset || gp.LogEnd != wp.LogEndOffset || gp.Retained != wp.LogEndOffset-wp.LogStartOffset {
			t.Errorf("partition %d: %+v, want %+v", i, gp, wp)
		}
	}
	if len(got.Groups) != 1 {
		t.Fatalf("groups %+v, want billing", got.Groups)
	}
	g, wg := got.Groups[0], d.Groups[0]
	if g.Group != "billing" || g.Assignor != wg.Assignor || strings.Join(g.Members, ",") != "b1" {
		t.Errorf("group %+v, want billing (%s) with b1", g, wg.Assignor)
	}
	var wlag int64
	var wflight int
	for i, wp := range wg.Partitions {
		gp := g.Partitions[i]
		if gp.Owner != wp.Owner || gp.Committed != wp.Committed || gp.InFlight != wp.InFlight || gp.Attempts != wp.Attempts || gp.Lag != wp.Lag {
			t.Errorf("billing p%d: %+v, want %+v", i, gp, wp)
		}
		wlag += wp.Lag
		if wp.InFlight {
			wflight++
		}
	}
	if g.Lag != wlag || g.InFlight != wflight || wlag != 7 || wflight != 1 {
		t.Errorf("billing lag %d in flight %d, want %d (7) and %d (1)", g.Lag, g.InFlight, wlag, wflight)
	}
	if len(st.History) != 0 {
		t.Errorf("?history=0 gave %d samples", len(st.History))
	}
}

// TestThroughputAndRing: the rate is the growth of the log end over the
// time between samples; the ring keeps the newest WithHistory samples.
func TestThroughputAndRing(t *testing.T) {
	c := testCluster(t)
	orders, _ := tributary.CreateTopic(c, "orders", 2, tributary.String())
	p, _ := tributary.NewProducer[string](c, "web", tributary.Manual())
	clock := testclock.New()
	m := testMonitor(t, c, WithClock(clock.Now), WithHistory(3))

	s := m.Sample()
	if w := []float64{0, 0}; !slices.Equal(s.Topics[0].Rate, w) {
		t.Errorf("first sample's rate %v, want %v", s.Topics[0].Rate, w)
	}
	send(t, p, orders, 0, 10)
	send(t, p, orders, 1, 3)
	clock.Advance(2 * time.Second)
	s = m.Sample()
	if w := []float64{5, 1.5}; !slices.Equal(s.Topics[0].Rate, w) {
		t.Errorf("rate %v after 10 and 3 records in 2 s, want %v", s.Topics[0].Rate, w)
	}
	if w := []int64{10, 3}; s.Topics[0].LogEnd[0] != w[0] || s.Topics[0].LogEnd[1] != w[1] {
		t.Errorf("log end %v, want %v", s.Topics[0].LogEnd, w)
	}
	clock.Advance(0) // no time passed: no rate
	send(t, p, orders, 0, 1)
	if s = m.Sample(); !slices.Equal(s.Topics[0].Rate, []float64{0, 0}) {
		t.Errorf("rate %v with no time passed, want 0s", s.Topics[0].Rate)
	}
	for range 4 {
		clock.Advance(time.Second)
		m.Sample()
	}
	st := getState(t, m, "")
	if len(st.History) != 3 {
		t.Fatalf("history of %d samples, want 3 (WithHistory)", len(st.History))
	}
	// The request started the sampling loop (ServeHTTP starts it), whose
	// first sample may land before the state is read, at the same instant
	// as the last one above: oldest first is non-decreasing time.
	for i := 1; i < len(st.History); i++ {
		if st.History[i].Time.Before(st.History[i-1].Time) {
			t.Errorf("history not oldest first: %v then %v", st.History[i-1].Time, st.History[i].Time)
		}
	}
	if !st.History[2].Time.Equal(clock.Now()) {
		t.Errorf("newest sample at %v, want %v", st.History[2].Time, clock.Now())
	}
	if st := getState(t, m, "?history=1"); len(st.History) != 1 || !st.History[0].Time.Equal(clock.Now()) {
		t.Errorf("?history=1: %d samples", len(st.History))
	}
	if got := st.Topics[0].Partitions[0].Rate; got != 0 {
		t.Errorf("table rate %v, want 0 (no records in the last second)", got)
	}
}

// TestSamplingGoroutine: Start samples every interval, Close stops it
// (TestMain's goleak checks that it returned) and later requests do not
// start it again.
func TestSamplingGoroutine(t *testing.T) {
	c := testCluster(t)
	if _, err := tributary.CreateTopic(c, "orders", 1, tributary.String()); err != nil {
		t.Fatal(err)
	}
	m := New(c, WithInterval(5*time.Millisecond))
	m.Start()
	m.Start()
	deadline := time.Now().Add(guard)
	for len(getState(t, m, "").History) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 3 samples after the guard")
		}
		time.Sleep(time.Millisecond)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m.Close()
	n := len(getState(t, m, "").History)
	time.Sleep(30 * time.Millisecond)
	if got := len(getState(t, m, "").History); got != n {
		t.Errorf("history grew from %d to %d after Close", n, got)
	}
	if s := m.Sample(); s.Topics != nil {
		t.Errorf("Sample after Close: %+v, want the zero Sample", s)
	}
}

// TestLazyStart: the handler's first request starts sampling.
func TestLazyStart(t *testing.T) {
	c := testCluster(t)
	m := testMonitor(t, c, WithInterval(time.Millisecond))
	deadline := time.Now().Add(guard)
	for len(getState(t, m, "").History) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no samples after the guard")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRoutes: the page, its script and style, the JSON; 404 and 405
// otherwise, 400 for a bad ?history.
func TestRoutes(t *testing.T) {
	m := testMonitor(t, testCluster(t))
	srv := httptest.NewServer(http.StripPrefix("/debug/tributary", m))
	defer srv.Close()
	for _, tt := range []struct {
		method, path string
		wcode        int
		wtype, wbody string
	}{
		{"GET", "/debug/tributary/", 200, "text/html; charset=utf-8", `<script src="monitor.js">`},
		{"GET", "/debug/tributary/monitor.js", 200, "text/javascript; charset=utf-8", `fetch("api/state"`},
		{"GET", "/debug/tributary/monitor.css", 200, "text/css; charset=utf-8", "table"},
		{"GET", "/debug/tributary/api/state", 200, "application/json", `"topics":[]`},
		{"GET", "/debug/tributary/api/state?history=x", 400, "", "history"},
		{"GET", "/debug/tributary/api/state?history=-1", 400, "", "history"},
		{"GET", "/debug/tributary/nope", 404, "", ""},
		{"POST", "/debug/tributary/api/state", 405, "", ""},
	} {
		req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.wcode {
			t.Errorf("%s %s: %d, want %d", tt.method, tt.path, resp.StatusCode, tt.wcode)
		}
		if tt.wtype != "" && resp.Header.Get("Content-Type") != tt.wtype {
			t.Errorf("%s %s: Content-Type %q, want %q", tt.method, tt.path, resp.Header.Get("Content-Type"), tt.wtype)
		}
		if !strings.Contains(b.String(), tt.wbody) {
			t.Errorf("%s %s: body lacks %q:\n%.300s", tt.method, tt.path, tt.wbody, b.String())
		}
	}
}

// TestNilCluster: a Monitor of no cluster serves an empty state.
func TestNilCluster(t *testing.T) {
	m := testMonitor(t, nil)
	if st := getState(t, m, ""); len(st.Topics) != 0 || st.DeadLetters == nil || st.History == nil {
		t.Errorf("state %+v, want empty lists", st)
	}
}

// TestConcurrentUse: sampling, requests and dead letters at once, under
// the race detector.
func TestConcurrentUse(t *testing.T) {
	c := testCluster(t)
	orders, _ := tributary.CreateTopic(c, "orders", 4, tributary.String())
	p, _ := tributary.NewProducer[string](c, "web", tributary.RoundRobin())
	m := testMonitor(t, c, WithInterval(time.Millisecond), WithHistory(10))
	m.Start()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				switch i {
				case 0:
					if _, err := p.TrySend(orders, tributary.Message[string]{Value: "v"}); err != nil {
						t.Error(err)
					}
				case 1:
					m.onDeadLetter(tributary.Delivery{Topic: "orders"}, "dlq", errors.New("x"))
				default:
					rec := httptest.NewRecorder()
					m.ServeHTTP(rec, httptest.NewRequest("GET", "/api/state", nil))
					if rec.Code != http.StatusOK {
						t.Errorf("GET /api/state: %d", rec.Code)
					}
				}
			}
		}()
	}
	wg.Wait()
}
