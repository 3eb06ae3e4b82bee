package tributary_test

import (
	"context"
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

// hxPolled is the result of an asynchronous Poll.
type hxPolled struct {
	msgs []tributary.Message[string]
	err  error
}

// hxPollAsync starts a blocking Poll of up to max messages.
func hxPollAsync(ctx context.Context, c *tributary.Consumer[string], max int32) <-chan hxPolled {
	ch := make(chan hxPolled, 1)
	go func() {
		ms, err := c.Poll(ctx, max)
		ch <- hxPolled{ms, err}
	}()
	return ch
}

// hxBlocked waits until c's Poll has blocked waits times in all.
func hxBlocked(t *testing.T, c *tributary.Consumer[string], waits int64) {
	t.Helper()
	hxEventually(t, "Poll blocked "+strconv.FormatInt(waits, 10)+" times", func() bool { return c.Stats().Waits >= waits })
}

// hxPolledOne waits for an asynchronous Poll's single message.
func hxPolledOne(t *testing.T, ch <-chan hxPolled, what string) tributary.Message[string] {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err, what)
		require.Len(t, r.msgs, 1, what)
		return r.msgs[0]
	case <-time.After(hxGuard):
		t.Fatalf("%s: blocked Poll not woken within %v", what, hxGuard)
		return tributary.Message[string]{}
	}
}

func TestWakeIdleConsumerDoesNotPoll(t *testing.T) {
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 2)
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := hxPollAsync(ctx, cons, 4)
	hxBlocked(t, cons, 1)
	time.Sleep(200 * time.Millisecond)
	s := cons.Stats()
	assert.LessOrEqual(t, s.Polls, int64(2), "no poll without a wake")
	assert.Equal(t, int64(1), s.Waits)
	assert.Zero(t, s.Wakeups)

	p := hxProducer(t, c, "p")
	hxSend(t, p, in, 1, "x")
	m := hxPolledOne(t, res, "publish")
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
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 1)
	cons, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	p := hxProducer(t, c, "p")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range k {
		res := hxPollAsync(ctx, cons, 1)
		hxBlocked(t, cons, int64(i+1))
		hxSend(t, p, in, 0, strconv.Itoa(i))
		m := hxPolledOne(t, res, "publish "+strconv.Itoa(i))
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
		c := hxCluster(t, 10, opts...)
		in := hxTopic(t, c, "in", partitions)
		cons, err := tributary.NewConsumer(in, "g", "m1")
		require.NoError(t, err)
		return setup{c: c, in: in, p: hxProducer(t, c, "p"), cons: cons}
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
			return func() { hxSend(t, s.p, s.in, 0, "x") },
				func(m tributary.Message[string]) { assert.Equal(t, "x", m.Value) }
		}},
		{name: "RetryByAnotherGoroutine", parts: 1, arrange: func(t *testing.T, s *setup) (func(), func(tributary.Message[string])) {
			hxSend(t, s.p, s.in, 0, "x")
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
			hxSend(t, s.p, s.in, 1, "x") // m2's; m2 never polls
			return func() { require.NoError(t, other.Close()) },
				func(m tributary.Message[string]) {
					assert.Equal(t, "x", m.Value)
					assert.Equal(t, int32(1), m.Partition)
				}
		}},
		{name: "SeekBack", parts: 1, arrange: func(t *testing.T, s *setup) (func(), func(tributary.Message[string])) {
			_, err := s.c.CreateGroup("in", "holder", engine.RoundRobin) // keeps the record retained
			require.NoError(t, err)
			hxSend(t, s.p, s.in, 0, "x")
			m := hxPollOne(t, s.cons)
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
					hxSend(t, s.p, s.in, 1, "new")
				}, func(m tributary.Message[string]) {
					assert.Equal(t, "new", m.Value)
					assert.Equal(t, int32(1), m.Partition)
				}
		}},
		{name: "AckTimeout", parts: 1, opts: []engine.Option{engine.WithAckTimeout(50 * time.Millisecond)}, arrange: func(t *testing.T, s *setup) (func(), func(tributary.Message[string])) {
			hxSend(t, s.p, s.in, 0, "x")
			first := hxPollOne(t, s.cons) // never acked
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
			res := hxPollAsync(ctx, s.cons, 1)
			hxBlocked(t, s.cons, before.Waits+1)
			blocked := s.cons.Stats()
			wake()
			m := hxPolledOne(t, res, tc.name)
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
		c := hxCluster(t, 1)
		in := hxTopic(t, c, "in", 1)
		p := hxProducer(t, c, "p")
		cons, err := tributary.NewConsumer(in, "g", "m1")
		require.NoError(t, err)
		hxSend(t, p, in, 0, "a")
		res := send(context.Background(), p, in)
		hxNotDone(t, res, 50*time.Millisecond, "Send into a full partition")
		m := hxPollOne(t, cons)
		require.NoError(t, cons.Ack(m)) // the only group: trims
		require.NoError(t, hxDone(t, res, hxGuard, "Send after a trimming ack"))
		assert.Equal(t, int64(2), hxLogEnd(t, c, "in", 0))
		require.NoError(t, c.Close())
	})
	t.Run("DeleteGroup", func(t *testing.T) {
		c := hxCluster(t, 1)
		in := hxTopic(t, c, "in", 1)
		p := hxProducer(t, c, "p")
		cons, err := tributary.NewConsumer(in, "g", "m1")
		require.NoError(t, err)
		_, err = c.CreateGroup("in", "idle", engine.RoundRobin)
		require.NoError(t, err)
		hxSend(t, p, in, 0, "a")
		m := hxPollOne(t, cons)
		require.NoError(t, cons.Ack(m)) // "idle" still holds the record
		res := send(context.Background(), p, in)
		hxNotDone(t, res, 50*time.Millisecond, "Send into a full partition")
		ok, err := c.DeleteGroup("in", "idle")
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, hxDone(t, res, hxGuard, "Send after DeleteGroup"))
		require.NoError(t, c.Close())
	})
	t.Run("ForwardSeek", func(t *testing.T) {
		c := hxCluster(t, 1)
		in := hxTopic(t, c, "in", 1)
		p := hxProducer(t, c, "p")
		_, err := c.CreateGroup("in", "idle", engine.RoundRobin)
		require.NoError(t, err)
		hxSend(t, p, in, 0, "a")
		res := send(context.Background(), p, in)
		hxNotDone(t, res, 50*time.Millisecond, "Send into a full partition")
		ok, err := c.Seek("in", "idle", 0, 1)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, hxDone(t, res, hxGuard, "Send after a forward Seek"))
		require.NoError(t, c.Close())
	})
	t.Run("NotOnPublishOrNonTrimmingAck", func(t *testing.T) {
		c := hxCluster(t, 1)
		in := hxTopic(t, c, "in", 2)
		p := hxProducer(t, c, "p")
		cons, err := tributary.NewConsumer(in, "g", "m1")
		require.NoError(t, err)
		_, err = c.CreateGroup("in", "idle", engine.RoundRobin)
		require.NoError(t, err)
		hxSend(t, p, in, 0, "a")
		res := send(context.Background(), p, in)
		hxNotDone(t, res, 30*time.Millisecond, "Send into a full partition")
		hxSend(t, p, in, 1, "other partition") // a publish
		hxNotDone(t, res, 100*time.Millisecond, "Send after a publish elsewhere")
		m := hxPollOne(t, cons)
		require.Equal(t, int32(0), m.Partition)
		require.NoError(t, cons.Ack(m)) // "idle" still at 0: nothing trimmed
		hxNotDone(t, res, 100*time.Millisecond, "Send after a non-trimming ack")
		assert.Equal(t, int64(1), hxLogEnd(t, c, "in", 0))
		ok, err := c.Seek("in", "idle", 0, 1) // now trims
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, hxDone(t, res, hxGuard, "Send after the trim"))
		require.NoError(t, c.Close())
	})
}

func TestWakeIdleConsumersDoNoWork(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 20
	}
	c := hxCluster(t, 10)
	in := hxTopic(t, c, "in", 8)
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
		hxBlocked(t, cons, 1)
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
