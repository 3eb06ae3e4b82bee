package tributary_test

// A closed cluster: its admin calls are ErrClosed and change nothing, and
// it has closed every producer.

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// A closed cluster changes the broker no more: every admin call returns
// ErrClosed and the topic's description stays as it was, while the calls
// that only read it still answer.
func TestClosedClusterAdminCallsChangeNothing(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 2, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "a"})
	for _, g := range []string{"g", "g0"} { // g0 stays empty: DeleteGroup could remove it
		if _, err := c.CreateGroup("t", g, engine.RoundRobin); err != nil {
			t.Fatal(err)
		}
	}
	// A member that is no consumer of c, so Close leaves it in the group.
	bt, _, err := c.Backend().OpenTopic("t")
	checkErr(t, "OpenTopic", err, nil)
	m, err := bt.Member("g", "m1")
	checkErr(t, "Member", err, nil)
	if _, err := m.Join(); err != nil {
		t.Fatal(err)
	}
	checkErr(t, "Close", c.Close(), nil)
	before, err := c.Describe("t")
	checkErr(t, "Describe after Close", err, nil)

	calls := map[string]func() error{
		"CreateGroup":   func() error { _, err := c.CreateGroup("t", "g2", engine.Range); return err },
		"RemoveMember":  func() error { _, err := c.RemoveMember("t", "g", "m1"); return err },
		"DeleteGroup":   func() error { _, err := c.DeleteGroup("t", "g0"); return err },
		"SetAssignor":   func() error { _, err := c.SetAssignor("t", "g", engine.Sticky); return err },
		"AddPartitions": func() error { _, err := c.AddPartitions("t", 1); return err },
		"Seek":          func() error { _, err := c.Seek("t", "g", 0, 1); return err },
	}
	for name, call := range calls {
		checkErr(t, name+" after Close", call(), tributary.ErrClosed)
	}
	after, err := c.Describe("t")
	checkErr(t, "Describe after Close", err, nil)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("admin calls after Close changed the topic (-before +after):\n%s", diff)
	}
	if _, ok, err := c.GroupConfig("t", "g"); !ok || err != nil {
		t.Fatalf("GroupConfig after Close = %v, %v; want the group", ok, err)
	}
}

// Cluster.Close documents that it closes every producer: later sends return
// ErrClosed.
func TestClusterCloseClosesProducers(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	require.NoError(t, c.Close())
	_, err := p.TrySend(in, tributary.Message[string]{Value: "after close"})
	assert.ErrorIs(t, err, tributary.ErrClosed, "TrySend after Cluster.Close")
	_, err = p.Send(context.Background(), in, tributary.Message[string]{Value: "after close"})
	assert.ErrorIs(t, err, tributary.ErrClosed, "Send after Cluster.Close")
	assert.Empty(t, c.Producers(), "Close closes every producer")
}
