package tributary_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/f91dcac0/tributary"
)

// mallocs is the process's count of heap allocations so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// TestRunAllocatesNothingPerRecord: Run over 16 partitions of the String
// codec, with a handler that only counts, allocates at most 0.1 times per
// record, counting every allocation of the process from Run's call to its
// return: polling into Run's buffer, building each Message (its ID from
// the consumer's block), the handler's copy, the hand-off to the handler
// and the Ack allocate nothing per record; what Run allocates once
// (contexts, goroutines, its state) and the ID blocks are amortised.
//
// The same with LogHooks at Info added (a production logger: its
// per-record hooks check the level and log nothing; its rebalance hooks
// read the assignment once per poll).
func TestRunAllocatesNothingPerRecord(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	t.Run("no hooks", func(t *testing.T) { runAllocs(t, nil) })
	t.Run("LogHooks at Info", func(t *testing.T) {
		l := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
		runAllocs(t, []tributary.Hooks{tributary.LogHooks(l)})
	})
}

// runAllocs is TestRunAllocatesNothingPerRecord on a cluster with hooks.
func runAllocs(t *testing.T, hooks []tributary.Hooks) {
	const partitions, capacity = 16, 1000
	const n = partitions * capacity
	c := testCluster(t, capacity)
	for _, h := range hooks {
		c.AddHooks(h)
	}
	tp := testTopic(t, c, "t", partitions, tributary.String())
	cons := testConsumer(t, tp, "g", "c1")
	pr := testProducer[string](t, c, "p", tributary.RoundRobin())
	for range n {
		sendOK(t, pr, tp, tributary.Message[string]{Value: "payload"})
	}
	ctx, cancel := context.WithCancel(guardCtx(t))
	defer cancel()
	var seen atomic.Int64
	h := func(context.Context, tributary.Message[string]) error {
		if seen.Add(1) == n {
			cancel()
		}
		return nil
	}
	runtime.GC()
	before := mallocs()
	err := cons.Run(ctx, h)
	after := mallocs()
	if !errors.Is(err, context.Canceled) || seen.Load() != n {
		t.Fatalf("Run = %v after %d records, want context.Canceled after %d", err, seen.Load(), n)
	}
	per := float64(after-before) / n
	t.Logf("%.4f allocations per record (%d in all for %d records)", per, after-before, n)
	if per > 0.1 {
		t.Fatalf("Run allocates %.3f times per record: want at most 0.1 (nothing per record)", per)
	}
	if s := cons.Stats(); s.Acked != n {
		t.Fatalf("stats %+v: want %d acked", s, n)
	}
}
