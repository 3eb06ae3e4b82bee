package jetstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/engine/assign"
)

// Member is a tributary.BackendMember: one (topic, group, member). Its
// state is read from the state stream on each call, so any number of
// handles, in any processes, may name the same member; what a Member keeps
// is the incarnation it joined. A member's incarnation is a random token
// recorded in its group's state: Rejoin starts a new one (in any process),
// superseding every Member of the earlier one; Join starts one for a
// member not in its group and otherwise joins the current one (so Members
// that only Join act together by name, as the engine's handles do). A
// Member that has joined and finds another incarnation current, or its
// member removed, is superseded for good: its calls return an error
// wrapping tributary.ErrFenced and tributary.ErrClosed and change nothing,
// and its Leave leaves nothing. A delivery belongs to the incarnation that
// was current when it was polled: a superseded one's is taken again by the
// current incarnation's next poll (Attempt + 1), never acked.
type Member struct {
	t     *Topic
	b     *Backend
	group string
	name  string
	inc   atomic.Pointer[string]  // the incarnation it joined, once it has
	own   sync.Map                // tokens it wrote or is writing (a reply may be lost)
	state atomic.Int32            // memberFresh, memberJoined or memberFenced
	owned atomic.Pointer[[]int32] // the partitions it owned at its last poll: what the next one's snapshot reads
	// reserved holds, per partition (int32 → reservation), the cursor
	// this Member's poll wrote when it reserved a record there, with the
	// revision of that write: what its Ack or Retry compare-and-sets
	// without reading anything (settle's fast path).
	reserved sync.Map
}

// reservation is a cursor as a poll of this Member wrote it, and the
// revision of that write. It is kept only for a write that no Rejoin and
// no Seek hold could have come before unseen (pollPartition): any later
// write of the cursor (a migration, a Rejoin's cancellation or stamp, a
// Seek's stamp, another handle's settle) changes the revision, and the
// fast path's compare-and-set then fails and reads everything instead.
type reservation struct {
	c   cursorVal
	rev uint64
}

// A Member's state: fresh until its first Join or Rejoin, joined after it
// (fresh again after its own Leave), fenced for good once superseded.
const (
	memberFresh int32 = iota
	memberJoined
	memberFenced
)

// newIncarnation returns a fresh incarnation token: 16 random hex digits.
func newIncarnation() string {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// Group returns the member's group name.
func (m *Member) Group() string { return m.group }

// fencedErr is the error of a superseded Member's calls.
func (m *Member) fencedErr() error {
	return fmt.Errorf("%w: %w: member %q of group %q of topic %q: a newer incarnation joined, or it was removed",
		tributary.ErrClosed, tributary.ErrFenced, m.name, m.group, m.t.name)
}

// check fences m, for good, when gv (ok: the group exists) shows it
// superseded: it has joined, and its member is absent or another
// incarnation is current.
func (m *Member) check(gv *groupVal, ok bool) error {
	switch m.state.Load() {
	case memberFenced:
		return m.fencedErr()
	case memberFresh:
		return nil
	}
	// Current, or expired (rule 24 keeps the token of a member it
	// removes: the Member may join again); not fenced.
	cur := gv.Incs[m.name]
	if ok && (cur == *m.inc.Load() || cur == "" && gv.isMember(m.name)) {
		return nil
	}
	if _, mine := m.own.Load(cur); ok && cur != "" && mine {
		return nil
	}
	m.state.Store(memberFenced)
	return m.fencedErr()
}

// joined records a successful Join or Rejoin of incarnation inc, unless m
// was fenced meanwhile.
func (m *Member) joined(inc string) {
	m.inc.Store(&inc)
	m.state.CompareAndSwap(memberFresh, memberJoined)
}

// Join adds the member to its group, creating the group with RoundRobin at
// the log start offsets if absent (SPEC rule 7), rebalances it and returns
// the member's partitions ascending; joining twice changes nothing. It
// returns after every moved partition's cursor was migrated (in-flight
// deliveries of moved partitions cancelled, rule 9). A Join of a member
// already in its group joins its current incarnation (Rejoin starts a new
// one).
// Errors: an error wrapping tributary.ErrFenced once m is superseded;
// engine.ErrInvalidArgument (unknown topic), engine.ErrInvalidAssignment,
// ErrUnknownAssignor, ErrUnavailable.
func (m *Member) Join() ([]int32, error) {
	return m.join("")
}

// join is Join, and with inc set Rejoin's join of a member not in its
// group: a member added to the group gets inc as its incarnation (a new
// one when inc is empty); one already in it keeps the current one.
func (m *Member) join(inc string) ([]int32, error) {
	if m.state.Load() == memberFenced {
		return nil, m.fencedErr()
	}
	gv, changed, err := m.b.rebalance(m.t.name, m.group, nil, func(next *groupVal, exists bool, parts int32) (bool, error) {
		if err := m.check(next, exists); err != nil {
			return false, err
		}
		fresh := inc
		if fresh == "" {
			fresh = newIncarnation()
		}
		m.own.Store(fresh, true)
		if !exists {
			next.Assignor, next.Members = assign.RoundRobin.Name(), []string{m.name}
			next.Incs = map[string]string{m.name: fresh}
			return true, nil
		}
		if next.isMember(m.name) {
			if inc != "" && next.Incs[m.name] != inc {
				// Rejoin, and the member joined since it looked.
				next.setInc(m.name, inc)
				return true, nil
			}
			return len(next.Owners) < int(parts), nil
		}
		i, _ := slices.BinarySearch(next.Members, m.name)
		next.Members = slices.Insert(next.Members, i, m.name)
		next.setInc(m.name, fresh)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if changed {
		if gv, err = m.b.grow(m.t.name, m.group, gv); err != nil {
			return nil, err
		}
	}
	m.joined(gv.Incs[m.name])
	if err := m.live(&gv); err != nil {
		return nil, err
	}
	return owned(&gv, m.name), nil
}

// supersede makes inc its member's current incarnation if the member is
// in its group: a compare-and-set of the group's state that changes
// nothing else (no rebalance). was reports whether the member was in the group;
// gv is the group as written or read.
func (m *Member) supersede(inc string) (gv groupVal, was bool, err error) {
	for range maxRetries {
		gv, rev, ok, err := m.b.readGroup(m.t.name, m.group)
		if err != nil {
			return gv, false, err
		}
		if err := m.check(&gv, ok); err != nil {
			return gv, false, err
		}
		if !ok || !gv.isMember(m.name) {
			return gv, false, nil
		}
		if gv.Incs[m.name] == inc {
			return gv, true, nil
		}
		next := gv
		next.setInc(m.name, inc)
		_, ok, err = m.b.put(groupKey(m.t.name, m.group), next, rev)
		if err != nil {
			return gv, false, err
		}
		if ok {
			return next, true, nil
		}
	}
	return groupVal{}, false, fmt.Errorf("%w: joining %s/%s", ErrContention, m.t.name, m.group)
}

// Leave removes the member and rebalances (SPEC rule 8); false when the
// group or the member is absent, or when m is superseded (it leaves
// nothing). A group left empty keeps its cursors and counts for retention.
// Errors: as Join, but never ErrFenced.
func (m *Member) Leave() (bool, error) {
	if m.state.Load() == memberFenced {
		return false, nil
	}
	superseded := false
	_, changed, err := m.b.rebalance(m.t.name, m.group, nil, func(next *groupVal, exists bool, _ int32) (bool, error) {
		superseded = false
		if exists && m.check(next, true) != nil {
			superseded = true
			return false, nil
		}
		i, found := slices.BinarySearch(next.Members, m.name)
		if !exists || !found {
			return false, nil
		}
		next.Members = slices.Delete(next.Members, i, i+1)
		delete(next.Incs, m.name)
		return true, nil
	})
	if superseded {
		return false, nil
	}
	if err == nil {
		m.state.CompareAndSwap(memberJoined, memberFresh)
	}
	return changed, err
}

// owned returns m's partitions in gv, ascending, in a new slice.
func owned(gv *groupVal, m string) []int32 {
	ps := []int32{}
	for p, o := range gv.Owners {
		if o == m {
			ps = append(ps, int32(p))
		}
	}
	return ps
}

// Assignment returns the member's partitions now, ascending, in a new
// slice; empty when the server cannot be reached.
//
// It also writes any migration still pending on those partitions (a
// rebalance that gave them to the member and has not written, or will not
// write, their cursors: helping, as a poll does), so that once it shows a
// partition as the member's, the old owner's Ack by its poll's write there
// fails. With snapshot reads the group and the member's cursors are one
// request; key by key it reads the cursors of only the partitions the
// group's last rebalance gave the member (one request each: a rebalance
// that commits brings every cursor up to it, so an older migration is
// pending only when every later rebalance failed too).
func (m *Member) Assignment() []int32 {
	t, g := m.t.name, m.group
	snap, err := m.b.read(groupKey(t, g), groupCursorsKey(t, g))
	if err != nil && !errors.Is(err, errNoSnapshot) {
		return []int32{}
	}
	gv, _, ok, err := m.b.readGroupIn(snap, t, g)
	if err != nil || !ok {
		return []int32{}
	}
	m.dropMoved(&gv)
	mine := owned(&gv, m.name)
	for _, p := range mine {
		if snap == nil && gv.since(p) != gv.Gen {
			continue
		}
		if _, _, err := m.b.cursorForIn(snap, t, g, &gv, p); err != nil && !errors.Is(err, errStale) {
			break // the assignment stands; the next call helps again
		}
	}
	return mine
}

// dropMoved forgets the reservations of partitions gv does not give the
// member (settle's fast path): once this Member has seen a partition
// moved, its Ack there reads the group, as before the move it need not.
func (m *Member) dropMoved(gv *groupVal) {
	m.reserved.Range(func(k, _ any) bool {
		if gv.owner(k.(int32)) != m.name {
			m.reserved.Delete(k)
		}
		return true
	})
}

// checkMax returns engine.ErrInvalidArgument unless max is 1..64.
func checkMax(max int32) error {
	if max < 1 || max > engine.MaxPollRecords {
		return invalid("maxRecords %d outside 1..%d", max, engine.MaxPollRecords)
	}
	return nil
}

// TryPoll appends up to max (1..64) deliverable records to dst and returns
// at once (SPEC rule 10): for each owned partition ascending, the record at
// the committed offset if nothing is in flight there (or the delivery's ack
// timeout expired, rule 22), reserved by compare-and-set on the cursor
// (attempts + 1, rule 16). Absent group or member: dst unchanged. Errors:
// engine.ErrInvalidArgument (max out of range), ErrUnavailable. An error
// met after some records were reserved is not reported: those records,
// in flight to the member now, are returned with a nil error (a caller
// that drops records returned with an error would leave them in flight
// to nobody), and the error recurs at the next call.
func (m *Member) TryPoll(dst []engine.Record, max int32) ([]engine.Record, error) {
	if err := checkMax(max); err != nil {
		return dst, err
	}
	out, _, _, err := m.poll(dst, max, -1)
	return out, err
}

// TryPollPartition is TryPoll of partition alone with max 1. Errors:
// engine.ErrInvalidArgument (partition out of range), ErrUnavailable.
func (m *Member) TryPollPartition(dst []engine.Record, partition int32) ([]engine.Record, error) {
	if err := m.t.checkPartition(partition); err != nil {
		return dst, err
	}
	out, _, _, err := m.poll(dst, 1, partition)
	return out, err
}

// poll is TryPoll of every owned partition (only < 0) or of only. joined
// reports whether the member is in its group; expiry is the earliest ack
// timeout expiry (broker clock, Unix ns) of an in-flight delivery it
// skipped, 0 for none.
func (m *Member) poll(dst []engine.Record, max, only int32) (out []engine.Record, joined bool, expiry int64, err error) {
	out = dst
	for range maxRetries {
		// The group and the cursors and lows of only, or of the
		// partitions the member owned at its last poll (of every one
		// before its first), in one snapshot read where the state stream
		// takes them (batch.go); a key the snapshot lacks, as a partition
		// it owns since, is read by itself (getIn).
		keys := []string{groupKey(m.t.name, m.group)}
		switch owned := m.owned.Load(); {
		case only >= 0:
			keys = append(keys, cursorKey(m.t.name, m.group, only), lowKey(m.t.name, only))
		case owned != nil:
			for _, p := range *owned {
				keys = append(keys, cursorKey(m.t.name, m.group, p), lowKey(m.t.name, p))
			}
		default:
			keys = append(keys, groupCursorsKey(m.t.name, m.group), lowsKey(m.t.name))
		}
		snap, err := m.b.read(keys...)
		if err != nil && !errors.Is(err, errNoSnapshot) {
			return out, true, 0, err
		}
		gv, grev, ok, err := m.b.readGroupIn(snap, m.t.name, m.group)
		if err == nil {
			err = m.check(&gv, ok)
		}
		if err != nil || !ok || !gv.isMember(m.name) {
			return out, false, 0, err
		}
		if only < 0 {
			m.noteOwned(&gv)
		}
		m.dropMoved(&gv)
		stale := false
		var later []kept // reservations kept once the group is found unchanged
		for p, o := range gv.Owners {
			if o != m.name || only >= 0 && int32(p) != only {
				continue
			}
			if int32(len(out)-len(dst)) >= max {
				break
			}
			r, got, exp, err := m.pollPartition(snap, &gv, int32(p), &later)
			if errors.Is(err, errStale) {
				stale = true
				break
			}
			if err != nil {
				if len(out) > len(dst) {
					m.keep(later, grev)
					return out, true, 0, nil // reserved: the caller's (TryPoll)
				}
				return out, true, 0, err
			}
			if got {
				out = append(out, r)
			}
			if exp > 0 && (expiry == 0 || exp < expiry) {
				expiry = exp
			}
		}
		m.keep(later, grev)
		if !stale || len(out) > len(dst) {
			return out, true, expiry, nil
		}
	}
	return out, true, 0, fmt.Errorf("%w: polling %s/%s", ErrContention, m.t.name, m.group)
}

// kept is a reservation a poll made on partition p, for settle's fast path.
type kept struct {
	p   int32
	res reservation
}

// keep stores the reservations in later once the group is found still at
// revision grev, the revision the poll read it at (groupAt: one read for
// all of them).
func (m *Member) keep(later []kept, grev uint64) {
	if len(later) > 0 && m.groupAt(grev) {
		for _, k := range later {
			m.reserved.Store(k.p, k.res)
		}
	}
}

// noteOwned records the partitions gv gives the member, if they changed.
func (m *Member) noteOwned(gv *groupVal) {
	var owned []int32
	for p, o := range gv.Owners {
		if o == m.name {
			owned = append(owned, int32(p))
		}
	}
	if prev := m.owned.Load(); prev == nil || !slices.Equal(*prev, owned) {
		m.owned.Store(&owned)
	}
}

// pollPartition reserves the record at the group's committed offset on p
// if p is deliverable; gv is the group as the poll read it. The
// reservation, for settle's fast path, is stored now when its cursor was
// read at the group's instant, else appended to later, for keep. exp is
// the ack-timeout expiry of a delivery that blocks p, else 0.
func (m *Member) pollPartition(s *snapshot, gv *groupVal, p int32, later *[]kept) (r engine.Record, got bool, exp int64, err error) {
	key := cursorKey(m.t.name, m.group, p)
	m.reserved.Delete(p)
	var waited time.Time                                  // since when it waits for a placer (waitPlacer)
	for try := 0; try < maxRetries; try, s = try+1, nil { // a second round reads afresh
		c, crev, err := m.b.cursorForIn(s, m.t.name, m.group, gv, p)
		if err != nil || c.Owner != m.name {
			return r, false, 0, err
		}
		// The cursor was read at the group's instant (one snapshot):
		// see keep, below.
		atGroup := s.unchanged(key, crev)
		now := m.b.now().UnixNano()
		if u, ok := m.b.unsure.Load(key); ok {
			m.b.unsure.Delete(key)
			if u.(unsureReservation).matches(m.name, c) && c.MemberInc == gv.Incs[m.name] {
				// Our own reservation whose reply was lost: it took
				// effect, and no caller has the record. Deliver it now.
				r, ok, err := m.b.readRecord(m.t.name, p, c.Committed)
				if err != nil || !ok {
					m.b.unsure.Store(key, u)
					return r, false, 0, err
				}
				r.Attempt = c.Attempts
				return r, true, 0, nil
			}
		}
		// A delivery to a superseded incarnation of this member (polled
		// after its successor's Rejoin cancelled the others) is not in
		// flight to anyone who can ack it: its successor takes it again,
		// Attempt + 1.
		orphan := c.InFlight && c.MemberInc != "" && c.MemberInc != gv.Incs[m.name]
		if orphan {
			// Only if this incarnation is still the current one, read
			// after the cursor: a poll whose view of the group is older
			// than a Rejoin would otherwise take that Rejoin's own
			// deliveries (tokens are random: which of two is the newer
			// is known only from the group), and the current
			// incarnation could not ack them.
			now, _, ok, err := m.b.readGroup(m.t.name, m.group)
			if err != nil {
				return r, false, 0, err
			}
			if !ok || now.Inc != gv.Inc || now.Incs[m.name] != gv.Incs[m.name] {
				return r, false, 0, errStale // the poll reads the group again
			}
		}
		if c.InFlight && !orphan {
			to := int64(m.b.cfg.AckTimeout)
			if to <= 0 {
				return r, false, 0, nil
			}
			// The age, not DeliveredAt + to, is compared: the sum
			// overflows for a timeout of centuries (the expiry it
			// reports then saturates).
			if now-c.DeliveredAt < to {
				if c.DeliveredAt > math.MaxInt64-to {
					return r, false, math.MaxInt64, nil
				}
				return r, false, c.DeliveredAt + to, nil
			}
		}
		// A cursor below the log start is a placement (a Seek, a group
		// creation) that a purge overtook, about to be put back or moved
		// up by its placer (group.go, place): not a state of the model.
		// Wait for it rather than deliver from it or report nothing.
		if !s.unchanged(key, crev) {
			s = nil // cursorFor wrote the cursor: low is read after it
		}
		lv, _, err := m.b.readLowIn(s, m.t.name, p)
		if err != nil {
			return r, false, 0, err
		}
		held := lv.held(time.Now().UnixNano(), nil)
		if c.Committed < lv.Low {
			if err := m.b.waitPlacer(m.t.name, m.group, p, c.Inc, &waited); err != nil {
				return r, false, 0, err
			}
			continue
		}
		r, ok, err := m.b.readRecord(m.t.name, p, c.Committed)
		if err != nil {
			return r, false, 0, err
		}
		if !ok {
			// Beyond the log end: nothing to deliver. Or purged since
			// the cursor was read (low is raised before a purge): the
			// cursor has moved meanwhile (a Seek forward let an
			// evicting publish remove the record); read it again.
			lv, _, err := m.b.readLow(m.t.name, p)
			if err != nil || c.Committed >= lv.Low {
				return r, false, 0, err
			}
			continue
		}
		n := c
		n.InFlight, n.Attempts, n.DeliveredAt, n.MemberInc = true, c.Attempts+1, now, gv.Incs[m.name]
		nrev, ok, err := m.b.put(key, n, crev)
		if err != nil {
			// The write may have taken effect with its reply lost: the
			// record would then stay in flight to this member, delivered
			// to nobody, until an ack timeout or a rebalance. The next
			// poll of p through this Backend finds out and delivers it.
			m.b.unsure.Store(key, unsureReservation{Member: m.name, Cursor: n})
			return r, false, 0, err
		}
		if ok {
			switch res := (reservation{c: n, rev: nrev}); {
			case orphan || held:
			case atGroup:
				m.reserved.Store(p, res)
			default:
				*later = append(*later, kept{p, res})
			}
			r.Attempt = n.Attempts
			return r, true, 0, nil
		}
	}
	return r, false, 0, fmt.Errorf("%w: polling %s/%s/%d", ErrContention, m.t.name, m.group, p)
}

// groupAt reports whether the member's group is still at revision rev,
// by one read; false on any error.
//
// Why a reservation is kept only when its cursor was read at the group's
// instant or the group is unchanged after the write (settle's fast path
// acts on it without reading the group): a Rejoin elsewhere writes the
// group (a new incarnation) and then writes every cursor its member owns
// (cancelDeliveries). A poll whose group and cursor reads were one
// snapshot read the cursor before that Rejoin's group write if it read
// the group before it, so its compare-and-set fails if the Rejoin's
// cursor write came first and is cancelled by it otherwise. A poll that
// read the cursor after the group (key by key, or a second round) could
// have read it after the Rejoin's cursor write while holding a group from
// before the Rejoin, and reserve for a superseded incarnation; a group
// unchanged after the reservation rules that out. Likewise for a Seek's
// hold: a poll that saw low without an active hold read the cursor before
// the Seek's stamps (low is read after the cursor, or at its instant), so
// the stamp replaces its reservation's revision (a stamp whose
// compare-and-set the reservation failed reads the cursor again and
// writes it: Backend.stamp); one that saw a hold keeps nothing, and its
// Ack waits for the hold (settle).
func (m *Member) groupAt(rev uint64) bool {
	_, now, ok, err := m.b.readGroup(m.t.name, m.group)
	return err == nil && ok && now == rev
}

// unsureReservation is a cursor write of a poll whose outcome is unknown:
// Cursor is the value it wrote for Member.
type unsureReservation struct {
	Member string
	Cursor cursorVal
}

// matches reports whether the cursor c now read is the reservation u wrote
// for member, in flight to it with u's incarnation, offset, attempt and
// delivery time: the write took effect. The generation may have moved on
// since (a rebalance that left the partition to member keeps the delivery).
func (u unsureReservation) matches(member string, c cursorVal) bool {
	w := u.Cursor
	w.Gen = c.Gen
	return u.Member == member && c.InFlight && c == w
}

// Poll is TryPoll that, when nothing is deliverable, waits and polls again
// until it has at least one record. It waits without busy polling: on core
// NATS subscriptions to the record subjects and cursor keys of the
// partitions the member owns and to its group's key (a publish there, an
// Ack, a Retry or a Seek there, a rebalance wakes it, not a publish to or
// an Ack on another member's partition), on a timer for the earliest
// ack-timeout expiry, and at most fallbackWait (2 s: a reconnect may lose
// a wake-up). When its assignment changes it subscribes again. It returns
// ctx.Err() when ctx ends, and tributary.ErrClosed when stop or the
// Backend closes or the member is not in its group. Other errors: as
// TryPoll.
func (m *Member) Poll(ctx context.Context, stop <-chan struct{}, dst []engine.Record, max int32) ([]engine.Record, error) {
	if err := checkMax(max); err != nil {
		return dst, err
	}
	n := len(dst)
	out, joined, _, err := m.poll(dst, max, -1)
	if err != nil || len(out) > n {
		return out, err
	}
	if !joined {
		return out, m.notJoined()
	}
	b := m.b
	for {
		if err := ctx.Err(); err != nil {
			return out, err // the requests are not bound by ctx: stop between them
		}
		owned := m.owned.Load()
		out, err = block(ctx, stop, b, m.wakeSubjects(owned), out, func() ([]engine.Record, time.Duration, bool, error) {
			if err := ctx.Err(); err != nil {
				return dst, 0, true, err
			}
			out, joined, expiry, err := m.poll(dst, max, -1)
			if err != nil || len(out) > n {
				return out, 0, true, err
			}
			if !joined {
				return out, 0, true, m.notJoined()
			}
			if m.owned.Load() != owned {
				return out, 0, true, errReassigned
			}
			wait := b.pollWait
			if expiry > 0 {
				wait = min(wait, time.Duration(expiry-b.now().UnixNano()))
				if wait < time.Millisecond {
					wait = time.Millisecond
				}
			}
			return out, wait, false, nil
		}, func(backendClosed bool) error {
			if backendClosed {
				return fmt.Errorf("%w: backend closed", tributary.ErrClosed)
			}
			return tributary.ErrClosed
		})
		if !errors.Is(err, errReassigned) {
			return out, err
		}
	}
}

// errReassigned: a blocked Poll's member owns other partitions than it
// subscribed for; it subscribes again.
var errReassigned = errors.New("assignment changed")

// wakeSubjects are the subjects a blocked Poll of a member owning owned
// (nil: not known yet) waits on: its group's key, and the record subjects
// and cursor keys of owned, or of every partition past wakeWildcard
// partitions (one subscription each rather than two per partition).
func (m *Member) wakeSubjects(owned *[]int32) []string {
	b, t := m.b, m.t.name
	subjects := []string{b.stateSubject(groupKey(t, m.group))}
	if owned == nil || len(*owned) > wakeWildcard {
		return append(subjects, b.sp+".rec."+t+".*", b.stateSubject(groupCursorsKey(t, m.group)))
	}
	for _, p := range *owned {
		subjects = append(subjects, b.partSubject(t, p), b.stateSubject(cursorKey(t, m.group, p)))
	}
	return subjects
}

// wakeWildcard is the most partitions for which a blocked Poll subscribes
// to each partition's subjects rather than to the topic's wildcards.
const wakeWildcard = 8

func (m *Member) notJoined() error {
	return fmt.Errorf("%w: member %q is not in group %q of topic %q", tributary.ErrClosed, m.name, m.group, m.t.name)
}

// Ack commits the in-flight delivery (partition, offset) of this member
// (SPEC rule 11): the committed offset advances and attempts reset. False,
// nothing changed, unless the member owns partition and exactly that
// offset is in flight there to this incarnation (a partition that moved
// since the delivery was migrated, which cancelled it). A delivery this
// Member polled is settled by one compare-and-set on the cursor as its
// poll wrote it; anything else, or a cursor written since, reads the
// group, the cursor and the log start first (settle). Retention (rule 13)
// is owed, not run: the records the commit frees are removed by the next
// call that reads the log start (package doc, "Retention owed").
// Errors: engine.ErrInvalidArgument (partition out of range, negative
// offset), an error wrapping tributary.ErrFenced once m is superseded,
// ErrUnavailable.
func (m *Member) Ack(partition int32, offset int64) (bool, error) {
	return m.settle(partition, offset, true)
}

// Retry clears the in-flight delivery (partition, offset) without
// committing, attempts kept (SPEC rule 12); the same checks as Ack.
func (m *Member) Retry(partition int32, offset int64) (bool, error) {
	return m.settle(partition, offset, false)
}

func (m *Member) settle(partition int32, offset int64, commit bool) (bool, error) {
	if err := m.t.checkPartition(partition); err != nil {
		return false, err
	}
	if offset < 0 {
		return false, invalid("negative offset %d", offset)
	}
	if m.state.Load() == memberFenced {
		return false, m.fencedErr()
	}
	key := cursorKey(m.t.name, m.group, partition)
	if v, ok := m.reserved.LoadAndDelete(partition); ok {
		// The fast path: the cursor as this Member's poll wrote it. If
		// nothing wrote it since (the compare-and-set succeeds), the
		// delivery is still in flight to this incarnation and the
		// partition still the member's: a migration, a Rejoin, a Seek's
		// stamp or another handle's settle would have written it
		// (reservation).
		if r := v.(reservation); r.c.Committed == offset {
			n := r.c
			n.InFlight, n.DeliveredAt = false, 0
			if commit {
				n.Committed, n.Attempts = r.c.Committed+1, 0
			}
			_, ok, err := m.b.put(key, n, r.rev)
			if err != nil || ok {
				return ok, err
			}
		}
	}
	var (
		waited time.Time       // since when it waits for a placer (waitPlacer)
		ignore map[string]bool // holds given up on (holdWait)
	)
	for range maxRetries {
		// The group, the cursor and low in one snapshot read where the
		// state stream takes them (batch.go), else one after another,
		// low after the cursor (a Seek's hold is seen by any read of
		// the cursor after its stamp).
		snap, err := m.b.read(groupKey(m.t.name, m.group), key, lowKey(m.t.name, partition))
		if err != nil && !errors.Is(err, errNoSnapshot) {
			return false, err
		}
		gv, _, ok, err := m.b.readGroupIn(snap, m.t.name, m.group)
		if err == nil {
			err = m.check(&gv, ok)
		}
		if err != nil || !ok || !gv.isMember(m.name) || gv.owner(partition) != m.name {
			return false, err
		}
		c, crev, err := m.b.cursorForIn(snap, m.t.name, m.group, &gv, partition)
		if errors.Is(err, errStale) {
			continue
		}
		if err != nil {
			return false, err
		}
		// A cursor below the log start is a Seek's write that a purge
		// overtook, about to be put back (in-flight delivery included):
		// not a state of the model. Wait for it, as Poll does.
		if !snap.unchanged(key, crev) {
			snap = nil // cursorFor wrote the cursor: low is read after it
		}
		lv, _, err := m.b.readLowIn(snap, m.t.name, partition)
		if err != nil {
			return false, err
		}
		if c.Committed < lv.Low {
			if err := m.b.waitPlacer(m.t.name, m.group, partition, c.Inc, &waited); err != nil {
				return false, err
			}
			continue
		}
		if c.Owner != m.name || !c.InFlight || c.Committed != offset || c.MemberInc != "" && c.MemberInc != gv.Incs[m.name] {
			return false, nil // not in flight to this incarnation
		}
		if commit && lv.held(time.Now().UnixNano(), ignore) {
			// A Seek back is deciding its range from the committed
			// offsets it read after its stamps: a commit now could raise
			// the log start it owes past its offset. Wait for it, then
			// read everything again (package doc, "Seek holds").
			if ignore, err = m.b.holdWait(m.t.name, partition, ignore); err != nil {
				return false, err
			}
			continue
		}
		n := c
		n.InFlight, n.DeliveredAt = false, 0
		if commit {
			n.Committed, n.Attempts = c.Committed+1, 0
		}
		_, ok, err = m.b.put(key, n, crev)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: settling %s/%s/%d", ErrContention, m.t.name, m.group, partition)
}
