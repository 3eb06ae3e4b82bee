package jetstream

import (
	"errors"
	"fmt"
	"time"
)

// Member liveness: rule 25 (Rejoin, a new incarnation) and the fencing of
// superseded incarnations are enforced, across processes; rule 24 (the
// session timeout) is not yet. SessionTimeout is 0, so the typed library
// neither heartbeats nor rejoins after an expiry on it, and backendtest's
// rule 24 checks, and those of rule 25 that need a session timeout, are
// skipped for it with that reason (conformance_test.go). A process that
// restarts under its member name gets its partitions and their in-flight
// records back at once (its consumer rejoins); a member whose process died
// for good keeps its partitions until Cluster.RemoveMember removes it
// (docs/jetstream.md).

// SessionTimeout returns 0: members never expire (SPEC rule 24 is not
// enforced), and Describe's GroupDescription.LastSeen is nil.
func (b *Backend) SessionTimeout() time.Duration { return 0 }

// Heartbeat reports whether the member is in its group now (one read of
// the group's state); it refreshes nothing, as no member expires here.
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
	return ok && gv.isMember(m.name), nil
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
	return m.Join() // the assignment, a grown topic's partitions included
}

// cancelDeliveries clears every in-flight delivery to m's member on the
// partitions it owns, attempts kept.
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

// cancelDelivery clears the in-flight delivery to m's member on p, if any.
// errStale: the group moved on; read it again.
func (m *Member) cancelDelivery(gv *groupVal, p int32) error {
	key := cursorKey(m.t.name, m.group, p)
	for range maxRetries {
		c, crev, err := m.b.cursorFor(m.t.name, m.group, gv, p)
		if err != nil {
			return err
		}
		if !c.InFlight || c.Owner != m.name {
			return nil
		}
		n := c
		n.InFlight, n.DeliveredAt, n.MemberInc = false, 0, ""
		_, ok, err := m.b.put(key, n, crev)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: cancelling %s", ErrContention, key)
}
