package bench_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/bench"
	"github.com/f91dcac0/tributary/engine"
)

// newSubject builds a subject of the named kind.
func newSubject(t *testing.T, kind string, capacity int32) bench.Subject {
	t.Helper()
	k, ok := bench.KindByName(kind)
	require.True(t, ok, kind)
	s, err := k.New(capacity)
	require.NoError(t, err)
	return s
}

func poll(t *testing.T, s bench.Subject, topic, group, member string, maxRecords int32) []engine.Record {
	t.Helper()
	recs, err := s.PollInto(nil, topic, group, member, maxRecords)
	require.NoError(t, err)
	return core(recs)
}

// core reduces recs to the core API's four fields (Topic, Partition, Offset,
// Payload), in place: the
// baselines implement the core contract only, and the engine's Key,
// Headers, Time and Attempt are tested in package engine.
func core(recs []engine.Record) []engine.Record {
	for i, r := range recs {
		recs[i] = engine.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Payload: r.Payload}
	}
	return recs
}

func rec(topic string, partition int32, offset int64, payload string) engine.Record {
	return engine.Record{Topic: topic, Partition: partition, Offset: offset, Payload: payload}
}

// TestEverySubjectHandsOff: every kind, baselines included, is a working
// hand-off: offsets count from 0, a full partition returns -1, a poll takes
// at most one record per partition, an ack moves on, and one record reaches
// every group. So the baselines measured beside the engine do the work.
func TestEverySubjectHandsOff(t *testing.T) {
	for _, k := range bench.Kinds() {
		t.Run(k.Name, func(t *testing.T) {
			s := newSubject(t, k.Name, 2)
			ok, err := s.Create("orders", 2)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = s.Create("orders", 5)
			require.NoError(t, err)
			require.False(t, ok, "duplicate Create")

			parts, err := s.Join("orders", "billing", "m1")
			require.NoError(t, err)
			require.Equal(t, []int32{0, 1}, parts)
			_, err = s.Join("orders", "audit", "a1")
			require.NoError(t, err)

			for i, w := range []int64{0, 1, -1} {
				off, err := s.Publish("orders", 0, string(rune('a'+i)))
				require.NoError(t, err)
				require.Equal(t, w, off, "publish %d", i)
			}
			off, err := s.Publish("orders", 1, "x")
			require.NoError(t, err)
			require.Equal(t, int64(0), off)

			require.Equal(t, []engine.Record{rec("orders", 0, 0, "a"), rec("orders", 1, 0, "x")},
				poll(t, s, "orders", "billing", "m1", 64))
			ok, err = s.Ack("orders", "billing", "m1", 0, 0)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, []engine.Record{rec("orders", 0, 1, "b")}, poll(t, s, "orders", "billing", "m1", 64))

			// The other group gets the same records.
			require.Equal(t, []engine.Record{rec("orders", 0, 0, "a")}, poll(t, s, "orders", "audit", "a1", 1))

			ok, err = s.Ack("orders", "audit", "a1", 0, 0)
			require.NoError(t, err)
			require.True(t, ok)

			// Appending keeps what dst held.
			dst := []engine.Record{rec("keep", 9, 9, "me")}
			dst, err = s.PollInto(dst, "orders", "audit", "a1", 64)
			require.NoError(t, err)
			require.Equal(t, []engine.Record{rec("keep", 9, 9, "me"), rec("orders", 0, 1, "b"), rec("orders", 1, 0, "x")}, core(dst))

			_, err = s.Publish("nope", 0, "a")
			require.ErrorIs(t, err, engine.ErrInvalidArgument)
		})
	}
}

// TestBrokerSubjectsFollowTheContract: the engine kinds and the naive broker
// agree on docs/contract.md's orders and rebalance examples and retention;
// the channel baseline refuses Retry.
func TestBrokerSubjectsFollowTheContract(t *testing.T) {
	for _, kind := range []string{bench.KindEngine, bench.KindEnginePoll, bench.KindNaive} {
		t.Run(kind, func(t *testing.T) {
			// Worked example, capacity 2.
			s := newSubject(t, kind, 2)
			_, err := s.Create("orders", 1)
			require.NoError(t, err)
			for _, p := range []string{"a", "b"} {
				_, err := s.Publish("orders", 0, p)
				require.NoError(t, err)
			}
			_, err = s.Join("orders", "billing", "m1")
			require.NoError(t, err)
			require.Equal(t, []engine.Record{rec("orders", 0, 0, "a")}, poll(t, s, "orders", "billing", "m1", 2))
			ok, err := s.Retry("orders", "billing", "m1", 0, 0)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, []engine.Record{rec("orders", 0, 0, "a")}, poll(t, s, "orders", "billing", "m1", 2))
			ok, err = s.Ack("orders", "billing", "m1", 0, 0)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, []engine.Record{rec("orders", 0, 1, "b")}, poll(t, s, "orders", "billing", "m1", 2))

			// Rebalance example: b's join cancels a's delivery on partition 1.
			_, err = s.Create("r", 3)
			require.NoError(t, err)
			for p := range int32(3) {
				_, err := s.Publish("r", p, "v")
				require.NoError(t, err)
			}
			parts, err := s.Join("r", "g", "a")
			require.NoError(t, err)
			require.Equal(t, []int32{0, 1, 2}, parts)
			require.Len(t, poll(t, s, "r", "g", "a", 3), 3)
			parts, err = s.Join("r", "g", "b")
			require.NoError(t, err)
			require.Equal(t, []int32{1}, parts)
			require.Equal(t, []engine.Record{rec("r", 1, 0, "v")}, poll(t, s, "r", "g", "b", 3))
			ok, err = s.Ack("r", "g", "a", 1, 0)
			require.NoError(t, err)
			require.False(t, ok, "a's ack after losing partition 1")

			// Retention: with no groups a partition fills up.
			_, err = s.Create("full", 1)
			require.NoError(t, err)
			for _, w := range []int64{0, 1, -1} {
				off, err := s.Publish("full", 0, "x")
				require.NoError(t, err)
				require.Equal(t, w, off)
			}
		})
	}
	t.Run(bench.KindChan, func(t *testing.T) {
		s := newSubject(t, bench.KindChan, 2)
		_, err := s.Create("orders", 1)
		require.NoError(t, err)
		_, err = s.Retry("orders", "g", "m", 0, 0)
		require.True(t, errors.Is(err, bench.ErrUnsupported), "Retry error %v", err)
	})
}
