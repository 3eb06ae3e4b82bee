package model

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"
)

// This file holds what makes the model usable as checker state: Clone,
// Equal, Hash, String and CheckInvariants. They all cover the whole state:
// the options (capacity, replay window, ack timeout, message size limit,
// session timeout), every retained record (offset, payload, key, headers,
// time) and every group (assignor by Name, members and their last-seen
// instants, owner, committed offset, in-flight delivery and its time,
// attempts per partition). The clock is not state:
// Clone shares it and the others ignore it. Times are compared as instants
// (time.Time.Equal), so a time's location and monotonic reading are not
// state either.

// Clone returns a deep copy of b that shares nothing mutable with it. The
// copy uses the same clock function; SetClock rebinds it.
func (b *Broker) Clone() *Broker {
	c := *b
	c.topics = make(map[string]*topic, len(b.topics))
	for name, t := range b.topics {
		ct := &topic{logs: make([]partitionLog, len(t.logs)), groups: make(map[string]*group, len(t.groups))}
		for p, l := range t.logs {
			// entry headers are never changed once stored, so sharing them is safe.
			ct.logs[p] = partitionLog{start: l.start, entries: slices.Clone(l.entries)}
		}
		for gname, g := range t.groups {
			ct.groups[gname] = &group{
				assignor:    g.assignor,
				members:     slices.Clone(g.members),
				owners:      slices.Clone(g.owners),
				committed:   slices.Clone(g.committed),
				inFlight:    slices.Clone(g.inFlight),
				attempts:    slices.Clone(g.attempts),
				deliveredAt: slices.Clone(g.deliveredAt),
				lastSeen:    maps.Clone(g.lastSeen),
			}
		}
		c.topics[name] = ct
	}
	return &c
}

// Equal reports whether b and o hold exactly the same state: options,
// topics, retained records with their offsets, keys, headers and times,
// groups with their assignors (by Name), members, owners, committed offsets,
// in-flight deliveries with their delivery times, attempts, and members'
// last-seen instants (as instants). Two equal
// brokers with the same clock answer every future call identically.
func (b *Broker) Equal(o *Broker) bool {
	if b.capacity != o.capacity || b.window != o.window || b.ackTimeout != o.ackTimeout ||
		b.maxMessageBytes != o.maxMessageBytes || b.sessionTimeout != o.sessionTimeout || len(b.topics) != len(o.topics) {
		return false
	}
	for name, t := range b.topics {
		ot, ok := o.topics[name]
		if !ok || len(t.logs) != len(ot.logs) || len(t.groups) != len(ot.groups) {
			return false
		}
		for p := range t.logs {
			if t.logs[p].start != ot.logs[p].start || !slices.EqualFunc(t.logs[p].entries, ot.logs[p].entries, entry.equal) {
				return false
			}
		}
		for gname, g := range t.groups {
			og, ok := ot.groups[gname]
			if !ok || g.assignor.Name() != og.assignor.Name() || !slices.Equal(g.members, og.members) ||
				!slices.Equal(g.owners, og.owners) || !slices.Equal(g.committed, og.committed) ||
				!slices.Equal(g.inFlight, og.inFlight) || !slices.Equal(g.attempts, og.attempts) ||
				!slices.EqualFunc(g.deliveredAt, og.deliveredAt, time.Time.Equal) ||
				!maps.EqualFunc(g.lastSeen, og.lastSeen, time.Time.Equal) {
				return false
			}
		}
	}
	return true
}

func (e entry) equal(o entry) bool {
	return e.key == o.key && e.payload == o.payload && e.time.Equal(o.time) && slices.Equal(e.headers, o.headers)
}

// Hash returns an FNV-1a hash of a canonical, length-prefixed encoding of the
// state (topics and groups in sorted order). Equal states hash equal.
func (b *Broker) Hash() uint64 {
	h := fnv.New64a()
	var buf [binary.MaxVarintLen64]byte
	num := func(v int64) { h.Write(binary.AppendVarint(buf[:0], v)) }
	str := func(s string) { num(int64(len(s))); h.Write([]byte(s)) }
	when := func(t time.Time) { num(t.Unix()); num(int64(t.Nanosecond())) }
	flag := func(v bool) {
		if v {
			num(1)
		} else {
			num(0)
		}
	}
	num(int64(b.capacity))
	num(int64(b.window))
	num(int64(b.ackTimeout))
	num(int64(b.maxMessageBytes))
	num(int64(b.sessionTimeout))
	num(int64(len(b.topics)))
	for _, name := range slices.Sorted(maps.Keys(b.topics)) {
		t := b.topics[name]
		str(name)
		num(int64(len(t.logs)))
		for _, l := range t.logs {
			num(l.start)
			num(int64(len(l.entries)))
			for _, e := range l.entries {
				str(e.payload)
				str(e.key)
				num(int64(len(e.headers)))
				for _, hd := range e.headers {
					str(hd.Key)
					str(hd.Value)
				}
				when(e.time)
			}
		}
		num(int64(len(t.groups)))
		for _, gname := range slices.Sorted(maps.Keys(t.groups)) {
			g := t.groups[gname]
			str(gname)
			str(g.assignor.Name())
			num(int64(len(g.members)))
			for _, m := range g.members {
				str(m)
			}
			num(int64(len(g.lastSeen)))
			for _, m := range g.members {
				if seen, ok := g.lastSeen[m]; ok {
					when(seen)
				}
			}
			for p := range g.committed {
				str(g.owners[p])
				num(g.committed[p])
				flag(g.inFlight[p])
				num(int64(g.attempts[p]))
				when(g.deliveredAt[p])
			}
		}
	}
	return h.Sum64()
}

// String describes the whole state deterministically, topics and groups
// sorted by id: a first line with the capacity and the options that are not
// at their default, then one line per topic, partition log, group and group
// partition:
//
//	capacity=2 window=1 acktimeout=30s maxbytes=1024 sessiontimeout=45s
//	topic orders partitions=1
//	  log p0 [0,2) "a" "b"{key="k" headers=["h":"v"] time=2025-01-02T03:04:05Z}
//	  group billing assignor=RoundRobin members=[m1] lastseen=[2025-01-02T03:04:06Z]
//	    p0 owner=m1 committed=0 attempts=1 inflight since=2025-01-02T03:04:06Z
//
// Payloads are Go-quoted; a record's key, headers and time follow in braces
// when not empty or zero; times are UTC in RFC 3339 with nanoseconds. A
// partition of a memberless group shows owner=-; attempts show when not 0;
// since is the time of an in-flight delivery under an ack timeout; lastseen,
// shown under a session timeout, lists the members' last-seen instants in
// member order.
func (b *Broker) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "capacity=%d", b.capacity)
	if b.window > 0 {
		fmt.Fprintf(&sb, " window=%d", b.window)
	}
	if b.ackTimeout > 0 {
		fmt.Fprintf(&sb, " acktimeout=%v", b.ackTimeout)
	}
	if b.maxMessageBytes > 0 {
		fmt.Fprintf(&sb, " maxbytes=%d", b.maxMessageBytes)
	}
	if b.sessionTimeout > 0 {
		fmt.Fprintf(&sb, " sessiontimeout=%v", b.sessionTimeout)
	}
	sb.WriteByte('\n')
	for _, name := range slices.Sorted(maps.Keys(b.topics)) {
		t := b.topics[name]
		fmt.Fprintf(&sb, "topic %s partitions=%d\n", name, len(t.logs))
		for p, l := range t.logs {
			fmt.Fprintf(&sb, "  log p%d [%d,%d)", p, l.start, l.end())
			for _, e := range l.entries {
				fmt.Fprintf(&sb, " %q", e.payload)
				e.writeExtras(&sb)
			}
			sb.WriteByte('\n')
		}
		for _, gname := range slices.Sorted(maps.Keys(t.groups)) {
			g := t.groups[gname]
			fmt.Fprintf(&sb, "  group %s assignor=%s members=[%s]", gname, nameText(g.assignor.Name()), strings.Join(g.members, " "))
			if b.sessionTimeout > 0 {
				seen := make([]string, len(g.members))
				for i, m := range g.members {
					seen[i] = timeText(g.lastSeen[m])
				}
				fmt.Fprintf(&sb, " lastseen=[%s]", strings.Join(seen, " "))
			}
			sb.WriteByte('\n')
			for p := range g.committed {
				owner := g.owners[p]
				if owner == "" {
					owner = "-"
				}
				fmt.Fprintf(&sb, "    p%d owner=%s committed=%d", p, owner, g.committed[p])
				if g.attempts[p] != 0 {
					fmt.Fprintf(&sb, " attempts=%d", g.attempts[p])
				}
				if g.inFlight[p] {
					sb.WriteString(" inflight")
				}
				if !g.deliveredAt[p].IsZero() {
					sb.WriteString(" since=" + timeText(g.deliveredAt[p]))
				}
				sb.WriteByte('\n')
			}
		}
	}
	return sb.String()
}

// writeExtras writes e's key, headers and time in braces, each only when
// not empty or zero, and nothing when all are.
func (e *entry) writeExtras(sb *strings.Builder) {
	var parts []string
	if e.key != "" {
		parts = append(parts, fmt.Sprintf("key=%q", e.key))
	}
	if len(e.headers) > 0 {
		hs := make([]string, len(e.headers))
		for i, h := range e.headers {
			hs[i] = fmt.Sprintf("%q:%q", h.Key, h.Value)
		}
		parts = append(parts, "headers=["+strings.Join(hs, " ")+"]")
	}
	if !e.time.IsZero() {
		parts = append(parts, "time="+timeText(e.time))
	}
	if len(parts) > 0 {
		sb.WriteString("{" + strings.Join(parts, " ") + "}")
	}
}

func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// nameText returns an assignor name bare when it is a valid identifier, and
// Go-quoted otherwise, so that String stays unambiguous.
func nameText(name string) string {
	if checkID("assignor", name) == nil {
		return name
	}
	return fmt.Sprintf("%q", name)
}

// CheckInvariants returns a non-nil error describing the first broken
// invariant of the state, or nil. The invariants: the options are in range
// and the clock is set; every log retains at most capacity records from a
// non-negative start, with nil rather than empty headers; every group has an
// assignor and one owner, committed offset, in-flight flag, attempts count
// and delivery time per partition; committed offsets lie inside [log start,
// log end]; members are sorted, distinct and valid; a group with members has
// a current member as the owner of every partition, a memberless group has
// none; an in-flight delivery has an owner, a retained record and at least
// one attempt; attempts are never negative; a delivery time is set only for
// an in-flight delivery under an ack timeout; under a session timeout every
// member, and nothing else, has a last-seen instant, and without one no
// last-seen is kept; and, with groups present, the
// log start lies in [low - window, low] for low the smallest committed
// offset: nothing a group still needs was removed, and at most window fully
// committed records are retained (for window 0, log start == low).
func (b *Broker) CheckInvariants() error {
	switch {
	case b.capacity < MinCapacity || b.capacity > MaxExtendedCapacity:
		return fmt.Errorf("capacity %d out of range", b.capacity)
	case b.window < 0 || b.window > b.capacity:
		return fmt.Errorf("replay window %d out of range [0,%d]", b.window, b.capacity)
	case b.ackTimeout < 0:
		return fmt.Errorf("ack timeout %v negative", b.ackTimeout)
	case b.maxMessageBytes < 0:
		return fmt.Errorf("max message bytes %d negative", b.maxMessageBytes)
	case b.sessionTimeout < 0:
		return fmt.Errorf("session timeout %v negative", b.sessionTimeout)
	case b.clock == nil:
		return fmt.Errorf("nil clock")
	}
	for name, t := range b.topics {
		if err := checkID("topic", name); err != nil {
			return err
		}
		if len(t.logs) < 1 || len(t.logs) > MaxPartitions {
			return fmt.Errorf("topic %s: %d partitions", name, len(t.logs))
		}
		for p, l := range t.logs {
			if l.start < 0 || len(l.entries) > int(b.capacity) {
				return fmt.Errorf("topic %s p%d: log [%d,%d) with capacity %d", name, p, l.start, l.end(), b.capacity)
			}
			for i, e := range l.entries {
				if e.headers != nil && len(e.headers) == 0 {
					return fmt.Errorf("topic %s p%d offset %d: empty, non-nil headers", name, p, l.start+int64(i))
				}
			}
		}
		for gname, g := range t.groups {
			if err := g.check(b, t, name, gname); err != nil {
				return err
			}
		}
		for p, l := range t.logs {
			low, ok := t.low(p)
			if ok && (l.start > low || l.start < low-int64(b.window)) {
				return fmt.Errorf("topic %s p%d: log start %d, lowest committed %d, window %d", name, p, l.start, low, b.window)
			}
		}
	}
	return nil
}

// check returns the first broken invariant of group gname of topic tname.
func (g *group) check(b *Broker, t *topic, tname, gname string) error {
	if err := checkID("group", gname); err != nil {
		return err
	}
	n := len(t.logs)
	if g.assignor == nil {
		return fmt.Errorf("topic %s group %s: nil assignor", tname, gname)
	}
	if len(g.owners) != n || len(g.committed) != n || len(g.inFlight) != n || len(g.attempts) != n || len(g.deliveredAt) != n {
		return fmt.Errorf("topic %s group %s: per-partition state for %d/%d/%d/%d/%d partitions, want %d", tname, gname,
			len(g.owners), len(g.committed), len(g.inFlight), len(g.attempts), len(g.deliveredAt), n)
	}
	for i, m := range g.members {
		if err := checkID("member", m); err != nil {
			return err
		}
		if i > 0 && g.members[i-1] >= m {
			return fmt.Errorf("topic %s group %s: members %q not sorted and distinct", tname, gname, g.members)
		}
		if _, seen := g.lastSeen[m]; seen != (b.sessionTimeout > 0) {
			return fmt.Errorf("topic %s group %s: member %s has a last-seen %t under session timeout %v", tname, gname, m, seen, b.sessionTimeout)
		}
	}
	if g.lastSeen == nil || len(g.lastSeen) > len(g.members) || b.sessionTimeout == 0 && len(g.lastSeen) > 0 {
		return fmt.Errorf("topic %s group %s: last-seen of %d for %d members (session timeout %v)", tname, gname, len(g.lastSeen), len(g.members), b.sessionTimeout)
	}
	for p, l := range t.logs {
		where := fmt.Sprintf("topic %s group %s p%d", tname, gname, p)
		owner, c := g.owners[p], g.committed[p]
		_, isMember := slices.BinarySearch(g.members, owner)
		if len(g.members) > 0 && !isMember || len(g.members) == 0 && owner != "" {
			return fmt.Errorf("%s: owner %q with members %q", where, owner, g.members)
		}
		if c < l.start || c > l.end() {
			return fmt.Errorf("%s: committed %d outside log [%d,%d]", where, c, l.start, l.end())
		}
		if g.inFlight[p] && (owner == "" || c == l.end() || g.attempts[p] < 1) {
			return fmt.Errorf("%s: in flight with owner %q, committed %d, log end %d, attempts %d",
				where, owner, c, l.end(), g.attempts[p])
		}
		if g.attempts[p] < 0 {
			return fmt.Errorf("%s: attempts %d", where, g.attempts[p])
		}
		if !g.deliveredAt[p].IsZero() && (!g.inFlight[p] || b.ackTimeout == 0) {
			return fmt.Errorf("%s: delivery time %v with in flight %t, ack timeout %v",
				where, g.deliveredAt[p], g.inFlight[p], b.ackTimeout)
		}
	}
	return nil
}
