//go:build unix

package bench_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
)

// idleWindow is how long BenchmarkIdleConsumers measures each layout.
var idleWindow = flag.Duration("idle.window", 10*time.Second,
	"BenchmarkIdleConsumers: the idle window measured per sub-benchmark")

// Shape of BenchmarkIdleConsumers.
const (
	idleConsumers = 1000 // consumers (or goroutines) blocked per sub-benchmark
	idleCapacity  = 16   // records per partition: the topics stay empty, so keep them small
)

// BenchmarkIdleConsumers: 1,000 consumers each blocked in Consumer.Poll on
// an empty topic; the process's CPU time (getrusage RUSAGE_SELF, user +
// system) is measured over a fixed idle window, 10 s by default:
//
//	go test -run '^$' -bench Idle -benchtime 1x ./bench/
//	go test -run '^$' -bench Idle -benchtime 1x ./bench/ -idle.window 2s
//
// The window does not depend on b.N (run it with -benchtime 1x; ns/op is
// then the window plus the checks around it). Sub-benchmarks, in run order:
//
//   - chan: the baseline, 1,000 goroutines each blocked receiving from a
//     channel of its own, and nothing else: what the Go runtime itself
//     costs while a process with that many parked goroutines is idle;
//   - groups=1000: one topic of 16 partitions, 1,000 groups of one
//     consumer each: every consumer owns all 16 partitions and waits on
//     the same topic's ready signal (1,000 subscribers of one stream);
//   - topics=20/members=50: 20 topics of 50 partitions, one group of 50
//     consumers on each: every consumer owns one partition (Kafka-style
//     work sharing).
//
// Metrics: cpu-ms/s (CPU milliseconds per wall second over the window),
// cpu-us/consumer/s (that per consumer, in microseconds), and the polls
// and wakeups all the consumers' Stats counted during the window (0 for
// a broker that never busy-polls). After the window every topic gets
// records and every consumer must return from Poll with one, proving they
// were live and blocked, not gone. Skipped under -short.
func BenchmarkIdleConsumers(b *testing.B) {
	if testing.Short() {
		b.Skip("idle window of seconds; skipped under -short")
	}
	b.Run("chan", func(b *testing.B) {
		chans := make([]chan struct{}, idleConsumers)
		var wg sync.WaitGroup
		var parked atomic.Int64
		for i := range chans {
			chans[i] = make(chan struct{})
			wg.Go(func() {
				parked.Add(1)
				<-chans[i]
			})
		}
		for parked.Load() < idleConsumers {
			time.Sleep(time.Millisecond)
		}
		w := measureIdle(b, nil)
		for _, c := range chans {
			close(c)
		}
		wg.Wait()
		w.report(b, idleConsumers)
	})
	b.Run("groups=1000", func(b *testing.B) {
		runIdle(b, 1, 16, idleConsumers, 1)
	})
	b.Run("topics=20/members=50", func(b *testing.B) {
		runIdle(b, 20, 50, 1, 50)
	})
}

// runIdle blocks topics × groups × members consumers in Poll on empty
// topics of partitions partitions, measures the idle window, then wakes
// them all with records and stops them.
func runIdle(b *testing.B, topics, partitions, groups, members int) {
	c, err := tributary.NewCluster(idleCapacity)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var ts []*tributary.Topic[string]
	var cs []*tributary.Consumer[string]
	for ti := range topics {
		t, err := tributary.CreateTopic(c, fmt.Sprintf("t%02d", ti), int32(partitions), tributary.String())
		if err != nil {
			b.Fatal(err)
		}
		ts = append(ts, t)
		for g := range groups {
			for m := range members {
				cons, err := tributary.NewConsumer(t, fmt.Sprintf("g%04d", g), fmt.Sprintf("t%02d-g%04d-m%02d", ti, g, m))
				if err != nil {
					b.Fatal(err)
				}
				if a := cons.Assignment(); len(a) == 0 {
					b.Fatalf("consumer %s owns no partition", cons.Name())
				}
				cs = append(cs, cons)
			}
		}
	}
	if len(cs) != idleConsumers {
		b.Fatalf("%d consumers, want %d", len(cs), idleConsumers)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var got atomic.Int64
	errs := make(chan error, len(cs))
	for _, cons := range cs {
		wg.Go(func() {
			ms, err := cons.Poll(ctx, 1)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					errs <- fmt.Errorf("consumer %s: Poll: %w", cons.Name(), err)
				}
				return
			}
			if len(ms) == 1 {
				got.Add(1)
			}
		})
	}
	// Every consumer has blocked once it has waited; its Poll polled twice
	// (before and after taking the ready signals).
	for !allWaiting(cs) {
		time.Sleep(time.Millisecond)
	}

	w := measureIdle(b, cs)

	// Wake every consumer: one record on every partition of every topic.
	p, err := tributary.NewProducer[string](c, "p", tributary.Manual())
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range ts {
		for part := range int32(partitions) {
			if _, err := p.TrySend(t, tributary.Message[string]{Partition: part, Value: "wake"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		cancel()
		<-done
		b.Fatal(err)
	case <-time.After(time.Minute):
		cancel()
		<-done
		b.Fatalf("after the window, %d of %d consumers received a record within a minute", got.Load(), len(cs))
	}
	if n := got.Load(); n != int64(len(cs)) {
		b.Fatalf("after the window, %d of %d consumers received a record", n, len(cs))
	}
	w.report(b, len(cs))
}

// allWaiting reports whether every consumer's Poll has blocked.
func allWaiting(cs []*tributary.Consumer[string]) bool {
	for _, c := range cs {
		if c.Stats().Waits == 0 {
			return false
		}
	}
	return true
}

// idleMeasure is what measureIdle saw.
type idleMeasure struct {
	wall    time.Duration
	cpu     time.Duration // user + system
	polls   int64         // summed over the consumers
	wakeups int64
	stats   bool // the consumers' counters were read
}

// measureIdle sleeps for the idle window (b's timer running) and returns
// the process's CPU time over it and the growth of the consumers' Polls
// and Wakeups.
func measureIdle(b *testing.B, cs []*tributary.Consumer[string]) idleMeasure {
	polls0, wake0 := sumStats(cs)
	b.ResetTimer()
	cpu0, err := processCPU()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	time.Sleep(*idleWindow)
	cpu1, err := processCPU()
	wall := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	polls1, wake1 := sumStats(cs)
	return idleMeasure{wall: wall, cpu: cpu1 - cpu0, polls: polls1 - polls0, wakeups: wake1 - wake0, stats: cs != nil}
}

// report records w as b's metrics for consumers consumers.
func (w idleMeasure) report(b *testing.B, consumers int) {
	perSec := float64(w.cpu) / float64(w.wall) // CPU seconds per wall second
	b.ReportMetric(perSec*1e3, "cpu-ms/s")
	b.ReportMetric(perSec*1e6/float64(consumers), "cpu-us/consumer/s")
	b.ReportMetric(w.wall.Seconds(), "window-s")
	if w.stats {
		b.ReportMetric(float64(w.polls), "polls")
		b.ReportMetric(float64(w.wakeups), "wakeups")
	}
}

// sumStats returns the consumers' Polls and Wakeups, summed.
func sumStats(cs []*tributary.Consumer[string]) (polls, wakeups int64) {
	for _, c := range cs {
		s := c.Stats()
		polls += s.Polls
		wakeups += s.Wakeups
	}
	return polls, wakeups
}

// processCPU returns the process's user + system CPU time so far.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
