package jetstream

import "time"

// Member liveness (SPEC rules 24–25) is not enforced by this backend yet;
// it is the JetStream issue's. SessionTimeout is 0, so the typed library
// neither heartbeats nor rejoins on it, and backendtest's rule 24–25
// checks are skipped for it with that reason (conformance_test.go).
// Meanwhile a member whose process died keeps its partitions until
// Cluster.RemoveMember removes it (docs/jetstream.md, "Not done").

// SessionTimeout returns 0: members never expire (SPEC rule 24 is not
// enforced), and Describe's GroupDescription.LastSeen is nil.
func (b *Backend) SessionTimeout() time.Duration { return 0 }

// Heartbeat reports whether the member is in its group now (one read of
// the group's state); it refreshes nothing, as no member expires here.
// Errors: ErrUnavailable.
func (m *Member) Heartbeat() (bool, error) {
	gv, _, ok, err := m.b.readGroup(m.t.name, m.group)
	if err != nil || !ok {
		return false, err
	}
	return gv.isMember(m.name), nil
}

// Rejoin is Join (SPEC rule 7, same result). Rule 25 is not enforced: a
// member that is already in its group keeps its in-flight deliveries,
// which its new incarnation receives only once AckTimeout has passed
// since their delivery (or after Cluster.RemoveMember), and other Members
// of the same names are not fenced. Errors: as Join.
func (m *Member) Rejoin() ([]int32, error) { return m.Join() }
