package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// Config is what one check needs of a fresh backend.
type Config struct {
	// Capacity is the number of records one partition retains, 1..16,777,216
	// (SPEC rule 1's 1..1000 and section 3.5's extension). Every check sets
	// it.
	Capacity int32
	// AckTimeout is the ack timeout of SPEC rule 22; 0: none.
	AckTimeout time.Duration
	// Clock is the broker clock (message times, delivery ages); nil: the
	// wall clock. Checks that set it pass a FakeClock's Now.
	Clock func() time.Time
	// MaxMessageBytes bounds key + header keys + header values + payload
	// (SPEC rule 15); 0: no limit.
	MaxMessageBytes int
	// ReplayWindow is SPEC rule 21's window, in records, 0..Capacity; 0:
	// none (rule 13 exactly). Only the rule-21 checks set it.
	ReplayWindow int32
	// SessionTimeout is SPEC rule 24's session timeout; 0: none, members
	// never expire (rules 1–23 exactly). Only the rule-24 and rule-25
	// checks set it, always with a FakeClock.
	SessionTimeout time.Duration
}

// Factory makes a fresh, empty backend for one subtest with the given
// per-partition capacity and options; it registers its own cleanup with
// t.Cleanup. It fails t (t.Fatal) when it cannot honour cfg.
type Factory func(t *testing.T, cfg Config) tributary.Backend

// NewBackend makes a fresh, empty backend for one check; a check may call
// it more than once.
type NewBackend func(cfg Config) tributary.Backend

// Check is one rule test: Run drives backends made by nb and reports
// through t. Run may be called with a testing.TB that is not a *testing.T
// (a recorder, to prove the check can fail); it uses only Error*, Fatal*,
// FailNow, Helper, Log* and Name of t, and stops on FailNow.
type Check struct {
	Name string // the subtest name, "RuleNN…" for SPEC rule NN
	Run  func(t testing.TB, nb NewBackend)
}

// Checks returns every check of the suite, in rule order, in a new slice.
func Checks() []Check {
	return slices.Concat(coreChecks(), featureChecks(), livenessChecks(), groupChecks(), blockingChecks())
}

// Run runs every check of the suite as a subtest of t, each on fresh
// backends made by f. A check named in skips is skipped with its reason
// (t.Skip); a name in skips that is no check fails t, so a renamed check
// cannot be skipped silently.
func Run(t *testing.T, f Factory, skips map[string]string) {
	t.Helper()
	checks := Checks()
	for name := range skips {
		if !slices.ContainsFunc(checks, func(c Check) bool { return c.Name == name }) {
			t.Errorf("backendtest: skips names %q, which is no check", name)
		}
	}
	for _, c := range checks {
		t.Run(c.Name, func(t *testing.T) {
			if reason, ok := skips[c.Name]; ok {
				t.Skip(reason)
			}
			c.Run(t, func(cfg Config) tributary.Backend { return f(t, cfg) })
		})
	}
}

// FakeClock is a clock that moves only when told to. Safe for concurrent
// use.
type FakeClock struct {
	// mu guards now.
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a clock reading 2024-01-01 00:00:00 UTC.
func NewFakeClock() *FakeClock {
	return &FakeClock{now: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// Now returns the clock's reading.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Wait bounds every blocking call a check makes and every wait for a
// blocked call to return: generous, so that a networked backend passes.
// A check that waits this long has failed; a test of the suite itself may
// lower it, before and not while checks run.
var Wait = 10 * time.Second

// settle is how long a check lets a blocking call run to see that it has
// not returned too early. It only ever makes a check pass more easily on
// a slow backend, never fail.
const settle = 50 * time.Millisecond

// h is a check's view of one backend: short calls that fail the check on
// an unexpected error.
type h struct {
	t       testing.TB
	b       tributary.Backend
	members map[[3]string]tributary.BackendMember
}

func newH(t testing.TB, nb NewBackend, cfg Config) *h {
	return &h{t: t, b: nb(cfg), members: map[[3]string]tributary.BackendMember{}}
}

// newTopic is newH with topic "t" of n partitions created.
func newTopic(t testing.TB, nb NewBackend, cfg Config, n int32) *h {
	t.Helper()
	h := newH(t, nb, cfg)
	h.create("t", n)
	return h
}

// create creates topic with n partitions and returns it.
func (h *h) create(topic string, n int32) tributary.BackendTopic {
	h.t.Helper()
	ok, err := h.b.CreateTopic(topic, n, "bytes")
	require.NoError(h.t, err, "CreateTopic(%q, %d)", topic, n)
	require.True(h.t, ok, "CreateTopic(%q, %d)", topic, n)
	return h.topic(topic)
}

func (h *h) topic(topic string) tributary.BackendTopic {
	h.t.Helper()
	tp, _, err := h.b.OpenTopic(topic)
	require.NoError(h.t, err, "OpenTopic(%q)", topic)
	require.Equal(h.t, topic, tp.Name())
	return tp
}

// m returns member of group on topic, the same value each time.
func (h *h) m(topic, group, member string) tributary.BackendMember {
	h.t.Helper()
	k := [3]string{topic, group, member}
	if m, ok := h.members[k]; ok {
		return m
	}
	m, err := h.topic(topic).Member(group, member)
	require.NoError(h.t, err, "Member(%q, %q)", group, member)
	require.Equal(h.t, group, m.Group())
	h.members[k] = m
	return m
}

// pub publishes payload and returns its offset, -1 when the partition is
// full (ErrPartitionFull).
func (h *h) pub(topic string, p int32, payload string) int64 {
	h.t.Helper()
	return h.pubMsg(topic, p, engine.Message{Payload: payload})
}

func (h *h) pubMsg(topic string, p int32, m engine.Message) int64 {
	h.t.Helper()
	off, err := h.topic(topic).TryPublish(p, m)
	if errors.Is(err, tributary.ErrPartitionFull) {
		return -1
	}
	require.NoError(h.t, err, "TryPublish(%q, %d)", topic, p)
	require.GreaterOrEqual(h.t, off, int64(0), "TryPublish(%q, %d) without error", topic, p)
	return off
}

// pubs publishes payloads in order to partition p and requires offsets
// from first on.
func (h *h) pubs(topic string, p int32, first int64, payloads ...string) {
	h.t.Helper()
	for i, s := range payloads {
		require.Equal(h.t, first+int64(i), h.pub(topic, p, s), "publish %q to %s/%d", s, topic, p)
	}
}

func (h *h) join(topic, group, member string) []int32 {
	h.t.Helper()
	return h.parts("Join", h.m(topic, group, member).Join, topic, group, member)
}

// parts returns what call, member's Join or Rejoin (named what), returned:
// its partitions, which must not be nil; it fails the check on an error.
func (h *h) parts(what string, call func() ([]int32, error), topic, group, member string) []int32 {
	h.t.Helper()
	parts, err := call()
	require.NoError(h.t, err, "%s(%q, %q, %q)", what, topic, group, member)
	require.NotNil(h.t, parts, "%s(%q, %q, %q) is empty, not nil", what, topic, group, member)
	return parts
}

func (h *h) leave(topic, group, member string) bool {
	h.t.Helper()
	ok, err := h.m(topic, group, member).Leave()
	require.NoError(h.t, err, "Leave(%q, %q, %q)", topic, group, member)
	return ok
}

// poll is TryPoll into a fresh slice; it returns the records seen as
// "partition/offset payload #attempt".
func (h *h) poll(topic, group, member string, max int32) []string {
	h.t.Helper()
	recs, err := h.m(topic, group, member).TryPoll(nil, max)
	require.NoError(h.t, err, "TryPoll(%q, %q, %q, %d)", topic, group, member, max)
	return h.seen(topic, recs)
}

func (h *h) seen(topic string, recs []engine.Record) []string {
	h.t.Helper()
	out := []string{}
	for _, r := range recs {
		require.Equal(h.t, topic, r.Topic, "record's topic")
		out = append(out, fmt.Sprintf("%d/%d %s #%d", r.Partition, r.Offset, r.Payload, r.Attempt))
	}
	return out
}

func (h *h) ack(topic, group, member string, p int32, off int64) bool {
	h.t.Helper()
	ok, err := h.m(topic, group, member).Ack(p, off)
	require.NoError(h.t, err, "Ack(%q, %q, %q, %d, %d)", topic, group, member, p, off)
	return ok
}

func (h *h) retry(topic, group, member string, p int32, off int64) bool {
	h.t.Helper()
	ok, err := h.m(topic, group, member).Retry(p, off)
	require.NoError(h.t, err, "Retry(%q, %q, %q, %d, %d)", topic, group, member, p, off)
	return ok
}

func (h *h) seek(topic, group string, p int32, off int64) bool {
	h.t.Helper()
	ok, err := h.b.Seek(topic, group, p, off)
	require.NoError(h.t, err, "Seek(%q, %q, %d, %d)", topic, group, p, off)
	return ok
}

func (h *h) createGroup(topic, group string, a engine.Assignor) bool {
	h.t.Helper()
	ok, err := h.b.CreateGroup(topic, group, a)
	require.NoError(h.t, err, "CreateGroup(%q, %q)", topic, group)
	return ok
}

func (h *h) setAssignor(topic, group string, a engine.Assignor) bool {
	h.t.Helper()
	ok, err := h.b.SetAssignor(topic, group, a)
	require.NoError(h.t, err, "SetAssignor(%q, %q)", topic, group)
	return ok
}

func (h *h) describe(topic string) engine.TopicDescription {
	h.t.Helper()
	d, err := h.b.Describe(topic)
	require.NoError(h.t, err, "Describe(%q)", topic)
	return normDesc(d)
}

func (h *h) snapshot(topic string) engine.TopicSnapshot {
	h.t.Helper()
	s, err := h.b.Snapshot(topic)
	require.NoError(h.t, err, "Snapshot(%q)", topic)
	s.TopicDescription = normDesc(s.TopicDescription)
	return s
}

// group returns group's description on topic; it fails the check when the
// group is absent.
func (h *h) group(topic, group string) engine.GroupDescription {
	h.t.Helper()
	for _, g := range h.describe(topic).Groups {
		if g.Group == group {
			return g
		}
	}
	require.FailNow(h.t, "group absent", "Describe(%q) has no group %q", topic, group)
	return engine.GroupDescription{}
}

// attempts returns the group's attempts on each partition.
func (h *h) attempts(topic, group string) []int32 {
	h.t.Helper()
	var out []int32
	for _, p := range h.group(topic, group).Partitions {
		out = append(out, p.Attempts)
	}
	return out
}

// owners returns each member's partitions, ascending, from Assignment.
func (h *h) assignment(topic, group, member string) []int32 {
	h.t.Helper()
	a := h.m(topic, group, member).Assignment()
	require.NotNil(h.t, a, "Assignment is empty, not nil")
	return a
}

// state is every topic's snapshot and the topic list: what "changes
// nothing" compares.
type state struct {
	Topics    []string
	Snapshots []engine.TopicSnapshot
}

func (h *h) state() state {
	h.t.Helper()
	s := state{Topics: h.b.Topics()}
	for _, topic := range s.Topics {
		s.Snapshots = append(s.Snapshots, h.snapshot(topic))
	}
	return s
}

// unchanged requires the backend's state to be before.
func (h *h) unchanged(before state, what string, args ...any) {
	h.t.Helper()
	require.Equal(h.t, before, h.state(), "%s changed the backend", fmt.Sprintf(what, args...))
}

// normDesc makes nil and empty member and group lists compare equal: the
// suite does not hold a backend to Go's nil-versus-empty distinction there.
func normDesc(d engine.TopicDescription) engine.TopicDescription {
	if d.Groups == nil {
		d.Groups = []engine.GroupDescription{}
	}
	for i := range d.Groups {
		if d.Groups[i].Members == nil {
			d.Groups[i].Members = []string{}
		}
	}
	return d
}

// requireInvalid requires err to be ErrInvalidArgument.
func requireInvalid(t testing.TB, err error, what string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(what, args...)
	require.Error(t, err, msg)
	require.ErrorIs(t, err, tributary.ErrInvalidArgument, msg)
}

// userAssignor is a user's assignor: Name "user", answers by fn.
type userAssignor struct {
	fn func(members, previous []string) []string
}

func (userAssignor) Name() string { return "user" }
func (a userAssignor) Assign(members, previous []string) []string {
	return a.fn(members, previous)
}

// result is what a blocking call returned.
type result struct {
	recs []engine.Record
	off  int64
	err  error
}

// async runs f in a goroutine and returns the channel its result arrives
// on.
func async(f func() result) <-chan result {
	c := make(chan result, 1)
	go func() { c <- f() }()
	return c
}

// notYet requires that c has delivered nothing after settle.
func notYet(t testing.TB, c <-chan result, what string) {
	t.Helper()
	select {
	case r := <-c:
		require.FailNow(t, "returned too early", "%s returned before it could: %+v", what, r)
	case <-time.After(settle):
	}
}

// await returns what c delivers, failing the check after Wait.
func await(t testing.TB, c <-chan result, what string) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(Wait):
		require.FailNow(t, "still blocked", "%s did not return within %v", what, Wait)
		return result{}
	}
}

// bg returns a context that ends after Wait, for blocking calls that a
// correct backend returns from at once or on an event.
func bg() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), Wait)
}
