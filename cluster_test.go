package tributary_test

// Clusters: NewCluster's and NewClusterOn's arguments, the registries of
// topics, producers and consumers, group administration, Seek, Describe of
// an unknown topic, and Close.

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

func TestNewClusterInvalid(t *testing.T) {
	tests := []struct {
		name     string
		capacity int32
		opts     []engine.Option
	}{
		{"capacity 0", 0, nil},
		{"capacity -1", -1, nil},
		{"capacity 16777217", tributary.MaxCapacity + 1, nil},
		{"replay window above an extended capacity", 5000, []engine.Option{engine.WithReplayWindow(5001)}},
		{"replay window above capacity", 10, []engine.Option{engine.WithReplayWindow(11)}},
		{"negative replay window", 10, []engine.Option{engine.WithReplayWindow(-1)}},
		{"zero ack timeout", 10, []engine.Option{engine.WithAckTimeout(0)}},
		{"nil clock", 10, []engine.Option{engine.WithClock(nil)}},
		{"zero max message bytes", 10, []engine.Option{engine.WithMaxMessageBytes(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tributary.NewCluster(tt.capacity, tt.opts...)
			if !errors.Is(err, tributary.ErrInvalidArgument) {
				t.Fatalf("NewCluster = (%v, %v), want ErrInvalidArgument", c, err)
			}
			if c != nil {
				t.Fatalf("NewCluster returned a cluster with an error")
			}
		})
	}
}

func TestNewClusterValid(t *testing.T) {
	tests := []struct {
		name     string
		capacity int32
		opts     []engine.Option
	}{
		{"capacity 1", 1, nil},
		{"capacity 1000", 1000, nil},
		{"capacity 1001 (beyond engine rule 1)", 1001, nil},
		{"capacity 16777216 with a window of all of it", tributary.MaxCapacity, []engine.Option{engine.WithReplayWindow(tributary.MaxCapacity)}},
		{"every option", 10, []engine.Option{
			engine.WithReplayWindow(10), engine.WithAckTimeout(time.Second),
			engine.WithClock(time.Now), engine.WithMaxMessageBytes(100),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCluster(t, tt.capacity, tt.opts...)
			if c.Backend() == nil {
				t.Fatal("Backend() = nil")
			}
			if got := c.Topics(); len(got) != 0 {
				t.Fatalf("Topics() of a new cluster = %v, want none", got)
			}
		})
	}
}

// nilBackendPtr lets a test pass a typed nil pointer as a Backend.
type nilBackendPtr struct{ tributary.Backend }

func TestNewClusterOn(t *testing.T) {
	t.Run("nil", func(t *testing.T) {
		_, err := tributary.NewClusterOn(nil)
		checkErr(t, "NewClusterOn(nil)", err, tributary.ErrInvalidArgument)
	})
	t.Run("typed nil", func(t *testing.T) {
		_, err := tributary.NewClusterOn((*nilBackendPtr)(nil))
		checkErr(t, "NewClusterOn((*nilBackendPtr)(nil))", err, tributary.ErrInvalidArgument)
	})
	t.Run("shared backend", func(t *testing.T) {
		c1 := testCluster(t, 10)
		testTopic[string](t, c1, "shared", 2, tributary.String())
		c2, err := tributary.NewClusterOn(c1.Backend())
		if err != nil {
			t.Fatalf("NewClusterOn: %v", err)
		}
		defer c2.Close()
		if c2.Backend() != c1.Backend() {
			t.Fatal("Backend() is not the backend given")
		}
		if got, want := c2.Topics(), []string{"shared"}; !slices.Equal(got, want) {
			t.Fatalf("Topics() = %v, want %v", got, want)
		}
		tp, err := tributary.OpenTopic(c2, "shared", tributary.String())
		if err != nil {
			t.Fatalf("OpenTopic on the second cluster: %v", err)
		}
		_, err = tributary.OpenTopic(c2, "shared", tributary.Bytes())
		checkErr(t, "OpenTopic(Bytes) on the second cluster", err, tributary.ErrTypeMismatch)
		pr := testProducer[string](t, c2, "p", tributary.Manual())
		sendOK(t, pr, tp, tributary.Message[string]{Partition: 1, Value: "x"})
		if got := logEndOf(t, c1, "shared", 1); got != 1 {
			t.Fatalf("first cluster sees log end %d, want 1", got)
		}
	})
}

func TestClusterTopicsSorted(t *testing.T) {
	c := testCluster(t, 10)
	for _, name := range []string{"zeta", "Alpha", "beta", "_x", "alpha", "9"} {
		testTopic[string](t, c, name, 1, tributary.String())
	}
	got := c.Topics()
	want := []string{"9", "Alpha", "_x", "alpha", "beta", "zeta"} // bytewise
	if !slices.Equal(got, want) {
		t.Fatalf("Topics() = %v, want %v", got, want)
	}
	got[0] = "changed"
	if again := c.Topics(); !slices.Equal(again, want) {
		t.Fatalf("Topics() after changing a returned slice = %v, want %v", again, want)
	}
}

func TestClusterGroupAdmin(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 4, nil)

	t.Run("CreateGroup", func(t *testing.T) {
		tests := []struct {
			name  string
			topic string
			group string
			a     engine.Assignor
			wok   bool
			werr  error
		}{
			{"new", "orders", "g-range", engine.Range, true, nil},
			{"exists", "orders", "g-range", engine.Sticky, false, nil},
			{"unknown topic", "nope", "g", engine.Range, false, tributary.ErrInvalidArgument},
			{"invalid group", "orders", "bad group", engine.Range, false, tributary.ErrInvalidArgument},
			{"nil assignor", "orders", "g-nil", nil, false, tributary.ErrInvalidArgument},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ok, err := c.CreateGroup(tt.topic, tt.group, tt.a)
				checkErr(t, "CreateGroup", err, tt.werr)
				if ok != tt.wok {
					t.Fatalf("CreateGroup = %v, want %v", ok, tt.wok)
				}
			})
		}
		g := groupDesc(t, c, "orders", "g-range")
		if g.Assignor != "Range" || len(g.Members) != 0 {
			t.Fatalf("g-range = %+v, want assignor range (kept), no members", g)
		}
	})

	t.Run("SetAssignor rebalances", func(t *testing.T) {
		a := testConsumer(t, tp, "g-set", "a")
		b := testConsumer(t, tp, "g-set", "b")
		if got, want := a.Assignment(), []int32{0, 2}; !slices.Equal(got, want) {
			t.Fatalf("round-robin: a owns %v, want %v", got, want)
		}
		ok, err := c.SetAssignor("orders", "g-set", engine.Range)
		if err != nil || !ok {
			t.Fatalf("SetAssignor(Range) = (%v, %v), want (true, nil)", ok, err)
		}
		g := groupDesc(t, c, "orders", "g-set")
		var owners []string
		for _, p := range g.Partitions {
			owners = append(owners, p.Owner)
		}
		if want := []string{"a", "a", "b", "b"}; g.Assignor != "Range" || !slices.Equal(owners, want) {
			t.Fatalf("after SetAssignor(Range): assignor %q owners %v, want range %v", g.Assignor, owners, want)
		}
		if got, want := b.Assignment(), []int32{2, 3}; !slices.Equal(got, want) {
			t.Fatalf("b owns %v, want %v", got, want)
		}
		ok, err = c.SetAssignor("orders", "absent", engine.Range)
		if ok || err != nil {
			t.Fatalf("SetAssignor(absent group) = (%v, %v), want (false, nil)", ok, err)
		}
		_, err = c.SetAssignor("orders", "g-set", nil)
		checkErr(t, "SetAssignor(nil)", err, tributary.ErrInvalidArgument)
	})

	t.Run("DeleteGroup", func(t *testing.T) {
		cons := testConsumer(t, tp, "g-del", "d1")
		ok, err := c.DeleteGroup("orders", "g-del")
		checkErr(t, "DeleteGroup(with a member)", err, tributary.ErrGroupNotEmpty)
		if ok {
			t.Fatal("DeleteGroup(with a member) = true")
		}
		groupDesc(t, c, "orders", "g-del") // still there
		cons.Close()
		if ok, err := c.DeleteGroup("orders", "g-del"); !ok || err != nil {
			t.Fatalf("DeleteGroup(empty) = (%v, %v), want (true, nil)", ok, err)
		}
		if ok, err := c.DeleteGroup("orders", "g-del"); ok || err != nil {
			t.Fatalf("DeleteGroup(absent) = (%v, %v), want (false, nil)", ok, err)
		}
		_, err = c.DeleteGroup("orders", "")
		checkErr(t, "DeleteGroup(\"\")", err, tributary.ErrInvalidArgument)
	})

	t.Run("AddPartitions", func(t *testing.T) {
		a := testConsumer(t, tp, "g-add", "solo")
		n, err := c.AddPartitions("orders", 2)
		if err != nil || n != 6 {
			t.Fatalf("AddPartitions(2) = (%d, %v), want (6, nil)", n, err)
		}
		if tp.Partitions() != 6 {
			t.Fatalf("Topic.Partitions() = %d, want 6", tp.Partitions())
		}
		if got, want := a.Assignment(), []int32{0, 1, 2, 3, 4, 5}; !slices.Equal(got, want) {
			t.Fatalf("after AddPartitions the sole member owns %v, want %v", got, want)
		}
		for _, count := range []int32{0, -1, 59} {
			_, err := c.AddPartitions("orders", count)
			checkErr(t, "AddPartitions(invalid)", err, tributary.ErrInvalidArgument)
		}
		if got := len(describeTopic(t, c, "orders").Partitions); got != 6 {
			t.Fatalf("after invalid AddPartitions: %d partitions, want 6", got)
		}
	})
}

func TestClusterSeek(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	for i := range 3 {
		sendOK(t, pr, tp, tributary.Message[purchase]{Value: purchase{ID: i}})
	}
	for _, g := range []string{"g", "hold"} { // hold keeps every record retained
		if _, err := c.CreateGroup("orders", g, engine.RoundRobin); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		group      string
		partition  int32
		offset     int64
		wok        bool
		werr       error
		wcommitted int64
	}{
		{"forward", "g", 0, 2, true, nil, 2},
		{"to log end", "g", 0, 3, true, nil, 3},
		{"back to start", "g", 0, 0, true, nil, 0},
		{"past log end", "g", 0, 4, false, tributary.ErrOffsetOutOfRange, 0},
		{"negative", "g", 0, -1, false, tributary.ErrInvalidArgument, 0},
		{"partition out of range", "g", 1, 0, false, tributary.ErrInvalidArgument, 0},
		{"absent group", "nobody", 0, 0, false, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := c.Seek("orders", tt.group, tt.partition, tt.offset)
			checkErr(t, "Seek", err, tt.werr)
			if ok != tt.wok {
				t.Fatalf("Seek = %v, want %v", ok, tt.wok)
			}
			if got := groupDesc(t, c, "orders", "g").Partitions[0].Committed; got != tt.wcommitted {
				t.Fatalf("committed = %d, want %d", got, tt.wcommitted)
			}
		})
	}
}

func TestClusterDescribeUnknown(t *testing.T) {
	c := testCluster(t, 10)
	for _, name := range []string{"nope", "", "bad name"} {
		_, err := c.Describe(name)
		checkErr(t, "Describe("+name+")", err, tributary.ErrInvalidArgument)
	}
}

func TestClusterRegistries(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	st := testTopic[string](t, c, "names", 1, tributary.String())

	pw := testProducer[purchase](t, c, "web", tributary.RoundRobin())
	testProducer[string](t, c, "api", tributary.Manual())
	cb := testConsumer(t, tp, "billing", "billing-1")
	testConsumer(t, st, "audit", "audit-1")

	if got, want := c.Producers(), []string{"api", "web"}; !slices.Equal(got, want) {
		t.Fatalf("Producers() = %v, want %v", got, want)
	}
	if got, want := c.Consumers(), []string{"audit-1", "billing-1"}; !slices.Equal(got, want) {
		t.Fatalf("Consumers() = %v, want %v", got, want)
	}

	t.Run("duplicate names", func(t *testing.T) {
		_, err := tributary.NewProducer[purchase](c, "web", tributary.Random())
		checkErr(t, "NewProducer(web again)", err, tributary.ErrExists)
		_, err = tributary.NewProducer[string](c, "web", tributary.Random())
		checkErr(t, "NewProducer(web again, other type)", err, tributary.ErrExists)
		_, err = tributary.NewConsumer(tp, "other", "billing-1")
		checkErr(t, "NewConsumer(billing-1 again)", err, tributary.ErrExists)
		// The refused consumer did not join its group.
		for _, g := range describeTopic(t, c, "orders").Groups {
			if g.Group == "other" && len(g.Members) != 0 {
				t.Fatalf("refused consumer joined: %+v", g)
			}
		}
		// A producer and a consumer may share a name: separate registries.
		testConsumer(t, tp, "billing", "web")
		testProducer[purchase](t, c, "billing-1", tributary.Manual())
	})

	t.Run("invalid names", func(t *testing.T) {
		for _, name := range []string{"", "a b", "é", string(make([]byte, 65))} {
			_, err := tributary.NewProducer[purchase](c, name, tributary.Manual())
			checkErr(t, "NewProducer(invalid name)", err, tributary.ErrInvalidArgument)
			_, err = tributary.NewConsumer(tp, "billing", name)
			checkErr(t, "NewConsumer(invalid name)", err, tributary.ErrInvalidArgument)
		}
	})

	t.Run("LookupProducer", func(t *testing.T) {
		p, err := tributary.LookupProducer[purchase](c, "web")
		if err != nil || p != pw {
			t.Fatalf("LookupProducer(web) = (%p, %v), want (%p, nil)", p, err, pw)
		}
		_, err = tributary.LookupProducer[string](c, "web")
		checkErr(t, "LookupProducer[string](web)", err, tributary.ErrTypeMismatch)
		_, err = tributary.LookupProducer[purchase](c, "nobody")
		checkErr(t, "LookupProducer(nobody)", err, tributary.ErrNotFound)
	})

	t.Run("LookupConsumer", func(t *testing.T) {
		got, err := tributary.LookupConsumer[purchase](c, "billing-1")
		if err != nil || got != cb {
			t.Fatalf("LookupConsumer(billing-1) = (%p, %v), want (%p, nil)", got, err, cb)
		}
		_, err = tributary.LookupConsumer[int](c, "billing-1")
		checkErr(t, "LookupConsumer[int](billing-1)", err, tributary.ErrTypeMismatch)
		_, err = tributary.LookupConsumer[purchase](c, "nobody")
		checkErr(t, "LookupConsumer(nobody)", err, tributary.ErrNotFound)
	})

	t.Run("closed names are reused", func(t *testing.T) {
		if err := pw.Close(); err != nil {
			t.Fatalf("Producer.Close: %v", err)
		}
		if err := pw.Close(); err != nil {
			t.Fatalf("Producer.Close twice: %v", err)
		}
		_, err := tributary.LookupProducer[purchase](c, "web")
		checkErr(t, "LookupProducer(closed)", err, tributary.ErrNotFound)
		_, err = pw.TrySend(tp, tributary.Message[purchase]{})
		checkErr(t, "TrySend on a closed producer", err, tributary.ErrClosed)
		pw2 := testProducer[string](t, c, "web", tributary.Manual())
		if p, err := tributary.LookupProducer[string](c, "web"); err != nil || p != pw2 {
			t.Fatalf("LookupProducer(web reused) = (%p, %v), want (%p, nil)", p, err, pw2)
		}
		// Closing the old one again does not remove the new one.
		pw.Close()
		if _, err := tributary.LookupProducer[string](c, "web"); err != nil {
			t.Fatalf("the old producer's Close removed the new one: %v", err)
		}

		if err := cb.Close(); err != nil {
			t.Fatalf("Consumer.Close: %v", err)
		}
		_, err = tributary.LookupConsumer[purchase](c, "billing-1")
		checkErr(t, "LookupConsumer(closed)", err, tributary.ErrNotFound)
		cb2 := testConsumer(t, tp, "billing", "billing-1")
		cb.Close()
		if got, err := tributary.LookupConsumer[purchase](c, "billing-1"); err != nil || got != cb2 {
			t.Fatalf("LookupConsumer(billing-1 reused) = (%p, %v), want (%p, nil)", got, err, cb2)
		}
	})

	t.Run("CloseConsumer", func(t *testing.T) {
		if err := c.CloseConsumer("audit-1"); err != nil {
			t.Fatalf("CloseConsumer(audit-1): %v", err)
		}
		if slices.Contains(c.Consumers(), "audit-1") {
			t.Fatalf("Consumers() = %v still lists audit-1", c.Consumers())
		}
		if g := groupDesc(t, c, "names", "audit"); len(g.Members) != 0 {
			t.Fatalf("after CloseConsumer group audit has members %v", g.Members)
		}
		err := c.CloseConsumer("audit-1")
		checkErr(t, "CloseConsumer(closed)", err, tributary.ErrNotFound)
		err = c.CloseConsumer("nobody")
		checkErr(t, "CloseConsumer(nobody)", err, tributary.ErrNotFound)
	})
}

func TestClusterClose(t *testing.T) {
	c, err := tributary.NewCluster(10)
	if err != nil {
		t.Fatal(err)
	}
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	pr := testProducer[purchase](t, c, "p", tributary.RoundRobin())
	running := testConsumer(t, tp, "g", "running")
	blocked := testConsumer(t, tp, "g2", "blocked")

	ctx := guardCtx(t)
	runDone := goResult(func() (struct{}, error) {
		return struct{}{}, running.Run(ctx, func(context.Context, tributary.Message[purchase]) error { return nil })
	})
	pollDone := goResult(func() ([]tributary.Message[purchase], error) { return blocked.Poll(ctx, 1) })
	waitPollBlocked(t, running, 1)
	waitPollBlocked(t, blocked, 1)

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := awaitResult(t, "Run after Cluster.Close", runDone); r.err != nil {
		t.Fatalf("Run after Cluster.Close = %v, want nil", r.err)
	}
	if r := awaitResult(t, "Poll after Cluster.Close", pollDone); !errors.Is(r.err, tributary.ErrClosed) {
		t.Fatalf("Poll after Cluster.Close = %v, want ErrClosed", r.err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close twice: %v", err)
	}
	if got := c.Consumers(); len(got) != 0 {
		t.Fatalf("Consumers() after Close = %v", got)
	}
	if got := c.Producers(); len(got) != 0 {
		t.Fatalf("Producers() after Close = %v", got)
	}
	for _, g := range describeTopic(t, c, "orders").Groups {
		if len(g.Members) != 0 {
			t.Fatalf("after Close group %s has members %v", g.Group, g.Members)
		}
	}

	tests := []struct {
		name string
		call func() error
	}{
		{"CreateTopic", func() error {
			_, err := tributary.CreateTopic[purchase](c, "more", 1, nil)
			return err
		}},
		{"NewProducer", func() error {
			_, err := tributary.NewProducer[purchase](c, "p2", tributary.Manual())
			return err
		}},
		{"NewConsumer", func() error {
			_, err := tributary.NewConsumer(tp, "g", "late")
			return err
		}},
		{"NewConsumer with dead letter", func() error {
			_, err := tributary.NewConsumer(tp, "g", "late", tributary.WithDeadLetter("orders-dlq", 3))
			return err
		}},
		{"Send", func() error {
			_, err := pr.Send(ctx, tp, tributary.Message[purchase]{})
			return err
		}},
		{"TrySend", func() error {
			_, err := pr.TrySend(tp, tributary.Message[purchase]{})
			return err
		}},
		{"Poll", func() error {
			_, err := blocked.Poll(ctx, 1)
			return err
		}},
		{"TryPoll", func() error {
			_, err := blocked.TryPoll(1)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.name+" after Close", tt.call(), tributary.ErrClosed)
		})
	}
	if got, want := c.Topics(), []string{"orders"}; !slices.Equal(got, want) {
		t.Fatalf("Topics() after refused creates = %v, want %v", got, want)
	}
	if got := logEndOf(t, c, "orders", 0) + logEndOf(t, c, "orders", 1); got != 0 {
		t.Fatalf("refused sends published %d records", got)
	}
}
