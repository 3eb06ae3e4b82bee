package jetstream_test

import (
	"fmt"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestRequestsPerCall counts the messages the backend's connection sends
// for each call of a steady round trip (one group, one member, the record
// published, polled and acked) and for an empty poll of 16 partitions
// (nats.Conn.Stats: counts, not timings), then each of 200 round trips,
// two fills of the partition: with snapshot reads (one server, the
// default) and key by key (as on 3 replicas, or a server that refuses
// them). The ceilings are today's counts: a change that adds a request to
// a hot call fails here, and the log shows where a round trip's requests
// go. An Ack of what the member's own poll reserved is one
// compare-and-set of the cursor (settle's fast path; on 3 replicas the
// poll reads the group once more after its reservation, so that its Ack
// may take that path). A Seek (to the committed offset) is counted too:
// its hold on the log start is two writes of low (hold, release), and its
// retention pass applies what the Acks before it owe (a raise of low, a
// purge and a room notice).
//
// One request is timed rather than called for: a send reads the topic's
// partition count again (Topic.Partitions: one read of the topic key)
// once the cached count is over a second old. count leaves it out of each
// call it falls in, seen by the cache's read instant changing
// (CountReadAt), and the rereads are checked against the time taken
// instead: at most one a second, and one more.
//
// A fill is the round trip whose publish finds the partition full. An Ack
// runs no retention, so the stream holds capacity records, all committed,
// and low is where the last pass left it; the warm-up's last Seek ran one
// (low at the committed offset, the stream empty), so the fills are the
// publishes of offsets 3 + capacity·k. The publish is refused;
// TryPublish's retention pass with eviction reads low and the cursors,
// raises low to the least committed offset, purges the records below it
// and sends a room notice; the publish is made again. fill is what that
// costs over a steady round trip: with snapshot reads 5 (refusal, one
// snapshot of low, the cursors and the groups, the raise of low, purge,
// notice); key by key 8 (refusal, low, the cursor key listing, the
// cursor, its group, the raise, purge, notice).
func TestRequestsPerCall(t *testing.T) {
	for _, c := range []struct {
		name                   string
		snapshots              bool
		send, poll, ack, empty uint64
		seek, fill             uint64
	}{
		{"snapshots", true, 1, 3, 1, 33, 13, 5},
		{"key-by-key", false, 1, 6, 1, 65, 16, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			requestsPerCall(t, c.snapshots, c.send, c.poll, c.ack, c.empty, c.seek, c.fill)
		})
	}
}

// requestsPerCall is one case of TestRequestsPerCall, with its ceilings.
func requestsPerCall(t *testing.T, snapshots bool, maxSend, maxPoll, maxAck, maxEmpty, maxSeek, maxFill uint64) {
	const capacity = 100
	b, _ := start(t, jetstream.Config{Capacity: capacity})
	jetstream.SetSnapshots(b, snapshots)
	c := must(tributary.NewClusterOn(b)).of(t)
	defer c.Close()
	one := must(tributary.CreateTopic(c, "one", 1, tributary.String())).of(t)
	wide := must(tributary.CreateTopic(c, "wide", 16, tributary.String())).of(t)
	p := must(tributary.NewProducer[string](c, "p", tributary.Manual())).of(t)
	cons := must(tributary.NewConsumer(one, "g", "c1")).of(t)
	idle := must(tributary.NewConsumer(wide, "g", "c2")).of(t)
	// count is the requests f sends, less the partition count's reread
	// (one request) when one falls in f; rereads counts those.
	var rereads int
	begin := time.Now()
	count := func(f func()) uint64 {
		before, read := jetstream.Requests(b), jetstream.CountReadAt(b, "one")
		f()
		n := jetstream.Requests(b) - before
		if jetstream.CountReadAt(b, "one") != read {
			n--
			rereads++
		}
		return n
	}
	var send, poll, ack, empty, seek uint64
	for i := range 3 { // the first round warms the caches; the last is counted
		send = count(func() { must(p.TrySend(one, tributary.Message[string]{Value: "v"})).of(t) })
		var ms []tributary.Message[string]
		poll = count(func() { ms = must(cons.TryPoll(1)).of(t) })
		if len(ms) != 1 || ms[0].Offset != int64(i) {
			t.Fatalf("round %d: TryPoll = %+v", i, ms)
		}
		ack = count(func() {
			if err := cons.Ack(ms[0]); err != nil {
				t.Fatal(err)
			}
		})
		empty = count(func() {
			if ms := must(idle.TryPoll(16)).of(t); len(ms) != 0 {
				t.Fatalf("idle TryPoll = %+v", ms)
			}
		})
		seek = count(func() {
			// To the committed offset (the log end): the cursor rewritten
			// under a hold on the log start, then a retention pass.
			if ok := must(b.Seek("one", "g", 0, int64(i+1))).of(t); !ok {
				t.Fatal("Seek = false")
			}
		})
	}
	t.Logf("requests: TrySend %d, TryPoll(1) %d, Ack %d (round trip %d); an empty TryPoll(16) of 16 partitions %d; Seek %d", send, poll, ack, send+poll+ack, empty, seek)
	for _, c := range []struct {
		what      string
		got, most uint64
	}{{"TrySend", send, maxSend}, {"TryPoll(1)", poll, maxPoll}, {"Ack", ack, maxAck}, {"empty TryPoll(16)", empty, maxEmpty}, {"Seek", seek, maxSeek}} {
		if c.got > c.most {
			t.Errorf("%s made %d requests, more than today's %d", c.what, c.got, c.most)
		}
	}

	// Over two fills of the partition: each round trip costs the steady
	// one above, but a fill (the publish of offset 3 + capacity·k, which
	// finds the stream holding capacity committed records) costs more,
	// and at most maxFill more.
	const rounds = 200
	steady := send + poll + ack
	var total uint64
	for i := range rounds {
		off := int64(3 + i)
		n := count(func() {
			must(p.TrySend(one, tributary.Message[string]{Value: "v"})).of(t)
			ms := must(cons.TryPoll(1)).of(t)
			if len(ms) != 1 || ms[0].Offset != off {
				t.Fatalf("round %d: TryPoll = %+v", off, ms)
			}
			if err := cons.Ack(ms[0]); err != nil {
				t.Fatal(err)
			}
		})
		total += n
		most := steady
		if off > 3 && (off-3)%capacity == 0 {
			most += maxFill
			t.Logf("the fill at offset %d: %d requests (steady %d + %d)", off, n, steady, int64(n)-int64(steady))
			if n <= steady {
				t.Errorf("the round trip of offset %d made %d requests, no more than a steady one: its publish did not find the partition full", off, n)
			}
		}
		if n > most {
			t.Errorf("the round trip of offset %d made %d requests, more than %d", off, n, most)
		}
	}
	took := time.Since(begin)
	t.Logf("%d round trips over two fills: %d requests (steady %d × %d + fills), %.2f per round trip; the partition count read again %d times besides, in the %v of counted calls",
		rounds, total, steady, rounds, float64(total)/rounds, rereads, took.Round(time.Millisecond))
	if most := int(took/time.Second) + 1; rereads > most {
		t.Errorf("the partition count was read again %d times in %v, more than once a second (%d)", rereads, took, most)
	}
}

// TestRequestsPerRecord counts the requests per delivered record of a
// steady drain of a 16-partition topic on one server (snapshot reads),
// counted with nats.Conn.Stats while 8 records wait on each partition:
// with one member owning all 16 partitions (TryPoll(16): one snapshot,
// then a read and a reservation per record; an Ack each) and with 16
// members owning one each (TryPoll(1) and Ack). Raw JetStream's durable
// pull consumers make 2 (a fetch and an ack: TestRawRequestsPerRoundTrip);
// the goal here is at most 4.
func TestRequestsPerRecord(t *testing.T) {
	for _, n := range []int{1, 16} {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			b, _ := start(t, jetstream.Config{Capacity: 64})
			bt := topic(t, b, "t", 16)
			for p := range int32(16) {
				for range 8 {
					pub(t, bt, p, "x")
				}
			}
			members := make([]tributary.BackendMember, n)
			for i := range members {
				members[i] = member(t, bt, "g", fmt.Sprintf("m%d", i))
				must(members[i].Join()).of(t)
			}
			for _, m := range members {
				if got := len(m.Assignment()); got != 16/n {
					t.Fatalf("set-up: a member owns %d partitions, want %d", got, 16/n)
				}
			}
			before, delivered := jetstream.Requests(b), 0
			for round := 0; delivered < 16*8 && round < 1000; round++ {
				for _, m := range members {
					rs, err := m.TryPoll(nil, int32(16/n))
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range rs {
						ok, err := m.Ack(r.Partition, r.Offset)
						wantBool(t, "Ack", ok, err, true)
					}
					delivered += len(rs)
				}
			}
			if delivered != 16*8 {
				t.Fatalf("delivered %d records, want %d", delivered, 16*8)
			}
			per := float64(jetstream.Requests(b)-before) / float64(delivered)
			t.Logf("%d members: %.2f requests per delivered record", n, per)
			if per > 4 {
				t.Errorf("%d members: %.2f requests per delivered record, more than 4", n, per)
			}
		})
	}
}
