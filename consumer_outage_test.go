package tributary_test

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
// report ErrUnavailable (its reply lost).
type outageBackend struct {
	tributary.Backend
	pollDown, ackDown atomic.Bool
	loseAck           atomic.Bool
	polls, acks       atomic.Int64 // failed polls and acks
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
		_, _ = m.BackendMember.Ack(p, off)
		return false, errDown
	}
	return m.BackendMember.Ack(p, off)
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
