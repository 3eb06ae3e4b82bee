package jetstream

import (
	"errors"
	"slices"
	"time"

	"github.com/f91dcac0/tributary/engine"
	njs "github.com/nats-io/nats.go/jetstream"
)

// Describe returns the topic's partitions (log start and end) and groups
// (assignor, members, per partition owner, committed offset, in-flight
// flag, attempts and lag), SPEC rule 23. Weakened: it reads the keys and
// streams one after another, so it is not one atomic instant across
// partitions and groups; each partition's figures are read log start, then
// cursors, then log end, and read again if the log start moved meanwhile,
// so lag is never negative, no committed offset is below the log start and
// end − start never exceeds the capacity. A cursor that its group's last
// rebalance moved and that is not migrated yet is migrated first (one
// write, as any call that meets it helps); one not yet placed is shown
// where placing it would put it (nothing is written). The
// result is the caller's. Errors: engine.ErrInvalidArgument
// (unknown topic, invalid identifier), ErrUnavailable.
func (b *Backend) Describe(topic string) (engine.TopicDescription, error) {
	s, err := b.snapshot(topic, false)
	return s.TopicDescription, err
}

// Snapshot is Describe plus every retained record of each partition, read
// after that partition's figures (Attempt 0; no group changes). Weakened as
// Describe: not one instant; a record removed between the figures and the
// read is left out. Errors: as Describe.
func (b *Backend) Snapshot(topic string) (engine.TopicSnapshot, error) {
	return b.snapshot(topic, true)
}

func (b *Backend) snapshot(topic string, records bool) (engine.TopicSnapshot, error) {
	tv, _, err := b.lookupTopic(topic)
	if err != nil {
		return engine.TopicSnapshot{}, err
	}
	names, err := b.listKeys(groupsKey(topic), 4)
	if err != nil {
		return engine.TopicSnapshot{}, err
	}
	slices.Sort(names)
	type grp struct {
		name string
		gv   groupVal
	}
	var groups []grp
	for _, g := range names {
		gv, _, ok, err := b.readGroup(topic, g)
		if err != nil {
			return engine.TopicSnapshot{}, err
		}
		if ok {
			groups = append(groups, grp{g, gv})
		}
	}
	n := int(tv.Partitions)
	d := engine.TopicDescription{Topic: topic, Partitions: make([]engine.PartitionDescription, n), Groups: make([]engine.GroupDescription, len(groups))}
	for i, g := range groups {
		members := append([]string{}, g.gv.Members...)
		d.Groups[i] = engine.GroupDescription{Group: g.name, Assignor: g.gv.Assignor, Members: members, Partitions: make([]engine.GroupPartition, n)}
		if b.cfg.SessionTimeout > 0 {
			var sv seenVal
			if _, _, err := b.get(seenKey(topic, g.name), &sv); err != nil {
				return engine.TopicSnapshot{}, err
			}
			seen := make([]time.Time, len(members))
			for j, x := range members {
				if at, ok := sv.Seen[x]; ok && sv.Inc == g.gv.Inc {
					seen[j] = time.Unix(0, at)
				}
			}
			d.Groups[i].LastSeen = seen
		}
	}
	w, err := b.window(topic)
	if err != nil {
		return engine.TopicSnapshot{}, err
	}
	s := engine.TopicSnapshot{}
	if records {
		s.Records = make([][]engine.Record, n)
	}
	for p := range int32(n) {
		var (
			lv       lowVal
			cursors  []cursorVal
			unplaced []bool // no cursor of the group's incarnation yet
			end      int64
		)
		for try := 0; ; try++ {
			var lrev uint64
			lv, lrev, err = b.readLow(topic, p)
			if err != nil {
				return s, err
			}
			cursors = make([]cursorVal, len(groups))
			unplaced = make([]bool, len(groups))
			for i, g := range groups {
				var c cursorVal
				_, ok, err := b.get(cursorKey(topic, g.name, p), &c)
				if err != nil {
					return s, err
				}
				switch {
				case !ok || c.Inc != g.gv.Inc:
					c = cursorVal{Owner: g.gv.owner(p)}
					unplaced[i] = true
				case c.Gen < g.gv.Gen && (c.Owner != g.gv.owner(p) || c.Gen < g.gv.since(p)):
					// A migration not written yet (its rebalance still
					// running, or its process gone): written here, as
					// any call that meets it does (cursorFor), so that
					// no Ack of the old owner by its poll's write lands
					// after this shows the partition moved.
					n, _, err := b.cursorFor(topic, g.name, &g.gv, p)
					switch {
					case err == nil:
						c = n
					case errors.Is(err, errStale): // a newer rebalance: shown as it leaves it
						c.Owner, c.InFlight = g.gv.owner(p), false
					default:
						return s, err
					}
				}
				cursors[i] = c
			}
			if end, err = b.logEnd(topic, p); err != nil {
				return s, err
			}
			// low unchanged since the figures began: no record in [low,
			// end) was purged meanwhile, so end − low <= capacity.
			_, lrev2, err := b.readLow(topic, p)
			if err != nil {
				return s, err
			}
			if lrev2 == lrev || try >= maxRetries {
				break
			}
		}
		// The log start with the retention the groups' commits owe
		// (package doc, "Retention owed"): max(low, M − w), M the least
		// committed offset of the placed cursors. A cursor not placed
		// yet is shown where placing it would put it: there, or at the
		// log end for a group that starts there.
		start, least := lv.Low, int64(-1)
		for i, c := range cursors {
			if !unplaced[i] && (least < 0 || c.Committed < least) {
				least = c.Committed
			}
		}
		if least >= 0 {
			start = max(lv.Low, least-w)
		}
		for i, g := range groups {
			if unplaced[i] {
				cursors[i].Committed = start
				if g.gv.startsLatest(p) {
					cursors[i].Committed = max(start, end)
				}
			}
		}
		d.Partitions[p] = engine.PartitionDescription{Partition: p, LogStartOffset: start, LogEndOffset: end}
		for i, g := range groups {
			c := cursors[i]
			d.Groups[i].Partitions[p] = engine.GroupPartition{
				Partition: p, Owner: g.gv.owner(p), Committed: c.Committed,
				InFlight: c.InFlight, Attempts: c.Attempts, Lag: max(end-c.Committed, 0),
			}
		}
		if records {
			if s.Records[p], err = b.readRange(topic, p, start, end); err != nil {
				return s, err
			}
		}
	}
	s.TopicDescription = d
	return s, nil
}

// readRange returns partition p's records at offsets [from, to) that are
// still retained, ascending.
func (b *Backend) readRange(t string, p int32, from, to int64) ([]engine.Record, error) {
	rs := make([]engine.Record, 0, max(to-from, 0))
	for off := from; off < to; off++ {
		r, ok, err := b.readRecord(t, p, off)
		if err != nil {
			return nil, err
		}
		if ok {
			rs = append(rs, r)
		}
	}
	return rs, nil
}

// readRecord reads the record at offset off of partition p; ok is false
// when there is none (beyond the log end, or removed).
func (b *Backend) readRecord(t string, p int32, off int64) (engine.Record, bool, error) {
	s, err := b.partStream(t, p)
	if err != nil {
		return engine.Record{}, false, err
	}
	ctx, cancel := b.ctx()
	defer cancel()
	m, err := s.GetMsg(ctx, uint64(off)+1)
	if errors.Is(err, njs.ErrMsgNotFound) {
		return engine.Record{}, false, nil
	}
	if err != nil {
		return engine.Record{}, false, b.fail(err)
	}
	r, err := decodeRecord(m)
	if err != nil {
		return r, false, err
	}
	r.Topic, r.Partition, r.Offset = t, p, off
	return r, true, nil
}
