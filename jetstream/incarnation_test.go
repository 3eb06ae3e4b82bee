package jetstream_test

import (
	"errors"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// Rule 25 on JetStream, across processes: two Backends on one server (two
// connections, as two processes would have) name the same member. The
// second one's Rejoin makes it the current incarnation with no rebalance
// and cancels the first one's in-flight deliveries, which it then polls
// itself with Attempt 2 — a restarted process gets its predecessor's
// records back at once, without an ack timeout. The first one is fenced:
// its calls fail with ErrFenced (and ErrClosed), its Leave leaves
// nothing, and nothing it does changes the group.
func TestRejoinAcrossProcesses(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	open := func() *jetstream.Backend {
		b, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 8, RequestTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b1, b2 := open(), open()
	bt1 := topic(t, b1, "t", 2)
	pub(t, bt1, 0, "x")
	pub(t, bt1, 1, "y")
	bt2, _, err := b2.OpenTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	member := func(bt tributary.BackendTopic, name string) tributary.BackendMember {
		m, err := bt.Member("g", name)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	seen := func(recs []engine.Record) []string {
		out := []string{}
		for _, r := range recs {
			out = append(out, r.Payload+"#"+string(rune('0'+r.Attempt)))
		}
		return out
	}
	first := member(bt1, "a")
	if parts, err := first.Rejoin(); err != nil || len(parts) != 2 {
		t.Fatalf("first Rejoin = %v, %v; want [0 1]", parts, err)
	}
	recs, err := first.TryPoll(nil, 4)
	if err != nil || len(recs) != 2 {
		t.Fatalf("first TryPoll = %v, %v; want both records", seen(recs), err)
	}
	before, err := b1.Describe("t")
	if err != nil {
		t.Fatal(err)
	}

	second := member(bt2, "a") // the restarted process
	if parts, err := second.Rejoin(); err != nil || len(parts) != 2 {
		t.Fatalf("second Rejoin = %v, %v; want [0 1]", parts, err)
	}
	d, err := b1.Describe("t")
	if err != nil {
		t.Fatal(err)
	}
	g := d.Groups[0]
	if len(g.Members) != 1 || g.Partitions[0].InFlight || g.Partitions[1].InFlight || g.Partitions[0].Attempts != 1 {
		t.Fatalf("after the second Rejoin: %+v; want one member, nothing in flight, attempts kept", g)
	}
	if g.Partitions[0].Owner != "a" || g.Partitions[1].Owner != "a" || before.Groups[0].Members[0] != "a" {
		t.Fatalf("after the second Rejoin: %+v; want the same assignment", g)
	}

	fenced := func(err error, what string) {
		t.Helper()
		if !errors.Is(err, tributary.ErrFenced) || !errors.Is(err, tributary.ErrClosed) {
			t.Errorf("%s: %v, want ErrFenced and ErrClosed", what, err)
		}
	}
	_, err = first.Ack(0, 0)
	fenced(err, "the first incarnation's Ack")
	_, err = first.Retry(1, 0)
	fenced(err, "the first incarnation's Retry")
	_, err = first.TryPoll(nil, 4)
	fenced(err, "the first incarnation's TryPoll")
	_, err = first.Heartbeat()
	fenced(err, "the first incarnation's Heartbeat")
	_, err = first.Join()
	fenced(err, "the first incarnation's Join")
	_, err = first.Rejoin()
	fenced(err, "the first incarnation's Rejoin")
	if ok, err := first.Leave(); ok || err != nil {
		t.Errorf("the first incarnation's Leave = %v, %v; want false, nil", ok, err)
	}

	recs, err = second.TryPoll(nil, 4)
	if got := seen(recs); err != nil || len(got) != 2 || got[0] != "x#2" || got[1] != "y#2" {
		t.Fatalf("second TryPoll = %v, %v; want [x#2 y#2]", got, err)
	}
	for p := int32(0); p < 2; p++ {
		ok, err := second.Ack(p, 0)
		wantBool(t, "the second incarnation's Ack", ok, err, true)
	}
	ok, err := second.Leave()
	wantBool(t, "the second incarnation's Leave", ok, err, true)
	d, err = b2.Describe("t")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Groups[0].Members) != 0 || d.Groups[0].Partitions[0].Committed != 1 {
		t.Fatalf("after the second's Leave: %+v", d.Groups[0])
	}
}

// Rule 25's worked example on JetStream, without the session timeout it
// needs in backendtest: Join, poll both records, Rejoin of the same
// Member: still the one member, and its next poll returns both again with
// Attempt 2; an Ack of a delivery Rejoin cancelled is false.
func TestRejoinWorkedExample(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 10})
	bt := topic(t, b, "t", 2)
	pub(t, bt, 0, "x")
	pub(t, bt, 1, "y")
	m, err := bt.Member("g", "a")
	if err != nil {
		t.Fatal(err)
	}
	if parts, err := m.Join(); err != nil || len(parts) != 2 {
		t.Fatalf("Join = %v, %v", parts, err)
	}
	if recs, err := m.TryPoll(nil, 4); err != nil || len(recs) != 2 {
		t.Fatalf("TryPoll = %v, %v", recs, err)
	}
	if parts, err := m.Rejoin(); err != nil || len(parts) != 2 {
		t.Fatalf("Rejoin = %v, %v", parts, err)
	}
	ok, err := m.Ack(0, 0)
	wantBool(t, "Ack of a delivery Rejoin cancelled", ok, err, false)
	recs, err := m.TryPoll(nil, 4)
	if err != nil || len(recs) != 2 || recs[0].Attempt != 2 || recs[1].Attempt != 2 {
		t.Fatalf("TryPoll after Rejoin = %+v, %v; want both with Attempt 2", recs, err)
	}
	d, err := b.Describe("t")
	if err != nil || len(d.Groups[0].Members) != 1 {
		t.Fatalf("Describe = %+v, %v; want the one member", d, err)
	}
}
