package tributary_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
)

// TestRunUnderFlappingOutagesStrandsNothing: Run over a backend whose
// polls and acks fail, and whose ack replies are lost, in states that flip
// every 0–3 ms (outageBackend; a lost reply is armed for one such step,
// the first until it is lost),
// with handlers that panic, call runtime.Goexit or fail about one record
// in 13 each: every message's ID must be "<partition>-<offset>", every
// record acked exactly once by a successful handling, none lost, and each
// kind of fault must have happened. Without the flapping
// (TRIBUTARY_NOFLAP=1) it checks the handlers' failures alone.
func TestRunUnderFlappingOutagesStrandsNothing(t *testing.T) {
	const parts, per = 6, 60
	inner := testCluster(t, 1000)
	b := &outageBackend{Backend: inner.Backend()}
	c, err := tributary.NewClusterOn(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tp := testTopic(t, c, "t", parts, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	for i := 0; i < per; i++ {
		for p := int32(0); p < parts; p++ {
			sendOK(t, pr, tp, tributary.Message[string]{Partition: p, Value: fmt.Sprint(p, ":", i)})
		}
	}
	cons, err := tributary.NewConsumer(tp, "g", "c1", tributary.WithBatch(32), tributary.WithBackoff(time.Millisecond, 2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ok := map[string]int{}
	var badID, handled atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stopFlap := make(chan struct{})
	if brkNoFlap {
		close(stopFlap)
	}
	go func() {
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stopFlap:
				b.pollDown.Store(false)
				b.ackDown.Store(false)
				return
			case <-time.After(time.Duration(r.IntN(3000)) * time.Microsecond):
			}
			// A reply is lost only in the step it was armed for, except
			// the first arming, which stays until an ack consumes it: a
			// step in which no ack ran (a busy machine leaves Run or this
			// goroutine unscheduled for tens of ms) would otherwise leave
			// that fault untried. One armed reply is lost once, so this
			// cannot lose every try of one ack.
			if b.lost.Load() > 0 {
				b.loseAck.Store(false)
			}
			switch r.IntN(4) {
			case 0:
				b.pollDown.Store(!b.pollDown.Load())
			case 1:
				b.ackDown.Store(!b.ackDown.Load())
			case 2:
				b.loseAck.Store(true)
			case 3:
				b.pollDown.Store(false)
				b.ackDown.Store(false)
			}
		}
	}()
	var rnd atomic.Uint64
	errc := make(chan error, 1)
	go func() {
		errc <- cons.Run(ctx, func(_ context.Context, m tributary.Message[string]) error {
			handled.Add(1)
			want := fmt.Sprintf("%d-%d", m.Partition, m.Offset)
			if m.ID != want {
				badID.Add(1)
				t.Errorf("message ID %q, want %q", m.ID, want)
			}
			if m.Value != fmt.Sprint(m.Partition, ":", m.Offset) {
				t.Errorf("value %q at %s", m.Value, want)
			}
			n := rnd.Add(1)
			if m.Attempt == 1 {
				switch n % 13 {
				case 3:
					panic("boom " + want)
				case 7:
					if !brkNoGoexit {
						runtime.Goexit()
					}
				case 11:
					return fmt.Errorf("fail %s", want)
				}
			}
			mu.Lock()
			ok[want]++
			total := len(ok)
			mu.Unlock()
			if total == parts*per {
				go func() { time.Sleep(100 * time.Millisecond); cancel() }()
			}
			return nil
		})
	}()
	err = <-errc
	if !brkNoFlap {
		close(stopFlap)
	}
	t.Logf("Run: %v; handled=%d ok=%d polls-failed=%d acks-failed=%d replies-lost=%d", err, handled.Load(), len(ok), b.polls.Load(), b.acks.Load(), b.lost.Load())
	if !brkNoFlap && (b.polls.Load() == 0 || b.acks.Load() == 0 || b.lost.Load() == 0) {
		t.Errorf("a fault never happened: %d polls and %d acks failed, %d replies lost", b.polls.Load(), b.acks.Load(), b.lost.Load())
	}
	for p := int32(0); p < parts; p++ {
		for o := 0; o < per; o++ {
			id := fmt.Sprintf("%d-%d", p, o)
			if ok[id] != 1 {
				t.Errorf("record %s succeeded %d times", id, ok[id])
			}
		}
	}
	if got := committedAll(t, c, "g"); len(got) == parts {
		for p, off := range got {
			if off != per {
				t.Errorf("partition %d committed %d, want %d", p, off, per)
			}
		}
	}
}

var brkNoFlap, brkNoGoexit = os.Getenv("TRIBUTARY_NOFLAP") != "", os.Getenv("TRIBUTARY_NOGOEXIT") != ""
