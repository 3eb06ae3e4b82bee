package tributary_test

// Run over a backend whose network fails for a while (outageBackend): a
// delayed Retry and Run's polls and acks ride out the outage; every message
// is handled, none twice.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// outageBackend is the in-memory backend seen through a network that fails:
// while pollDown (ackDown) is set, every Poll (Ack) fails with an error
// wrapping ErrUnavailable; loseAck makes the next Ack take effect and then
// report ErrUnavailable (its reply lost); retryDown fails every Retry.
type outageBackend struct {
	tributary.Backend
	pollDown, ackDown, retryDown atomic.Bool
	loseAck                      atomic.Bool
	polls, acks, retries         atomic.Int64 // failed polls, acks and retries
	lost                         atomic.Int64 // acks made whose reply was lost (loseAck)
}

func (b *outageBackend) OpenTopic(topic string) (tributary.BackendTopic, string, error) {
	t, pt, err := b.Backend.OpenTopic(topic)
	if err != nil {
		return nil, pt, err
	}
	return outageTopic{t, b}, pt, nil
}

type outageTopic struct {
	tributary.BackendTopic
	b *outageBackend
}

func (t outageTopic) Member(group, member string) (tributary.BackendMember, error) {
	m, err := t.BackendTopic.Member(group, member)
	if err != nil {
		return nil, err
	}
	return outageMember{m, t.b}, nil
}

type outageMember struct {
	tributary.BackendMember
	b *outageBackend
}

var errDown = fmt.Errorf("test network: %w", tributary.ErrUnavailable)

func (m outageMember) Poll(ctx context.Context, stop <-chan struct{}, dst []engine.Record, max int32) ([]engine.Record, error) {
	if m.b.pollDown.Load() {
		m.b.polls.Add(1)
		return dst, errDown
	}
	return m.BackendMember.Poll(ctx, stop, dst, max)
}

func (m outageMember) Ack(p int32, off int64) (bool, error) {
	if m.b.ackDown.Load() {
		m.b.acks.Add(1)
		return false, errDown
	}
	if m.b.loseAck.CompareAndSwap(true, false) {
		m.b.lost.Add(1)
		_, _ = m.BackendMember.Ack(p, off)
		return false, errDown
	}
	return m.BackendMember.Ack(p, off)
}

func (m outageMember) Retry(p int32, off int64) (bool, error) {
	if m.b.retryDown.Load() {
		m.b.retries.Add(1)
		return false, errDown
	}
	return m.BackendMember.Retry(p, off)
}

// Run's delayed Retry of a failed record rides out an outage: it is tried
// again until the backend answers, and the record is redelivered and
// acked. A Retry given up at its first ErrUnavailable would leave the
// record in flight to Run for ever (no ack timeout here).
func TestRunRetryRidesOutAnOutage(t *testing.T) {
	inner, err := tributary.NewCluster(10)
	require.NoError(t, err)
	defer inner.Close()
	b := &outageBackend{Backend: inner.Backend()}
	c, err := tributary.NewClusterOn(b)
	require.NoError(t, err)
	defer c.Close()
	tp, err := tributary.CreateTopic(c, "orders", 1, tributary.JSON[int]())
	require.NoError(t, err)
	p, err := tributary.NewProducer[int](c, "p", tributary.Manual())
	require.NoError(t, err)
	_, err = p.TrySend(tp, tributary.Message[int]{Value: 1})
	require.NoError(t, err)
	cons, err := tributary.NewConsumer(tp, "g", "c1", tributary.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	attempts := make(chan int32, 2)
	err = cons.Run(ctx, func(_ context.Context, m tributary.Message[int]) error {
		attempts <- m.Attempt
		if m.Attempt == 1 { // its Retry fails for 300 ms
			b.retryDown.Store(true)
			time.AfterFunc(300*time.Millisecond, func() { b.retryDown.Store(false) })
			return fmt.Errorf("attempt %d fails", m.Attempt)
		}
		cancel()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, int32(1), <-attempts)
	require.Equal(t, int32(2), <-attempts, "redelivered after the outage")
	require.Positive(t, b.retries.Load(), "no Retry failed: the outage was not exercised")
	d, err := c.Describe("orders")
	require.NoError(t, err)
	require.Equal(t, int64(1), d.Groups[0].Partitions[0].Committed, "acked")
}

// TestRunRidesOutAnOutage: Consumer.Run keeps going through a backend
// outage (polls and acks failing with ErrUnavailable) and an ack whose
// reply was lost, handling every message, none twice but the one whose ack
// reply was lost would be redelivered at most, and the retried ack then
// returns false, so none is handled twice here. Without the waits, Run
// returns the error at the first failed poll.
func TestRunRidesOutAnOutage(t *testing.T) {
	inner, err := tributary.NewCluster(100)
	require.NoError(t, err)
	defer inner.Close()
	b := &outageBackend{Backend: inner.Backend()}
	c, err := tributary.NewClusterOn(b)
	require.NoError(t, err)
	defer c.Close()
	tp, err := tributary.CreateTopic(c, "orders", 1, tributary.JSON[int]())
	require.NoError(t, err)
	p, err := tributary.NewProducer[int](c, "p", tributary.Manual())
	require.NoError(t, err)
	cons, err := tributary.NewConsumer(tp, "g", "c1")
	require.NoError(t, err)

	const n = 40
	var (
		mu   sync.Mutex
		seen = map[int]int{}
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(ctx, func(_ context.Context, m tributary.Message[int]) error {
			mu.Lock()
			defer mu.Unlock()
			seen[m.Value]++
			switch m.Value {
			case 10: // polls fail for 300 ms from this message's ack on
				b.pollDown.Store(true)
				time.AfterFunc(300*time.Millisecond, func() { b.pollDown.Store(false) })
			case 20:
				b.loseAck.Store(true)
			case 30: // this message's ack and the next fail for 300 ms
				b.ackDown.Store(true)
				time.AfterFunc(300*time.Millisecond, func() { b.ackDown.Store(false) })
			}
			if len(seen) == n {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			return nil
		})
	}()
	for i := range n {
		_, err := p.Send(ctx, tp, tributary.Message[int]{Value: i})
		require.NoError(t, err)
	}
	require.ErrorIs(t, <-done, context.Canceled)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, n, "messages handled")
	for v, k := range seen {
		require.Equal(t, 1, k, "message %d handled %d times", v, k)
	}
	require.Positive(t, b.polls.Load(), "no poll failed: the poll outage was not exercised")
	require.Positive(t, b.acks.Load(), "no ack failed: the ack outage was not exercised")
	require.False(t, b.loseAck.Load(), "the lost ack reply was not exercised")
}
