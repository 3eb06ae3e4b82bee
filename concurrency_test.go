package tributary_test

// Every call of the library at once: producers, consumers, Run, Ack and
// Retry, Seek, assignors, Describe and Close racing each other under the
// race detector, checked by no record acked twice by one group, no lag or
// committed offset outside the log and no member left once every consumer
// is closed; and a stalled group never delays another group of the same
// topic.

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

func TestRaces(t *testing.T) {
	const parts = 4
	c := testCluster(t, 20)
	in := testTopic(t, c, "in", parts, tributary.String())
	_, err := c.CreateGroup("in", "ga", engine.RoundRobin)
	require.NoError(t, err)
	p, err := tributary.NewProducer[string](c, "p", tributary.RoundRobin())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var acked sync.Map // "group/partition/offset" → true; group ga is never sought
	var doubleAcks, sent atomic.Int64
	go1 := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("panic: %v", r)
				}
			}()
			f()
		}()
	}
	for i := range 3 { // producers
		go1(func() {
			for ctx.Err() == nil {
				var err error
				if i == 0 {
					_, err = p.TrySend(in, tributary.Message[string]{Value: "t"})
				} else {
					sctx, scancel := context.WithTimeout(ctx, 5*time.Millisecond)
					_, err = p.Send(sctx, in, tributary.Message[string]{Value: "s"})
					scancel()
				}
				if err == nil {
					sent.Add(1)
				} else if !errors.Is(err, tributary.ErrPartitionFull) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					t.Errorf("send: %v", err)
				}
			}
		})
	}
	consume := func(group string, name string, seek bool) {
		go1(func() {
			for ctx.Err() == nil {
				cons, err := tributary.NewConsumer(in, group, name)
				if err != nil {
					t.Errorf("NewConsumer %s: %v", name, err)
					return
				}
				for j := 0; j < 5 && ctx.Err() == nil; j++ {
					pctx, pcancel := context.WithTimeout(ctx, 5*time.Millisecond)
					ms, err := cons.Poll(pctx, int32(1+rand.IntN(4)))
					pcancel()
					if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						t.Errorf("Poll: %v", err)
					}
					for _, m := range ms {
						if rand.IntN(5) == 0 {
							cons.Retry(m) //nolint:errcheck // a rebalance may have cancelled it
							continue
						}
						if cons.Ack(m) == nil {
							key := group + "/" + m.ID
							if _, dup := acked.LoadOrStore(key, true); dup && !seek {
								doubleAcks.Add(1)
								t.Errorf("%s acked twice", key)
							}
						}
					}
					if seek && len(ms) > 0 {
						m := ms[0]
						err := cons.Seek(m.Partition, max(0, m.Offset-int64(rand.IntN(3))))
						if err != nil && !errors.Is(err, tributary.ErrOffsetOutOfRange) {
							t.Errorf("Seek: %v", err)
						}
					}
				}
				if err := cons.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
		})
	}
	for i := range 3 {
		consume("ga", "a"+strconv.Itoa(i), false)
	}
	consume("gb", "b0", true)
	consume("gb", "b1", true)
	go1(func() { // assignors
		as := []engine.Assignor{engine.RoundRobin, engine.Range, engine.Sticky}
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := c.SetAssignor("in", "ga", as[i%3]); err != nil {
				t.Errorf("SetAssignor: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	})
	go1(func() { // a Run that fails, panics and succeeds, closed from outside now and then
		for ctx.Err() == nil {
			cons, err := tributary.NewConsumer(in, "gc", "runner", tributary.WithBackoff(time.Millisecond, time.Millisecond), tributary.WithDeadLetter("in-dlq", 2))
			if errors.Is(err, tributary.ErrClosed) {
				continue // closed from outside while joining
			}
			if err != nil {
				t.Errorf("NewConsumer runner: %v", err)
				return
			}
			rctx, rcancel := context.WithTimeout(ctx, 30*time.Millisecond)
			err = cons.Run(rctx, func(_ context.Context, m tributary.Message[string]) error {
				switch rand.IntN(10) {
				case 0:
					panic("random panic")
				case 1:
					return errors.New("random failure")
				case 2:
					go c.CloseConsumer("runner") //nolint:errcheck // racing Close
				}
				return nil
			})
			rcancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		}
	})
	go1(func() { // the dead-letter topic is drained so Run never waits for ever
		for ctx.Err() == nil {
			dlq, err := tributary.OpenTopic(c, "in-dlq", tributary.String())
			if err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
			dc, err := tributary.NewConsumer(dlq, "drain", "d0")
			if err != nil {
				t.Errorf("drain: %v", err)
				return
			}
			for ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Millisecond)
				ms, _ := dc.Poll(pctx, 8)
				pcancel()
				for _, m := range ms {
					dc.Ack(m) //nolint:errcheck
				}
			}
			dc.Close()
		}
	})
	go1(func() { // Describe: lag never negative, committed within the log
		for ctx.Err() == nil {
			d, err := c.Describe("in")
			if err != nil {
				t.Errorf("Describe: %v", err)
				return
			}
			for _, g := range d.Groups {
				for _, gp := range g.Partitions {
					part := d.Partitions[gp.Partition]
					if gp.Lag < 0 || gp.Committed < part.LogStartOffset || gp.Committed > part.LogEndOffset {
						t.Errorf("group %s partition %d: %+v outside log %+v", g.Group, gp.Partition, gp, part)
					}
				}
			}
		}
	})
	wg.Wait()
	// Every consumer closed: no group may keep a member.
	d, err := c.Describe("in")
	require.NoError(t, err)
	for _, g := range d.Groups {
		assert.Empty(t, g.Members, "group %s keeps members after every consumer closed", g.Group)
	}
	assert.Zero(t, doubleAcks.Load())
	assert.Positive(t, sent.Load())
	assert.Empty(t, c.Consumers())
	require.NoError(t, c.Close())
}

// A group whose handler ignores its context and stalls never delays another
// group of the same topic: the other group gets every record meanwhile.
func TestStalledGroupDoesNotDelayAnother(t *testing.T) {
	const n = 50
	c := testCluster(t, n)
	in := testTopic(t, c, "in", 2, tributary.String())
	// A's handler ignores its context: Run abandons it after the stop grace.
	ca, err := tributary.NewConsumer(in, "A", "a1", tributary.WithStopGrace(100*time.Millisecond))
	require.NoError(t, err)
	cb, err := tributary.NewConsumer(in, "B", "b1")
	require.NoError(t, err)
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	doneA := runAsync(ctx, ca, func(context.Context, tributary.Message[string]) error {
		<-release
		return nil
	})
	var got atomic.Int32
	all := make(chan struct{})
	doneB := runAsync(ctx, cb, func(context.Context, tributary.Message[string]) error {
		if got.Add(1) == n {
			close(all)
		}
		return nil
	})
	p := testProducer[string](t, c, "p", tributary.Manual())
	for i := range n {
		sendOK(t, p, in, tributary.Message[string]{Partition: int32(i % 2), Value: strconv.Itoa(i)})
	}
	select {
	case <-all:
	case <-time.After(guard):
		t.Fatalf("group B got %d of %d records while group A stalled", got.Load(), n)
	}
	cancel()
	assert.ErrorIs(t, awaitDone(t, doneA, time.Second, "stalled Run"), context.Canceled)
	assert.ErrorIs(t, awaitDone(t, doneB, time.Second, "Run"), context.Canceled)
	close(release)
}
