package jetstream_test

// Helpers shared by the package's tests: embedded servers and Backends
// (one, or two on one server as two processes), calls checked by must,
// records rendered for comparison, "changed nothing" checks, retries of
// unavailable calls, test assignors, and the bound that calls a call a hang.

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

// twoBackends starts an embedded server and opens two Backends on it with
// cfg (Server filled in; Capacity 64 when zero), each with its own
// connection, as two processes sharing a prefix would have. Both close, and
// the server shuts down, when the test ends.
func twoBackends(t *testing.T, cfg jetstream.Config) (*jetstream.Backend, *jetstream.Backend, *jetstream.Server) {
	t.Helper()
	if cfg.Capacity == 0 {
		cfg.Capacity = 64
	}
	b1, srv := start(t, cfg)
	cfg.Server = srv
	b2, err := jetstream.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	return b1, b2, srv
}

// twoProcesses returns two clusters on one embedded server, same prefix,
// each on a Backend of its own (twoBackends: capacity 20, memory storage).
func twoProcesses(t *testing.T) (*tributary.Cluster, *tributary.Cluster) {
	t.Helper()
	b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 20, Storage: jetstream.MemoryStorage})
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

// result2 is a call's three results, checked by of.
type result2[A, B any] struct {
	a   A
	b   B
	err error
}

func must2[A, B any](a A, b B, err error) result2[A, B] { return result2[A, B]{a, b, err} }

// of returns the first value, failing t on an error.
func (r result2[A, B]) of(t *testing.T) A {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.a
}

// topic creates topic name with parts partitions (payload type "string")
// on b and opens it, failing t unless the creation is new.
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

// member returns a handle of member m of group g on bt.
func member(t *testing.T, bt tributary.BackendTopic, g, m string) tributary.BackendMember {
	t.Helper()
	return must(bt.Member(g, m)).of(t)
}

// pub publishes payload to partition p of bt without waiting for room and
// returns its offset.
func pub(t *testing.T, bt tributary.BackendTopic, p int32, payload string) int64 {
	t.Helper()
	return must(bt.TryPublish(p, engine.Message{Payload: payload})).of(t)
}

// engineMsg is a message with payload s.
func engineMsg(s string) engine.Message { return engine.Message{Payload: s} }

// rec is a delivered record as the tests compare it: partition, offset,
// payload and attempt.
type rec struct {
	P       int32
	Off     int64
	Payload string
	Attempt int32
}

// recs renders records as recs (an empty slice, not nil, for none).
func recs(rs []engine.Record) []rec {
	out := []rec{}
	for _, r := range rs {
		out = append(out, rec{r.Partition, r.Offset, r.Payload, r.Attempt})
	}
	return out
}

// poll polls up to max records from m without waiting.
func poll(t *testing.T, m tributary.BackendMember, max int32) []rec {
	t.Helper()
	return recs(must(m.TryPoll(nil, max)).of(t))
}

// wantRecs fails t unless got is want, in order.
func wantRecs(t *testing.T, got []rec, want ...rec) {
	t.Helper()
	if want == nil {
		want = []rec{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// wantBool fails t on err or unless got is want.
func wantBool(t *testing.T, what string, got bool, err error, want bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// fullState is a topic's snapshot and the Backend's topic list, for
// "changed nothing" checks.
type fullState struct {
	snap   engine.TopicSnapshot
	topics []string
}

// stateOf returns topic's fullState on b.
func stateOf(t *testing.T, b *jetstream.Backend, topic string) fullState {
	t.Helper()
	s, err := b.Snapshot(topic)
	if err != nil {
		t.Fatalf("Snapshot(%q): %v", topic, err)
	}
	return fullState{s, b.Topics()}
}

// wantSame reports an error unless before and after are equal: what
// changed the state.
func wantSame(t *testing.T, what string, before, after fullState) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Errorf("%s changed the state:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// wantInvalid reports an error unless err wraps engine.ErrInvalidArgument.
func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("%s: err %v, want ErrInvalidArgument", what, err)
	}
}

// guard returns a context that ends 20 s into the test, the bound of a
// test's waits.
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
	tries := 0
	v, err := retryUnavailable(time.Now().Add(15*time.Second), func() (V, error) {
		tries++
		return f()
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v, tries > 1
}

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

// allTo returns an assignment function that gives every partition to m.
func allTo(m string) func(members, previous []string) []string {
	return func(members, previous []string) []string {
		out := make([]string, len(previous))
		for i := range out {
			out[i] = m
		}
		return out
	}
}

// allToFirst gives every partition to the first member.
func allToFirst(members, previous []string) []string { return allTo(members[0])(members, previous) }

// badAssignor gives every partition to "nobody".
type badAssignor struct{}

func (badAssignor) Name() string { return "bad" }

func (badAssignor) Assign(members, previous []string) []string {
	return allTo("nobody")(members, previous)
}

// firstAssignor gives every partition to the first member.
type firstAssignor struct{}

func (firstAssignor) Name() string { return "first" }

func (firstAssignor) Assign(members, previous []string) []string {
	return allToFirst(members, previous)
}

// fakeRoundRobin claims a built-in's name and gives every partition to the
// first member.
type fakeRoundRobin struct{}

func (fakeRoundRobin) Name() string { return "RoundRobin" }

func (fakeRoundRobin) Assign(members, previous []string) []string {
	return allToFirst(members, previous)
}

// panicAssignor panics in Assign.
type panicAssignor struct{}

func (panicAssignor) Name() string { return "h-panic-assign" }

func (panicAssignor) Assign(m, p []string) []string { panic("assign boom") }

// panicNameAssignor panics in Name.
type panicNameAssignor struct{}

func (panicNameAssignor) Name() string { panic("name boom") }

func (panicNameAssignor) Assign(m, p []string) []string { return make([]string, len(p)) }

// funcAssignor is a user assignor whose name and answer are set per value.
type funcAssignor struct {
	name string
	f    func(members, previous []string) []string
}

func (a *funcAssignor) Name() string { return a.name }

func (a *funcAssignor) Assign(members, previous []string) []string { return a.f(members, previous) }

// newAssignor returns a funcAssignor named name that assigns with f.
func newAssignor(name string, f func(m, p []string) []string) *funcAssignor {
	return &funcAssignor{name, f}
}
