package engine_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// The hot-path cost of rule 24 (docs/performance.md): the same loops with
// the session timeout off, on (45 s, Kafka's default, on the default wall
// clock, so that every Poll and Ack raises its member's last-seen instant)
// and on-tick (the same with WithClock of a counter that moves 1 ns per
// reading: the session logic without the cost of reading a real clock).
// Each benchmark is one goroutine on a one-partition topic with
// one group of one member:
//
//   - SessionRoundTrip: publish → AppendPoll(1) → ack, through handles and
//     by name;
//
//   - SessionPoll: AppendPoll of a partition whose record is in flight
//     (the poll locks the cursor and finds nothing), through a handle;
//
//   - SessionAck: Ack of an offset that is not in flight (false), through
//     a handle.
//
//     go test -run '^$' -bench 'Session(RoundTrip|Poll|Ack)' ./engine/
func BenchmarkSessionRoundTrip(b *testing.B) {
	for _, on := range sessionModes {
		for _, handles := range []bool{true, false} {
			b.Run(on+"/"+map[bool]string{true: "handle", false: "names"}[handles], func(b *testing.B) {
				br, th, m := sessionBenchSetup(b, on)
				buf := make([]engine.Record, 0, 1)
				b.ReportAllocs()
				for b.Loop() {
					var off int64
					var err error
					if handles {
						off, err = th.Publish(0, "payload")
					} else {
						off, err = br.Publish("t", 0, "payload")
					}
					if err != nil || off < 0 {
						b.Fatalf("Publish: %d, %v", off, err)
					}
					if handles {
						buf, err = m.AppendPoll(buf[:0], 1)
					} else {
						buf, err = br.AppendPoll(buf[:0], "t", "g", "m", 1)
					}
					if err != nil || len(buf) != 1 {
						b.Fatalf("AppendPoll: %v, %v", buf, err)
					}
					var ok bool
					if handles {
						ok, err = m.Ack(0, off)
					} else {
						ok, err = br.Ack("t", "g", "m", 0, off)
					}
					if err != nil || !ok {
						b.Fatalf("Ack: %v, %v", ok, err)
					}
				}
			})
		}
	}
}

func BenchmarkSessionPoll(b *testing.B) {
	for _, on := range sessionModes {
		b.Run(on, func(b *testing.B) {
			_, th, m := sessionBenchSetup(b, on)
			if _, err := th.Publish(0, "payload"); err != nil {
				b.Fatal(err)
			}
			buf, err := m.AppendPoll(nil, 1)
			if err != nil || len(buf) != 1 {
				b.Fatalf("AppendPoll: %v, %v", buf, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				buf, err = m.AppendPoll(buf[:0], 1)
				if err != nil || len(buf) != 0 {
					b.Fatalf("AppendPoll: %v, %v", buf, err)
				}
			}
		})
	}
}

func BenchmarkSessionAck(b *testing.B) {
	for _, on := range sessionModes {
		b.Run(on, func(b *testing.B) {
			_, _, m := sessionBenchSetup(b, on)
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := m.Ack(0, 7); err != nil || ok {
					b.Fatalf("Ack: %v, %v", ok, err)
				}
			}
		})
	}
}

// sessionModes are the benchmarks' configurations: no session timeout,
// one on the wall clock, one on a ticking counter clock.
var sessionModes = []string{"off", "on", "on-tick"}

// sessionBenchSetup returns a broker of capacity 1,000 with topic t of one
// partition and member m of group g joined, configured as mode says, and
// handles on both.
func sessionBenchSetup(b *testing.B, mode string) (*engine.Broker, *engine.TopicHandle, *engine.MemberHandle) {
	var opts []engine.Option
	switch mode {
	case "on":
		opts = append(opts, sessionBenchOption(45*time.Second))
	case "on-tick":
		var ns atomic.Int64
		ns.Store(testclock.Epoch.UnixNano())
		opts = append(opts, sessionBenchOption(45*time.Second), engine.WithClock(func() time.Time { return time.Unix(0, ns.Add(1)) }))
	}
	br := hRoundTripSetup(b, opts...)
	th, m := joinedMember(b, br)
	return br, th, m
}

// sessionBenchOption is engine.WithSessionTimeout; a variable, so that the
// off benchmarks build against an engine without the option (the
// before/after comparison of docs/performance.md).
var sessionBenchOption = engine.WithSessionTimeout
