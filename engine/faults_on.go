//go:build tributary_faults

package engine

import (
	"fmt"
	"runtime"
	"slices"
	"sync"

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

// String returns the fault's name, as ParseFault accepts it.
func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("Fault(%d)", uint8(f))
}

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
	for i, n := range faultNames {
		if n == name {
			return Fault(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown fault %q (want one of %q)", ErrInvalidArgument, name, faultNames[:])
}

// faultSet is the fault a topic was created with, and the state that fault
// needs.
type faultSet struct {
	f     fault
	burns *burnTable // FaultPublishBurnsOffset only
}

// burnTable is FaultPublishBurnsOffset's per-partition count of offsets used
// up by refused publishes. mu is a leaf lock, taken under partition.mu.
type burnTable struct {
	mu     sync.Mutex
	burned map[*partition]int64
}

func (s faultSet) on(f fault) bool { return s.f == f }

// checked reports whether a fault is on. Poll then reads a record under the
// partition lock, with the bounds check, since a faulty broker may have
// trimmed a record some group still needs.
func (s faultSet) checked() bool { return s.f != faultNone }

// lockedAt returns partition p's entry at off, or nil when it is not
// retained, reading under the partition lock.
func (t *topic) lockedAt(p int32, off int64) *entry {
	part := t.parts[p]
	part.mu.Lock()
	defer part.mu.Unlock()
	return part.log.At(off)
}

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
	b.faults = faultSet{f: fault(f)}
	if f == FaultPublishBurnsOffset {
		b.faults.burns = &burnTable{burned: map[*partition]int64{}}
	}
	return nil
}

// releasePolled is fault (a): it unlocks a's cursors of every partition in
// locked and yields, so that other calls run between two partitions of one
// poll. It returns the empty mask.
func (t *topic) releasePolled(a *assignment, locked shard.Mask) shard.Mask {
	unlockCursors(a, locked)
	runtime.Gosched()
	return 0
}

// faultYield widens the window of faults (f) and (g), which need an
// interleaving: Poll yields after reading the assignment (f) or while
// holding a partition lock (g), so that a rebalance is likely to run then.
func (t *topic) faultYield() { runtime.Gosched() }

// burnOffset is fault (d): given Append's result on p (whose lock the caller
// holds), it counts a refused append as a used-up offset and shifts the
// offset of a successful one by the offsets used up so far.
func (t *topic) burnOffset(p *partition, off int64, ok bool) (int64, bool) {
	bt := t.faults.burns
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if !ok {
		bt.burned[p]++
		return -1, false
	}
	return off + bt.burned[p], true
}

// lowIgnoringMemberless is fault (e): the lowest committed offset on part of
// the topic's groups that have members, and of g, starting from low. The
// caller holds part.mu; each group's membership and cursors are read from
// its current assignment snapshot.
func (t *topic) lowIgnoringMemberless(part *partition, g *group, low int64) int64 {
	p := slices.Index(t.parts[:], part)
	for _, o := range t.groups.AppendValues(nil) {
		a := o.assign.Load()
		if o != g && len(a.masks) == 0 || p >= len(a.cursors) {
			continue
		}
		low = min(low, a.cursors[p].committed())
	}
	return low
}
