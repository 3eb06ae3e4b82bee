package backendtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// roomCase is one configuration of blockingPublishWhileGroupsAck.
type roomCase struct {
	capacity, window int32
	groups, records  int
}

// roomCases are the fixed shapes (a window equal to the capacity, the
// shape that stalls a producer woken only by removals; one below it; no
// window) and random ones: capacities 1..6, windows 0, the capacity or
// uniform in 0..capacity, 1 to 3 groups, three capacities' worth of
// records. Small, so that a networked backend runs them in seconds.
func roomCases() []roomCase {
	cases := []roomCase{{1, 1, 1, 6}, {4, 4, 1, 16}, {3, 3, 3, 12}, {4, 3, 2, 16}, {2, 0, 2, 8}}
	rng := rand.New(rand.NewPCG(20, 5))
	for range 5 {
		c := roomCase{capacity: 1 + rng.Int32N(6), groups: 1 + rng.IntN(3)}
		switch rng.IntN(3) {
		case 0:
			c.window = c.capacity
		case 1:
			c.window = rng.Int32N(c.capacity + 1)
		}
		c.records = 3 * int(c.capacity)
		cases = append(cases, c)
	}
	return cases
}

// blockingPublishWhileGroupsAck: a producer whose Publish waits on a full
// partition publishes every record while 1 to 3 groups keep polling
// (blocking Poll) and acking, whatever the capacity and the replay window
// (0..capacity, the capacity included): each wait ends once an ack makes
// room, either by removing a record or, with a window, by making the
// oldest record fully committed, which a publish gives up (SPEC rules 13,
// 21). Every wait is bounded by Wait (a no-hang bound, not a speed
// figure); each group sees every offset once, in order; at the end every
// group has committed the log end and the log keeps the window's records.
func blockingPublishWhileGroupsAck(t testing.TB, nb NewBackend) {
	for _, c := range roomCases() {
		if msg := roomRun(nb, c); msg != "" {
			require.FailNow(t, "blocked publish", "capacity %d, window %d, %d groups, %d records: %s", c.capacity, c.window, c.groups, c.records, msg)
		}
	}
}

// roomRun runs one case on a fresh backend and returns its first failure,
// or "". Its goroutines report through it, never through t.
func roomRun(nb NewBackend, c roomCase) string {
	b := nb(Config{Capacity: c.capacity, ReplayWindow: c.window})
	if ok, err := b.CreateTopic("t", 1, "bytes"); !ok || err != nil {
		return fmt.Sprintf("CreateTopic: %v, %v", ok, err)
	}
	tp, _, err := b.OpenTopic("t")
	if err != nil {
		return fmt.Sprintf("OpenTopic: %v", err)
	}
	members := make([]tributary.BackendMember, c.groups)
	for g := range members {
		if members[g], err = tp.Member(fmt.Sprintf("g%d", g), "m"); err == nil {
			_, err = members[g].Join()
		}
		if err != nil {
			return fmt.Sprintf("group g%d: %v", g, err)
		}
	}
	var (
		mu       sync.Mutex
		failures []string
	)
	stop := make(chan struct{})
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if failures == nil {
			close(stop)
		}
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	payload := func(off int64) string { return fmt.Sprintf("r%d", off) }
	var wg sync.WaitGroup
	for g, m := range members {
		wg.Go(func() {
			for next := int64(0); next < int64(c.records); {
				// Twice Wait, so that a blocked producer reports first.
				ctx, cancel := context.WithTimeout(context.Background(), 2*Wait)
				recs, err := m.Poll(ctx, stop, nil, 1)
				cancel()
				switch {
				case errors.Is(err, tributary.ErrClosed):
					return // stopped by a failure
				case err != nil:
					fail("g%d: Poll waiting for offset %d: %v", g, next, err)
					return
				case len(recs) != 1 || recs[0].Offset != next || recs[0].Payload != payload(next):
					fail("g%d: Poll = %+v, want the one record at offset %d", g, recs, next)
					return
				}
				if ok, err := m.Ack(0, next); !ok || err != nil {
					fail("g%d: Ack(0, %d) = %v, %v", g, next, ok, err)
					return
				}
				next++
			}
		})
	}
	wg.Go(func() {
		for i := range int64(c.records) {
			ctx, cancel := context.WithTimeout(context.Background(), Wait)
			off, err := tp.Publish(ctx, stop, 0, engine.Message{Payload: payload(i)})
			cancel()
			switch {
			case errors.Is(err, tributary.ErrClosed):
				return
			case errors.Is(err, context.DeadlineExceeded):
				d, _ := b.Describe("t")
				fail("Publish of record %d still waiting for room after %v while the groups kept acking: %s", i, Wait, describeLog(d))
				return
			case err != nil || off != i:
				fail("Publish of record %d = %d, %v", i, off, err)
				return
			}
		}
	})
	wg.Wait()
	if failures != nil {
		return strings.Join(failures, "; ")
	}
	d, err := b.Describe("t")
	if err != nil {
		return fmt.Sprintf("Describe: %v", err)
	}
	n := int64(c.records)
	if p := d.Partitions[0]; p.LogEndOffset != n || p.LogStartOffset != max(0, n-int64(c.window)) {
		return fmt.Sprintf("every group acked %d records, want log [%d, %d): %s", n, max(0, n-int64(c.window)), n, describeLog(d))
	}
	for _, g := range d.Groups {
		if gp := g.Partitions[0]; gp.Committed != n || gp.InFlight {
			return fmt.Sprintf("group %s committed %d (in flight %v), want %d", g.Group, gp.Committed, gp.InFlight, n)
		}
	}
	return ""
}

// describeLog is partition 0's log and each group's committed offset.
func describeLog(d engine.TopicDescription) string {
	if len(d.Partitions) == 0 {
		return "no description"
	}
	var sb strings.Builder
	p := d.Partitions[0]
	fmt.Fprintf(&sb, "log [%d, %d)", p.LogStartOffset, p.LogEndOffset)
	for _, g := range d.Groups {
		if len(g.Partitions) > 0 {
			fmt.Fprintf(&sb, ", %s committed %d", g.Group, g.Partitions[0].Committed)
		}
	}
	return sb.String()
}
