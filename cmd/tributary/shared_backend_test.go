package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// Programs sharing one JetStream server (tributary -backend jetstream
// -nats URL, several processes): each session here has its own Backend,
// connection and Cluster, as a process would. What one creates, another
// shows, joins, produces to and administers; a member whose process died
// is freed by another's delete consumer <group> <member>.

// sharedServer starts an embedded NATS server for the test, reached over
// TCP by its URL as -nats reaches one.
func sharedServer(t *testing.T) *jetstream.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an embedded NATS server")
	}
	srv, err := jetstream.StartServer(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	return srv
}

// sharedSession is a program session on the server at url (-backend
// jetstream -nats url), reading event files from files.
func sharedSession(t *testing.T, url string, files fstest.MapFS) (*session, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s, err := newSession(&out, files.ReadFile, sessionFlags{capacity: 100, window: 100, now: func() time.Time { return at }, seed: -1, backend: "jetstream", natsURL: url})
	require.NoError(t, err)
	t.Cleanup(func() { s.close() })
	return s, &out
}

// kill ends session s as kill -9 ends its process: the connection closes
// and nothing leaves its group. (The later cleanup's Close finds the
// backend closed and changes nothing on the server.)
func kill(s *session) { s.release() }

// execOut runs line on s and returns what it printed.
func execOut(t *testing.T, s *session, out *bytes.Buffer, line string) string {
	t.Helper()
	out.Reset()
	if err := s.exec(line); err != nil {
		t.Fatalf("%s: %s", line, errText(err))
	}
	return out.String()
}

// rowOf returns the fields of the first line of out whose first fields are
// prefix, failing the test when there is none.
func rowOf(t *testing.T, out string, prefix ...string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= len(prefix) && slices.Equal(f[:len(prefix)], prefix) {
			return f
		}
	}
	t.Fatalf("no row starting %q in:\n%s", prefix, out)
	return nil
}

// A second program finds the topics and consumer group the first created;
// when the first is killed holding an in-flight event, the second removes
// the dead member (delete consumer <group> <member>), and the event comes
// to its own consumer with attempt 2.
func TestSharedBackendAdministersAnotherProcess(t *testing.T) {
	srv := sharedServer(t)
	files := fstest.MapFS{"o.json": {Data: []byte(`{"key": "alice", "value": "pizza"}`)}}
	a, aout := sharedSession(t, srv.ClientURL(), files)
	for _, line := range []string{
		"create topic orders String 2",
		"create consumer group billing orders Range --dead-letter dlq --max-attempts 2",
		"create producer web String RoundRobin",
		"produce event web orders o.json",
		"produce event web orders o.json",
		"create consumer billing w1",
	} {
		execOut(t, a, aout, line)
	}
	// w1 takes p0's event and its process dies before acking it.
	m, ok, err := a.consumers["w1"].(*typedConsumer[string]).TryPollPartition(0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int32(1), m.Attempt)
	kill(a)

	b, bout := sharedSession(t, srv.ClientURL(), files)
	out := execOut(t, b, bout, "show topics")
	require.Equal(t, []string{"orders", "String", "2", "2", "billing"}, rowOf(t, out, "orders"))
	require.Equal(t, []string{"dlq", "String", "2", "0", "-"}, rowOf(t, out, "dlq"))
	out = execOut(t, b, bout, "show topic orders")
	require.Equal(t, "pizza", strings.Trim(rowOf(t, out, "p1", "0", "1-0")[6], `"`))

	out = execOut(t, b, bout, "show consumer group billing")
	require.Contains(t, out, "group billing: topic orders, assignor Range, members w1")
	require.Contains(t, out, "dead-letter to dlq after 2 attempts")
	require.Equal(t, []string{"orders", "p0", "0", "1", "1", "w1", "yes", "1"}, rowOf(t, out, "orders", "p0"))

	out = execOut(t, b, bout, "delete consumer billing w1")
	require.Equal(t, "removed w1 from billing (Range): no members\n", out)
	out = execOut(t, b, bout, "show consumer group billing")
	require.Equal(t, []string{"orders", "p0", "0", "1", "1", "-", "no", "1"}, rowOf(t, out, "orders", "p0"))

	// w2 joins the group made elsewhere; its dead-letter topic exists.
	out = execOut(t, b, bout, "create consumer billing w2")
	require.Equal(t, "w2 joined billing (Range): w2 [p0 p1]\n", out)
	out = execOut(t, b, bout, "consume event w2 p0")
	require.Equal(t, []string{"w2", "p0", "0", "0-0", "2", "alice", "acked", `"pizza"`}, rowOf(t, out, "w2"))

	out = execOut(t, b, bout, "set consumer group rebalancing billing Sticky")
	require.Equal(t, "rebalanced billing (Sticky): w2 [p0 p1]\n", out)
	execOut(t, b, bout, "create producer hand String Manual")
	out = execOut(t, b, bout, "produce event hand orders o.json p1")
	require.Equal(t, "produced 1-1 to orders p1 at offset 1 (key \"alice\")\n", out)
	out = execOut(t, b, bout, "playback w2 p0 0")
	require.Equal(t, []string{"w2", "p0", "0", "0-0", "1", "alice", "acked", `"pizza"`}, rowOf(t, out, "w2"))

	// What exists elsewhere is a duplicate here, worded as on the memory backend.
	for line, want := range map[string]string{
		"create topic orders String":                 `topic "orders" already exists`,
		"create consumer group billing orders Range": `consumer group "billing" already exists (on topic "orders")`,
		"show consumer group nope":                   `unknown consumer group "nope" (groups: billing)`,
		"delete consumer billing w1":                 `unknown member "w1" of consumer group "billing" (billing (Sticky): w2 [p0 p1])`,
	} {
		err := b.exec(line)
		require.Error(t, err, line)
		require.Equal(t, want, errText(err), line)
	}
}

// A consumer of a killed process that starts again under the same member
// name rejoins with its partitions as the member's new incarnation (rule
// 25): the event its first incarnation held is delivered again at once,
// attempt 2, with no ack timeout (the program sets none); the program says
// so.
func TestSharedBackendRestartUnderSameName(t *testing.T) {
	srv := sharedServer(t)
	files := fstest.MapFS{"o.json": {Data: []byte(`{"value": "pizza"}`)}}
	a, aout := sharedSession(t, srv.ClientURL(), files)
	for _, line := range []string{
		"create topic orders String 2",
		"create consumer group billing orders RoundRobin",
		"create producer web String RoundRobin",
		"produce event web orders o.json",
		"create consumer billing w1",
		"create consumer billing w2",
	} {
		execOut(t, a, aout, line)
	}
	_, ok, err := a.consumers["w1"].(*typedConsumer[string]).TryPollPartition(0)
	require.NoError(t, err)
	require.True(t, ok)
	kill(a)

	b, bout := sharedSession(t, srv.ClientURL(), files)
	out := execOut(t, b, bout, "create consumer billing w1")
	require.Equal(t, "w1 joined billing (RoundRobin): w1 [p0] w2 [p1]", strings.Split(out, "\n")[0])
	require.Contains(t, strings.Join(strings.Fields(out), " "), "joined as its new incarnation; "+
		"the events in flight to the old one on orders p0 are delivered again, attempt + 1")
	out = execOut(t, b, bout, "consume event w1 p0")
	require.Equal(t, []string{"w1", "p0", "0", "0-0", "2", "-", "acked", `"pizza"`}, rowOf(t, out, "w1"))
}

// A group name found on several topics (the library's groups are per
// topic; another client made them) is shown on each, and an admin command
// on it asks for --topic. Topics of payload types the program has no kind
// for are listed and shown with their payloads as stored.
func TestSharedBackendOtherClients(t *testing.T) {
	srv := sharedServer(t)
	lb, err := jetstream.Open(jetstream.Config{URL: srv.ClientURL(), Capacity: 100})
	require.NoError(t, err)
	lib, err := tributary.NewClusterOn(lb)
	require.NoError(t, err)
	t.Cleanup(func() { lib.Close(); lb.Close() })

	type order struct {
		ID int `json:"id"`
	}
	orders, err := tributary.CreateTopic(lib, "orders", 1, tributary.JSON[order]())
	require.NoError(t, err)
	raw, err := tributary.CreateTopic(lib, "raw", 1, tributary.Bytes())
	require.NoError(t, err)
	for _, topic := range []string{"orders", "raw"} {
		_, err := lib.CreateGroup(topic, "g", engine.RoundRobin)
		require.NoError(t, err)
	}
	po, err := tributary.NewProducer[order](lib, "po", tributary.RoundRobin())
	require.NoError(t, err)
	_, err = po.TrySend(orders, tributary.Message[order]{Value: order{ID: 7}})
	require.NoError(t, err)
	pr, err := tributary.NewProducer[[]byte](lib, "pr", tributary.RoundRobin())
	require.NoError(t, err)
	_, err = pr.TrySend(raw, tributary.Message[[]byte]{Value: []byte("a b")})
	require.NoError(t, err)
	c, err := tributary.NewConsumer(orders, "g", "m1")
	require.NoError(t, err)

	s, out := sharedSession(t, srv.ClientURL(), nil)
	got := execOut(t, s, out, "show topics")
	require.Equal(t, []string{"orders", "JSON:main.order", "1", "1", "g"}, rowOf(t, got, "orders"))
	require.Equal(t, []string{"raw", "Bytes", "1", "1", "g"}, rowOf(t, got, "raw"))
	got = execOut(t, s, out, "show topic orders")
	require.Equal(t, `{"id":7}`, rowOf(t, got, "p0", "0", "0-0")[6])
	got = execOut(t, s, out, "show topic raw")
	require.Equal(t, `"a b"`, strings.Join(rowOf(t, got, "p0", "0", "0-0")[6:], " "))

	got = execOut(t, s, out, "show consumer group g")
	require.Contains(t, got, "group g: topic orders, assignor RoundRobin, members m1")
	require.Contains(t, got, "group g: topic raw, assignor RoundRobin, members none")
	got = execOut(t, s, out, "show consumer group g --topic raw")
	require.NotContains(t, got, "topic orders")

	err = s.exec("delete consumer g m1")
	require.ErrorIs(t, err, errArgs)
	require.Equal(t, `wrong arguments: consumer group "g" is on topics "orders" "raw": give --topic <topic>`, errText(err))
	err = s.exec("delete consumer g m1 --topic raw")
	require.Equal(t, `unknown member "m1" of consumer group "g" (g (RoundRobin): no members)`, errText(err))
	got = execOut(t, s, out, "delete consumer g m1 --topic orders")
	require.Equal(t, "removed m1 from g (RoundRobin): no members\n", got)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Poll(ctx, 1)
	require.ErrorIs(t, err, tributary.ErrClosed, "the removed consumer of the other client")

	// The program has no producer of these types; it consumes them raw.
	execOut(t, s, out, "create producer p JSON RoundRobin")
	err = s.exec("produce event p orders e.json")
	require.ErrorIs(t, err, errTypeMismatch)
	got = execOut(t, s, out, "create consumer g w --topic raw")
	require.Equal(t, "w joined g (RoundRobin): w [p0]\n", got)
	got = execOut(t, s, out, "consume event w p0")
	require.Equal(t, `"a b"`, strings.Join(rowOf(t, got, "w")[7:], " "))
}
