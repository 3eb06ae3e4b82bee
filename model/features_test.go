package model_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/model"
)

// This file checks rules 15 to 23 (docs/contract.md), one table per rule.

// badAssignor is a user assignor that answers like RoundRobin while *ok is
// true, and otherwise with the fault it names.
type badAssignor struct {
	fault string
	ok    *bool
}

var badFaults = []string{"nil", "short", "long", "stranger", "empty owner", "panic"}

func (a badAssignor) Name() string { return "bad-" + strings.ReplaceAll(a.fault, " ", "-") }

func (a badAssignor) Assign(members, previous []string) []string {
	owners := model.RoundRobin.Assign(members, previous)
	if *a.ok {
		return owners
	}
	switch a.fault {
	case "nil":
		return nil
	case "short":
		return owners[:len(owners)-1]
	case "long":
		return append(owners, members[0])
	case "stranger":
		owners[0] = "stranger"
	case "empty owner":
		owners[len(owners)-1] = ""
	case "panic":
		panic("assignor failure")
	}
	return owners
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name     string
		capacity int32
		opts     []model.Option
		wok      bool
	}{
		{"no options", 5, nil, true},
		{"nil option", 5, []model.Option{nil}, false},
		{"nil option after a valid one", 5, []model.Option{model.WithReplayWindow(1), nil}, false},
		{"invalid capacity comes first", 0, []model.Option{model.WithReplayWindow(0)}, false},
		{"window 0", 5, []model.Option{model.WithReplayWindow(0)}, true},
		{"window = capacity", 5, []model.Option{model.WithReplayWindow(5)}, true},
		{"window > capacity", 5, []model.Option{model.WithReplayWindow(6)}, false},
		{"window -1", 5, []model.Option{model.WithReplayWindow(-1)}, false},
		{"window MinInt32", 5, []model.Option{model.WithReplayWindow(math.MinInt32)}, false},
		{"clock", 5, []model.Option{model.WithClock(at0)}, true},
		{"nil clock", 5, []model.Option{model.WithClock(nil)}, false},
		{"nil clock then a clock", 5, []model.Option{model.WithClock(nil), model.WithClock(at0)}, true},
		{"ack timeout 1ns", 5, []model.Option{model.WithAckTimeout(time.Nanosecond)}, true},
		{"ack timeout 0", 5, []model.Option{model.WithAckTimeout(0)}, false},
		{"ack timeout -1s", 5, []model.Option{model.WithAckTimeout(-time.Second)}, false},
		{"max bytes 1", 5, []model.Option{model.WithMaxMessageBytes(1)}, true},
		{"max bytes MaxInt", 5, []model.Option{model.WithMaxMessageBytes(math.MaxInt)}, true},
		{"max bytes 0", 5, []model.Option{model.WithMaxMessageBytes(0)}, false},
		{"max bytes -1", 5, []model.Option{model.WithMaxMessageBytes(-1)}, false},
		{"session timeout 1ns", 5, []model.Option{model.WithSessionTimeout(time.Nanosecond)}, true},
		{"session timeout 45s", 5, []model.Option{model.WithSessionTimeout(45 * time.Second)}, true},
		{"session timeout 0", 5, []model.Option{model.WithSessionTimeout(0)}, false},
		{"session timeout -1ns", 5, []model.Option{model.WithSessionTimeout(-time.Nanosecond)}, false},
		{"session timeout 0 then 1s", 5, []model.Option{model.WithSessionTimeout(0), model.WithSessionTimeout(time.Second)}, true},
		{"all options", 5, []model.Option{model.WithReplayWindow(2), model.WithClock(at0),
			model.WithAckTimeout(time.Second), model.WithMaxMessageBytes(10), model.WithSessionTimeout(time.Minute)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := model.New(tt.capacity, tt.opts...)
			if !tt.wok {
				require.ErrorIs(t, err, model.ErrInvalidArgument)
				require.Nil(t, b)
				return
			}
			require.NoError(t, err)
			require.NoError(t, b.CheckInvariants())
			require.Equal(t, tt.capacity, b.Capacity())
		})
	}
}

// TestMessages checks rule 15: keys, headers and times travel with the
// record; the broker keeps its own copy of the headers; a zero time is the
// broker clock at the append.
func TestMessages(t *testing.T) {
	t1 := time.Date(2020, 6, 7, 8, 9, 10, 11, time.UTC)
	tests := []struct {
		name string
		msg  model.Message
		want model.Record // Topic, Partition and Offset are filled in
	}{
		{"payload only", model.Message{Payload: "p"}, model.Record{Payload: "p", Time: t0}},
		{"empty message", model.Message{}, model.Record{Time: t0}},
		{"key", model.Message{Key: "k", Payload: "p"}, model.Record{Key: "k", Payload: "p", Time: t0}},
		{"headers in order, duplicates kept", model.Message{Headers: []model.Header{{"b", "1"}, {"a", ""}, {"b", "2"}}},
			model.Record{Headers: []model.Header{{"b", "1"}, {"a", ""}, {"b", "2"}}, Time: t0}},
		{"empty non-nil headers come back nil", model.Message{Headers: []model.Header{}}, model.Record{Time: t0}},
		{"given time", model.Message{Payload: "p", Time: t1}, model.Record{Payload: "p", Time: t1}},
		{"given time before the clock's", model.Message{Time: t1.Add(-100 * 365 * 24 * time.Hour)},
			model.Record{Time: t1.Add(-100 * 365 * 24 * time.Hour)}},
		{"everything", model.Message{Key: "k", Headers: []model.Header{{"x", "y"}}, Payload: "p", Time: t1},
			model.Record{Key: "k", Headers: []model.Header{{"x", "y"}}, Payload: "p", Time: t1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFx(t, 5)
			f.create("t", 2)
			f.publish("t", 1, "before")
			require.Equal(t, int64(1), f.publishMsg("t", 1, tt.msg))
			f.join("t", "g", "m")
			want := tt.want
			want.Topic, want.Partition, want.Offset, want.Attempt = "t", 1, 1, 0
			require.Equal(t, want, f.retained("t", 1)[1])
			rs := f.poll("t", "g", "m", 64)
			require.True(t, f.ack("t", "g", "m", 1, 0))
			rs = f.poll("t", "g", "m", 64)
			want.Attempt = 1
			require.Equal(t, []model.Record{want}, rs)
			require.NoError(t, f.b.CheckInvariants())
		})
	}

	t.Run("headers are copied in and out", func(t *testing.T) {
		f := newFx(t, 5)
		f.create("t", 1)
		hs := []model.Header{{"a", "1"}, {"b", "2"}}
		f.publishMsg("t", 0, model.Message{Headers: hs})
		hs[0].Value = "changed by the producer"
		f.join("t", "g", "m")
		rs := f.poll("t", "g", "m", 1)
		require.Equal(t, []model.Header{{"a", "1"}, {"b", "2"}}, rs[0].Headers)
		saved := f.b.Clone()
		rs[0].Headers[1].Key = "changed by the consumer"
		f.retained("t", 0)[0].Headers[0].Key = "changed by an inspector"
		requireUnchanged(t, saved, f.b)
		require.True(t, f.retry("t", "g", "m", 0, 0))
		require.Equal(t, []model.Header{{"a", "1"}, {"b", "2"}}, f.poll("t", "g", "m", 1)[0].Headers)
	})

	t.Run("Publish is PublishMessage of a payload", func(t *testing.T) {
		x, y := newFx(t, 2), newFx(t, 2)
		for _, f := range []fx{x, y} {
			f.create("t", 1)
		}
		for _, s := range []string{"a", "", "c"} {
			require.Equal(t, x.publish("t", 0, s), y.publishMsg("t", 0, model.Message{Payload: s}))
		}
		require.True(t, x.b.Equal(y.b))
		require.Equal(t, x.b.String(), y.b.String())
	})

	t.Run("the clock is read once per appended record without a time", func(t *testing.T) {
		c := testclock.New()
		f := newFx(t, 2, model.WithClock(c.Now))
		f.create("t", 1)
		f.publish("t", 0, "a")
		require.Equal(t, int64(1), c.Reads())
		c.Advance(time.Second)
		f.publishMsg("t", 0, model.Message{Time: t0})
		require.Equal(t, int64(1), c.Reads(), "a message with a time")
		require.Equal(t, int64(-1), f.publish("t", 0, "full"))
		require.Equal(t, int64(1), c.Reads(), "a refused publish")
		_, err := f.b.Publish("t", 5, "x")
		require.ErrorIs(t, err, model.ErrInvalidArgument)
		require.Equal(t, int64(1), c.Reads(), "an invalid publish")
		require.Equal(t, []time.Time{t0, t0}, []time.Time{f.retained("t", 0)[0].Time, f.retained("t", 0)[1].Time})
	})
}

// TestMaxMessageBytes checks the size bound of rule 15 at its boundary.
func TestMaxMessageBytes(t *testing.T) {
	const limit = 10
	tests := []struct {
		name string
		msg  model.Message
		wok  bool
	}{
		{"empty", model.Message{}, true},
		{"payload at the limit", model.Message{Payload: strings.Repeat("p", limit)}, true},
		{"payload over the limit", model.Message{Payload: strings.Repeat("p", limit+1)}, false},
		{"key and payload at the limit", model.Message{Key: "kkkk", Payload: "pppppp"}, true},
		{"key and payload over", model.Message{Key: "kkkkk", Payload: "pppppp"}, false},
		{"header keys and values count", model.Message{Headers: []model.Header{{"hhh", "vvv"}, {"hh", "vv"}}}, true},
		{"header keys and values over", model.Message{Headers: []model.Header{{"hhh", "vvv"}, {"hh", "vvv"}}}, false},
		{"all four at the limit", model.Message{Key: "k", Headers: []model.Header{{"h", "vv"}}, Payload: "pppppp"}, true},
		{"all four over", model.Message{Key: "kk", Headers: []model.Header{{"h", "vv"}}, Payload: "pppppp"}, false},
		{"the time does not count", model.Message{Payload: strings.Repeat("p", limit), Time: t0}, true},
		{"multi-byte runes count in bytes", model.Message{Payload: strings.Repeat("é", 5)}, true},
		{"multi-byte runes over", model.Message{Payload: strings.Repeat("é", 5) + "x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFx(t, 3, model.WithMaxMessageBytes(limit))
			f.create("t", 1)
			before := f.b.Clone()
			off, err := f.b.PublishMessage("t", 0, tt.msg)
			if tt.wok {
				require.NoError(t, err)
				require.Equal(t, int64(0), off)
				return
			}
			require.ErrorIs(t, err, model.ErrInvalidArgument)
			require.Equal(t, int64(-1), off)
			requireUnchanged(t, before, f.b)
		})
	}

	t.Run("the size is checked before fullness", func(t *testing.T) {
		f := newFx(t, 1, model.WithMaxMessageBytes(1))
		f.create("t", 1)
		f.publish("t", 0, "a")
		require.Equal(t, int64(-1), f.publish("t", 0, "b"))
		off, err := f.b.Publish("t", 0, "bb")
		require.ErrorIs(t, err, model.ErrInvalidArgument)
		require.Equal(t, int64(-1), off)
	})
}

// TestAttempts checks rule 16 through one scenario: the count of the record
// at the committed offset grows with each delivery (first, after Retry,
// after a rebalance cancelled it, after an ack timeout) and Ack and Seek
// reset it.
func TestAttempts(t *testing.T) {
	c := testclock.New()
	f := newFx(t, 5, model.WithAckTimeout(time.Minute), model.WithReplayWindow(2), model.WithClock(c.Now))
	f.create("t", 1)
	f.publish("t", 0, "x")
	f.publish("t", 0, "y")
	f.join("t", "g", "b")

	type polled struct {
		member string
		offset int64
	}
	steps := []struct {
		name      string
		do        func()
		wpoll     []polled // what each member polls after the step, if anything
		wattempts int32    // Attempts after the step (and its poll)
	}{
		{"nothing delivered yet", func() {}, nil, 0},
		{"first delivery", func() {}, []polled{{"b", 0}}, 1},
		{"Retry keeps the count", func() { require.True(t, f.retry("t", "g", "b", 0, 0)) }, nil, 1},
		{"redelivery after Retry", func() {}, []polled{{"b", 0}}, 2},
		{"a rebalance cancels the delivery, keeps the count", func() {
			require.Equal(t, []int32{0}, f.join("t", "g", "a")) // a sorts first and takes p0
			require.False(t, f.inFlight("t", "g", 0))
		}, nil, 2},
		{"redelivery to the new owner", func() {}, []polled{{"a", 0}}, 3},
		{"not yet timed out", func() { c.Advance(time.Minute - time.Nanosecond) }, nil, 3},
		{"timed out: redelivered", func() { c.Advance(time.Nanosecond) }, []polled{{"a", 0}}, 4},
		{"Ack resets", func() { require.True(t, f.ack("t", "g", "a", 0, 0)) }, nil, 0},
		{"the next record's first delivery", func() {}, []polled{{"a", 1}}, 1},
		{"Seek back resets", func() { require.True(t, f.seek("t", "g", 0, 0)) }, nil, 0},
		{"the replayed record's first delivery", func() {}, []polled{{"a", 0}}, 1},
		{"Seek to the committed offset resets and cancels", func() { require.True(t, f.seek("t", "g", 0, 0)) }, nil, 0},
		{"delivered again, counted from 1", func() {}, []polled{{"a", 0}}, 1},
		{"Leave moves the partition back, the count stays", func() { require.True(t, f.leave("t", "g", "a")) }, nil, 1},
		{"redelivery to the old owner", func() {}, []polled{{"b", 0}}, 2},
		{"the last member leaves, the count stays", func() { require.True(t, f.leave("t", "g", "b")) }, nil, 2},
		{"a new member gets the next attempt", func() { f.join("t", "g", "c") }, []polled{{"c", 0}}, 3},
	}
	for _, st := range steps {
		st.do()
		for _, p := range st.wpoll {
			rs := f.poll("t", "g", p.member, 64)
			require.Len(t, rs, 1, st.name)
			require.Equal(t, p.offset, rs[0].Offset, st.name)
			require.Equal(t, st.wattempts, rs[0].Attempt, st.name)
		}
		require.Equal(t, st.wattempts, f.attempts("t", "g", 0), st.name)
		d := f.describe("t")
		require.Equal(t, st.wattempts, d.Groups[0].Partitions[0].Attempts, st.name)
		require.NoError(t, f.b.CheckInvariants(), st.name)
	}
	require.Equal(t, int32(0), f.retained("t", 0)[0].Attempt, "Retained is not a delivery")
}

// TestAttemptsPerGroup checks that each group counts its own deliveries.
func TestAttemptsPerGroup(t *testing.T) {
	f := newFx(t, 5)
	f.create("t", 1)
	f.publish("t", 0, "x")
	f.join("t", "g", "m")
	f.join("t", "h", "m")
	f.poll("t", "g", "m", 1)
	require.True(t, f.retry("t", "g", "m", 0, 0))
	require.Equal(t, []model.Record{recN("t", 0, 0, "x", 2)}, f.poll("t", "g", "m", 1))
	require.Equal(t, []model.Record{rec("t", 0, 0, "x")}, f.poll("t", "h", "m", 1))
}

// TestGroups checks rule 17: CreateGroup, Join's default assignor and
// DeleteGroup.
func TestGroups(t *testing.T) {
	setup := func(t *testing.T) fx {
		f := newFx(t, 3)
		f.create("t", 2)
		f.publish("t", 0, "a")
		f.publish("t", 0, "b")
		f.join("t", "live", "m") // live acks offset 0 of p0
		f.poll("t", "live", "m", 1)
		require.True(t, f.ack("t", "live", "m", 0, 0))
		return f
	}

	t.Run("CreateGroup makes an empty group at the log start", func(t *testing.T) {
		f := setup(t)
		require.True(t, f.createGroup("t", "new", model.Range))
		require.Equal(t, model.GroupDescription{Group: "new", Assignor: "Range", Members: []string{},
			Partitions: []model.GroupPartition{{Partition: 0, Committed: 1, Lag: 1}, {Partition: 1}}}, f.group("t", "new"))
		require.Equal(t, []string{"live", "new"}, f.groups("t"))
		require.NoError(t, f.b.CheckInvariants())
	})
	t.Run("CreateGroup of an existing group changes nothing, the assignor included", func(t *testing.T) {
		f := setup(t)
		f.createGroup("t", "new", model.Range)
		before := f.b.Clone()
		require.False(t, f.createGroup("t", "new", model.Sticky))
		require.False(t, f.createGroup("t", "live", model.Sticky))
		requireUnchanged(t, before, f.b)
		require.Equal(t, "RoundRobin", f.group("t", "live").Assignor)
	})
	t.Run("Join of an absent group creates it with RoundRobin", func(t *testing.T) {
		f := setup(t)
		f.join("t", "joined", "m")
		require.Equal(t, "RoundRobin", f.group("t", "joined").Assignor)
	})
	t.Run("a created group holds records back like any group", func(t *testing.T) {
		f := setup(t)
		f.createGroup("t", "new", model.Sticky) // at the log start, 1
		require.Equal(t, int64(2), f.publish("t", 0, "c"))
		require.Equal(t, int64(3), f.publish("t", 0, "d"))
		require.Equal(t, int64(-1), f.publish("t", 0, "e"))
		f.poll("t", "live", "m", 1)
		require.True(t, f.ack("t", "live", "m", 0, 1))
		require.Equal(t, int64(1), f.logStart("t", 0), "new holds offset 1")
		require.Equal(t, int64(-1), f.publish("t", 0, "e"))
	})

	deletes := []struct {
		name    string
		group   string
		prepare func(f fx)
		wok     bool
		werr    error
	}{
		{"absent group", "absent", func(fx) {}, false, nil},
		{"group with members", "live", func(fx) {}, false, model.ErrGroupNotEmpty},
		{"memberless group", "old", func(f fx) { f.join("t", "old", "m"); f.leave("t", "old", "m") }, true, nil},
		{"created group", "new", func(f fx) { f.createGroup("t", "new", model.Sticky) }, true, nil},
		{"group deleted twice", "old", func(f fx) {
			f.createGroup("t", "old", model.Sticky)
			require.True(t, f.deleteGroup("t", "old"))
		}, false, nil},
	}
	for _, tt := range deletes {
		t.Run("DeleteGroup/"+tt.name, func(t *testing.T) {
			f := setup(t)
			tt.prepare(f)
			before := f.b.Clone()
			ok, err := f.b.DeleteGroup("t", tt.group)
			require.Equal(t, tt.wok, ok)
			if tt.werr != nil {
				require.ErrorIs(t, err, tt.werr)
				require.NotErrorIs(t, err, model.ErrInvalidArgument)
			} else {
				require.NoError(t, err)
			}
			if !tt.wok {
				requireUnchanged(t, before, f.b)
				return
			}
			require.NotContains(t, f.groups("t"), tt.group)
			_, err = f.b.Members("t", tt.group)
			require.ErrorIs(t, err, model.ErrUnknownGroup)
			require.NoError(t, f.b.CheckInvariants())
		})
	}

	t.Run("a deleted name used again starts a fresh group", func(t *testing.T) {
		f := setup(t)
		f.createGroup("t", "old", model.Sticky)
		f.join("t", "old", "m")
		f.poll("t", "old", "m", 64)
		require.True(t, f.retry("t", "old", "m", 0, 1)) // attempts 1 at offset 1
		require.True(t, f.leave("t", "old", "m"))
		require.True(t, f.deleteGroup("t", "old"))
		require.Equal(t, int64(1), f.logStart("t", 0), "live alone now holds the log")

		f.join("t", "old", "m")
		require.Equal(t, model.GroupDescription{Group: "old", Assignor: "RoundRobin", Members: []string{"m"},
			Partitions: []model.GroupPartition{
				{Partition: 0, Owner: "m", Committed: 1, Lag: 1},
				{Partition: 1, Owner: "m"},
			}}, f.group("t", "old"))
		require.Equal(t, []model.Record{rec("t", 0, 1, "b")}, f.poll("t", "old", "m", 64))

		require.True(t, f.leave("t", "old", "m"))
		require.True(t, f.deleteGroup("t", "old"))
		require.True(t, f.createGroup("t", "old", model.Range))
		require.Equal(t, "Range", f.group("t", "old").Assignor)
		require.Equal(t, int32(0), f.attempts("t", "old", 0))
	})
}

// TestDeleteGroupReleasesRetention is the scenario: one join and
// leave on a capacity-5 topic leaves an abandoned group behind; a live group
// then consumes everything, yet the partition fills up and every publish
// returns -1, until the abandoned group is deleted.
func TestDeleteGroupReleasesRetention(t *testing.T) {
	for _, window := range []int32{0, 2} {
		t.Run("window "+itoa(int64(window)), func(t *testing.T) {
			f := newFx(t, 5, model.WithReplayWindow(window))
			f.create("t", 1)
			f.join("t", "abandoned", "m")
			require.True(t, f.leave("t", "abandoned", "m"))
			f.join("t", "live", "m")
			for i := range int64(5) {
				require.Equal(t, i, f.publish("t", 0, "x"))
				require.Len(t, f.poll("t", "live", "m", 64), 1)
				require.True(t, f.ack("t", "live", "m", 0, i))
			}
			for range 3 {
				require.Equal(t, int64(-1), f.publish("t", 0, "x"), "the abandoned group holds every record")
			}
			require.Equal(t, int64(0), f.logStart("t", 0))

			require.True(t, f.deleteGroup("t", "abandoned"))
			require.Equal(t, 5-int64(window), f.logStart("t", 0), "deleting releases at once, but for the window")
			for i := int64(5); i < 12; i++ {
				require.Equal(t, i, f.publish("t", 0, "x"))
				require.Len(t, f.poll("t", "live", "m", 64), 1)
				require.True(t, f.ack("t", "live", "m", 0, i))
			}
			require.NoError(t, f.b.CheckInvariants())
		})
	}
}

// TestCreateGroupAt: a StartLatest group starts at each log end and, when
// no other group is behind it, frees what it starts past but the window;
// invalid starts are refused and change nothing.
func TestCreateGroupAt(t *testing.T) {
	for _, window := range []int32{0, 1} {
		t.Run("window "+itoa(int64(window)), func(t *testing.T) {
			f := newFx(t, 3, model.WithReplayWindow(window))
			f.create("t", 2)
			for range 3 {
				f.publish("t", 0, "x")
			}
			ok, err := f.b.CreateGroupAt("t", "g", model.RoundRobin, model.StartLatest)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, 3-int64(window), f.logStart("t", 0))
			c, err := f.b.Committed("t", "g", 0)
			require.NoError(t, err)
			require.Equal(t, int64(3), c)
			require.Equal(t, int64(3), f.publish("t", 0, "y"))
			f.join("t", "g", "m")
			require.Len(t, f.poll("t", "g", "m", 64), 1)
			require.NoError(t, f.b.CheckInvariants())
		})
	}
	f := newFx(t, 3)
	f.create("t", 1)
	f.publish("t", 0, "x")
	before := f.b.Clone()
	for _, start := range []model.GroupStart{2, 255} {
		ok, err := f.b.CreateGroupAt("t", "g", model.RoundRobin, start)
		require.ErrorIs(t, err, model.ErrInvalidArgument)
		require.False(t, ok)
	}
	ok, err := f.b.CreateGroupAt("t", "g", nil, model.StartLatest)
	require.ErrorIs(t, err, model.ErrInvalidArgument)
	require.False(t, ok)
	require.True(t, before.Equal(f.b), "invalid calls changed the state")
}

// TestAssignors checks the three built-in assignors of rule 18 through Join.
func TestAssignors(t *testing.T) {
	tests := []struct {
		name       string
		a          model.Assignor
		partitions int32
		joins      []string // in join order
		want       map[string][]int32
	}{
		{"round-robin P=7 n=2", model.RoundRobin, 7, []string{"b", "a"}, map[string][]int32{"a": {0, 2, 4, 6}, "b": {1, 3, 5}}},
		{"range P=7 n=2", model.Range, 7, []string{"b", "a"}, map[string][]int32{"a": {0, 1, 2, 3}, "b": {4, 5, 6}}},
		{"range P=7 n=3", model.Range, 7, []string{"a", "b", "c"}, map[string][]int32{"a": {0, 1, 2}, "b": {3, 4}, "c": {5, 6}}},
		{"range n > P", model.Range, 2, []string{"a", "b", "c"}, map[string][]int32{"a": {0}, "b": {1}, "c": {}}},
		{"range P=1", model.Range, 1, []string{"b", "a"}, map[string][]int32{"a": {0}, "b": {}}},
		// Sticky: a owns all; b takes the upper half; c takes one of each.
		{"sticky P=6 a b c", model.Sticky, 6, []string{"a", "b", "c"}, map[string][]int32{"a": {0, 1}, "b": {3, 4}, "c": {2, 5}}},
		{"sticky P=6 c b a", model.Sticky, 6, []string{"c", "b", "a"}, map[string][]int32{"a": {2, 5}, "b": {3, 4}, "c": {0, 1}}},
		{"sticky P=7 a b", model.Sticky, 7, []string{"a", "b"}, map[string][]int32{"a": {0, 1, 2, 3}, "b": {4, 5, 6}}},
		{"sticky n > P", model.Sticky, 2, []string{"a", "b", "c"}, map[string][]int32{"a": {0}, "b": {1}, "c": {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFx(t, 5)
			f.create("t", tt.partitions)
			f.createGroup("t", "g", tt.a)
			for _, m := range tt.joins {
				f.join("t", "g", m)
			}
			require.Equal(t, tt.want, f.assignment("t", "g"))
			for m, ps := range tt.want {
				require.Equal(t, ps, f.join("t", "g", m), "Join returns the member's partitions")
			}
			require.NoError(t, f.b.CheckInvariants())
		})
	}
}

// TestStickyKeepsDeliveries checks that under Sticky a join or leave
// cancels only the deliveries of the partitions that move.
func TestStickyKeepsDeliveries(t *testing.T) {
	f := newFx(t, 5)
	f.create("t", 6)
	for p := range int32(6) {
		f.publish("t", p, "x")
	}
	f.createGroup("t", "g", model.Sticky)
	f.join("t", "g", "a")
	f.join("t", "g", "b")
	require.Len(t, f.poll("t", "g", "a", 64), 3)
	require.Len(t, f.poll("t", "g", "b", 64), 3)
	f.join("t", "g", "c") // c takes 2 from a and 5 from b
	for p, w := range []bool{true, true, false, true, true, false} {
		require.Equal(t, w, f.inFlight("t", "g", int32(p)), "p%d", p)
	}
	require.True(t, f.leave("t", "g", "c")) // 2 and 5 return, nothing else moves
	for p, w := range []bool{true, true, false, true, true, false} {
		require.Equal(t, w, f.inFlight("t", "g", int32(p)), "p%d", p)
	}
	require.Equal(t, map[string][]int32{"a": {0, 1, 2}, "b": {3, 4, 5}}, f.assignment("t", "g"))
}

// TestSetAssignor checks rule 18's SetAssignor, switching between all three
// assignors: the rebalance happens at once, moved partitions lose their
// deliveries, kept ones keep them, and committed offsets and attempts stay.
func TestSetAssignor(t *testing.T) {
	f := newFx(t, 5)
	f.create("t", 4)
	for p := range int32(4) {
		f.publish("t", p, "x")
	}
	f.join("t", "g", "a")
	f.join("t", "g", "b")
	f.poll("t", "g", "a", 64)
	f.poll("t", "g", "b", 64)

	steps := []struct {
		a          model.Assignor
		want       map[string][]int32
		winFlight  []bool
		wattempts  []int32
		wassignor  string
		pollsAfter bool
	}{
		// round-robin: a [0 2], b [1 3], everything in flight.
		{model.Range, map[string][]int32{"a": {0, 1}, "b": {2, 3}},
			[]bool{true, false, false, true}, []int32{1, 1, 1, 1}, "Range", true},
		{model.Range, map[string][]int32{"a": {0, 1}, "b": {2, 3}},
			[]bool{true, true, true, true}, []int32{1, 2, 2, 1}, "Range", false},
		{model.Sticky, map[string][]int32{"a": {0, 1}, "b": {2, 3}},
			[]bool{true, true, true, true}, []int32{1, 2, 2, 1}, "Sticky", false},
		{model.RoundRobin, map[string][]int32{"a": {0, 2}, "b": {1, 3}},
			[]bool{true, false, false, true}, []int32{1, 2, 2, 1}, "RoundRobin", true},
		{model.Sticky, map[string][]int32{"a": {0, 2}, "b": {1, 3}},
			[]bool{true, true, true, true}, []int32{1, 3, 3, 1}, "Sticky", false},
	}
	for i, st := range steps {
		before := f.b.Clone()
		require.True(t, f.setAssignor("t", "g", st.a), "step %d", i)
		require.Equal(t, st.want, f.assignment("t", "g"), "step %d", i)
		d := f.describe("t")
		require.Equal(t, st.wassignor, d.Groups[0].Assignor, "step %d", i)
		for p := range int32(4) {
			require.Equal(t, st.winFlight[p], f.inFlight("t", "g", p), "step %d p%d", i, p)
			require.Equal(t, st.wattempts[p], f.attempts("t", "g", p), "step %d p%d", i, p)
			require.Equal(t, int64(0), f.committed("t", "g", p), "step %d p%d", i, p)
		}
		if slices.Equal(st.winFlight, []bool{true, true, true, true}) && i > 0 && steps[i-1].wassignor == st.wassignor {
			requireUnchanged(t, before, f.b) // same assignor again: nothing moves
		}
		require.NoError(t, f.b.CheckInvariants())
		if st.pollsAfter {
			f.poll("t", "g", "a", 64)
			f.poll("t", "g", "b", 64)
		}
	}

	t.Run("absent group", func(t *testing.T) {
		before := f.b.Clone()
		require.False(t, f.setAssignor("t", "absent", model.Range))
		requireUnchanged(t, before, f.b)
	})
	t.Run("memberless group: only the assignor changes, later joins use it", func(t *testing.T) {
		f := newFx(t, 5)
		f.create("t", 4)
		f.join("t", "h", "a")
		f.leave("t", "h", "a")
		require.True(t, f.setAssignor("t", "h", model.Range))
		require.Equal(t, "Range", f.describe("t").Groups[0].Assignor)
		f.join("t", "h", "a")
		f.join("t", "h", "b")
		require.Equal(t, map[string][]int32{"a": {0, 1}, "b": {2, 3}}, f.assignment("t", "h"))
		require.True(t, f.leave("t", "h", "a"), "Leave uses the group's assignor too")
		require.Equal(t, map[string][]int32{"b": {0, 1, 2, 3}}, f.assignment("t", "h"))
	})
}

// TestInvalidAssignment checks rule 18's last sentence: a user assignor
// whose answer is not one current member per partition makes Join, Leave,
// SetAssignor and AddPartitions return ErrInvalidAssignment (not
// ErrInvalidArgument) and change nothing.
func TestInvalidAssignment(t *testing.T) {
	calls := []struct {
		name  string
		call  func(f fx, bad model.Assignor) (any, error)
		wzero any
	}{
		{"Join of a new member", func(f fx, _ model.Assignor) (any, error) { return f.b.Join("t", "g", "c") }, []int32(nil)},
		{"Join of a first member", func(f fx, bad model.Assignor) (any, error) {
			f.createGroup("t", "empty", bad)
			return f.b.Join("t", "empty", "a")
		}, []int32(nil)},
		{"Leave", func(f fx, _ model.Assignor) (any, error) { return f.b.Leave("t", "g", "a") }, false},
		{"SetAssignor", func(f fx, bad model.Assignor) (any, error) { return f.b.SetAssignor("t", "other", bad) }, false},
		{"AddPartitions", func(f fx, _ model.Assignor) (any, error) { return f.b.AddPartitions("t", 2) }, int32(0)},
	}
	for _, fault := range badFaults {
		for _, c := range calls {
			t.Run(fault+"/"+c.name, func(t *testing.T) {
				ok := true
				bad := badAssignor{fault: fault, ok: &ok}
				f := newFx(t, 5)
				f.create("t", 3)
				for p := range int32(3) {
					f.publish("t", p, "x")
				}
				f.createGroup("t", "g", bad)
				f.join("t", "g", "a")
				f.join("t", "g", "b")
				f.join("t", "other", "a") // a good group, for AddPartitions
				f.join("t", "other", "b")
				f.poll("t", "g", "a", 64)
				f.poll("t", "other", "b", 64)
				ok = false
				if c.name == "Join of a first member" {
					f.createGroup("t", "empty", bad)
				}
				before := f.b.Clone()
				got, err := c.call(f, bad)
				require.ErrorIs(t, err, model.ErrInvalidAssignment)
				require.NotErrorIs(t, err, model.ErrInvalidArgument)
				require.Equal(t, c.wzero, got)
				requireUnchanged(t, before, f.b)
			})
		}
	}

	t.Run("Join does not create a group when the assignment fails", func(t *testing.T) {
		// Join creates groups with RoundRobin, which never fails; a failing
		// Join of a created group leaves the group memberless.
		ok := false
		f := newFx(t, 5)
		f.create("t", 1)
		f.createGroup("t", "g", badAssignor{fault: "stranger", ok: &ok})
		_, err := f.b.Join("t", "g", "a")
		require.ErrorIs(t, err, model.ErrInvalidAssignment)
		members, err := f.b.Members("t", "g")
		require.NoError(t, err)
		require.Equal(t, []string{}, members)
	})
	t.Run("the last member leaving never asks the assignor", func(t *testing.T) {
		ok := true
		f := newFx(t, 5)
		f.create("t", 1)
		f.createGroup("t", "g", badAssignor{fault: "panic", ok: &ok})
		f.join("t", "g", "a")
		ok = false
		require.True(t, f.leave("t", "g", "a"))
		require.NoError(t, f.b.CheckInvariants())
	})
	t.Run("a memberless group takes any assignor without asking it", func(t *testing.T) {
		ok := false
		f := newFx(t, 5)
		f.create("t", 1)
		f.createGroup("t", "g", model.Range)
		require.True(t, f.setAssignor("t", "g", badAssignor{fault: "panic", ok: &ok}))
		require.Equal(t, int32(3), f.addPartitions("t", 2))
	})
}

// TestAddPartitions checks rule 19.
func TestAddPartitions(t *testing.T) {
	invalid := []struct {
		name  string
		start int32
		count int32
	}{
		{"zero", 2, 0},
		{"negative", 2, -1},
		{"MinInt32", 2, math.MinInt32},
		{"MaxInt32", 2, math.MaxInt32},
		{"one past 64", 2, 63},
		{"a full topic", 64, 1},
	}
	for _, tt := range invalid {
		t.Run("invalid/"+tt.name, func(t *testing.T) {
			f := newFx(t, 5)
			f.create("t", tt.start)
			f.join("t", "g", "m")
			before := f.b.Clone()
			n, err := f.b.AddPartitions("t", tt.count)
			require.ErrorIs(t, err, model.ErrInvalidArgument)
			require.Zero(t, n)
			requireUnchanged(t, before, f.b)
		})
	}
	t.Run("up to 64", func(t *testing.T) {
		f := newFx(t, 5)
		f.create("t", 2)
		require.Equal(t, int32(64), f.addPartitions("t", 62))
		n, err := f.b.PartitionCount("t")
		require.NoError(t, err)
		require.Equal(t, int32(64), n)
	})

	// Every group rebalances at the same instant: a:[0] b:[1] before.
	groups := []struct {
		a          model.Assignor
		want       map[string][]int32
		wkeptFirst bool // p1 keeps its delivery
	}{
		{model.RoundRobin, map[string][]int32{"a": {0, 2}, "b": {1, 3}}, true},
		{model.Range, map[string][]int32{"a": {0, 1}, "b": {2, 3}}, false},
		{model.Sticky, map[string][]int32{"a": {0, 2}, "b": {1, 3}}, true},
	}
	f := newFx(t, 5)
	f.create("t", 2)
	f.create("u", 1)
	for _, s := range []string{"x", "y"} {
		f.publish("t", 0, s)
		f.publish("t", 1, s)
	}
	f.join("t", "idle", "z")
	f.leave("t", "idle", "z")
	for _, g := range groups {
		f.createGroup("t", g.a.Name(), g.a)
	}
	for _, g := range groups {
		f.join("t", g.a.Name(), "a")
		f.join("t", g.a.Name(), "b")
		f.poll("t", g.a.Name(), "a", 64)
		f.poll("t", g.a.Name(), "b", 64)
		require.True(t, f.ack("t", g.a.Name(), "b", 1, 0))
		f.poll("t", g.a.Name(), "b", 64)
	}
	uBefore := f.describe("u")

	require.Equal(t, int32(4), f.addPartitions("t", 2))
	require.NoError(t, f.b.CheckInvariants())
	for _, g := range groups {
		t.Run("rebalanced/"+g.a.Name(), func(t *testing.T) {
			require.Equal(t, g.want, f.assignment("t", g.a.Name()))
			require.True(t, f.inFlight("t", g.a.Name(), 0), "a keeps p0")
			require.Equal(t, g.wkeptFirst, f.inFlight("t", g.a.Name(), 1))
			require.Equal(t, int64(1), f.committed("t", g.a.Name(), 1), "committed offsets are kept")
			for p := int32(2); p < 4; p++ {
				require.Equal(t, int64(0), f.committed("t", g.a.Name(), p))
				require.False(t, f.inFlight("t", g.a.Name(), p))
				require.Equal(t, int32(0), f.attempts("t", g.a.Name(), p))
			}
		})
	}
	d := f.describe("t")
	require.Equal(t, []model.PartitionDescription{
		{Partition: 0, LogStartOffset: 0, LogEndOffset: 2},
		{Partition: 1, LogStartOffset: 0, LogEndOffset: 2},
		{Partition: 2}, {Partition: 3},
	}, d.Partitions, "idle holds both logs at 0")
	idle := slices.IndexFunc(d.Groups, func(g model.GroupDescription) bool { return g.Group == "idle" })
	require.GreaterOrEqual(t, idle, 0, "group idle is described")
	require.Equal(t, []model.GroupPartition{
		{Partition: 0, Committed: 0, Lag: 2}, {Partition: 1, Committed: 0, Lag: 2},
		{Partition: 2}, {Partition: 3},
	}, d.Groups[idle].Partitions, "a memberless group gets the new partitions, owned by nobody")
	require.Equal(t, uBefore, f.describe("u"), "other topics are untouched")

	require.Equal(t, int64(0), f.publish("t", 3, "new"))
	require.Equal(t, []model.Record{rec("t", 3, 0, "new")}, f.poll("t", "RoundRobin", "b", 64), "p1 is still in flight")
}

// TestSeek checks rule 20: the order of the checks, and what a successful
// seek changes. The setup: capacity 4, window 1; p0 holds a b c at 0 1 2;
// g acked 0 and 1, so log start is 1 (b is the window), committed 2, and c
// is in flight to m.
func TestSeek(t *testing.T) {
	setup := func(t *testing.T) fx {
		f := newFx(t, 4, model.WithReplayWindow(1))
		f.create("t", 2)
		f.join("t", "g", "m")
		for i, s := range []string{"a", "b", "c"} {
			f.publish("t", 0, s)
			if i < 2 {
				f.poll("t", "g", "m", 64)
				require.True(t, f.ack("t", "g", "m", 0, int64(i)))
			}
		}
		f.poll("t", "g", "m", 64)
		require.Equal(t, int64(1), f.logStart("t", 0))
		require.True(t, f.inFlight("t", "g", 0))
		return f
	}
	tests := []struct {
		name      string
		group     string
		partition int32
		offset    int64
		wok       bool
		werr      error
		wstart    int64 // log start of p0 after a successful seek
	}{
		{"negative offset", "g", 0, -1, false, model.ErrInvalidArgument, 0},
		{"negative offset, absent group", "absent", 0, -1, false, model.ErrInvalidArgument, 0},
		{"partition out of range, absent group", "absent", 2, 0, false, model.ErrInvalidArgument, 0},
		{"invalid group id", "g!", 0, 1, false, model.ErrInvalidArgument, 0},
		{"absent group, offset out of range", "absent", 0, 99, false, nil, 0},
		{"below the log start", "g", 0, 0, false, model.ErrOffsetOutOfRange, 0},
		{"past the log end", "g", 0, 4, false, model.ErrOffsetOutOfRange, 0},
		{"far past the log end", "g", 0, math.MaxInt64, false, model.ErrOffsetOutOfRange, 0},
		{"empty partition past its end", "g", 1, 1, false, model.ErrOffsetOutOfRange, 0},
		{"back into the window", "g", 0, 1, true, nil, 1},
		{"to the committed offset", "g", 0, 2, true, nil, 1},
		{"to the log end frees records", "g", 0, 3, true, nil, 2},
		{"empty partition at its end", "g", 1, 0, true, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			before := f.b.Clone()
			ok, err := f.b.Seek("t", tt.group, tt.partition, tt.offset)
			require.Equal(t, tt.wok, ok)
			if tt.werr != nil {
				require.ErrorIs(t, err, tt.werr)
			} else {
				require.NoError(t, err)
			}
			if !tt.wok {
				requireUnchanged(t, before, f.b)
				return
			}
			require.Equal(t, tt.offset, f.committed("t", tt.group, tt.partition))
			require.False(t, f.inFlight("t", tt.group, tt.partition))
			require.Equal(t, int32(0), f.attempts("t", tt.group, tt.partition))
			require.Equal(t, tt.wstart, f.logStart("t", 0))
			require.NoError(t, f.b.CheckInvariants())
		})
	}

	t.Run("the cancelled delivery cannot be acked", func(t *testing.T) {
		f := setup(t)
		require.True(t, f.seek("t", "g", 0, 1))
		require.False(t, f.ack("t", "g", "m", 0, 2))
		require.Equal(t, []model.Record{rec("t", 0, 1, "b")}, f.poll("t", "g", "m", 64))
	})
	t.Run("any caller, a memberless group", func(t *testing.T) {
		f := setup(t)
		require.True(t, f.leave("t", "g", "m"))
		require.True(t, f.seek("t", "g", 0, 3))
		require.Equal(t, int64(2), f.logStart("t", 0))
	})
	t.Run("a forward seek frees only what every group passed", func(t *testing.T) {
		f := setup(t)
		f.join("t", "h", "m") // h starts at the log start, 1
		require.True(t, f.seek("t", "g", 0, 3))
		require.Equal(t, int64(1), f.logStart("t", 0))
		require.True(t, f.seek("t", "h", 0, 3))
		require.Equal(t, int64(2), f.logStart("t", 0))
	})
}

// TestReplayWindowSpecExample is docs/contract.md's replay-window example,
// verbatim: capacity 3, WithReplayWindow(2), partition 0, group g with one
// member joined first.
func TestReplayWindowSpecExample(t *testing.T) {
	f := newFx(t, 3, model.WithReplayWindow(2))
	f.create("t", 1)
	f.join("t", "g", "m")
	require.Equal(t, int64(0), f.publish("t", 0, "a"))
	require.Equal(t, int64(1), f.publish("t", 0, "b"))
	require.Equal(t, int64(2), f.publish("t", 0, "c"), "full")
	for off := range int64(2) {
		require.Equal(t, []model.Record{rec("t", 0, off, []string{"a", "b"}[off])}, f.poll("t", "g", "m", 64))
		require.True(t, f.ack("t", "g", "m", 0, off))
	}
	require.Equal(t, int64(0), f.logStart("t", 0), "both stay retained as the window")
	require.Equal(t, int64(3), f.publish("t", 0, "d"))
	require.Equal(t, int64(1), f.logStart("t", 0), "publishing d removed offset 0")
	require.True(t, f.seek("t", "g", 0, 1))
	require.Equal(t, int64(-1), f.publish("t", 0, "e"), "retained 1 2 3, none fully committed")
	require.Equal(t, []model.Record{rec("t", 0, 1, "b")}, f.poll("t", "g", "m", 64))
	require.True(t, f.ack("t", "g", "m", 0, 1))
	require.Equal(t, int64(4), f.publish("t", 0, "e"))
	require.Equal(t, []model.Record{kept("t", 0, 2, "c"), kept("t", 0, 3, "d"), kept("t", 0, 4, "e")}, f.retained("t", 0))
	require.NoError(t, f.b.CheckInvariants())
}

// TestReplayWindow checks rule 21: after the same history (publish four
// records, g acks the first three), the log start and the fate of the next
// publishes depend on the window and on the other groups.
func TestReplayWindow(t *testing.T) {
	tests := []struct {
		name      string
		capacity  int32
		window    int32
		other     func(f fx) // runs before the history
		wstart    int64      // log start after the acks
		wpublish  []int64    // the next four publishes
		wstartEnd int64      // log start after them
	}{
		{"window 0 is rule 13", 4, 0, func(fx) {}, 3, []int64{4, 5, 6, -1}, 3},
		{"window 1", 4, 1, func(fx) {}, 2, []int64{4, 5, 6, -1}, 3},
		{"window 2", 4, 2, func(fx) {}, 1, []int64{4, 5, 6, -1}, 3},
		{"window = capacity", 4, 4, func(fx) {}, 0, []int64{4, 5, 6, -1}, 3},
		{"a memberless group holds everything", 4, 2, func(f fx) { f.join("t", "old", "m"); f.leave("t", "old", "m") },
			0, []int64{-1, -1, -1, -1}, 0},
		{"a created group holds everything", 4, 4, func(f fx) { f.createGroup("t", "new", model.Sticky) },
			0, []int64{-1, -1, -1, -1}, 0},
		{"a larger capacity", 10, 2, func(fx) {}, 1, []int64{4, 5, 6, 7}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFx(t, tt.capacity, model.WithReplayWindow(tt.window))
			f.create("t", 1)
			tt.other(f)
			f.join("t", "g", "m")
			for i := range int64(4) {
				require.Equal(t, i, f.publish("t", 0, "x"))
			}
			for i := range int64(3) {
				f.poll("t", "g", "m", 64)
				require.True(t, f.ack("t", "g", "m", 0, i))
			}
			require.Equal(t, tt.wstart, f.logStart("t", 0))
			require.NoError(t, f.b.CheckInvariants())
			var got []int64
			for range 4 {
				got = append(got, f.publish("t", 0, "y"))
				require.NoError(t, f.b.CheckInvariants())
			}
			require.Equal(t, tt.wpublish, got)
			require.Equal(t, tt.wstartEnd, f.logStart("t", 0))
		})
	}

	t.Run("no groups: a full partition refuses", func(t *testing.T) {
		f := newFx(t, 2, model.WithReplayWindow(2))
		f.create("t", 1)
		f.publish("t", 0, "a")
		f.publish("t", 0, "b")
		before := f.b.Clone()
		require.Equal(t, int64(-1), f.publish("t", 0, "c"))
		requireUnchanged(t, before, f.b)
	})
	t.Run("a new group starts at the log start, which includes the window", func(t *testing.T) {
		f := newFx(t, 5, model.WithReplayWindow(2))
		f.create("t", 1)
		f.join("t", "g", "m")
		for i, s := range []string{"a", "b", "c"} {
			f.publish("t", 0, s)
			f.poll("t", "g", "m", 64)
			require.True(t, f.ack("t", "g", "m", 0, int64(i)))
		}
		require.Equal(t, int64(1), f.logStart("t", 0))
		f.join("t", "late", "m")
		require.Equal(t, int64(1), f.committed("t", "late", 0))
		require.Equal(t, []model.Record{rec("t", 0, 1, "b")}, f.poll("t", "late", "m", 64))
	})
}

// TestAckTimeout checks rule 22 with a fake clock.
func TestAckTimeout(t *testing.T) {
	const d = 10 * time.Second
	setup := func(t *testing.T) (fx, *testclock.Clock) {
		c := testclock.New()
		f := newFx(t, 5, model.WithAckTimeout(d), model.WithClock(c.Now))
		f.create("t", 2)
		f.publishMsg("t", 0, model.Message{Payload: "a", Time: t0})
		f.publishMsg("t", 1, model.Message{Payload: "b", Time: t0})
		f.join("t", "g", "m")
		require.Len(t, f.poll("t", "g", "m", 1), 1) // p0 at t0
		return f, c
	}
	tests := []struct {
		name      string
		elapsed   time.Duration
		wredelivr bool
	}{
		{"no time", 0, false},
		{"just under", d - time.Nanosecond, false},
		{"exactly the timeout", d, true},
		{"long after", time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := setup(t)
			c.Advance(tt.elapsed)
			require.True(t, f.inFlight("t", "g", 0), "still in flight until redelivered")
			rs := f.poll("t", "g", "m", 1)
			if tt.wredelivr {
				require.Equal(t, []model.Record{{Topic: "t", Partition: 0, Offset: 0, Payload: "a", Time: t0, Attempt: 2}}, rs)
			} else {
				require.Equal(t, []model.Record{{Topic: "t", Partition: 1, Offset: 0, Payload: "b", Time: t0, Attempt: 1}}, rs,
					"p0 still blocks, p1 is next")
			}
			require.True(t, f.inFlight("t", "g", 0))
			require.NoError(t, f.b.CheckInvariants())
		})
	}

	t.Run("an expired delivery can still be acked", func(t *testing.T) {
		f, c := setup(t)
		c.Advance(time.Hour)
		require.True(t, f.ack("t", "g", "m", 0, 0))
		require.Equal(t, int64(1), f.committed("t", "g", 0))
	})
	t.Run("an expired delivery can still be retried, and counts once", func(t *testing.T) {
		f, c := setup(t)
		c.Advance(time.Hour)
		require.True(t, f.retry("t", "g", "m", 0, 0))
		rs := f.poll("t", "g", "m", 1)
		require.Equal(t, int32(2), rs[0].Attempt)
	})
	t.Run("the redelivery restarts the timeout", func(t *testing.T) {
		f, c := setup(t)
		c.Advance(d)
		require.Len(t, f.poll("t", "g", "m", 1), 1)
		c.Advance(d - time.Nanosecond)
		rs := f.poll("t", "g", "m", 1)
		require.Equal(t, int32(1), rs[0].Partition, "p0 is not expired again yet")
		c.Advance(time.Nanosecond)
		rs = f.poll("t", "g", "m", 64)
		require.Len(t, rs, 1, "p1 was delivered a nanosecond later")
		require.Equal(t, int32(0), rs[0].Partition)
		require.Equal(t, int32(3), rs[0].Attempt, "p0 expired for the second time")
	})
	t.Run("only the owner's poll redelivers", func(t *testing.T) {
		f, c := setup(t)
		c.Advance(time.Hour)
		f.join("t", "h", "m") // another group is independent
		require.Len(t, f.poll("t", "g", "other", 64), 0, "not a member")
		require.Equal(t, int32(1), f.attempts("t", "g", 0))
	})
	t.Run("the clock is read once per valid Poll", func(t *testing.T) {
		f, c := setup(t)
		reads := c.Reads()
		f.poll("t", "g", "m", 64)
		require.Equal(t, reads+1, c.Reads(), "two partitions, one reading")
		f.poll("t", "absent", "m", 64)
		require.Equal(t, reads+2, c.Reads(), "absent group")
		_, err := f.b.Poll("t", "g", "m", 0)
		require.ErrorIs(t, err, model.ErrInvalidArgument)
		require.Equal(t, reads+2, c.Reads(), "an invalid poll reads nothing")
		f.b.Ack("t", "g", "m", 0, 0)
		f.b.Retry("t", "g", "m", 1, 0)
		require.Equal(t, reads+2, c.Reads(), "Ack and Retry read nothing")
	})
	t.Run("without a timeout Poll never reads the clock", func(t *testing.T) {
		c := testclock.New()
		f := newFx(t, 5, model.WithClock(c.Now))
		f.create("t", 1)
		f.publishMsg("t", 0, model.Message{Time: t0})
		f.join("t", "g", "m")
		f.poll("t", "g", "m", 64)
		c.Advance(1000 * time.Hour)
		require.Len(t, f.poll("t", "g", "m", 64), 0, "no timeout: in flight forever")
		require.Zero(t, c.Reads())
	})
	t.Run("SetClock rebinds a clone's clock", func(t *testing.T) {
		f, c := setup(t)
		clone := f.b.Clone()
		late := t0.Add(time.Hour)
		clone.SetClock(func() time.Time { return late })
		rs, err := clone.Poll("t", "g", "m", 1)
		require.NoError(t, err)
		require.Equal(t, int32(2), rs[0].Attempt, "the clone sees the late clock")
		require.Equal(t, int32(1), f.poll("t", "g", "m", 1)[0].Partition, "the original still reads its own")
		_ = c
		clone.SetClock(nil)
		require.NoError(t, clone.CheckInvariants())
	})
}

// TestDescribe checks rule 23.
func TestDescribe(t *testing.T) {
	f := newFx(t, 5, model.WithReplayWindow(1))
	f.create("t", 2)
	before := f.b.Clone()
	require.Equal(t, model.TopicDescription{
		Topic:      "t",
		Partitions: []model.PartitionDescription{{Partition: 0}, {Partition: 1}},
		Groups:     []model.GroupDescription{},
	}, f.describe("t"), "no groups: an empty, non-nil slice")
	requireUnchanged(t, before, f.b)

	for _, s := range []string{"a", "b", "c"} {
		f.publish("t", 0, s)
	}
	f.join("t", "g", "m")
	f.join("t", "g", "n")
	f.poll("t", "g", "m", 64)
	require.True(t, f.ack("t", "g", "m", 0, 0))
	f.poll("t", "g", "m", 64)
	require.True(t, f.retry("t", "g", "m", 0, 1))
	f.poll("t", "g", "m", 64)
	f.createGroup("t", "a-first", model.Sticky)
	f.publish("t", 1, "z")

	want := model.TopicDescription{
		Topic: "t",
		Partitions: []model.PartitionDescription{
			{Partition: 0, LogStartOffset: 0, LogEndOffset: 3},
			{Partition: 1, LogStartOffset: 0, LogEndOffset: 1},
		},
		Groups: []model.GroupDescription{
			{Group: "a-first", Assignor: "Sticky", Members: []string{}, Partitions: []model.GroupPartition{
				{Partition: 0, Owner: "", Committed: 0, Lag: 3},
				{Partition: 1, Owner: "", Committed: 0, Lag: 1},
			}},
			{Group: "g", Assignor: "RoundRobin", Members: []string{"m", "n"}, Partitions: []model.GroupPartition{
				{Partition: 0, Owner: "m", Committed: 1, InFlight: true, Attempts: 2, Lag: 2},
				{Partition: 1, Owner: "n", Committed: 0, Lag: 1},
			}},
		},
	}
	d := f.describe("t")
	require.Equal(t, want, d)

	saved := f.b.Clone()
	d.Partitions[0].LogEndOffset = 99
	d.Groups[1].Members[0] = "zz"
	d.Groups[1].Partitions[0].Owner = "zz"
	requireUnchanged(t, saved, f.b)
	require.Equal(t, want, f.describe("t"), "the description is the caller's")

	_, err := f.b.Describe("nope")
	require.ErrorIs(t, err, model.ErrInvalidArgument)
}
