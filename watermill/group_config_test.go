package tributarywm_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// A subscription follows its consumer group's configuration (the
// library's GroupConfig): the dead-letter policy and the start of a group
// the subscriber creates come from SubscriberConfig; a group that exists
// keeps its own, whoever created it.

// nackTimes nacks the message with UUID uuid each time it comes, up to
// n times, waiting for each settle.
func nackTimes(t *testing.T, ch <-chan *message.Message, uuid string, n int) {
	t.Helper()
	for attempt := 1; attempt <= n; attempt++ {
		m := receive(t, ch)
		require.Equal(t, uuid, m.UUID, "attempt %d", attempt)
		d, _ := tributarywm.DeliveryFromContext(m.Context())
		require.Equal(t, int32(attempt), d.Attempt)
		m.Nack()
		select {
		case <-m.Context().Done():
		case <-time.After(wait):
			t.Fatal("message context not cancelled after Nack")
		}
	}
}

// deadLetters returns the payloads topic dlq retains, partition by
// partition.
func deadLetters(t *testing.T, c *tributary.Cluster, dlq string) []string {
	t.Helper()
	tp, err := tributary.OpenTopic(c, dlq, tributary.Bytes())
	require.NoError(t, err)
	s, err := tp.Snapshot()
	require.NoError(t, err)
	var out []string
	for _, ms := range s.Messages {
		for _, m := range ms {
			out = append(out, string(m.Value))
		}
	}
	return out
}

// TestNackOnTheLastAttemptDeadLetters: with a DeadLetterTopic, a message
// nacked on its MaxAttempts-th delivery goes to the dead-letter topic with
// the tributary-dlq-* headers and is acked; the partition moves on.
func TestNackOnTheLastAttemptDeadLetters(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{NackResendSleep: tributarywm.NoSleep, DeadLetterTopic: "t-dlq", MaxAttempts: 2})
	require.NoError(t, pub.Publish("t", message.NewMessage("u1", []byte("poison")), message.NewMessage("u2", []byte("fine"))))
	ch, err := sub.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	nackTimes(t, ch, "u1", 2)
	m := receive(t, ch)
	assert.Equal(t, "u2", m.UUID, "the partition moves on after the dead letter")
	m.Ack()
	assert.Equal(t, []string{"poison"}, deadLetters(t, c, "t-dlq"))
	dlq, err := tributary.OpenTopic(c, "t-dlq", tributary.Bytes())
	require.NoError(t, err)
	s, err := dlq.Snapshot()
	require.NoError(t, err)
	got := map[string]string{}
	for _, h := range s.Messages[0][0].Headers {
		got[h.Key] = h.Value
	}
	assert.Equal(t, "t", got[tributary.HeaderDeadLetterTopic])
	assert.Equal(t, tributarywm.DefaultConsumerGroup, got[tributary.HeaderDeadLetterGroup])
	assert.Equal(t, "2", got[tributary.HeaderDeadLetterAttempts])
	cfg, ok, err := c.GroupConfig("t", tributarywm.DefaultConsumerGroup)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, tributary.GroupConfig{DeadLetter: "t-dlq", MaxAttempts: 2}, cfg)
}

// TestSubscriptionFollowsItsGroupsPolicy: a subscriber whose config names
// no dead-letter topic, joining a group created with one (by the library,
// or by another subscriber), dead-letters on the group's last attempt.
func TestSubscriptionFollowsItsGroupsPolicy(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	require.NoError(t, pub.Publish("t", message.NewMessage("u1", []byte("poison"))))
	ok, err := c.CreateGroup("t", "billing", engine.RoundRobin, tributary.WithDeadLetter("t-dlq", 3))
	require.NoError(t, err)
	require.True(t, ok)
	// Its own config says otherwise: the existing group's policy wins.
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "billing", NackResendSleep: tributarywm.NoSleep, DeadLetterTopic: "other", MaxAttempts: 1})
	ch, err := sub.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	nackTimes(t, ch, "u1", 3)
	quiet(t, ch, 100*time.Millisecond)
	assert.Equal(t, []string{"poison"}, deadLetters(t, c, "t-dlq"))
	_, err = tributary.OpenTopic(c, "other", tributary.Bytes())
	assert.ErrorIs(t, err, tributary.ErrUnknownTopic, "the subscriber's own dead-letter topic is not the group's")
}

// TestStartLatestSkipsWhatWasPublished: a group the subscriber creates
// with Start engine.StartLatest receives only what is published after.
func TestStartLatestSkipsWhatWasPublished(t *testing.T) {
	c := newCluster(t, 10)
	pub := newPublisher(t, c, tributarywm.PublisherConfig{})
	require.NoError(t, pub.Publish("t", message.NewMessage("old", nil)))
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "late", Start: engine.StartLatest})
	require.NoError(t, sub.SubscribeInitialize("t"))
	require.NoError(t, pub.Publish("t", message.NewMessage("new", nil)))
	ch, err := sub.Subscribe(context.Background(), "t")
	require.NoError(t, err)
	m := receive(t, ch)
	assert.Equal(t, "new", m.UUID)
	m.Ack()
	quiet(t, ch, 100*time.Millisecond)
}

func TestGroupConfigErrors(t *testing.T) {
	c := newCluster(t, 10)
	for _, cfg := range []tributarywm.SubscriberConfig{
		{MaxAttempts: 3},
		{DeadLetterTopic: "bad name"},
		{DeadLetterTopic: "d", MaxAttempts: 1001},
		{DeadLetterTopic: "d", MaxAttempts: -1},
		{Start: 2},
	} {
		_, err := tributarywm.NewSubscriber(c, cfg, nil)
		assert.ErrorIs(t, err, tributary.ErrInvalidArgument, "%+v", cfg)
	}
	// The dead-letter topic may not be the subscribed topic: refused at
	// Subscribe, which creates the group.
	sub := newSubscriber(t, c, tributarywm.SubscriberConfig{DeadLetterTopic: "t"})
	_, err := sub.Subscribe(context.Background(), "t")
	assert.ErrorIs(t, err, tributary.ErrInvalidArgument)
}
