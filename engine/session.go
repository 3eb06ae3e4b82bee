package engine

import (
	"fmt"
	"math"
	"slices"
	"time"

	"sync/atomic"

	"github.com/f91dcac0/tributary/shard"
)

// Member liveness (SPEC rules 24 and 25): a session timeout, heartbeats and
// a fenced rejoin. The package doc's "Member liveness" section has the
// design: one atomic word per member (its last-seen instant), one atomic
// word per topic (the earliest instant at which any of its members can
// expire), and lazy expiry under the topic's membership lock.

// WithSessionTimeout makes every member of every group expire once it has
// not been seen for d by the broker clock (SPEC rule 24), as Kafka's
// session.timeout.ms: a member's last-seen instant is set by its Join or
// Rejoin and refreshed by each valid Join, Rejoin, Poll, AppendPoll,
// AppendPollPartition, Ack, Retry or Heartbeat that names it while it is a
// member, whatever the call returns. A member whose last-seen instant is d
// or more before a call's reading of the broker clock is expired: that
// call, if valid and on the member's topic, first removes it from its group
// exactly as Leave would (one rebalance per group, its in-flight deliveries
// cancelled, committed offsets kept), then acts. Expiry is lazy: no
// goroutine or timer runs. Last-seen instants, and the readings of the
// calls that name a member, are of the exact broker clock, never the
// coarse copy that stamps records (WithClock), so on the default clock a
// member expires no earlier than d after it was last seen. A publish, which
// names no member, compares its record's time with the topic's earliest
// deadline: on the default clock a coarse reading, which may lag the exact
// one (a session that has only just run out is then left to the next call)
// and expires nobody by itself; when the deadline looks due, the expiry
// runs at an exact reading, so a publish never expires a member early
// either. d must be > 0; the default is none (members never expire, and
// rules 1–23 hold exactly).
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.session, c.sessionSet = d, true }
}

// SessionTimeout returns the session timeout given by WithSessionTimeout,
// or 0 when members never expire.
func (b *Broker) SessionTimeout() time.Duration { return time.Duration(b.session) }

// sessionGone is a session's seen word once an expiry has claimed the
// member: no refresh succeeds after it. It is below every clock reading
// WithClock allows (1678 onwards).
const sessionGone = math.MinInt64

// noDeadline is topic.deadline when no member of the topic can expire.
const noDeadline = math.MaxInt64

// session is one member's liveness state: its last-seen instant on the
// broker clock, in Unix nanoseconds, or sessionGone. It is written only by
// compare-and-swap: a refresh raises it (never lowers it), an expiry claims
// it (sessionGone) only if it is still the value the expiry judged expired,
// and only the holder of topic.mu claims it or gives a claimed word back.
// Padded to a padding unit of its own: each member's calls write their own
// word.
type session struct {
	seen atomic.Int64
	_    [shard.CacheLineSize - 8]byte
}

// newSession returns a session last seen at now.
func newSession(now int64) *session {
	s := new(session)
	s.seen.Store(now)
	return s
}

// refresh raises the last-seen instant to now (SPEC rule 24) and reports
// true, or reports false, changing nothing, when an expiry has claimed the
// session: the caller then waits for that expiry under topic.mu and looks
// again. A reading older than the last-seen instant leaves it as it is.
func (s *session) refresh(now int64) bool {
	for {
		w := s.seen.Load()
		if w == sessionGone {
			return false
		}
		if w >= now {
			return true
		}
		if s.seen.CompareAndSwap(w, now) {
			return true
		}
	}
}

// claim marks the session expired if it is at now, returning the last-seen
// instant it replaced; false when the member is not expired (a refresh may
// have just raised it). The caller holds topic.mu.
func (t *topic) claim(s *session, now int64) (int64, bool) {
	for {
		w := s.seen.Load()
		if w == sessionGone || !t.expiredAt(w, now) {
			return w, false
		}
		if s.seen.CompareAndSwap(w, sessionGone) {
			return w, true
		}
	}
}

// expiredAt reports whether a member last seen at seen is expired at now:
// d or more before it (SPEC rule 24).
func (t *topic) expiredAt(seen, now int64) bool {
	return now >= t.hooks.expiresAt(deadlineOf(seen, t.b.session))
}

// deadlineOf is the instant a member last seen at seen expires, with
// session timeout d; saturating at noDeadline.
func deadlineOf(seen, d int64) int64 {
	if seen > noDeadline-d {
		return noDeadline
	}
	return seen + d
}

// sessionNow reads the broker clock for a call's expiry and refresh, or
// returns 0 without a session timeout (the clock is not read).
func (b *Broker) sessionNow() int64 {
	if b.session == 0 {
		return 0
	}
	return b.nowNanos()
}

// expire is the lazy expiry of a call at now that holds no lock (SPEC rule
// 24): one load of the topic's deadline and, only when it has come, the
// expiry under topic.mu.
func (t *topic) expire(now int64) {
	if now < t.deadline.Load() {
		return
	}
	t.mu.Lock()
	t.expireLocked(now)
	t.mu.Unlock()
}

// expireBy is expire for a publish whose reading of the broker clock is
// now, a coarse one when coarse. A coarse reading only filters: it is one
// load and compare against the topic's deadline, and the expiry itself,
// when the deadline looks due, runs at an exact reading. The coarse clock
// may lag the exact one (the expiry then waits for a later call) and may
// also run ahead of it, by up to wallClockResync after the wall clock
// stepped back (coarseClock.advance keeps its later reading), so expiring
// at the coarse reading itself could end a session early.
func (t *topic) expireBy(now int64, coarse bool) {
	if coarse && now >= t.deadline.Load() {
		now = t.b.nowNanos()
	}
	t.expire(now)
}

// expireLocked removes every member of the topic that is expired at now,
// each group's expired members in one rebalance (exactly as Leave of all of
// them at once), and stores the topic's new deadline. A group whose
// assignor refuses the rebalance changes nothing: its expired members stay
// (as a failed Leave) and keep the deadline due, so the next call tries
// again. Without a session timeout it does nothing. The caller holds
// topic.mu.
func (t *topic) expireLocked(now int64) {
	if t.b.session == 0 || now < t.deadline.Load() {
		return
	}
	for _, g := range t.groups.AppendValues(nil) {
		if len(g.members) == 0 {
			continue
		}
		a := g.assign.Load()
		var gone []string
		var was []int64
		for _, m := range g.members {
			if w, ok := t.claim(a.sessions[m], now); ok {
				gone, was = append(gone, m), append(was, w)
			}
		}
		if len(gone) == 0 {
			continue
		}
		members := slices.DeleteFunc(slices.Clone(g.members), func(m string) bool { return slices.Contains(gone, m) })
		next, err := t.plan(g, members, g.assignor, g.assignorName, a.cursors, now)
		if err != nil {
			giveBack(a, gone, was)
			continue
		}
		g.members = members
		t.hooks.rebalanceExpired(t, g, next, a, gone, was)
		g.ready.notify()
	}
	t.deadline.Store(t.earliestLocked())
}

// giveBack gives the claimed sessions of the members gone in a back their
// last-seen instants was, as claim found them.
func giveBack(a *assignment, gone []string, was []int64) {
	for i, m := range gone {
		a.sessions[m].seen.Store(was[i])
	}
}

// earliestLocked returns the earliest instant at which a member of the
// topic expires, from its members' sessions now; noDeadline with none.
// Sessions only grow while the caller holds topic.mu, so the result stays
// a lower bound. The caller holds topic.mu.
func (t *topic) earliestLocked() int64 {
	d := int64(noDeadline)
	for _, g := range t.groups.AppendValues(nil) {
		a := g.assign.Load()
		for _, m := range g.members {
			d = min(d, deadlineOf(a.sessions[m].seen.Load(), t.b.session))
		}
	}
	return d
}

// lockExpired starts a call that takes topic.mu: it reads the broker clock
// (with a session timeout; 0 without), locks topic.mu and expires, at that
// reading, the members whose session has run out (SPEC rule 24), and
// returns the reading. The caller unlocks topic.mu.
func (t *topic) lockExpired() int64 {
	now := t.b.sessionNow()
	t.mu.Lock()
	t.expireLocked(now)
	return now
}

// lockedGroup returns groupName's group, t.mu held (the caller holds it
// and unlocks it); or nil, having unlocked t.mu, when the group is absent.
func (t *topic) lockedGroup(groupName string) *group {
	g := t.groups.Load(groupName)
	if g == nil {
		t.mu.Unlock()
	}
	return g
}

// lockGroup is lockExpired followed by lockedGroup: the group, with t.mu
// held, which the caller unlocks, or nil, with t.mu not held, when it is
// absent; and the clock reading.
func (t *topic) lockGroup(groupName string) (*group, int64) {
	now := t.lockExpired()
	return t.lockedGroup(groupName), now
}

// lockMember is the start of a member's call that changes the topic: the
// lookup of topicName, checkGroupMember, then lockExpired. It returns the
// topic with t.mu held, which the caller unlocks, and the clock reading;
// or the first ErrInvalidArgument error of the three identifiers, with
// nothing locked.
func (b *Broker) lockMember(topicName, groupName, member string) (*topic, int64, error) {
	t, err := b.lookup(topicName)
	if err != nil {
		return nil, 0, err
	}
	if err := checkGroupMember(groupName, member); err != nil {
		return nil, 0, err
	}
	return t, t.lockExpired(), nil
}

// lockMemberGroup is lockMember followed by lockedGroup: the topic and
// the group, with t.mu held, which the caller unlocks, and the clock
// reading; or a nil group, with t.mu not held, and the invalid
// identifier's error, or nil when the group is absent.
func (b *Broker) lockMemberGroup(topicName, groupName, member string) (*topic, *group, int64, error) {
	t, now, err := b.lockMember(topicName, groupName, member)
	if err != nil {
		return nil, nil, 0, err
	}
	return t, t.lockedGroup(groupName), now, nil
}

// absentGroup is the answer of a member's call on a group that is absent:
// the first ErrInvalidArgument error of the identifiers; or nil, after the
// expiry at the clock's reading with WithSessionTimeout (SPEC rule 24: every
// valid call on the topic expires).
func (t *topic) absentGroup(groupName, member string) error {
	if err := checkGroupMember(groupName, member); err != nil {
		return err
	}
	if b := t.b; b.session > 0 {
		t.expire(b.nowNanos())
	}
	return nil
}

// Heartbeat tells the broker that member of group on topic is alive (SPEC
// rule 24): with WithSessionTimeout it refreshes the member's last-seen
// instant and returns true, or returns false when the group or the member
// is absent (an expired member included: it must Join again). It changes
// nothing else. Without WithSessionTimeout it answers membership the same
// way and records nothing. Like every valid call on the topic it first
// expires the members whose session has run out. Errors
// (ErrInvalidArgument): unknown topic, invalid identifier.
func (b *Broker) Heartbeat(topicName, groupName, member string) (bool, error) {
	t, g, now, err := b.lockMemberGroup(topicName, groupName, member)
	if g == nil {
		return false, err
	}
	defer t.mu.Unlock()
	a := g.assign.Load()
	if _, ok := a.masks[member]; !ok {
		return t.hooks.heartbeatAbsent(false, t, g, member, now), nil
	}
	t.refreshLocked(a, member, now)
	return true, nil
}

// refreshLocked refreshes member's session in a, g's current assignment,
// with a session timeout. The caller holds topic.mu, under which no session
// of a current member is claimed.
func (t *topic) refreshLocked(a *assignment, member string, now int64) {
	if t.b.session == 0 {
		return
	}
	if !a.sessions[member].refresh(now) {
		panic("engine: a current member's session is claimed outside an expiry")
	}
}

// Rejoin is Join for a new incarnation of member (SPEC rule 25): if member
// is not in group (or the group is absent) it is exactly Join; if it is,
// each of its in-flight deliveries is cancelled at that instant as if it
// had called Retry on it (the record is delivered again, Attempt + 1), its
// last-seen instant is refreshed, and its membership and assignment stay as
// they are: no rebalance. It returns the member's partitions in ascending
// order, in a new slice owned by the caller. A process that restarts under
// the same member name calls Rejoin, so the deliveries its predecessor held
// are not stranded until an ack or session timeout. Rejoin works with or
// without WithSessionTimeout. Errors: as Join.
func (b *Broker) Rejoin(topicName, groupName, member string) ([]int32, error) {
	t, now, err := b.lockMember(topicName, groupName, member)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	g := t.groups.Load(groupName)
	if g == nil {
		return t.joinLocked(groupName, member, now)
	}
	a := g.assign.Load()
	mask, ok := a.masks[member]
	if !ok {
		return t.joinLocked(groupName, member, now)
	}
	t.refreshLocked(a, member, now)
	// Hold every cursor of the member's partitions (ascending, the lock
	// order) while cancelling, so that the cancellation is one instant.
	cancelled := false
	for p, rest, more := mask.First(); more; p, rest, more = rest.First() {
		a.cursors[p].mu.Lock()
	}
	cancel := t.hooks.rejoinCancels(mask, a)
	for p, rest, more := cancel.First(); more; p, rest, more = rest.First() {
		c := a.cursors[p]
		if !c.inFlight {
			continue
		}
		c.inFlight = false // attempts kept: the redelivery is Attempt + 1 (rule 16)
		cancelled = true
	}
	unlockCursors(a, mask)
	if cancelled {
		g.ready.notify()
	}
	return mask.AppendTo(make([]int32, 0, mask.Len())), nil
}

// Heartbeat is Broker.Heartbeat for this member (SPEC rule 24).
func (m *MemberHandle) Heartbeat() (bool, error) {
	return m.t.b.Heartbeat(m.t.name, m.group, m.member)
}

// Rejoin is Broker.Rejoin for this member (SPEC rule 25): the member's
// partitions, ascending, in a new slice.
func (m *MemberHandle) Rejoin() ([]int32, error) {
	return m.t.b.Rejoin(m.t.name, m.group, m.member)
}

// checkSession returns ErrInvalidArgument for a session timeout out of
// range.
func (c *config) checkSession() error {
	if c.sessionSet && c.session <= 0 {
		return fmt.Errorf("%w: session timeout %v, want > 0", ErrInvalidArgument, c.session)
	}
	return nil
}
