package kafka

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Session timeouts a JoinGroup may ask for (Kafka's
// group.min.session.timeout.ms and group.max.session.timeout.ms): outside
// them JoinGroup answers INVALID_SESSION_TIMEOUT. The minimum is below
// Kafka's 6 s so that short-lived members (tests, tools) can expire fast.
const (
	MinSessionTimeout = 100 * time.Millisecond
	MaxSessionTimeout = 30 * time.Minute
)

// groupState is a classic group's state, as Kafka names it in
// DescribeGroups and ListGroups.
type groupState int8

const (
	groupEmpty               groupState = iota // no members; committed offsets only
	groupPreparingRebalance                    // waiting for the known members to join again
	groupCompletingRebalance                   // joined; waiting for the leader's SyncGroup
	groupStable                                // assignments handed out
	groupDead                                  // the Server closed
)

func (st groupState) String() string {
	switch st {
	case groupEmpty:
		return "Empty"
	case groupPreparingRebalance:
		return "PreparingRebalance"
	case groupCompletingRebalance:
		return "CompletingRebalance"
	case groupStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// errCoordinatorClosed ends a JoinGroup or SyncGroup that waits when the
// Server closes: the connection closes with it.
var errCoordinatorClosed = errors.New("group coordinator closed")

// coordinator is the group coordinator of classic consumer groups
// (Kafka's, assignment on the client): JoinGroup, SyncGroup, Heartbeat and
// LeaveGroup run the rebalance protocol here, in memory; committed offsets
// live in the Cluster, each Kafka group a Tributary group of the same name
// on every topic it commits to (offsets.go). A Server restart forgets
// members and generations, not offsets.
//
// Locks: mu guards the groups map only; each group's own mu guards the
// group. Never take mu while holding a group's mu.
type coordinator struct {
	s    *Server
	done chan struct{} // closed by close: every wait ends

	mu     sync.Mutex
	groups map[string]*group
	closed bool
}

func newCoordinator(s *Server) *coordinator {
	return &coordinator{s: s, done: make(chan struct{}), groups: map[string]*group{}}
}

// close ends every group's waits (Server.Close): waiting JoinGroups and
// SyncGroups return errCoordinatorClosed, every timer stops, and every
// group is Dead.
func (c *coordinator) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.done)
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		g.state = groupDead
		g.stopTimers()
		for _, m := range g.members {
			m.stopSession()
		}
		for _, m := range g.pending {
			m.stopSession()
		}
		g.mu.Unlock()
	}
}

func (c *coordinator) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// group returns the group named id, made Empty when absent and create is
// set; nil when absent and not created, or after close.
func (c *coordinator) group(id string, create bool) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	g := c.groups[id]
	if g == nil && create {
		g = &group{c: c, name: id, members: map[string]*member{}, pending: map[string]*member{}, instances: map[string]string{}}
		c.groups[id] = g
	}
	return g
}

// snapshot returns the groups, in no order.
func (c *coordinator) snapshot() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	return gs
}

// group is one classic consumer group.
type group struct {
	c    *coordinator
	name string

	// mu guards every field below, and every member's.
	mu           sync.Mutex
	state        groupState
	generation   int32
	protocolType string // set by the first member; "" when Empty
	protocol     string // chosen at each rebalance; "" when Empty
	leader       string
	members      map[string]*member // joined members, by member id
	instances    map[string]string  // group.instance.id → member id, of static members
	pending      map[string]*member // given an id by MEMBER_ID_REQUIRED, not yet joined
	pendingSync  map[string]struct{}
	tRebalance   *time.Timer // ends PreparingRebalance without the members that did not join
	tSync        *time.Timer // ends CompletingRebalance without the members that did not sync
}

// member is one member of a group.
type member struct {
	g          *group
	id         string
	instanceID *string // group.instance.id of a static member; nil: dynamic
	clientID   string
	clientHost string
	join       *kmsg.JoinGroupRequest // its latest JoinGroup
	assignment []byte                 // the leader's SyncGroup gave it this

	waiting *waiter     // its JoinGroup or SyncGroup that waits for an answer; nil when none
	timer   *time.Timer // its session timeout; nil while it waits
	seq     uint64      // bumped at each session restart: an older timer that fires does nothing
}

// waiter is a JoinGroup or SyncGroup waiting for the group to answer it.
type waiter struct {
	req kmsg.Request
	ch  chan kmsg.Response // buffered 1: the answer never blocks the group
}

func newWaiter(req kmsg.Request) *waiter {
	return &waiter{req: req, ch: make(chan kmsg.Response, 1)}
}

func (w *waiter) isJoin() bool {
	_, ok := w.req.(*kmsg.JoinGroupRequest)
	return ok
}

// newMemberID is Kafka's member id: the client id, a dash, a random UUID.
func newMemberID(clientID string) string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", clientID, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (m *member) sessionTimeout() time.Duration {
	return time.Duration(m.join.SessionTimeoutMillis) * time.Millisecond
}

func (m *member) rebalanceTimeout() time.Duration {
	if m.join.RebalanceTimeoutMillis <= 0 { // v0: the session timeout, as Kafka
		return m.sessionTimeout()
	}
	return time.Duration(m.join.RebalanceTimeoutMillis) * time.Millisecond
}

func (m *member) stopSession() {
	m.seq++
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
}

// touchLocked restarts m's session timeout (a heartbeat, a commit, an
// answered JoinGroup or SyncGroup). A member waiting for an answer has no
// timer: its wait is bounded by the rebalance timeout instead. When the
// timer fires the member leaves and the group rebalances (a pending
// member is just forgotten).
func (m *member) touchLocked() {
	m.stopSession()
	if m.waiting != nil || m.g.c.isClosed() {
		return
	}
	seq, g := m.seq, m.g
	m.timer = time.AfterFunc(m.sessionTimeout(), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if m.seq != seq || g.c.isClosed() {
			return
		}
		switch {
		case g.pending[m.id] == m:
			delete(g.pending, m.id)
		case g.members[m.id] == m:
			g.c.s.log.Info("kafka: group member's session expired", "group", g.name, "member", m.id)
			g.removeLocked(m)
			g.rebalanceLocked()
		}
	})
}

// answerLocked answers m's waiting request with resp and restarts its
// session.
func (m *member) answerLocked(resp kmsg.Response) {
	w := m.waiting
	if w == nil {
		return
	}
	m.waiting = nil
	w.ch <- resp
	m.touchLocked()
}

// failLocked answers m's waiting request, if any, with code.
func (m *member) failLocked(code int16) {
	if m.waiting == nil {
		return
	}
	switch req := m.waiting.req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.MemberID, resp.Generation = code, m.id, -1
		m.answerLocked(resp)
	case *kmsg.SyncGroupRequest:
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		m.answerLocked(resp)
	}
}

// wait blocks until w is answered, the client goes away or the Server
// closes. A wait cut short detaches w from m (a member that stops waiting
// in JoinGroup is left out of the next generation, as a member that never
// joined) and closes the connection.
func (g *group) wait(r *request, m *member, w *waiter) (kmsg.Response, error) {
	select {
	case resp := <-w.ch:
		return resp, nil
	case <-r.ctx.Done():
	case <-g.c.done:
	}
	g.mu.Lock()
	if m.waiting == w {
		m.waiting = nil
		m.touchLocked()
	}
	g.mu.Unlock()
	select {
	case resp := <-w.ch: // answered as the wait ended
		return resp, nil
	default:
	}
	if g.c.isClosed() {
		return nil, errCoordinatorClosed
	}
	return nil, r.ctx.Err()
}

func (g *group) stopTimers() {
	if g.tRebalance != nil {
		g.tRebalance.Stop()
		g.tRebalance = nil
	}
	if g.tSync != nil {
		g.tSync.Stop()
		g.tSync = nil
	}
}

// joiningLocked counts the members waiting in JoinGroup.
func (g *group) joiningLocked() int {
	n := 0
	for _, m := range g.members {
		if m.waiting != nil && m.waiting.isJoin() {
			n++
		}
	}
	return n
}

func (g *group) maxRebalanceTimeoutLocked() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout())
	}
	return d
}

// removeLocked removes m (no rebalance): a JoinGroup or SyncGroup of its
// still waiting gets UNKNOWN_MEMBER_ID.
func (g *group) removeLocked(m *member) {
	m.failLocked(kerr.UnknownMemberID.Code)
	m.stopSession()
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.instances[*m.instanceID] == m.id {
		delete(g.instances, *m.instanceID)
	}
}

// checkInstanceLocked is KIP-345's check of a request naming a
// group.instance.id: UNKNOWN_MEMBER_ID when no member has it,
// FENCED_INSTANCE_ID when another member id has it (a newer instance
// replaced this one).
func (g *group) checkInstanceLocked(instanceID *string, memberID string) int16 {
	if instanceID == nil {
		return 0
	}
	id, ok := g.instances[*instanceID]
	switch {
	case !ok:
		return kerr.UnknownMemberID.Code
	case id != memberID:
		return kerr.FencedInstanceID.Code
	}
	return 0
}

// rebalanceLocked enters PreparingRebalance: SyncGroups waiting get
// REBALANCE_IN_PROGRESS (their members join again), and the rebalance
// completes once every known member has joined, or after the largest
// rebalance timeout without those that did not.
func (g *group) rebalanceLocked() {
	if g.state == groupCompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.waiting != nil && !m.waiting.isJoin() {
				m.failLocked(kerr.RebalanceInProgress.Code)
			}
		}
	}
	g.state = groupPreparingRebalance
	g.pendingSync = nil
	g.stopTimers()
	if g.joiningLocked() >= len(g.members) {
		g.completeJoinLocked()
		return
	}
	gen := g.generation
	g.tRebalance = time.AfterFunc(g.maxRebalanceTimeoutLocked(), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.c.isClosed() || g.generation != gen || g.state != groupPreparingRebalance {
			return
		}
		g.completeJoinLocked()
	})
}

// completeJoinLocked ends PreparingRebalance: members that did not join
// are removed, the generation advances, a protocol every member supports
// is chosen (each member votes for the first of its list that all
// support; ties go to the name first bytewise), the leader stays or the
// first joined member id bytewise becomes it, and every JoinGroup is
// answered; the leader's carries every member's metadata.
func (g *group) completeJoinLocked() {
	g.stopTimers()
	for _, m := range g.members {
		if m.waiting == nil || !m.waiting.isJoin() {
			g.removeLocked(m)
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.state, g.protocolType, g.protocol, g.leader = groupEmpty, "", "", ""
		return
	}
	g.state = groupCompletingRebalance
	g.protocol = g.chooseProtocolLocked()
	ids := g.memberIDsLocked()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = ids[0]
	}
	g.pendingSync = map[string]struct{}{}
	for _, id := range ids {
		m := g.members[id]
		g.pendingSync[id] = struct{}{}
		resp := m.waiting.req.(*kmsg.JoinGroupRequest).ResponseKind().(*kmsg.JoinGroupResponse)
		g.fillJoinLocked(m, resp)
		m.answerLocked(resp)
	}
	gen := g.generation
	g.tSync = time.AfterFunc(g.maxRebalanceTimeoutLocked(), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.c.isClosed() || g.generation != gen || g.state != groupCompletingRebalance {
			return
		}
		for id := range g.pendingSync {
			if m := g.members[id]; m != nil {
				g.removeLocked(m)
			}
		}
		g.rebalanceLocked()
	})
}

func (g *group) memberIDsLocked() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// supportedLocked reports whether every member but skip lists protocol.
func (g *group) supportedLocked(protocol string, skip *member) bool {
	for _, m := range g.members {
		if m == skip {
			continue
		}
		if !slices.ContainsFunc(m.join.Protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == protocol }) {
			return false
		}
	}
	return true
}

func (g *group) chooseProtocolLocked() string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.join.Protocols {
			if g.supportedLocked(p.Name, nil) {
				votes[p.Name]++
				break
			}
		}
	}
	best, n := "", 0
	for p, v := range votes {
		if v > n || v == n && p < best {
			best, n = p, v
		}
	}
	return best
}

// fitsLocked reports whether a JoinGroup of m (nil: a new member) can
// join: its protocol type is the group's and one of its protocols is
// supported by every other member.
func (g *group) fitsLocked(req *kmsg.JoinGroupRequest, m *member) bool {
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return false
	}
	others := len(g.members)
	if m != nil {
		others--
	}
	if others == 0 {
		return true
	}
	if req.ProtocolType != g.protocolType {
		return false
	}
	for _, p := range req.Protocols {
		if g.supportedLocked(p.Name, m) {
			return true
		}
	}
	return false
}

func (g *group) fillJoinLocked(m *member, resp *kmsg.JoinGroupResponse) {
	resp.Generation = g.generation
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.LeaderID = g.leader
	resp.MemberID = m.id
	if m.id != g.leader {
		return
	}
	for _, id := range g.memberIDsLocked() {
		o := g.members[id]
		for _, p := range o.join.Protocols {
			if p.Name == g.protocol {
				rm := kmsg.NewJoinGroupResponseMember()
				rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = o.id, o.instanceID, p.Metadata
				resp.Members = append(resp.Members, rm)
				break
			}
		}
	}
}

func sameJoin(a, b *kmsg.JoinGroupRequest) bool {
	if a.ProtocolType != b.ProtocolType || len(a.Protocols) != len(b.Protocols) {
		return false
	}
	for i := range a.Protocols {
		if a.Protocols[i].Name != b.Protocols[i].Name || !bytes.Equal(a.Protocols[i].Metadata, b.Protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// checkGroupID is the group id check of every group request: Kafka's
// non-empty id, and Tributary's identifier rule (1 to 64 of A-Z a-z 0-9
// _ -), since the id names the Tributary group that keeps its offsets.
func checkGroupID(id string) int16 {
	if !validName(id) {
		return kerr.InvalidGroupID.Code
	}
	return 0
}

// handleFindCoordinator answers every group key (coordinator type 0:
// classic and share groups, which franz-go looks up as type 0; type 2:
// the share-state coordinator) with this one node, NodeID, at the
// connection's advertised address; v4+ batches keys. A transaction key (type 1) gets
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactions are not served"
// (as InitProducerID refuses transactional ids); any other type
// INVALID_REQUEST.
func handleFindCoordinator(s *Server, r *request, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	host, port := r.cc.advertisedHostPort()
	for _, k := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = k, -1, "", -1
		switch req.CoordinatorType {
		case 0, 2:
			c.NodeID, c.Host, c.Port = NodeID, host, port
		case 1:
			c.ErrorCode, c.ErrorMessage = kerr.TransactionalIDAuthorizationFailed.Code, kmsg.StringPtr("transactions are not served")
		default:
			c.ErrorCode, c.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(fmt.Sprintf("coordinator type %d is not served", req.CoordinatorType))
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.NodeID, c.Host, c.Port
		if req.Version >= 1 {
			resp.ErrorMessage = c.ErrorMessage
		}
		resp.Coordinators = nil
	}
	return resp, nil
}

// handleJoinGroup is Kafka's JoinGroup for classic groups. An empty
// member id gets a new id, "clientid-uuid": on v4+ answered at once with
// MEMBER_ID_REQUIRED (the client joins again with it, within its session
// timeout), before v4 joined at once. A join starts a rebalance (or, from
// a follower with unchanged metadata in Stable or CompletingRebalance,
// gets the current generation back at once) and waits until every known
// member has joined or the largest rebalance timeout has passed (members
// that did not join are removed); then the generation advances and every
// member gets it, the chosen protocol and the leader, the leader also
// every member's metadata for that protocol. Errors: INVALID_GROUP_ID (not
// a Tributary identifier), INVALID_SESSION_TIMEOUT (outside
// MinSessionTimeout..MaxSessionTimeout), INCONSISTENT_GROUP_PROTOCOL (no
// protocol type or protocols, another protocol type than the group's, no
// protocol in common with the other members), UNKNOWN_MEMBER_ID (an id
// the group does not know, or the member removed while it waited).
//
// Static membership (KIP-345, v5+'s group.instance.id): a static member
// joins with an empty id without MEMBER_ID_REQUIRED; joining again with
// an empty id and the same instance id replaces the old member id (its
// waiting JoinGroup or SyncGroup, and its later requests, get
// FENCED_INSTANCE_ID) and keeps its assignment: in Stable, with unchanged
// metadata, without a rebalance (the leader gets SkipAssignment on v9, as
// Kafka). A known member id with an instance id another member holds is
// FENCED_INSTANCE_ID; an unknown instance id UNKNOWN_MEMBER_ID. Static
// members leave by LeaveGroup or session expiry, as dynamic ones.
// A wait ends with the client's connection or the Server.
func handleJoinGroup(s *Server, r *request, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	fail := func(e *kerr.Error) (kmsg.Response, error) {
		resp.ErrorCode = e.Code
		return resp, nil
	}
	if checkGroupID(req.Group) != 0 {
		return fail(kerr.InvalidGroupID)
	}
	if st := time.Duration(req.SessionTimeoutMillis) * time.Millisecond; st < MinSessionTimeout || st > MaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout)
	}
	g := s.groups.group(req.Group, true)
	if g == nil {
		return nil, errCoordinatorClosed
	}
	g.mu.Lock()
	if g.state == groupDead {
		g.mu.Unlock()
		return nil, errCoordinatorClosed
	}
	m := g.members[req.MemberID]
	same := m // the member this join is of, if any
	if req.MemberID == "" && req.InstanceID != nil {
		same = g.members[g.instances[*req.InstanceID]]
	}
	if !g.fitsLocked(req, same) {
		g.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol)
	}
	if req.MemberID != "" && req.InstanceID != nil {
		if code := g.checkInstanceLocked(req.InstanceID, req.MemberID); code != 0 {
			g.mu.Unlock()
			resp.ErrorCode = code
			return resp, nil
		}
	}
	if req.MemberID == "" && req.InstanceID != nil {
		if old := g.members[g.instances[*req.InstanceID]]; old != nil {
			return g.replaceStaticLocked(r, req, old)
		}
	}
	if req.MemberID == "" {
		m = &member{g: g, id: newMemberID(r.clientID), instanceID: req.InstanceID, clientID: r.clientID, clientHost: r.cc.nc.RemoteAddr().String(), join: req}
		if req.InstanceID != nil {
			g.instances[*req.InstanceID] = m.id
		}
		if req.Version >= 4 && req.InstanceID == nil {
			g.pending[m.id] = m
			m.touchLocked()
			g.mu.Unlock()
			resp.MemberID = m.id
			return fail(kerr.MemberIDRequired)
		}
	} else if p := g.pending[req.MemberID]; p != nil {
		delete(g.pending, p.id)
		p.stopSession()
		m = p
	} else if m == nil {
		g.mu.Unlock()
		return fail(kerr.UnknownMemberID)
	}
	old, known := m.join, g.members[m.id] == m
	if known && sameJoin(old, req) && (g.state == groupCompletingRebalance || g.state == groupStable && m.id != g.leader) {
		g.fillJoinLocked(m, resp)
		m.touchLocked()
		g.mu.Unlock()
		return resp, nil
	}
	if others := len(g.members); others == 0 || known && others == 1 {
		g.protocolType = req.ProtocolType // the first member sets it
	}
	m.join = req
	m.clientID, m.clientHost = r.clientID, r.cc.nc.RemoteAddr().String()
	g.members[m.id] = m
	m.failLocked(kerr.RebalanceInProgress.Code) // a JoinGroup or SyncGroup of its before this one
	return g.joinWaitLocked(r, m, req)
}

// joinWaitLocked makes m wait in JoinGroup, rebalances, unlocks the group
// and waits.
func (g *group) joinWaitLocked(r *request, m *member, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	w := newWaiter(req)
	m.waiting = w
	m.stopSession()
	g.rebalanceLocked()
	g.mu.Unlock()
	return g.wait(r, m, w)
}

// replaceStaticLocked is a static member's JoinGroup with an empty member
// id while old holds its instance id: a new member id takes old's place
// and assignment, old is fenced. Called with the group locked; unlocks it.
func (g *group) replaceStaticLocked(r *request, req *kmsg.JoinGroupRequest, old *member) (kmsg.Response, error) {
	m := &member{g: g, id: newMemberID(r.clientID), instanceID: req.InstanceID, clientID: r.clientID,
		clientHost: r.cc.nc.RemoteAddr().String(), join: req, assignment: old.assignment}
	old.failLocked(kerr.FencedInstanceID.Code)
	old.stopSession()
	delete(g.members, old.id)
	if _, ok := g.pendingSync[old.id]; ok {
		delete(g.pendingSync, old.id)
		g.pendingSync[m.id] = struct{}{}
	}
	g.members[m.id] = m
	g.instances[*req.InstanceID] = m.id
	if g.leader == old.id {
		g.leader = m.id
	}
	if g.state == groupStable && sameJoin(old.join, req) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		g.fillJoinLocked(m, resp)
		resp.SkipAssignment = m.id == g.leader
		m.touchLocked()
		g.mu.Unlock()
		return resp, nil
	}
	return g.joinWaitLocked(r, m, req)
}

// member looks up a request's member in group id, checking its instance
// id and generation: the error code when the group or member is unknown
// (UNKNOWN_MEMBER_ID), the instance id is another member's
// (FENCED_INSTANCE_ID) or unknown (UNKNOWN_MEMBER_ID), the generation is
// another (ILLEGAL_GENERATION) or the id is not an identifier
// (INVALID_GROUP_ID). The group's mu is held
// on success.
func (c *coordinator) member(id, memberID string, instanceID *string, generation int32) (*group, *member, int16) {
	if code := checkGroupID(id); code != 0 {
		return nil, nil, code
	}
	g := c.group(id, false)
	if g == nil {
		return nil, nil, kerr.UnknownMemberID.Code
	}
	g.mu.Lock()
	m := g.members[memberID]
	if code := g.checkInstanceLocked(instanceID, memberID); code != 0 {
		g.mu.Unlock()
		return nil, nil, code
	}
	switch {
	case m == nil:
		g.mu.Unlock()
		return nil, nil, kerr.UnknownMemberID.Code
	case generation != g.generation:
		g.mu.Unlock()
		return nil, nil, kerr.IllegalGeneration.Code
	}
	return g, m, 0
}

// handleSyncGroup is Kafka's SyncGroup: the leader hands in every
// member's assignment and each member gets its own (an empty one for a
// member the leader left out); a follower that syncs first waits for the
// leader, up to the rebalance timeout (after which members that did not
// sync are removed and the group rebalances). In Stable it answers the
// member's assignment again. Errors: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID (a static member replaced), ILLEGAL_GENERATION (another generation), INCONSISTENT_GROUP_PROTOCOL
// (v5+'s protocol type or name is not the group's), REBALANCE_IN_PROGRESS
// (the group is preparing a rebalance, or one started while it waited).
// A wait ends with the client's connection or the Server.
func handleSyncGroup(s *Server, r *request, req *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	g, m, code := s.groups.member(req.Group, req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	defer func() {
		if g != nil {
			g.mu.Unlock()
		}
	}()
	if req.ProtocolType != nil && *req.ProtocolType != g.protocolType || req.Protocol != nil && *req.Protocol != g.protocol {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return resp, nil
	}
	switch g.state {
	case groupPreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		m.touchLocked()
		return resp, nil
	case groupStable:
		resp.ProtocolType, resp.Protocol = kmsg.StringPtr(g.protocolType), kmsg.StringPtr(g.protocol)
		resp.MemberAssignment = m.assignment
		m.touchLocked()
		return resp, nil
	case groupCompletingRebalance:
	default:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil
	}
	delete(g.pendingSync, m.id)
	m.failLocked(kerr.RebalanceInProgress.Code)
	w := newWaiter(req)
	m.waiting = w
	m.stopSession()
	if m.id == g.leader {
		for _, o := range g.members {
			o.assignment = nil
		}
		for _, a := range req.GroupAssignment {
			if o := g.members[a.MemberID]; o != nil {
				o.assignment = a.MemberAssignment
			}
		}
		if g.protocolType == "consumer" {
			// A member left out gets an empty assignment it can decode,
			// whether it syncs before the leader or after.
			for _, o := range g.members {
				if o.assignment == nil {
					o.assignment = emptyConsumerAssignment()
				}
			}
		}
		g.state = groupStable
		g.pendingSync = nil
		g.stopTimers()
		for _, o := range g.members {
			if o.waiting == nil || o.waiting.isJoin() {
				continue
			}
			sr := o.waiting.req.(*kmsg.SyncGroupRequest).ResponseKind().(*kmsg.SyncGroupResponse)
			sr.ProtocolType, sr.Protocol = kmsg.StringPtr(g.protocolType), kmsg.StringPtr(g.protocol)
			sr.MemberAssignment = o.assignment
			if sr.MemberAssignment == nil && g.protocolType == "consumer" {
				sr.MemberAssignment = emptyConsumerAssignment()
			}
			o.answerLocked(sr)
		}
	}
	g.mu.Unlock()
	g = nil
	return m.g.wait(r, m, w)
}

// emptyConsumerAssignment is a "consumer" protocol assignment of no
// partitions: what a member the leader left out decodes.
func emptyConsumerAssignment() []byte {
	a := kmsg.NewConsumerMemberAssignment()
	return a.AppendTo(nil)
}

// handleHeartbeat restarts the member's session timeout. Errors:
// INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (an unknown group or member: one
// whose session expired included), ILLEGAL_GENERATION (another
// generation), REBALANCE_IN_PROGRESS (the group prepares a rebalance:
// the member joins again), FENCED_INSTANCE_ID (a static member replaced by
// a newer instance).
func handleHeartbeat(s *Server, r *request, req *kmsg.HeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	g, m, code := s.groups.member(req.Group, req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	defer g.mu.Unlock()
	switch g.state {
	case groupPreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	case groupCompletingRebalance, groupStable:
	default:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil
	}
	if m.waiting == nil {
		m.touchLocked()
	}
	return resp, nil
}

// handleLeaveGroup removes members (v3+: a batch, each answered on its
// own; before v3 the one MemberID) and rebalances the group once.
// A member named by its group.instance.id (v3+) is the static member
// holding it. Errors: INVALID_GROUP_ID (the whole request),
// UNKNOWN_MEMBER_ID (a member or instance id the group does not know),
// FENCED_INSTANCE_ID (an instance id held by another member id than the
// one named). A member leaving while its JoinGroup or
// SyncGroup waits on another connection gets UNKNOWN_MEMBER_ID there.
func handleLeaveGroup(s *Server, r *request, req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if code := checkGroupID(req.Group); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	g := s.groups.group(req.Group, false)
	if g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	left := false
	for _, lm := range members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		if g != nil && lm.InstanceID != nil {
			id, ok := g.instances[*lm.InstanceID]
			switch {
			case !ok:
				rm.ErrorCode = kerr.UnknownMemberID.Code
			case lm.MemberID != "" && lm.MemberID != id:
				rm.ErrorCode = kerr.FencedInstanceID.Code
			}
			if rm.ErrorCode != 0 {
				resp.Members = append(resp.Members, rm)
				continue
			}
			lm.MemberID, rm.MemberID = id, id
		}
		switch {
		case g == nil:
			rm.ErrorCode = kerr.UnknownMemberID.Code
		case g.members[lm.MemberID] != nil:
			g.removeLocked(g.members[lm.MemberID])
			left = true
		case g.pending[lm.MemberID] != nil:
			g.pending[lm.MemberID].stopSession()
			delete(g.pending, lm.MemberID)
		default:
			rm.ErrorCode = kerr.UnknownMemberID.Code
		}
		resp.Members = append(resp.Members, rm)
	}
	if left && g.state != groupDead {
		g.rebalanceLocked()
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	return resp, nil
}
