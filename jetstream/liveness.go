package jetstream

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Member liveness. Rule 25 (Rejoin, a new incarnation) and the fencing of
// superseded incarnations are kept, across processes. Rule 24 is kept
// weakened, with Config.SessionTimeout: each group's key seen.<T>.<G>
// holds its members' last-seen instants, refreshed by a member's Join,
// Rejoin and Heartbeat (live), and the members whose session has run out
// are expired by those calls (expire), not by every call; backendtest's
// rule 24 checks are skipped for it with that reason (conformance_test.go,
// docs/jetstream.md). A process that restarts under its member name gets
// its partitions and their in-flight records back at once (its consumer
// rejoins); without a session timeout a member whose process died for
// good keeps its partitions until Cluster.RemoveMember removes it.

// SessionTimeout returns Config.SessionTimeout (0: members never expire,
// and Describe's GroupDescription.LastSeen is nil).
func (b *Backend) SessionTimeout() time.Duration { return b.cfg.SessionTimeout }

// Heartbeat reports whether the member is in its group now; with a
// session timeout it also refreshes the member's last-seen instant and
// expires the group's members whose session has run out (expire).
// Errors: an error wrapping tributary.ErrFenced once m is superseded;
// ErrUnavailable.
func (m *Member) Heartbeat() (bool, error) {
	gv, _, ok, err := m.b.readGroup(m.t.name, m.group)
	if err != nil {
		return false, err
	}
	if err := m.check(&gv, ok); err != nil {
		return false, err
	}
	if !ok || !gv.isMember(m.name) {
		return false, nil
	}
	return true, m.live(&gv)
}

// live refreshes the member's last-seen instant in gv's incarnation of
// its group and expires the members whose session has run out: with a
// session timeout, after each Join, Rejoin and Heartbeat.
func (m *Member) live(gv *groupVal) error {
	if m.b.cfg.SessionTimeout <= 0 {
		return nil
	}
	sv, err := m.b.touch(m.t.name, m.group, gv, m.name)
	if err != nil {
		return err
	}
	return m.b.expire(m.t.name, m.group, gv, sv)
}

// touch sets member's last-seen instant in group g (incarnation gv.Inc) to
// the broker clock's reading and returns the instants as written, those
// of members gv does not have dropped.
func (b *Backend) touch(t, g string, gv *groupVal, member string) (seenVal, error) {
	key := seenKey(t, g)
	for range maxRetries {
		var sv seenVal
		rev, ok, err := b.get(key, &sv)
		if err != nil {
			return sv, err
		}
		next := seenVal{Inc: gv.Inc, Seen: map[string]int64{}}
		if ok && sv.Inc == gv.Inc {
			for x, at := range sv.Seen {
				if gv.isMember(x) {
					next.Seen[x] = at
				}
			}
		}
		next.Seen[member] = b.now().UnixNano()
		if _, ok, err = b.put(key, next, rev); err != nil {
			return sv, err
		} else if ok {
			return next, nil
		}
	}
	return seenVal{}, fmt.Errorf("%w: heartbeat of %s/%s/%s", ErrContention, t, g, member)
}

// expired returns the members of sv whose last-seen instant is the session
// timeout or more before now, in gv's incarnation.
func (b *Backend) expired(gv *groupVal, sv seenVal, now int64) []string {
	var out []string
	if sv.Inc != gv.Inc {
		return nil
	}
	for _, x := range gv.Members {
		if at, ok := sv.Seen[x]; ok && now-at >= int64(b.cfg.SessionTimeout) {
			out = append(out, x)
		}
	}
	return out
}

// expire removes from group g the members sv shows expired in gv, the
// group as the caller read it (rule 24), as by Leave in one rebalance,
// which reads the group and the instants again so that a member seen
// meanwhile stays. An expired member keeps its incarnation
// token: its Member is not fenced, finds itself out of the group and may
// join again (the typed library's consumer rejoins).
func (b *Backend) expire(t, g string, gv *groupVal, sv seenVal) error {
	now := b.now().UnixNano()
	if len(b.expired(gv, sv, now)) == 0 {
		return nil
	}
	var gone []string
	_, changed, err := b.rebalance(t, g, nil, func(next *groupVal, exists bool, _ int32) (bool, error) {
		if !exists {
			return false, nil
		}
		var fresh seenVal
		if _, _, err := b.get(seenKey(t, g), &fresh); err != nil {
			return false, err
		}
		gone = b.expired(next, fresh, now)
		if len(gone) == 0 {
			return false, nil
		}
		next.Members = slices.DeleteFunc(next.Members, func(x string) bool { return slices.Contains(gone, x) })
		return true, nil
	})
	if changed {
		b.cfg.Logger.Info("tributary/jetstream: sessions expired", "topic", t, "group", g, "members", gone)
	}
	return err
}

// Rejoin is Join for a new incarnation (SPEC rule 25): m becomes the
// member's current incarnation (superseding the others, in any process),
// and if the member was in its group already, every in-flight delivery to
// it is cancelled, as by Retry (delivered again, Attempt + 1), with no
// rebalance: a process that restarts under the same member name gets back
// at once what its dead predecessor held. The cancellations follow the
// group write, partition by partition; a delivery that a superseded
// incarnation still makes after them is its successor's to poll again
// (Member). Errors: as Join.
func (m *Member) Rejoin() ([]int32, error) {
	if m.state.Load() == memberFenced {
		return nil, m.fencedErr()
	}
	inc := newIncarnation()
	m.own.Store(inc, true)
	_, was, err := m.supersede(inc)
	if err != nil {
		return nil, err
	}
	if !was {
		return m.join(inc)
	}
	m.joined(inc)
	if err := m.cancelDeliveries(); err != nil {
		return nil, err
	}
	return m.Join() // the assignment, a grown topic's partitions included; its session refreshed
}

// cancelDeliveries clears every in-flight delivery to m's member on the
// partitions it owns, attempts kept, and writes every other cursor it owns
// unchanged (a stamp): a reservation a superseded incarnation's poll is
// making from a snapshot older than the Rejoin then fails its
// compare-and-set, or lands first and is cancelled here, so none is left
// for its Ack's fast path (Member.groupAt).
func (m *Member) cancelDeliveries() error {
	for range maxRetries {
		gv, _, ok, err := m.b.readGroup(m.t.name, m.group)
		if err != nil || !ok || !gv.isMember(m.name) {
			return err
		}
		stale := false
		for p, o := range gv.Owners {
			if o != m.name {
				continue
			}
			if err := m.cancelDelivery(&gv, int32(p)); errors.Is(err, errStale) {
				stale = true
				break
			} else if err != nil {
				return err
			}
		}
		if !stale {
			return nil
		}
	}
	return fmt.Errorf("%w: rejoining %s/%s", ErrContention, m.t.name, m.group)
}

// cancelDelivery clears the in-flight delivery to m's member on p, if any,
// else stamps p's cursor (writes it unchanged), unless it is in flight to
// m's own incarnation. errStale: the group moved on; read it again.
func (m *Member) cancelDelivery(gv *groupVal, p int32) error {
	key := cursorKey(m.t.name, m.group, p)
	for range maxRetries {
		c, crev, err := m.b.cursorFor(m.t.name, m.group, gv, p)
		if err != nil {
			return err
		}
		if c.Owner != m.name || c.InFlight && c.MemberInc != "" && c.MemberInc == *m.inc.Load() {
			return nil
		}
		// Cancel only while m is still the current incarnation: a
		// successor's deliveries are not m's to cancel. The cursor's
		// compare-and-set orders this against the successor's polls.
		now, _, ok, err := m.b.readGroup(m.t.name, m.group)
		if err != nil {
			return err
		}
		if err := m.check(&now, ok); err != nil {
			return err
		}
		n := c
		if c.InFlight {
			n.InFlight, n.DeliveredAt, n.MemberInc = false, 0, ""
		}
		_, ok, err = m.b.put(key, n, crev)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: cancelling %s", ErrContention, key)
}
