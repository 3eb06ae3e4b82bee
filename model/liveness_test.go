package model_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/model"
)

// This file checks rules 24 (session timeout) and 25 (Rejoin) of
// docs/contract.md, SPEC section 3.4.

func (f fx) heartbeat(topic, group, member string) bool {
	f.t.Helper()
	ok, err := f.b.Heartbeat(topic, group, member)
	require.NoError(f.t, err)
	return ok
}

func (f fx) rejoin(topic, group, member string) []int32 {
	f.t.Helper()
	parts, err := f.b.Rejoin(topic, group, member)
	require.NoError(f.t, err)
	require.NotNil(f.t, parts)
	return parts
}

func (f fx) members(topic, group string) []string {
	f.t.Helper()
	ms, err := f.b.Members(topic, group)
	require.NoError(f.t, err)
	return ms
}

// lastSeen returns Describe's last-seen instants of group, by member.
func (f fx) lastSeen(topic, group string) map[string]time.Time {
	f.t.Helper()
	g := f.group(topic, group)
	require.Len(f.t, g.LastSeen, len(g.Members))
	out := map[string]time.Time{}
	for i, m := range g.Members {
		out[m] = g.LastSeen[i]
	}
	return out
}

func recT(topic string, p int32, off int64, payload string, attempt int32) model.Record {
	return model.Record{Topic: topic, Partition: p, Offset: off, Payload: payload, Time: t0, Attempt: attempt}
}

// sec is t0 plus s seconds: the instants of the worked example.
func sec(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// TestSessionSpecExample is SPEC section 3.4's worked example, verbatim:
// capacity 10, WithSessionTimeout(10s), a test clock at t=0 (here t0),
// topic t with 2 partitions and one record on each.
func TestSessionSpecExample(t *testing.T) {
	setup := func(t *testing.T) (fx, *testclock.Clock) {
		c := testclock.New()
		f := newFx(t, 10, model.WithSessionTimeout(10*time.Second), model.WithClock(c.Now))
		f.create("t", 2)
		require.Equal(t, int64(0), f.publish("t", 0, "r0"))
		require.Equal(t, int64(0), f.publish("t", 1, "r1"))
		return f, c
	}
	t.Run("session timeout", func(t *testing.T) {
		f, c := setup(t)
		require.Equal(t, []int32{0, 1}, f.join("t", "g", "a")) // Join(t, g, a) → [0 1]
		c.Advance(time.Second)
		require.Equal(t, []int32{1}, f.join("t", "g", "b")) // Join(t, g, b) at t=1s → a [0], b [1]
		require.Equal(t, map[string][]int32{"a": {0}, "b": {1}}, f.assignment("t", "g"))
		c.Advance(time.Second) // a polls p0 offset 0 at t=2s
		require.Equal(t, []model.Record{recT("t", 0, 0, "r0", 1)}, f.poll("t", "g", "a", 1))
		c.Advance(7 * time.Second) // b heartbeats at t=9s: a was last seen 7s before, not expired
		require.True(t, f.heartbeat("t", "g", "b"))
		require.Equal(t, []string{"a", "b"}, f.members("t", "g"))
		require.Equal(t, map[string]time.Time{"a": sec(2), "b": sec(9)}, f.lastSeen("t", "g"))
		c.Advance(6 * time.Second) // at t=15s b's Poll first expires a (last seen 13s before)
		require.Equal(t, []model.Record{recT("t", 0, 0, "r0", 2), recT("t", 1, 0, "r1", 1)}, f.poll("t", "g", "b", 64),
			"p0 offset 0 (Attempt 2) and p1 offset 0 (Attempt 1)")
		require.Equal(t, map[string][]int32{"b": {0, 1}}, f.assignment("t", "g"), "b now owns [0 1]")
		c.Advance(time.Second) // at t=16s
		require.False(t, f.ack("t", "g", "a", 0, 0))
		require.False(t, f.heartbeat("t", "g", "a"))
		require.Equal(t, []string{"b"}, f.members("t", "g"), "a's Heartbeat does not bring it back")
		require.NoError(t, f.b.CheckInvariants())
	})
	t.Run("rejoin", func(t *testing.T) { // on a fresh broker
		f, _ := setup(t)
		require.Equal(t, []int32{0, 1}, f.join("t", "g", "a"))
		require.Equal(t, []model.Record{recT("t", 0, 0, "r0", 1), recT("t", 1, 0, "r1", 1)}, f.poll("t", "g", "a", 64))
		require.Equal(t, []int32{0, 1}, f.rejoin("t", "g", "a"))
		require.Equal(t, []string{"a"}, f.members("t", "g"), "still the one member")
		require.Equal(t, []model.Record{recT("t", 0, 0, "r0", 2), recT("t", 1, 0, "r1", 2)}, f.poll("t", "g", "a", 64),
			"both again, Attempt 2")
		require.NoError(t, f.b.CheckInvariants())
	})
}

// sessionFx is the starting point of most tests here: session timeout d
// on a fake clock at t0; topic t with 3 partitions and one record on
// each; group g (RoundRobin) with members a (p0, p2) and b (p1), joined at
// t0; a's p0 and b's p1 delivered at t0.
const d = 10 * time.Second

func sessionFx(t *testing.T, opts ...model.Option) (fx, *testclock.Clock) {
	c := testclock.New()
	f := newFx(t, 5, append([]model.Option{model.WithSessionTimeout(d), model.WithClock(c.Now)}, opts...)...)
	f.create("t", 3)
	for p := range int32(3) {
		f.publish("t", p, fmt.Sprintf("r%d", p))
	}
	f.join("t", "g", "a")
	f.join("t", "g", "b")
	require.Equal(t, []model.Record{recT("t", 0, 0, "r0", 1)}, f.poll("t", "g", "a", 1))
	require.Equal(t, []model.Record{recT("t", 1, 0, "r1", 1)}, f.poll("t", "g", "b", 1))
	require.NoError(t, f.b.CheckInvariants())
	return f, c
}

// TestSessionExpiryBoundary checks "d or more before the broker clock":
// the member last seen at t0 is expired from t0+d on, not a nanosecond
// before, at the instant of the call that looks.
func TestSessionExpiryBoundary(t *testing.T) {
	tests := []struct {
		name     string
		elapsed  time.Duration
		wexpired bool
	}{
		{"no time", 0, false},
		{"a nanosecond under", d - time.Nanosecond, false},
		{"exactly d", d, true},
		{"a nanosecond over", d + time.Nanosecond, true},
		{"long after", 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := sessionFx(t)
			c.Advance(tt.elapsed)
			require.True(t, f.heartbeat("t", "g", "b") != tt.wexpired, "b's own heartbeat sees its expiry first")
			if tt.wexpired {
				require.Empty(t, f.members("t", "g"), "a and b both expired at that instant")
			} else {
				require.Equal(t, []string{"a", "b"}, f.members("t", "g"))
			}
			require.NoError(t, f.b.CheckInvariants())
		})
	}
}

// TestSessionEveryValidCallExpires: each kind of valid call on the topic
// (any caller, whatever it returns) first expires the topic's expired
// members, at its own instant; Create does not, and neither do the
// inspection helpers; a call on another topic leaves this one alone.
func TestSessionEveryValidCallExpires(t *testing.T) {
	calls := []struct {
		name string
		call func(b *model.Broker) error
	}{
		{"Join of another member", func(b *model.Broker) error { _, err := b.Join("t", "g", "c"); return err }},
		{"Join in another group", func(b *model.Broker) error { _, err := b.Join("t", "h", "c"); return err }},
		{"Rejoin of another member", func(b *model.Broker) error { _, err := b.Rejoin("t", "g", "c"); return err }},
		{"Leave of an absent member", func(b *model.Broker) error { _, err := b.Leave("t", "g", "z"); return err }},
		{"Publish", func(b *model.Broker) error { _, err := b.Publish("t", 0, "x"); return err }},
		{"Publish to a full partition", func(b *model.Broker) error {
			for range 5 {
				if _, err := b.Publish("t", 2, "x"); err != nil {
					return err
				}
			}
			return nil
		}},
		{"PublishMessage", func(b *model.Broker) error {
			_, err := b.PublishMessage("t", 1, model.Message{Key: "k"})
			return err
		}},
		{"Poll of an absent group", func(b *model.Broker) error { _, err := b.Poll("t", "absent", "a", 1); return err }},
		{"PollPartition by a non-member", func(b *model.Broker) error { _, err := b.PollPartition("t", "g", "z", 0); return err }},
		{"Ack that fails", func(b *model.Broker) error { _, err := b.Ack("t", "g", "z", 0, 0); return err }},
		{"Retry that fails", func(b *model.Broker) error { _, err := b.Retry("t", "g", "z", 0, 7); return err }},
		{"Heartbeat of an absent group", func(b *model.Broker) error { _, err := b.Heartbeat("t", "absent", "a"); return err }},
		{"CreateGroup", func(b *model.Broker) error { _, err := b.CreateGroup("t", "new", model.Range); return err }},
		{"CreateGroup of an existing group", func(b *model.Broker) error { _, err := b.CreateGroup("t", "g", model.Range); return err }},
		{"CreateGroupAt", func(b *model.Broker) error {
			_, err := b.CreateGroupAt("t", "new", model.Range, model.StartLatest)
			return err
		}},
		{"DeleteGroup of an absent group", func(b *model.Broker) error { _, err := b.DeleteGroup("t", "absent"); return err }},
		{"SetAssignor", func(b *model.Broker) error { _, err := b.SetAssignor("t", "g", model.Range); return err }},
		{"AddPartitions", func(b *model.Broker) error { _, err := b.AddPartitions("t", 1); return err }},
		{"Seek", func(b *model.Broker) error { _, err := b.Seek("t", "g", 2, 0); return err }},
		{"Seek out of range", func(b *model.Broker) error {
			_, err := b.Seek("t", "g", 2, 9)
			if err == nil {
				return fmt.Errorf("Seek out of range succeeded")
			}
			return nil
		}},
		{"Describe", func(b *model.Broker) error { _, err := b.Describe("t"); return err }},
		{"Snapshot", func(b *model.Broker) error { _, err := b.Snapshot("t"); return err }},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			f, c := sessionFx(t)
			c.Advance(d - time.Second)
			require.True(t, f.heartbeat("t", "g", "b")) // b last seen at t0+9s, a at t0
			// want: a's Leave now, which is no expiry yet, then the call.
			want := f.b.Clone()
			ok, err := want.Leave("t", "g", "a")
			require.NoError(t, err)
			require.True(t, ok)
			c.Advance(time.Second) // a expired now, b not
			require.Equal(t, []string{"a", "b"}, f.members("t", "g"), "lazy: nothing expired before a call looks")
			require.True(t, f.inFlight("t", "g", 0))
			require.NoError(t, tt.call(want))
			require.NoError(t, tt.call(f.b))
			require.NotContains(t, f.members("t", "g"), "a")
			require.True(t, want.Equal(f.b), "expiry, then the call:\n%v\nLeave, then the call:\n%v", f.b, want)
			require.NoError(t, f.b.CheckInvariants())
		})
	}
	t.Run("Create, inspection helpers and another topic do not", func(t *testing.T) {
		f, c := sessionFx(t)
		f.create("u", 1)
		c.Advance(time.Hour)
		require.False(t, f.create("t", 3))
		f.create("v", 1)
		f.publish("u", 0, "x")
		f.join("u", "g", "a")
		f.describe("u")
		f.members("t", "g")
		f.assignment("t", "g")
		f.committed("t", "g", 0)
		f.inFlight("t", "g", 0)
		f.attempts("t", "g", 0)
		f.logStart("t", 0)
		f.retained("t", 0)
		f.groups("t")
		require.Equal(t, []string{"a", "b"}, f.members("t", "g"))
		require.True(t, f.inFlight("t", "g", 0))
		f.describe("t")
		require.Empty(t, f.members("t", "g"), "the first call on t expires them")
	})
}

// TestInvalidCallsExpireNobody: an invalid call (rule 4) changes nothing,
// so it expires nobody and refreshes nobody, however long the members have
// been silent: every invalid case of TestInvalidArguments on a populated
// broker with a session timeout whose members are all expired.
func TestInvalidCallsExpireNobody(t *testing.T) {
	n := 0
	for _, m := range methods {
		for _, mu := range mutations() {
			if !usesAll(m.uses, mu.needs) {
				continue
			}
			n++
			t.Run(m.name+"/"+mu.name, func(t *testing.T) {
				c := testclock.New()
				b := populatedWith(t, model.WithSessionTimeout(d), model.WithClock(c.Now))
				c.Advance(d)
				before := b.Clone()
				a := validArgs
				if m.valid != nil {
					m.valid(&a)
				}
				mu.mut(&a)
				reads := c.Reads()
				_, err := m.call(b, a)
				require.ErrorIs(t, err, model.ErrInvalidArgument)
				requireUnchanged(t, before, b)
				require.Equal(t, reads, c.Reads(), "an invalid call reads no clock")
				ms, _ := b.Members("t", "g")
				require.Equal(t, []string{"m", "m2"}, ms)
			})
		}
	}
	require.NotZero(t, n)
	// And the same valid calls do expire (the test above is not vacuous).
	for _, m := range methods {
		if m.name == "Create" {
			continue
		}
		c := testclock.New()
		b := populatedWith(t, model.WithSessionTimeout(d), model.WithClock(c.Now))
		c.Advance(d)
		a := validArgs
		if m.valid != nil {
			m.valid(&a)
		}
		_, err := m.call(b, a)
		require.NoError(t, err, m.name)
		ms, _ := b.Members("t", "g")
		if m.name == "Join" || m.name == "Rejoin" {
			require.Equal(t, []string{"m"}, ms, "%s: m2 expired, m joined again", m.name)
		} else {
			require.Empty(t, ms, m.name)
		}
	}
}

// TestLastSeenRefresh checks which valid calls refresh the named member's
// last-seen (Join, Rejoin, Poll, PollPartition, Ack, Retry, Heartbeat,
// whatever they return) and which do not (calls that name it without being
// one of these, or name someone else).
func TestLastSeenRefresh(t *testing.T) {
	calls := []struct {
		name     string
		call     func(f fx)
		wrefresh bool
	}{
		{"Join again", func(f fx) { require.Equal(t, []int32{1}, f.join("t", "g", "b")) }, true},
		{"Rejoin", func(f fx) { f.rejoin("t", "g", "b") }, true},
		{"Poll that returns records", func(f fx) {
			require.True(t, f.ack("t", "g", "b", 1, 0))
			f.publish("t", 1, "x")
			require.Len(t, f.poll("t", "g", "b", 64), 1)
		}, true},
		{"Poll by a", func(f fx) { require.Len(t, f.poll("t", "g", "a", 64), 1) }, false},
		{"Poll that returns nothing", func(f fx) { require.Empty(t, f.poll("t", "g", "b", 64)) }, true},
		{"PollPartition of a partition b does not own", func(f fx) {
			rs, err := f.b.PollPartition("t", "g", "b", 0)
			require.NoError(t, err)
			require.Empty(t, rs)
		}, true},
		{"Ack that succeeds", func(f fx) { require.True(t, f.ack("t", "g", "b", 1, 0)) }, true},
		{"Ack that returns false", func(f fx) { require.False(t, f.ack("t", "g", "b", 0, 0)) }, true},
		{"Retry that succeeds", func(f fx) { require.True(t, f.retry("t", "g", "b", 1, 0)) }, true},
		{"Retry that returns false", func(f fx) { require.False(t, f.retry("t", "g", "b", 1, 3)) }, true},
		{"Heartbeat", func(f fx) { require.True(t, f.heartbeat("t", "g", "b")) }, true},
		{"Heartbeat of b in another group", func(f fx) { require.False(t, f.heartbeat("t", "h", "b")) }, false},
		{"Join of b in another group", func(f fx) { f.join("t", "h", "b") }, false},
		{"Poll of b in another group", func(f fx) { f.join("t", "h", "x"); f.poll("t", "h", "b", 64) }, false},
		{"Heartbeat of a", func(f fx) { require.True(t, f.heartbeat("t", "g", "a")) }, false},
		{"Leave of a", func(f fx) { require.True(t, f.leave("t", "g", "a")) }, false},
		{"Publish", func(f fx) { f.publish("t", 1, "x") }, false},
		{"Describe", func(f fx) { f.describe("t") }, false},
		{"Seek", func(f fx) { require.True(t, f.seek("t", "g", 1, 0)) }, false},
		{"SetAssignor", func(f fx) { require.True(t, f.setAssignor("t", "g", model.Range)) }, false},
		{"AddPartitions", func(f fx) { f.addPartitions("t", 1) }, false},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			f, c := sessionFx(t)
			c.Advance(3 * time.Second)
			tt.call(f)
			seen := f.lastSeen("t", "g")
			if tt.wrefresh {
				require.Equal(t, sec(3), seen["b"])
			} else {
				require.Equal(t, t0, seen["b"])
			}
			// And it decides b's expiry: at t0+d b is expired unless refreshed.
			c.Advance(d - 3*time.Second)
			f.describe("t")
			require.Equal(t, tt.wrefresh, slices.Contains(f.members("t", "g"), "b"))
			require.NoError(t, f.b.CheckInvariants())
		})
	}
}

// TestExpiryIsLeave: an expiry leaves the broker exactly as Leave at that
// instant would (rules 9, 11, 24), whatever the assignor: same members,
// owners, committed offsets, in-flight deliveries, attempts; and an expired
// member's own calls see it gone.
func TestExpiryIsLeave(t *testing.T) {
	for _, a := range []model.Assignor{model.RoundRobin, model.Range, model.Sticky} {
		t.Run(a.Name(), func(t *testing.T) {
			f, c := sessionFx(t)
			require.True(t, f.setAssignor("t", "g", a))
			f.join("t", "g", "c")
			f.poll("t", "g", "a", 64)
			f.poll("t", "g", "c", 64)
			c.Advance(d - time.Second)
			f.heartbeat("t", "g", "b")
			f.heartbeat("t", "g", "c")
			left := f.b.Clone() // a's Leave at t0+9s, before it expires
			ok, err := left.Leave("t", "g", "a")
			require.NoError(t, err)
			require.True(t, ok)
			c.Advance(time.Second)
			f.describe("t") // expires a
			require.True(t, left.Equal(f.b), "expiry:\n%v\nLeave:\n%v", f.b, left)
			require.Empty(t, f.poll("t", "g", "a", 64), "an expired member's Poll returns nothing")
			require.False(t, f.ack("t", "g", "a", 0, 0))
			require.False(t, f.retry("t", "g", "a", 0, 0))
			require.False(t, f.heartbeat("t", "g", "a"))
			require.False(t, f.leave("t", "g", "a"))
			require.Equal(t, []string{"b", "c"}, f.members("t", "g"))
			require.NotEmpty(t, f.join("t", "g", "a"), "it must Join again")
			require.Equal(t, []string{"a", "b", "c"}, f.members("t", "g"))
			require.Equal(t, sec(10), f.lastSeen("t", "g")["a"])
			require.NoError(t, f.b.CheckInvariants())
		})
	}
}

// TestExpiryDetails: several members at once, several groups, retention,
// the ack timeout, group deletion, and an assignor that refuses the
// rebalance.
func TestExpiryDetails(t *testing.T) {
	t.Run("members expiring together leave in one rebalance", func(t *testing.T) {
		f, c := sessionFx(t, model.WithAckTimeout(time.Hour))
		require.True(t, f.setAssignor("t", "g", model.Sticky))
		f.join("t", "g", "c")
		f.join("t", "g", "e")
		c.Advance(d - time.Second)
		f.heartbeat("t", "g", "c")
		c.Advance(time.Second) // a and b expire at the same instant; c and e do not (e joined at t0: it does)
		f.heartbeat("t", "g", "e")
		require.Equal(t, []string{"c"}, f.members("t", "g"), "a, b and e, all last seen at t0, left together")
		require.Equal(t, []int32{0, 1, 2}, f.assignment("t", "g")["c"])
		require.False(t, f.inFlight("t", "g", 0))
		require.False(t, f.inFlight("t", "g", 1))
		rs := f.poll("t", "g", "c", 64)
		require.Equal(t, []model.Record{
			{Topic: "t", Partition: 0, Offset: 0, Payload: "r0", Time: t0, Attempt: 2},
			{Topic: "t", Partition: 1, Offset: 0, Payload: "r1", Time: t0, Attempt: 2},
			{Topic: "t", Partition: 2, Offset: 0, Payload: "r2", Time: t0, Attempt: 1},
		}, rs)
		require.NoError(t, f.b.CheckInvariants())
	})
	t.Run("groups expire independently; committed offsets and retention stay", func(t *testing.T) {
		f, c := sessionFx(t)
		f.join("t", "h", "a")
		require.Len(t, f.poll("t", "h", "a", 64), 3)
		require.True(t, f.ack("t", "h", "a", 2, 0))
		require.True(t, f.ack("t", "g", "b", 1, 0)) // b: last seen t0
		c.Advance(d)
		f.heartbeat("t", "h", "a") // expires g's a and b (last seen t0) and h's a (last seen t0) too
		require.Empty(t, f.members("t", "g"))
		require.Empty(t, f.members("t", "h"))
		require.Equal(t, int64(1), f.committed("t", "g", 1))
		require.Equal(t, int64(1), f.committed("t", "h", 2))
		require.Equal(t, int32(1), f.attempts("t", "g", 0), "attempts kept")
		require.Equal(t, int64(0), f.logStart("t", 1), "h still needs p1 offset 0")
		require.Equal(t, int64(0), f.logStart("t", 2), "g still needs p2 offset 0")
	})
	t.Run("a group whose members all expired can be deleted at once", func(t *testing.T) {
		f, c := sessionFx(t)
		c.Advance(d)
		require.True(t, f.deleteGroup("t", "g"))
		require.Empty(t, f.groups("t"))
	})
	t.Run("a group whose members have not expired cannot", func(t *testing.T) {
		f, c := sessionFx(t)
		c.Advance(d - time.Nanosecond)
		_, err := f.b.DeleteGroup("t", "g")
		require.ErrorIs(t, err, model.ErrGroupNotEmpty)
	})
	t.Run("the expiry cancels an ack-timeout delivery's time", func(t *testing.T) {
		f, c := sessionFx(t, model.WithAckTimeout(time.Hour))
		c.Advance(d - time.Second)
		f.heartbeat("t", "g", "b")
		c.Advance(time.Second)
		f.describe("t")
		require.NoError(t, f.b.CheckInvariants(), "no delivery time left without a delivery")
		rs := f.poll("t", "g", "b", 64)
		require.Equal(t, []int32{0, 2}, []int32{rs[0].Partition, rs[1].Partition})
		require.Equal(t, int32(2), rs[0].Attempt)
	})
	t.Run("an assignor that refuses the expiry's rebalance: that group keeps its members, the call goes on", func(t *testing.T) {
		ok := true
		bad := badAssignor{fault: "nil", ok: &ok}
		f, c := sessionFx(t)
		require.True(t, f.setAssignor("t", "g", bad))
		f.join("t", "h", "x")
		c.Advance(d - time.Second)
		f.heartbeat("t", "h", "x")
		f.heartbeat("t", "g", "b")
		c.Advance(time.Second)
		ok = false
		before := f.assignment("t", "g")
		require.Equal(t, int64(1), f.publish("t", 0, "x"), "the publish goes on and succeeds")
		require.Equal(t, []string{"a", "b"}, f.members("t", "g"), "g's expired member a stays")
		require.Equal(t, before, f.assignment("t", "g"))
		require.True(t, f.inFlight("t", "g", 0))
		require.Equal(t, []string{"x"}, f.members("t", "h"))
		require.NoError(t, f.b.CheckInvariants())
		ok = true
		f.describe("t") // once the assignor answers, a expires
		require.Equal(t, []string{"b"}, f.members("t", "g"))
	})
	t.Run("a Join that fails with ErrInvalidAssignment keeps the expiry it made", func(t *testing.T) {
		ok := true
		bad := badAssignor{fault: "short", ok: &ok}
		f, c := sessionFx(t)
		f.join("t", "h", "x")
		f.join("t", "h", "y")
		require.True(t, f.setAssignor("t", "h", bad))
		c.Advance(d - time.Second)
		f.heartbeat("t", "h", "y")
		c.Advance(time.Second)
		ok = false
		_, err := f.b.Join("t", "h", "z")
		require.ErrorIs(t, err, model.ErrInvalidAssignment)
		require.Empty(t, f.members("t", "g"), "g's members expired at the Join")
		require.Equal(t, []string{"x", "y"}, f.members("t", "h"), "h's expiry of x was refused too")
	})
	t.Run("the clock is read once per valid call", func(t *testing.T) {
		f, c := sessionFx(t, model.WithAckTimeout(time.Hour))
		for _, call := range []func(){
			func() { f.poll("t", "g", "a", 64) },
			func() { f.publish("t", 0, "x") },
			func() { f.publishMsg("t", 0, model.Message{}) },
			func() { f.heartbeat("t", "g", "a") },
			func() { f.describe("t") },
			func() { f.rejoin("t", "g", "a") },
			func() { f.ack("t", "g", "a", 0, 0) },
		} {
			reads := c.Reads()
			call()
			require.Equal(t, reads+1, c.Reads())
		}
	})
	t.Run("a zero message time is the call's clock reading", func(t *testing.T) {
		f, c := sessionFx(t)
		c.Advance(time.Second)
		f.publish("t", 0, "x")
		require.Equal(t, sec(1), f.retained("t", 0)[1].Time)
	})
}

// TestRejoin checks rule 25.
func TestRejoin(t *testing.T) {
	t.Run("a member: its deliveries are cancelled, no rebalance", func(t *testing.T) {
		f, c := sessionFx(t, model.WithAckTimeout(time.Hour))
		require.Len(t, f.poll("t", "g", "a", 64), 1) // a: p0 and p2 in flight
		before := f.assignment("t", "g")
		c.Advance(time.Second)
		require.Equal(t, []int32{0, 2}, f.rejoin("t", "g", "a"))
		require.Equal(t, before, f.assignment("t", "g"), "no rebalance")
		require.Equal(t, []string{"a", "b"}, f.members("t", "g"))
		require.False(t, f.inFlight("t", "g", 0))
		require.False(t, f.inFlight("t", "g", 2))
		require.True(t, f.inFlight("t", "g", 1), "b's delivery is not a's")
		require.Equal(t, int32(1), f.attempts("t", "g", 0), "attempts kept")
		require.Equal(t, sec(1), f.lastSeen("t", "g")["a"])
		require.NoError(t, f.b.CheckInvariants())
		require.False(t, f.ack("t", "g", "a", 0, 0), "the old incarnation's delivery is gone")
		require.Equal(t, []model.Record{recT("t", 0, 0, "r0", 2), recT("t", 2, 0, "r2", 2)}, f.poll("t", "g", "a", 64))
	})
	t.Run("a member with nothing in flight: only the last-seen changes", func(t *testing.T) {
		f, c := sessionFx(t)
		require.True(t, f.ack("t", "g", "a", 0, 0))
		c.Advance(time.Second)
		want := f.b.Clone()
		ok, err := want.Heartbeat("t", "g", "a")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, []int32{0, 2}, f.rejoin("t", "g", "a"))
		require.True(t, want.Equal(f.b), "Rejoin:\n%v\nHeartbeat:\n%v", f.b, want)
	})
	t.Run("a member: the assignor is not asked", func(t *testing.T) {
		ok := true
		bad := badAssignor{fault: "panic", ok: &ok}
		f, _ := sessionFx(t)
		require.True(t, f.setAssignor("t", "g", bad))
		f.poll("t", "g", "a", 64)
		ok = false
		require.Equal(t, []int32{0, 2}, f.rejoin("t", "g", "a"))
		require.False(t, f.inFlight("t", "g", 0))
	})
	for _, tt := range []struct {
		name  string
		group string
		mem   string
	}{
		{"a new member", "g", "c"},
		{"an absent group", "new", "c"},
		{"a member of another group", "h", "a"},
	} {
		t.Run("not a member, "+tt.name+": exactly Join", func(t *testing.T) {
			f, c := sessionFx(t)
			f.createGroup("t", "h", model.Sticky)
			c.Advance(time.Second)
			joined := f.b.Clone()
			wparts, err := joined.Join("t", tt.group, tt.mem)
			require.NoError(t, err)
			require.Equal(t, wparts, f.rejoin("t", tt.group, tt.mem))
			require.True(t, joined.Equal(f.b), "Rejoin:\n%v\nJoin:\n%v", f.b, joined)
		})
	}
	t.Run("an expired member: it is a new member, a rebalance", func(t *testing.T) {
		f, c := sessionFx(t)
		c.Advance(d - time.Second)
		f.heartbeat("t", "g", "b")
		c.Advance(time.Second)
		joined := f.b.Clone()
		wparts, err := joined.Join("t", "g", "a")
		require.NoError(t, err)
		require.Equal(t, wparts, f.rejoin("t", "g", "a"))
		require.True(t, joined.Equal(f.b))
		require.Equal(t, []int32{0, 2}, wparts)
		require.False(t, f.inFlight("t", "g", 0), "the expiry cancelled it")
	})
	t.Run("not a member, an assignor that refuses: ErrInvalidAssignment, nothing changes", func(t *testing.T) {
		ok := true
		bad := badAssignor{fault: "stranger", ok: &ok}
		f, _ := sessionFx(t)
		require.True(t, f.setAssignor("t", "g", bad))
		ok = false
		before := f.b.Clone()
		parts, err := f.b.Rejoin("t", "g", "c")
		require.ErrorIs(t, err, model.ErrInvalidAssignment)
		require.Nil(t, parts)
		requireUnchanged(t, before, f.b)
	})
	t.Run("without a session timeout", func(t *testing.T) {
		f := newFx(t, 5)
		f.create("t", 2)
		f.publish("t", 0, "r0")
		f.publish("t", 1, "r1")
		require.Equal(t, []int32{0, 1}, f.rejoin("t", "g", "a"), "Rejoin of an absent group is Join")
		require.Len(t, f.poll("t", "g", "a", 64), 2)
		require.Equal(t, []int32{0, 1}, f.rejoin("t", "g", "a"))
		rs := f.poll("t", "g", "a", 64)
		require.Equal(t, []int32{2, 2}, []int32{rs[0].Attempt, rs[1].Attempt})
		require.Nil(t, f.describe("t").Groups[0].LastSeen, "no last-seen without the option")
		require.NoError(t, f.b.CheckInvariants())
	})
}

// TestHeartbeat checks Heartbeat's results and that it changes nothing
// but the last-seen.
func TestHeartbeat(t *testing.T) {
	f, c := sessionFx(t)
	c.Advance(time.Second)
	for _, tt := range []struct {
		name          string
		group, member string
		w             bool
	}{
		{"member", "g", "a", true},
		{"absent member", "g", "z", false},
		{"absent group", "absent", "a", false},
		{"case matters", "g", "A", false},
	} {
		before := f.b.Clone()
		require.Equal(t, tt.w, f.heartbeat("t", tt.group, tt.member), tt.name)
		if !tt.w {
			requireUnchanged(t, before, f.b)
			_, err := f.b.Members("t", "absent")
			require.ErrorIs(t, err, model.ErrUnknownGroup, "%s: a Heartbeat creates no group", tt.name)
			require.Equal(t, []string{"a", "b"}, f.members("t", "g"), "%s: a Heartbeat adds no member", tt.name)
		}
	}
	require.Equal(t, map[string]time.Time{"a": sec(1), "b": t0}, f.lastSeen("t", "g"))
	t.Run("without a session timeout it answers membership", func(t *testing.T) {
		f := newFx(t, 5)
		f.create("t", 1)
		f.join("t", "g", "a")
		before := f.b.Clone()
		require.True(t, f.heartbeat("t", "g", "a"))
		require.False(t, f.heartbeat("t", "g", "b"))
		requireUnchanged(t, before, f.b)
	})
}

// TestDescribeLastSeen: LastSeen is parallel to Members; nil without the
// option; empty, not nil, for a memberless group with it.
func TestDescribeLastSeen(t *testing.T) {
	f, c := sessionFx(t)
	c.Advance(2 * time.Second)
	f.join("t", "g", "c")
	f.createGroup("t", "empty", model.Range)
	d := f.describe("t")
	require.Equal(t, []string{"a", "b", "c"}, d.Groups[1].Members)
	require.Equal(t, []time.Time{t0, t0, sec(2)}, d.Groups[1].LastSeen)
	require.Equal(t, "empty", d.Groups[0].Group)
	require.NotNil(t, d.Groups[0].LastSeen)
	require.Empty(t, d.Groups[0].LastSeen)
	d.Groups[1].LastSeen[0] = sec(99)
	require.Equal(t, t0, f.lastSeen("t", "g")["a"], "the description is the caller's")
	require.Equal(t, d.Groups[1].LastSeen[1:], f.describe("t").Groups[1].LastSeen[1:])
}

// TestSessionStateEqualHashString: the session timeout and each member's
// last-seen are state to Equal, Hash, String and Clone.
func TestSessionStateEqualHashString(t *testing.T) {
	f, c := sessionFx(t)
	o, _ := sessionFx(t)
	require.True(t, f.b.Equal(o.b))
	require.Equal(t, f.b.Hash(), o.b.Hash())
	require.Equal(t, f.b.String(), o.b.String())
	require.Contains(t, f.b.String(), "sessiontimeout=10s")
	require.Contains(t, f.b.String(), "lastseen=[2026-01-02T03:04:05Z 2026-01-02T03:04:05Z]")

	cl := f.b.Clone()
	c.Advance(time.Second)
	f.heartbeat("t", "g", "a") // only a's last-seen moves
	require.False(t, f.b.Equal(o.b))
	require.False(t, o.b.Equal(f.b))
	require.NotEqual(t, f.b.Hash(), o.b.Hash())
	require.NotEqual(t, f.b.String(), o.b.String())
	require.True(t, cl.Equal(o.b), "the clone did not move with it")

	plain := newFx(t, 5)
	plain.create("t", 1)
	other := newFx(t, 5, model.WithSessionTimeout(d))
	other.create("t", 1)
	require.False(t, plain.b.Equal(other.b), "the session timeout is state")
	require.NotEqual(t, plain.b.Hash(), other.b.Hash())
}

// TestLastSeenOnlyGrows: a clock set back does not move a last-seen
// instant back (nor does it expire anyone: the member is d or more before
// no reading).
func TestLastSeenOnlyGrows(t *testing.T) {
	f, c := sessionFx(t)
	c.Advance(5 * time.Second)
	require.True(t, f.heartbeat("t", "g", "a"))
	c.Advance(-3 * time.Second)
	require.True(t, f.heartbeat("t", "g", "a"))
	require.Equal(t, sec(5), f.lastSeen("t", "g")["a"])
	c.Advance(d - 2*time.Second) // t0+10s: b (t0) expires, a (t0+5s) does not
	f.describe("t")
	require.Equal(t, []string{"a"}, f.members("t", "g"))
	c.Advance(-time.Hour)
	f.join("t", "g", "new")
	require.Equal(t, sec(10).Add(-time.Hour), f.lastSeen("t", "g")["new"], "a new member gets the reading")
}
