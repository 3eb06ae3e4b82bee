package backendtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/backendtest"
	"github.com/f91dcac0/tributary/engine"
)

// Deliberate bugs of a backend, for proving that the suite's checks can
// fail (TestSuiteDetectsFaults). Each is the broken variant of one seam, a
// method of the wrappers of the engine backend's interfaces
// (faultyBackend, faultyTopic, faultyMember; configure for the Config a
// backend is made with): with the wrapper's fault on, the method does the
// broken variant; otherwise it calls the backend's own. The fault table,
// faults, names each; a fault's name says what breaks. The wrappers
// exist only in this test; docs/testing.md ("Deliberate faults") describes
// the mechanism every package's faults share.

// fault identifies one deliberate bug by its name; noFault is the correct
// backend.
type fault string

const (
	noFault             fault = "none"
	ackAnyOffset        fault = "Ack succeeds for a wrong offset"
	pollIgnoresOwners   fault = "TryPoll also returns other members' records"
	publishNeverFull    fault = "TryPublish never reports full"
	seekIgnoresRange    fault = "Seek out of range succeeds"
	retryCommits        fault = "Retry acks"
	createClampsCount   fault = "CreateTopic clamps the partition count"
	deleteIgnoresMember fault = "DeleteGroup of a group with members is false"
	setAssignorNoOp     fault = "SetAssignor does nothing"
	publishDoesNotWait  fault = "Publish does not wait for room"
	attemptAlwaysOne    fault = "Attempt is always 1"
	negativeOffsetFalse fault = "Ack of a negative offset is false, not invalid"
	pollNeverWakes      fault = "Poll does not wake on a publish"
	duplicateTopicTrue  fault = "CreateTopic of an existing topic is true"
	duplicateGroupTrue  fault = "CreateGroup of an existing group is true"
	unknownTopicErrors  fault = "unknown and invalid topic errors swapped"
	membersFoldCase     fault = "member ids fold case"
	emptyPayloadInvalid fault = "an empty payload is invalid"
	joinDescending      fault = "Join returns partitions descending"
	pollDropsDst        fault = "TryPoll drops dst"
	pollDropsKey        fault = "TryPoll drops the key"
	snapshotNoHeaders   fault = "Snapshot drops headers"
	exactLimitInvalid   fault = "a message of exactly MaxMessageBytes is invalid"
	addReturnsAdded     fault = "AddPartitions returns the number added"
	addClamps           fault = "AddPartitions clamps the total to 64"
	pollIgnoresStop     fault = "Poll ignores stop"
	pollCtxNoError      fault = "Poll returns no error when ctx ends"
	windowIgnored       fault = "the replay window is ignored"
	windowIsCapacity    fault = "the replay window is always the capacity"
	windowOnTop         fault = "the replay window is kept on top of the capacity"
	groupOptsForgotten  fault = "CreateGroup forgets its options"
	startIgnored        fault = "CreateGroup ignores WithStart"
	configDropsStart    fault = "GroupConfig forgets the start"
	removeIsNoop        fault = "RemoveMember does nothing and says true"
	removeAbsentTrue    fault = "RemoveMember of an absent member is true"
	roomOnlyOnTrim      fault = "a waiting Publish wakes only when the log start moves"
	expiryLate          fault = "members expire a nanosecond after the session timeout"
	heartbeatNoRefresh  fault = "Heartbeat does not refresh the session"
	heartbeatRejoins    fault = "Heartbeat of a member not in its group joins it"
	emptyPollNoRefresh  fault = "a TryPoll that finds nothing does not refresh the session"
	falseAckNoRefresh   fault = "an Ack or Retry that returns false does not refresh the session"
	invalidRefreshes    fault = "an invalid Ack refreshes the session"
	lastSeenDropped     fault = "Describe drops LastSeen"
	rejoinKeepsInFlight fault = "Rejoin keeps the member's in-flight deliveries"
	incarnationsShared  fault = "members of the same names share one incarnation (no fencing)"
	fencedLeaveRemoves  fault = "the Leave of a superseded member removes its successor"
	removeDoesNotFence  fault = "RemoveMember does not fence the incarnation it removes"
)

// faults is the fault table: every fault but noFault, each switched on
// for the backends of one run of the checks.
var faults = []fault{
	ackAnyOffset, pollIgnoresOwners, publishNeverFull, seekIgnoresRange,
	retryCommits, createClampsCount, deleteIgnoresMember, setAssignorNoOp,
	publishDoesNotWait, attemptAlwaysOne, negativeOffsetFalse, pollNeverWakes,
	duplicateTopicTrue, duplicateGroupTrue, unknownTopicErrors, membersFoldCase,
	emptyPayloadInvalid, joinDescending, pollDropsDst, pollDropsKey,
	snapshotNoHeaders, exactLimitInvalid, addReturnsAdded, addClamps,
	pollIgnoresStop, pollCtxNoError, windowIgnored, windowIsCapacity,
	windowOnTop, groupOptsForgotten, startIgnored, configDropsStart,
	removeIsNoop, removeAbsentTrue, roomOnlyOnTrim,
	expiryLate, heartbeatNoRefresh, heartbeatRejoins, emptyPollNoRefresh,
	falseAckNoRefresh, invalidRefreshes, lastSeenDropped, rejoinKeepsInFlight,
	incarnationsShared, fencedLeaveRemoves, removeDoesNotFence,
}

// configure returns the configuration a backend with fault f is made
// with: the replay-window faults misapply Config.
func (f fault) configure(cfg backendtest.Config) backendtest.Config {
	switch f {
	case windowIgnored:
		cfg.ReplayWindow = 0
	case windowIsCapacity:
		cfg.ReplayWindow = cfg.Capacity
	case windowOnTop:
		if cfg.ReplayWindow > 0 {
			cfg.Capacity += cfg.ReplayWindow
		}
	case expiryLate:
		if cfg.SessionTimeout > 0 {
			cfg.SessionTimeout += time.Nanosecond
		}
	}
	return cfg
}

// faultyBackend is the engine backend behind the seams, with fault f
// switched on (noFault: none).
type faultyBackend struct {
	tributary.Backend
	f   fault
	cfg backendtest.Config // as the check asked for it

	// mu guards shared: incarnationsShared's one member per names.
	mu     sync.Mutex
	shared map[[3]string]tributary.BackendMember
}

// SessionTimeout reports the session timeout the check asked for, which
// expiryLate does not enforce.
func (b *faultyBackend) SessionTimeout() time.Duration {
	if b.f == expiryLate {
		return b.cfg.SessionTimeout
	}
	return b.Backend.SessionTimeout()
}

// faultyTopic is a topic of a faultyBackend: its seams are TryPublish,
// Publish and Member.
type faultyTopic struct {
	tributary.BackendTopic
	b *faultyBackend
}

// faultyMember is a member of a faultyTopic: its seams are the member's
// calls.
type faultyMember struct {
	tributary.BackendMember
	t      *faultyTopic
	member string
}

func (b *faultyBackend) CreateTopic(topic string, n int32, pt string) (bool, error) {
	if b.f == createClampsCount {
		n = max(1, min(n, 64))
	}
	ok, err := b.Backend.CreateTopic(topic, n, pt)
	if b.f == duplicateTopicTrue && err == nil {
		return true, nil
	}
	return ok, err
}

func (b *faultyBackend) OpenTopic(topic string) (tributary.BackendTopic, string, error) {
	tp, pt, err := b.Backend.OpenTopic(topic)
	if b.f == unknownTopicErrors && errors.Is(err, tributary.ErrUnknownTopic) {
		return nil, "", fmt.Errorf("%w: %q", tributary.ErrInvalidArgument, topic)
	}
	if err != nil {
		return tp, pt, err
	}
	return &faultyTopic{BackendTopic: tp, b: b}, pt, nil
}

func (b *faultyBackend) Describe(topic string) (engine.TopicDescription, error) {
	d, err := b.Backend.Describe(topic)
	if b.f == unknownTopicErrors && err != nil {
		return d, fmt.Errorf("%w: %q", tributary.ErrUnknownTopic, topic)
	}
	if b.f == lastSeenDropped {
		for i := range d.Groups {
			d.Groups[i].LastSeen = nil
		}
	}
	return d, err
}

func (b *faultyBackend) Snapshot(topic string) (engine.TopicSnapshot, error) {
	s, err := b.Backend.Snapshot(topic)
	if b.f == snapshotNoHeaders {
		for _, recs := range s.Records {
			for i := range recs {
				recs[i].Headers = nil
			}
		}
	}
	return s, err
}

func (b *faultyBackend) CreateGroup(topic, group string, a engine.Assignor, opts ...tributary.GroupOption) (bool, error) {
	switch b.f {
	case groupOptsForgotten:
		opts = nil
	case startIgnored:
		if cfg, err := tributary.NewGroupConfig(topic, opts...); err == nil {
			opts = nil
			if cfg.DeadLetter != "" {
				opts = append(opts, tributary.WithDeadLetter(cfg.DeadLetter, cfg.MaxAttempts))
			}
			if cfg.Backoff != 0 {
				opts = append(opts, tributary.WithBackoff(cfg.Backoff, cfg.MaxBackoff))
			}
		}
	}
	ok, err := b.Backend.CreateGroup(topic, group, a, opts...)
	if b.f == duplicateGroupTrue && err == nil {
		return true, nil
	}
	return ok, err
}

func (b *faultyBackend) GroupConfig(topic, group string) (tributary.GroupConfig, bool, error) {
	c, ok, err := b.Backend.GroupConfig(topic, group)
	if b.f == configDropsStart {
		c.Start = engine.StartEarliest
	}
	return c, ok, err
}

func (b *faultyBackend) RemoveMember(topic, group, member string) (bool, error) {
	switch b.f {
	case removeDoesNotFence:
		// A Leave through a member of its own: the engine's membership
		// goes, the incarnation that joined stays unfenced.
		if tp, _, err := b.Backend.OpenTopic(topic); err == nil {
			if m, err := tp.Member(group, member); err == nil {
				return m.Leave()
			}
		}
	case removeIsNoop:
		if engine.CheckIdentifier("member", member) == nil {
			if _, err := b.Backend.Describe(topic); err == nil {
				return true, nil
			}
		}
	case removeAbsentTrue:
		ok, err := b.Backend.RemoveMember(topic, group, member)
		if err == nil {
			return true, nil
		}
		return ok, err
	}
	return b.Backend.RemoveMember(topic, group, member)
}

func (b *faultyBackend) AddPartitions(topic string, k int32) (int32, error) {
	if b.f == addClamps && k >= 1 {
		if tp, _, err := b.Backend.OpenTopic(topic); err == nil {
			k = max(1, min(k, 64-tp.Partitions()))
		}
	}
	n, err := b.Backend.AddPartitions(topic, k)
	if b.f == addReturnsAdded && err == nil {
		return k, nil
	}
	return n, err
}

func (b *faultyBackend) DeleteGroup(topic, group string) (bool, error) {
	ok, err := b.Backend.DeleteGroup(topic, group)
	if b.f == deleteIgnoresMember && errors.Is(err, tributary.ErrGroupNotEmpty) {
		return false, nil
	}
	return ok, err
}

func (b *faultyBackend) SetAssignor(topic, group string, a engine.Assignor) (bool, error) {
	if b.f == setAssignorNoOp && a != nil {
		d, err := b.Describe(topic)
		if err == nil && slices.ContainsFunc(d.Groups, func(g engine.GroupDescription) bool { return g.Group == group }) {
			return true, nil
		}
	}
	return b.Backend.SetAssignor(topic, group, a)
}

func (b *faultyBackend) Seek(topic, group string, p int32, off int64) (bool, error) {
	ok, err := b.Backend.Seek(topic, group, p, off)
	if b.f == seekIgnoresRange && errors.Is(err, tributary.ErrOffsetOutOfRange) {
		return true, nil
	}
	return ok, err
}

func (t *faultyTopic) TryPublish(p int32, m engine.Message) (int64, error) {
	if t.b.f == emptyPayloadInvalid && m.Payload == "" {
		return -1, fmt.Errorf("%w: empty payload", tributary.ErrInvalidArgument)
	}
	if t.b.f == exactLimitInvalid && t.b.cfg.MaxMessageBytes > 0 {
		n := len(m.Key) + len(m.Payload)
		for _, h := range m.Headers {
			n += len(h.Key) + len(h.Value)
		}
		if n == t.b.cfg.MaxMessageBytes {
			return -1, fmt.Errorf("%w: too big", tributary.ErrInvalidArgument)
		}
	}
	off, err := t.BackendTopic.TryPublish(p, m)
	if t.b.f == publishNeverFull && errors.Is(err, tributary.ErrPartitionFull) {
		d, derr := t.b.Describe(t.Name())
		if derr == nil {
			return d.Partitions[p].LogEndOffset, nil
		}
	}
	return off, err
}

func (t *faultyTopic) Publish(ctx context.Context, stop <-chan struct{}, p int32, m engine.Message) (int64, error) {
	switch t.b.f {
	case publishDoesNotWait:
		return t.TryPublish(p, m)
	case roomOnlyOnTrim:
		return t.publishOnTrim(ctx, stop, p, m)
	}
	return t.BackendTopic.Publish(ctx, stop, p, m)
}

// publishOnTrim is a Publish woken only by a removal: on a full partition
// it waits until the log start moves, although an ack that makes the
// oldest record fully committed lets a publish with a replay window give
// it up (SPEC rule 21) without removing anything first.
func (t *faultyTopic) publishOnTrim(ctx context.Context, stop <-chan struct{}, p int32, m engine.Message) (int64, error) {
	start := func() (int64, error) {
		d, err := t.b.Describe(t.Name())
		if err != nil {
			return 0, err
		}
		return d.Partitions[p].LogStartOffset, nil
	}
	for {
		off, err := t.TryPublish(p, m)
		if !errors.Is(err, tributary.ErrPartitionFull) {
			return off, err
		}
		was, err := start()
		if err != nil {
			return -1, err
		}
		for now := was; now == was; {
			select {
			case <-ctx.Done():
				return -1, ctx.Err()
			case <-stop:
				return -1, tributary.ErrClosed
			case <-time.After(time.Millisecond):
			}
			if now, err = start(); err != nil {
				return -1, err
			}
		}
	}
}

func (t *faultyTopic) Member(group, member string) (tributary.BackendMember, error) {
	if t.b.f == membersFoldCase {
		member = strings.ToLower(member)
	}
	if t.b.f == incarnationsShared {
		k := [3]string{t.Name(), group, member}
		t.b.mu.Lock()
		defer t.b.mu.Unlock()
		if m, ok := t.b.shared[k]; ok {
			return &faultyMember{BackendMember: m, t: t, member: member}, nil
		}
		m, err := t.BackendTopic.Member(group, member)
		if err != nil {
			return m, err
		}
		if t.b.shared == nil {
			t.b.shared = map[[3]string]tributary.BackendMember{}
		}
		t.b.shared[k] = m
		return &faultyMember{BackendMember: m, t: t, member: member}, nil
	}
	m, err := t.BackendTopic.Member(group, member)
	if err != nil {
		return m, err
	}
	return &faultyMember{BackendMember: m, t: t, member: member}, nil
}

func (m *faultyMember) Rejoin() ([]int32, error) {
	if m.t.b.f == rejoinKeepsInFlight {
		return m.BackendMember.Join()
	}
	return m.BackendMember.Rejoin()
}

func (m *faultyMember) Heartbeat() (bool, error) {
	switch m.t.b.f {
	case heartbeatNoRefresh:
		// Membership as a heartbeat sees it (Describe expires who is
		// due), with no refresh.
		d, err := m.t.b.Describe(m.t.Name())
		if err != nil {
			return false, err
		}
		for _, g := range d.Groups {
			if g.Group == m.Group() {
				return slices.Contains(g.Members, m.member), nil
			}
		}
		return false, nil
	case heartbeatRejoins:
		ok, err := m.BackendMember.Heartbeat()
		if err == nil && !ok {
			if _, err := m.BackendMember.Join(); err != nil {
				return false, err
			}
			return true, nil
		}
		return ok, err
	}
	return m.BackendMember.Heartbeat()
}

func (m *faultyMember) Leave() (bool, error) {
	ok, err := m.BackendMember.Leave()
	if m.t.b.f == fencedLeaveRemoves && err == nil && !ok {
		return m.t.b.Backend.RemoveMember(m.t.Name(), m.Group(), m.member)
	}
	return ok, err
}

// inFlightTo reports whether (p, off) is in flight to m now, by Describe.
func (m *faultyMember) inFlightTo(p int32, off int64) bool {
	gp, found := m.state(p)
	return found && gp.InFlight && gp.Owner == m.member && gp.Committed == off
}

// deliverable reports whether, by Describe, a partition m owns has a
// record at its committed offset and nothing in flight.
func (m *faultyMember) deliverable() bool {
	d, err := m.t.b.Describe(m.t.Name())
	if err != nil {
		return true
	}
	for _, g := range d.Groups {
		if g.Group != m.Group() {
			continue
		}
		for p, gp := range g.Partitions {
			if gp.Owner == m.member && !gp.InFlight && gp.Committed < d.Partitions[p].LogEndOffset {
				return true
			}
		}
	}
	return false
}

func (m *faultyMember) Join() ([]int32, error) {
	parts, err := m.BackendMember.Join()
	if m.t.b.f == joinDescending {
		slices.Reverse(parts)
	}
	return parts, err
}

func (m *faultyMember) Ack(p int32, off int64) (bool, error) {
	if m.t.b.f == negativeOffsetFalse && off < 0 {
		return false, nil
	}
	if m.t.b.f == invalidRefreshes && off < 0 {
		m.BackendMember.Heartbeat() //nolint:errcheck // the fault: a refresh before the refusal
	}
	if m.t.b.f == falseAckNoRefresh && off >= 0 && !m.inFlightTo(p, off) {
		return false, nil
	}
	ok, err := m.BackendMember.Ack(p, off)
	if m.t.b.f == ackAnyOffset && err == nil && !ok {
		if gp, found := m.state(p); found && gp.InFlight && gp.Owner == m.member {
			return m.BackendMember.Ack(p, gp.Committed)
		}
	}
	return ok, err
}

func (m *faultyMember) Retry(p int32, off int64) (bool, error) {
	if m.t.b.f == retryCommits {
		return m.BackendMember.Ack(p, off)
	}
	if m.t.b.f == falseAckNoRefresh && off >= 0 && !m.inFlightTo(p, off) {
		return false, nil
	}
	return m.BackendMember.Retry(p, off)
}

func (m *faultyMember) TryPoll(dst []engine.Record, n int32) ([]engine.Record, error) {
	if m.t.b.f == emptyPollNoRefresh && n >= 1 && n <= engine.MaxPollRecords && !m.deliverable() {
		return dst, nil
	}
	out, err := m.BackendMember.TryPoll(dst, n)
	if err != nil {
		return out, err
	}
	switch m.t.b.f {
	case pollDropsDst:
		return out[len(dst):], nil
	case pollDropsKey:
		for i := len(dst); i < len(out); i++ {
			out[i].Key = ""
		}
	case attemptAlwaysOne:
		for i := len(dst); i < len(out); i++ {
			out[i].Attempt = 1
		}
	case pollIgnoresOwners:
		s, serr := m.t.b.Snapshot(m.t.Name())
		if serr != nil {
			return out, nil
		}
		for _, g := range s.Groups {
			if g.Group != m.Group() {
				continue
			}
			for _, gp := range g.Partitions {
				if gp.Owner == m.member || gp.InFlight || len(out)-len(dst) >= int(n) {
					continue
				}
				for _, r := range s.Records[gp.Partition] {
					if r.Offset == gp.Committed {
						r.Attempt = 1
						out = append(out, r)
					}
				}
			}
		}
	}
	return out, nil
}

func (m *faultyMember) Poll(ctx context.Context, stop <-chan struct{}, dst []engine.Record, n int32) ([]engine.Record, error) {
	if m.t.b.f == pollNeverWakes {
		out, err := m.TryPoll(dst, n)
		if err != nil || len(out) > len(dst) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-stop:
			return out, tributary.ErrClosed
		}
	}
	if m.t.b.f == pollIgnoresStop {
		stop = nil
	}
	out, err := m.BackendMember.Poll(ctx, stop, dst, n)
	if m.t.b.f == pollCtxNoError && ctx.Err() != nil {
		return out, nil
	}
	return out, err
}

// state returns the member's group's state on partition p.
func (m *faultyMember) state(p int32) (engine.GroupPartition, bool) {
	d, err := m.t.b.Describe(m.t.Name())
	if err != nil {
		return engine.GroupPartition{}, false
	}
	for _, g := range d.Groups {
		if g.Group == m.Group() && int(p) < len(g.Partitions) {
			return g.Partitions[p], true
		}
	}
	return engine.GroupPartition{}, false
}

// recorder is a testing.TB that records failures instead of reporting
// them: FailNow ends the check's goroutine with runtime.Goexit.
type recorder struct {
	testing.TB
	// mu guards failures.
	mu       sync.Mutex
	failures []string
}

func (r *recorder) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, msg)
}

func (r *recorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recorder) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recorder) Fail()                             { r.record("Fail") }
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Log(...any)                        {}
func (r *recorder) Logf(string, ...any)               {}
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}

// runRecorded runs c on backends of f in a goroutine and returns its
// failures; a panic counts as one.
func runRecorded(t *testing.T, c backendtest.Check, f fault) []string {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				rec.record(fmt.Sprint("panic: ", v))
			}
		}()
		c.Run(rec, func(cfg backendtest.Config) tributary.Backend {
			return &faultyBackend{Backend: engineFactory(t, f.configure(cfg)), f: f, cfg: cfg}
		})
	}()
	<-done
	return rec.failures
}

// runAll runs every check on backends with fault f, all at once (most of
// a check's time is spent waiting), and returns the names of those that
// failed, in check order.
func runAll(t *testing.T, checks []backendtest.Check, f fault) (failed []string, failures [][]string) {
	failures = make([][]string, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { failures[i] = runRecorded(t, c, f) })
	}
	wg.Wait()
	for i, c := range checks {
		if len(failures[i]) > 0 {
			failed = append(failed, c.Name)
		}
	}
	return failed, failures
}

// TestSuiteDetectsFaults shows that the checks can fail: through the
// decorator with no fault every check passes; with each fault at least
// one check fails; and every check is failed by at least one fault. The
// waits of the blocking checks are shortened so that a fault that leaves a
// call blocked costs a second, not ten.
func TestSuiteDetectsFaults(t *testing.T) {
	defer func(w time.Duration) { backendtest.Wait = w }(backendtest.Wait)
	backendtest.Wait = time.Second
	checks := backendtest.Checks()
	t.Run("no fault", func(t *testing.T) {
		failed, failures := runAll(t, checks, noFault)
		require.Empty(t, failed, "checks failing through the fault-free decorator: %v", failures)
	})
	caughtAny := map[string]bool{}
	for _, f := range faults {
		t.Run(string(f), func(t *testing.T) {
			caught, _ := runAll(t, checks, f)
			require.NotEmpty(t, caught, "no check detects the fault %q", f)
			t.Logf("caught by %d checks: %v", len(caught), caught)
			for _, name := range caught {
				caughtAny[name] = true
			}
		})
	}
	var never []string
	for _, c := range checks {
		if !caughtAny[c.Name] {
			never = append(never, c.Name)
		}
	}
	require.Empty(t, never, "checks that none of the faults trips")
}
