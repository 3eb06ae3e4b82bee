package tributary_test

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// Wake-up tests: a blocked Poll or Send does no work until the broker wakes
// it, and every event that can make a record deliverable (or room in a full
// partition) does wake it. They read Consumer.Stats: Polls (engine polls),
// Waits (times Poll blocked) and Wakeups (times a blocked Poll was woken).

// polled is the result of an asynchronous Poll.
type polled struct {
	msgs []tributary.Message[string]
	err  error
}

// pollAsync starts a blocking Poll of up to max messages.
func pollAsync(ctx context.Context, c *tributary.Consumer[string], max int32) <-chan polled {
	ch := make(chan polled, 1)
	go func() {
		ms, err := c.Poll(ctx, max)
		ch <- polled{ms, err}
	}()
	return ch
}

// polledOne waits for an asynchronous Poll's single message.
func polledOne(t *testing.T, ch <-chan polled, what string) tributary.Message[string] {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err, what)
		require.Len(t, r.msgs, 1, what)
		return r.msgs[0]
	case <-time.After(guard):
		t.Fatalf("%s: blocked Poll not woken within %v", what, guard)
		return tributary.Message[string]{}
	}
}

func TestWakeIdleConsumerDoesNotPoll(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 2, tributary.String())
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := pollAsync(ctx, cons, 4)
	waitPollBlocked(t, cons, 1)
	time.Sleep(200 * time.Millisecond)
	s := cons.Stats()
	assert.LessOrEqual(t, s.Polls, int64(2), "no poll without a wake")
	assert.Equal(t, int64(1), s.Waits)
	assert.Zero(t, s.Wakeups)

	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 1, Value: "x"})
	m := polledOne(t, res, "publish")
	assert.Equal(t, "x", m.Value)
	s = cons.Stats()
	assert.Equal(t, int64(1), s.Wakeups)
	assert.LessOrEqual(t, s.Polls, int64(2+2*s.Wakeups))
	require.NoError(t, cons.Close())
}

// Over K spaced-out publishes, each consumed by a fresh Poll call, every
// wake costs at most two engine polls.
func TestWakeAtMostTwoPollsPerWake(t *testing.T) {
	const k = 20
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 1, tributary.String())
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	p := testProducer[string](t, c, "p", tributary.Manual())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range k {
		res := pollAsync(ctx, cons, 1)
		waitPollBlocked(t, cons, int64(i+1))
		sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: strconv.Itoa(i)})
		m := polledOne(t, res, "publish "+strconv.Itoa(i))
		require.Equal(t, strconv.Itoa(i), m.Value)
		require.NoError(t, cons.Ack(m))
	}
	s := cons.Stats()
	t.Logf("after %d publishes: %+v", k, s)
	assert.Equal(t, int64(k), s.Waits)
	assert.Equal(t, int64(k), s.Wakeups)
	assert.LessOrEqual(t, s.Polls, 2+2*s.Wakeups, "engine polls per wake")
	require.NoError(t, cons.Close())
}

func TestWakeSourcesWakeBlockedPoll(t *testing.T) {
	type setup struct {
		c    *tributary.Cluster
		in   *tributary.Topic[string]
		p    *tributary.Producer[string]
		cons *tributary.Consumer[string]
	}
	newSetup := func(t *testing.T, partitions int32, opts ...engine.Option) setup {
		c := testCluster(t, 10, opts...)
		in := testTopic(t, c, "in", partitions, tributary.String())
		cons, err := tributary.NewConsumer(in, "g", "m1")
		require.NoError(t, err)
		return setup{c: c, in: in, p: testProducer[string](t, c, "p", tributary.Manual()), cons: cons}
	}
	cases := []struct {
		name string
		// arrange prepares the state; wake, run once Poll blocked, is the
		// event under test; want checks the message it delivered.
		arrange func(t *testing.T, s *setup) (wake func(), want func(m tributary.Message[string]))
		opts    []engine.Option
		parts   int32
	}{
		{name: "Publish", parts: 1, arrange: func(t *testing.T, s *setup) (func(), func(tributary.Message[string])) {
			return func() { sendOK(t, s.p, s.in, tributary.Message[string]{Partition: 0, Value: "x"}) },
				func(m tributary.Message[string]) { assert.Equal(t, "x", m.Value) }
		}},
		{name: "RetryByAnotherGoroutine", parts: 1, arrange: func(t *testing.T, s *setup) (func(), func(tributary.Message[string])) {
			sendOK(t, s.p, s.in, tributary.Message[string]{Partition: 0, Value: "x"})
			ms, err := s.cons.TryPoll(1)
			require.NoError(t, err)
			require.Len(t, ms, 1) // now in flight: the Poll blocks
			return func() {
					done := make(chan error)
					go func() { done <- s.cons.Retry(ms[0]) }()
					require.NoError(t, <-done)
				}, func(m tributary.Message[string]) {
					assert.Equal(t, ms[0].ID, m.ID)
					assert.Equal(t, int32(2), m.Attempt)
				}
		}},
		{name: "RebalanceMemberLeaves", parts: 2, arrange: func(t *testing.T, s *setup) (func(), func(tributary.Message[string])) {
			other, err := tributary.NewConsumer(s.in, "g", "m2") // takes partition 1
			require.NoError(t, err)
			require.Equal(t, []int32{0}, s.cons.Assignment())
			sendOK(t, s.p, s.in, tributary.Message[string]{Partition: 1, Value: "x"}) // m2's; m2 never polls
			return func() { require.NoError(t, other.Close()) },
				func(m tributary.Message[string]) {
					assert.Equal(t, "x", m.Value)
					assert.Equal(t, int32(1), m.Partition)
				}
		}},
		{name: "SeekBack", parts: 1, arrange: func(t *testing.T, s *setup) (func(), func(tributary.Message[string])) {
			_, err := s.c.CreateGroup("in", "holder", engine.RoundRobin) // keeps the record retained
			require.NoError(t, err)
			sendOK(t, s.p, s.in, tributary.Message[string]{Partition: 0, Value: "x"})
			m := pollOne(t, s.cons)
			require.NoError(t, s.cons.Ack(m))
			return func() { require.NoError(t, s.cons.Seek(0, 0)) },
				func(m tributary.Message[string]) {
					assert.Equal(t, "x", m.Value)
					assert.Equal(t, int32(1), m.Attempt)
				}
		}},
		{name: "AddPartitionsThenPublish", parts: 1, arrange: func(t *testing.T, s *setup) (func(), func(tributary.Message[string])) {
			return func() {
					n, err := s.c.AddPartitions("in", 1)
					require.NoError(t, err)
					require.Equal(t, int32(2), n)
					sendOK(t, s.p, s.in, tributary.Message[string]{Partition: 1, Value: "new"})
				}, func(m tributary.Message[string]) {
					assert.Equal(t, "new", m.Value)
					assert.Equal(t, int32(1), m.Partition)
				}
		}},
		{name: "AckTimeout", parts: 1, opts: []engine.Option{engine.WithAckTimeout(50 * time.Millisecond)}, arrange: func(t *testing.T, s *setup) (func(), func(tributary.Message[string])) {
			sendOK(t, s.p, s.in, tributary.Message[string]{Partition: 0, Value: "x"})
			first := pollOne(t, s.cons) // never acked
			return func() {}, func(m tributary.Message[string]) {
				assert.Equal(t, first.ID, m.ID)
				assert.Equal(t, int32(2), m.Attempt)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t, tc.parts, tc.opts...)
			wake, want := tc.arrange(t, &s)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			before := s.cons.Stats()
			res := pollAsync(ctx, s.cons, 1)
			waitPollBlocked(t, s.cons, before.Waits+1)
			blocked := s.cons.Stats()
			wake()
			m := polledOne(t, res, tc.name)
			want(m)
			after := s.cons.Stats()
			assert.Greater(t, after.Wakeups, blocked.Wakeups, "woken")
			require.NoError(t, s.c.Close())
		})
	}
}

func TestWakeBlockedSend(t *testing.T) {
	// Each case fills partition 0 (capacity 1), blocks a Send on it, checks
	// it stays blocked, then frees room by the event under test.
	send := func(ctx context.Context, p *tributary.Producer[string], in *tributary.Topic[string]) <-chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := p.Send(ctx, in, tributary.Message[string]{Partition: 0, Value: "waiting"})
			ch <- err
		}()
		return ch
	}
	t.Run("TrimmingAck", func(t *testing.T) {
		c := testCluster(t, 1)
		in := testTopic(t, c, "in", 1, tributary.String())
		p := testProducer[string](t, c, "p", tributary.Manual())
		cons, err := tributary.NewConsumer(in, "g", "m1")
		require.NoError(t, err)
		sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "a"})
		res := send(context.Background(), p, in)
		stillPending(t, res, 50*time.Millisecond, "Send into a full partition")
		m := pollOne(t, cons)
		require.NoError(t, cons.Ack(m)) // the only group: trims
		require.NoError(t, awaitDone(t, res, guard, "Send after a trimming ack"))
		assert.Equal(t, int64(2), logEndOf(t, c, "in", 0))
		require.NoError(t, c.Close())
	})
	t.Run("DeleteGroup", func(t *testing.T) {
		c := testCluster(t, 1)
		in := testTopic(t, c, "in", 1, tributary.String())
		p := testProducer[string](t, c, "p", tributary.Manual())
		cons, err := tributary.NewConsumer(in, "g", "m1")
		require.NoError(t, err)
		_, err = c.CreateGroup("in", "idle", engine.RoundRobin)
		require.NoError(t, err)
		sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "a"})
		m := pollOne(t, cons)
		require.NoError(t, cons.Ack(m)) // "idle" still holds the record
		res := send(context.Background(), p, in)
		stillPending(t, res, 50*time.Millisecond, "Send into a full partition")
		ok, err := c.DeleteGroup("in", "idle")
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, awaitDone(t, res, guard, "Send after DeleteGroup"))
		require.NoError(t, c.Close())
	})
	t.Run("ForwardSeek", func(t *testing.T) {
		c := testCluster(t, 1)
		in := testTopic(t, c, "in", 1, tributary.String())
		p := testProducer[string](t, c, "p", tributary.Manual())
		_, err := c.CreateGroup("in", "idle", engine.RoundRobin)
		require.NoError(t, err)
		sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "a"})
		res := send(context.Background(), p, in)
		stillPending(t, res, 50*time.Millisecond, "Send into a full partition")
		ok, err := c.Seek("in", "idle", 0, 1)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, awaitDone(t, res, guard, "Send after a forward Seek"))
		require.NoError(t, c.Close())
	})
	t.Run("NotOnPublishOrNonTrimmingAck", func(t *testing.T) {
		c := testCluster(t, 1)
		in := testTopic(t, c, "in", 2, tributary.String())
		p := testProducer[string](t, c, "p", tributary.Manual())
		cons, err := tributary.NewConsumer(in, "g", "m1")
		require.NoError(t, err)
		_, err = c.CreateGroup("in", "idle", engine.RoundRobin)
		require.NoError(t, err)
		sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "a"})
		res := send(context.Background(), p, in)
		stillPending(t, res, 30*time.Millisecond, "Send into a full partition")
		sendOK(t, p, in, tributary.Message[string]{Partition: 1, Value: "other partition"}) // a publish
		stillPending(t, res, 100*time.Millisecond, "Send after a publish elsewhere")
		m := pollOne(t, cons)
		require.Equal(t, int32(0), m.Partition)
		require.NoError(t, cons.Ack(m)) // "idle" still at 0: nothing trimmed
		stillPending(t, res, 100*time.Millisecond, "Send after a non-trimming ack")
		assert.Equal(t, int64(1), logEndOf(t, c, "in", 0))
		ok, err := c.Seek("in", "idle", 0, 1) // now trims
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, awaitDone(t, res, guard, "Send after the trim"))
		require.NoError(t, c.Close())
	})
}

func TestWakeIdleConsumersDoNoWork(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 20
	}
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 8, tributary.String())
	conss := make([]*tributary.Consumer[string], n)
	for i := range conss { // every join before any Poll: joins wake a group's waiters
		var err error
		conss[i], err = tributary.NewConsumer(in, "g"+strconv.Itoa(i%10), "m"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, cons := range conss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := cons.Poll(ctx, 8)
			assert.ErrorIs(t, err, context.Canceled)
		}()
	}
	for _, cons := range conss {
		waitPollBlocked(t, cons, 1)
	}
	time.Sleep(300 * time.Millisecond)
	var polls, wakeups int64
	for _, cons := range conss {
		s := cons.Stats()
		polls += s.Polls
		wakeups += s.Wakeups
		assert.Equal(t, int64(1), s.Waits)
	}
	cancel()
	wg.Wait()
	assert.LessOrEqual(t, polls, int64(2*n), "engine polls of %d idle consumers", n)
	assert.Zero(t, wakeups)
	require.NoError(t, c.Close())
}

// The ack timeout of a record in flight wakes a Poll of the same member
// blocked on nothing published: it gets the record again (Attempt 2).
func TestAckTimeoutWakesBlockedPollOfSameMember(t *testing.T) {
	c := testCluster(t, 10, engine.WithAckTimeout(50*time.Millisecond))
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "x"})
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	first := pollOne(t, cons)
	require.Equal(t, int32(1), first.Attempt)
	start := time.Now()
	again := pollOne(t, cons) // blocks: nothing published, the record is in flight
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
	assert.Equal(t, first.ID, again.ID)
	assert.Equal(t, int32(2), again.Attempt)
	assert.Positive(t, cons.Stats().Wakeups)
	require.NoError(t, cons.Ack(again))
	require.NoError(t, cons.Close())
}

// A record in flight under an ack timeout too long to ever run out (one
// that reaches past the year 2262 from now) leaves a Poll of its member
// blocked with nothing to do: it waits once and is not woken, as with no
// ack timeout, and a publish still wakes it.
func TestWakeHugeAckTimeoutDoesNotSpin(t *testing.T) {
	c := testCluster(t, 10, tributary.WithAckTimeout(time.Duration(math.MaxInt64)))
	in := testTopic(t, c, "in", 2, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "x"})
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	first := pollOne(t, cons)
	require.Equal(t, "x", first.Value)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := pollAsync(ctx, cons, 2)
	waitPollBlocked(t, cons, 1)
	time.Sleep(100 * time.Millisecond)
	s := cons.Stats()
	assert.Equal(t, int64(1), s.Waits, "waits of a Poll with nothing deliverable")
	assert.Zero(t, s.Wakeups, "wake-ups with nothing deliverable")
	sendOK(t, p, in, tributary.Message[string]{Partition: 1, Value: "y"})
	assert.Equal(t, "y", polledOne(t, res, "publish").Value)
	require.NoError(t, cons.Close())
}

// A Poll or Send whose ctx has already ended (cancelled, a deadline past,
// a timeout of 0) reads it only when it would wait: a Poll with a message
// deliverable returns it and a Send with room publishes, while a Poll with
// nothing deliverable and a Send to a full partition return ctx.Err() at
// once, publishing and reserving nothing.
func TestWakeEndedContextReadOnlyWhileWaiting(t *testing.T) {
	c := testCluster(t, 1)
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	cons := testConsumer(t, in, "g", "m")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Hour))
	defer cancelPast()
	zero, cancelZero := context.WithTimeout(context.Background(), 0)
	defer cancelZero()
	ended := map[string]struct {
		ctx context.Context
		err error
	}{
		"cancelled": {cancelled, context.Canceled}, "past deadline": {past, context.DeadlineExceeded}, "timeout 0": {zero, context.DeadlineExceeded},
	}
	for name, e := range ended {
		_, err := cons.Poll(e.ctx, 1)
		require.ErrorIs(t, err, e.err, "%s: Poll with nothing deliverable", name)
	}
	for name, e := range ended {
		sent, err := p.Send(e.ctx, in, tributary.Message[string]{Value: name})
		require.NoError(t, err, "%s: Send with room", name)
		for other, f := range ended {
			_, err := p.Send(f.ctx, in, tributary.Message[string]{Value: "refused"})
			require.ErrorIs(t, err, f.err, "%s: Send to the full partition", other)
		}
		require.Equal(t, sent.Offset+1, logEndOf(t, c, "in", 0), "%s: the refused Sends published", name)
		ms, err := cons.Poll(e.ctx, 1)
		require.NoError(t, err, "%s: Poll with a message deliverable", name)
		require.Len(t, ms, 1)
		require.Equal(t, name, ms[0].Value)
		require.NoError(t, cons.Ack(ms[0]))
	}
	g := groupDesc(t, c, "in", "g").Partitions[0]
	require.False(t, g.InFlight, "a record left in flight")
}
