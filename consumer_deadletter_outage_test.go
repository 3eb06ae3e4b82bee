package tributary_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// dlqOutage is the in-memory backend seen through a network that fails one
// call: the first TryPublish or Publish to topic dlqDown, or the first Ack
// of offset ackDown on the source topic, returns an error wrapping
// ErrUnavailable without taking effect.
type dlqOutage struct {
	tributary.Backend
	dlqDown  string
	ackDown  int64 // -1: none
	pubFail  atomic.Bool
	ackFail  atomic.Bool
	failures atomic.Int64
}

var errInjectedOutage = fmt.Errorf("%w: injected outage", tributary.ErrUnavailable)

func (b *dlqOutage) OpenTopic(topic string) (tributary.BackendTopic, string, error) {
	bt, pt, err := b.Backend.OpenTopic(topic)
	if err != nil {
		return bt, pt, err
	}
	return dlqOutageTopic{BackendTopic: bt, b: b}, pt, nil
}

type dlqOutageTopic struct {
	tributary.BackendTopic
	b *dlqOutage
}

func (t dlqOutageTopic) down() bool {
	if t.Name() == t.b.dlqDown && !t.b.pubFail.Swap(true) {
		t.b.failures.Add(1)
		return true
	}
	return false
}

func (t dlqOutageTopic) TryPublish(p int32, m engine.Message) (int64, error) {
	if t.down() {
		return -1, errInjectedOutage
	}
	return t.BackendTopic.TryPublish(p, m)
}

func (t dlqOutageTopic) Publish(ctx context.Context, stop <-chan struct{}, p int32, m engine.Message) (int64, error) {
	if t.down() {
		return -1, errInjectedOutage
	}
	return t.BackendTopic.Publish(ctx, stop, p, m)
}

func (t dlqOutageTopic) Member(group, member string) (tributary.BackendMember, error) {
	m, err := t.BackendTopic.Member(group, member)
	if err != nil {
		return m, err
	}
	return dlqOutageMember{BackendMember: m, b: t.b}, nil
}

type dlqOutageMember struct {
	tributary.BackendMember
	b *dlqOutage
}

func (m dlqOutageMember) Ack(p int32, off int64) (bool, error) {
	if off == m.b.ackDown && !m.b.ackFail.Swap(true) {
		m.b.failures.Add(1)
		return false, errInjectedOutage
	}
	return m.BackendMember.Ack(p, off)
}

// TestRunRidesOutADeadLetterOutage: a one-call outage of the dead-letter
// publish, or of the ack that follows it, is waited out like any other of
// Run's calls — the poison record is dead-lettered once and committed, and
// Run keeps going — while ctx runs and while Run settles its last record
// within the stop grace.
func TestRunRidesOutADeadLetterOutage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dlqDown  bool  // the dead-letter publish fails once
		ackDown  int64 // this offset's ack fails once; -1 none
		shutdown bool  // the handler cancels Run's context (settled within the grace)
	}{
		{name: "publish", dlqDown: true, ackDown: -1},
		{name: "ack", ackDown: 0},
		{name: "publish-during-grace", dlqDown: true, ackDown: -1, shutdown: true},
		{name: "ack-during-grace", ackDown: 0, shutdown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, err := tributary.NewCluster(100)
			require.NoError(t, err)
			defer base.Close()
			fb := &dlqOutage{Backend: base.Backend(), ackDown: tc.ackDown}
			if tc.dlqDown {
				fb.dlqDown = "dlq"
			}
			c, err := tributary.NewClusterOn(fb)
			require.NoError(t, err)
			defer c.Close()
			tp, err := tributary.CreateTopic(c, "t", 1, tributary.String())
			require.NoError(t, err)
			_, err = c.CreateGroup("t", "g", engine.RoundRobin, tributary.WithDeadLetter("dlq", 1))
			require.NoError(t, err)
			pr, err := tributary.NewProducer[string](c, "p", tributary.Manual())
			require.NoError(t, err)
			_, err = pr.Send(context.Background(), tp, tributary.Message[string]{Value: "poison"})
			require.NoError(t, err)
			_, err = pr.Send(context.Background(), tp, tributary.Message[string]{Value: "fine"})
			require.NoError(t, err)

			cons, err := tributary.NewConsumer(tp, "g", "m", tributary.WithStopGrace(5*time.Second))
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- cons.Run(ctx, func(_ context.Context, m tributary.Message[string]) error {
					if m.Value == "poison" {
						if tc.shutdown {
							cancel()
						}
						return errors.New("poison")
					}
					return nil
				})
			}()
			want := int64(2)
			if tc.shutdown {
				want = 1 // Run ends after settling the poison record
				require.ErrorIs(t, <-done, context.Canceled)
			}
			require.Eventually(t, func() bool {
				d, err := c.Describe("t")
				return err == nil && d.Groups[0].Partitions[0].Committed == want
			}, 10*time.Second, 5*time.Millisecond, "the poison record was not dead-lettered and committed")
			cancel()
			if !tc.shutdown {
				require.ErrorIs(t, <-done, context.Canceled)
			}
			require.EqualValues(t, 1, fb.failures.Load(), "the outage was not injected")
			d, err := c.Describe("dlq")
			require.NoError(t, err)
			p := d.Partitions[0]
			require.EqualValues(t, 1, p.LogEndOffset-p.LogStartOffset, "dead letters")
			require.EqualValues(t, 1, cons.Stats().DeadLettered)
		})
	}
}
