package engine

//lint:file-ignore U1000 the faults are named here for the tributary_faults build (faults_on.go).

// Deliberate bugs, for proving that the linearizability checker (package
// porcupine) can fail. Each fault is one realistic concurrency or
// bookkeeping bug, broken at a seam of the algorithm: a method of the
// topic's hooks that engine.go, session.go and admin.go call where the
// step is (a filter of a value the algorithm computed, a switch, or a
// step such as a rebalance). The broken variants exist only in builds with
// the tributary_faults build tag (faults_on.go, which exports
// Broker.InjectFault). In every other build hooks is an empty struct whose
// methods are the correct steps (faults_off.go): the identity, a constant
// or a direct call, which the compiler inlines, so the normal build pays
// nothing, not even a load.
//
// docs/testing.md ("Deliberate faults") describes the mechanism that every
// package's faults share.

// fault identifies one deliberate bug; faultNone is the correct engine.
type fault uint8

const (
	faultNone fault = iota
	// (a) Poll releases each cursor lock before taking the next one, so
	// a poll over several partitions is no longer one atomic snapshot.
	faultPollReleasesEach
	// (b) A rebalance keeps the in-flight delivery of a partition whose
	// owner changed.
	faultRebalanceKeepsInFlight
	// (c) Ack and Retry skip the current-owner check.
	faultAckSkipsOwner
	// (d) Publish bumps its offset counter before the capacity check, so a
	// publish to a full partition uses up an offset.
	faultPublishBurnsOffset
	// (e) The retention trim ignores groups that have no members.
	faultTrimIgnoresMemberless
	// (f) Poll does not check, once it holds its cursor locks, that the
	// assignment it read is still current, so a concurrent Join or Leave is
	// not atomic with respect to it.
	faultPollStaleAssignment
	// (g) A rebalance skips the cursor lock of the last partition whose
	// owner changes while it replaces the assignment, so a Poll or Ack
	// holding only that cursor can act on the old assignment after the new
	// one is in place.
	faultRebalanceSkipsLock
	// (h) Seek moves the committed offset but keeps the in-flight delivery.
	faultSeekKeepsInFlight
	// (i) SetAssignor stores the new assignment without cancelling the
	// in-flight deliveries of the partitions that moved.
	faultSetAssignorKeepsInFlight
	// (j) With a replay window, a publish to a full partition evicts the
	// oldest record even when some group has not committed it.
	faultWindowEvictsNeeded
	// (k) DeleteGroup frees the group's slots without re-applying
	// retention, so records only it needed stay until the next ack.
	faultDeleteSkipsRetention
	// (l) AddPartitions starts every group's cursor on the new partitions
	// at partition 0's log end offset instead of 0.
	faultAddedPartitionsWrongOffset
	// (m) A rebalance that cancels an in-flight delivery also resets its
	// attempts, so the redelivery says Attempt 1 again.
	faultRebalanceResetsAttempts
	// (n) Poll does not check again, after seeing a record on a later
	// partition, that a partition it saw empty is still empty, so a poll
	// over several partitions can miss a record published meanwhile.
	faultPollSkipsRecheck
	// (o) Ack commits a pinned cursor without the partition lock, as an
	// unpinned one, so the group at the least committed offset moves
	// without applying retention.
	faultAckIgnoresPin
	// (p) CreateGroupAt with StartLatest starts the group at the offset of
	// each partition's last record instead of its log end, so the group
	// receives one record published before it was created.
	faultLatestStartsBehind
	// (q) Retention notifies room only when it removes records, not when
	// an ack makes the oldest record of a full partition evictable by the
	// replay window without removing anything, so a producer waiting on
	// Room is never woken although a publish would succeed.
	faultRoomOnlyOnTrim
	// (r) A session expiry removes the expired members from the group's
	// member list but stores no new assignment: no rebalance, so the
	// expired member keeps its partitions and deliveries.
	faultExpirySkipsRebalance
	// (s) A member expires only when its last-seen instant is more than
	// the session timeout before the clock (> for >=).
	faultExpiryStrict
	// (t) Rejoin of a member keeps the in-flight delivery of the lowest
	// of its partitions that has one.
	faultRejoinKeepsDelivery
	// (u) Heartbeat of a member absent from an existing group joins it
	// again (and returns true) instead of returning false.
	faultHeartbeatRejoins
	// (v) Ack and Retry do not refresh the member's last-seen instant.
	faultSettleSkipsRefresh
	// (w) A Join that adds a member does not lower the topic's deadline,
	// so the new member can outlive its session until some other member's
	// deadline comes (for the topic's first member: for ever).
	faultJoinKeepsDeadline
	// (x) Catching up with the commits a partition's sole cursor made
	// without the partition lock raises the partition's least committed
	// offset but removes no record, so the records the only group
	// committed stay, filling the partition.
	faultCatchUpSkipsTrim
	faultCount
)
