package kafka

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopic creates a Bytes topic of n partitions on c.
func createTopic(t *testing.T, c *tributary.Cluster, name string, n int32) {
	t.Helper()
	if _, err := tributary.CreateTopic(c, name, n, tributary.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// waitingFetch is a v11 Fetch of one partition from offset that waits up
// to wait for one byte.
func waitingFetch(topic string, partition int32, offset int64, wait time.Duration) *kmsg.FetchRequest {
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(11)
	f.ReplicaID = -1
	f.MaxWaitMillis, f.MinBytes, f.MaxBytes = int32(wait/time.Millisecond), 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, topicID(topic) // kgo sends the highest version both sides serve
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = partition, offset, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	return f
}

// TestPipelinedAnswerNotHeldBack: a client pipelines a Metadata and a
// Fetch that waits for a record on one connection; the Metadata's answer
// must reach it while the Fetch waits, not after. The record is only
// published once the Metadata answer has been read, so a server that
// buffers the first answer until the second is done (no flush while a
// frame is queued) never answers within the read deadline.
func TestPipelinedAnswerNotHeldBack(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "pipe", 1)
	nc := rawConn(t, s)
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	var b []byte
	b = append(b, frameOf(meta, 1)...)
	b = append(b, frameOf(waitingFetch("pipe", 0, 0, 30*time.Second), 2)...)
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if corr, _ := readResponse(t, nc); corr != 1 {
		t.Fatalf("first answer has correlation id %d, want 1", corr)
	}
	publish(t, c, "pipe", 0, "wake")
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	corr, body := readResponse(t, nc)
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(11)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if corr != 2 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("second answer: correlation %d, %+v", corr, resp.Topics)
	}
}

// TestPipelinedCorrelationOrder: many requests of different APIs written
// at once on one connection are answered in the order sent, each with its
// own correlation id.
func TestPipelinedCorrelationOrder(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "order", 2)
	nc := rawConn(t, s)
	var b []byte
	for i := range 60 {
		var req kmsg.Request
		switch i % 3 {
		case 0:
			m := kmsg.NewPtrMetadataRequest()
			m.SetVersion(12)
			req = m
		case 1:
			req = waitingFetch("order", int32(i%2), 0, 0)
		case 2:
			a := kmsg.NewPtrApiVersionsRequest()
			a.SetVersion(0)
			req = a
		}
		b = append(b, frameOf(req, int32(1000+i))...)
	}
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if corr, _ := readResponse(t, nc); corr != int32(1000+i) {
			t.Fatalf("answer %d has correlation id %d, want %d", i, corr, 1000+i)
		}
	}
}

// TestConcurrentProducersOnePartition: several kgo producers write one
// partition at once; the offsets their records got are distinct, cover
// 0..n-1, and a consumer reads each record at the offset its producer was
// told.
func TestConcurrentProducersOnePartition(t *testing.T) {
	c, s := serve(t, 1000)
	createTopic(t, c, "conc", 1)
	const producers, each = 4, 100
	ctx := testCtx(t, 20*time.Second)
	var mu sync.Mutex
	byOffset := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, producers*each)
	for p := range producers {
		cl := client(t, s, kgo.DefaultProduceTopic("conc"), kgo.ProducerLinger(time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pw sync.WaitGroup
			for i := range each {
				pw.Add(1)
				v := fmt.Sprintf("p%d-%d", p, i)
				cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
					defer pw.Done()
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if old, dup := byOffset[r.Offset]; dup {
						errs <- fmt.Errorf("offset %d given to %s and %s", r.Offset, old, v)
					}
					byOffset[r.Offset] = v
				})
			}
			pw.Wait()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cons := client(t, s, kgo.ConsumeTopics("conc"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	for n < producers*each {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			if want, ok := byOffset[r.Offset]; !ok || want != string(r.Value) {
				t.Fatalf("offset %d holds %q, its producer was told %q", r.Offset, r.Value, want)
			}
			n++
		}
	}
}

// TestCompressionRoundTrip: batches of every compression Kafka has come
// back whole, in order.
func TestCompressionRoundTrip(t *testing.T) {
	c, s := serve(t, 1000)
	codecs := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	ctx := testCtx(t, 20*time.Second)
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "z-" + name
			createTopic(t, c, topic, 1)
			p := client(t, s, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(50*time.Millisecond))
			const n = 50
			for i := range n {
				p.Produce(ctx, &kgo.Record{Value: bytes.Repeat([]byte(fmt.Sprint(i)), 100)}, nil)
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			cons := client(t, s, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			var got []*kgo.Record
			for len(got) < n {
				fs := cons.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatal(err)
				}
				got = append(got, fs.Records()...)
			}
			for i, r := range got {
				if r.Offset != int64(i) || !bytes.Equal(r.Value, bytes.Repeat([]byte(fmt.Sprint(i)), 100)) {
					t.Fatalf("record %d: offset %d, %d bytes", i, r.Offset, len(r.Value))
				}
			}
		})
	}
}

// TestKeysValuesHeaders: keys, values and headers come back as sent, with
// Tributary's one loss: a key or value that is empty or null comes back
// null (key) or empty (value), as Tributary has no null.
func TestKeysValuesHeaders(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "kvh", 1)
	ctx := testCtx(t, 10*time.Second)
	var many []kgo.RecordHeader
	for i := range 200 {
		many = append(many, kgo.RecordHeader{Key: fmt.Sprint("h", i), Value: []byte(fmt.Sprint(i))})
	}
	many = append(many, kgo.RecordHeader{Key: "dup", Value: []byte("1")}, kgo.RecordHeader{Key: "dup", Value: []byte("2")}, kgo.RecordHeader{Key: "", Value: nil})
	sent := []*kgo.Record{
		{Key: nil, Value: nil},
		{Key: []byte{}, Value: []byte{}},
		{Key: []byte("k"), Value: []byte{0, 1, 2, 0xff}},
		{Key: []byte{0}, Value: []byte("v"), Headers: many},
	}
	p := client(t, s, kgo.DefaultProduceTopic("kvh"))
	if err := p.ProduceSync(ctx, sent...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := client(t, s, kgo.ConsumeTopics("kvh"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < len(sent) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		w := sent[i]
		if !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: key %q value %q %d headers, want %q %q %d", i, r.Key, r.Value, len(r.Headers), w.Key, w.Value, len(w.Headers))
		}
		for j, h := range r.Headers {
			if h.Key != w.Headers[j].Key || !bytes.Equal(h.Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d: %q=%q, want %q=%q", i, j, h.Key, h.Value, w.Headers[j].Key, w.Headers[j].Value)
			}
		}
	}
	if got[0].Key != nil || got[1].Key != nil {
		t.Fatalf("empty key came back as %q, %q: want null", got[0].Key, got[1].Key)
	}
}

var _ = kerr.UnknownServerError

// TestProduceUnderRetention: a kgo producer, idempotent (its default) or
// not (librdkafka's and sarama's default), writes batches of about 20
// records into a partition of capacity 5 that a group drains every 40 ms,
// so produces time out part-way (a batch larger than the room is never
// appended at once) and are retried; every value is in the log exactly
// once, in the order produced. Broken variant it catches: a retried batch
// without a producer id appended from its first record again (the log
// fills with copies of its head and the batch never completes).
func TestProduceUnderRetention(t *testing.T) {
	for _, name := range []string{"idempotent", "not idempotent"} {
		t.Run(name, func(t *testing.T) {
			var opts []kgo.Opt
			if name != "idempotent" {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			produceUnderRetention(t, opts...)
		})
	}
}

func produceUnderRetention(t *testing.T, opts ...kgo.Opt) {
	c, s := serve(t, 5)
	createTopic(t, c, "drain", 1)
	if _, err := c.CreateGroup("drain", "g", tributary.RoundRobinAssignor); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	p := client(t, s, append(opts, kgo.DefaultProduceTopic("drain"), kgo.ProduceRequestTimeout(150*time.Millisecond),
		kgo.ProducerLinger(5*time.Millisecond), kgo.RecordRetries(1<<20))...)
	const n = 60
	var seen []string
	stop := make(chan struct{})
	drained := make(chan struct{})
	go func() { // the group reads and commits what is there every 40 ms
		defer close(drained)
		for next := int64(0); ; {
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
			}
			snap, err := c.Backend().Snapshot("drain")
			if err != nil {
				t.Error(err)
				return
			}
			pd := snap.Partitions[0]
			if pd.LogEndOffset > next {
				for _, r := range snap.Records[0][next-pd.LogStartOffset:] {
					seen = append(seen, r.Payload)
				}
				next = pd.LogEndOffset
				if _, err := c.Seek("drain", "g", 0, next); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		p.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	<-drained
	if len(seen) != n {
		t.Fatalf("%d records in the log for %d produced: %.300v", len(seen), n, seen)
	}
	for i, v := range seen {
		if v != fmt.Sprint(i) {
			t.Fatalf("record %d is %q: %v", i, v, seen)
		}
	}
}

// TestCloseUnderLoad: Server.Close while kgo producers, a group consumer
// and a partition consumer are busy returns, panics nothing, and leaves
// no goroutine (goleak in TestMain, once the clients close).
func TestCloseUnderLoad(t *testing.T) {
	c, s := serve(t, 50)
	createTopic(t, c, "load", 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var produced sync.WaitGroup
	var clients []*kgo.Client
	for range 2 {
		p := client(t, s, kgo.DefaultProduceTopic("load"), kgo.RecordDeliveryTimeout(time.Second), kgo.ProduceRequestTimeout(200*time.Millisecond))
		clients = append(clients, p)
		wg.Add(1)
		produced.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				p.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))})
				if i == 20 {
					produced.Done()
				}
			}
		}()
	}
	for _, opt := range []kgo.Opt{kgo.ConsumerGroup("loadg"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())} {
		cl := client(t, s, kgo.ConsumeTopics("load"), opt)
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cl.PollFetches(ctx)
			}
		}()
	}
	produced.Wait()
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits after 10 s under load")
	}
	cancel()
	for _, cl := range clients { // fails what kgo still buffers: no broker to retry on
		cl.Close()
	}
	wg.Wait()
	if d, err := c.Describe("load"); err != nil || len(d.Partitions) != 3 {
		t.Fatalf("describe after close: %v", err)
	}
}
