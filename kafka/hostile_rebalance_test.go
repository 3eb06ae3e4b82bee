package kafka

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func joinedIDs(resp *kmsg.JoinGroupResponse) []string {
	var ids []string
	for _, m := range resp.Members {
		ids = append(ids, m.MemberID)
	}
	slices.Sort(ids)
	return ids
}

// TestGroupMemberCrashesDuringJoin: a member whose connection closes while
// its JoinGroup waits (rebalance timeout 60 s, session 300 ms) is dropped
// after its session timeout, so the others' rebalance completes without it
// in seconds, not after the minute. Broken variant it catches: a wait cut
// short that leaves the member without a session timer (the survivor's
// JoinGroup waits out the 60 s rebalance timeout: the 10 s context ends
// first).
func TestGroupMemberCrashesDuringJoin(t *testing.T) {
	_, s := serve(t, 100)
	ctx := testCtx(t, 10*time.Second)
	a := newTestMember(t, s, "alpha")
	a.join(ctx, "crash", 10_000)
	a.sync(ctx, "crash", nil)

	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	req := (&testMember{}).joinReq("crash", "range", 300)
	req.Version = 3 // joins at once, no MEMBER_ID_REQUIRED
	rawRequest(t, nc, req)
	for describeGroup(t, ctx, a.cl, "crash").State != "PreparingRebalance" {
		time.Sleep(5 * time.Millisecond)
	}
	nc.Close() // crashes mid-JoinGroup
	// Wait until the server has seen the close (the crashed JoinGroup no
	// longer waits); a JoinGroup of the survivor before that would find
	// both joined and complete the generation with both.
	waitFor(t, ctx, "the crashed JoinGroup detached", func() bool {
		g := s.groups.group("crash", false)
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.joiningLocked() == 0
	})
	start := time.Now()
	resp := a.join(ctx, "crash", 10_000)
	if got := joinedIDs(resp); !slices.Equal(got, []string{a.id}) {
		t.Fatalf("generation %d members %v, want only the survivor %s", resp.Generation, got, a.id)
	}
	if resp.Generation != 2 || resp.LeaderID != a.id {
		t.Fatalf("generation %d leader %s, want 2 and %s", resp.Generation, resp.LeaderID, a.id)
	}
	wantCode(t, "survivor's sync", a.sync(ctx, "crash", nil).ErrorCode, nil)
	t.Logf("rebalance without the crashed member took %v", time.Since(start))
}

// TestGroupLeaderNeverSyncs: after a rebalance the leader joins but never
// sends SyncGroup (it goes on heartbeating); the follower's SyncGroup waits
// for the rebalance timeout (500 ms), then gets REBALANCE_IN_PROGRESS, the
// silent leader is removed (its heartbeat UNKNOWN_MEMBER_ID), and the
// follower rejoins alone as the new leader. Broken variants it catches:
// no sync timer (the follower's SyncGroup waits: the context ends), a
// leader kept across the removal (the follower's JoinGroup names the
// removed id).
// (A sync timer that rebalances without removing the silent leader is
// not caught: the follower's rejoin then drops it after the rebalance
// timeout all the same.)
func TestGroupLeaderNeverSyncs(t *testing.T) {
	_, s := serve(t, 100)
	ctx := testCtx(t, 10*time.Second)
	lead, fol := newTestMember(t, s, "lead"), newTestMember(t, s, "fol")
	lead.joinWith(ctx, "silent", 10_000, 500)
	wantCode(t, "leader's first sync", lead.sync(ctx, "silent", map[string]string{lead.id: string(emptyConsumerAssignment())}).ErrorCode, nil)
	done := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { done <- fol.joinWith(ctx, "silent", 10_000, 500) }()
	for describeGroup(t, ctx, lead.cl, "silent").State != "PreparingRebalance" {
		time.Sleep(5 * time.Millisecond)
	}
	jl := lead.joinWith(ctx, "silent", 10_000, 500)
	jf := <-done
	if jl.LeaderID != lead.id || jf.LeaderID != lead.id || fol.gen != lead.gen {
		t.Fatalf("leaders %s %s generations %d %d, want %s twice", jl.LeaderID, jf.LeaderID, lead.gen, fol.gen, lead.id)
	}
	// The leader heartbeats but never syncs.
	stop := make(chan struct{})
	hb := make(chan int16, 100)
	go func() {
		defer close(hb)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			hb <- lead.heartbeat(ctx, "silent", lead.id, lead.gen)
		}
	}()
	r := fol.sync(ctx, "silent", nil)
	wantCode(t, "follower's sync while the leader is silent", r.ErrorCode, kerr.RebalanceInProgress)
	jf = fol.joinWith(ctx, "silent", 10_000, 500)
	close(stop)
	if jf.LeaderID != fol.id || !slices.Equal(joinedIDs(jf), []string{fol.id}) {
		t.Fatalf("rejoin: leader %s members %v, want %s alone", jf.LeaderID, joinedIDs(jf), fol.id)
	}
	for range hb { // the heartbeats before the removal; answered with or without errors
	}
	wantCode(t, "silent leader's heartbeat after the removal", lead.heartbeat(ctx, "silent", lead.id, lead.gen), kerr.UnknownMemberID)
	wantCode(t, "new leader's sync", fol.sync(ctx, "silent", map[string]string{fol.id: string(emptyConsumerAssignment())}).ErrorCode, nil)
}

// TestGroupFencedCommit: an OffsetCommit of an old generation (a zombie
// member that missed a rebalance) never moves a committed offset, neither
// back nor forth: ILLEGAL_GENERATION, and Describe and OffsetFetch still
// show the current generation's commit; a commit from a member removed
// from the group is UNKNOWN_MEMBER_ID; a simple commit (generation -1) on
// a group with members is refused. Broken variants it catches: a commit
// check that skips the generation (the zombie's commit back to 2 is
// OFFSET_OUT_OF_RANGE, retention having removed the records below 7, and
// its commit forth moves the offset to 9), a simple commit let through
// while members hold the group.
func TestGroupFencedCommit(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "fence", 1)
	publish(t, c, "fence", 0, "0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
	ctx := testCtx(t, 10*time.Second)
	a, b := newTestMember(t, s, "a"), newTestMember(t, s, "b")
	a.join(ctx, "fg", 10_000)
	a.sync(ctx, "fg", nil)
	oldGen := a.gen
	wantCode(t, "generation 1 commit", a.commit(ctx, "fg", a.id, oldGen, "fence", 0, 5), nil)

	done := make(chan struct{})
	go func() { defer close(done); b.join(ctx, "fg", 10_000) }()
	for describeGroup(t, ctx, a.cl, "fg").State != "PreparingRebalance" {
		time.Sleep(5 * time.Millisecond)
	}
	a.join(ctx, "fg", 10_000)
	<-done
	wantCode(t, "old generation's commit while completing", a.commit(ctx, "fg", a.id, oldGen, "fence", 0, 2), kerr.RebalanceInProgress)
	a.sync(ctx, "fg", nil)
	b.sync(ctx, "fg", nil)
	wantCode(t, "current generation's commit", b.commit(ctx, "fg", b.id, b.gen, "fence", 0, 7), nil)
	wantCode(t, "old generation's commit back", a.commit(ctx, "fg", a.id, oldGen, "fence", 0, 2), kerr.IllegalGeneration)
	wantCode(t, "old generation's commit forth", a.commit(ctx, "fg", a.id, oldGen, "fence", 0, 9), kerr.IllegalGeneration)
	wantCode(t, "simple commit on a group with members", a.commit(ctx, "fg", "", -1, "fence", 0, 1), kerr.UnknownMemberID)

	// a leaves; its id committing with the current generation is unknown.
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Group = "fg"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = a.id
	lg.Members = append(lg.Members, lm)
	if _, err := lg.RequestWith(ctx, a.cl); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "removed member's commit", a.commit(ctx, "fg", a.id, a.gen, "fence", 0, 3), kerr.UnknownMemberID)

	g, ok := findGroup(t, c, "fence", "fg")
	if !ok || g.Partitions[0].Committed != 7 {
		t.Fatalf("Describe: group %+v (found %v), want committed 7", g, ok)
	}
	offs, code := b.fetchOffsets(ctx, "fg", "fence", 0)
	if code != 0 || offs[0] != 7 {
		t.Fatalf("OffsetFetch: %v %v, want 7", offs, kerr.ErrorForCode(code))
	}
}

// TestGroupMembersOnDifferentTopics: one classic group whose two kgo
// members subscribe to different topics (Kafka allows it; the leader
// assigns each member its own topic's partitions). Each consumes its
// topic whole and the group's commits land on each topic: Describe shows
// the Tributary group of the same name committed to the log end on both.
// Broken variants it catches: a JoinGroup that refuses differing
// subscriptions (INCONSISTENT_GROUP_PROTOCOL: no records), commits of one
// topic stored under the other (one topic's committed offset stays 0).
func TestGroupMembersOnDifferentTopics(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "ta", 2)
	createTopic(t, c, "tb", 1)
	for p := range int32(2) {
		publish(t, c, "ta", p, "a0", "a1", "a2")
	}
	publish(t, c, "tb", 0, "b0", "b1", "b2", "b3")
	ctx := testCtx(t, 15*time.Second)
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	var cls []*kgo.Client
	defer func() {
		for _, cl := range cls {
			cl.Close()
		}
		wg.Wait()
	}()
	for _, topic := range []string{"ta", "tb"} {
		cl := client(t, s, kgo.ConsumerGroup("mixed"), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.HeartbeatInterval(100*time.Millisecond), kgo.AutoCommitInterval(100*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond))
		cls = append(cls, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				mu.Lock()
				for _, r := range fs.Records() {
					if r.Topic != topic {
						t.Errorf("record of %s to the member of %s", r.Topic, topic)
					}
					got[r.Topic]++
				}
				mu.Unlock()
			}
		}()
	}
	for _, topic := range []string{"ta", "tb"} {
		waitFor(t, ctx, topic+" committed to its log end", func() bool {
			g, ok := findGroup(t, c, topic, "mixed")
			if !ok {
				return false
			}
			d, _ := c.Describe(topic)
			for _, gp := range g.Partitions {
				if gp.Committed != d.Partitions[gp.Partition].LogEndOffset {
					return false
				}
			}
			return true
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if got["ta"] < 6 || got["tb"] < 4 {
		t.Fatalf("consumed %v, want ta 6, tb 4", got)
	}
}

// TestGroupHeartbeatOnlyMemberDropped: a member that answers a rebalance
// only with heartbeats (REBALANCE_IN_PROGRESS each time) and never joins
// again is dropped when the rebalance timeout (500 ms) ends, although
// its session stays alive; the joining member's JoinGroup completes
// without it and the heartbeater then gets UNKNOWN_MEMBER_ID (its client
// joins anew). Broken variants it catches: a heartbeat that restarts the
// rebalance timer (the rebalance never completes: the context ends), a
// completion that keeps members with live sessions (two members in the
// generation, the new one's SyncGroup waiting for a leader that never
// syncs).
func TestGroupHeartbeatOnlyMemberDropped(t *testing.T) {
	_, s := serve(t, 100)
	ctx := testCtx(t, 10*time.Second)
	a, b := newTestMember(t, s, "hbonly"), newTestMember(t, s, "joiner")
	a.joinWith(ctx, "hb", 10_000, 500)
	a.sync(ctx, "hb", nil)
	done := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { done <- b.joinWith(ctx, "hb", 10_000, 500) }()
	var codes []int16
	for {
		select {
		case jb := <-done:
			if got := joinedIDs(jb); jb.LeaderID != b.id || !slices.Equal(got, []string{b.id}) {
				t.Fatalf("generation %d: leader %s members %v, want %s alone", jb.Generation, jb.LeaderID, got, b.id)
			}
			if !slices.Contains(codes, kerr.RebalanceInProgress.Code) {
				t.Fatalf("heartbeats during the rebalance answered %v, want REBALANCE_IN_PROGRESS", codes)
			}
			wantCode(t, "heartbeat after the drop", a.heartbeat(ctx, "hb", a.id, a.gen), kerr.UnknownMemberID)
			return
		case <-time.After(50 * time.Millisecond):
			codes = append(codes, a.heartbeat(ctx, "hb", a.id, a.gen))
		case <-ctx.Done():
			t.Fatalf("the rebalance did not complete; heartbeats answered %v", codes)
		}
	}
}
