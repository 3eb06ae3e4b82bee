package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// Allocation guards for the hot paths with the features of SPEC rules
// 15–24 configured (a session timeout included: the expiry check and the
// refresh of the member's last-seen instant allocate nothing): PublishMessage of a bare message, AppendPoll into a
// buffer (first deliveries and ack-timeout redeliveries), Ack and Retry
// allocate nothing, whatever the options; a message with headers costs its
// one copy.

// TestFeatureHotPathsAllocateNothing runs publish → poll → ack/retry rounds
// that wrap the logs many times, measuring each call with
// testing.AllocsPerRun. The fake clock (internal/testclock) reads atomics, so the
// broker clock allocates nothing either.
func TestFeatureHotPathsAllocateNothing(t *testing.T) {
	const (
		partitions = 4
		timeout    = time.Second
	)
	clock := testclock.New()
	configs := []struct {
		name    string
		opts    []engine.Option
		timeout bool
	}{
		{"defaults", nil, false},
		{"replay window", []engine.Option{engine.WithReplayWindow(4)}, false},
		{"replay window, ack timeout, clock", []engine.Option{
			engine.WithReplayWindow(4), engine.WithAckTimeout(timeout), engine.WithClock(clock.Now),
		}, true},
		{"session timeout (the wall clock: every call refreshes)", []engine.Option{engine.WithSessionTimeout(time.Hour)}, false},
		{"session timeout, clock", []engine.Option{engine.WithSessionTimeout(time.Hour), engine.WithClock(clock.Now)}, false},
		{"every option", []engine.Option{
			engine.WithReplayWindow(8), engine.WithAckTimeout(timeout), engine.WithClock(clock.Now), engine.WithMaxMessageBytes(64),
			engine.WithSessionTimeout(time.Hour),
		}, true},
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			f := ftNew(t, 8, cfg.opts...)
			f.create("t", partitions)
			f.join("t", "g", "m")
			f.join("t", "h", "m")
			buf := make([]engine.Record, 0, engine.MaxPollRecords)
			msg := engine.Message{Payload: "payload"}

			// each measures f over one call per partition (AllocsPerRun
			// calls it runs+1 times) and requires no allocation and no
			// unexpected result.
			each := func(what string, round int, call func(p int32) bool) {
				t.Helper()
				p, bad := int32(0), 0
				allocs := testing.AllocsPerRun(partitions-1, func() {
					if !call(p) {
						bad++
					}
					p++
				})
				require.Zero(t, bad, "round %d: unexpected %s results", round, what)
				require.Zero(t, allocs, "round %d: allocations per %s", round, what)
				require.Equal(t, int32(partitions), p)
			}
			var recs []engine.Record
			poll := func(group string) func(int32) bool {
				return func(p int32) bool {
					var err error
					n := len(buf)
					buf, err = f.AppendPoll(buf, "t", group, "m", 1) // one record per call: the next partition's
					if err != nil || len(buf) != n+1 || buf[n].Partition != p {
						return false
					}
					recs = buf
					return true
				}
			}
			settle := func(group string, settle func(topic, group, member string, partition int32, offset int64) (bool, error)) func(int32) bool {
				return func(p int32) bool {
					ok, err := settle("t", group, "m", p, recs[p].Offset)
					return err == nil && ok
				}
			}

			for round := range 12 {
				clock.Advance(time.Millisecond) // a new instant: with a session timeout, every call below refreshes
				each("PublishMessage", round, func(p int32) bool {
					off, err := f.PublishMessage("t", p, msg)
					return err == nil && off == int64(round)
				})
				// g: poll and ack.
				buf = buf[:0]
				each("AppendPoll", round, poll("g"))
				each("Ack", round, settle("g", f.Ack))
				// h: poll, retry, poll again (Attempt 2), ack.
				buf = buf[:0]
				each("AppendPoll", round, poll("h"))
				each("Retry", round, settle("h", f.Retry))
				buf = buf[:0]
				each("AppendPoll after Retry", round, poll("h"))
				for _, r := range recs {
					require.Equal(t, int32(2), r.Attempt)
				}
				if cfg.timeout {
					// Let the deliveries expire: the redelivering poll
					// allocates nothing either.
					clock.Advance(timeout)
					buf = buf[:0]
					each("AppendPoll after the ack timeout", round, poll("h"))
					for _, r := range recs {
						require.Equal(t, int32(3), r.Attempt)
					}
				}
				each("Ack", round, settle("h", f.Ack))
			}
			for p := range int32(partitions) {
				// The logs wrapped: 12 records per partition went through a
				// capacity of 8.
				require.Equal(t, int64(12), f.logEnd("t", p))
			}
		})
	}
}

// TestPublishMessageWithHeadersAllocatesItsCopy: a message with headers
// costs exactly two allocations, the broker's copy of the headers and the
// record's metadata (key, headers, time) that holds it; and
// delivering it costs one, the record's copy.
func TestPublishMessageWithHeadersAllocatesItsCopy(t *testing.T) {
	const runs = 50
	f := ftNew(t, runs+1)
	f.create("t", 1)
	f.join("t", "g", "m")
	headers := []engine.Header{{Key: "trace", Value: "ab12"}, {Key: "k", Value: "v"}}
	bad := 0
	allocs := testing.AllocsPerRun(runs, func() {
		if _, err := f.PublishMessage("t", 0, engine.Message{Headers: headers, Payload: "p"}); err != nil {
			bad++
		}
	})
	require.Zero(t, bad)
	require.Equal(t, 2.0, allocs, "allocations per PublishMessage with headers")

	buf := make([]engine.Record, 0, 1)
	allocs = testing.AllocsPerRun(runs, func() {
		var err error
		buf, err = f.AppendPoll(buf[:0], "t", "g", "m", 1)
		if err != nil || len(buf) != 1 || len(buf[0].Headers) != 2 {
			bad++
			return
		}
		if ok, err := f.Ack("t", "g", "m", 0, buf[0].Offset); err != nil || !ok {
			bad++
		}
	})
	require.Zero(t, bad)
	require.Equal(t, 1.0, allocs, "allocations per delivery of a record with headers")
}
