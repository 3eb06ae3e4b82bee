package tributary_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// TestLibraryNamesAreTheEngines: the library's names for the broker's
// settings, assignors, group starts and descriptions are the engine's
// values, so either name may be used and they mix.
func TestLibraryNamesAreTheEngines(t *testing.T) {
	for _, tt := range []struct {
		lib, eng tributary.Assignor
		name     string
	}{
		{tributary.RoundRobinAssignor, engine.RoundRobin, "RoundRobin"},
		{tributary.RangeAssignor, engine.Range, "Range"},
		{tributary.StickyAssignor, engine.Sticky, "Sticky"},
	} {
		if tt.lib != tt.eng || tt.lib.Name() != tt.name {
			t.Errorf("%s: library %v, engine %v", tt.name, tt.lib, tt.eng)
		}
		if a, ok := tributary.LookupAssignor(tt.name); !ok || a != tt.lib {
			t.Errorf("LookupAssignor(%q) = %v, %v", tt.name, a, ok)
		}
	}
	if a, ok := tributary.LookupAssignor("sticky"); ok || a != nil {
		t.Errorf(`LookupAssignor("sticky") = %v, %v; want nil, false (names are case-sensitive)`, a, ok)
	}
	if tributary.StartEarliest != engine.StartEarliest || tributary.StartLatest != engine.StartLatest {
		t.Error("group starts differ from the engine's")
	}
}

// TestClusterConfiguredWithLibraryNames configures and inspects a cluster
// with the library's names only: each option takes effect, and a value out
// of range is refused by NewCluster.
func TestClusterConfiguredWithLibraryNames(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c, err := tributary.NewCluster(4,
		tributary.WithReplayWindow(2),
		tributary.WithMaxMessageBytes(16),
		tributary.WithAckTimeout(time.Minute),
		tributary.WithSessionTimeout(time.Hour),
		tributary.WithClock(testclock.At(now).Now),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topic, err := tributary.CreateTopic(c, "t", 3, tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.CreateGroup("t", "g", tributary.RangeAssignor, tributary.WithStart(tributary.StartLatest)); !ok || err != nil {
		t.Fatalf("CreateGroup = %v, %v", ok, err)
	}
	p, err := tributary.NewProducer[string](c, "p", tributary.Manual())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.TrySend(topic, tributary.Message[string]{Value: strings.Repeat("x", 17)}); !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Errorf("a 17-byte payload under WithMaxMessageBytes(16): %v, want ErrInvalidArgument", err)
	}
	sent, err := p.TrySend(topic, tributary.Message[string]{Value: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if !sent.Time.Equal(now) {
		t.Errorf("record time %v, want the WithClock reading %v", sent.Time, now)
	}
	var d tributary.TopicDescription
	if d, err = c.Describe("t"); err != nil {
		t.Fatal(err)
	}
	var g tributary.GroupDescription = d.Groups[0]
	if g.Assignor != "Range" {
		t.Errorf("group %+v: want assignor Range", g)
	}
	if g.LastSeen == nil || len(g.LastSeen) != 0 {
		t.Errorf("LastSeen %v: want empty, not nil, under WithSessionTimeout with no members", g.LastSeen)
	}
	if c.Backend().SessionTimeout() != time.Hour {
		t.Errorf("session timeout %v, want 1h", c.Backend().SessionTimeout())
	}

	for name, opt := range map[string]tributary.ClusterOption{
		"window over capacity":  tributary.WithReplayWindow(5),
		"ack timeout 0":         tributary.WithAckTimeout(0),
		"max message bytes 0":   tributary.WithMaxMessageBytes(0),
		"session under minimum": tributary.WithSessionTimeout(time.Millisecond),
		"nil clock":             tributary.WithClock(nil),
	} {
		if _, err := tributary.NewCluster(4, opt); !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestClusterOptionsRefused: a nil option, each option's extremes out of
// range, and an option given twice whose second value is out of range
// (the last applies) make NewCluster return ErrInvalidArgument and no
// cluster; the largest values in range are accepted and the broker works.
func TestClusterOptionsRefused(t *testing.T) {
	for name, opts := range map[string][]tributary.ClusterOption{
		"nil option":                  {nil},
		"window -1":                   {tributary.WithReplayWindow(-1)},
		"window MinInt32":             {tributary.WithReplayWindow(math.MinInt32)},
		"window MaxInt32":             {tributary.WithReplayWindow(math.MaxInt32)},
		"ack timeout MinInt64":        {tributary.WithAckTimeout(math.MinInt64)},
		"max message bytes MinInt":    {tributary.WithMaxMessageBytes(math.MinInt)},
		"session timeout 0":           {tributary.WithSessionTimeout(0)},
		"window twice, then too big":  {tributary.WithReplayWindow(2), tributary.WithReplayWindow(5)},
		"clock twice, then nil":       {tributary.WithClock(time.Now), tributary.WithClock(nil)},
		"ack timeout twice, then 0":   {tributary.WithAckTimeout(time.Second), tributary.WithAckTimeout(0)},
		"valid, then a nil option":    {tributary.WithReplayWindow(2), nil},
		"max message bytes twice, -1": {tributary.WithMaxMessageBytes(8), tributary.WithMaxMessageBytes(-1)},
	} {
		if c, err := tributary.NewCluster(4, opts...); !errors.Is(err, tributary.ErrInvalidArgument) || c != nil {
			t.Errorf("%s: %v, %v; want no cluster and ErrInvalidArgument", name, c, err)
		}
	}
	for name, opts := range map[string][]tributary.ClusterOption{
		"window = capacity":        {tributary.WithReplayWindow(4)},
		"window too big, then 2":   {tributary.WithReplayWindow(5), tributary.WithReplayWindow(2)},
		"ack timeout MaxInt64":     {tributary.WithAckTimeout(math.MaxInt64)},
		"session timeout MaxInt64": {tributary.WithSessionTimeout(math.MaxInt64)},
		"max message bytes MaxInt": {tributary.WithMaxMessageBytes(math.MaxInt)},
	} {
		c, err := tributary.NewCluster(4, opts...)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		tp := testTopic(t, c, "t", 1, tributary.String())
		p := testProducer[string](t, c, "p", tributary.Manual())
		sendOK(t, p, tp, tributary.Message[string]{Value: "x"})
		cons, err := tributary.NewConsumer(tp, "g", "m")
		if err != nil {
			t.Errorf("%s: NewConsumer: %v", name, err)
		} else if ms, err := cons.TryPoll(1); err != nil || len(ms) != 1 {
			t.Errorf("%s: TryPoll = %v, %v; want the record", name, ms, err)
		}
		require.NoError(t, c.Close())
	}
}
