package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// Tests of MemberHandle.AppendPollPartition: Poll restricted to one
// partition with maxRecords 1 (SPEC rules 10, 16 and 22 on that partition
// alone). The differential test compares it with model.PollPartition on
// random sequences; these pin down each rule by name.

// ppFix is topic t of 3 partitions (capacity 4) holding "p<p>.0" and
// "p<p>.1" on partitions 0 and 1 (partition 2 is empty), and group g with
// members a and b joined: a owns [0 2], b owns [1]. The handles c (never
// joined) and ha (a of the absent group h) are ready too.
type ppFix struct {
	t              *testing.T
	b              *engine.Broker
	clock          *testclock.Clock
	th             *engine.TopicHandle
	a, bm, c, habs *engine.MemberHandle
}

func newPPFix(t *testing.T, opts ...engine.Option) *ppFix {
	t.Helper()
	f := &ppFix{t: t, clock: testclock.New()}
	var err error
	f.b, err = engine.New(4, append([]engine.Option{engine.WithClock(f.clock.Now)}, opts...)...)
	require.NoError(t, err)
	_, err = f.b.Create("t", 3)
	require.NoError(t, err)
	for _, p := range []int32{0, 1} {
		for i, payload := range []string{"p" + ppDigit(p) + ".0", "p" + ppDigit(p) + ".1"} {
			off, err := f.b.Publish("t", p, payload)
			require.NoError(t, err)
			require.Equal(t, int64(i), off)
		}
	}
	f.th, err = f.b.Topic("t")
	require.NoError(t, err)
	f.a, f.bm, f.c, f.habs = f.member("g", "a"), f.member("g", "b"), f.member("g", "c"), f.member("h", "a")
	for _, m := range []*engine.MemberHandle{f.a, f.bm} {
		_, err := m.Join()
		require.NoError(t, err)
	}
	require.Equal(t, []int32{0, 2}, f.a.Assignment())
	return f
}

func ppDigit(p int32) string { return string(rune('0' + p)) }

func (f *ppFix) member(group, member string) *engine.MemberHandle {
	f.t.Helper()
	m, err := f.th.Member(group, member)
	require.NoError(f.t, err)
	return m
}

// pollOne is AppendPollPartition into a fresh buffer; it must not fail.
func (f *ppFix) pollOne(m *engine.MemberHandle, p int32) []engine.Record {
	f.t.Helper()
	recs, err := m.AppendPollPartition(nil, p)
	require.NoError(f.t, err)
	return recs
}

func (f *ppFix) settle(m *engine.MemberHandle, p int32, off int64, commit bool) {
	f.t.Helper()
	call := m.Retry
	if commit {
		call = m.Ack
	}
	ok, err := call(p, off)
	require.NoError(f.t, err)
	require.True(f.t, ok)
}

func (f *ppFix) describe() engine.TopicDescription {
	f.t.Helper()
	d, err := f.b.Describe("t")
	require.NoError(f.t, err)
	return d
}

// ppRec is what a test checks of a delivered record.
type ppRec struct {
	Partition int32
	Offset    int64
	Payload   string
	Attempt   int32
}

func ppRecs(rs []engine.Record) []ppRec {
	out := []ppRec{}
	for _, r := range rs {
		out = append(out, ppRec{r.Partition, r.Offset, r.Payload, r.Attempt})
	}
	return out
}

func TestAppendPollPartition(t *testing.T) {
	sentinel := engine.Record{Topic: "caller's", Offset: -7}
	tests := []struct {
		name      string
		setup     func(f *ppFix) // calls before the one checked
		member    func(f *ppFix) *engine.MemberHandle
		partition int32
		wrecs     []ppRec // appended after the caller's record
		winvalid  bool
	}{
		{"owned, eligible", nil, ppA, 0, []ppRec{{0, 0, "p0.0", 1}}, false},
		{"other member's own partition", nil, ppB, 1, []ppRec{{1, 0, "p1.0", 1}}, false},
		{"not owned", nil, ppA, 1, []ppRec{}, false},
		{"owned, nothing published", nil, ppA, 2, []ppRec{}, false},
		{"member not joined", nil, ppC, 0, []ppRec{}, false},
		{"group absent", nil, ppAbsent, 0, []ppRec{}, false},
		{"in flight", func(f *ppFix) { f.pollOne(f.a, 0) }, ppA, 0, []ppRec{}, false},
		{"in flight by Poll", func(f *ppFix) {
			_, err := f.a.Poll(engine.MaxPollRecords)
			require.NoError(f.t, err)
		}, ppA, 0, []ppRec{}, false},
		{"another partition in flight", func(f *ppFix) { f.pollOne(f.bm, 1) }, ppA, 0, []ppRec{{0, 0, "p0.0", 1}}, false},
		{"after Retry: Attempt 2", func(f *ppFix) {
			f.pollOne(f.a, 0)
			f.settle(f.a, 0, 0, false)
		}, ppA, 0, []ppRec{{0, 0, "p0.0", 2}}, false},
		{"after two Retries: Attempt 3", func(f *ppFix) {
			for range 2 {
				f.pollOne(f.a, 0)
				f.settle(f.a, 0, 0, false)
			}
		}, ppA, 0, []ppRec{{0, 0, "p0.0", 3}}, false},
		{"after Ack: the next offset, Attempt 1", func(f *ppFix) {
			f.pollOne(f.a, 0)
			f.settle(f.a, 0, 0, true)
		}, ppA, 0, []ppRec{{0, 1, "p0.1", 1}}, false},
		{"after a rebalance moved the partition", func(f *ppFix) {
			_, err := f.bm.Leave()
			require.NoError(f.t, err)
		}, ppA, 1, []ppRec{{1, 0, "p1.0", 1}}, false},
		{"partition added by AddPartitions", func(f *ppFix) {
			n, err := f.b.AddPartitions("t", 1)
			require.NoError(f.t, err)
			require.Equal(f.t, int32(4), n)
			_, err = f.b.Publish("t", 3, "p3.0")
			require.NoError(f.t, err)
		}, ppB, 3, []ppRec{{3, 0, "p3.0", 1}}, false},
		{"partition -1", nil, ppA, -1, nil, true},
		{"partition = count", nil, ppA, 3, nil, true},
		{"partition 64", nil, ppA, 64, nil, true},
		{"partition -1 of an absent group", nil, ppAbsent, -1, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPPFix(t)
			if tt.setup != nil {
				tt.setup(f)
			}
			before := f.describe()
			dst := []engine.Record{sentinel}
			got, err := tt.member(f).AppendPollPartition(dst, tt.partition)
			after := f.describe()
			require.NotEmpty(t, got)
			require.Equal(t, sentinel, got[0], "the caller's records are kept")
			if tt.winvalid {
				require.ErrorIs(t, err, engine.ErrInvalidArgument)
				require.Len(t, got, 1, "nothing appended")
				require.Equal(t, before, after, "an invalid call changes nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wrecs, ppRecs(got[1:]))
			// Exactly the polled partition's cursor of g changed: in flight,
			// one more attempt. Every other partition, offset and group is
			// as before.
			if len(tt.wrecs) > 0 {
				for i := range before.Groups {
					if before.Groups[i].Group == "g" {
						gp := &before.Groups[i].Partitions[tt.partition]
						require.False(t, gp.InFlight)
						gp.InFlight, gp.Attempts = true, gp.Attempts+1
					}
				}
			}
			require.Equal(t, before, after)
		})
	}
}

func ppA(f *ppFix) *engine.MemberHandle      { return f.a }
func ppB(f *ppFix) *engine.MemberHandle      { return f.bm }
func ppC(f *ppFix) *engine.MemberHandle      { return f.c }
func ppAbsent(f *ppFix) *engine.MemberHandle { return f.habs }

// TestAppendPollPartitionAckTimeout: rule 22 on one partition. Until the
// ack timeout passes the delivery blocks its partition (and can still be
// acked); once it has, the next call delivers it again with Attempt + 1,
// and a poll of another partition never redelivers it.
func TestAppendPollPartitionAckTimeout(t *testing.T) {
	const timeout = 10 * time.Second
	f := newPPFix(t, engine.WithAckTimeout(timeout))
	require.Equal(t, []ppRec{{0, 0, "p0.0", 1}}, ppRecs(f.pollOne(f.a, 0)))
	f.clock.Advance(timeout - 1)
	require.Empty(t, f.pollOne(f.a, 0), "not yet expired")
	f.clock.Advance(1)
	require.Empty(t, f.pollOne(f.a, 2), "another partition: nothing there, and p0 untouched")
	require.Equal(t, int32(1), f.describe().Groups[0].Partitions[0].Attempts)
	require.Equal(t, []ppRec{{0, 0, "p0.0", 2}}, ppRecs(f.pollOne(f.a, 0)), "expired: delivered again")
	require.Empty(t, f.pollOne(f.a, 0), "in flight again, timer restarted")
	f.clock.Advance(timeout)
	require.Equal(t, []ppRec{{0, 0, "p0.0", 3}}, ppRecs(f.pollOne(f.a, 0)))
	f.settle(f.a, 0, 0, true)
	require.Equal(t, []ppRec{{0, 1, "p0.1", 1}}, ppRecs(f.pollOne(f.a, 0)), "Ack resets the count")
}

// TestAppendPollPartitionAllocatesNothing: publish → AppendPollPartition
// into a reused buffer → a poll of a partition not owned → Ack allocates
// nothing, with an ack timeout (the clock is read) on a log that wraps.
func TestAppendPollPartitionAllocatesNothing(t *testing.T) {
	f := newPPFix(t, engine.WithAckTimeout(time.Minute))
	for off := range int64(2) { // drain what newPPFix published on p0
		require.Len(t, f.pollOne(f.a, 0), 1)
		f.settle(f.a, 0, off, true)
	}
	buf := make([]engine.Record, 0, 1)
	bad := 0
	allocs := testing.AllocsPerRun(200, func() {
		off, err := f.th.Publish(0, "payload")
		if err != nil || off < 0 {
			bad++
			return
		}
		buf, err = f.a.AppendPollPartition(buf[:0], 0)
		if err != nil || len(buf) != 1 || buf[0].Offset != off {
			bad++
			return
		}
		buf, err = f.a.AppendPollPartition(buf[:0], 1) // b's partition
		if err != nil || len(buf) != 0 {
			bad++
		}
		if ok, err := f.a.Ack(0, off); err != nil || !ok {
			bad++
		}
	})
	require.Zero(t, bad, "unexpected results")
	require.Zero(t, allocs, "allocations per publish → AppendPollPartition → AppendPollPartition (not owned) → ack")
}
