package model_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/model"
)

// This file checks PollPartition and Snapshot, the model's counterparts of
// engine's MemberHandle.AppendPollPartition and Broker.Snapshot.

// pollPartitionFx is a topic t of 3 partitions (capacity 4) with records
// "p<p>.0" and "p<p>.1" on partitions 0 and 1 (partition 2 is empty) and a
// group g of members a and b: a owns [0 2], b owns [1].
func pollPartitionFx(t *testing.T, opts ...model.Option) fx {
	f := newFx(t, 4, opts...)
	f.create("t", 3)
	for _, p := range []int32{0, 1} {
		f.publish("t", p, "p"+itoa(int64(p))+".0")
		f.publish("t", p, "p"+itoa(int64(p))+".1")
	}
	f.join("t", "g", "a")
	f.join("t", "g", "b")
	return f
}

func TestPollPartition(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(f fx) // calls before the one checked
		topic     string
		group     string
		member    string
		partition int32
		wrecs     []model.Record // nil: an error
		werr      error
	}{
		{"owned, eligible", nil, "t", "g", "a", 0, []model.Record{rec("t", 0, 0, "p0.0")}, nil},
		{"other member's partition", nil, "t", "g", "b", 1, []model.Record{rec("t", 1, 0, "p1.0")}, nil},
		{"not owned", nil, "t", "g", "a", 1, []model.Record{}, nil},
		{"owned, empty", nil, "t", "g", "a", 2, []model.Record{}, nil},
		{"absent member", nil, "t", "g", "c", 0, []model.Record{}, nil},
		{"absent group", nil, "t", "h", "a", 0, []model.Record{}, nil},
		{"in flight", func(f fx) { f.pollPartition("t", "g", "a", 0) }, "t", "g", "a", 0, []model.Record{}, nil},
		{"in flight via Poll", func(f fx) { f.poll("t", "g", "a", 4) }, "t", "g", "a", 0, []model.Record{}, nil},
		{"other partition in flight", func(f fx) { f.pollPartition("t", "g", "b", 1) }, "t", "g", "a", 0, []model.Record{rec("t", 0, 0, "p0.0")}, nil},
		{"after Retry", func(f fx) {
			f.pollPartition("t", "g", "a", 0)
			f.retry("t", "g", "a", 0, 0)
		}, "t", "g", "a", 0, []model.Record{recN("t", 0, 0, "p0.0", 2)}, nil},
		{"after Ack", func(f fx) {
			f.pollPartition("t", "g", "a", 0)
			f.ack("t", "g", "a", 0, 0)
		}, "t", "g", "a", 0, []model.Record{rec("t", 0, 1, "p0.1")}, nil},
		{"new partition after AddPartitions", func(f fx) {
			f.addPartitions("t", 1)
			f.publish("t", 3, "p3.0")
		}, "t", "g", "b", 3, []model.Record{rec("t", 3, 0, "p3.0")}, nil},
		{"partition -1", nil, "t", "g", "a", -1, nil, model.ErrInvalidArgument},
		{"partition = count", nil, "t", "g", "a", 3, nil, model.ErrInvalidArgument},
		{"invalid member", nil, "t", "g", "a.b", 0, nil, model.ErrInvalidArgument},
		{"invalid group", nil, "t", "", "a", 0, nil, model.ErrInvalidArgument},
		{"unknown topic", nil, "u", "g", "a", 0, nil, model.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := pollPartitionFx(t)
			if tt.setup != nil {
				tt.setup(f)
			}
			before := f.b.Clone()
			got, err := f.b.PollPartition(tt.topic, tt.group, tt.member, tt.partition)
			if tt.werr != nil {
				require.ErrorIs(t, err, tt.werr)
				require.Nil(t, got)
				requireUnchanged(t, before, f.b)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wrecs, got)
			if len(got) == 0 {
				requireUnchanged(t, before, f.b)
				return
			}
			// Exactly the polled partition's cursor changed: in flight, one
			// more attempt. Every other figure is as before.
			want, err := before.Describe(tt.topic)
			require.NoError(t, err)
			for i := range want.Groups {
				if want.Groups[i].Group == tt.group {
					gp := &want.Groups[i].Partitions[tt.partition]
					gp.InFlight, gp.Attempts = true, gp.Attempts+1
				}
			}
			require.Equal(t, want, f.describe(tt.topic))
			require.NoError(t, f.b.CheckInvariants())
		})
	}
}

// TestPollPartitionAckTimeout: rule 22 on one partition. An expired
// delivery is delivered again with Attempt + 1, and the clock is read once
// per valid call, as by Poll.
func TestPollPartitionAckTimeout(t *testing.T) {
	c := testclock.New()
	f := pollPartitionFx(t, model.WithClock(c.Now), model.WithAckTimeout(10*time.Second))
	reads := c.Reads()
	require.Equal(t, []model.Record{rec("t", 0, 0, "p0.0")}, f.pollPartition("t", "g", "a", 0))
	require.Equal(t, reads+1, c.Reads(), "one reading per call")
	c.Advance(10*time.Second - 1)
	require.Empty(t, f.pollPartition("t", "g", "a", 0), "not yet expired")
	c.Advance(1)
	require.Equal(t, []model.Record{rec("t", 1, 0, "p1.0")}, f.pollPartition("t", "g", "b", 1), "b's partition: a first delivery")
	require.Equal(t, []model.Record{recN("t", 0, 0, "p0.0", 2)}, f.pollPartition("t", "g", "a", 0), "expired: delivered again")
	require.Empty(t, f.pollPartition("t", "g", "a", 0), "in flight again")
	reads = c.Reads()
	_, err := f.b.PollPartition("t", "g", "a", 3)
	require.ErrorIs(t, err, model.ErrInvalidArgument)
	require.Equal(t, reads, c.Reads(), "an invalid call reads no clock")
	require.True(t, f.ack("t", "g", "a", 0, 0))
}

func TestSnapshot(t *testing.T) {
	f := newFx(t, 3, model.WithReplayWindow(1))
	f.create("t", 2)
	f.publishMsg("t", 0, model.Message{Key: "k", Headers: []model.Header{{Key: "h", Value: "v"}}, Payload: "a"})
	f.publish("t", 0, "b")
	f.publish("t", 1, "c")
	f.join("t", "g", "m")
	rs := f.poll("t", "g", "m", 2) // p0@0 and p1@0
	require.Len(t, rs, 2)
	f.ack("t", "g", "m", 0, 0) // p0@0 stays, as the replay window
	f.ack("t", "g", "m", 1, 0) // p1@0 stays too
	f.poll("t", "g", "m", 1)   // p0@1 in flight

	before := f.b.Clone()
	s, err := f.b.Snapshot("t")
	require.NoError(t, err)
	requireUnchanged(t, before, f.b)
	require.Equal(t, f.describe("t"), s.TopicDescription)
	wa := kept("t", 0, 0, "a")
	wa.Key, wa.Headers = "k", []model.Header{{Key: "h", Value: "v"}}
	require.Equal(t, [][]model.Record{{wa, kept("t", 0, 1, "b")}, {kept("t", 1, 0, "c")}}, s.Records)
	for p := range s.Records {
		require.Equal(t, f.retained("t", int32(p)), s.Records[p])
	}

	s.Records[0][0].Headers[0].Value = "changed"
	s.Records[0][0].Payload = "changed"
	again, err := f.b.Snapshot("t")
	require.NoError(t, err)
	require.Equal(t, wa, again.Records[0][0], "a snapshot's records are the caller's")

	empty := newFx(t, 1)
	empty.create("e", 2)
	s, err = empty.b.Snapshot("e")
	require.NoError(t, err)
	require.Equal(t, [][]model.Record{{}, {}}, s.Records, "non-nil, empty")

	for _, topic := range []string{"u", "", "bad.id"} {
		s, err := f.b.Snapshot(topic)
		require.ErrorIs(t, err, model.ErrInvalidArgument, topic)
		require.Equal(t, model.TopicSnapshot{}, s)
	}
}

func (f fx) pollPartition(topic, group, member string, p int32) []model.Record {
	f.t.Helper()
	rs, err := f.b.PollPartition(topic, group, member, p)
	require.NoError(f.t, err)
	require.NotNil(f.t, rs)
	return rs
}
