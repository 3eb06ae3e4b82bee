package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProduceConsumeKgo(t *testing.T) {
	_, s := serve(t, 1000)
	p := client(t, s, kgo.DefaultProduceTopic("orders"), kgo.AllowAutoTopicCreation())
	ctx := testCtx(t, 20*time.Second)
	const n = 600 // more than one read by offset (readChunk) per fetch
	for i := range n {
		r := &kgo.Record{Key: []byte(fmt.Sprint("k", i%3)), Value: []byte(fmt.Sprint("v", i)), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
		if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %d got offset %d", i, r.Offset)
		}
	}
	c := client(t, s, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < n {
		fs := c.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		if string(r.Value) != fmt.Sprint("v", i) || r.Offset != int64(i) || string(r.Key) != fmt.Sprint("k", i%3) || len(r.Headers) != 1 {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
}

// snapshotOnly hides the engine backend's OffsetReader: the front end
// then reads by Snapshot and waits by polling, as on a backend without
// reads by offset.
type snapshotOnly struct{ tributary.Backend }

// TestFetchWithoutOffsetReader runs produce, a fetch that waits for a
// later publish, and a read from the middle on a backend without
// tributary.OffsetReader. Broken variants caught: a Snapshot read that
// ignores the fetch offset (the middle read starts at 0), a wait that
// never reads again (the waiting consumer gets nothing).
func TestFetchWithoutOffsetReader(t *testing.T) {
	b, err := tributary.NewEngineBackend(100)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tributary.NewClusterOn(snapshotOnly{b})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen(c, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); c.Close() })
	if s.reader != nil {
		t.Fatal("the wrapper still offers an OffsetReader")
	}
	ctx := testCtx(t, 20*time.Second)
	p := client(t, s, kgo.DefaultProduceTopic("slow"), kgo.AllowAutoTopicCreation())
	for i := range 5 {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	mid := client(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"slow": {0: kgo.NewOffset().At(3)}}))
	fs := mid.PollFetches(ctx)
	if recs := fs.Records(); fs.Err0() != nil || len(recs) != 2 || string(recs[0].Value) != "3" || recs[0].Offset != 3 {
		t.Fatalf("read from offset 3: %v %v", fs.Err0(), recs)
	}
	// A consumer at the log end waits; a publish during its wait wakes it.
	tail := client(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"slow": {0: kgo.NewOffset().At(5)}}), kgo.FetchMaxWait(5*time.Second))
	got := make(chan []*kgo.Record, 1)
	go func() { got <- tail.PollFetches(ctx).Records() }()
	time.Sleep(200 * time.Millisecond)
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if recs := <-got; len(recs) != 1 || string(recs[0].Value) != "late" || recs[0].Offset != 5 {
		t.Fatalf("the waiting fetch got %v", recs)
	}
}

// TestKeysLandWhereKafkaPutsThem: kgo's default partitioner sends a keyed
// record to (murmur2(key) & 0x7fffffff) % partitions, and the typed
// library's KeyHash producer sends the same key to the same partition of
// the same topic, so Kafka clients and typed producers keep one key's
// records in one partition, in order. Broken variant caught: a KeyHash
// with another hash or without the mask (keys land elsewhere).
func TestKeysLandWhereKafkaPutsThem(t *testing.T) {
	c, s := serve(t, 1000)
	topic, err := tributary.CreateTopic(c, "keyed", 7, tributary.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	prod, err := tributary.NewProducer[[]byte](c, "typed", tributary.KeyHash())
	if err != nil {
		t.Fatal(err)
	}
	cl := client(t, s, kgo.DefaultProduceTopic("keyed"))
	ctx := testCtx(t, 20*time.Second)
	for i := range 200 {
		key := fmt.Sprint("customer-", i)
		r := &kgo.Record{Key: []byte(key), Value: []byte("kafka")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		info, err := prod.Send(ctx, topic, tributary.Message[[]byte]{Key: key, Value: []byte("typed")})
		if err != nil {
			t.Fatal(err)
		}
		want := (tributary.Murmur2(key) & 0x7fffffff) % 7
		if r.Partition != want || info.Partition != want {
			t.Fatalf("key %q: kgo chose partition %d, the typed KeyHash %d, want %d", key, r.Partition, info.Partition, want)
		}
	}
}

// TestNoAutoCreateOfInternalNames: a Metadata request that allows
// auto-creation creates an absent topic, but not one named like Kafka's
// internal topics ("__consumer_offsets"), which tools ask for by name.
func TestNoAutoCreateOfInternalNames(t *testing.T) {
	c, s := serve(t, 10)
	cl := client(t, s)
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, name := range []string{"__consumer_offsets", "made_by_mention"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(testCtx(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || resp.Topics[1].ErrorCode != 0 {
		t.Fatalf("errors %d %d, want UNKNOWN_TOPIC_OR_PARTITION then 0", resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode)
	}
	if got := c.Topics(); len(got) != 1 || got[0] != "made_by_mention" {
		t.Fatalf("topics %v", got)
	}
}
