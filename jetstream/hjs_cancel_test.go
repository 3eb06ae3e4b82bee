package jetstream_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

func hjsTwo(t *testing.T, cfg jetstream.Config) (*jetstream.Backend, *jetstream.Backend, *jetstream.Server) {
	t.Helper()
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	open := func() *jetstream.Backend {
		c := cfg
		c.Server = srv
		if c.Capacity == 0 {
			c.Capacity = 64
		}
		if c.RequestTimeout == 0 {
			c.RequestTimeout = 5 * time.Second
		}
		b, err := jetstream.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	return open(), open(), srv
}

// Process A rejoins as "a"; right after its group write commits (before
// it cancels its deliveries) process B rejoins as "a" too and polls. A is
// superseded: its Rejoin must fail with ErrFenced and change nothing. In
// particular the deliveries now in flight to B must stay B's to ack.
func TestHJSSupersededRejoinCancelsSuccessor(t *testing.T) {
	b1, b2, _ := hjsTwo(t, jetstream.Config{})
	bt1 := topic(t, b1, "t", 2)
	pub(t, bt1, 0, "x")
	pub(t, bt1, 1, "y")
	bt2 := must2(b2.OpenTopic("t")).of(t)
	mA := member(t, bt1, "g", "a")
	must(mA.Join()).of(t)
	mB := member(t, bt2, "g", "a")
	var bRecs []engine.Record
	var bErr error
	var once atomic.Bool
	jetstream.SetLossy(b1, func(key string, written bool) bool {
		if written && key == "group.t.g" && once.CompareAndSwap(false, true) {
			if _, bErr = mB.Rejoin(); bErr == nil {
				bRecs, bErr = mB.TryPoll(nil, 4)
			}
		}
		return false
	})
	_, aErr := mA.Rejoin()
	jetstream.SetLossy(b1, nil)
	if bErr != nil || len(bRecs) != 2 {
		t.Fatalf("B: %v, %v", bRecs, bErr)
	}
	t.Logf("A's Rejoin = %v", aErr)
	d := must(b2.Describe("t")).of(t).Groups[0]
	for _, r := range bRecs {
		ok, err := mB.Ack(r.Partition, r.Offset)
		if err != nil || !ok {
			t.Errorf("B (the current incarnation) Ack(%d,%d) = %v, %v; group before the acks: %+v", r.Partition, r.Offset, ok, err, d.Partitions)
		}
	}
	if !errors.Is(aErr, tributary.ErrFenced) {
		t.Errorf("A's Rejoin = %v, want ErrFenced", aErr)
	}
}

type r2[A, B any] struct {
	a   A
	b   B
	err error
}

func must2[A, B any](a A, b B, err error) r2[A, B] { return r2[A, B]{a, b, err} }
func (r r2[A, B]) of(t *testing.T) A {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.a
}
