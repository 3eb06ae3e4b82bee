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

func (hooks) joinDeadline(d int64) int64                          { return d }
func (hooks) evictOnPublish(ok bool, _ *topic, _ *partition) bool { return ok }
func (hooks) appended(off int64, ok bool, _ *partition) (int64, bool) {
	return off, ok
}
func (hooks) inspecting(dst []Record, locked, picked shard.Mask, _ *topic, _ *assignment, _ int64, _ int32) ([]Record, shard.Mask, shard.Mask) {
	return dst, locked, picked
}
func (hooks) stale(moved bool) bool                  { return moved }
func (hooks) recheck(empty bool) bool                { return empty }
func (hooks) reserving(picked shard.Mask) shard.Mask { return picked }
func (hooks) entry(e *entry, _ *topic, _ int32, _ int64) (*entry, bool) {
	return e, true
}
func (hooks) notOwner(not bool) bool                               { return not }
func (hooks) unpinned(unpinned bool) bool                          { return unpinned }
func (hooks) caughtUpTo(low int64) int64                           { return low }
func (hooks) roomWithoutTrim(evictable bool) bool                  { return evictable }
func (hooks) latestStart(end int64, _ *partition) int64            { return end }
func (hooks) lockMoved(m shard.Mask) shard.Mask                    { return m }
func (hooks) movedInFlight(inFlight bool, _ *cursor) bool          { return inFlight }
func (hooks) expiresAt(deadline int64) int64                       { return deadline }
func (hooks) rejoinCancels(m shard.Mask, _ *assignment) shard.Mask { return m }
func (hooks) addedStart(start int64, _ *topic) int64               { return start }
func (hooks) soughtInFlight(inFlight bool, _ *cursor) bool         { return inFlight }
func (hooks) heartbeatAbsent(ok bool, _ *topic, _ *group, _ string, _ int64) bool {
	return ok
}

// Switches.

func (hooks) settleRefreshes() bool { return true }

// Steps: the algorithm's step, called directly.

func (hooks) commitPinned(t *topic, _ *group, c *cursor, part *partition, offset int64) {
	t.commitPinnedLocked(c, part, offset)
}
func (hooks) rebalanceExpired(t *topic, g *group, next, _ *assignment, _ []string, _ []int64) {
	t.rebalance(g, next)
}
func (hooks) retainDeleted(t *topic, p *partition)          { t.retainLocked(p) }
func (hooks) reassign(t *topic, g *group, next *assignment) { t.rebalance(g, next) }
