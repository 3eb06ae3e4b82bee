package jetstream_test

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestDescribeLogStartMonotone runs, for a replay window of 0 and of 2,
// three groups on one partition, each with a member in each of two
// Backends polling and acking (every fifth delivery retried), a publisher,
// and in each Backend a loop seeking one group a third of the way into
// the retained records (back or forward), for 10 s; a Describe loop checks
// that the log start never moves back and that no group's committed
// offset is below it. Only with TRIBUTARY_JS_STRESS=1 (20 s).
func TestDescribeLogStartMonotone(t *testing.T) {
	if os.Getenv("TRIBUTARY_JS_STRESS") != "1" {
		t.Skip("set TRIBUTARY_JS_STRESS=1")
	}
	for _, w := range []int32{0, 2} {
		b1, b2, _ := twoBackends(t, jetstream.Config{Capacity: 8, ReplayWindow: w})
		bt := topic(t, b1, "t", 1)
		bt2 := must2(b2.OpenTopic("t")).of(t)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for _, g := range []string{"a", "b", "c"} {
			m1 := member(t, bt, g, "m")
			m2 := member(t, bt2, g, "m")
			must(m1.Join()).of(t)
			must(m2.Join()).of(t)
			for _, m := range []tributary.BackendMember{m1, m2} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n := 0
					for !stop.Load() {
						rs, err := m.TryPoll(nil, 1)
						if err != nil || len(rs) == 0 {
							continue
						}
						n++
						if n%5 == 0 {
							_, _ = m.Retry(0, rs[0].Offset)
						} else {
							_, _ = m.Ack(0, rs[0].Offset)
						}
					}
				}()
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_, _ = bt.TryPublish(0, engine.Message{Payload: "x"})
				time.Sleep(time.Millisecond)
			}
		}()
		for i, bb := range []*jetstream.Backend{b1, b2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g := []string{"a", "b"}[i]
				for !stop.Load() {
					d, err := bb.Describe("t")
					if err != nil {
						continue
					}
					p := d.Partitions[0]
					off := p.LogStartOffset + (p.LogEndOffset-p.LogStartOffset)/3
					_, _ = bb.Seek("t", g, 0, off)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(-1)
			for !stop.Load() {
				d, err := b2.Describe("t")
				if err != nil {
					continue
				}
				s := d.Partitions[0].LogStartOffset
				if s < last {
					t.Errorf("window %d: log start %d after %d", w, s, last)
				}
				last = max(last, s)
				for _, g := range d.Groups {
					if c := g.Partitions[0].Committed; c < s {
						t.Errorf("window %d: group %s committed %d below log start %d", w, g.Group, c, s)
					}
				}
			}
		}()
		time.Sleep(10 * time.Second)
		stop.Store(true)
		wg.Wait()
		d := must(b1.Describe("t")).of(t)
		t.Logf("window %d: %+v", w, d.Partitions[0])
	}
}
