// Helpers shared by the package's tests: embedded servers and Backends
// (one, or two on one server as two processes), calls checked by must,
// records rendered for comparison, "changed nothing" checks, retries of
// unavailable calls, test assignors, and the bound that calls a call a hang.
package jetstream_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start starts an embedded server in a temporary directory and opens a
// backend on it with cfg (Server and defaults filled in).
func start(t *testing.T, cfg jetstream.Config) (*jetstream.Backend, *jetstream.Server) {
	t.Helper()
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	cfg.Server = srv
	if cfg.Capacity == 0 {
		cfg.Capacity = 10
	}
	b, err := jetstream.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, srv
}

func hjsTwo(t *testing.T, cfg jetstream.Config) (*jetstream.Backend, *jetstream.Backend, *jetstream.Server) {
	t.Helper()
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	open := func() *jetstream.Backend {
		c := cfg
		c.Server = srv
		if c.Capacity == 0 {
			c.Capacity = 64
		}
		if c.RequestTimeout == 0 {
			c.RequestTimeout = 5 * time.Second
		}
		b, err := jetstream.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	return open(), open(), srv
}

// twoProcesses returns two clusters on one embedded server, same prefix.
func twoProcesses(t *testing.T) (*tributary.Cluster, *tributary.Cluster) {
	t.Helper()
	b1, srv := start(t, jetstream.Config{Capacity: 20, Storage: jetstream.MemoryStorage})
	b2, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 20, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	var cs [2]*tributary.Cluster
	for i, b := range []*jetstream.Backend{b1, b2} {
		c, err := tributary.NewClusterOn(b)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs[0], cs[1]
}

// result is a call's two results, checked by of.
type result[V any] struct {
	v   V
	err error
}

func must[V any](v V, err error) result[V] { return result[V]{v, err} }

// of returns the value, failing t on an error.
func (r result[V]) of(t *testing.T) V {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

type r2[A, B any] struct {
	a   A
	b   B
	err error
}

func must2[A, B any](a A, b B, err error) r2[A, B] { return r2[A, B]{a, b, err} }

func (r r2[A, B]) of(t *testing.T) A {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.a
}

func topic(t *testing.T, b *jetstream.Backend, name string, parts int32) tributary.BackendTopic {
	t.Helper()
	if ok := must(b.CreateTopic(name, parts, "string")).of(t); !ok {
		t.Fatalf("CreateTopic(%q) = false", name)
	}
	bt, _, err := b.OpenTopic(name)
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

func member(t *testing.T, bt tributary.BackendTopic, g, m string) tributary.BackendMember {
	t.Helper()
	return must(bt.Member(g, m)).of(t)
}

func pub(t *testing.T, bt tributary.BackendTopic, p int32, payload string) int64 {
	t.Helper()
	return must(bt.TryPublish(p, engine.Message{Payload: payload})).of(t)
}

func engineMsg(s string) engineMessage { return engineMessage{Payload: s} }

type engineMessage = engine.Message

// got renders records as "p/off payload #attempt".
type rec struct {
	P       int32
	Off     int64
	Payload string
	Attempt int32
}

func recs(rs []engine.Record) []rec {
	out := []rec{}
	for _, r := range rs {
		out = append(out, rec{r.Partition, r.Offset, r.Payload, r.Attempt})
	}
	return out
}

func poll(t *testing.T, m tributary.BackendMember, max int32) []rec {
	t.Helper()
	return recs(must(m.TryPoll(nil, max)).of(t))
}

func wantRecs(t *testing.T, got []rec, want ...rec) {
	t.Helper()
	if want == nil {
		want = []rec{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func wantBool(t *testing.T, what string, got bool, err error, want bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// hSnap returns the topic's snapshot and the topic list, for "changed
// nothing" checks.
type hState struct {
	snap   engine.TopicSnapshot
	topics []string
}

func hSnapshot(t *testing.T, b *jetstream.Backend, topic string) hState {
	t.Helper()
	s, err := b.Snapshot(topic)
	if err != nil {
		t.Fatalf("Snapshot(%q): %v", topic, err)
	}
	return hState{s, b.Topics()}
}

func hSame(t *testing.T, what string, before, after hState) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Errorf("%s changed the state:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

func hInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("%s: err %v, want ErrInvalidArgument", what, err)
	}
}

func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitUntil polls cond every few milliseconds until it holds or ctx ends.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// hangBound is how long a call may take, with requests bounded by rt,
// before a test calls it a hang: generous, since a call makes several
// requests and CI runs the tests beside other packages on 2 cores. It is
// not a speed figure.
func hangBound(rt time.Duration) time.Duration { return 12*rt + 2*time.Second }

// retryUnavailable calls f until it returns an error other than
// ErrUnavailable or ErrContention (the cluster is electing leaders), or
// until the deadline.
func retryUnavailable[V any](deadline time.Time, f func() (V, error)) (V, error) {
	for {
		v, err := f()
		if err == nil || !(errors.Is(err, jetstream.ErrUnavailable) || errors.Is(err, jetstream.ErrContention)) || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// retrying calls f until it returns no ErrUnavailable (or ErrContention),
// for at most 15 s: during a node's loss, requests time out while streams
// elect new leaders. ambiguous reports whether some attempt failed, after
// which the call may or may not have taken effect before the one that
// answered.
func retrying[V any](t *testing.T, what string, f func() (V, error)) (v V, ambiguous bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, err := f()
		if err == nil {
			return v, ambiguous
		}
		if !errors.Is(err, jetstream.ErrUnavailable) && !errors.Is(err, jetstream.ErrContention) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		ambiguous = true
		time.Sleep(20 * time.Millisecond)
	}
}

func jetstreamCfg(capacity int32) jetstream.Config { return jetstream.Config{Capacity: capacity} }

// memberMaker is what rejoined needs of a topic handle.
type memberMaker interface {
	Member(group, member string) (tributary.BackendMember, error)
}

// rejoined makes a new handle of member "a" of group "g" on bt and rejoins
// it, as a restarted process does. ok false: a later incarnation fenced it
// first (the caller tries again), or, with stop, an error it reported with
// t.Error (the caller stops).
func rejoined(t *testing.T, bt memberMaker) (m tributary.BackendMember, ok, stop bool) {
	m, err := bt.Member("g", "a")
	if err != nil {
		t.Error(err)
		return nil, false, true
	}
	if _, err := m.Rejoin(); err != nil {
		if !errors.Is(err, tributary.ErrFenced) {
			t.Error(err)
			return nil, false, true
		}
		return nil, false, false
	}
	return m, true, false
}

// badAssignor gives every partition to "nobody".
type badAssignor struct{}

func (badAssignor) Name() string { return "bad" }

func (badAssignor) Assign(members, previous []string) []string {
	out := make([]string, len(previous))
	for i := range out {
		out[i] = "nobody"
	}
	return out
}

// firstAssignor gives every partition to the first member.
type firstAssignor struct{}

func (firstAssignor) Name() string { return "first" }

func (firstAssignor) Assign(members, previous []string) []string {
	out := make([]string, len(previous))
	for i := range out {
		out[i] = members[0]
	}
	return out
}

// Hostile assignors.
type hPanicAssign struct{}

func (hPanicAssign) Name() string { return "h-panic-assign" }

func (hPanicAssign) Assign(m, p []string) []string { panic("assign boom") }

type hPanicName struct{}

func (hPanicName) Name() string { panic("name boom") }

func (hPanicName) Assign(m, p []string) []string { return make([]string, len(p)) }

// hFunc is a user assignor whose name and answer are set per value.
type hFunc struct {
	name string
	f    func(members, previous []string) []string
}

func (a *hFunc) Name() string { return a.name }

func (a *hFunc) Assign(members, previous []string) []string { return a.f(members, previous) }

func hAssignor(name string, f func(m, p []string) []string) *hFunc { return &hFunc{name, f} }

// hFakeRoundRobin claims a built-in's name.
type hFakeRoundRobin struct{}

func (hFakeRoundRobin) Name() string { return "RoundRobin" }

func (hFakeRoundRobin) Assign(m, p []string) []string {
	out := make([]string, len(p))
	for i := range out {
		out[i] = m[0]
	}
	return out
}

func hAll(m string) func(members, previous []string) []string {
	return func(members, previous []string) []string {
		out := make([]string, len(previous))
		for i := range out {
			out[i] = m
		}
		return out
	}
}
