// Package monitor serves a cluster's state as a web page and as JSON, in
// the manner of net/http/pprof and NATS's monitoring endpoints: topics and
// their partitions' log start and end, consumer groups with their members,
// owners, committed offsets, in-flight records and lag, the most recent dead
// letters, and charts of lag and throughput over the last minutes.
//
// # Usage
//
//	c, _ := tributary.NewCluster(1000)
//	m := monitor.New(c)                        // samples every second once started
//	defer m.Close()
//	mux := http.NewServeMux()
//	mux.Handle("/debug/tributary/", http.StripPrefix("/debug/tributary", m))
//	http.ListenAndServe("127.0.0.1:8080", mux) // page at /debug/tributary/
//
// A Monitor is an http.Handler with these routes, relative to where it is
// mounted (the page uses relative URLs, so mount it under a path ending in
// "/"):
//
//   - GET /: the page (HTML, with monitor.js and monitor.css beside it),
//     which polls api/state every sampling interval and redraws.
//   - GET /api/state: the State as JSON. ?history=N keeps only the newest
//     N samples (0: none); without it the whole history comes.
//
// # Samples
//
// Every interval (WithInterval, default 1 s) the Monitor takes one Sample:
// Cluster.Describe of every topic of Cluster.Topics, one atomic snapshot
// per topic (SPEC rule 23), kept in a ring of WithHistory samples (default
// 300: five minutes at the default interval). A partition's throughput is
// the growth of its log end offset between two samples divided by the
// time between them, in records per second. Sampling starts with Start, or
// at the first request the handler serves, and stops with Close.
//
// # Dead letters
//
// New adds an OnDeadLetter hook to the cluster (Cluster.AddHooks) that
// keeps the last WithDeadLetters (default 50) dead letters of every
// consumer of the cluster in a ring; a Monitor that is closed ignores the
// hook's calls (hooks cannot be removed).
//
// A Monitor is safe for concurrent use.
package monitor

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// Defaults of the options.
const (
	DefaultInterval    = time.Second // between two samples
	DefaultHistory     = 300         // samples kept
	DefaultDeadLetters = 50          // dead letters kept
	// MaxCauseBytes is the longest cause text a DeadLetter keeps, in
	// bytes; a longer one is cut there and ends with "…".
	MaxCauseBytes = 1024
)

// Option configures a Monitor. A value out of range (zero or negative)
// leaves the option's default.
type Option func(*config)

// config is a Monitor's configuration, fixed by New.
type config struct {
	interval    time.Duration
	history     int
	deadLetters int
	now         func() time.Time
	// fault changes every State before it is served: nil but in the
	// tests, which serve wrong pages with it to check that their checks
	// reject them.
	fault func(*State)
}

// WithInterval sets the time between two samples; d ≤ 0 keeps
// DefaultInterval (1 s). The page polls the JSON at the same interval.
func WithInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.interval = d
		}
	}
}

// WithHistory sets how many samples the Monitor keeps, the oldest
// dropped first; n ≤ 0 keeps DefaultHistory (300).
func WithHistory(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.history = n
		}
	}
}

// WithDeadLetters sets how many recent dead letters the Monitor keeps, the
// oldest dropped first; n ≤ 0 keeps DefaultDeadLetters (50).
func WithDeadLetters(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.deadLetters = n
		}
	}
}

// WithClock sets the clock that stamps samples, states and dead letters;
// nil keeps time.Now. Throughput is computed on it.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// Monitor samples a cluster and serves its state (see the package doc).
// Make one with New; the zero Monitor is not usable.
type Monitor struct {
	c       *tributary.Cluster
	cfg     config
	handler http.Handler
	closed  atomic.Bool // set by Close: no more samples, hook calls ignored

	// sampleMu serialises Sample, so that samples enter the ring in the
	// order of their times and each rate is against the one before.
	sampleMu sync.Mutex

	// mu guards the fields below it. It is never held while the cluster
	// is called (Describe, Topics): a hook or a sample waits only for the
	// copying of a ring.
	mu        sync.Mutex
	history   ring[Sample]
	dead      ring[DeadLetter]
	deadTotal int64
	started   bool          // Start ran (or Close, which forbids it)
	stop      chan struct{} // closed by Close
	done      chan struct{} // closed when the sampling goroutine returned; nil when none started
}

// New returns a Monitor of c with opts, and adds its OnDeadLetter hook to
// c. It starts nothing: sampling begins with Start or at the handler's
// first request. A nil c gives a Monitor whose state is empty.
func New(c *tributary.Cluster, opts ...Option) *Monitor {
	cfg := config{interval: DefaultInterval, history: DefaultHistory, deadLetters: DefaultDeadLetters, now: time.Now}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	m := &Monitor{c: c, cfg: cfg, stop: make(chan struct{})}
	m.history = newRing[Sample](cfg.history)
	m.dead = newRing[DeadLetter](cfg.deadLetters)
	if c != nil {
		c.AddHooks(tributary.Hooks{OnDeadLetter: m.onDeadLetter})
	}
	m.handler = m.routes()
	return m
}

// Start starts sampling on a goroutine of its own: one sample at once,
// then one every interval until Close. Calling it again, or after Close,
// does nothing.
func (m *Monitor) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return
	}
	m.started = true
	m.done = make(chan struct{})
	go m.loop(m.done)
}

// loop samples every interval until stop is closed, then closes done.
func (m *Monitor) loop(done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(m.cfg.interval)
	defer t.Stop()
	for {
		m.Sample()
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

// Close stops sampling and waits for the sampling goroutine to return;
// the handler goes on serving the state, with the history as it was.
// Dead letters that follow are not kept. Closing twice is a no-op; it
// returns nil.
func (m *Monitor) Close() error {
	m.mu.Lock()
	if m.closed.Swap(true) {
		m.mu.Unlock()
		return nil
	}
	m.started = true
	close(m.stop)
	done := m.done
	m.mu.Unlock()
	if done != nil {
		<-done
	}
	return nil
}

// Sample takes one sample now (Describe of every topic) and adds it to the
// history, and returns it; after Close it adds nothing and returns the
// zero Sample. Sampling on the goroutine calls it; a program that does not
// Start may call it itself. The Sample is the caller's.
func (m *Monitor) Sample() Sample {
	m.sampleMu.Lock()
	defer m.sampleMu.Unlock()
	if m.closed.Load() {
		return Sample{}
	}
	s := Sample{Time: m.cfg.now(), Topics: []TopicSample{}}
	for _, d := range m.describeAll() {
		ts := TopicSample{Topic: d.Topic, LogEnd: make([]int64, len(d.Partitions)), Rate: make([]float64, len(d.Partitions)), Groups: []GroupSample{}}
		for i, p := range d.Partitions {
			ts.LogEnd[i] = p.LogEndOffset
		}
		for _, g := range d.Groups {
			gs := GroupSample{Group: g.Group, Lag: make([]int64, len(g.Partitions))}
			for i, p := range g.Partitions {
				gs.Lag[i] = p.Lag
			}
			ts.Groups = append(ts.Groups, gs)
		}
		s.Topics = append(s.Topics, ts)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.history.last(); ok {
		setRates(&s, prev)
	}
	m.history.push(s)
	return s.clone()
}

// setRates fills s's rates against the sample before it, prev: the log
// end's growth per second; 0 for a partition prev lacks, or when no time
// passed.
func setRates(s *Sample, prev Sample) {
	dt := s.Time.Sub(prev.Time).Seconds()
	if dt <= 0 {
		return
	}
	for i := range s.Topics {
		ts := &s.Topics[i]
		for _, pt := range prev.Topics {
			if pt.Topic != ts.Topic {
				continue
			}
			for p := range ts.LogEnd {
				if p < len(pt.LogEnd) && ts.LogEnd[p] >= pt.LogEnd[p] {
					ts.Rate[p] = roundRate(float64(ts.LogEnd[p]-pt.LogEnd[p]) / dt)
				}
			}
		}
	}
}

// roundRate rounds a rate to 3 decimals, so the JSON stays short.
func roundRate(r float64) float64 {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return 0
	}
	return math.Round(r*1000) / 1000
}

// describeAll returns Describe of every topic; a topic whose Describe
// fails (removed, or its backend unavailable) is left out.
func (m *Monitor) describeAll() []engine.TopicDescription {
	if m.c == nil {
		return nil
	}
	var out []engine.TopicDescription
	for _, t := range m.c.Topics() {
		if d, err := m.c.Describe(t); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// onDeadLetter is the OnDeadLetter hook: it keeps d in the ring.
func (m *Monitor) onDeadLetter(d tributary.Delivery, dlqTopic string, cause error) {
	if m.closed.Load() {
		return
	}
	dl := DeadLetter{
		Time: m.cfg.now(), Topic: d.Topic, Group: d.Group, Member: d.Member,
		Partition: d.Partition, Offset: d.Offset, ID: d.ID, Attempt: d.Attempt,
		DeadLetterTopic: dlqTopic, Cause: causeText(cause),
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dead.push(dl)
	m.deadTotal++
}

// causeText is err's text, at most MaxCauseBytes bytes; "" for nil. The
// hook is called with the error the handler returned, as it is: an Error
// method that panics (a typed nil's) gives a fixed text naming its type,
// as the dead letter's header has, rather than crash the consumer.
func causeText(err error) (text string) {
	if err == nil {
		return ""
	}
	defer func() {
		if recover() != nil {
			text = fmt.Sprintf("%T with a panicking Error method", err)
		}
	}()
	s := err.Error()
	if len(s) > MaxCauseBytes {
		cut := MaxCauseBytes
		for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// State returns the cluster's state now: a new Describe of every topic
// (the tables), the latest rates, the recent dead letters (newest first)
// and the newest history samples, at most history of them (history < 0:
// all). The State is the caller's.
func (m *Monitor) State(history int) State {
	descs := m.describeAll()
	st := State{
		Time:        m.cfg.now(),
		IntervalMS:  m.cfg.interval.Milliseconds(),
		Topics:      make([]Topic, 0, len(descs)),
		DeadLetters: []DeadLetter{},
		History:     []Sample{},
	}
	m.mu.Lock()
	samples := m.history.items()
	st.DeadLetters = append(st.DeadLetters, m.dead.items()...)
	st.DeadLettersTotal = m.deadTotal
	m.mu.Unlock()
	for i, j := 0, len(st.DeadLetters)-1; i < j; i, j = i+1, j-1 {
		st.DeadLetters[i], st.DeadLetters[j] = st.DeadLetters[j], st.DeadLetters[i]
	}
	var latest Sample
	if len(samples) > 0 {
		latest = samples[len(samples)-1]
	}
	for _, d := range descs {
		st.Topics = append(st.Topics, topicOf(d, latest))
	}
	if history < 0 || history > len(samples) {
		history = len(samples)
	}
	for _, s := range samples[len(samples)-history:] {
		st.History = append(st.History, s.clone())
	}
	if m.cfg.fault != nil {
		m.cfg.fault(&st)
	}
	return st
}

// topicOf is d as the State shows it, with the rates of latest.
func topicOf(d engine.TopicDescription, latest Sample) Topic {
	t := Topic{Topic: d.Topic, Partitions: make([]Partition, len(d.Partitions)), Groups: make([]Group, len(d.Groups))}
	var rates []float64
	for _, ts := range latest.Topics {
		if ts.Topic == d.Topic {
			rates = ts.Rate
		}
	}
	for i, p := range d.Partitions {
		t.Partitions[i] = Partition{Partition: p.Partition, LogStart: p.LogStartOffset, LogEnd: p.LogEndOffset, Retained: p.LogEndOffset - p.LogStartOffset}
		if i < len(rates) {
			t.Partitions[i].Rate = rates[i]
		}
	}
	for i, g := range d.Groups {
		out := Group{Group: g.Group, Assignor: g.Assignor, Members: append([]string{}, g.Members...), Partitions: make([]GroupPartition, len(g.Partitions))}
		for j, p := range g.Partitions {
			out.Partitions[j] = GroupPartition{Partition: p.Partition, Owner: p.Owner, Committed: p.Committed, InFlight: p.InFlight, Attempts: p.Attempts, Lag: p.Lag}
			out.Lag += p.Lag
			if p.InFlight {
				out.InFlight++
			}
		}
		t.Groups[i] = out
	}
	return t
}

//go:embed static
var static embed.FS

// routes returns the handler of the Monitor's routes.
func (m *Monitor) routes() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is the package's own
	}
	mux := http.NewServeMux()
	page := func(name, contentType string) http.HandlerFunc {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			panic(err) // the embedded tree is the package's own
		}
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Cache-Control", "no-cache")
			w.Write(b)
		}
	}
	mux.Handle("GET /{$}", page("index.html", "text/html; charset=utf-8"))
	mux.Handle("GET /monitor.js", page("monitor.js", "text/javascript; charset=utf-8"))
	mux.Handle("GET /monitor.css", page("monitor.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /api/state", m.serveState)
	return mux
}

// ServeHTTP serves the page and the JSON (see the package doc); it starts
// sampling if Start has not. An unknown path is 404, a method other than
// GET or HEAD 405.
func (m *Monitor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.Start()
	m.handler.ServeHTTP(w, r)
}

// errHistory is the answer to a bad ?history.
var errHistory = errors.New("history: want a whole number of samples, 0 or more")

// serveState serves State as JSON.
func (m *Monitor) serveState(w http.ResponseWriter, r *http.Request) {
	history := -1
	if h := r.URL.Query().Get("history"); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("%v, got %q", errHistory, h), http.StatusBadRequest)
			return
		}
		history = n
	}
	b, err := json.Marshal(m.State(history))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(append(b, '\n'))
}
