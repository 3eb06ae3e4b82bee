package jetstream_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// Two processes rejoin "a" at once, round after round; each new Member
// polls and acks. An Ack of a delivery the Member was just given that is
// refused while the Member is still the current incarnation (its
// Heartbeat afterwards is not fenced) means someone else cancelled the
// current incarnation's delivery: only a superseded Rejoin can.
func TestHJSRejoinRaceRefusedAcks(t *testing.T) {
	b1, b2, _ := hjsTwo(t, jetstreamCfg(1000))
	const parts = 64
	bt1 := topic(t, b1, "t", parts)
	for i := 0; i < 3; i++ {
		for p := int32(0); p < parts; p++ {
			pub(t, bt1, p, fmt.Sprint(i))
		}
	}
	bt2 := must2(b2.OpenTopic("t")).of(t)
	var bad atomic.Int32
	var mu sync.Mutex
	var examples []string
	var wg sync.WaitGroup
	for who, bt := range []any{bt1, bt2} {
		bt := bt.(interface {
			Member(string, string) (tributary.BackendMember, error)
		})
		wg.Go(func() {
			for round := 0; round < 40; round++ {
				m, err := bt.Member("g", "a")
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := m.Rejoin(); err != nil {
					if !errors.Is(err, tributary.ErrFenced) {
						t.Error(err)
						return
					}
					continue
				}
				rs, err := m.TryPoll(nil, parts)
				if err != nil {
					continue
				}
				for _, r := range rs {
					ok, err := m.Ack(r.Partition, r.Offset)
					if err != nil || ok {
						continue
					}
					if _, err := m.Heartbeat(); err == nil {
						bad.Add(1)
						mu.Lock()
						examples = append(examples, fmt.Sprintf("proc %d round %d: Ack(%d,%d) refused, Member still current", who, round, r.Partition, r.Offset))
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d acks of the current incarnation refused, e.g. %v", n, examples[:min(3, len(examples))])
	}
}

func jetstreamCfg(capacity int32) jetstream.Config { return jetstream.Config{Capacity: capacity} }
