package porcupine_test

import (
	"testing"

	porc "github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/porcupine"
)

// TestPollPartitionVerdicts: hand-written histories of PollPartition with
// known verdicts. Topic t of 2 partitions, p0 holding "p0o0"; member m1 of
// g0 owns both.
func TestPollPartitionVerdicts(t *testing.T) {
	prefix := func() []porcupine.Op {
		return []porcupine.Op{
			call(create("t", 2), ok(true)),
			call(publish("t", 0, "p0o0"), porcupine.Output{}),
			call(join("t", "g0", "m1"), parts(0, 1)),
		}
	}
	tests := []struct {
		name     string
		calls    []porcupine.Op
		wverdict porc.CheckResult
	}{
		{"delivered, then in flight", []porcupine.Op{
			call(pollPartition("t", "g0", "m1", 0), recs(0, 0)),
			call(pollPartition("t", "g0", "m1", 0), porcupine.Output{}),
		}, porc.Ok},
		{"delivered twice without a retry", []porcupine.Op{
			call(pollPartition("t", "g0", "m1", 0), recs(0, 0)),
			call(pollPartition("t", "g0", "m1", 0), recs(0, 0)),
		}, porc.Illegal},
		{"after Retry: Attempt 2", []porcupine.Op{
			call(pollPartition("t", "g0", "m1", 0), recs(0, 0)),
			call(retry("t", "g0", "m1", 0, 0), ok(true)),
			call(pollPartition("t", "g0", "m1", 0), attempt(2, recs(0, 0))),
		}, porc.Ok},
		{"after Retry: Attempt 1 again", []porcupine.Op{
			call(pollPartition("t", "g0", "m1", 0), recs(0, 0)),
			call(retry("t", "g0", "m1", 0, 0), ok(true)),
			call(pollPartition("t", "g0", "m1", 0), recs(0, 0)),
		}, porc.Illegal},
		{"another partition's record", []porcupine.Op{
			call(pollPartition("t", "g0", "m1", 1), recs(0, 0)),
		}, porc.Illegal},
		{"the other partition is untouched", []porcupine.Op{
			call(pollPartition("t", "g0", "m1", 1), porcupine.Output{}),
			call(poll("t", "g0", "m1", 2), recs(0, 0)),
		}, porc.Ok},
		{"a Poll after it finds p0 in flight", []porcupine.Op{
			call(pollPartition("t", "g0", "m1", 0), recs(0, 0)),
			call(poll("t", "g0", "m1", 2), recs(0, 0)),
		}, porc.Illegal},
		{"partition out of range", []porcupine.Op{
			call(pollPartition("t", "g0", "m1", 2), invalid()),
		}, porc.Ok},
		{"partition out of range answered empty", []porcupine.Op{
			call(pollPartition("t", "g0", "m1", 2), porcupine.Output{}),
		}, porc.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.wverdict, verdict(t, 2, sequential(append(prefix(), tt.calls...)...)))
		})
	}
}

// TestPollPartitionRecorded: the mixes that use PollPartition record it,
// with deliveries and invalid calls, and the engine's histories check.
func TestPollPartitionRecorded(t *testing.T) {
	for _, mix := range []string{"acktimeout", "addpartitions"} {
		t.Run(mix, func(t *testing.T) {
			h, err := porcupine.Run(porcupine.Workload{Seed: 11, Mix: mix, Topics: 2, Clients: 6, OpsPerClient: 60}, nil)
			require.NoError(t, err)
			delivered, invalid := 0, 0
			for _, o := range h.Ops {
				if o.In.Kind != porcupine.KindPollPartition {
					continue
				}
				delivered += len(o.Out.Records)
				if o.Out.Err == porcupine.ErrInvalid {
					invalid++
				}
			}
			require.Positive(t, delivered, "PollPartition deliveries")
			require.Positive(t, invalid, "invalid PollPartition calls")
			res := porcupine.Check(h, checkTimeout)
			require.Equal(t, porc.Ok, res.Verdict, "%v", h.Workload)
		})
	}
}
