package backendtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// blockingChecks are the waiting calls of BackendTopic.Publish and
// BackendMember.Poll: they wait for an event, not for time, and return on
// ctx and stop. Each bounds its waits by Wait (10 s).
func blockingChecks() []Check {
	return []Check{
		{"BlockingPublishWaitsForRoom", blockingPublishWaits},
		{"BlockingPublishContext", blockingPublishContext},
		{"BlockingPublishStop", blockingPublishStop},
		{"BlockingPublishWhileGroupsAck", blockingPublishWhileGroupsAck},
		{"BlockingPollWakesOnPublish", blockingPollPublish},
		{"BlockingPollWakesOnRetry", blockingPollRetry},
		{"BlockingPollContext", blockingPollContext},
		{"BlockingPollStop", blockingPollStop},
		{"BlockingPollMemberLeft", blockingPollLeft},
	}
}

// fullTopic is a backend whose topic t has one partition, full with one
// record "a" (capacity 1), and a group g with member m.
func fullTopic(t testing.TB, nb NewBackend) (*h, tributary.BackendTopic) {
	h := newH(t, nb, Config{Capacity: 1})
	tp := h.create("t", 1)
	h.join("t", "g", "m")
	h.pubs("t", 0, 0, "a")
	require.Equal(t, int64(-1), h.pub("t", 0, "full"))
	return h, tp
}

func blockingPublishWaits(t testing.TB, nb NewBackend) {
	h, tp := fullTopic(t, nb)
	ctx, cancel := bg()
	defer cancel()
	c := async(func() result {
		off, err := tp.Publish(ctx, nil, 0, engine.Message{Payload: "b"})
		return result{off: off, err: err}
	})
	notYet(t, c, "Publish to a full partition")
	require.Equal(t, []string{"0/0 a #1"}, h.poll("t", "g", "m", 1))
	notYet(t, c, "Publish before the ack")
	require.True(t, h.ack("t", "g", "m", 0, 0))
	r := await(t, c, "Publish after an ack made room")
	require.NoError(t, r.err)
	require.Equal(t, int64(1), r.off)
	require.Equal(t, []string{"0/1 b #1"}, h.poll("t", "g", "m", 1))
	// With room, Publish returns at once.
	require.True(t, h.ack("t", "g", "m", 0, 1))
	off, err := tp.Publish(ctx, nil, 0, engine.Message{Payload: "c"})
	require.NoError(t, err)
	require.Equal(t, int64(2), off)
}

func blockingPublishContext(t testing.TB, nb NewBackend) {
	h, tp := fullTopic(t, nb)
	before := h.state()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := async(func() result {
		off, err := tp.Publish(ctx, nil, 0, engine.Message{Payload: "b"})
		return result{off: off, err: err}
	})
	notYet(t, c, "Publish to a full partition")
	cancel()
	r := await(t, c, "Publish after its context was cancelled")
	require.ErrorIs(t, r.err, context.Canceled)
	h.unchanged(before, "a cancelled Publish")
	// A context that ends by itself.
	short, cancelShort := context.WithTimeout(context.Background(), settle)
	defer cancelShort()
	_, err := tp.Publish(short, nil, 0, engine.Message{Payload: "b"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	h.unchanged(before, "a timed-out Publish")
}

func blockingPublishStop(t testing.TB, nb NewBackend) {
	h, tp := fullTopic(t, nb)
	before := h.state()
	ctx, cancel := bg()
	defer cancel()
	stop := make(chan struct{})
	c := async(func() result {
		off, err := tp.Publish(ctx, stop, 0, engine.Message{Payload: "b"})
		return result{off: off, err: err}
	})
	notYet(t, c, "Publish to a full partition")
	close(stop)
	r := await(t, c, "Publish after stop was closed")
	require.ErrorIs(t, r.err, tributary.ErrClosed)
	h.unchanged(before, "a stopped Publish")
}

// idleMember is a backend whose topic t has two empty partitions and a
// group g with member m.
func idleMember(t testing.TB, nb NewBackend) (*h, tributary.BackendMember) {
	h := newTopic(t, nb, Config{Capacity: 4}, 2)
	h.join("t", "g", "m")
	return h, h.m("t", "g", "m")
}

func blockingPollPublish(t testing.TB, nb NewBackend) {
	h, m := idleMember(t, nb)
	ctx, cancel := bg()
	defer cancel()
	mark := engine.Record{Topic: "mark"}
	c := waitingPoll(ctx, t, m, nil, []engine.Record{mark}, "nothing to deliver")
	h.pubs("t", 1, 0, "x")
	r := await(t, c, "Poll after a publish")
	require.NoError(t, r.err)
	require.NotEmpty(t, r.recs)
	require.Equal(t, mark, r.recs[0], "dst is kept")
	require.Equal(t, []string{"1/0 x #1"}, h.seen("t", r.recs[1:]))
	// With something to deliver, Poll returns at once.
	h.pubs("t", 0, 0, "y")
	recs, err := m.Poll(ctx, nil, nil, 4)
	require.NoError(t, err)
	require.Equal(t, []string{"0/0 y #1"}, h.seen("t", recs))
}

func blockingPollRetry(t testing.TB, nb NewBackend) {
	h, m := idleMember(t, nb)
	h.pubs("t", 0, 0, "x")
	require.Equal(t, []string{"0/0 x #1"}, h.poll("t", "g", "m", 4))
	ctx, cancel := bg()
	defer cancel()
	c := waitingPoll(ctx, t, m, nil, nil, "everything in flight")
	require.True(t, h.retry("t", "g", "m", 0, 0))
	r := await(t, c, "Poll after a retry")
	require.NoError(t, r.err)
	require.Equal(t, []string{"0/0 x #2"}, h.seen("t", r.recs))
}

func blockingPollContext(t testing.TB, nb NewBackend) {
	h, m := idleMember(t, nb)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := waitingPoll(ctx, t, m, nil, nil, "nothing to deliver")
	cancel()
	r := await(t, c, "Poll after its context was cancelled")
	require.ErrorIs(t, r.err, context.Canceled)
	require.Empty(t, r.recs)
	short, cancelShort := context.WithTimeout(context.Background(), settle)
	defer cancelShort()
	_, err := m.Poll(short, nil, nil, 4)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// Nothing was reserved by the interrupted polls.
	h.pubs("t", 0, 0, "x")
	require.Equal(t, []string{"0/0 x #1"}, h.poll("t", "g", "m", 4))
}

func blockingPollStop(t testing.TB, nb NewBackend) {
	_, m := idleMember(t, nb)
	ctx, cancel := bg()
	defer cancel()
	stop := make(chan struct{})
	c := waitingPoll(ctx, t, m, stop, nil, "nothing to deliver")
	close(stop)
	r := await(t, c, "Poll after stop was closed")
	require.ErrorIs(t, r.err, tributary.ErrClosed)
}

// blockingPollLeft: a waiting Poll of a member that leaves its group
// returns ErrClosed, and so does a Poll of a member not in its group.
func blockingPollLeft(t testing.TB, nb NewBackend) {
	h, m := idleMember(t, nb)
	ctx, cancel := bg()
	defer cancel()
	c := waitingPoll(ctx, t, m, nil, nil, "nothing to deliver")
	require.True(t, h.leave("t", "g", "m"))
	r := await(t, c, "Poll after the member left")
	require.ErrorIs(t, r.err, tributary.ErrClosed)
	_, err := m.Poll(ctx, nil, nil, 4)
	require.ErrorIs(t, err, tributary.ErrClosed, "Poll of a member not in its group")
}

// waitingPoll starts m.Poll(ctx, stop, dst, 4) in a goroutine and requires
// it to be waiting still after settle, for why ("nothing to deliver"); it
// returns the channel its result arrives on.
func waitingPoll(ctx context.Context, t testing.TB, m tributary.BackendMember, stop <-chan struct{}, dst []engine.Record, why string) <-chan result {
	t.Helper()
	c := async(func() result {
		recs, err := m.Poll(ctx, stop, dst, 4)
		return result{recs: recs, err: err}
	})
	notYet(t, c, "Poll with "+why)
	return c
}
