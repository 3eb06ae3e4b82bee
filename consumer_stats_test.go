package tributary_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
)

// Consumer.Stats: the poll counters come from a backend's member that
// counts them and stay 0 on one that does not; the library's own counters
// count on every backend; Stats may be read while Run or Poll runs (run
// with -race) and after Close, which freezes every counter.

// uncountedBackend is the in-process backend with members that do not
// count their polls: each is seen only through BackendMember.
type uncountedBackend struct{ tributary.Backend }

func (b uncountedBackend) OpenTopic(topic string) (tributary.BackendTopic, string, error) {
	t, pt, err := b.Backend.OpenTopic(topic)
	if err != nil {
		return nil, pt, err
	}
	return uncountedTopic{t}, pt, nil
}

type uncountedTopic struct{ tributary.BackendTopic }

func (t uncountedTopic) Member(group, member string) (tributary.BackendMember, error) {
	m, err := t.BackendTopic.Member(group, member)
	if err != nil {
		return nil, err
	}
	return struct{ tributary.BackendMember }{m}, nil
}

// statsWhileRunning runs cons.Run over n records sent by p to in, with
// a Poll of another consumer of the cluster and Stats of both read on
// other goroutines all along; it returns once Run and the Poll have
// returned, both consumers closed.
func statsWhileRunning(t *testing.T, c *tributary.Cluster, in *tributary.Topic[string], n int) (run, polled *tributary.Consumer[string]) {
	t.Helper()
	run = testConsumer(t, in, "g", "run")
	polled = testConsumer(t, in, "other", "poll")
	p := testProducer[string](t, c, "p", tributary.Manual())
	var handled sync.WaitGroup
	handled.Add(n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, run, func(context.Context, tributary.Message[string]) error {
		handled.Done()
		return nil
	})
	pollDone := goResult(func() ([]tributary.Message[string], error) {
		var all []tributary.Message[string]
		for len(all) < n {
			ms, err := polled.Poll(ctx, 4)
			if err != nil {
				return all, err
			}
			for _, m := range ms {
				if err := polled.Ack(m); err != nil {
					return all, err
				}
			}
			all = append(all, ms...)
		}
		return all, nil
	})
	readers := make(chan struct{})
	var wg sync.WaitGroup
	for _, cons := range []*tributary.Consumer[string]{run, polled} {
		wg.Go(func() {
			for {
				select {
				case <-readers:
					return
				default:
					_ = cons.Stats()
				}
			}
		})
	}
	for i := range n {
		if _, err := p.Send(guardCtx(t), in, tributary.Message[string]{Partition: int32(i % 2), Value: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	handled.Wait()
	r := awaitResult(t, "the polling consumer", pollDone)
	require.NoError(t, r.err)
	require.Len(t, r.v, n)
	require.NoError(t, run.Close())
	require.NoError(t, polled.Close())
	require.NoError(t, awaitDone(t, done, guard, "Run"))
	close(readers)
	wg.Wait()
	return run, polled
}

func TestStatsCountPollsOfACountingBackend(t *testing.T) {
	const n = 40
	c := testCluster(t, 4)
	in := testTopic(t, c, "in", 2, tributary.String())
	run, polled := statsWhileRunning(t, c, in, n)
	s := run.Stats()
	assert.Equal(t, int64(n), s.Handled)
	assert.Equal(t, int64(n), s.Acked)
	assert.Positive(t, s.Polls)
	assert.Positive(t, polled.Stats().Polls)
	assert.Equal(t, s, run.Stats(), "Stats after Close")
	_, err := run.TryPoll(1)
	assert.ErrorIs(t, err, tributary.ErrClosed)
	assert.Equal(t, s, run.Stats(), "Stats after a TryPoll of the closed consumer")
}

func TestStatsPollCountersZeroOnABackendWithout(t *testing.T) {
	const n = 40
	inner := testCluster(t, 4)
	c, err := tributary.NewClusterOn(uncountedBackend{inner.Backend()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	in := testTopic(t, c, "in", 2, tributary.String())
	run, polled := statsWhileRunning(t, c, in, n)
	for _, cons := range []*tributary.Consumer[string]{run, polled} {
		s := cons.Stats()
		assert.Zero(t, s.Polls, cons.Name())
		assert.Zero(t, s.Waits, cons.Name())
		assert.Zero(t, s.Wakeups, cons.Name())
	}
	s := run.Stats()
	assert.Equal(t, int64(n), s.Handled)
	assert.Equal(t, int64(n), s.Acked)
	assert.Equal(t, s, run.Stats(), "Stats after Close")
}
