package tributary_test

// A closed consumer acts no more: every call that would change its group
// returns ErrClosed and changes nothing, even once a new consumer of the
// same name has joined the same group (the old handle names the same
// member). A consumer closed while NewConsumer is still joining leaves no
// member behind.

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
)

func TestClosedConsumerSeekChangesNothing(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	for _, v := range []string{"a", "b", "c"} {
		sendOK(t, pr, tp, tributary.Message[string]{Value: v})
	}
	testConsumer(t, tp, "g", "keeper") // the group keeps a member
	old := testConsumer(t, tp, "g", "old")
	checkErr(t, "Close", old.Close(), nil)
	before := groupDesc(t, c, "t", "g")

	checkErr(t, "Seek(0, 2) of a closed consumer", old.Seek(0, 2), tributary.ErrClosed)
	if after := groupDesc(t, c, "t", "g"); after.Partitions[0] != before.Partitions[0] {
		t.Fatalf("a closed consumer's Seek moved its group: %+v, was %+v", after.Partitions[0], before.Partitions[0])
	}
}

func TestClosedConsumerAckAndRetryAreErrClosed(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "a"})
	cons := testConsumer(t, tp, "g", "c1")
	m := pollOK(t, cons, 1)[0]
	checkErr(t, "Close", cons.Close(), nil)
	for name, call := range map[string]func(tributary.Message[string]) error{"Ack": cons.Ack, "Retry": cons.Retry} {
		err := call(m)
		checkErr(t, name+" of a closed consumer", err, tributary.ErrClosed)
		checkErr(t, name+" of a closed consumer", err, tributary.ErrNotInFlight)
	}
}

// The old handle of a consumer that closed, once a new consumer of the
// same name is in its group: Run returns at once without handling
// anything, Seek and Assignment speak for nobody, Poll is ErrClosed, and
// the successor's delivery is untouched.
func TestClosedConsumerDoesNotActForItsSuccessor(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "a"})
	sendOK(t, pr, tp, tributary.Message[string]{Value: "b"})
	old := testConsumer(t, tp, "g", "c1")
	checkErr(t, "Close", old.Close(), nil)
	successor := testConsumer(t, tp, "g", "c1")

	if got := old.Assignment(); len(got) != 0 {
		t.Errorf("the closed consumer's Assignment is %v, want none (the successor owns them)", got)
	}
	checkErr(t, "Seek of the closed consumer", old.Seek(0, 1), tributary.ErrClosed)
	_, err := old.TryPoll(1)
	checkErr(t, "TryPoll of the closed consumer", err, tributary.ErrClosed)
	handled := 0
	err = old.Run(guardCtx(t), func(context.Context, tributary.Message[string]) error {
		handled++
		return nil
	})
	checkErr(t, "Run of the closed consumer", err, nil)
	if handled != 0 {
		t.Fatalf("the closed consumer's Run handled %d records of its successor", handled)
	}
	g := groupDesc(t, c, "t", "g")
	if gp := g.Partitions[0]; gp.Committed != 0 || gp.InFlight {
		t.Fatalf("group partition %+v: want committed 0, nothing in flight", gp)
	}
	if got := successor.Assignment(); len(got) != 1 {
		t.Fatalf("the successor owns %v, want partition 0", got)
	}
	if m := pollOK(t, successor, 1)[0]; m.Value != "a" || m.Attempt != 1 {
		t.Fatalf("the successor got %q attempt %d, want \"a\" attempt 1", m.Value, m.Attempt)
	}
}

// A closed consumer's Ack must not ack a delivery of a new consumer that
// took the same name (an abandoned handler acking late, say): Ack documents
// ErrNotInFlight when "the consumer left".
func TestStaleAckAfterCloseAndRejoin(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "x"})
	old, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	m := pollOne(t, old)
	require.NoError(t, old.Close())
	fresh, err := tributary.NewConsumer(in, "g", "m1")
	require.NoError(t, err)
	m2 := pollOne(t, fresh)
	require.Equal(t, m.ID, m2.ID)

	assert.ErrorIs(t, old.Ack(m), tributary.ErrNotInFlight, "a closed consumer's Ack")
	assert.NoError(t, fresh.Ack(m2), "the new consumer's delivery is still its own")
	require.NoError(t, fresh.Close())
}

// A consumer closed while NewConsumer is between registering and joining
// must not stay in its group: a closed consumer that owns partitions blocks
// them (and retention) for ever.
func TestCloseRacingNewConsumerLeavesNoMember(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 1, tributary.String())
	for i := range 3000 {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c.CloseConsumer("z") == nil {
					return
				}
			}
		}()
		cons, err := tributary.NewConsumer(in, "g", "z")
		close(stop)
		wg.Wait()
		if err != nil {
			// Closed while joining: NewConsumer says so and leaves.
			require.ErrorIs(t, err, tributary.ErrClosed)
		} else {
			require.NoError(t, cons.Close())
		}
		if g := groupDesc(t, c, "in", "g"); len(g.Members) != 0 {
			t.Fatalf("round %d: closed consumer still a member of its group: %v (owner of partition 0: %q)", i, g.Members, g.Partitions[0].Owner)
		}
	}
}
