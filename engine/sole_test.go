package engine_test

import (
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// TestSoleCursorRacesUnsoles races the commits of a partition's sole cursor
// (one group, no replay window: its Acks take no partition lock) against
// every call that catches up with it or unsoles it: a producer blocked on
// Room at capacity 2, Describe (it must see the log start at the group's
// committed offset, never behind), and a second group created and deleted
// again and again (each unsoles the cursor, and the next Ack makes it sole
// again). The consumer must get every record once, in order; the producer
// must never wait for a wake-up that does not come.
func TestSoleCursorRacesUnsoles(t *testing.T) {
	const records = 20000
	b, err := engine.New(2)
	if err != nil {
		t.Fatal(err)
	}
	b.Create("t", 1)
	th, m := joinedMember(t, b)
	done := make(chan struct{})
	var wg sync.WaitGroup
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
	}
	wg.Add(3)
	go func() { // the producer
		defer wg.Done()
		for i := int64(0); i < records; {
			room, err := th.Room(0)
			if err != nil {
				fail("Room: %v", err)
				return
			}
			off, err := th.Publish(0, "x")
			if err != nil {
				fail("Publish: %v", err)
				return
			}
			if off >= 0 {
				if off != i {
					fail("publish %d got offset %d", i, off)
					return
				}
				i++
				continue
			}
			select {
			case <-room:
			case <-time.After(10 * time.Second):
				fail("producer at record %d: refused and not woken in 10 s", i)
				return
			}
		}
	}()
	go func() { // the consumer
		defer wg.Done()
		defer close(done)
		var buf []engine.Record
		var err error
		for want := int64(0); want < records; {
			ready := th.Ready() // before the poll: a publish after it closes it
			buf, err = m.AppendPoll(buf[:0], 1)
			if err != nil {
				fail("AppendPoll: %v", err)
				return
			}
			if len(buf) == 0 {
				select {
				case <-ready:
				case <-time.After(10 * time.Second):
					fail("consumer at offset %d: nothing in 10 s", want)
					return
				}
				continue
			}
			if r := buf[0]; r.Offset != want || r.Attempt != 1 {
				fail("polled offset %d attempt %d, want offset %d attempt 1", r.Offset, r.Attempt, want)
				return
			}
			if ok, err := m.Ack(0, want); !ok || err != nil {
				fail("Ack(%d): %v, %v", want, ok, err)
				return
			}
			want++
		}
	}()
	go func() { // catch-ups and unsoles
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if i%2 == 0 {
				d, err := b.Describe("t")
				if err != nil {
					fail("Describe: %v", err)
					return
				}
				p, g := d.Partitions[0], d.Groups[0]
				if len(d.Groups) == 1 && p.LogStartOffset != g.Partitions[0].Committed {
					fail("Describe: log start %d, the only group committed %d", p.LogStartOffset, g.Partitions[0].Committed)
					return
				}
				if n := p.LogEndOffset - p.LogStartOffset; n < 0 || n > 2 {
					fail("Describe: %d records retained at capacity 2", n)
					return
				}
				continue
			}
			if _, err := b.CreateGroupAt("t", "other", engine.RoundRobin, engine.StartLatest); err != nil {
				fail("CreateGroupAt: %v", err)
				return
			}
			if ok, err := b.DeleteGroup("t", "other"); !ok || err != nil {
				fail("DeleteGroup: %v, %v", ok, err)
				return
			}
		}
	}()
	wg.Wait()
}
