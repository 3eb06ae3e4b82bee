//go:build !tributary_faults

package engine

import "github.com/f91dcac0/tributary/shard"

// hooks is empty in a normal build, and each of its methods is the
// algorithm's own step: a filter returns its first argument (the correct
// value), a switch is a constant, and a step calls the algorithm's step
// directly. Each inlines, so the algorithm compiles as if the seam were
// not there: no load, branch or call is added. faults.go says where each
// seam is and what its broken variant does.
type hooks struct{}

// Filters: the correct value in, the same value out.

// joinDeadline returns d, the new member's deadline, which lowers the topic's.
func (hooks) joinDeadline(d int64) int64 { return d }

// evictOnPublish returns ok: whether a full partition may give up its oldest record.
func (hooks) evictOnPublish(ok bool, _ *topic, _ *partition) bool { return ok }

// appended returns Append's offset and result as they are.
func (hooks) appended(off int64, ok bool, _ *partition) (int64, bool) {
	return off, ok
}

// inspecting returns the poll's records and masks as they are: no yield, no unlock.
func (hooks) inspecting(dst []Record, locked, picked shard.Mask, _ *topic, _ *assignment, _ int64, _ int32) ([]Record, shard.Mask, shard.Mask) {
	return dst, locked, picked
}

// stale returns moved: whether the poll's assignment was replaced meanwhile.
func (hooks) stale(moved bool) bool { return moved }

// recheck returns empty: whether the poll looks again at a partition it saw empty.
func (hooks) recheck(empty bool) bool { return empty }

// reserving returns picked, the partitions the poll reserves.
func (hooks) reserving(picked shard.Mask) shard.Mask { return picked }

// entry returns e, the record the poll read without the partition lock, and true.
func (hooks) entry(e *entry, _ *topic, _ int32, _ int64) (*entry, bool) {
	return e, true
}

// notOwner returns not: whether Ack or Retry comes from a member that is not the owner.
func (hooks) notOwner(not bool) bool { return not }

// unpinned returns unpinned: whether Ack commits without the partition lock.
func (hooks) unpinned(unpinned bool) bool { return unpinned }

// caughtUpTo returns low, the offset a catch-up trims to.
func (hooks) caughtUpTo(low int64) int64 { return low }

// roomWithoutTrim returns evictable: whether retention notifies room although it removed nothing.
func (hooks) roomWithoutTrim(evictable bool) bool { return evictable }

// latestStart returns end, the log end offset a StartLatest group starts at.
func (hooks) latestStart(end int64, _ *partition) int64 { return end }

// lockMoved returns m, the cursors a rebalance locks.
func (hooks) lockMoved(m shard.Mask) shard.Mask { return m }

// movedInFlight returns inFlight, a moved cursor's in-flight delivery after a rebalance.
func (hooks) movedInFlight(inFlight bool, _ *cursor) bool { return inFlight }

// expiresAt returns deadline, the instant a member expires at.
func (hooks) expiresAt(deadline int64) int64 { return deadline }

// rejoinCancels returns m, the partitions whose deliveries Rejoin cancels.
func (hooks) rejoinCancels(m shard.Mask, _ *assignment) shard.Mask { return m }

// addedStart returns start, the offset a cursor on an added partition starts at.
func (hooks) addedStart(start int64, _ *topic) int64 { return start }

// soughtInFlight returns inFlight, the cursor's in-flight delivery after Seek.
func (hooks) soughtInFlight(inFlight bool, _ *cursor) bool { return inFlight }

// heartbeatAbsent returns ok, Heartbeat's answer for a member absent from its group.
func (hooks) heartbeatAbsent(ok bool, _ *topic, _ *group, _ string, _ int64) bool {
	return ok
}

// Switches.

// settleRefreshes is true: Ack and Retry refresh the member's last-seen instant.
func (hooks) settleRefreshes() bool { return true }

// Steps: the algorithm's step, called directly.

// commitPinned commits a pinned cursor and applies retention (commitPinnedLocked).
func (hooks) commitPinned(t *topic, _ *group, c *cursor, part *partition, offset int64) {
	t.commitPinnedLocked(c, part, offset)
}

// rebalanceExpired stores the assignment without the expired members (rebalance).
func (hooks) rebalanceExpired(t *topic, g *group, next, _ *assignment, _ []string, _ []int64) {
	t.rebalance(g, next)
}

// retainDeleted applies retention to p after DeleteGroup (retainLocked).
func (hooks) retainDeleted(t *topic, p *partition) { t.retainLocked(p) }

// reassign stores SetAssignor's assignment, cancelling moved deliveries (rebalance).
func (hooks) reassign(t *topic, g *group, next *assignment) { t.rebalance(g, next) }
