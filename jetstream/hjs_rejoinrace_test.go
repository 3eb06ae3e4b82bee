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
		bt := bt.(memberMaker)
		wg.Go(func() {
			for round := 0; round < 40; round++ {
				m, ok, stop := rejoined(t, bt)
				if stop {
					return
				}
				if !ok {
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

// memberMaker is what rejoined needs of a topic handle.
type memberMaker interface {
	Member(group, member string) (tributary.BackendMember, error)
}

// rejoined makes a new handle of member "a" of group "g" on bt and rejoins
// it, as a restarted process does. ok false: a later incarnation fenced it
// first (the caller tries again), or, with stop, an error it reported with
// t.Error (the caller stops).
func rejoined(t *testing.T, bt memberMaker) (m tributary.BackendMember, ok, stop bool) {
	m, err := bt.Member("g", "a")
	if err != nil {
		t.Error(err)
		return nil, false, true
	}
	if _, err := m.Rejoin(); err != nil {
		if !errors.Is(err, tributary.ErrFenced) {
			t.Error(err)
			return nil, false, true
		}
		return nil, false, false
	}
	return m, true, false
}
