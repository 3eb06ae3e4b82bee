package tributary_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// A consumer group's configuration belongs to the group (GroupConfig): its
// failure policy, set by Cluster.CreateGroup or by the consumer that
// created the group, is what every consumer of the group applies; a
// consumer whose own failure options differ is refused. Also: groups at the
// log end (WithStart) and the admin removal of a member (RemoveMember).

// failAlways is a handler that fails every record.
func failAlways(context.Context, tributary.Message[purchase]) error {
	return errors.New("always fails")
}

// dlqLen returns how many records topic dlq retains.
func dlqLen(t testing.TB, c *tributary.Cluster, dlq string) int {
	t.Helper()
	d, err := c.Describe(dlq)
	require.NoError(t, err)
	n := 0
	for _, p := range d.Partitions {
		n += int(p.LogEndOffset - p.LogStartOffset)
	}
	return n
}

// TestGroupPolicyAppliesToEveryConsumer: two consumers of one group, only
// the first given WithDeadLetter: both dead-letter what keeps failing on
// their partitions, the second following the policy its group got from the
// first; and likewise for a group whose policy Cluster.CreateGroup set and
// whose consumers have no failure options at all.
func TestGroupPolicyAppliesToEveryConsumer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, c *tributary.Cluster, tp *tributary.Topic[purchase]) (*tributary.Consumer[purchase], *tributary.Consumer[purchase])
	}{
		{"the first consumer sets it", func(t *testing.T, c *tributary.Cluster, tp *tributary.Topic[purchase]) (*tributary.Consumer[purchase], *tributary.Consumer[purchase]) {
			f1 := testConsumer(t, tp, "g", "f1", tributary.WithDeadLetter("orders-dlq", 2), fastRetry)
			f2 := testConsumer(t, tp, "g", "f2")
			return f1, f2
		}},
		{"CreateGroup sets it", func(t *testing.T, c *tributary.Cluster, tp *tributary.Topic[purchase]) (*tributary.Consumer[purchase], *tributary.Consumer[purchase]) {
			ok, err := c.CreateGroup("orders", "g", engine.RoundRobin, tributary.WithDeadLetter("orders-dlq", 2), fastRetry)
			require.NoError(t, err)
			require.True(t, ok)
			return testConsumer(t, tp, "g", "f1"), testConsumer(t, tp, "g", "f2")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster(t, 10)
			tp := testTopic[purchase](t, c, "orders", 2, nil)
			pr := testProducer[purchase](t, c, "p", tributary.Manual())
			f1, f2 := tc.setup(t, c, tp)
			require.Equal(t, []int32{0}, f1.Assignment())
			require.Equal(t, []int32{1}, f2.Assignment())
			want := tributary.GroupConfig{DeadLetter: "orders-dlq", MaxAttempts: 2, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}
			for _, f := range []*tributary.Consumer[purchase]{f1, f2} {
				require.Equal(t, want, f.GroupConfig(), f.Name())
				dl, n := f.DeadLetter()
				require.Equal(t, "orders-dlq", dl, f.Name())
				require.Equal(t, int32(2), n, f.Name())
			}
			sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 0, Value: purchase{ID: 1}})
			sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 1, Value: purchase{ID: 2}})
			runConsumer(t, f1, failAlways)
			runConsumer(t, f2, failAlways)
			waitFor(t, "both records dead-lettered", func() bool {
				g := groupDesc(t, c, "orders", "g")
				return g.Partitions[0].Committed == 1 && g.Partitions[1].Committed == 1
			})
			require.Equal(t, 2, dlqLen(t, c, "orders-dlq"))
			require.Equal(t, int64(1), f1.Stats().DeadLettered)
			require.Equal(t, int64(1), f2.Stats().DeadLettered, "f2, without WithDeadLetter, dead-letters too")
		})
	}
}

// TestGroupPolicyNack: Nack applies the group's policy, not the consumer's
// options: a consumer without WithDeadLetter dead-letters at the group's
// maximum.
func TestGroupPolicyNack(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	ok, err := c.CreateGroup("orders", "g", engine.Range, tributary.WithDeadLetter("orders-dlq", 2))
	require.NoError(t, err)
	require.True(t, ok)
	cons := testConsumer(t, tp, "g", "plain")
	sendOK(t, pr, tp, tributary.Message[purchase]{Value: purchase{ID: 7}})
	m := pollOK(t, cons, 1)[0]
	dl, err := cons.Nack(guardCtx(t), m, errors.New("no"))
	require.NoError(t, err)
	require.False(t, dl, "attempt 1 of 2: retried")
	m = pollOK(t, cons, 1)[0]
	require.Equal(t, int32(2), m.Attempt)
	dl, err = cons.Nack(guardCtx(t), m, errors.New("no"))
	require.NoError(t, err)
	require.True(t, dl, "attempt 2 of 2: dead-lettered")
	require.Equal(t, 1, dlqLen(t, c, "orders-dlq"))
}

// TestGroupPolicyMismatchRefused: a consumer whose WithDeadLetter or
// WithBackoff differs from its group's policy is refused with
// ErrPolicyMismatch, before it joins: the group does not rebalance and the
// name stays free. Options equal to the group's (the defaults included)
// are accepted.
func TestGroupPolicyMismatchRefused(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	ok, err := c.CreateGroup("orders", "dl", engine.RoundRobin, tributary.WithDeadLetter("orders-dlq", 3))
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = c.CreateGroup("orders", "plain", engine.RoundRobin)
	require.NoError(t, err)
	require.True(t, ok)
	testConsumer(t, tp, "dl", "a")
	testConsumer(t, tp, "plain", "b")
	before := describeTopic(t, c, "orders")
	for _, tc := range []struct {
		group string
		opts  []tributary.ConsumerOption
	}{
		{"plain", []tributary.ConsumerOption{tributary.WithDeadLetter("orders-dlq", 3)}},
		{"dl", []tributary.ConsumerOption{tributary.WithDeadLetter("orders-dlq", 4)}},
		{"dl", []tributary.ConsumerOption{tributary.WithDeadLetter("other-dlq", 3)}},
		{"dl", []tributary.ConsumerOption{tributary.WithBackoff(time.Millisecond, time.Second)}},
		{"plain", []tributary.ConsumerOption{tributary.WithBackoff(tributary.DefaultBackoff, time.Minute)}},
		{"dl", []tributary.ConsumerOption{tributary.WithDeadLetter("orders-dlq", 3), tributary.WithBackoff(time.Second, time.Second)}},
	} {
		_, err := tributary.NewConsumer(tp, tc.group, "x", tc.opts...)
		require.ErrorIs(t, err, tributary.ErrPolicyMismatch, "group %s, %d options", tc.group, len(tc.opts))
		require.False(t, errors.Is(err, tributary.ErrInvalidArgument), "%v", err)
		require.NotContains(t, c.Consumers(), "x")
	}
	require.Equal(t, before, describeTopic(t, c, "orders"), "refused consumers changed the groups")
	// Agreeing options are accepted.
	testConsumer(t, tp, "dl", "y", tributary.WithDeadLetter("orders-dlq", 3), tributary.WithBackoff(tributary.DefaultBackoff, tributary.DefaultMaxBackoff))
	testConsumer(t, tp, "plain", "z", tributary.WithBackoff(tributary.DefaultBackoff, tributary.DefaultMaxBackoff))
	// A consumer whose options created the group: the next one with
	// other options is refused, one with none follows.
	testConsumer(t, tp, "fresh", "f1", tributary.WithDeadLetter("orders-dlq", 5))
	_, err = tributary.NewConsumer(tp, "fresh", "f2", tributary.WithDeadLetter("orders-dlq", 1))
	require.ErrorIs(t, err, tributary.ErrPolicyMismatch)
	f3 := testConsumer(t, tp, "fresh", "f3")
	_, n := f3.DeadLetter()
	require.Equal(t, int32(5), n)
}

// TestGroupConfigOfJoinedGroup: a group created by a consumer without
// failure options (a Join) has the zero GroupConfig: retry for ever; a
// consumer refused for a dead-letter topic of another type creates no
// group.
func TestGroupConfigOfJoinedGroup(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	testTopic(t, c, "strings", 1, tributary.String())
	cons := testConsumer(t, tp, "g", "a")
	got, ok, err := c.GroupConfig("orders", "g")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, tributary.GroupConfig{}, got)
	require.Equal(t, tributary.GroupConfig{}, cons.GroupConfig())
	require.Equal(t, "retry for ever, backoff 100ms to 10s", got.Policy())
	dl, n := cons.DeadLetter()
	require.Equal(t, "", dl)
	require.Equal(t, int32(0), n)

	_, err = tributary.NewConsumer(tp, "h", "b", tributary.WithDeadLetter("strings", 2))
	require.ErrorIs(t, err, tributary.ErrTypeMismatch)
	_, ok, err = c.GroupConfig("orders", "h")
	require.NoError(t, err)
	require.False(t, ok, "a refused consumer created its group")

	_, _, err = c.GroupConfig("nope", "g")
	require.ErrorIs(t, err, tributary.ErrInvalidArgument)
	_, _, err = c.GroupConfig("orders", "bad group")
	require.ErrorIs(t, err, tributary.ErrInvalidArgument)
}

// TestCreateGroupOptions: Cluster.CreateGroup's options are checked
// (ErrInvalidArgument, nothing created); an existing dead-letter topic of
// another payload type is ErrTypeMismatch; WithStart(engine.StartLatest)
// starts at the log end.
func TestCreateGroupOptions(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	testTopic(t, c, "strings", 1, tributary.String())
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 0, Value: purchase{ID: 1}})
	for _, opts := range [][]tributary.GroupOption{
		{nil}, {tributary.FailureOption{}}, {tributary.WithStart(3)}, {tributary.WithDeadLetter("orders", 2)},
		{tributary.WithDeadLetter("d", 1001)}, {tributary.WithBackoff(time.Second, time.Millisecond)},
	} {
		ok, err := c.CreateGroup("orders", "g", engine.RoundRobin, opts...)
		require.ErrorIs(t, err, tributary.ErrInvalidArgument)
		require.False(t, ok)
	}
	ok, err := c.CreateGroup("orders", "g", nil, tributary.WithDeadLetter("strings", 2))
	require.ErrorIs(t, err, tributary.ErrInvalidArgument, "a nil assignor before the type check")
	require.False(t, ok)
	ok, err = c.CreateGroup("orders", "g", engine.RoundRobin, tributary.WithDeadLetter("strings", 2))
	require.ErrorIs(t, err, tributary.ErrTypeMismatch)
	require.False(t, ok)
	require.Empty(t, describeTopic(t, c, "orders").Groups, "refused CreateGroups created a group")

	ok, err = c.CreateGroup("orders", "late", engine.Range, tributary.WithStart(engine.StartLatest))
	require.NoError(t, err)
	require.True(t, ok)
	g := groupDesc(t, c, "orders", "late")
	require.Equal(t, []int64{1, 0}, []int64{g.Partitions[0].Committed, g.Partitions[1].Committed})
	cons := testConsumer(t, tp, "late", "m")
	require.Equal(t, engine.StartLatest, cons.GroupConfig().Start)
	sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 0, Value: purchase{ID: 2}})
	got := pollOK(t, cons, 4)
	require.Len(t, got, 1)
	require.Equal(t, 2, got[0].Value.ID, "only what was published after the group was created")
}

// TestRemoveMember: Cluster.RemoveMember removes a member as its Leave
// would: the group rebalances, the removed consumer's Run ends with
// ErrClosed and the consumer is closed; a new consumer of its name joins
// again. False for an absent member or group; ErrInvalidArgument for bad
// names.
func TestRemoveMember(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	a := testConsumer(t, tp, "g", "a")
	b := testConsumer(t, tp, "g", "b")
	require.Equal(t, []int32{0}, a.Assignment())
	ran := goResult(func() (struct{}, error) {
		return struct{}{}, a.Run(guardCtx(t), func(context.Context, tributary.Message[purchase]) error { return nil })
	})
	waitPollBlocked(t, a, 1)
	ok, err := c.RemoveMember("orders", "g", "a")
	require.NoError(t, err)
	require.True(t, ok)
	require.ErrorIs(t, awaitResult(t, "Run of the removed consumer", ran).err, tributary.ErrClosed)
	require.Equal(t, []int32{0, 1}, b.Assignment())
	require.Equal(t, []string{"b"}, groupDesc(t, c, "orders", "g").Members)
	require.NotContains(t, c.Consumers(), "a", "Run closed the removed consumer")
	_, err = a.TryPoll(1)
	require.ErrorIs(t, err, tributary.ErrClosed)

	for _, n := range [][3]string{{"orders", "g", "a"}, {"orders", "absent", "b"}} {
		ok, err := c.RemoveMember(n[0], n[1], n[2])
		require.NoError(t, err, "%v", n)
		require.False(t, ok, "%v", n)
	}
	for _, n := range [][3]string{{"nope", "g", "b"}, {"orders", "bad group", "b"}, {"orders", "g", ""}} {
		ok, err := c.RemoveMember(n[0], n[1], n[2])
		require.ErrorIs(t, err, tributary.ErrInvalidArgument, "%v", n)
		require.False(t, ok)
	}
	require.Equal(t, []int32{0, 1}, b.Assignment(), "refused and false calls changed nothing")
	a2 := testConsumer(t, tp, "g", "a")
	require.Equal(t, []int32{0}, a2.Assignment())
}
