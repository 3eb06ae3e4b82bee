package jetstream_test

// What Open accepts: every Config field out of range is refused at once, a
// server without JetStream is refused, a topic keeps the replay window it
// was created with, and two prefixes on one server share no topic, group,
// record or stream.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
	"github.com/nats-io/nats-server/v2/server"
)

// Config: every field out of range is ErrInvalidArgument at once.
func TestConfig(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	bad := map[string]jetstream.Config{
		"capacity 0":        {Server: srv},
		"capacity -1":       {Server: srv, Capacity: -1},
		"capacity 16777217": {Server: srv, Capacity: engine.MaxExtendedCapacity + 1},
		"neither":           {Capacity: 1},
		"both":              {Server: srv, URL: srv.ClientURL(), Capacity: 1},
		"replicas 2":        {Server: srv, Capacity: 1, Replicas: 2},
		"replicas -1":       {Server: srv, Capacity: 1, Replicas: -1},
		"replicas 5":        {Server: srv, Capacity: 1, Replicas: 5},
		"ack timeout < 0":   {Server: srv, Capacity: 1, AckTimeout: -1},
		"max bytes < 0":     {Server: srv, Capacity: 1, MaxMessageBytes: -1},
		"connect < 0":       {Server: srv, Capacity: 1, ConnectTimeout: -time.Second},
		"request < 0":       {Server: srv, Capacity: 1, RequestTimeout: -1},
		"window < 0":        {Server: srv, Capacity: 1, ReplayWindow: -1},
		"window > capacity": {Server: srv, Capacity: 1, ReplayWindow: 2},
		"storage 2":         {Server: srv, Capacity: 1, Storage: 2},
		"storage -1":        {Server: srv, Capacity: 1, Storage: -1},
		"prefix 33":         {Server: srv, Capacity: 1, Prefix: strings.Repeat("P", 33)},
	}
	for _, p := range []string{"a.b", "a>", "*", ">", "a b", "é", "a\x00", "$JS", "a/b", "\n"} {
		bad["prefix "+fmt.Sprintf("%q", p)] = jetstream.Config{Server: srv, Capacity: 1, Prefix: p}
	}
	for name, cfg := range bad {
		b, err := jetstream.Open(cfg)
		if b != nil {
			b.Close()
		}
		wantInvalid(t, "Open "+name, err)
	}
	// No stream was created by the refused Opens: a fresh default-prefix
	// backend sees no topics.
	ok := jetstream.Config{Server: srv, Capacity: 1000, Prefix: strings.Repeat("P", 32), ReplayWindow: 1000}
	b, err := jetstream.Open(ok)
	if err != nil {
		t.Fatalf("Open at the limits: %v", err)
	}
	defer b.Close()
	if ts := b.Topics(); len(ts) != 0 {
		t.Fatalf("Topics = %v", ts)
	}
	bt := topic(t, b, strings.Repeat("T", 64), 64)
	pub(t, bt, 63, "x")
	// Unreachable URLs fail within the connect timeout.
	for _, u := range []string{"nats://127.0.0.1:1", "nats://192.0.2.1:4222", "not a url", "nats://", "tls://127.0.0.1:1"} {
		begin := time.Now()
		b, err := jetstream.Open(jetstream.Config{URL: u, Capacity: 1, ConnectTimeout: 300 * time.Millisecond, RequestTimeout: 300 * time.Millisecond})
		if b != nil {
			b.Close()
		}
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
		} else if !errors.Is(err, jetstream.ErrUnavailable) {
			t.Logf("Open(%q): %v (not ErrUnavailable)", u, err)
		}
		if d := time.Since(begin); d > 2*time.Second {
			t.Errorf("Open(%q) took %v", u, d)
		}
	}
}

// Open on a NATS server that runs without JetStream fails at once with
// ErrUnavailable and says what to check.
func TestOpenServerWithoutJetStream(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("server not ready")
	}
	_, err = jetstream.Open(jetstream.Config{URL: s.ClientURL(), Capacity: 10, RequestTimeout: 2 * time.Second})
	if !errors.Is(err, jetstream.ErrUnavailable) || !strings.Contains(err.Error(), "nats-server -js") {
		t.Fatalf("Open on a server without JetStream: %v; want ErrUnavailable naming nats-server -js", err)
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

// Prefix isolation: two prefixes on one server never see each other's
// topics, groups or records.
func TestPrefixIsolation(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	open := func(prefix string) *jetstream.Backend {
		b, err := jetstream.Open(jetstream.Config{Server: srv, Capacity: 10, Prefix: prefix, Storage: jetstream.MemoryStorage})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b1, b2 := open("P1"), open("P2")
	t1 := topic(t, b1, "t", 1)
	t2 := topic(t, b2, "t", 1)
	pub(t, t1, 0, "one")
	if ts := b2.Topics(); !slices.Equal(ts, []string{"t"}) {
		t.Fatalf("P2 Topics = %v", ts)
	}
	m2 := member(t, t2, "g", "m")
	must(m2.Join()).of(t)
	wantRecs(t, poll(t, m2, 10))
	if d := must(b1.Describe("t")).of(t); len(d.Groups) != 0 {
		t.Fatalf("P1 sees P2's group: %+v", d.Groups)
	}
}

// Prefixes that differ by more than case, where one is the other plus
// "_x": the stream <Prefix>_<topic>_<p> of prefix "A" and topic "B_x" is the
// stream of prefix "A_B" and topic "x".
func TestPrefixStreamNameCollision(t *testing.T) {
	// Prefix "A" with topic "B_x" and prefix "A_B" with topic "x" would
	// both name stream A_B_x_0: a prefix with an underscore is refused, and
	// prefixes that differ keep their records apart.
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	cfg := func(prefix string) jetstream.Config {
		return jetstream.Config{Server: srv, Capacity: 10, Prefix: prefix, Storage: jetstream.MemoryStorage, RequestTimeout: time.Second}
	}
	if _, err := jetstream.Open(cfg("A_B")); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("Open(prefix A_B): %v; want ErrInvalidArgument", err)
	}
	open := func(prefix string) *jetstream.Backend {
		b, err := jetstream.Open(cfg(prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b1, b2 := open("A"), open("A-B")
	t1 := topic(t, b1, "B_x", 1)
	pub(t, t1, 0, "secret of prefix A")
	t2 := topic(t, b2, "x", 1)
	m := member(t, t2, "g", "m")
	must(m.Join()).of(t)
	if rs, err := m.TryPoll(nil, 10); len(rs) > 0 || err != nil {
		t.Fatalf("prefix A-B polled %v, %v from prefix A's topic", recs(rs), err)
	}
	if got := b2.Topics(); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("prefix A-B lists topics %v", got)
	}
}
