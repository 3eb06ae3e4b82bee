//go:build tributary_faults

package engine

import (
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/f91dcac0/tributary/internal/faults"
	"github.com/f91dcac0/tributary/shard"
)

// Fault is one deliberate bug that InjectFault switches on, for proving that
// the linearizability checker catches it. It exists only in builds with the
// tributary_faults build tag; never use such a build for anything but tests.
type Fault uint8

// The faults, one realistic bug each. Names (String, ParseFault) in
// parentheses.
const (
	// FaultNone is the correct engine ("none").
	FaultNone = Fault(faultNone)
	// FaultPollReleasesEach (a): Poll releases each cursor lock before
	// taking the next one and yields in between, so a poll over several
	// partitions is no longer one atomic snapshot ("poll-releases-each").
	FaultPollReleasesEach = Fault(faultPollReleasesEach)
	// FaultRebalanceKeepsInFlight (b): a rebalance keeps the in-flight
	// delivery of a partition whose owner changed
	// ("rebalance-keeps-inflight").
	FaultRebalanceKeepsInFlight = Fault(faultRebalanceKeepsInFlight)
	// FaultAckSkipsOwner (c): Ack and Retry accept any member of the group,
	// not only the partition's current owner ("ack-skips-owner").
	FaultAckSkipsOwner = Fault(faultAckSkipsOwner)
	// FaultPublishBurnsOffset (d): Publish numbers records from a counter it
	// bumps before the capacity check, so a publish to a full partition
	// uses up an offset and later publishes report offsets one higher per
	// refused publish ("publish-burns-offset").
	FaultPublishBurnsOffset = Fault(faultPublishBurnsOffset)
	// FaultTrimIgnoresMemberless (e): the retention trim after an Ack
	// ignores groups that have no members ("trim-ignores-memberless").
	FaultTrimIgnoresMemberless = Fault(faultTrimIgnoresMemberless)
	// FaultPollStaleAssignment (f): Poll skips the check, made once it holds
	// its first partition lock, that the assignment snapshot it read is still
	// current, so a concurrent Join or Leave is not atomic with respect to it
	// ("poll-stale-assignment").
	FaultPollStaleAssignment = Fault(faultPollStaleAssignment)
	// FaultRebalanceSkipsLock (g): a rebalance replaces the assignment
	// without taking the lock of the topic's last partition (the "writer
	// that skips one slot"), so a Poll, Ack or Retry holding only that
	// partition can act on the replaced assignment
	// ("rebalance-skips-lock").
	FaultRebalanceSkipsLock = Fault(faultRebalanceSkipsLock)
	// FaultSeekKeepsInFlight (h): Seek moves the committed offset but keeps
	// the in-flight delivery ("seek-keeps-inflight").
	FaultSeekKeepsInFlight = Fault(faultSeekKeepsInFlight)
	// FaultSetAssignorKeepsInFlight (i): SetAssignor stores the new
	// assignment without cancelling the in-flight deliveries of moved
	// partitions ("setassignor-keeps-inflight").
	FaultSetAssignorKeepsInFlight = Fault(faultSetAssignorKeepsInFlight)
	// FaultWindowEvictsNeeded (j): with a replay window, a publish to a full
	// partition evicts the oldest record even when a group still needs it
	// ("window-evicts-needed").
	FaultWindowEvictsNeeded = Fault(faultWindowEvictsNeeded)
	// FaultDeleteSkipsRetention (k): DeleteGroup does not re-apply retention
	// ("delete-skips-retention").
	FaultDeleteSkipsRetention = Fault(faultDeleteSkipsRetention)
	// FaultAddedPartitionsWrongOffset (l): AddPartitions starts the groups'
	// cursors on the new partitions at partition 0's log end offset, not 0
	// ("added-partitions-wrong-offset").
	FaultAddedPartitionsWrongOffset = Fault(faultAddedPartitionsWrongOffset)
	// FaultRebalanceResetsAttempts (m): a rebalance that cancels an in-flight
	// delivery resets its attempts, so the redelivery is Attempt 1 again
	// ("rebalance-resets-attempts").
	FaultRebalanceResetsAttempts = Fault(faultRebalanceResetsAttempts)
	// FaultPollSkipsRecheck (n): a poll over several partitions does not
	// check again that a partition it saw empty, before one where it found
	// a record, is still empty, so it can miss a record published meanwhile
	// ("poll-skips-recheck").
	FaultPollSkipsRecheck = Fault(faultPollSkipsRecheck)
	// FaultAckIgnoresPin (o): Ack commits the group at a partition's least
	// committed offset without the partition lock, as any other, so
	// retention is not applied ("ack-ignores-pin").
	FaultAckIgnoresPin = Fault(faultAckIgnoresPin)
	// FaultLatestStartsBehind (p): CreateGroupAt with StartLatest starts the
	// group at each non-empty partition's last offset, not its log end, so
	// it receives one record published before it existed
	// ("latest-starts-behind").
	FaultLatestStartsBehind = Fault(faultLatestStartsBehind)
	// FaultRoomOnlyOnTrim (q): retention notifies TopicHandle.Room only
	// when it removes records, so an ack that makes the oldest record of a
	// full partition evictable by the replay window, removing nothing,
	// leaves a producer waiting for room asleep although a publish would
	// succeed ("room-only-on-trim"). A wake-up fault: no call's result
	// shows it (SignalFaults).
	FaultRoomOnlyOnTrim = Fault(faultRoomOnlyOnTrim)
	// FaultExpirySkipsRebalance (r): a session expiry takes the expired
	// members off the group's member list without a rebalance, so they keep
	// their partitions and in-flight deliveries ("expiry-skips-rebalance").
	FaultExpirySkipsRebalance = Fault(faultExpirySkipsRebalance)
	// FaultExpiryStrict (s): a member expires only when last seen more
	// than the session timeout ago, not exactly at it ("expiry-strict").
	FaultExpiryStrict = Fault(faultExpiryStrict)
	// FaultRejoinKeepsDelivery (t): Rejoin of a member keeps the in-flight
	// delivery of its lowest partition that has one
	// ("rejoin-keeps-delivery").
	FaultRejoinKeepsDelivery = Fault(faultRejoinKeepsDelivery)
	// FaultHeartbeatRejoins (u): Heartbeat of a member absent from an
	// existing group joins it again and returns true
	// ("heartbeat-rejoins").
	FaultHeartbeatRejoins = Fault(faultHeartbeatRejoins)
	// FaultSettleSkipsRefresh (v): Ack and Retry do not refresh the
	// member's last-seen instant ("settle-skips-refresh").
	FaultSettleSkipsRefresh = Fault(faultSettleSkipsRefresh)
	// FaultJoinKeepsDeadline (w): a Join that adds a member leaves the
	// topic's deadline as it is, so the topic's first member never expires
	// ("join-keeps-deadline").
	FaultJoinKeepsDeadline = Fault(faultJoinKeepsDeadline)
	// FaultCatchUpSkipsTrim (x): catching up with the commits that a
	// partition's sole cursor (its only group's, no replay window) made
	// without the partition lock raises the least committed offset but
	// removes no record, so the records stay, the log start does not move
	// and a partition the group has emptied is refused as full
	// ("catch-up-skips-trim").
	FaultCatchUpSkipsTrim = Fault(faultCatchUpSkipsTrim)
)

var faultNames = [faultCount]string{
	"none",
	"poll-releases-each",
	"rebalance-keeps-inflight",
	"ack-skips-owner",
	"publish-burns-offset",
	"trim-ignores-memberless",
	"poll-stale-assignment",
	"rebalance-skips-lock",
	"seek-keeps-inflight",
	"setassignor-keeps-inflight",
	"window-evicts-needed",
	"delete-skips-retention",
	"added-partitions-wrong-offset",
	"rebalance-resets-attempts",
	"poll-skips-recheck",
	"ack-ignores-pin",
	"latest-starts-behind",
	"room-only-on-trim",
	"expiry-skips-rebalance",
	"expiry-strict",
	"rejoin-keeps-delivery",
	"heartbeat-rejoins",
	"settle-skips-refresh",
	"join-keeps-deadline",
	"catch-up-skips-trim",
}

// faultTable is the engine's fault table (internal/faults), indexed by
// Fault.
var faultTable = faults.Table(faultNames[:])

// String returns the fault's name, as ParseFault accepts it, or
// "fault(N)" for a number that is no Fault.
func (f Fault) String() string { return faultTable.Name(int(f)) }

// Faults returns every fault except FaultNone that the results of the
// broker's calls show, in declaration order, as a new slice owned by the
// caller: the linearizability checker and the differential test must catch
// each. The wake-up faults (SignalFaults) are not among them.
func Faults() []Fault {
	out := make([]Fault, 0, faultCount-1)
	for f := faultNone + 1; f < faultCount; f++ {
		if !slices.Contains(signalFaults, Fault(f)) {
			out = append(out, Fault(f))
		}
	}
	return out
}

// signalFaults are the faults of the wake-up signals (signal.go).
var signalFaults = []Fault{FaultRoomOnlyOnTrim}

// SignalFaults returns the faults of the wake-up signals (Ready, Room), as
// a new slice owned by the caller. No call's result shows them, since no
// call waits (SPEC rule 14): only a caller blocked on a signal that stays
// open does, so a history of calls is linearizable with them on. The
// wake-up tests catch each: the differential test, which checks after
// every call that Room is closed once a publish to a full partition could
// succeed, and the blocked producers of engine/room_test.go.
func SignalFaults() []Fault { return slices.Clone(signalFaults) }

// ParseFault returns the Fault named name (see the constants), or an
// ErrInvalidArgument error for an unknown name.
func ParseFault(name string) (Fault, error) {
	i, err := faultTable.Parse(name)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return Fault(i), nil
}

// hooks is the fault a topic was created with, and the state that fault
// needs. Each method is a seam of the algorithm (faults_off.go has the
// correct variants): with its fault on it returns, or does, the broken
// variant; otherwise the correct one.
type hooks struct {
	f     fault
	burns *burnTable // FaultPublishBurnsOffset only
}

// burnTable is FaultPublishBurnsOffset's per-partition count of offsets used
// up by refused publishes. mu is a leaf lock, taken under partition.mu.
type burnTable struct {
	mu     sync.Mutex
	burned map[*partition]int64
}

func (h hooks) on(f fault) bool { return h.f == f }

// InjectFault switches fault f on for every topic created after the call
// (FaultNone switches faults off for them); topics created before keep the
// fault they were created with. Call it before the first Create. It returns
// ErrInvalidArgument for an unknown Fault.
func (b *Broker) InjectFault(f Fault) error {
	if f >= Fault(faultCount) {
		return fmt.Errorf("%w: unknown fault %d", ErrInvalidArgument, uint8(f))
	}
	b.createMu.Lock()
	defer b.createMu.Unlock()
	b.hooks = hooks{f: fault(f)}
	if f == FaultPublishBurnsOffset {
		b.hooks.burns = &burnTable{burned: map[*partition]int64{}}
	}
	return nil
}

// joinDeadline is fault (w): the new member's deadline does not lower the
// topic's.
func (h hooks) joinDeadline(d int64) int64 {
	if h.on(faultJoinKeepsDeadline) {
		return noDeadline
	}
	return d
}

// evictOnPublish is fault (j): with a replay window, a full partition
// gives up its oldest record whether or not every group committed it.
func (h hooks) evictOnPublish(ok bool, t *topic, p *partition) bool {
	return ok || h.on(faultWindowEvictsNeeded) && t.b.window > 0 && p.low != noLow
}

// appended is fault (d): given Append's result on p (whose lock the caller
// holds), it counts a refused append as a used-up offset and shifts the
// offset of a successful one by the offsets used up so far.
func (h hooks) appended(off int64, ok bool, p *partition) (int64, bool) {
	if !h.on(faultPublishBurnsOffset) {
		return off, ok
	}
	bt := h.burns
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if !ok {
		bt.burned[p]++
		return -1, false
	}
	return off + bt.burned[p], true
}

// inspecting runs before a poll locks its next cursor. With fault (a) it
// reserves what the poll picked so far and unlocks every cursor it holds,
// then yields, so that other calls run between two partitions of one poll.
// It widens the windows of faults (f), yielding once the poll has read
// its assignment, and (n), yielding between two partitions, so that a
// rebalance (f) or a publish (n) is likely to run then.
func (h hooks) inspecting(dst []Record, locked, picked shard.Mask, t *topic, a *assignment, now int64, maxRecords int32) ([]Record, shard.Mask, shard.Mask) {
	switch {
	case h.on(faultPollReleasesEach) && locked != 0:
		dst = t.reserve(dst, a, picked, now, maxRecords)
		unlockCursors(a, locked)
		runtime.Gosched()
		return dst, 0, 0
	case h.on(faultPollStaleAssignment) && locked == 0, h.on(faultPollSkipsRecheck) && locked != 0:
		runtime.Gosched()
	}
	return dst, locked, picked
}

// stale is faults (f) and (a): the poll does not check that its
// assignment is still current (with (a) it holds one cursor at most).
func (h hooks) stale(moved bool) bool {
	return moved && !h.on(faultPollStaleAssignment) && !h.on(faultPollReleasesEach)
}

// recheck is faults (n) and (a): the poll does not look again at the
// partitions it saw empty.
func (h hooks) recheck(empty bool) bool {
	return empty && !h.on(faultPollSkipsRecheck) && !h.on(faultPollReleasesEach)
}

// reserving widens the window of fault (g): the poll holds its cursors a
// while before it reserves, so that a rebalance is likely to run then.
func (h hooks) reserving(picked shard.Mask) shard.Mask {
	if h.on(faultRebalanceSkipsLock) {
		runtime.Gosched()
	}
	return picked
}

// entry reads the record at off of partition p under the partition lock,
// with the bounds check, whenever a fault is on: a faulty broker may have
// trimmed a record some group still needs. false: it is not retained.
func (h hooks) entry(e *entry, t *topic, p int32, off int64) (*entry, bool) {
	if h.f == faultNone {
		return e, true
	}
	part := t.parts[p]
	part.mu.Lock()
	defer part.mu.Unlock()
	e = part.log.At(off)
	return e, e != nil
}

// notOwner is fault (c): Ack and Retry accept any member of the group.
func (h hooks) notOwner(not bool) bool { return not && !h.on(faultAckSkipsOwner) }

// settleRefreshes is fault (v): Ack and Retry do not refresh the member.
func (h hooks) settleRefreshes() bool { return !h.on(faultSettleSkipsRefresh) }

// unpinned is fault (o): Ack commits every cursor as an unpinned one.
func (h hooks) unpinned(unpinned bool) bool { return unpinned || h.on(faultAckIgnoresPin) }

// commitPinned is fault (e): the commit of a pinned cursor computes the
// partition's least committed offset over the groups that have members
// only (and g), from their current assignment snapshots.
func (h hooks) commitPinned(t *topic, g *group, c *cursor, part *partition, offset int64) {
	if !h.on(faultTrimIgnoresMemberless) {
		t.commitPinnedLocked(c, part, offset)
		return
	}
	c.state.Store((offset + 1) << stateShift)
	p := slices.Index(t.parts[:], part)
	low := offset + 1
	for _, o := range t.groups.AppendValues(nil) {
		a := o.assign.Load()
		if o != g && len(a.masks) == 0 || p >= len(a.cursors) {
			continue
		}
		low = min(low, a.cursors[p].committed())
	}
	part.low, part.atLow = low, 0
	t.trimLocked(part)
}

// caughtUpTo is fault (x): a catch-up trims nothing (TrimTo of an offset
// at or below the log start removes nothing).
func (h hooks) caughtUpTo(low int64) int64 {
	if h.on(faultCatchUpSkipsTrim) {
		return 0
	}
	return low
}

// roomWithoutTrim is fault (q): retention notifies room only when it
// removed records.
func (h hooks) roomWithoutTrim(evictable bool) bool {
	return evictable && !h.on(faultRoomOnlyOnTrim)
}

// latestStart is fault (p): a StartLatest group starts at the last
// record's offset, not the next one's.
func (h hooks) latestStart(end int64, p *partition) int64 {
	if h.on(faultLatestStartsBehind) && end > p.log.StartOffset() {
		return end - 1
	}
	return end
}

// lockMoved is fault (g): a rebalance skips the cursor lock of the highest
// partition whose owner changes.
func (h hooks) lockMoved(m shard.Mask) shard.Mask {
	if h.on(faultRebalanceSkipsLock) && m.Len() > 1 {
		m &^= shard.Mask(0).With(int32(63 - bits.LeadingZeros64(uint64(m))))
	}
	return m
}

// movedInFlight is faults (b), a rebalance keeps the in-flight delivery of
// a moved partition, and (m), it resets the attempts of a moved cursor.
func (h hooks) movedInFlight(inFlight bool, c *cursor) bool {
	switch {
	case h.on(faultRebalanceKeepsInFlight):
		return c.inFlight
	case h.on(faultRebalanceResetsAttempts):
		c.attempts = 0
	}
	return inFlight
}

// expiresAt is fault (s): a member expires only after its deadline.
func (h hooks) expiresAt(deadline int64) int64 {
	if h.on(faultExpiryStrict) && deadline < noDeadline {
		return deadline + 1
	}
	return deadline
}

// rebalanceExpired is fault (r): an expiry takes the expired members off
// the member list (the caller did) but stores no new assignment, and gives
// their sessions back.
func (h hooks) rebalanceExpired(t *topic, g *group, next, a *assignment, gone []string, was []int64) {
	if h.on(faultExpirySkipsRebalance) {
		giveBack(a, gone, was)
		return
	}
	t.rebalance(g, next)
}

// heartbeatAbsent is fault (u): Heartbeat of a member absent from g joins
// it again and reports true.
func (h hooks) heartbeatAbsent(ok bool, t *topic, g *group, member string, now int64) bool {
	if h.on(faultHeartbeatRejoins) {
		_, err := t.joinLocked(g.name, member, now)
		return err == nil
	}
	return ok
}

// rejoinCancels is fault (t): Rejoin keeps the in-flight delivery of the
// lowest partition of m that has one. The caller holds the cursors of m.
func (h hooks) rejoinCancels(m shard.Mask, a *assignment) shard.Mask {
	if h.on(faultRejoinKeepsDelivery) {
		for p, rest, ok := m.First(); ok; p, rest, ok = rest.First() {
			if a.cursors[p].inFlight {
				return m &^ shard.Mask(0).With(p)
			}
		}
	}
	return m
}

// retainDeleted is fault (k): DeleteGroup does not re-apply retention.
func (h hooks) retainDeleted(t *topic, p *partition) {
	if !h.on(faultDeleteSkipsRetention) {
		t.retainLocked(p)
	}
}

// reassign is fault (i): SetAssignor stores the new assignment without
// cancelling the in-flight deliveries of the moved partitions.
func (h hooks) reassign(t *topic, g *group, next *assignment) {
	if h.on(faultSetAssignorKeepsInFlight) {
		g.assign.Store(next)
		return
	}
	t.rebalance(g, next)
}

// addedStart is fault (l): the cursors on added partitions start at
// partition 0's log end offset.
func (h hooks) addedStart(start int64, t *topic) int64 {
	if h.on(faultAddedPartitionsWrongOffset) {
		return t.parts[0].end.Load()
	}
	return start
}

// soughtInFlight is fault (h): Seek keeps the in-flight delivery.
func (h hooks) soughtInFlight(inFlight bool, c *cursor) bool {
	if h.on(faultSeekKeepsInFlight) {
		return c.inFlight
	}
	return inFlight
}
