package kafka

// Share groups (KIP-932: ShareGroupHeartbeat, ShareGroupDescribe,
// ShareFetch, ShareAcknowledge) on Tributary's consumer groups.
//
// Tributary's model is a share group's almost one to one: the broker, not
// the client, owns delivery state, and every record is acknowledged one by
// one. A share group G subscribed to topics T1..Tn is the Tributary group
// G on each Ti; each share member is one tributary.BackendMember per
// subscribed topic, joined on its first heartbeat and left on its leave
// or expiry. What KIP-932 calls
//
//   - acquiring a record (ShareFetch) is Tributary's poll: the record at
//     the group's committed offset of a partition the member owns is
//     reserved to it. Tributary keeps at most one record per partition per
//     group in flight, so a ShareFetch acquires at most one record per
//     partition, and the next record of a partition is acquirable only
//     after the previous one is acknowledged (KIP-932 lets a member hold
//     up to group.share.partition.max.record.locks records of a partition);
//   - the delivery count is Record.Attempt (SPEC rule 16): 1 on the first
//     delivery, +1 after each release, rebalance or lock timeout;
//   - ACCEPT (1) is Ack: the committed offset moves past the record, which
//     retention may then remove;
//   - RELEASE (2) is Retry: the record is delivered again, to the
//     partition's owner, with Attempt + 1;
//   - REJECT (3) is a dead letter, the typed library's way (WithDeadLetter):
//     with a dead-letter topic in the group's GroupConfig (set by
//     Cluster.CreateGroup with tributary.WithDeadLetter before any member
//     joins), a copy of the record with the HeaderDeadLetter* headers goes
//     there (the topic is created like the origin if absent), then the
//     record is acked; without one, the record is acked only, which is
//     Kafka's "archived": never delivered again;
//   - GAP (0) is treated as ACCEPT (Kafka archives a gap's offsets);
//   - group.share.delivery.count.limit is the group's MaxAttempts, with its
//     dead-letter topic: a RELEASE of a record delivered MaxAttempts times,
//     or an acquisition of one delivered more often (lock timeouts), dead
//     letters it instead. A group without a dead-letter topic has no limit:
//     a released record is delivered again for ever, as the typed library
//     retries it;
//   - the acquisition lock is the ack timeout (tributary.WithAckTimeout,
//     SPEC rule 22), which the Server cannot read off the backend:
//     WithShareRecordLockDuration tells it the value to report in
//     AcquisitionLockTimeoutMillis. A record whose lock ran out is not
//     given to another member: Tributary delivers it again to the
//     partition's owner, at its next fetch, at the same offset: an
//     acknowledgement the client still sends for the lapsed delivery
//     settles the new one (Kafka refuses it). Without an ack timeout, an
//     acquired record stays acquired until it is acknowledged, its share
//     session or connection closes, or its member leaves or expires;
//   - the share group's session timeout is the backend's
//     (tributary.WithSessionTimeout), or without one WithShareSessionTimeout's
//     (45 s by default, Kafka's group.share.session.timeout.ms): a member
//     that sends no ShareGroupHeartbeat for that long is removed, as by a
//     leave, when the next share request of its group comes;
//   - the assignment is Tributary's: a member is assigned the partitions
//     its BackendMembers own (the group's assignor, RoundRobin unless
//     Cluster.SetAssignor changed it), and a partition is owned by one
//     member at a time (KIP-932's simple assignor may share a partition
//     among members). A rebalance takes effect at once on the broker: a
//     member that loses a partition learns it at its next heartbeat, and
//     its acknowledgement of a record it held there fails with
//     INVALID_RECORD_STATE (the record goes to the new owner with
//     Attempt + 1: at least once).
//
// Where the group starts is Tributary's (SPEC rule 7): at the log start,
// unless the group was created with tributary.WithStart(StartLatest);
// share.auto.offset.reset is not read. Share sessions follow KIP-932: a
// ShareFetch of epoch 0 opens the member's session (and releases what an
// earlier one held), one of the session's epoch continues it (Topics add
// partitions, ForgottenTopicsData remove them), and epoch -1 closes it,
// releasing what the member holds; so does the close of the connection
// that opened the session. A member has one session (there is one
// broker).
//
// A dead letter's publish waits for room in a full dead-letter topic (the
// typed library's "never lost"), holding up its request, until the client
// goes away or the Server closes; the record then stays acquired. Group
// ids name Tributary groups whatever the protocol: a classic consumer
// group of the same name on the same topic is the same Tributary group
// (KIP-932 keeps group types apart: GROUP_ID_NOT_FOUND).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultShareSessionTimeout is a share member's session timeout on a
// backend that enforces none (Backend.SessionTimeout 0): Kafka's
// group.share.session.timeout.ms default.
const DefaultShareSessionTimeout = 45 * time.Second

// ackTypes of KIP-932's acknowledgement batches.
const (
	ackGap     int8 = 0
	ackAccept  int8 = 1
	ackRelease int8 = 2
	ackReject  int8 = 3
)

// WithShareRecordLockDuration sets the acquisition lock duration (1 ms..24
// days) that ShareFetch reports to share consumers: Kafka's
// group.share.record.lock.duration.ms. Set it to the cluster's ack timeout
// (tributary.WithAckTimeout), which is what expires a lock; the Server
// cannot read that off the backend. Default: none, reported as the largest
// value (2^31 − 1 ms), since without an ack timeout a lock never expires.
func WithShareRecordLockDuration(d time.Duration) Option {
	return func(s *Server) error {
		if d < time.Millisecond || d > math.MaxInt32*time.Millisecond {
			return fmt.Errorf("%w: share record lock duration %v outside 1ms..%v", tributary.ErrInvalidArgument, d, math.MaxInt32*time.Millisecond)
		}
		s.share.lockTimeout = d
		return nil
	}
}

// WithShareSessionTimeout sets the session timeout of share members
// (tributary.MinSessionTimeout..1 h; default DefaultShareSessionTimeout) on
// a backend that enforces none: Kafka's group.share.session.timeout.ms.
// On a backend with a session timeout (tributary.WithSessionTimeout) that
// one applies, since the backend expires the members itself.
func WithShareSessionTimeout(d time.Duration) Option {
	return func(s *Server) error {
		if d < tributary.MinSessionTimeout || d > time.Hour {
			return fmt.Errorf("%w: share session timeout %v outside %v..1h", tributary.ErrInvalidArgument, d, tributary.MinSessionTimeout)
		}
		s.share.session = d
		return nil
	}
}

// shareCoordinator is one Server's share-group state.
type shareCoordinator struct {
	s           *Server
	lockTimeout time.Duration // WithShareRecordLockDuration; 0: none known
	session     time.Duration // WithShareSessionTimeout; 0: the default

	// mu guards groups and everything under it (members, sessions,
	// acquired records). Backend calls that return at once are made under
	// it; a waiting poll and a dead letter's publish are not.
	mu     sync.Mutex
	groups map[string]*shareGroup
}

// shareGroup is one share group: its members and the group epoch, the
// last member epoch handed out.
type shareGroup struct {
	name    string
	epoch   int32
	members map[string]*shareMember
}

// shareMember is one member of a share group.
type shareMember struct {
	id        string // the client's member id
	name      string // its Tributary member name (memberName)
	epoch     int32
	prevEpoch int32 // accepted too: the response that bumped it may be lost
	clientID  string
	host      string
	rack      *string
	topics    []string                           // subscribed, sorted
	handles   map[string]tributary.BackendMember // joined, by topic
	sent      map[string][]int32                 // the assignment last sent
	lastSeen  time.Time                          // last heartbeat
	session   *shareSession                      // nil: none open
	acquired  map[partKey]acquired               // in flight to the member, at most one per partition
}

// acquired is one record a share member holds.
type acquired struct {
	bm   tributary.BackendMember
	rec  engine.Record
	sent bool // false: acquired while the member's session did not hold its partition
}

// shareSession is a member's share session: its epoch (the one the next
// request must carry) and partitions.
type shareSession struct {
	epoch int32
	parts map[[16]byte]map[int32]struct{}
	stop  func() bool // stops the release at its connection's close
}

// validMemberID is KIP-932's member id check: 1 to 36 bytes.
func validMemberID(id string) bool { return id != "" && len(id) <= 36 }

// memberName maps a client's member id to a Tributary member name: the id
// without trailing '=' (Java and franz-go send base64 UUIDs with padding)
// when that is an identifier, otherwise "m-" and 32 hex digits of its
// SHA-256. Ids that differ only in trailing '=' name the same member.
func memberName(id string) string {
	if n := strings.TrimRight(id, "="); validName(n) {
		return n
	}
	sum := sha256.Sum256([]byte(id))
	return "m-" + hex.EncodeToString(sum[:16])
}

// sessionTimeout is the share members' session timeout.
func (sc *shareCoordinator) sessionTimeout() time.Duration {
	if d := sc.s.backend.SessionTimeout(); d > 0 {
		return d
	}
	if sc.session > 0 {
		return sc.session
	}
	return DefaultShareSessionTimeout
}

// heartbeatMillis is the heartbeat interval told to members.
func (sc *shareCoordinator) heartbeatMillis() int32 {
	return int32(tributary.HeartbeatInterval(sc.sessionTimeout()).Milliseconds())
}

// lockMillis is AcquisitionLockTimeoutMillis.
func (sc *shareCoordinator) lockMillis() int32 {
	if sc.lockTimeout == 0 {
		return math.MaxInt32
	}
	return int32(sc.lockTimeout.Milliseconds())
}

// memberLocked returns the group and member, after expiring the group's
// members whose session ran out; nil when absent.
func (sc *shareCoordinator) memberLocked(group, id string, now time.Time) (*shareGroup, *shareMember) {
	g := sc.groups[group]
	if g == nil {
		return nil, nil
	}
	timeout := sc.sessionTimeout()
	for _, m := range g.members {
		if now.Sub(m.lastSeen) >= timeout {
			sc.s.log.Info("kafka: share member expired", "group", group, "member", m.id)
			sc.removeLocked(g, m)
		}
	}
	return g, g.members[id]
}

// removeLocked takes m out of g: it leaves every topic's Tributary group
// (its in-flight records go to the new owners) and its session closes.
func (sc *shareCoordinator) removeLocked(g *shareGroup, m *shareMember) {
	for topic, bm := range m.handles {
		if _, err := bm.Leave(); err != nil {
			sc.s.log.Info("kafka: share member leave", "group", g.name, "topic", topic, "member", m.id, "err", err)
		}
	}
	m.handles = nil
	m.acquired = nil
	sc.closeSessionLocked(m)
	delete(g.members, m.id)
	if len(g.members) == 0 {
		delete(sc.groups, g.name)
	}
}

// closeSessionLocked forgets m's session without releasing anything.
func (sc *shareCoordinator) closeSessionLocked(m *shareMember) {
	if m.session != nil && m.session.stop != nil {
		m.session.stop()
	}
	m.session = nil
}

// takeAcquiredLocked returns m's acquired records and forgets them.
func takeAcquiredLocked(m *shareMember) []acquired {
	var out []acquired
	for _, a := range m.acquired {
		out = append(out, a)
	}
	clear(m.acquired)
	return out
}

// release retries each record (a false Retry: a rebalance or expiry
// cancelled it already).
func (sc *shareCoordinator) release(as []acquired) {
	for _, a := range as {
		if _, err := a.bm.Retry(a.rec.Partition, a.rec.Offset); err != nil {
			sc.s.log.Info("kafka: share release", "topic", a.rec.Topic, "partition", a.rec.Partition, "offset", a.rec.Offset, "err", err)
		}
	}
}

// openSessionLocked opens m's session on r's connection: its close
// releases what m holds, if the session is still m's.
func (sc *shareCoordinator) openSessionLocked(r *request, m *shareMember) *shareSession {
	sess := &shareSession{parts: map[[16]byte]map[int32]struct{}{}}
	sess.stop = context.AfterFunc(r.ctx, func() {
		sc.mu.Lock()
		var as []acquired
		if m.session == sess {
			m.session = nil
			as = takeAcquiredLocked(m)
		}
		sc.mu.Unlock()
		sc.release(as)
	})
	m.session = sess
	return sess
}

// backendCode maps a backend error of a member's call: a superseded or
// removed member is UNKNOWN_MEMBER_ID, an unreachable backend
// COORDINATOR_NOT_AVAILABLE (retriable), the rest as errorCode.
func backendCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, tributary.ErrFenced), errors.Is(err, tributary.ErrClosed):
		return kerr.UnknownMemberID
	case errors.Is(err, tributary.ErrUnavailable):
		return kerr.CoordinatorNotAvailable
	}
	return kerr.ErrorForCode(errorCode(err)).(*kerr.Error)
}

// handleShareGroupHeartbeat joins (epoch 0), heartbeats (the member's
// epoch, or the one before it) or leaves (-1) a share group, and answers
// the member's epoch, the heartbeat interval (a third of the session
// timeout, at most 3 s) and, when it changed, the request is a join or
// carries SubscribedTopicNames, its assignment: per subscribed topic that
// exists, topicID(name) and the partitions its Tributary member owns.
// The member epoch advances whenever the assignment it is sent changes.
// Errors: INVALID_GROUP_ID (a group id that is not a Tributary
// identifier); INVALID_REQUEST (a member id of 0 or over 36 bytes, an
// epoch below -1, a join without topics); UNKNOWN_MEMBER_ID (not a member:
// never joined, left, expired, or removed by Cluster.RemoveMember);
// FENCED_MEMBER_EPOCH (an epoch other than the member's current or
// previous one); COORDINATOR_NOT_AVAILABLE (the backend is unreachable).
// Subscribed names that are no topic (yet) are kept and tried again on
// each heartbeat.
func handleShareGroupHeartbeat(s *Server, r *request, req *kmsg.ShareGroupHeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	sc := s.share
	resp.HeartbeatIntervalMillis = sc.heartbeatMillis()
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = e.Code, kmsg.StringPtr(msg)
		return resp, nil
	}
	switch {
	case !validName(req.GroupID):
		return fail(kerr.InvalidGroupID, fmt.Sprintf("group id %q: 1 to 64 of A-Z a-z 0-9 _ - (Tributary's identifiers)", req.GroupID))
	case !validMemberID(req.MemberID):
		return fail(kerr.InvalidRequest, "member id: 1 to 36 bytes")
	case req.MemberEpoch < -1:
		return fail(kerr.InvalidRequest, fmt.Sprintf("member epoch %d", req.MemberEpoch))
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest, "a join needs subscribed topic names")
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	now := time.Now()
	g, m := sc.memberLocked(req.GroupID, req.MemberID, now)
	switch {
	case req.MemberEpoch == -1:
		if m == nil {
			return fail(kerr.UnknownMemberID, "not a member")
		}
		sc.removeLocked(g, m)
		resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(req.MemberID), -1
		return resp, nil
	case req.MemberEpoch == 0:
		if g == nil {
			g = &shareGroup{name: req.GroupID, members: map[string]*shareMember{}}
			sc.groups[g.name] = g
		}
		if m == nil {
			m = &shareMember{id: req.MemberID, name: memberName(req.MemberID), handles: map[string]tributary.BackendMember{}, acquired: map[partKey]acquired{}}
			g.members[m.id] = m
		}
	case m == nil:
		return fail(kerr.UnknownMemberID, "not a member")
	case req.MemberEpoch != m.epoch && req.MemberEpoch != m.prevEpoch:
		return fail(kerr.FencedMemberEpoch, fmt.Sprintf("member epoch %d, current %d", req.MemberEpoch, m.epoch))
	}
	m.lastSeen = now
	m.clientID = r.clientID
	m.host = r.cc.nc.RemoteAddr().String()
	if req.RackID != nil {
		m.rack = req.RackID
	}
	full := req.MemberEpoch == 0 || req.SubscribedTopicNames != nil
	if req.SubscribedTopicNames != nil {
		m.topics = slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
	}
	assign, e, err := sc.syncLocked(g, m)
	if e != nil {
		if e == kerr.UnknownMemberID {
			sc.removeLocked(g, m)
		}
		return fail(e, err.Error())
	}
	if m.epoch == 0 || !sameAssignment(assign, m.sent) {
		g.epoch++
		m.prevEpoch, m.epoch = m.epoch, g.epoch
		m.sent = assign
		full = true
	}
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(req.MemberID), m.epoch
	if full {
		resp.Assignment = assignmentOf(assign)
	}
	return resp, nil
}

// syncLocked makes m's Tributary members match its subscription: it joins
// topics newly subscribed (and existing), leaves topics no longer
// subscribed, heartbeats the rest, and returns m's assignment by topic.
// A member the backend no longer counts in a group (it expired there, or
// was removed) is UNKNOWN_MEMBER_ID.
func (sc *shareCoordinator) syncLocked(g *shareGroup, m *shareMember) (map[string][]int32, *kerr.Error, error) {
	for topic, bm := range m.handles {
		if _, ok := slices.BinarySearch(m.topics, topic); ok {
			continue
		}
		if _, err := bm.Leave(); err != nil {
			return nil, backendCode(err), err
		}
		delete(m.handles, topic)
		for k := range m.acquired {
			if k.topic == topic {
				delete(m.acquired, k)
			}
		}
	}
	assign := map[string][]int32{}
	for _, topic := range m.topics {
		bm, ok := m.handles[topic]
		if !ok {
			h, err := sc.s.topic(topic)
			if errors.Is(err, errUnknownTopic) || errors.Is(err, errInvalidTopic) {
				continue
			}
			if err != nil {
				return nil, backendCode(err), err
			}
			if bm, err = h.Member(g.name, m.name); err != nil {
				return nil, backendCode(err), err
			}
			if _, err := bm.Join(); err != nil {
				return nil, backendCode(err), err
			}
			m.handles[topic] = bm
			sc.s.log.Info("kafka: share member joined", "group", g.name, "topic", topic, "member", m.id)
		} else {
			alive, err := bm.Heartbeat()
			if err != nil {
				return nil, backendCode(err), err
			}
			if !alive {
				return nil, kerr.UnknownMemberID, fmt.Errorf("member %q is no longer in group %q of topic %q", m.id, g.name, topic)
			}
		}
		assign[topic] = bm.Assignment()
	}
	return assign, nil, nil
}

func sameAssignment(a, b map[string][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if qs, ok := b[t]; !ok || !slices.Equal(ps, qs) {
			return false
		}
	}
	return true
}

// assignmentOf is the heartbeat response's assignment, topics sorted.
func assignmentOf(assign map[string][]int32) *kmsg.ShareGroupHeartbeatResponseAssignment {
	a := kmsg.NewShareGroupHeartbeatResponseAssignment()
	a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
	for _, t := range slices.Sorted(mapsKeys(assign)) {
		tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		tp.TopicID, tp.Partitions = topicID(t), slices.Clone(assign[t])
		a.TopicPartitions = append(a.TopicPartitions, tp)
	}
	return &a
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ackBatch is one acknowledgement batch of either request.
type ackBatch struct {
	first, last int64
	types       []int8
}

// ackPart is one partition's acknowledgements: the batches and where the
// result goes.
type ackPart struct {
	topicID   [16]byte
	partition int32
	batches   []ackBatch
	code      int16 // the result
}

// ackAction is one acquired record to settle, decided under the lock and
// done outside it.
type ackAction struct {
	part *ackPart
	a    acquired
	typ  int8
}

// planAcksLocked checks each partition's batches against what m holds and
// takes the records they settle out of m.acquired: INVALID_REQUEST for a
// malformed batch (first > last, overlapping or descending, no types, a
// per-offset list of the wrong length, a type outside 0..3);
// UNKNOWN_TOPIC_ID; INVALID_RECORD_STATE when a batch names an offset
// other than the record m holds on the partition (gaps aside), or m holds
// none. A partition with an error settles nothing.
func (sc *shareCoordinator) planAcksLocked(m *shareMember, parts []*ackPart) []ackAction {
	var out []ackAction
	for _, p := range parts {
		prev := int64(-1)
		for _, b := range p.batches {
			if b.first > b.last || b.first <= prev || len(b.types) == 0 || (len(b.types) > 1 && int64(len(b.types)) != b.last-b.first+1) {
				p.code = kerr.InvalidRequest.Code
				break
			}
			for _, t := range b.types {
				if t < ackGap || t > ackReject {
					p.code = kerr.InvalidRequest.Code
				}
			}
			prev = b.last
		}
		if p.code != 0 {
			continue
		}
		name, ok := sc.s.topicByID(p.topicID)
		if !ok {
			p.code = kerr.UnknownTopicID.Code
			continue
		}
		a, held := m.acquired[partKey{name, p.partition}]
		typ, found := int8(-1), false
		for _, b := range p.batches {
			if len(b.types) == 1 {
				t := b.types[0]
				covers := held && b.first <= a.rec.Offset && a.rec.Offset <= b.last
				if covers {
					typ, found = t, true
				}
				if t != ackGap && (!covers || b.last > b.first) {
					p.code = kerr.InvalidRecordState.Code
				}
				continue
			}
			for i, t := range b.types {
				if off := b.first + int64(i); held && off == a.rec.Offset {
					typ, found = t, true
				} else if t != ackGap {
					p.code = kerr.InvalidRecordState.Code
				}
			}
		}
		if p.code == 0 && held && found {
			delete(m.acquired, partKey{name, p.partition})
			out = append(out, ackAction{part: p, a: a, typ: typ})
		} else if p.code == 0 && !found && !allGaps(p.batches) {
			p.code = kerr.InvalidRecordState.Code
		}
	}
	return out
}

func allGaps(bs []ackBatch) bool {
	for _, b := range bs {
		for _, t := range b.types {
			if t != ackGap {
				return false
			}
		}
	}
	return true
}

// settle does the planned acknowledgements: accept and gap Ack, release
// Retries (or dead-letters at the group's delivery count limit), reject
// dead-letters (or Acks without a dead-letter topic). A false Ack or
// Retry (a rebalance, an expiry or Seek cancelled the delivery) is
// INVALID_RECORD_STATE.
func (sc *shareCoordinator) settle(ctx context.Context, group string, acts []ackAction) {
	for _, act := range acts {
		var ok bool
		var err error
		rec := &act.a.rec
		switch act.typ {
		case ackRelease:
			var cfg tributary.GroupConfig
			if cfg, _, err = sc.s.backend.GroupConfig(rec.Topic, group); err == nil {
				if cfg.DeadLetter != "" && rec.Attempt >= cfg.MaxAttempts {
					ok, err = sc.deadLetter(ctx, group, act.a, cfg.DeadLetter, fmt.Sprintf("kafka: released after %d deliveries, the group's limit", rec.Attempt))
				} else {
					ok, err = act.a.bm.Retry(rec.Partition, rec.Offset)
				}
			}
		case ackReject:
			var cfg tributary.GroupConfig
			if cfg, _, err = sc.s.backend.GroupConfig(rec.Topic, group); err == nil {
				if cfg.DeadLetter != "" {
					ok, err = sc.deadLetter(ctx, group, act.a, cfg.DeadLetter, "kafka: rejected by a share consumer")
				} else {
					ok, err = act.a.bm.Ack(rec.Partition, rec.Offset)
				}
			}
		default:
			ok, err = act.a.bm.Ack(rec.Partition, rec.Offset)
		}
		switch {
		case err != nil:
			act.part.code = errorCode(err)
		case !ok:
			act.part.code = kerr.InvalidRecordState.Code
		}
	}
}

// deadLetter publishes a copy of a's record to the dead-letter topic dlq
// (created with the origin's partition count and payload type if absent),
// with the typed library's dead-letter headers, waiting for room until ctx
// ends or the Server closes, then acks the record. A copy over the
// maximum message size goes without the error text.
func (sc *shareCoordinator) deadLetter(ctx context.Context, group string, a acquired, dlq, why string) (bool, error) {
	rec := &a.rec
	_, pt, err := sc.s.backend.OpenTopic(rec.Topic)
	if err != nil {
		return false, err
	}
	h, err := sc.s.topic(dlq)
	if errors.Is(err, errUnknownTopic) {
		var parts int32 = 1
		if oh, oerr := sc.s.topic(rec.Topic); oerr == nil {
			parts = oh.Partitions()
		}
		if _, err = sc.s.backend.CreateTopic(dlq, parts, pt); err == nil {
			h, err = sc.s.topic(dlq)
		}
	}
	if err != nil {
		return false, err
	}
	headers := make([]tributary.Header, 0, len(rec.Headers)+7)
	headers = append(append(headers, rec.Headers...),
		tributary.Header{Key: tributary.HeaderPayloadType, Value: pt},
		tributary.Header{Key: tributary.HeaderDeadLetterTopic, Value: rec.Topic},
		tributary.Header{Key: tributary.HeaderDeadLetterGroup, Value: group},
		tributary.Header{Key: tributary.HeaderDeadLetterPartition, Value: strconv.Itoa(int(rec.Partition))},
		tributary.Header{Key: tributary.HeaderDeadLetterOffset, Value: strconv.FormatInt(rec.Offset, 10)},
		tributary.Header{Key: tributary.HeaderDeadLetterAttempts, Value: strconv.Itoa(int(rec.Attempt))},
		tributary.Header{Key: tributary.HeaderDeadLetterError, Value: why},
	)
	m := engine.Message{Key: rec.Key, Headers: headers, Payload: rec.Payload, Time: rec.Time}
	p := rec.Partition % h.Partitions()
	_, err = h.Publish(ctx, sc.s.ctx.Done(), p, m)
	if errors.Is(err, tributary.ErrInvalidArgument) {
		headers[len(headers)-1].Value = ""
		_, err = h.Publish(ctx, sc.s.ctx.Done(), p, m)
	}
	if err != nil {
		return false, err
	}
	sc.s.log.Info("kafka: share record dead-lettered", "topic", rec.Topic, "group", group, "partition", rec.Partition, "offset", rec.Offset, "to", dlq)
	return a.bm.Ack(rec.Partition, rec.Offset)
}

// shareIDs returns a request's group and member ids and, when they are
// malformed, the error to answer.
func shareIDs(group, member *string) (string, string, *kerr.Error) {
	var g, m string
	if group != nil {
		g = *group
	}
	if member != nil {
		m = *member
	}
	if !validName(g) || !validMemberID(m) {
		return g, m, kerr.InvalidRequest
	}
	return g, m, nil
}

// fetchTarget is one partition of a share session to acquire from.
type fetchTarget struct {
	topicID   [16]byte
	topic     string
	partition int32
	bm        tributary.BackendMember
}

// handleShareFetch settles the piggy-backed acknowledgements, then
// acquires records of the member's session's partitions: at most one per
// partition (Tributary's one in-flight record per partition and group),
// at most MaxRecords (at most 64) in all, each sent as a record batch
// of its own with an AcquiredRecords range of that one offset and its
// delivery count (Record.Attempt). When nothing is acquirable it waits up
// to MaxWaitMillis on the member's Poll (woken by a publish, a release,
// a rebalance or a lock timeout); a record Poll acquires on a partition
// the session does not hold yet (the member was just assigned it, and
// learns so at its next heartbeat) is kept for the member and sent, as it
// is, by the first fetch whose session holds the partition. MinBytes and the byte limits are
// not read: a Tributary fetch is at most one record per partition.
// Top-level errors: INVALID_REQUEST (malformed ids, acknowledgements on a
// session-opening request); UNKNOWN_MEMBER_ID (not a member of the share
// group: Kafka checks only the id's format here); SHARE_SESSION_NOT_FOUND
// and INVALID_SHARE_SESSION_EPOCH (KIP-932's session epochs). A session
// partition of an unknown topic id is UNKNOWN_TOPIC_ID, of a partition
// out of range UNKNOWN_TOPIC_OR_PARTITION; one of a topic the member is
// not subscribed to acquires nothing.
func handleShareFetch(s *Server, r *request, req *kmsg.ShareFetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	sc := s.share
	resp.AcquisitionLockTimeoutMillis = sc.lockMillis()
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = e.Code, kmsg.StringPtr(msg)
		return resp, nil
	}
	group, member, e := shareIDs(req.GroupID, req.MemberID)
	if e != nil {
		return fail(e, "group id: a Tributary identifier; member id: 1 to 36 bytes")
	}
	var acks []*ackPart
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			ap := &ackPart{topicID: t.TopicID, partition: p.Partition}
			for _, b := range p.AcknowledgementBatches {
				ap.batches = append(ap.batches, ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
			}
			acks = append(acks, ap)
		}
	}

	sc.mu.Lock()
	_, m := sc.memberLocked(group, member, time.Now())
	if m == nil {
		sc.mu.Unlock()
		return fail(kerr.UnknownMemberID, "not a member of share group "+group)
	}
	var sess *shareSession
	var released []acquired
	switch {
	case req.ShareSessionEpoch == -1:
		if m.session == nil {
			sc.mu.Unlock()
			return fail(kerr.ShareSessionNotFound, "no share session")
		}
	case req.ShareSessionEpoch == 0:
		if len(acks) > 0 {
			sc.mu.Unlock()
			return fail(kerr.InvalidRequest, "acknowledgements on a session-opening fetch")
		}
		sc.closeSessionLocked(m)
		released = takeAcquiredLocked(m)
		sess = sc.openSessionLocked(r, m)
	case m.session == nil:
		sc.mu.Unlock()
		return fail(kerr.ShareSessionNotFound, "no share session")
	case m.session.epoch != req.ShareSessionEpoch:
		epoch := m.session.epoch
		sc.mu.Unlock()
		return fail(kerr.InvalidShareSessionEpoch, fmt.Sprintf("session epoch %d, want %d", req.ShareSessionEpoch, epoch))
	default:
		sess = m.session
	}
	acts := sc.planAcksLocked(m, acks)
	if req.ShareSessionEpoch == -1 {
		released = takeAcquiredLocked(m)
		sc.closeSessionLocked(m)
	} else {
		for _, t := range req.Topics {
			ps := sess.parts[t.TopicID]
			if ps == nil {
				ps = map[int32]struct{}{}
				sess.parts[t.TopicID] = ps
			}
			for _, p := range t.Partitions {
				ps[p.Partition] = struct{}{}
			}
		}
		for _, f := range req.ForgottenTopicsData {
			for _, p := range f.Partitions {
				delete(sess.parts[f.TopicID], p)
			}
			if len(sess.parts[f.TopicID]) == 0 {
				delete(sess.parts, f.TopicID)
			}
		}
		sess.epoch = max(1, sess.epoch+1) // MaxInt32 wraps to 1, as Kafka
	}
	sc.mu.Unlock()

	sc.release(released)
	sc.settle(r.ctx, group, acts)
	out := newShareFetchOut(resp)
	for _, ap := range acks {
		out.part(ap.topicID, ap.partition).AcknowledgeErrorCode = ap.code
	}
	if sess == nil {
		return resp, nil
	}

	// Acquire: first what is there, then, with nothing, wait.
	sc.mu.Lock()
	rot := int(sess.epoch)
	var targets []fetchTarget
	for id, ps := range sess.parts {
		name, known := s.topicByID(id)
		var h tributary.BackendTopic
		var err error
		if known {
			h, err = s.topic(name)
		}
		for p := range ps {
			switch {
			case !known:
				out.part(id, p).ErrorCode = kerr.UnknownTopicID.Code
			case err != nil:
				out.part(id, p).ErrorCode = errorCode(err)
			case p < 0 || p >= h.Partitions():
				out.part(id, p).ErrorCode = kerr.UnknownTopicOrPartition.Code
			case m.handles[name] != nil:
				targets = append(targets, fetchTarget{id, name, p, m.handles[name]})
			}
		}
	}
	// Records acquired for the member before its session held their
	// partitions go first, as they are (no new delivery).
	var got []acquired
	have := map[partKey]bool{}
	for _, t := range targets {
		k := partKey{t.topic, t.partition}
		if a, ok := m.acquired[k]; ok && !a.sent {
			got = append(got, a)
			have[k] = true
		}
	}
	sc.mu.Unlock()
	slices.SortFunc(targets, func(a, b fetchTarget) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	if n := len(targets); n > 1 {
		// Start where the session epoch says, so that a MaxRecords below
		// the partitions served does not always favour the lowest ones.
		k := rot % n
		targets = append(targets[k:], targets[:k]...)
	}
	limit := int32(64)
	if req.MaxRecords > 0 {
		limit = min(limit, req.MaxRecords)
	}
	for _, t := range targets {
		if int32(len(got)) >= limit {
			break
		}
		if have[partKey{t.topic, t.partition}] {
			continue
		}
		recs, err := t.bm.TryPollPartition(nil, t.partition)
		if err != nil {
			out.part(t.topicID, t.partition).ErrorCode = backendCode(err).Code
			continue
		}
		for _, rec := range recs {
			got = append(got, acquired{bm: t.bm, rec: rec})
		}
	}
	if len(got) == 0 && req.MaxWaitMillis > 0 && len(targets) > 0 {
		wctx, cancel := context.WithTimeout(r.ctx, time.Duration(req.MaxWaitMillis)*time.Millisecond)
		for len(got) == 0 && wctx.Err() == nil {
			var stray []acquired
			var ok bool
			got, stray, ok = sc.pollOnce(wctx, targets, limit)
			if len(stray) > 0 {
				// Kept for the member, sent once its session holds the
				// partition (after its next heartbeat).
				sc.mu.Lock()
				if m.session == sess {
					for _, a := range stray {
						m.acquired[partKey{a.rec.Topic, a.rec.Partition}] = a
					}
					stray = nil
				}
				sc.mu.Unlock()
				sc.release(stray)
			}
			if !ok {
				break
			}
		}
		cancel()
		if r.ctx.Err() != nil {
			sc.release(got)
			return nil, r.ctx.Err() // the client went away or the Server closed
		}
	}
	got = sc.overLimit(r.ctx, group, got)

	sc.mu.Lock()
	if m.session != sess {
		// The session closed (its connection, a leave, an expiry, a new
		// session) while the fetch waited: what it acquired goes back.
		sc.mu.Unlock()
		sc.release(got)
		return resp, nil
	}
	for i := range got {
		got[i].sent = true
		m.acquired[partKey{got[i].rec.Topic, got[i].rec.Partition}] = got[i]
	}
	sc.mu.Unlock()
	for _, a := range got {
		rp := out.part(topicID(a.rec.Topic), a.rec.Partition)
		rp.Records = appendBatch(rp.Records, []engine.Record{a.rec})
		ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
		ar.FirstOffset, ar.LastOffset = a.rec.Offset, a.rec.Offset
		ar.DeliveryCount = int16(min(a.rec.Attempt, math.MaxInt16))
		rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
	}
	return resp, nil
}

// pollOnce waits, until ctx ends, for records of targets: a Poll on each
// target topic's member, all ended when one returns. It returns the
// records of targets' partitions, the others (stray: the member owns
// partitions its session does not hold yet), and false when every Poll
// failed for another reason than ctx (the member left its groups).
func (sc *shareCoordinator) pollOnce(ctx context.Context, targets []fetchTarget, limit int32) (got, stray []acquired, ok bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	want := map[partKey]bool{}
	var bms []tributary.BackendMember
	seen := map[string]bool{}
	for _, t := range targets {
		want[partKey{t.topic, t.partition}] = true
		if !seen[t.topic] {
			seen[t.topic] = true
			bms = append(bms, t.bm)
		}
	}
	type result struct {
		bm   tributary.BackendMember
		recs []engine.Record
		err  error
	}
	results := make(chan result, len(bms))
	for _, bm := range bms {
		go func() {
			recs, err := bm.Poll(ctx, sc.s.ctx.Done(), nil, limit)
			if len(recs) > 0 {
				cancel()
			}
			results <- result{bm, recs, err}
		}()
	}
	for range bms {
		res := <-results
		if res.err == nil || ctx.Err() != nil {
			ok = true
		}
		for _, rec := range res.recs {
			a := acquired{bm: res.bm, rec: rec}
			if want[partKey{rec.Topic, rec.Partition}] {
				got = append(got, a)
			} else {
				stray = append(stray, a)
			}
		}
	}
	return got, stray, ok
}

// overLimit dead-letters, and drops from got, the records delivered more
// often than their group's limit (a dead-letter topic's MaxAttempts):
// redelivered after lock timeouts without a release.
func (sc *shareCoordinator) overLimit(ctx context.Context, group string, got []acquired) []acquired {
	out := got[:0]
	cfgs := map[string]tributary.GroupConfig{}
	for _, a := range got {
		cfg, ok := cfgs[a.rec.Topic]
		if !ok {
			cfg, _, _ = sc.s.backend.GroupConfig(a.rec.Topic, group)
			cfgs[a.rec.Topic] = cfg
		}
		if cfg.DeadLetter == "" || a.rec.Attempt <= cfg.MaxAttempts {
			out = append(out, a)
			continue
		}
		if _, err := sc.deadLetter(ctx, group, a, cfg.DeadLetter, fmt.Sprintf("kafka: %d deliveries, over the group's limit", a.rec.Attempt)); err != nil {
			sc.s.log.Info("kafka: share dead letter", "topic", a.rec.Topic, "partition", a.rec.Partition, "offset", a.rec.Offset, "err", err)
			sc.release([]acquired{a})
		}
	}
	return out
}

// shareFetchOut finds or adds a ShareFetch response's partitions.
type shareFetchOut struct {
	resp *kmsg.ShareFetchResponse
	idx  map[[16]byte]int
}

func newShareFetchOut(resp *kmsg.ShareFetchResponse) *shareFetchOut {
	return &shareFetchOut{resp: resp, idx: map[[16]byte]int{}}
}

func (o *shareFetchOut) part(id [16]byte, p int32) *kmsg.ShareFetchResponseTopicPartition {
	i, ok := o.idx[id]
	if !ok {
		i = len(o.resp.Topics)
		o.idx[id] = i
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = id
		o.resp.Topics = append(o.resp.Topics, t)
	}
	t := &o.resp.Topics[i]
	for j := range t.Partitions {
		if t.Partitions[j].Partition == p {
			return &t.Partitions[j]
		}
	}
	rp := kmsg.NewShareFetchResponseTopicPartition()
	rp.Partition = p
	rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
	t.Partitions = append(t.Partitions, rp)
	return &t.Partitions[len(t.Partitions)-1]
}

// handleShareAcknowledge settles acknowledgements outside a fetch, as
// ShareFetch's piggy-backed ones (each partition's ErrorCode: see
// planAcksLocked and settle). Epoch -1 also closes the member's session,
// releasing what it still holds; epoch 0 is INVALID_SHARE_SESSION_EPOCH
// (sessions open by ShareFetch). Top-level errors as ShareFetch's.
func handleShareAcknowledge(s *Server, r *request, req *kmsg.ShareAcknowledgeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	sc := s.share
	resp.AcquisitionLockTimeoutMillis = sc.lockMillis()
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = e.Code, kmsg.StringPtr(msg)
		return resp, nil
	}
	group, member, e := shareIDs(req.GroupID, req.MemberID)
	if e != nil {
		return fail(e, "group id: a Tributary identifier; member id: 1 to 36 bytes")
	}
	var acks []*ackPart
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			ap := &ackPart{topicID: t.TopicID, partition: p.Partition}
			for _, b := range p.AcknowledgementBatches {
				ap.batches = append(ap.batches, ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
			}
			acks = append(acks, ap)
		}
	}
	sc.mu.Lock()
	_, m := sc.memberLocked(group, member, time.Now())
	switch {
	case m == nil:
		sc.mu.Unlock()
		return fail(kerr.UnknownMemberID, "not a member of share group "+group)
	case req.ShareSessionEpoch == 0:
		sc.mu.Unlock()
		return fail(kerr.InvalidShareSessionEpoch, "a share session opens with a ShareFetch")
	case m.session == nil:
		sc.mu.Unlock()
		return fail(kerr.ShareSessionNotFound, "no share session")
	case req.ShareSessionEpoch != -1 && req.ShareSessionEpoch != m.session.epoch:
		epoch := m.session.epoch
		sc.mu.Unlock()
		return fail(kerr.InvalidShareSessionEpoch, fmt.Sprintf("session epoch %d, want %d", req.ShareSessionEpoch, epoch))
	}
	acts := sc.planAcksLocked(m, acks)
	var released []acquired
	if req.ShareSessionEpoch == -1 {
		released = takeAcquiredLocked(m)
		sc.closeSessionLocked(m)
	} else {
		m.session.epoch = max(1, m.session.epoch+1)
	}
	sc.mu.Unlock()
	sc.settle(r.ctx, group, acts)
	sc.release(released)
	idx := map[[16]byte]int{}
	for _, ap := range acks {
		i, ok := idx[ap.topicID]
		if !ok {
			i = len(resp.Topics)
			idx[ap.topicID] = i
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = ap.topicID
			resp.Topics = append(resp.Topics, t)
		}
		rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
		rp.Partition, rp.ErrorCode = ap.partition, ap.code
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp, nil
}

// handleShareGroupDescribe describes each share group: state Empty or
// Stable, the group epoch (also the assignment epoch: assignments take
// effect at once), the assignor of its first subscribed topic's Tributary
// group, and its members with their epochs, client ids, hosts,
// subscriptions and last sent assignments. A group this Server has no
// share members of is GROUP_ID_NOT_FOUND (Tributary groups outlive their
// members; the share group's state here does not); a name that is no
// identifier INVALID_GROUP_ID.
func handleShareGroupDescribe(s *Server, r *request, req *kmsg.ShareGroupDescribeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	sc := s.share
	sc.mu.Lock()
	defer sc.mu.Unlock()
	now := time.Now()
	for _, id := range req.GroupIDs {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID = id
		if !validName(id) {
			rg.ErrorCode, rg.ErrorMessage = kerr.InvalidGroupID.Code, kmsg.StringPtr("group id: a Tributary identifier")
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		g, _ := sc.memberLocked(id, "", now)
		if g == nil {
			rg.ErrorCode, rg.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("no share group "+id)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch = "Stable", g.epoch, g.epoch
		if len(g.members) == 0 {
			rg.GroupState = "Empty"
		}
		for _, mid := range slices.Sorted(mapsKeys(g.members)) {
			m := g.members[mid]
			if rg.Assignor == "" && len(m.topics) > 0 {
				if d, err := s.backend.Describe(m.topics[0]); err == nil {
					for _, gd := range d.Groups {
						if gd.Group == g.name {
							rg.Assignor = gd.Assignor
						}
					}
				}
			}
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.RackID, rm.MemberEpoch = m.id, m.rack, m.epoch
			rm.ClientID, rm.ClientHost = m.clientID, m.host
			rm.SubscribedTopicNames = slices.Clone(m.topics)
			for _, t := range slices.Sorted(mapsKeys(m.sent)) {
				tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				tp.TopicID, tp.Topic, tp.Partitions = topicID(t), t, slices.Clone(m.sent[t])
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, tp)
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
