package jetstream

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/engine/assign"
	njs "github.com/nats-io/nats.go/jetstream"
)

// cursorFor returns group g's cursor on partition p brought up to the view
// gv, and its revision. This is the helping step every reader of a cursor
// takes: a cursor missing or of an older incarnation is placed at the log
// start (place); one at an older generation is migrated: its generation
// raised and, if p changed owner since the cursor's generation, its owner
// set and its in-flight delivery cancelled (attempts kept: rule 16 counts
// the redelivery). errStale: the cursor is newer than gv; re-read the group.
func (b *Backend) cursorFor(t, g string, gv *groupVal, p int32) (cursorVal, uint64, error) {
	return b.cursorForIn(nil, t, g, gv, p)
}

// cursorForIn is cursorFor whose first read of the cursor is from s when s
// holds it.
func (b *Backend) cursorForIn(s *snapshot, t, g string, gv *groupVal, p int32) (cursorVal, uint64, error) {
	key := cursorKey(t, g, p)
	var waited time.Time // since when it waits for a placer (waitPlacer)
	for range maxRetries {
		var c cursorVal
		src := s // a second round reads afresh
		s = nil
		rev, ok, err := b.getIn(src, key, &c)
		if err != nil {
			return c, 0, err
		}
		switch {
		case ok && c.Inc > gv.Inc:
			return c, rev, errStale
		case !ok || c.Inc < gv.Inc:
			c, rev, err = b.place(t, g, p, func(cur *cursorVal, ok bool, low int64) (cursorVal, bool, error) {
				switch {
				case ok && cur.Inc > gv.Inc:
					return *cur, false, errStale
				case ok && cur.Inc == gv.Inc && cur.Committed >= low:
					return *cur, false, nil // placed meanwhile
				case ok && cur.Inc == gv.Inc: // our own placement, overtaken by a purge
					n := *cur
					n.Committed, n.InFlight, n.Attempts = low, false, 0
					return n, true, nil
				}
				start := low
				if gv.startsLatest(p) {
					end, err := b.logEnd(t, p)
					if err != nil {
						return cursorVal{}, false, err
					}
					start = max(low, end)
				}
				return cursorVal{Inc: gv.Inc, Owner: gv.owner(p), Gen: gv.Gen, Committed: start}, true, nil
			})
			if err != nil {
				return c, rev, err
			}
			if c.Gen != gv.Gen {
				continue // migrate (or find it stale) on the next round
			}
			return c, rev, nil
		case c.Gen > gv.Gen:
			return c, rev, errStale
		case c.Gen < gv.Gen:
			// A cursor below the log start (low read after it, or at
			// its instant) is a placement a purge overtook, about to be
			// put back or moved up by its placer: not a state of the
			// model, and migrating it would replace the write its
			// placer puts back. Wait for the placer.
			lv, _, err := b.readLowIn(src, t, p)
			if err != nil {
				return c, 0, err
			}
			if c.Committed < lv.Low {
				if err := b.waitPlacer(t, g, p, c.Inc, &waited); err != nil {
					return c, 0, err
				}
				continue
			}
			n := c
			n.Gen = gv.Gen
			if o := gv.owner(p); c.Owner != o || c.Gen < gv.since(p) {
				n.Owner, n.InFlight = o, false
			}
			nrev, ok, err := b.put(key, n, rev)
			if err != nil {
				return c, 0, err
			}
			if ok {
				return n, nrev, nil
			}
		default:
			return c, rev, nil
		}
	}
	return cursorVal{}, 0, fmt.Errorf("%w: cursor %s", ErrContention, key)
}

// waitPlacer is what a call does that finds group g's cursor on p below
// the log start: a placement a purge overtook (a Seek's write, a
// creation's), which its placer puts back or moves up. It waits a little
// and the caller reads again. A placer that died there (or lost its fence
// request) would strand the partition: every poll of it, ack and
// migration would wait for ever. So after fallbackWait, counted from
// *since (the first wait; set here), it moves the cursor up to the log
// start itself, fenced as any placement (in-flight delivery and attempts
// cleared), as the placer would have (package doc: such a cursor ends at
// the log start rather than where it was). inc is the incarnation the
// caller read: a cursor of another one is left alone.
func (b *Backend) waitPlacer(t, g string, p int32, inc uint64, since *time.Time) error {
	now := time.Now()
	if since.IsZero() {
		*since = now
	}
	if now.Sub(*since) < fallbackWait {
		d := time.Millisecond
		if now.Sub(*since) > 50*time.Millisecond {
			d = 5 * time.Millisecond // a long wait: do not run out of retries first
		}
		time.Sleep(d)
		return nil
	}
	*since = time.Time{}
	b.cfg.Logger.Warn("tributary/jetstream: a placement left the cursor below the log start; moving it up",
		"topic", t, "group", g, "partition", p, "waited", fallbackWait)
	_, _, err := b.place(t, g, p, func(cur *cursorVal, ok bool, low int64) (cursorVal, bool, error) {
		if !ok || cur.Inc != inc || cur.Committed >= low {
			return cursorVal{}, false, nil // replaced, deleted or put back meanwhile
		}
		n := *cur
		n.Committed, n.InFlight, n.Attempts, n.DeliveredAt, n.MemberInc = low, false, 0, 0, ""
		return n, true, nil
	})
	if errors.Is(err, errStale) {
		return nil // the caller reads the cursor again and finds out
	}
	return err
}

// place writes group g's cursor on p as f decides, fenced against
// retention (the low protocol, package doc): read low (revision r), read
// the cursor, write f's answer, then compare-and-set low r → same value.
// If the fence fails a purge may have raced the write, so it starts again
// and f sees the new low. f gets the cursor (ok false: missing or deleted)
// and the log start; it returns the new cursor, whether to write it, or an
// error that ends place. The answer must not be below low. A cursor of an
// incarnation at or below the one a cursor tombstone records is never
// written: place returns errStale (the caller re-reads the group, now
// deleted or a newer incarnation).
func (b *Backend) place(t, g string, p int32, f func(cur *cursorVal, ok bool, low int64) (cursorVal, bool, error)) (cursorVal, uint64, error) {
	key := cursorKey(t, g, p)
	for range maxRetries {
		lv, lrev, err := b.readLow(t, p)
		if err != nil {
			return cursorVal{}, 0, err
		}
		var c cursorVal
		crev, ok, dead, err := b.getTomb(key, &c)
		if err != nil {
			return c, 0, err
		}
		n, write, err := f(&c, ok, lv.Low)
		if err != nil {
			return c, crev, err
		}
		if write && !ok && n.Inc <= dead {
			// DeleteGroup deleted this incarnation's cursor: the group
			// the caller read is gone (or replaced); never resurrect it.
			return c, crev, errStale
		}
		if write {
			if crev, ok, err = b.put(key, n, crev); err != nil {
				return n, 0, err
			} else if !ok {
				continue
			}
		}
		if _, ok, err = b.put(lowKey(t, p), lv, lrev); err != nil {
			return n, 0, err
		} else if ok {
			return n, crev, nil
		}
	}
	return cursorVal{}, 0, fmt.Errorf("%w: placing cursor %s", ErrContention, key)
}

// retain applies retention to partition p (SPEC rules 13, 21). With M the
// least committed offset of the topic's live cursors (none: the topic has
// no group, and nothing is removed) and w the topic's replay window, it
// raises the log start low to max(low, M − w) by compare-and-set on low.
// With evict (a publish found p full), when that moves nothing but a
// retained record is fully committed (low < M), it raises low by one
// instead: the oldest fully committed record makes room. Then it purges
// the stream below low and sends a room notice (core NATS). It also purges
// when low did not move but the stream still holds records below it: the
// repair of a purge cut short after its compare-and-set (a crash, a lost
// connection). freed reports whether it purged. Two retentions, or a
// retention and a placement, serialise on low's revision, so low never
// passes a live cursor (package doc).
func (b *Backend) retain(t string, p int32, evict bool) (freed bool, err error) {
	return b.retainPass(t, p, evict, nil)
}

// ackedCursor is what an Ack knows when its retention pass starts: the
// cursor it has just written (group, incarnation, committed offset) and
// the log start it read before that write (value and revision).
type ackedCursor struct {
	group     string
	committed int64
	low       lowVal
	lowRev    uint64
}

// retainAfterAck is the retention pass of an Ack that has just committed
// a: as retain without eviction, but it starts from what the Ack read and
// wrote instead of reading them again (its cursor as of its write, low as
// of before it: a raise from that revision succeeds only if no raise or
// placement fence came between, as if the pass had read them then), and
// it raises low without purging: the records below the log start stay in
// the stream, invisible, until a publish that finds the partition full
// purges them (retain with evict), so the Ack costs a key listing and one
// compare-and-set of low, not also a purge and a room notice (package
// doc, "Deferred purge"). A waiting publisher wakes on the Ack's cursor
// write. freed reports whether it raised low.
func (b *Backend) retainAfterAck(t string, p int32, a ackedCursor) (freed bool, err error) {
	return b.retainPass(t, p, false, &a)
}

// retainPass is retain (own nil) and retainAfterAck (own the Ack's).
func (b *Backend) retainPass(t string, p int32, evict bool, own *ackedCursor) (freed bool, err error) {
	w, err := b.window(t)
	if err != nil {
		return false, err
	}
	var ignore map[string]bool // holds given up on (holdWait)
	for try := range maxRetries {
		var (
			lv    lowVal
			lrev  uint64
			first *ackedCursor // the Ack's cursor, on the first round only
		)
		// One snapshot of low and every cursor and group of the topic, or
		// (no snapshot reads) low and then each cursor and its group.
		snap, err := b.read(lowKey(t, p), partCursorsKey(t, p), groupsKey(t))
		switch {
		case err == nil:
			if lv, lrev, err = b.readLowIn(snap, t, p); err != nil {
				return false, err
			}
			if !snap.unchanged(lowKey(t, p), lrev) {
				// low read again after an eviction's publish landed: the
				// snapshot's cursors are older than it, and a Seek that
				// held, wrote and released meanwhile is not in them.
				// Read them after it (the raise's revision must precede
				// the cursors it decides on).
				snap = nil
			}
		case !errors.Is(err, errNoSnapshot):
			return false, err
		case own != nil && try == 0:
			lv, lrev, first = own.low, own.lowRev, own
		default:
			if lv, lrev, err = b.readLow(t, p); err != nil {
				return false, err
			}
		}
		least, err := b.leastCommittedIn(snap, t, p, lv.Low, first)
		if err != nil {
			return false, err
		}
		target, mark := lv.Low, int64(0)
		if least >= 0 {
			target = max(lv.Low, least-w)
			if evict && target == lv.Low && lv.Low < least {
				// An eviction: it takes effect with the publish that
				// fills the room, so low records the log end it is for
				// (readLow waits for that publish). Read while the
				// stream is full: no publish lands before the raise's
				// purge (a purge follows a raise of low, which would
				// fail this compare-and-set, or removes only records
				// below low, and there are none: checked here).
				info, err := b.partInfo(t, p)
				if err != nil {
					return false, err
				}
				if info.State.Msgs < uint64(info.Config.MaxMsgs) {
					return true, nil // room made meanwhile: publish again
				}
				if info.State.FirstSeq <= uint64(lv.Low) {
					// Records below the log start (an Ack's deferred
					// purge, or one a crash cut short) hold the room:
					// purging them makes it, and nothing is evicted.
					return true, b.purge(t, p, lv.Low)
				}
				target, mark = lv.Low+1, int64(info.State.LastSeq)
			}
		}
		if target > lv.Low && lv.held(time.Now().UnixNano(), ignore) {
			// A Seek is under way: its cursor write must not be
			// overtaken. Wait for it, then read everything again.
			if ignore, err = b.holdWait(t, p, ignore); err != nil {
				return false, err
			}
			continue
		}
		if target > lv.Low {
			// The holds it read are released, expired or given up on:
			// the raise drops them.
			_, ok, err := b.put(lowKey(t, p), lowVal{Low: target, Evict: mark}, lrev)
			if err != nil {
				return false, err
			}
			if !ok {
				continue
			}
			if own != nil {
				return true, nil // purge deferred to a full publish
			}
			return true, b.purge(t, p, target)
		}
		if own != nil {
			return false, nil // nothing freed; the repair is a full publish's
		}
		// low stays: purge only what an interrupted purge left below it.
		info, err := b.partInfo(t, p)
		if err != nil {
			return false, err
		}
		if info.State.Msgs < uint64(info.Config.MaxMsgs) {
			// A concurrent retention (an Ack's, a Seek's) has made room
			// since the caller found p full: report it freed, so that a
			// publish tries again rather than report a full partition
			// that no longer is.
			return true, nil
		}
		if info.State.Msgs == 0 || info.State.FirstSeq > uint64(target) {
			// Nothing to free, as of the cursors read: only if low has
			// not moved since it was read. A raise meanwhile may have
			// overtaken a placement whose write (below the new low, to
			// be put back) those cursors include: read them again.
			if _, rev, err := b.readLow(t, p); err != nil {
				return false, err
			} else if rev != lrev {
				continue
			}
			return false, nil
		}
		return true, b.purge(t, p, target)
	}
	return false, fmt.Errorf("%w: retention of %s/%d", ErrContention, t, p)
}

// holdFor is how long a Seek's hold on a log start lasts (lowVal.Holds):
// the fallback wait (the longest a Seek waits under its hold, for a placer
// in leastCommitted) and two requests (its cursor read and write). A
// Seek sends its cursor write only with a request's time left on its
// hold (Seek), so the hold of a Seek that is not dead outlasts its write.
func (b *Backend) holdFor() time.Duration { return fallbackWait + 2*b.cfg.RequestTimeout }

// holdWait waits until partition p's log start carries no active hold
// but those in ignore: each released or expired, or holdFor passed since
// the wait began (a holder whose clock runs ahead of this process's). It
// returns ignore with the holds still active then added: the caller's
// raise drops them. Each check is one read of low.
func (b *Backend) holdWait(t string, p int32, ignore map[string]bool) (map[string]bool, error) {
	start := time.Now()
	for d := time.Millisecond; ; time.Sleep(d) {
		lv, _, err := b.readLow(t, p)
		if err != nil {
			return ignore, err
		}
		now := time.Now()
		if !lv.held(now.UnixNano(), ignore) {
			return ignore, nil
		}
		if now.Sub(start) >= b.holdFor() {
			ignore = maps.Clone(ignore)
			if ignore == nil {
				ignore = map[string]bool{}
			}
			for tok := range lv.Holds {
				ignore[tok] = true
			}
			b.cfg.Logger.Warn("tributary/jetstream: a Seek's hold on the log start outlasted its bound; raising over it",
				"topic", t, "partition", p, "waited", now.Sub(start))
			return ignore, nil
		}
		if now.Sub(start) > 50*time.Millisecond {
			d = 5 * time.Millisecond
		}
	}
}

// partInfo returns partition p's stream info.
func (b *Backend) partInfo(t string, p int32) (*njs.StreamInfo, error) {
	s, err := b.partStream(t, p)
	if err != nil {
		return nil, err
	}
	ctx, cancel := b.ctx()
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		return nil, b.fail(err)
	}
	return info, nil
}

// leastCommitted returns the least committed offset of the live cursors
// of partition p (those of a group's current incarnation), -1 when there
// are none. low is the log start the caller read before: a cursor below it
// is a placement a purge overtook (a Seek's write, about to be put back or
// moved up by its placer: package doc), not a state of the model, so it
// waits for the placer and reads that cursor again; after fallbackWait (a
// placer that died) it counts the cursor as at low. own, if not nil, is an
// Ack's cursor as it wrote it, used instead of reading it.
func (b *Backend) leastCommitted(t string, p int32, low int64, own *ackedCursor) (int64, error) {
	return b.leastCommittedIn(nil, t, p, low, own)
}

// leastCommittedIn is leastCommitted from the snapshot s of the
// partition's cursors and the topic's groups (the first read of each; nil:
// a key listing, then each cursor and group read).
func (b *Backend) leastCommittedIn(s *snapshot, t string, p int32, low int64, own *ackedCursor) (int64, error) {
	pat := partCursorsKey(t, p)
	var groups []string
	if s != nil {
		for _, k := range s.keys(pat) {
			groups = append(groups, strings.Split(k, ".")[2])
		}
	} else {
		var err error
		if groups, err = b.listKeys(pat, 4); err != nil {
			return 0, err
		}
	}
	least := int64(-1)
	for _, g := range groups {
		var c cursorVal
		var deadline time.Time
		live := false
		if own != nil && g == own.group {
			// The Ack's own cursor, as it wrote it (live: written on
			// its group's current incarnation, at or above low).
			c.Committed, live = own.committed, true
		}
		for src := s; !live; src = nil {
			_, ok, err := b.getIn(src, cursorKey(t, g, p), &c)
			if err != nil {
				return 0, err
			}
			if !ok {
				break
			}
			gv, _, gok, err := b.readGroupIn(src, t, g)
			if err != nil {
				return 0, err
			}
			if !gok || gv.Inc != c.Inc {
				break // an orphan of a deleted incarnation
			}
			if c.Committed >= low {
				live = true
				break
			}
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(fallbackWait)
			} else if now.After(deadline) {
				c.Committed, live = low, true
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		if !live {
			continue
		}
		if least < 0 || c.Committed < least {
			least = c.Committed
		}
	}
	return least, nil
}

// purge removes partition p's records below offset low (stream sequences
// up to low) and sends a room notice. low must not exceed the log start:
// purging is idempotent, and a purge below what is already gone does
// nothing.
func (b *Backend) purge(t string, p int32, low int64) error {
	s, err := b.partStream(t, p)
	if err != nil {
		return err
	}
	ctx, cancel := b.ctx()
	err = s.Purge(ctx, njs.WithPurgeSequence(uint64(low)+1))
	cancel()
	if err != nil {
		return b.fail(err)
	}
	b.nc.Publish(b.roomSubject(t, p), nil) //nolint:errcheck // a notice; waiters also time out
	return nil
}

// rebalance is every membership or assignor change (rules 8, 9, 18, 19):
// it reads the topic and the group, lets change edit a copy (members,
// assignor; exists false: the group is absent and change may create it),
// recomputes the owners with the group's assignor over the topic's
// partitions, writes the group with the next generation by compare-and-set
// (the commit point) and then migrates every partition whose owner changed.
// changed is false, nothing written, when change says so.
func (b *Backend) rebalance(t, g string, given engine.Assignor, change func(next *groupVal, exists bool, parts int32) (bool, error)) (groupVal, bool, error) {
	for range maxRetries {
		tv, _, err := b.lookupTopic(t)
		if err != nil {
			return groupVal{}, false, err
		}
		gv, rev, exists, err := b.readGroup(t, g)
		if err != nil {
			return gv, false, err
		}
		next := groupVal{Inc: gv.Inc, Gen: gv.Gen, Assignor: gv.Assignor, Members: slices.Clone(gv.Members), Owners: gv.Owners, Incs: maps.Clone(gv.Incs), groupConfig: gv.groupConfig}
		ok, err := change(&next, exists, tv.Partitions)
		if err != nil {
			return gv, false, err
		}
		if !ok {
			// Nothing to change, but the caller has now seen gv: a
			// rebalance that committed it may still be migrating, and a
			// stale owner must not poll or ack after this call returns.
			if exists {
				err = b.settle(t, g, &gv)
			}
			return gv, false, err
		}
		owners, err := b.owners(t, g, &next, &gv, tv.Partitions, given)
		if err != nil {
			return gv, false, err
		}
		n := len(owners)
		next.Gen++
		next.Owners = owners
		next.Since = make([]uint64, n)
		copy(next.Since, gv.Since)
		for p := range n {
			if !exists || p >= len(gv.Owners) || owners[p] != gv.Owners[p] {
				next.Since[p] = next.Gen
			}
		}
		// A user assignor is registered once committed, not before: a
		// refused call must not change which assignor a group runs. While
		// the write is under way it is pending: a rebalance of this
		// process that reads the group just committed with it (before
		// remember below) finds it there rather than failing with
		// ErrUnknownAssignor.
		unpend := func() {}
		if given != nil {
			unpend = b.pend(t, g, next.Assignor, given)
		}
		nrev, ok, err := b.put(groupKey(t, g), next, rev)
		if ok && given != nil {
			b.remember(t, g, next.Assignor, given)
		}
		unpend()
		if err != nil {
			return gv, false, err
		}
		if !ok {
			continue
		}
		if next.Inc == 0 {
			next.Inc = nrev
		}
		for p := range n {
			if !exists {
				// A creation first applies retention, so that a
				// DeleteGroup committed before it, its own retention
				// still running, cannot leave the new cursor below the
				// log start it implies (package doc).
				if _, err := b.retain(t, int32(p), false); err != nil {
					return next, true, err
				}
			}
		}
		b.cfg.Logger.Info("tributary/jetstream: group rebalanced", "topic", t, "group", g,
			"generation", next.Gen, "members", next.Members, "assignor", next.Assignor)
		// Every cursor is brought up to next, not only those moved by
		// this commit: an earlier rebalance's migration may still be
		// running (or its rebalancer gone), and after this call returns no
		// stale owner may act on any partition.
		return next, true, b.settle(t, g, &next)
	}
	return groupVal{}, false, fmt.Errorf("%w: rebalancing %s/%s", ErrContention, t, g)
}

// settle brings every cursor of group g up to the view gv (cursorFor's
// helping step, partition by partition), so that once it returns no member
// that gv does not make an owner can poll, ack or retry there. A cursor
// already newer than gv (errStale) is left: a later rebalance settles it.
func (b *Backend) settle(t, g string, gv *groupVal) error {
	for p := range len(gv.Owners) {
		if _, _, err := b.cursorFor(t, g, gv, int32(p)); err != nil && !errors.Is(err, errStale) {
			return err
		}
	}
	return nil
}

// owners computes next's owners over max(parts, len(prev.Owners))
// partitions with given (the assignor a CreateGroup or SetAssignor is
// committing) or, when nil, the one next names, prev's owners as the
// previous ones.
// Errors: ErrUnknownAssignor, engine.ErrInvalidAssignment.
func (b *Backend) owners(t, g string, next, prev *groupVal, parts int32, given engine.Assignor) ([]string, error) {
	n := max(int(parts), len(prev.Owners))
	previous := make([]string, n)
	copy(previous, prev.Owners)
	if len(next.Members) == 0 {
		return make([]string, n), nil
	}
	a := given
	if a == nil {
		var err error
		if a, err = b.assignor(t, g, next.Assignor); err != nil {
			return nil, err
		}
	}
	return assign.Run(a, next.Members, previous)
}

// grow rebalances g if the topic has more partitions than its last
// rebalance saw: the creator's duty after creating a group, which may
// have raced AddPartitions.
func (b *Backend) grow(t, g string, gv groupVal) (groupVal, error) {
	tv, _, err := b.lookupTopic(t)
	if err != nil || int(tv.Partitions) <= len(gv.Owners) {
		return gv, err
	}
	next, changed, err := b.rebalance(t, g, nil, func(next *groupVal, exists bool, parts int32) (bool, error) {
		return exists && len(next.Owners) < int(parts), nil
	})
	if !changed {
		next, _, _, err = b.readGroup(t, g)
	}
	return next, err
}

// checkAssignorCall validates a CreateGroup or SetAssignor call (rule 4:
// before any state check) and returns a's name: the topic exists, group
// is an identifier, a passes checkAssignor.
func (b *Backend) checkAssignorCall(topic, group string, a engine.Assignor) (string, error) {
	if _, _, err := b.lookupTopic(topic); err != nil {
		return "", err
	}
	if err := engine.CheckIdentifier("group", group); err != nil {
		return "", err
	}
	return b.checkAssignor(a)
}

// CreateGroup creates group with no members, assignor a and the
// configuration opts give (tributary.NewGroupConfig), stored on the group
// key so that every process reads the same (GroupConfig); false, nothing
// changed, if it exists (SPEC rule 17). Its committed offsets start at
// each partition's log start (rule 7) or, with engine.StartLatest, at its
// log end. a, a user's, is kept for this group in this Backend once the
// creation committed. Weakened with StartLatest: each partition's start is
// its log end when its cursor is placed, after the group's commit and
// before CreateGroup returns, partition after partition, not one instant
// for all: a record published before the call is never delivered to the
// group, one published after it returns always is, and one published
// during it either way. Retention is then applied to every partition, as
// after a forward Seek. Errors: engine.ErrInvalidArgument (unknown topic,
// invalid identifier, nil a, an option NewGroupConfig refuses),
// engine.ErrInvalidAssignment (a's Name panics), ErrUnavailable.
func (b *Backend) CreateGroup(topic, group string, a engine.Assignor, opts ...tributary.GroupOption) (bool, error) {
	name, err := b.checkAssignorCall(topic, group, a)
	if err != nil {
		return false, err
	}
	cfg, err := tributary.NewGroupConfig(topic, opts...)
	if err != nil {
		return false, err
	}
	gv, created, err := b.rebalance(topic, group, a, func(next *groupVal, exists bool, parts int32) (bool, error) {
		if exists {
			return false, nil
		}
		next.Assignor, next.Members = name, []string{}
		next.groupConfig = newGroupConfig(cfg, parts)
		return true, nil
	})
	if err != nil || !created {
		return false, err
	}
	if gv, err = b.grow(topic, group, gv); err != nil {
		return true, err
	}
	if gv.Latest {
		// The cursors are placed (rebalance settled them) past what the
		// group skips: free what no other group needs.
		for p := range gv.Parts {
			if _, err := b.retain(topic, p, false); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}

// GroupConfig returns the configuration group was created with, read from
// its group key, and true; false when the group is absent. A group a Join
// created has the zero tributary.GroupConfig. Errors:
// engine.ErrInvalidArgument (unknown topic, invalid identifier),
// ErrUnavailable.
func (b *Backend) GroupConfig(topic, group string) (tributary.GroupConfig, bool, error) {
	if _, _, err := b.lookupTopic(topic); err != nil {
		return tributary.GroupConfig{}, false, err
	}
	if err := engine.CheckIdentifier("group", group); err != nil {
		return tributary.GroupConfig{}, false, err
	}
	gv, _, ok, err := b.readGroup(topic, group)
	if err != nil || !ok {
		return tributary.GroupConfig{}, false, err
	}
	return gv.config(), true, nil
}

// RemoveMember removes member from group and rebalances (SPEC rule 8), as
// the member's own Leave would, from this or any other process: the
// group key's compare-and-set is the removal, and the member's blocked
// Poll, subscribed to that key, wakes and returns tributary.ErrClosed.
// False when the group or the member is absent. Errors:
// engine.ErrInvalidArgument (unknown topic, invalid identifier),
// engine.ErrInvalidAssignment, ErrUnknownAssignor, ErrUnavailable.
func (b *Backend) RemoveMember(topic, group, member string) (bool, error) {
	if _, _, err := b.lookupTopic(topic); err != nil {
		return false, err
	}
	if err := engine.CheckIdentifier("group", group); err != nil {
		return false, err
	}
	if err := engine.CheckIdentifier("member", member); err != nil {
		return false, err
	}
	m := &Member{t: &Topic{b: b, name: topic, count: b.partCount(topic)}, b: b, group: group, name: member}
	return m.Leave()
}

// DeleteGroup deletes group, which must have no members (SPEC rule 17): it
// writes a tombstone on the group key, then on its cursors, then applies
// retention to every partition (the group no longer counts). A name used
// again is a fresh incarnation: cursors of the old one are ignored. False
// when absent. Errors: engine.ErrInvalidArgument (unknown topic, invalid
// identifier), engine.ErrGroupNotEmpty (nothing changed), ErrUnavailable.
func (b *Backend) DeleteGroup(topic, group string) (bool, error) {
	tv, _, err := b.lookupTopic(topic)
	if err != nil {
		return false, err
	}
	if err := engine.CheckIdentifier("group", group); err != nil {
		return false, err
	}
	for range maxRetries {
		gv, rev, ok, err := b.readGroup(topic, group)
		if err != nil || !ok {
			return false, err
		}
		if len(gv.Members) > 0 {
			return false, fmt.Errorf("%w: topic %q: group %q has %d members", engine.ErrGroupNotEmpty, topic, group, len(gv.Members))
		}
		_, ok, err = b.put(groupKey(topic, group), nil, rev)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		n := max(int(tv.Partitions), len(gv.Owners))
		for p := range int32(n) {
			if err := b.deleteCursor(topic, group, p, gv.Inc); err != nil {
				return true, err
			}
			if _, err := b.retain(topic, p, false); err != nil {
				return true, err
			}
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: deleting group %s/%s", ErrContention, topic, group)
}

// deleteCursor writes a tombstone recording incarnation inc on group's
// cursor on p, unless the cursor belongs to a newer incarnation or a
// tombstone already records inc or a newer one. It writes one on a missing
// cursor too: a reader whose view predates the delete must not place a
// cursor of the deleted incarnation (place refuses it), so a Poll racing
// DeleteGroup cannot resurrect the group's cursor. The tombstone and a
// placement are compare-and-sets on the same key, so they serialise.
func (b *Backend) deleteCursor(t, g string, p int32, inc uint64) error {
	for range maxRetries {
		var c cursorVal
		rev, ok, dead, err := b.getTomb(cursorKey(t, g, p), &c)
		if err != nil || ok && c.Inc > inc || !ok && dead >= inc {
			return err
		}
		if _, ok, err = b.put(cursorKey(t, g, p), cursorTomb{Deleted: true, Inc: inc}, rev); err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: deleting cursor %s/%s/%d", ErrContention, t, g, p)
}

// SetAssignor sets group's assignor to a and rebalances with it (SPEC
// rule 18); false when the group is absent. a, a user's, is kept for this
// group in this Backend once the change committed. Errors: engine.ErrInvalidArgument (unknown
// topic, invalid identifier, nil a), engine.ErrInvalidAssignment (a
// answers wrongly or panics; nothing changed), ErrUnavailable.
func (b *Backend) SetAssignor(topic, group string, a engine.Assignor) (bool, error) {
	name, err := b.checkAssignorCall(topic, group, a)
	if err != nil {
		return false, err
	}
	_, changed, err := b.rebalance(topic, group, a, func(next *groupVal, exists bool, _ int32) (bool, error) {
		next.Assignor = name
		return exists, nil
	})
	return changed, err
}

// AddPartitions adds count empty partitions to topic and returns the new
// count (SPEC rule 19). It creates their streams, places every existing
// group's cursor on them at 0, checks every group's assignor on the new
// count, commits the count on the topic key by compare-and-set, then
// rebalances every group. Weakened: the groups rebalance one after another
// after the commit, not at its instant; a group created during the call may
// start the new partitions at their log start rather than 0. Errors:
// engine.ErrInvalidArgument (unknown topic, count < 1, new total > 64),
// engine.ErrInvalidAssignment, ErrUnknownAssignor (both before any change),
// ErrUnavailable.
func (b *Backend) AddPartitions(topic string, count int32) (int32, error) {
	for range maxRetries {
		tv, trev, err := b.lookupTopic(topic)
		if err != nil {
			return 0, err
		}
		old := tv.Partitions
		if count < 1 || count > engine.MaxPartitionCount-old {
			return 0, invalid("topic %q: adding %d partitions to %d: want 1..%d", topic, count, old, engine.MaxPartitionCount-old)
		}
		total := old + count
		groups, err := b.listKeys(groupsKey(topic), 4)
		if err != nil {
			return 0, err
		}
		err = b.eachGroup(topic, groups, func(g string, gv groupVal) error {
			next := gv
			if _, err := b.owners(topic, g, &next, &gv, total, nil); err != nil {
				return fmt.Errorf("group %q: %w", g, err)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		for p := old; p < total; p++ {
			if _, err := b.partStream(topic, p); err != nil {
				return 0, err
			}
		}
		err = b.eachGroup(topic, groups, func(g string, gv groupVal) error {
			for p := old; p < total; p++ {
				_, _, err := b.place(topic, g, p, func(cur *cursorVal, ok bool, low int64) (cursorVal, bool, error) {
					if ok && cur.Inc >= gv.Inc && cur.Committed >= low {
						return *cur, false, nil
					}
					return cursorVal{Inc: gv.Inc, Gen: gv.Gen, Committed: low}, true, nil
				})
				if errors.Is(err, errStale) {
					return nil // the group was deleted meanwhile
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		grown := tv
		grown.Partitions = total
		_, ok, err := b.put(topicKey(topic), grown, trev)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		b.partCount(topic).set(total)
		if groups, err = b.listKeys(groupsKey(topic), 4); err != nil {
			return total, err
		}
		for _, g := range groups {
			_, _, err := b.rebalance(topic, g, nil, func(next *groupVal, exists bool, parts int32) (bool, error) {
				return exists && len(next.Owners) < int(parts), nil
			})
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}
	return 0, fmt.Errorf("%w: adding partitions to %s", ErrContention, topic)
}

// eachGroup calls f, in order, with each group of topic t named in
// groups that exists now, as read now (a group deleted meanwhile is
// skipped), and returns f's first error.
func (b *Backend) eachGroup(t string, groups []string, f func(g string, gv groupVal) error) error {
	for _, g := range groups {
		gv, _, ok, err := b.readGroup(t, g)
		if err != nil {
			return err
		}
		if ok {
			if err := f(g, gv); err != nil {
				return err
			}
		}
	}
	return nil
}

// logEnd returns partition p's log end offset: the next offset a publish
// gets (the stream's last sequence).
func (b *Backend) logEnd(t string, p int32) (int64, error) {
	info, err := b.partInfo(t, p)
	if err != nil {
		return 0, err
	}
	return int64(info.State.LastSeq), nil
}

// Seek sets group's committed offset on partition to offset, cancels its
// in-flight delivery there and resets attempts, then applies retention
// (SPEC rule 20). It holds the partition's log start while it writes
// (package doc, "Seek holds"): it reads low, adds a hold to it by
// compare-and-set, decides the range against that low, writes the cursor
// by compare-and-set (the linearization point), then releases the hold;
// no retention pass raises low while the hold is active, so no purge
// overtakes the write. A hold of a process that dies expires after
// holdFor (fallbackWait + 2 × Config.RequestTimeout). False when the
// group is absent. Errors, in this order: engine.ErrInvalidArgument
// (unknown topic, invalid identifier, partition out of range, negative
// offset); engine.ErrOffsetOutOfRange unless log start <= offset <= log
// end, or when offset is below the log start that the cursor advances
// already written imply (retention owed; nothing changed either way);
// ErrUnavailable (true: the cursor was written, the release or the
// retention pass failed).
func (b *Backend) Seek(topic, group string, partition int32, offset int64) (bool, error) {
	tv, _, err := b.lookupTopic(topic)
	if err != nil {
		return false, err
	}
	if err := engine.CheckIdentifier("group", group); err != nil {
		return false, err
	}
	if partition < 0 || partition >= tv.Partitions {
		return false, invalid("topic %q: partition %d outside [0,%d)", topic, partition, tv.Partitions)
	}
	if offset < 0 {
		return false, invalid("negative offset %d", offset)
	}
	for range maxRetries {
		gv, _, ok, err := b.readGroup(topic, group)
		if err != nil || !ok {
			return false, err
		}
		if _, _, err := b.cursorFor(topic, group, &gv, partition); errors.Is(err, errStale) {
			continue
		} else if err != nil {
			return false, err
		}
		w, err := b.window(topic)
		if err != nil {
			return false, err
		}
		end, err := b.logEnd(topic, partition)
		if err != nil {
			return false, err
		}
		wrote, err := b.seekHeld(topic, group, partition, offset, end, w, &gv)
		if errors.Is(err, errStale) {
			continue
		}
		if err != nil {
			return wrote, err
		}
		if _, err := b.retain(topic, partition, false); err != nil {
			return true, err
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: seeking %s/%s", ErrContention, topic, group)
}

// seekHeld is Seek's hold, write and release on partition p, for the
// group view gv, the log end end read before (a publish only raises it)
// and the replay window w. wrote reports whether the cursor write took
// effect. errStale: the cursor belongs to another incarnation than gv's;
// re-read the group.
func (b *Backend) seekHeld(t, g string, p int32, offset, end, w int64, gv *groupVal) (wrote bool, err error) {
	tok := newIncarnation()
	var ignore map[string]bool // holds given up on (holdWait)
	for range maxRetries {
		lv, lrev, err := b.readLow(t, p)
		if err != nil {
			return false, err
		}
		if offset < lv.Low || offset > end {
			return false, fmt.Errorf("%w: topic %q: partition %d: offset %d outside [%d,%d]", engine.ErrOffsetOutOfRange, t, p, offset, lv.Low, end)
		}
		now := time.Now()
		if lv.held(now.UnixNano(), ignore) {
			// Another Seek holds the partition: one at a time, so that
			// the cursors this one's retention-owed check reads are not
			// moved back by another Seek before its write.
			if ignore, err = b.holdWait(t, p, ignore); err != nil {
				return false, err
			}
			continue
		}
		until := now.Add(b.holdFor())
		held := lv.withHold(tok, until.UnixNano(), now.UnixNano(), ignore)
		hrev, ok, err := b.put(lowKey(t, p), held, lrev)
		if err != nil {
			return false, err // the hold, if written, expires
		}
		if !ok {
			continue // low moved: decide against the new one
		}
		wrote, err := b.seekWrite(t, g, p, offset, &held, &hrev, w, gv, until)
		if rerr := b.release(t, p, tok, held, hrev); err == nil || errors.Is(err, errHoldShort) && rerr != nil {
			err = rerr
		}
		if errors.Is(err, errHoldShort) {
			continue // hold again, for a full bound
		}
		return wrote, err
	}
	return false, fmt.Errorf("%w: holding the log start of %s/%d", ErrContention, t, p)
}

// seekWrite is Seek's cursor write under its hold on the log start: held
// is low's value with the hold (no retention pass raises it meanwhile) and
// *hrev its revision, held until until. It reads group g's cursor on p and
// writes it at offset by compare-and-set, unless offset is below the log
// start that the cursor advances already written imply (retention owed:
// ErrOffsetOutOfRange, nothing written). A Seek back that finds retention
// owed above held.Low raises low to it first, hold kept (*held and *hrev
// updated): its own write lowers the least committed offset, which would
// hide the owed raise from the passes still to run and from the next
// Seek back. It sends the cursor write only with a request's time
// (Config.RequestTimeout) left on the hold, else returns errHoldShort
// (nothing written); errHoldShort too when low moved under the hold (a
// waiter raised over it). errStale: the cursor is gone or of another
// incarnation than gv's.
func (b *Backend) seekWrite(t, g string, p int32, offset int64, held *lowVal, hrev *uint64, w int64, gv *groupVal, until time.Time) (bool, error) {
	key := cursorKey(t, g, p)
	for range maxRetries {
		var cur cursorVal
		crev, ok, err := b.get(key, &cur)
		if err != nil {
			return false, err
		}
		if !ok || cur.Inc != gv.Inc {
			return false, errStale
		}
		if offset < cur.Committed {
			// Moving the cursor back: the retention owed by the cursor
			// advances already written (this cursor's, or another
			// group's), whose passes may still be running or waiting
			// for this hold, counts as done (package doc).
			least, err := b.leastCommitted(t, p, held.Low, nil)
			if err != nil {
				return false, err
			}
			owed := max(held.Low, least-w)
			if least >= 0 && offset < owed {
				return false, fmt.Errorf("%w: topic %q: partition %d: offset %d below the log start %d (retention owed)", engine.ErrOffsetOutOfRange, t, p, offset, owed)
			}
			if least >= 0 && owed > held.Low {
				if time.Until(until) < b.cfg.RequestTimeout {
					return false, errHoldShort
				}
				raised := *held
				raised.Low, raised.Evict = owed, 0
				rev, ok, err := b.put(lowKey(t, p), raised, *hrev)
				if err != nil {
					return false, err
				}
				if !ok {
					return false, errHoldShort
				}
				*held, *hrev = raised, rev
			}
		}
		if time.Until(until) < b.cfg.RequestTimeout {
			return false, errHoldShort
		}
		n := cur
		n.Committed, n.InFlight, n.Attempts, n.DeliveredAt = offset, false, 0, 0
		if _, ok, err = b.put(key, n, crev); err != nil || ok {
			return ok, err
		}
	}
	return false, fmt.Errorf("%w: seeking cursor %s", ErrContention, key)
}

// release removes the hold tok from partition p's log start, first by
// compare-and-set from held at revision rev (the hold as written), then
// from what it reads. Nothing to do when the hold is gone (a retention
// pass that gave up on it raised low over it).
func (b *Backend) release(t string, p int32, tok string, held lowVal, rev uint64) error {
	lv := held
	for range maxRetries {
		if _, ok := lv.Holds[tok]; !ok {
			return nil
		}
		_, ok, err := b.put(lowKey(t, p), lv.withoutHold(tok), rev)
		if err != nil || ok {
			return err
		}
		if lv, rev, err = b.readLow(t, p); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: releasing the log start of %s/%d", ErrContention, t, p)
}
