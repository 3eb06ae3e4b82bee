package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeClock is an injectable broker clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// start starts an embedded server in a temporary directory and opens a
// backend on it with cfg (Server and defaults filled in).
func start(t *testing.T, cfg jetstream.Config) (*jetstream.Backend, *jetstream.Server) {
	t.Helper()
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	cfg.Server = srv
	if cfg.Capacity == 0 {
		cfg.Capacity = 10
	}
	b, err := jetstream.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, srv
}

// result is a call's two results, checked by of.
type result[V any] struct {
	v   V
	err error
}

func must[V any](v V, err error) result[V] { return result[V]{v, err} }

// of returns the value, failing t on an error.
func (r result[V]) of(t *testing.T) V {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func topic(t *testing.T, b *jetstream.Backend, name string, parts int32) tributary.BackendTopic {
	t.Helper()
	if ok := must(b.CreateTopic(name, parts, "string")).of(t); !ok {
		t.Fatalf("CreateTopic(%q) = false", name)
	}
	bt, _, err := b.OpenTopic(name)
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

func member(t *testing.T, bt tributary.BackendTopic, g, m string) tributary.BackendMember {
	t.Helper()
	return must(bt.Member(g, m)).of(t)
}

func pub(t *testing.T, bt tributary.BackendTopic, p int32, payload string) int64 {
	t.Helper()
	return must(bt.TryPublish(p, engine.Message{Payload: payload})).of(t)
}

// got renders records as "p/off payload #attempt".
type rec struct {
	P       int32
	Off     int64
	Payload string
	Attempt int32
}

func recs(rs []engine.Record) []rec {
	out := []rec{}
	for _, r := range rs {
		out = append(out, rec{r.Partition, r.Offset, r.Payload, r.Attempt})
	}
	return out
}

func poll(t *testing.T, m tributary.BackendMember, max int32) []rec {
	t.Helper()
	return recs(must(m.TryPoll(nil, max)).of(t))
}

func wantRecs(t *testing.T, got []rec, want ...rec) {
	t.Helper()
	if want == nil {
		want = []rec{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func wantBool(t *testing.T, what string, got bool, err error, want bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// docs/contract.md's orders example (capacity 2), plus full and room after ack.
func TestWorkedExample(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 2})
	bt := topic(t, b, "orders", 1)
	if ok, err := b.CreateTopic("orders", 1, "string"); ok || err != nil {
		t.Fatalf("duplicate CreateTopic = %v, %v", ok, err)
	}
	if off := pub(t, bt, 0, "a"); off != 0 {
		t.Fatalf("offset %d", off)
	}
	if off := pub(t, bt, 0, "b"); off != 1 {
		t.Fatalf("offset %d", off)
	}
	if _, err := bt.TryPublish(0, engine.Message{Payload: "c"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("publish to a full partition: %v", err)
	}
	m := member(t, bt, "billing", "m1")
	if a := must(m.Join()).of(t); !slices.Equal(a, []int32{0}) {
		t.Fatalf("Join = %v", a)
	}
	wantRecs(t, poll(t, m, 2), rec{0, 0, "a", 1})
	ok, err := m.Retry(0, 0)
	wantBool(t, "Retry", ok, err, true)
	wantRecs(t, poll(t, m, 2), rec{0, 0, "a", 2})
	ok, err = m.Ack(0, 0)
	wantBool(t, "Ack", ok, err, true)
	ok, err = m.Ack(0, 0)
	wantBool(t, "second Ack", ok, err, false)
	wantRecs(t, poll(t, m, 2), rec{0, 1, "b", 1})
	// The ack removed offset 0: room for one, and the offset is not reused.
	if off := pub(t, bt, 0, "c"); off != 2 {
		t.Fatalf("offset after room = %d, want 2", off)
	}
	if _, err := bt.TryPublish(0, engine.Message{Payload: "d"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("publish to a full partition: %v", err)
	}
	d := must(b.Describe("orders")).of(t)
	if p := d.Partitions[0]; p.LogStartOffset != 1 || p.LogEndOffset != 3 {
		t.Fatalf("partition %+v", p)
	}
	gp := d.Groups[0].Partitions[0]
	if d.Groups[0].Assignor != "RoundRobin" || gp.Owner != "m1" || gp.Committed != 1 || !gp.InFlight || gp.Attempts != 1 || gp.Lag != 2 {
		t.Fatalf("group %+v", d.Groups[0])
	}
}

// docs/contract.md's rebalance example: b's join cancels a's in-flight delivery of
// partition 1, b gets it (attempt 2), a's stale ack is refused, a keeps 0.
func TestRebalanceExample(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 3)
	for p := range int32(3) {
		pub(t, bt, p, "x")
	}
	ma, mb := member(t, bt, "g", "a"), member(t, bt, "g", "b")
	if a := must(ma.Join()).of(t); !slices.Equal(a, []int32{0, 1, 2}) {
		t.Fatalf("a = %v", a)
	}
	wantRecs(t, poll(t, ma, 64), rec{0, 0, "x", 1}, rec{1, 0, "x", 1}, rec{2, 0, "x", 1})
	if a := must(mb.Join()).of(t); !slices.Equal(a, []int32{1}) {
		t.Fatalf("b = %v", a)
	}
	if a := ma.Assignment(); !slices.Equal(a, []int32{0, 2}) {
		t.Fatalf("a now %v", a)
	}
	wantRecs(t, poll(t, mb, 64), rec{1, 0, "x", 2})
	ok, err := ma.Ack(1, 0)
	wantBool(t, "stale Ack", ok, err, false)
	ok, err = ma.Ack(0, 0)
	wantBool(t, "kept Ack", ok, err, true)
	ok, err = mb.Ack(1, 0)
	wantBool(t, "b's Ack", ok, err, true)
	ok, err = mb.Leave()
	wantBool(t, "Leave", ok, err, true)
	ok, err = mb.Leave()
	wantBool(t, "second Leave", ok, err, false)
	if a := ma.Assignment(); !slices.Equal(a, []int32{0, 1, 2}) {
		t.Fatalf("a after leave %v", a)
	}
	// a's partition 2 delivery survived both rebalances (owner kept).
	ok, err = ma.Ack(2, 0)
	wantBool(t, "Ack 2", ok, err, true)
}

func TestRetentionTwoGroups(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 3})
	bt := topic(t, b, "t", 1)
	for _, g := range []string{"g1", "g2"} {
		ok, err := b.CreateGroup("t", g, engine.RoundRobin)
		wantBool(t, "CreateGroup", ok, err, true)
	}
	ok, err := b.CreateGroup("t", "g1", engine.Range)
	wantBool(t, "duplicate CreateGroup", ok, err, false)
	for _, s := range []string{"a", "b", "c"} {
		pub(t, bt, 0, s)
	}
	m1, m2 := member(t, bt, "g1", "m"), member(t, bt, "g2", "m")
	must(m1.Join()).of(t)
	must(m2.Join()).of(t)
	for off := range int64(3) {
		wantRecs(t, poll(t, m1, 1), rec{0, off, string(rune('a' + off)), 1})
		ok, err := m1.Ack(0, off)
		wantBool(t, "Ack g1", ok, err, true)
	}
	if _, err := bt.TryPublish(0, engine.Message{Payload: "d"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("g2 still needs every record: %v", err)
	}
	wantRecs(t, poll(t, m2, 1), rec{0, 0, "a", 1})
	ok, err = m2.Ack(0, 0)
	wantBool(t, "Ack g2", ok, err, true)
	if off := pub(t, bt, 0, "d"); off != 3 {
		t.Fatalf("offset %d", off)
	}
	d := must(b.Describe("t")).of(t)
	if p := d.Partitions[0]; p.LogStartOffset != 1 || p.LogEndOffset != 4 {
		t.Fatalf("partition %+v", p)
	}
	// Deleting g2 (after its member leaves) frees what only it needed.
	if _, err := b.DeleteGroup("t", "g2"); !errors.Is(err, engine.ErrGroupNotEmpty) {
		t.Fatalf("DeleteGroup with members: %v", err)
	}
	must(m2.Leave()).of(t)
	ok, err = b.DeleteGroup("t", "g2")
	wantBool(t, "DeleteGroup", ok, err, true)
	ok, err = b.DeleteGroup("t", "g2")
	wantBool(t, "second DeleteGroup", ok, err, false)
	d = must(b.Describe("t")).of(t)
	if p := d.Partitions[0]; p.LogStartOffset != 3 || len(d.Groups) != 1 {
		t.Fatalf("after delete: %+v %+v", p, d.Groups)
	}
	// A re-created g2 is fresh: at the log start, no attempts.
	m2b := member(t, bt, "g2", "n")
	must(m2b.Join()).of(t)
	wantRecs(t, poll(t, m2b, 5), rec{0, 3, "d", 1})
	s := must(b.Snapshot("t")).of(t)
	if len(s.Records[0]) != 1 || s.Records[0][0].Payload != "d" {
		t.Fatalf("snapshot records %+v", s.Records)
	}
}

func TestSeek(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 10})
	bt := topic(t, b, "t", 2)
	for i := range 5 {
		pub(t, bt, 0, string(rune('a'+i)))
	}
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	for off := range int64(2) {
		poll(t, m, 1)
		ok, err := m.Ack(0, off)
		wantBool(t, "Ack", ok, err, true)
	}
	// Log start is now 2 (one group). Seek forward frees records.
	wantRecs(t, poll(t, m, 1), rec{0, 2, "c", 1})
	ok, err := b.Seek("t", "g", 0, 4)
	wantBool(t, "Seek 4", ok, err, true)
	ok, err = m.Ack(0, 2)
	wantBool(t, "Ack cancelled by Seek", ok, err, false)
	d := must(b.Describe("t")).of(t)
	if p, g := d.Partitions[0], d.Groups[0].Partitions[0]; p.LogStartOffset != 4 || g.Committed != 4 || g.InFlight || g.Attempts != 0 {
		t.Fatalf("after seek: %+v %+v", p, g)
	}
	for _, off := range []int64{3, 6} {
		if _, err := b.Seek("t", "g", 0, off); !errors.Is(err, engine.ErrOffsetOutOfRange) {
			t.Fatalf("Seek %d: %v", off, err)
		}
	}
	ok, err = b.Seek("t", "g", 0, 5) // the log end
	wantBool(t, "Seek end", ok, err, true)
	ok, err = b.Seek("t", "nope", 0, 5)
	wantBool(t, "Seek absent group", ok, err, false)
	if _, err := b.Seek("t", "g", 0, -1); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("negative offset: %v", err)
	}
	if _, err := b.Seek("t", "nope", 2, 0); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("bad partition before absent group: %v", err)
	}
	wantRecs(t, poll(t, m, 5))
	pub(t, bt, 0, "f")
	wantRecs(t, poll(t, m, 5), rec{0, 5, "f", 1})
}

func TestAddPartitions(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 1)
	ma, mb := member(t, bt, "g", "a"), member(t, bt, "g", "b")
	must(ma.Join()).of(t)
	must(mb.Join()).of(t)
	ok, err := b.SetAssignor("t", "g", engine.Range)
	wantBool(t, "SetAssignor", ok, err, true)
	if _, err := b.AddPartitions("t", 64); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("too many: %v", err)
	}
	if n := must(b.AddPartitions("t", 3)).of(t); n != 4 {
		t.Fatalf("AddPartitions = %d", n)
	}
	if a, b := ma.Assignment(), mb.Assignment(); !slices.Equal(a, []int32{0, 1}) || !slices.Equal(b, []int32{2, 3}) {
		t.Fatalf("range: a %v b %v", a, b)
	}
	if n := bt.Partitions(); n != 4 {
		t.Fatalf("Partitions = %d", n)
	}
	if off := pub(t, bt, 3, "new"); off != 0 {
		t.Fatalf("offset %d", off)
	}
	wantRecs(t, poll(t, mb, 5), rec{3, 0, "new", 1})
	d := must(b.Describe("t")).of(t)
	for p := 1; p < 4; p++ {
		if g := d.Groups[0].Partitions[p]; g.Committed != 0 {
			t.Fatalf("partition %d: %+v", p, g)
		}
	}
	if d.Groups[0].Assignor != "Range" {
		t.Fatalf("assignor %q", d.Groups[0].Assignor)
	}
}

func TestAckTimeoutWithClock(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	b, _ := start(t, jetstream.Config{AckTimeout: time.Minute, Clock: clk.Now})
	bt := topic(t, b, "t", 1)
	pub(t, bt, 0, "a")
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	rs := must(m.TryPoll(nil, 1)).of(t)
	if len(rs) != 1 || !rs[0].Time.Equal(clk.Now()) {
		t.Fatalf("records %+v (time from the broker clock)", rs)
	}
	clk.Add(59 * time.Second)
	wantRecs(t, poll(t, m, 1))
	clk.Add(time.Second)
	wantRecs(t, poll(t, m, 1), rec{0, 0, "a", 2})
	ok, err := m.Ack(0, 0)
	wantBool(t, "Ack after redelivery", ok, err, true)
}

func TestHeadersKeyTime(t *testing.T) {
	b, _ := start(t, jetstream.Config{MaxMessageBytes: 40})
	bt := topic(t, b, "t", 1)
	at := time.Unix(1234, 5678)
	hs := []engine.Header{{Key: "Tributary-Key", Value: "x"}, {Key: "a", Value: "1"}, {Key: "a", Value: "2"}, {Key: "nl", Value: "x\r\ny"}, {}}
	must(bt.TryPublish(0, engine.Message{Key: "k\n", Headers: hs, Payload: "p", Time: at})).of(t)
	if _, err := bt.TryPublish(0, engine.Message{Payload: string(make([]byte, 41))}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("oversized: %v", err)
	}
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	rs := must(m.TryPoll(nil, 5)).of(t)
	if len(rs) != 1 {
		t.Fatalf("records %+v", rs)
	}
	r := rs[0]
	if r.Key != "k\n" || !slices.Equal(r.Headers, hs) || !r.Time.Equal(at) || r.Payload != "p" || r.Topic != "t" {
		t.Fatalf("record %+v", r)
	}
}

func TestInvalidArguments(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 2)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	isInvalid := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
	_, err := b.CreateTopic("bad name", 1, "")
	isInvalid("CreateTopic name", err)
	_, err = b.CreateTopic("u", 65, "")
	isInvalid("CreateTopic count", err)
	_, err = b.CreateGroup("t", "g2", nil)
	isInvalid("nil assignor", err)
	_, err = b.CreateGroup("nope", "g", engine.RoundRobin)
	isInvalid("unknown topic", err)
	if !errors.Is(err, tributary.ErrUnknownTopic) {
		t.Errorf("unknown topic: %v", err)
	}
	if _, _, err := b.OpenTopic("nope"); !errors.Is(err, tributary.ErrUnknownTopic) {
		t.Errorf("OpenTopic: %v", err)
	}
	_, err = bt.TryPublish(2, engine.Message{})
	isInvalid("publish partition", err)
	_, err = bt.Member("g", "")
	isInvalid("member id", err)
	_, err = m.TryPoll(nil, 0)
	isInvalid("max 0", err)
	_, err = m.TryPoll(nil, 65)
	isInvalid("max 65", err)
	_, err = m.Ack(0, -1)
	isInvalid("negative ack", err)
	_, err = m.Retry(5, 0)
	isInvalid("retry partition", err)
	_, err = b.Describe("nope")
	isInvalid("Describe", err)
	// Nothing changed.
	d := must(b.Describe("t")).of(t)
	if len(d.Groups) != 1 || d.Partitions[0].LogEndOffset != 0 || slices.Contains(b.Topics(), "u") {
		t.Fatalf("state changed: %+v %v", d, b.Topics())
	}
	if ts := b.Topics(); !slices.Equal(ts, []string{"t"}) {
		t.Fatalf("Topics = %v", ts)
	}
	if _, err := jetstream.Open(jetstream.Config{URL: "nats://x", Capacity: 1, ReplayWindow: 2}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("replay window over the capacity: %v", err)
	}
	if _, err := jetstream.Open(jetstream.Config{URL: "nats://x", Capacity: engine.MaxExtendedCapacity + 1}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("capacity: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	start := time.Now()
	_, err := jetstream.Open(jetstream.Config{URL: "nats://127.0.0.1:1", Capacity: 1, ConnectTimeout: 500 * time.Millisecond})
	if !errors.Is(err, jetstream.ErrUnavailable) || !errors.Is(err, tributary.ErrUnavailable) {
		t.Fatalf("Open: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Open took %v", d)
	}
	// Both sentinels are in the chain; the text says it once.
	if msg := err.Error(); !strings.HasPrefix(msg, "tributary/jetstream: server unavailable: connecting to nats://127.0.0.1:1: ") ||
		strings.Count(msg, "unavailable") != 1 || strings.Count(msg, "tributary") != 1 {
		t.Errorf("Open's error repeats itself: %q", msg)
	}
}

// Poll blocks without busy polling, wakes on a publish, and ends on ctx,
// stop and leaving.
func TestPollWaits(t *testing.T) {
	b, _ := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	done := make(chan []engine.Record)
	go func() {
		rs, err := m.Poll(context.Background(), nil, nil, 5)
		if err != nil {
			t.Error(err)
		}
		done <- rs
	}()
	time.Sleep(100 * time.Millisecond)
	pub(t, bt, 0, "a")
	select {
	case rs := <-done:
		wantRecs(t, recs(rs), rec{0, 0, "a", 1})
	case <-time.After(fallbackBound):
		t.Fatal("Poll not woken by a publish")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Poll(ctx, nil, nil, 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if _, err := m.Poll(context.Background(), stop, nil, 5); !errors.Is(err, tributary.ErrClosed) {
		t.Fatalf("stop: %v", err)
	}
	must(m.Leave()).of(t)
	if _, err := m.Poll(context.Background(), nil, nil, 5); !errors.Is(err, tributary.ErrClosed) {
		t.Fatalf("left: %v", err)
	}
}

// fallbackBound is below the package's 2 s fallback wake-up: a wake-up
// that came sooner came from the broker.
const fallbackBound = 1500 * time.Millisecond

// Publish waits for room and is woken by the Ack that makes it (its cursor
// write: the Ack defers the purge to the publish).
func TestPublishWaitsForRoom(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 1})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	pub(t, bt, 0, "a")
	done := make(chan int64)
	go func() {
		off, err := bt.Publish(context.Background(), nil, 0, engine.Message{Payload: "b"})
		if err != nil {
			t.Error(err)
		}
		done <- off
	}()
	time.Sleep(100 * time.Millisecond)
	poll(t, m, 1)
	ok, err := m.Ack(0, 0)
	wantBool(t, "Ack", ok, err, true)
	select {
	case off := <-done:
		if off != 1 {
			t.Fatalf("offset %d", off)
		}
	case <-time.After(fallbackBound):
		t.Fatal("Publish not woken by the Ack")
	}
	stop := make(chan struct{})
	close(stop)
	if _, err := bt.Publish(context.Background(), stop, 0, engine.Message{}); !errors.Is(err, tributary.ErrClosed) {
		t.Fatalf("stop: %v", err)
	}
}

// A server restart keeps streams and committed offsets; the backend
// reconnects and keeps working.
func TestServerRestart(t *testing.T) {
	b, srv := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 1)
	for _, s := range []string{"a", "b", "c"} {
		pub(t, bt, 0, s)
	}
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	poll(t, m, 1)
	ok, err := m.Ack(0, 0)
	wantBool(t, "Ack", ok, err, true)
	wantRecs(t, poll(t, m, 1), rec{0, 1, "b", 1})
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// Calls during the reconnect may fail with ErrUnavailable; retry a while.
	var rs []rec
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err = m.Retry(0, 1)
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantBool(t, "Retry after restart", ok, nil, true)
	rs = poll(t, m, 1)
	wantRecs(t, rs, rec{0, 1, "b", 2})
	ok, err = m.Ack(0, 1)
	wantBool(t, "Ack after restart", ok, err, true)
	if off := pub(t, bt, 0, "d"); off != 3 {
		t.Fatalf("offset %d", off)
	}
	d := must(b.Describe("t")).of(t)
	if p, g := d.Partitions[0], d.Groups[0].Partitions[0]; p.LogStartOffset != 2 || p.LogEndOffset != 4 || g.Committed != 2 {
		t.Fatalf("after restart: %+v %+v", p, g)
	}
}

// The typed library runs on the backend unchanged.
func TestTypedLibrary(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 100})
	c, err := tributary.NewClusterOn(b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type order struct {
		ID int `json:"id"`
	}
	orders := must(tributary.CreateTopic(c, "orders", 2, tributary.JSON[order]())).of(t)
	if _, err := tributary.OpenTopic(c, "orders", tributary.JSON[string]()); !errors.Is(err, tributary.ErrTypeMismatch) {
		t.Fatalf("OpenTopic with another type: %v", err)
	}
	p := must(tributary.NewProducer[order](c, "web", tributary.KeyHash())).of(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 1; i <= 3; i++ {
		must(p.Send(ctx, orders, tributary.Message[order]{Key: "cust-42", Value: order{ID: i}})).of(t)
	}
	cons := must(tributary.NewConsumer(orders, "billing", "billing-1")).of(t)
	var ids []int
	for len(ids) < 3 {
		ms := must(cons.Poll(ctx, 10)).of(t)
		for _, m := range ms {
			ids = append(ids, m.Value.ID)
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(ids, []int{1, 2, 3}) {
		t.Fatalf("ids %v", ids)
	}
}

// A three-node cluster with Replicas 3.
func TestCluster3(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start-up")
	}
	cl, err := jetstream.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Shutdown()
	urls := cl.URLs()
	b, err := jetstream.Open(jetstream.Config{URL: urls[0] + "," + urls[1] + "," + urls[2], Capacity: 5, Replicas: 3, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bt := topic(t, b, "t", 2)
	pub(t, bt, 1, "a")
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	wantRecs(t, poll(t, m, 5), rec{1, 0, "a", 1})
	ok, err := m.Ack(1, 0)
	wantBool(t, "Ack", ok, err, true)
	wantRecs(t, poll(t, m, 5))
	for range 5 {
		pub(t, bt, 0, "f")
	}
	if _, err := bt.TryPublish(0, engine.Message{Payload: "c"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("publish to a full replicated partition: %v", err)
	}
	// Compare-and-set conflicts on replicated state: two handles of the
	// member race for the one deliverable record.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []engine.Record
	for _, x := range []tributary.BackendMember{m, member(t, bt, "g", "m")} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				rs, err := x.TryPoll(nil, 5)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				got = append(got, rs...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wantRecs(t, recs(got), rec{0, 0, "f", 1})
	d := must(b.Describe("t")).of(t)
	if p := d.Partitions[1]; p.LogStartOffset != 1 || p.LogEndOffset != 1 {
		t.Fatalf("partition %+v", p)
	}
}

// Concurrent members, a rebalance midway and a second group: every record
// is acked exactly once per group, in offset order per partition. With a
// replay window (rule 21), publishes evict window records while a third,
// member-less group seeks back into the window and forward again: no
// group's committed offset is ever below the log start, and no partition
// retains more than its capacity.
//
// The order is checked on the calls' intervals, not on the order in which
// the members record their acks: an Ack commits before it returns (its
// retention pass follows the commit), so the partition's next owner may
// poll and ack the next offset before the first Ack has returned.
func TestConcurrentConsumers(t *testing.T) {
	for _, w := range []int32{0, 4} {
		t.Run(fmt.Sprintf("window%d", w), func(t *testing.T) { concurrentConsumers(t, w) })
	}
}

// orderEvent is one delivery (kind 'd') or successful Ack (kind 'a') of
// offset off on partition p to group g: the call began after event begin
// and returned before event end of one counter shared by every member.
type orderEvent struct {
	kind       byte
	g          string
	p          int32
	off        int64
	begin, end int64
}

// checkAckOrder returns the per-partition order violations of events: a
// delivery of offset k (k > 0) whose Poll returned before the successful
// Ack of k − 1 was called (the backend delivered k while k − 1 was not yet
// committed; one delivery in flight per partition and group, SPEC rules 10
// and 11), and an offset acked other than once. The intervals make it
// independent of when the callers took note of their results.
func checkAckOrder(events []orderEvent, groups []string, parts int32, perPart int64) []string {
	type key struct {
		g   string
		p   int32
		off int64
	}
	acks := map[key][]orderEvent{}
	for _, e := range events {
		if e.kind == 'a' {
			k := key{e.g, e.p, e.off}
			acks[k] = append(acks[k], e)
		}
	}
	var bad []string
	for _, g := range groups {
		for p := range parts {
			for off := range perPart {
				if n := len(acks[key{g, p, off}]); n != 1 {
					bad = append(bad, fmt.Sprintf("%s %d/%d acked %d times", g, p, off, n))
				}
			}
		}
	}
	for _, e := range events {
		if e.kind != 'd' || e.off == 0 {
			continue
		}
		for _, a := range acks[key{e.g, e.p, e.off - 1}] {
			if e.end < a.begin {
				bad = append(bad, fmt.Sprintf("%s %d/%d delivered (poll returned at %d) before the Ack of %d was called (at %d)", e.g, e.p, e.off, e.end, e.off-1, a.begin))
			}
		}
	}
	return bad
}

// overlapping counts the successful Acks of events that returned after a
// Poll that delivered the next offset of the same group and partition had
// returned: the cases a check on the order the callers took note of their
// acks would have called a violation.
func overlapping(events []orderEvent) int {
	type key struct {
		g   string
		p   int32
		off int64
	}
	acks := map[key]orderEvent{}
	for _, e := range events {
		if e.kind == 'a' {
			acks[key{e.g, e.p, e.off}] = e
		}
	}
	n := 0
	for _, e := range events {
		if a, ok := acks[key{e.g, e.p, e.off - 1}]; e.kind == 'd' && ok && a.end > e.end {
			n++
		}
	}
	return n
}

// The order check passes a history whose acks were recorded out of order
// (an Ack returning after the next offset's) and fails one where an
// offset was delivered before its predecessor's Ack began, or acked twice.
func TestCheckAckOrder(t *testing.T) {
	groups := []string{"g"}
	ok := []orderEvent{
		{'d', "g", 0, 0, 1, 2},
		{'a', "g", 0, 0, 3, 9}, // commits, then its retention pass is slow
		{'d', "g", 0, 1, 4, 5}, // the next owner polls meanwhile
		{'a', "g", 0, 1, 6, 7}, // and returns first
	}
	if bad := checkAckOrder(ok, groups, 1, 2); len(bad) != 0 {
		t.Fatalf("overlapping acks: %v", bad)
	}
	early := slices.Clone(ok)
	early[2] = orderEvent{'d', "g", 0, 1, 0, 2} // returned before the Ack of 0 began
	if bad := checkAckOrder(early, groups, 1, 2); len(bad) != 1 || !strings.Contains(bad[0], "delivered") {
		t.Fatalf("early delivery: %v", bad)
	}
	twice := append(slices.Clone(ok), orderEvent{'a', "g", 0, 1, 10, 11})
	if bad := checkAckOrder(twice, groups, 1, 2); len(bad) != 1 || !strings.Contains(bad[0], "acked 2 times") {
		t.Fatalf("double ack: %v", bad)
	}
	if bad := checkAckOrder(ok[:2], groups, 1, 2); len(bad) != 1 || !strings.Contains(bad[0], "acked 0 times") {
		t.Fatalf("missing ack: %v", bad)
	}
}

func concurrentConsumers(t *testing.T, window int32) {
	const capacity = 8
	b, _ := start(t, jetstream.Config{Capacity: capacity, ReplayWindow: window})
	const parts, perPart = 3, 30
	bt := topic(t, b, "t", parts)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, g := range []string{"g1", "g2"} {
		ok, err := b.CreateGroup("t", g, engine.Sticky)
		wantBool(t, "CreateGroup", ok, err, true)
	}
	// A bound on a hang, not on speed: the run fails when no Ack
	// succeeds for stallBound (a loaded machine makes every call slower,
	// and the test then takes longer, but acks keep coming).
	const stallBound = 30 * time.Second
	var lastAck atomic.Int64 // time.Now().UnixNano() of the last successful Ack
	lastAck.Store(time.Now().UnixNano())
	stalled := make(chan time.Duration, 1)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if d := time.Since(time.Unix(0, lastAck.Load())); d > stallBound {
					stalled <- d
					cancel()
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the producer: waits for room
		defer wg.Done()
		for i := range perPart {
			for p := range int32(parts) {
				off, err := bt.Publish(ctx, nil, p, engine.Message{Payload: "x"})
				if err != nil || off != int64(i) {
					t.Errorf("Publish(%d) = %d, %v", p, off, err)
					return
				}
			}
		}
	}()
	var clock atomic.Int64 // orders the calls' beginnings and ends
	var mu sync.Mutex
	var events []orderEvent // guarded by mu
	total := 0              // successful acks; guarded by mu
	allDone := make(chan struct{})
	consume := func(g, name string, quitAfter int) {
		defer wg.Done()
		m := member(t, bt, g, name)
		if _, err := m.Join(); err != nil {
			t.Error(err)
			return
		}
		n := 0
		for {
			select {
			case <-allDone:
				return
			default:
			}
			if quitAfter > 0 && n >= quitAfter {
				if _, err := m.Leave(); err != nil {
					t.Error(err)
				}
				return
			}
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			pbegin := clock.Add(1)
			rs, err := m.Poll(pctx, nil, nil, 4)
			pend := clock.Add(1)
			pcancel()
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, r := range rs {
				events = append(events, orderEvent{'d', g, r.Partition, r.Offset, pbegin, pend})
			}
			mu.Unlock()
			for _, r := range rs {
				abegin := clock.Add(1)
				ok, err := m.Ack(r.Partition, r.Offset)
				aend := clock.Add(1)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue // cancelled by a rebalance: redelivered to the new owner
				}
				n++
				mu.Lock()
				events = append(events, orderEvent{'a', g, r.Partition, r.Offset, abegin, aend})
				lastAck.Store(time.Now().UnixNano())
				total++
				if total == 2*parts*perPart {
					close(allDone)
				}
				mu.Unlock()
			}
		}
	}
	if window > 0 {
		ok, err := b.CreateGroup("t", "g3", engine.RoundRobin)
		wantBool(t, "CreateGroup", ok, err, true)
		wg.Add(1)
		go func() { // the seeker: back to the log start, check, then forward to the log end
			defer wg.Done()
			seeks := 0
			defer func() { t.Logf("%d seeks into the window", seeks) }()
			for i := 0; ; i++ {
				select {
				case <-allDone:
					return
				case <-ctx.Done():
					return
				default:
				}
				p := int32(i % parts)
				d, err := b.Describe("t")
				if err != nil {
					t.Error(err)
					return
				}
				for _, pd := range d.Partitions {
					if n := pd.LogEndOffset - pd.LogStartOffset; n > capacity {
						t.Errorf("partition %d retains %d records", pd.Partition, n)
					}
					for _, g := range d.Groups {
						if c := g.Partitions[pd.Partition].Committed; c < pd.LogStartOffset {
							t.Errorf("group %s committed %d on %d, below the log start %d", g.Group, c, pd.Partition, pd.LogStartOffset)
						}
					}
				}
				ok, err := b.Seek("t", "g3", p, d.Partitions[p].LogStartOffset)
				switch {
				case errors.Is(err, engine.ErrOffsetOutOfRange): // a publish evicted it meanwhile
				case err != nil || !ok:
					t.Errorf("Seek back: %v, %v", ok, err)
					return
				default:
					seeks++
				}
				end := int64(perPart)
				if d, err = b.Describe("t"); err == nil {
					end = d.Partitions[p].LogEndOffset
				}
				if ok, err := b.Seek("t", "g3", p, end); err != nil || !ok {
					t.Errorf("Seek forward to %d: %v, %v", end, ok, err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Add(4)
	go consume("g1", "a", 0)
	go consume("g1", "b", 15)
	go consume("g1", "c", 0)
	go consume("g2", "a", 0)
	select {
	case <-allDone:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if total != 2*parts*perPart {
		var why string
		select {
		case d := <-stalled:
			why = fmt.Sprintf(" (no Ack for %v)", d.Round(time.Second))
		default:
		}
		d, err := b.Describe("t")
		t.Fatalf("acked %d records, want %d%s; topic now: %+v (%v)", total, 2*parts*perPart, why, d, err)
	}
	for _, v := range checkAckOrder(events, []string{"g1", "g2"}, parts, perPart) {
		t.Error(v)
	}
	t.Logf("%d acks returned after the next offset's delivery", overlapping(events))
}

// badAssignor gives every partition to "nobody".
type badAssignor struct{}

func (badAssignor) Name() string { return "bad" }
func (badAssignor) Assign(members, previous []string) []string {
	out := make([]string, len(previous))
	for i := range out {
		out[i] = "nobody"
	}
	return out
}

// firstAssignor gives every partition to the first member.
type firstAssignor struct{}

func (firstAssignor) Name() string { return "first" }
func (firstAssignor) Assign(members, previous []string) []string {
	out := make([]string, len(previous))
	for i := range out {
		out[i] = members[0]
	}
	return out
}

// User assignors: a wrong answer changes nothing; a second Backend on the
// same server shares the state but not the process-local registry.
func TestUserAssignors(t *testing.T) {
	b, srv := start(t, jetstream.Config{})
	bt := topic(t, b, "t", 2)
	ma, mb := member(t, bt, "g", "a"), member(t, bt, "g", "b")
	must(ma.Join()).of(t)
	must(mb.Join()).of(t)
	if _, err := b.SetAssignor("t", "g", badAssignor{}); !errors.Is(err, engine.ErrInvalidAssignment) {
		t.Fatalf("bad assignor: %v", err)
	}
	d := must(b.Describe("t")).of(t)
	if d.Groups[0].Assignor != "RoundRobin" || !slices.Equal(mb.Assignment(), []int32{1}) {
		t.Fatalf("changed: %+v", d.Groups[0])
	}
	ok, err := b.SetAssignor("t", "g", firstAssignor{})
	wantBool(t, "SetAssignor", ok, err, true)
	if a := ma.Assignment(); !slices.Equal(a, []int32{0, 1}) {
		t.Fatalf("a = %v", a)
	}
	b2, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	bt2, pt, err := b2.OpenTopic("t")
	if err != nil || pt != "string" {
		t.Fatalf("OpenTopic on a second backend: %v %q", err, pt)
	}
	mc := member(t, bt2, "g", "c")
	if _, err := mc.Join(); !errors.Is(err, jetstream.ErrUnknownAssignor) {
		t.Fatalf("Join with an unregistered assignor: %v", err)
	}
	ok, err = b2.SetAssignor("t", "g", engine.Sticky)
	wantBool(t, "SetAssignor on b2", ok, err, true)
	must(mc.Join()).of(t)
	if a, b, c := ma.Assignment(), mb.Assignment(), mc.Assignment(); len(a)+len(b)+len(c) != 2 || len(a) > 1 || len(b) > 1 || len(c) > 1 {
		t.Fatalf("sticky over 3 members, 2 partitions: a %v b %v c %v", ma.Assignment(), mb.Assignment(), mc.Assignment())
	}
}

// The replay window (rule 21): Open checks it against the capacity; a
// topic keeps the window it was created with, whatever window a later
// Backend on the same prefix has.
func TestReplayWindowConfig(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	for _, w := range []int32{-1, 4} {
		if _, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 3, ReplayWindow: w}); !errors.Is(err, engine.ErrInvalidArgument) {
			t.Fatalf("window %d with capacity 3: %v", w, err)
		}
	}
	b, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 3, ReplayWindow: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bt := topic(t, b, "t", 1)
	// A second Backend with no window sees the topic's window of 3.
	b0, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b0.Close()
	bt0, _, err := b0.OpenTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	m := member(t, bt0, "g", "m")
	must(m.Join()).of(t)
	for i, s := range []string{"a", "b", "c"} {
		if off := pub(t, bt0, 0, s); off != int64(i) {
			t.Fatalf("offset %d", off)
		}
	}
	for off := range int64(3) {
		poll(t, m, 1)
		ok, err := m.Ack(0, off)
		wantBool(t, "Ack", ok, err, true)
	}
	if p := must(b.Describe("t")).of(t).Partitions[0]; p.LogStartOffset != 0 || p.LogEndOffset != 3 {
		t.Fatalf("window of 3 after 3 acks: %+v", p)
	}
	// Each publish to the full partition gives up the oldest acked record.
	for i, s := range []string{"d", "e"} {
		if off := pub(t, bt, 0, s); off != int64(3+i) {
			t.Fatalf("offset %d", off)
		}
	}
	if p := must(b0.Describe("t")).of(t).Partitions[0]; p.LogStartOffset != 2 || p.LogEndOffset != 5 {
		t.Fatalf("after two evictions: %+v", p)
	}
	ok, err := b0.Seek("t", "g", 0, 2)
	wantBool(t, "Seek into the window", ok, err, true)
	wantRecs(t, poll(t, m, 1), rec{0, 2, "c", 1})
}

// A purge cut short after its compare-and-set on low (a crash) leaves
// records below the log start in the stream; the next retention pass on
// the partition purges them though low does not move, and a publish that
// finds the partition full purges them too.
func TestRepairInterruptedPurge(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 3, ReplayWindow: 2})
	bt := topic(t, b, "t", 2)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	for p := range int32(2) {
		for _, s := range []string{"a", "b", "c"} {
			pub(t, bt, p, s)
		}
	}
	for off := range int64(2) {
		if got := len(poll(t, m, 2)); got != 2 {
			t.Fatalf("polled %d records", got)
		}
		for p := range int32(2) {
			ok, err := m.Ack(p, off)
			wantBool(t, "Ack", ok, err, true)
		}
	}
	stream := func(p int32) (uint64, uint64) {
		t.Helper()
		first, msgs, err := jetstream.StreamState(b, "t", p)
		if err != nil {
			t.Fatal(err)
		}
		return first, msgs
	}
	if first, msgs := stream(0); first != 1 || msgs != 3 {
		t.Fatalf("window of 2: stream first %d msgs %d", first, msgs)
	}
	// Partition 0: an eviction (low 0 → 1) dies before its purge.
	if err := jetstream.RaiseLowWithoutPurge(b, "t", 0, 1); err != nil {
		t.Fatal(err)
	}
	if first, msgs := stream(0); first != 1 || msgs != 3 {
		t.Fatalf("crashed purge: stream first %d msgs %d", first, msgs)
	}
	s := must(b.Snapshot("t")).of(t)
	if p := s.Partitions[0]; p.LogStartOffset != 1 || len(s.Records[0]) != 2 || s.Records[0][0].Payload != "b" {
		t.Fatalf("records below low are invisible: %+v %v", p, s.Records[0])
	}
	// A Seek to the committed offset moves no cursor and no low (M − w = 0
	// < 1): the pass still purges offset 0.
	ok, err := b.Seek("t", "g", 0, 2)
	wantBool(t, "Seek", ok, err, true)
	if first, msgs := stream(0); first != 2 || msgs != 2 {
		t.Fatalf("after the repairing pass: stream first %d msgs %d", first, msgs)
	}
	// Partition 1: low raised to the committed offset 2 (nothing left to
	// evict) without a purge: the stream is full of 0 1 2, two of them
	// visible. A publish repairs and succeeds, as the engine's would.
	if err := jetstream.RaiseLowWithoutPurge(b, "t", 1, 2); err != nil {
		t.Fatal(err)
	}
	if off := pub(t, bt, 1, "d"); off != 3 {
		t.Fatalf("offset %d", off)
	}
	if first, msgs := stream(1); first != 3 || msgs != 2 {
		t.Fatalf("after the repairing publish: stream first %d msgs %d", first, msgs)
	}
	if off := pub(t, bt, 1, "e"); off != 4 {
		t.Fatalf("offset %d", off)
	}
	if _, err := bt.TryPublish(1, engine.Message{Payload: "f"}); !errors.Is(err, tributary.ErrPartitionFull) {
		t.Fatalf("publish to a full partition with nothing fully committed: %v", err)
	}
}

// retrying calls f until it returns no ErrUnavailable (or ErrContention),
// for at most 15 s: during a node's loss, requests time out while streams
// elect new leaders. ambiguous reports whether some attempt failed, after
// which the call may or may not have taken effect before the one that
// answered.
func retrying[V any](t *testing.T, what string, f func() (V, error)) (v V, ambiguous bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, err := f()
		if err == nil {
			return v, ambiguous
		}
		if !errors.Is(err, jetstream.ErrUnavailable) && !errors.Is(err, jetstream.ErrContention) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		ambiguous = true
		time.Sleep(20 * time.Millisecond)
	}
}

// A three-node cluster with Replicas 3 loses the node that leads the state
// stream and gets it back, while a member keeps publishing, polling and
// acking through the survivors: no record acked is delivered again, and
// every record published is delivered, in offset order per partition.
func TestCluster3NodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start-up and leader elections")
	}
	cl, err := jetstream.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Shutdown()
	b, err := jetstream.Open(jetstream.Config{URL: strings.Join(cl.URLs(), ","), Capacity: 20, Replicas: 3, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const parts = 2
	bt := topic(t, b, "t", parts)
	m := member(t, bt, "g", "m")
	if a := must(m.Join()).of(t); len(a) != parts {
		t.Fatalf("Join = %v", a)
	}
	published := map[[2]int64]string{} // (partition, offset) → payload
	next := [parts]int64{}             // per partition: the next offset to be delivered
	n, failed := 0, 0
	describe := func() engine.TopicDescription {
		t.Helper()
		d, ambiguous := retrying(t, "describe", func() (engine.TopicDescription, error) { return b.Describe("t") })
		if ambiguous {
			failed++
		}
		return d
	}
	// round publishes k records to each partition and consumes them all.
	round := func(phase string, k int) {
		t.Helper()
		for range k {
			for p := range int32(parts) {
				n++
				payload := fmt.Sprintf("%s-%d", phase, n)
				off, ambiguous := retrying(t, "publish", func() (int64, error) { return bt.TryPublish(p, engine.Message{Payload: payload}) })
				if ambiguous {
					failed++
				}
				published[[2]int64{int64(p), off}] = payload
			}
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			done := true
			for p := range parts {
				if next[p] < describe().Partitions[p].LogEndOffset {
					done = false
				}
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: consumed up to %v", phase, next)
			}
			rs, err := m.TryPoll(nil, parts)
			if err != nil {
				if !errors.Is(err, jetstream.ErrUnavailable) && !errors.Is(err, jetstream.ErrContention) {
					t.Fatal(err)
				}
				failed++
				// The failed poll may have reserved a record: hand it back.
				for p := range int32(parts) {
					retrying(t, "retry", func() (bool, error) { return m.Retry(p, next[p]) })
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			for _, r := range rs {
				if r.Offset < next[r.Partition] {
					t.Fatalf("%s: %d/%d delivered again after its ack", phase, r.Partition, r.Offset)
				}
				if r.Offset != next[r.Partition] {
					t.Fatalf("%s: %d/%d delivered, want offset %d", phase, r.Partition, r.Offset, next[r.Partition])
				}
				if want, ok := published[[2]int64{int64(r.Partition), r.Offset}]; ok && want != r.Payload {
					t.Fatalf("%d/%d is %q, published %q", r.Partition, r.Offset, r.Payload, want)
				}
				ok, ambiguous := retrying(t, "ack", func() (bool, error) { return m.Ack(r.Partition, r.Offset) })
				if ambiguous {
					failed++
				}
				if !ok && !ambiguous {
					t.Fatalf("%s: Ack(%d, %d) = false", phase, r.Partition, r.Offset)
				}
				// An Ack answered false after a failed attempt took effect
				// then; Describe must agree either way.
				if !ok {
					committed := describe().Groups[0].Partitions[r.Partition].Committed
					if committed != r.Offset+1 {
						t.Fatalf("%s: Ack(%d, %d) false, committed %d", phase, r.Partition, r.Offset, committed)
					}
				}
				next[r.Partition]++
			}
		}
	}
	round("before", 5)
	victim := -1
	for i := range 3 {
		if cl.Node(i).JetStreamIsStreamLeader("$G", "TRIB_STATE") {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no node leads the state stream")
	}
	began := time.Now()
	cl.StopNode(victim)
	round("down", 5)
	t.Logf("node %d (the state stream's leader) down: 5 rounds took %v, %d calls failed and were retried", victim, time.Since(began), failed)
	if err := cl.RestartNode(victim); err != nil {
		t.Fatal(err)
	}
	round("restarted", 5)
	// Nothing lost: every published offset was delivered and acked.
	for k := range published {
		if k[1] >= next[k[0]] {
			t.Fatalf("%d/%d published, never delivered", k[0], k[1])
		}
	}
	d := must(b.Describe("t")).of(t)
	for p := range parts {
		if gp, pd := d.Groups[0].Partitions[p], d.Partitions[p]; gp.Committed != next[p] || pd.LogEndOffset != next[p] || gp.InFlight {
			t.Fatalf("partition %d: %+v %+v, consumed %d", p, pd, gp, next[p])
		}
	}
}
