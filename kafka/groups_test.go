package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

// member is one test member of a group: its own kgo client (a JoinGroup
// that waits holds its connection), id and generation.
type testMember struct {
	t   *testing.T
	cl  *kgo.Client
	id  string
	gen int32
}

func newTestMember(t *testing.T, s *Server, clientID string) *testMember {
	return &testMember{t: t, cl: client(t, s, kgo.ClientID(clientID))}
}

// joinReq is a v9 JoinGroup of protocol type "consumer" with one protocol.
func (m *testMember) joinReq(group, protocol string, sessionMs int32) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = group, m.id, sessionMs, 60000
	req.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = protocol, []byte("meta-"+protocol)
	req.Protocols = append(req.Protocols, p)
	return req
}

// join joins group, answering MEMBER_ID_REQUIRED, and returns the
// response of the join that got in (rebalance timeout 60 s).
func (m *testMember) join(ctx context.Context, group string, sessionMs int32) *kmsg.JoinGroupResponse {
	m.t.Helper()
	return m.joinWith(ctx, group, sessionMs, 60000)
}

// joinWith joins group with the given session and rebalance timeouts,
// answering MEMBER_ID_REQUIRED, and returns the response of the join that
// got in.
func (m *testMember) joinWith(ctx context.Context, group string, sessionMs, rebalanceMs int32) *kmsg.JoinGroupResponse {
	m.t.Helper()
	for range 2 {
		req := m.joinReq(group, "range", sessionMs)
		req.RebalanceTimeoutMillis = rebalanceMs
		resp, err := req.RequestWith(ctx, m.cl)
		if err != nil {
			m.t.Fatalf("join: %v", err)
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code && m.id == "" {
			m.id = resp.MemberID
			continue
		}
		if resp.ErrorCode != 0 {
			m.t.Fatalf("join: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		m.id, m.gen = resp.MemberID, resp.Generation
		return resp
	}
	m.t.Fatal("join: MEMBER_ID_REQUIRED twice")
	return nil
}

func (m *testMember) sync(ctx context.Context, group string, assign map[string]string) *kmsg.SyncGroupResponse {
	m.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = group, m.id, m.gen
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("sync: %v", err)
	}
	return resp
}

func (m *testMember) heartbeat(ctx context.Context, group, id string, gen int32) int16 {
	m.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, id, gen
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("heartbeat: %v", err)
	}
	return resp.ErrorCode
}

func (m *testMember) commit(ctx context.Context, group, id string, gen int32, topic string, partition int32, offset int64) int16 {
	m.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, id, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("commit: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchOffsets is a v8+ OffsetFetch of group (all topics when topic is
// ""): partition → offset, and the group's error code.
func (m *testMember) fetchOffsets(ctx context.Context, group, topic string, partitions ...int32) (map[int32]int64, int16) {
	m.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	if topic != "" {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, partitions
		rg.Topics = append(rg.Topics, rt)
	}
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("offset fetch: %v", err)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Groups[0].Topics {
		for _, p := range rt.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	return out, resp.Groups[0].ErrorCode
}

func describeGroup(t *testing.T, ctx context.Context, cl *kgo.Client, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("describe groups: %v", err)
	}
	return resp.Groups[0]
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestGroupProtocol walks one group through two generations and checks
// every answer. Broken variants it catches: a JoinGroup that answers an
// empty member id on v4+ without MEMBER_ID_REQUIRED, or ids without the
// client id; a Heartbeat that skips the member or generation check
// (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION); a JoinGroup that completes
// without waiting for the known member (the second member's join returns
// before the first rejoins, the heartbeat then sees no
// REBALANCE_IN_PROGRESS); a leader election that moves the leader, or a
// follower given the members' metadata; a SyncGroup that answers the
// follower before the leader's assignment; an OffsetCommit that skips the
// generation check, or does not Seek (Describe's committed offset stays
// 0); an OffsetFetch that does not read Describe; a LeaveGroup that
// ignores the v3 batch.
func TestGroupProtocol(t *testing.T) {
	c, s := serve(t, 100)
	if _, err := c.Backend().CreateTopic("orders", 2, payloadType); err != nil {
		t.Fatal(err)
	}
	h, err := s.topic("orders")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := h.TryPublish(0, engine.Message{Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t, 20*time.Second)
	a, b := newTestMember(t, s, "alpha"), newTestMember(t, s, "beta")

	// FindCoordinator: this node, for groups; transactions refused.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys, fc.CoordinatorType = []string{"g1"}, 1
	fresp, err := fc.RequestWith(ctx, a.cl)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "find transaction coordinator", fresp.Coordinators[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	resp, err := a.joinReq("g1", "range", 10000).RequestWith(ctx, a.cl)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "first join", resp.ErrorCode, kerr.MemberIDRequired)
	if !strings.HasPrefix(resp.MemberID, "alpha-") || len(resp.MemberID) != len("alpha-")+36 {
		t.Fatalf("member id %q, want alpha-<uuid>", resp.MemberID)
	}
	jr := a.join(ctx, "g1", 10000)
	if jr.Generation != 1 || jr.LeaderID != a.id || len(jr.Members) != 1 || *jr.Protocol != "range" {
		t.Fatalf("join: generation %d leader %q members %d protocol %q", jr.Generation, jr.LeaderID, len(jr.Members), *jr.Protocol)
	}
	if sr := a.sync(ctx, "g1", map[string]string{a.id: "all"}); sr.ErrorCode != 0 || string(sr.MemberAssignment) != "all" {
		t.Fatalf("sync: %v %q", kerr.ErrorForCode(sr.ErrorCode), sr.MemberAssignment)
	}
	wantCode(t, "heartbeat", a.heartbeat(ctx, "g1", a.id, 1), nil)
	wantCode(t, "heartbeat of an unknown member", a.heartbeat(ctx, "g1", "alpha-nobody", 1), kerr.UnknownMemberID)
	wantCode(t, "heartbeat of an unknown group", a.heartbeat(ctx, "nogroup", a.id, 1), kerr.UnknownMemberID)
	wantCode(t, "heartbeat of another generation", a.heartbeat(ctx, "g1", a.id, 7), kerr.IllegalGeneration)
	wantCode(t, "commit of another generation", a.commit(ctx, "g1", a.id, 0, "orders", 0, 2), kerr.IllegalGeneration)
	wantCode(t, "commit of an unknown member", a.commit(ctx, "g1", "alpha-nobody", 1, "orders", 0, 2), kerr.UnknownMemberID)
	wantCode(t, "commit", a.commit(ctx, "g1", a.id, 1, "orders", 0, 3), nil)
	wantCode(t, "commit past the log end", a.commit(ctx, "g1", a.id, 1, "orders", 0, 6), kerr.OffsetOutOfRange)
	wantCode(t, "commit to an unknown partition", a.commit(ctx, "g1", a.id, 1, "orders", 9, 0), kerr.UnknownTopicOrPartition)
	wantCode(t, "commit to an invalid topic", a.commit(ctx, "g1", a.id, 1, "or.ders", 0, 0), kerr.InvalidTopicException)
	d, err := c.Describe("orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Groups) != 1 || d.Groups[0].Group != "g1" || d.Groups[0].Partitions[0].Committed != 3 {
		t.Fatalf("Describe after the commit: %+v", d.Groups)
	}
	if offs, code := a.fetchOffsets(ctx, "g1", "orders", 0, 1, 5); code != 0 || offs[0] != 3 || offs[1] != 0 || offs[5] != -1 {
		t.Fatalf("offset fetch: %v %v", offs, kerr.ErrorForCode(code))
	}
	if offs, code := a.fetchOffsets(ctx, "g1", ""); code != 0 || len(offs) != 2 || offs[0] != 3 {
		t.Fatalf("offset fetch of all topics: %v %v", offs, kerr.ErrorForCode(code))
	}
	if offs, code := a.fetchOffsets(ctx, "nogroup", "orders", 0); code != 0 || offs[0] != -1 {
		t.Fatalf("offset fetch of an unknown group: %v %v", offs, kerr.ErrorForCode(code))
	}
	if _, code := a.fetchOffsets(ctx, "bad.group", "orders", 0); code != kerr.InvalidGroupID.Code {
		t.Fatalf("offset fetch of an invalid group: %v", kerr.ErrorForCode(code))
	}
	wantCode(t, "commit of an invalid group", a.commit(ctx, "bad.group", "", -1, "orders", 0, 1), kerr.InvalidGroupID)
	bad, err := a.joinReq("bad.group", "range", 10000).RequestWith(ctx, a.cl)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "join of an invalid group", bad.ErrorCode, kerr.InvalidGroupID)

	// b joins: its JoinGroup waits for a, whose heartbeat says rebalance.
	bJoined := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		resp, err := b.joinReq("g1", "range", 10000).RequestWith(ctx, b.cl) // MEMBER_ID_REQUIRED
		if err == nil && resp.ErrorCode == kerr.MemberIDRequired.Code {
			b.id = resp.MemberID
			resp, err = b.joinReq("g1", "range", 10000).RequestWith(ctx, b.cl)
		}
		if err != nil {
			resp = nil
		}
		bJoined <- resp
	}()
	for {
		code := a.heartbeat(ctx, "g1", a.id, 1)
		if code == kerr.RebalanceInProgress.Code {
			break
		}
		wantCode(t, "heartbeat before b's join", code, nil)
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-bJoined:
		t.Fatal("b's JoinGroup returned before a joined again")
	default:
	}
	if st := describeGroup(t, ctx, a.cl, "g1").State; st != "PreparingRebalance" {
		t.Fatalf("state %s during the rebalance", st)
	}
	ja := a.join(ctx, "g1", 10000)
	jb := <-bJoined
	if jb == nil || jb.ErrorCode != 0 {
		t.Fatalf("b's join: %+v", jb)
	}
	b.id, b.gen = jb.MemberID, jb.Generation
	if ja.Generation != 2 || jb.Generation != 2 || ja.LeaderID != a.id || jb.LeaderID != a.id || len(ja.Members) != 2 || len(jb.Members) != 0 {
		t.Fatalf("generation 2: a %+v, b %+v", ja, jb)
	}
	wantCode(t, "commit of the old generation while completing the rebalance", a.commit(ctx, "g1", a.id, 1, "orders", 0, 4), kerr.RebalanceInProgress)
	wantCode(t, "commit while completing the rebalance", a.commit(ctx, "g1", a.id, 2, "orders", 0, 4), kerr.RebalanceInProgress)

	// b syncs first and waits for the leader's assignment.
	bSynced := make(chan *kmsg.SyncGroupResponse, 1)
	go func() {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Group, req.MemberID, req.Generation = "g1", b.id, b.gen
		resp, _ := req.RequestWith(ctx, b.cl)
		bSynced <- resp
	}()
	if st := describeGroup(t, ctx, a.cl, "g1").State; st != "CompletingRebalance" {
		t.Fatalf("state %s before the leader's sync", st)
	}
	time.Sleep(20 * time.Millisecond) // lets b's SyncGroup reach the coordinator first (if it is later, it is answered in Stable)
	select {
	case <-bSynced:
		t.Fatal("b's SyncGroup returned before the leader's")
	default:
	}
	if sr := a.sync(ctx, "g1", map[string]string{a.id: "p0", b.id: "p1"}); sr.ErrorCode != 0 || string(sr.MemberAssignment) != "p0" {
		t.Fatalf("leader's sync: %v %q", kerr.ErrorForCode(sr.ErrorCode), sr.MemberAssignment)
	}
	if sr := <-bSynced; sr == nil || sr.ErrorCode != 0 || string(sr.MemberAssignment) != "p1" {
		t.Fatalf("b's sync: %+v", sr)
	}
	wantCode(t, "commit in generation 2", b.commit(ctx, "g1", b.id, 2, "orders", 0, 4), nil)
	wantCode(t, "commit of the old generation", a.commit(ctx, "g1", a.id, 1, "orders", 0, 4), kerr.IllegalGeneration)
	dg := describeGroup(t, ctx, a.cl, "g1")
	if dg.State != "Stable" || dg.Protocol != "range" || dg.ProtocolType != "consumer" || len(dg.Members) != 2 {
		t.Fatalf("describe: %+v", dg)
	}
	for _, m := range dg.Members {
		if want := map[string]string{a.id: "p0", b.id: "p1"}[m.MemberID]; string(m.MemberAssignment) != want || string(m.ProtocolMetadata) != "meta-range" {
			t.Fatalf("describe member %+v", m)
		}
	}
	lg, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, a.cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Groups) != 1 || lg.Groups[0].Group != "g1" || lg.Groups[0].GroupState != "Stable" {
		t.Fatalf("list groups: %+v", lg.Groups)
	}

	// A batched leave: a leaves, an unknown member is refused.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group = "g1"
	for _, id := range []string{a.id, "alpha-nobody"} {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = id
		lv.Members = append(lv.Members, lm)
	}
	lresp, err := lv.RequestWith(ctx, a.cl)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "leave", lresp.Members[0].ErrorCode, nil)
	wantCode(t, "leave of an unknown member", lresp.Members[1].ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "heartbeat of b after a left", b.heartbeat(ctx, "g1", b.id, 2), kerr.RebalanceInProgress)
	jb = b.join(ctx, "g1", 10000)
	if jb.Generation != 3 || jb.LeaderID != b.id || len(jb.Members) != 1 {
		t.Fatalf("b alone: %+v", jb)
	}
}

// TestGroupSessionExpiry: a member that sends nothing for its 300 ms
// session timeout is removed and the group rebalances, while one that
// heartbeats stays. Broken variants it catches: no session timer (the
// state never leaves Stable with two members: the test times out); a
// timer that Heartbeat does not restart (the heartbeating member expires
// too: its heartbeat gets UNKNOWN_MEMBER_ID).
func TestGroupSessionExpiry(t *testing.T) {
	_, s := serve(t, 100)
	ctx := testCtx(t, 20*time.Second)
	a, b := newTestMember(t, s, "alpha"), newTestMember(t, s, "beta")
	a.join(ctx, "g", 300)
	a.sync(ctx, "g", nil)
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		b.join(ctx, "g", 300)
	}()
	// a heartbeats and joins again when told to, until b's join is in.
	for {
		code := a.heartbeat(ctx, "g", a.id, a.gen)
		if code == kerr.RebalanceInProgress.Code {
			a.join(ctx, "g", 300)
			break
		}
		wantCode(t, "heartbeat", code, nil)
		time.Sleep(50 * time.Millisecond)
	}
	<-bDone
	a.sync(ctx, "g", nil)
	b.sync(ctx, "g", nil)
	// b now goes silent; a heartbeats, every 50 ms, until b has expired
	// and the rebalance has made a the only member.
	gen := a.gen
	for a.gen == gen {
		code := a.heartbeat(ctx, "g", a.id, a.gen)
		switch code {
		case kerr.RebalanceInProgress.Code:
			if jr := a.join(ctx, "g", 300); len(jr.Members) != 1 {
				t.Fatalf("after b's expiry: %d members", len(jr.Members))
			}
			a.sync(ctx, "g", nil)
		default:
			wantCode(t, "heartbeat of a", code, nil)
		}
		if ctx.Err() != nil {
			t.Fatal("b never expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantCode(t, "heartbeat of b after its expiry", b.heartbeat(ctx, "g", b.id, b.gen), kerr.UnknownMemberID)
	dg := describeGroup(t, ctx, a.cl, "g")
	if dg.State != "Stable" || len(dg.Members) != 1 || dg.Members[0].MemberID != a.id {
		t.Fatalf("describe after b's expiry: %+v", dg)
	}
	// a goes silent too: the group ends Empty.
	for describeGroup(t, ctx, b.cl, "g").State != "Empty" {
		if ctx.Err() != nil {
			t.Fatal("a never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawRequest writes req on nc as a v1/v2 request header with correlation
// id 1 and client id "raw".
func rawRequest(t *testing.T, nc net.Conn, req kmsg.Request) {
	t.Helper()
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "raw"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCloseDuringJoin: Server.Close ends a JoinGroup that waits for a
// member that will not join again (rebalance timeout 60 s): the waiting
// connection closes, Close returns, and no goroutine or timer callback is
// left. Broken variants it catches: a close that does not end the waits
// (Close blocks on the connection's goroutines: the test times out); a
// session timer left running past Close (goleak sees its goroutine when
// it fires — the member's 300 ms session is shorter than the check's
// retries).
func TestGroupCloseDuringJoin(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	c, err := tributary.NewCluster(100)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen(c, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.ClientID("alpha"))
	if err != nil {
		t.Fatal(err)
	}
	a := &testMember{t: t, cl: cl}
	a.join(ctx, "g", 10000)
	a.sync(ctx, "g", nil)

	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := (&testMember{}).joinReq("g", "range", 300)
	req.Version = 3 // joins at once, no MEMBER_ID_REQUIRED
	rawRequest(t, nc, req)
	for describeGroup(t, ctx, cl, "g").State != "PreparingRebalance" {
		time.Sleep(5 * time.Millisecond)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(bufio.NewReader(nc))
		ended <- err
	}()
	cl.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("waiting join's connection: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting JoinGroup's connection is still open after Close")
	}
	c.Close()
	goleak.VerifyNone(t, opt)
}

// TestGroupStaticMember: a static member (group.instance.id) joins without
// MEMBER_ID_REQUIRED; a new instance of it replaces it in Stable without a
// rebalance, keeping the generation and the assignment, and fences the
// old member id; it leaves by instance id. Broken variants it catches: a
// replacement that rebalances (the generation moves to 2), one that drops
// the assignment (the new instance's SyncGroup gets none), a missing
// fence (the old id's heartbeat is answered NONE), a LeaveGroup that does
// not resolve instance ids (UNKNOWN_MEMBER_ID, the group stays Stable).
func TestGroupStaticMember(t *testing.T) {
	_, s := serve(t, 100)
	ctx := testCtx(t, 20*time.Second)
	staticJoin := func(m *testMember) *kmsg.JoinGroupResponse {
		t.Helper()
		req := m.joinReq("g", "range", 10000)
		req.InstanceID = kmsg.StringPtr("host-1")
		resp, err := req.RequestWith(ctx, m.cl)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "static join", resp.ErrorCode, nil)
		m.id, m.gen = resp.MemberID, resp.Generation
		return resp
	}
	a, a2 := newTestMember(t, s, "alpha"), newTestMember(t, s, "alpha")
	if jr := staticJoin(a); jr.Generation != 1 || jr.LeaderID != a.id || len(jr.Members) != 1 || *jr.Members[0].InstanceID != "host-1" {
		t.Fatalf("static join: %+v", jr)
	}
	a.sync(ctx, "g", map[string]string{a.id: "all"})
	jr := staticJoin(a2)
	if jr.Generation != 1 || a2.id == a.id || jr.LeaderID != a2.id || !jr.SkipAssignment {
		t.Fatalf("replacing join: %+v (old id %s)", jr, a.id)
	}
	if sr := a2.sync(ctx, "g", nil); sr.ErrorCode != 0 || string(sr.MemberAssignment) != "all" {
		t.Fatalf("replacement's sync: %v %q", kerr.ErrorForCode(sr.ErrorCode), sr.MemberAssignment)
	}
	hb := func(id string) int16 {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation, req.InstanceID = "g", id, 1, kmsg.StringPtr("host-1")
		resp, err := req.RequestWith(ctx, a.cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	wantCode(t, "heartbeat of the replaced member", hb(a.id), kerr.FencedInstanceID)
	wantCode(t, "heartbeat of the replacement", hb(a2.id), nil)
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group = "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.InstanceID = kmsg.StringPtr("host-1")
	lv.Members = append(lv.Members, lm)
	lresp, err := lv.RequestWith(ctx, a2.cl)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "leave by instance id", lresp.Members[0].ErrorCode, nil)
	if dg := describeGroup(t, ctx, a2.cl, "g"); dg.State != "Empty" || len(dg.Members) != 0 {
		t.Fatalf("after the leave: %+v", dg)
	}
}

// rawRoundTrip sends req at its own version on nc and decodes the answer
// into resp (of the same version).
func rawRoundTrip(t *testing.T, nc net.Conn, req kmsg.Request) kmsg.Response {
	t.Helper()
	rawRequest(t, nc, req)
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, b); err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	b = b[4:] // correlation id
	if resp.IsFlexible() {
		b = b[1:] // no header tags
	}
	if err := resp.ReadFrom(b); err != nil {
		t.Fatalf("%T v%d: %v", resp, req.GetVersion(), err)
	}
	return resp
}

// TestGroupOldVersions drives the version-specific branches over a raw
// connection: FindCoordinator v0 (one key, top-level fields), JoinGroup
// v0 (an id at once, no MEMBER_ID_REQUIRED; the session timeout as
// rebalance timeout), OffsetCommit v0 (a simple commit: no generation),
// OffsetFetch v1 (per-partition errors) and v3 (top-level error; no
// topics: all of them), LeaveGroup v0. Broken variants it catches: v0-3
// answers left in Coordinators (v0's NodeID and Port stay 0/-1), a
// MEMBER_ID_REQUIRED before v4 (a v0 client cannot take it), an
// OffsetFetch error put at the top level before v2 (where the field does
// not exist: the partition's code reads 0).
func TestGroupOldVersions(t *testing.T) {
	c, s := serve(t, 100)
	if _, err := c.Backend().CreateTopic("orders", 1, payloadType); err != nil {
		t.Fatal(err)
	}
	h, err := s.topic("orders")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := h.TryPublish(0, engine.Message{Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, port, _ := splitHostPort(s.Addr())

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 0, "g"
	if r := rawRoundTrip(t, nc, fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 || r.NodeID != NodeID || r.Port != port || r.Host != "127.0.0.1" {
		t.Fatalf("find coordinator v0: %+v", r)
	}

	jr := (&testMember{}).joinReq("g", "range", 10000)
	jr.Version = 0
	j := rawRoundTrip(t, nc, jr).(*kmsg.JoinGroupResponse)
	if j.ErrorCode != 0 || !strings.HasPrefix(j.MemberID, "raw-") || j.Generation != 1 || j.LeaderID != j.MemberID {
		t.Fatalf("join v0: %+v", j)
	}

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group = 0, "simple"
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 2
	rt.Partitions = append(rt.Partitions, rp)
	oc.Topics = append(oc.Topics, rt)
	if r := rawRoundTrip(t, nc, oc).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("simple commit v0: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Group = 1, "bad.group"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "orders", []int32{0}
	of.Topics = append(of.Topics, ft)
	if r := rawRoundTrip(t, nc, of).(*kmsg.OffsetFetchResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("offset fetch v1 of an invalid group: %+v", r)
	}
	of.Group = "simple"
	if r := rawRoundTrip(t, nc, of).(*kmsg.OffsetFetchResponse); r.Topics[0].Partitions[0].Offset != 2 {
		t.Fatalf("offset fetch v1: %+v", r)
	}
	of.Version, of.Topics = 3, nil
	if r := rawRoundTrip(t, nc, of).(*kmsg.OffsetFetchResponse); r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].Offset != 2 {
		t.Fatalf("offset fetch v3 of all topics: %+v", r)
	}
	of.Group = "bad.group"
	if r := rawRoundTrip(t, nc, of).(*kmsg.OffsetFetchResponse); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("offset fetch v3 of an invalid group: %+v", r)
	}

	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group, lv.MemberID = 0, "g", j.MemberID
	if r := rawRoundTrip(t, nc, lv).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("leave v0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := rawRoundTrip(t, nc, lv).(*kmsg.LeaveGroupResponse); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("second leave v0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 4
	lg.StatesFilter = []string{"empty"}
	r := rawRoundTrip(t, nc, lg).(*kmsg.ListGroupsResponse)
	if len(r.Groups) != 2 || r.Groups[0].Group != "g" || r.Groups[1].Group != "simple" || r.Groups[1].GroupState != "Empty" {
		t.Fatalf("list groups of state Empty: %+v", r.Groups)
	}
}
