package jetstream_test

import (
	"testing"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestRequestsPerCall counts the messages the backend's connection sends
// for each call of a steady round trip (one group, one member, the record
// published, polled and acked) and for an empty poll of 16 partitions
// (nats.Conn.Stats: counts, not timings), then the mean over 200 round
// trips, two fills of the partition: with snapshot reads (one server, the
// default) and key by key (as on 3 replicas, or a server that refuses
// them). The ceilings are today's counts: a change that adds a request to
// a hot call fails here, and the log shows where a round trip's requests
// go. A Seek (to the committed offset) is counted too: its hold on the log
// start is two writes of low (hold, release) where a fence after the
// cursor write would be one, so it costs one request more than a
// write-then-fence Seek; the round trip's calls do not take a hold.
func TestRequestsPerCall(t *testing.T) {
	for _, c := range []struct {
		name                   string
		snapshots              bool
		send, poll, ack, empty uint64
		seek                   uint64
	}{
		{"snapshots", true, 1, 3, 4, 33, 11},
		{"key-by-key", false, 1, 5, 6, 65, 14},
	} {
		t.Run(c.name, func(t *testing.T) {
			requestsPerCall(t, c.snapshots, c.send, c.poll, c.ack, c.empty, c.seek)
		})
	}
}

// requestsPerCall is one case of TestRequestsPerCall, with its ceilings.
func requestsPerCall(t *testing.T, snapshots bool, maxSend, maxPoll, maxAck, maxEmpty, maxSeek uint64) {
	b, _ := start(t, jetstream.Config{Capacity: 100})
	jetstream.SetSnapshots(b, snapshots)
	c := must(tributary.NewClusterOn(b)).of(t)
	defer c.Close()
	one := must(tributary.CreateTopic(c, "one", 1, tributary.String())).of(t)
	wide := must(tributary.CreateTopic(c, "wide", 16, tributary.String())).of(t)
	p := must(tributary.NewProducer[string](c, "p", tributary.Manual())).of(t)
	cons := must(tributary.NewConsumer(one, "g", "c1")).of(t)
	idle := must(tributary.NewConsumer(wide, "g", "c2")).of(t)
	count := func(f func()) uint64 {
		before := jetstream.Requests(b)
		f()
		return jetstream.Requests(b) - before
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

	// Over two fills of the partition (capacity 100): the purges an Ack
	// defers are made by the publish that finds the stream full, once a
	// fill, so a round trip costs at most one request more per fill than
	// the steady one above.
	const rounds = 200
	total := count(func() {
		for i := range rounds {
			must(p.TrySend(one, tributary.Message[string]{Value: "v"})).of(t)
			ms := must(cons.TryPoll(1)).of(t)
			if len(ms) != 1 || ms[0].Offset != int64(3+i) {
				t.Fatalf("round %d: TryPoll = %+v", 3+i, ms)
			}
			if err := cons.Ack(ms[0]); err != nil {
				t.Fatal(err)
			}
		}
	})
	per := float64(total) / rounds
	t.Logf("%d round trips over two fills: %d requests, %.2f per round trip", rounds, total, per)
	if steady := float64(send + poll + ack); per > steady+0.1 {
		t.Errorf("%.2f requests per round trip over two fills, more than %.0f + 0.1", per, steady)
	}
}
