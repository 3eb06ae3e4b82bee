package tributarywm_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// Member liveness through the subscriber (SPEC rule 24): the session
// timeout is the cluster's, and a subscription heartbeats while it runs.
// The broker runs on a testclock.Clock, moved only after every subscription
// was seen heartbeating at its reading, so no expiry depends on the
// machine's speed.

const sessionTimeout = 300 * time.Millisecond // on the fake clock; heartbeats every 100 ms of real time

// awaitSeen waits until every member of group has been seen at the
// clock's reading (a heartbeat since the clock moved), and requires that
// there are n of them.
func awaitSeen(t *testing.T, c *tributary.Cluster, clock *testclock.Clock, topic, group string, n int) {
	t.Helper()
	now := clock.Now()
	require.Eventually(t, func() bool {
		d, err := c.Describe(topic)
		require.NoError(t, err)
		for _, g := range d.Groups {
			if g.Group != group {
				continue
			}
			require.Len(t, g.Members, n, "members of %s", group)
			return !slices.ContainsFunc(g.LastSeen, func(seen time.Time) bool { return seen.Before(now) })
		}
		return false
	}, wait, time.Millisecond, "every member of %s heartbeats at %v", group, now)
}

// TestSlowHandlerKeepsItsSubscription: a handler that holds its message
// for three session timeouts keeps its subscription in the group (the
// subscription heartbeats meanwhile); the group's other subscription gets
// nothing, and the message is acked once.
func TestSlowHandlerKeepsItsSubscription(t *testing.T) {
	clock := testclock.At(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	c := newCluster(t, 100, engine.WithClock(clock.Now), engine.WithSessionTimeout(sessionTimeout))
	pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 1})
	cfg := tributarywm.SubscriberConfig{ConsumerGroup: "g", SessionTimeout: sessionTimeout}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chans []<-chan *message.Message
	for range 2 {
		ch, err := newSubscriber(t, c, cfg).Subscribe(ctx, "t")
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	require.NoError(t, pub.Publish("t", message.NewMessage("m1", []byte("slow"))))
	var m *message.Message
	var other <-chan *message.Message
	select {
	case m = <-chans[0]:
		other = chans[1]
	case m = <-chans[1]:
		other = chans[0]
	case <-time.After(wait):
		t.Fatal("no message")
	}
	for range 6 { // three session timeouts while the handler holds m
		clock.Advance(sessionTimeout / 2)
		awaitSeen(t, c, clock, "t", "g", 2)
	}
	require.True(t, m.Ack())
	require.Eventually(t, func() bool {
		d, err := c.Describe("t")
		require.NoError(t, err)
		return d.Groups[0].Partitions[0].Committed == 1
	}, wait, time.Millisecond, "the ack committed")
	d, err := c.Describe("t")
	require.NoError(t, err)
	require.Len(t, d.Groups[0].Members, 2, "neither subscription expired")
	quiet(t, other, 50*time.Millisecond)
}

// TestSubscriberSessionTimeout: SubscriberConfig.SessionTimeout must be 0
// or the cluster's; another is refused, naming both.
func TestSubscriberSessionTimeout(t *testing.T) {
	c := newCluster(t, 10) // NewCluster's default
	for _, d := range []time.Duration{0, tributary.DefaultSessionTimeout} {
		_, err := tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{SessionTimeout: d}, nil)
		require.NoError(t, err, "SessionTimeout %v", d)
	}
	_, err := tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{SessionTimeout: 10 * time.Second}, nil)
	require.ErrorIs(t, err, tributary.ErrInvalidArgument)
	require.ErrorContains(t, err, "10s")
	require.ErrorContains(t, err, "45s")
}
