package kafka

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSyncLeftOutMemberAfterLeader: a member the leader's assignment
// leaves out gets an empty consumer assignment (one a consumer decodes:
// kgo refuses zero bytes) whether its SyncGroup comes before the
// leader's or after it. Broken variant it catches: the answer of a
// SyncGroup in Stable handing back the nil assignment, so the order of
// the syncs decides whether the member can decode it.
func TestSyncLeftOutMemberAfterLeader(t *testing.T) {
	_, s := serve(t, 100)
	ctx := testCtx(t, 10*time.Second)
	a, b := newTestMember(t, s, "a"), newTestMember(t, s, "b")
	a.join(ctx, "leftout", 30_000) // a alone: generation 1, a leads
	var wg sync.WaitGroup
	var ja, jb *kmsg.JoinGroupResponse
	wg.Add(2)
	go func() { defer wg.Done(); jb = b.join(ctx, "leftout", 30_000) }()
	time.Sleep(50 * time.Millisecond)
	go func() { defer wg.Done(); ja = a.join(ctx, "leftout", 30_000) }()
	wg.Wait()
	leader, follower := a, b
	if ja.LeaderID != a.id {
		leader, follower = b, a
	}
	if jb.LeaderID != ja.LeaderID || a.gen != b.gen {
		t.Fatalf("leaders %s %s, generations %d %d", ja.LeaderID, jb.LeaderID, a.gen, b.gen)
	}
	own := kmsg.NewConsumerMemberAssignment()
	if r := leader.sync(ctx, "leftout", map[string]string{leader.id: string(own.AppendTo(nil))}); r.ErrorCode != 0 {
		t.Fatalf("leader sync: %d", r.ErrorCode)
	}
	r := follower.sync(ctx, "leftout", nil)
	if r.ErrorCode != 0 {
		t.Fatalf("follower sync: %d", r.ErrorCode)
	}
	var got kmsg.ConsumerMemberAssignment
	if err := got.ReadFrom(r.MemberAssignment); err != nil || len(got.Topics) != 0 {
		t.Fatalf("left-out follower syncing after the leader got %q: %v", r.MemberAssignment, err)
	}
}

// TestStaticMemberRestartKgo: a kgo consumer with a group instance id
// (KIP-345) consumes and commits part of a topic and closes without
// leaving; a new client of the same instance id takes its place at once
// (not after the 45 s session timeout) and goes on from the commit.
func TestStaticMemberRestartKgo(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "static", 2)
	publish(t, c, "static", 0, "a0", "a1", "a2")
	publish(t, c, "static", 1, "b0", "b1", "b2")
	ctx := testCtx(t, 15*time.Second)
	consume := func(want int) []*kgo.Record {
		cl := client(t, s, kgo.ConsumeTopics("static"), kgo.ConsumerGroup("sg"), kgo.InstanceID("i1"),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var got []*kgo.Record
		for len(got) < want {
			fs := cl.PollRecords(ctx, want-len(got))
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			got = append(got, fs.Records()...)
		}
		if err := cl.CommitRecords(ctx, got...); err != nil {
			t.Fatal(err)
		}
		cl.Close()
		return got
	}
	first := consume(4)
	second := consume(2)
	seen := map[string]bool{}
	for _, r := range append(first, second...) {
		if seen[string(r.Value)] {
			t.Fatalf("%s delivered twice", r.Value)
		}
		seen[string(r.Value)] = true
	}
	if len(seen) != 6 {
		t.Fatalf("%d distinct records, want 6", len(seen))
	}
}
