package kafka

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawProduce is a v8 (not flexible) Produce of one batch to one partition.
func rawProduce(topic string, partition int32, acks int16, timeoutMs int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(8)
	req.Acks, req.TimeoutMillis = acks, timeoutMs
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestCloseWhileWaiting: Server.Close returns promptly while producers
// wait for room in a full partition (one inside the append, one queued
// behind it for the partition's append lock) and while a Fetch and a
// JoinGroup wait; every one of their connections closes, and goleak
// (TestMain) sees no goroutine left.
func TestCloseWhileWaiting(t *testing.T) {
	c, s := serve(t, 2)
	createTopic(t, c, "full", 1)
	createTopic(t, c, "empty", 1)
	if _, err := c.CreateGroup("full", "holder", tributary.RoundRobinAssignor); err != nil {
		t.Fatal(err)
	}
	publish(t, c, "full", 0, "a", "b")
	var conns []net.Conn
	for range 2 {
		nc := rawConn(t, s)
		nc.Write(frameOf(rawProduce("full", 0, -1, 60_000, rawBatch(-1, -1, -1, "c")), 1))
		conns = append(conns, nc)
	}
	nc := rawConn(t, s)
	nc.Write(frameOf(waitingFetch("empty", 0, 0, 60*time.Second), 1))
	conns = append(conns, nc)
	// A JoinGroup that waits: the first member joins, a second member's
	// join makes the group wait for the first to rejoin (60 s).
	m1 := newTestMember(t, s, "m1")
	ctx := testCtx(t, 10*time.Second)
	j := m1.join(ctx, "closing", 30_000)
	if j.ErrorCode != 0 {
		t.Fatalf("join: %d", j.ErrorCode)
	}
	nj := rawConn(t, s)
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.SetVersion(5)
	jr.Group, jr.MemberID, jr.ProtocolType = "closing", "", "consumer"
	jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = 30_000, 60_000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0}
	jr.Protocols = append(jr.Protocols, p)
	nj.Write(frameOf(jr, 1))
	conns = append(conns, nj)
	waitConns(t, s, 5)
	time.Sleep(100 * time.Millisecond) // let the handlers reach their waits
	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("Close still waits after 5 s:\n%s", buf[:runtime.Stack(buf, true)])
	}
	for i, nc := range conns {
		nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		var one [1]byte
		for {
			_, err := nc.Read(one[:])
			if err == nil {
				continue // an answer written before the close
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection %d still open after Close", i)
			}
			break
		}
	}
	if d, _ := c.Describe("full"); d.Partitions[0].LogEndOffset != 2 {
		t.Fatalf("log end %d: a waiting produce was appended after Close", d.Partitions[0].LogEndOffset)
	}
}

// TestManyConnectionsDropped: connections opened and dropped at once (some
// mid-frame, some after a request) all go away, and the server serves.
func TestManyConnectionsDropped(t *testing.T) {
	_, s := serve(t, 100)
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	good := frameOf(meta, 1)
	for i := range 100 {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 1:
			nc.Write(good[:len(good)/2])
		case 2:
			nc.Write(good)
		}
		nc.Close()
	}
	waitFor(t, testCtx(t, 5*time.Second), "every dropped connection gone", func() bool { return conns(s) == 0 })
	assertHealthy(t, s)
}

// TestCreateTopicsEdges: partition counts outside 1..64, a replication
// factor of 3, names Kafka allows and Tributary does not, and one name
// twice in a request.
func TestCreateTopicsEdges(t *testing.T) {
	_, s := serve(t, 100)
	cl := client(t, s)
	req := kmsg.NewPtrCreateTopicsRequest()
	add := func(name string, parts int32, repl int16) {
		tt := kmsg.NewCreateTopicsRequestTopic()
		tt.Topic, tt.NumPartitions, tt.ReplicationFactor = name, parts, repl
		req.Topics = append(req.Topics, tt)
	}
	add("zero", 0, 1)
	add("many", 65, 1)
	add("dflt", -1, -1)
	add("three", 1, 3)
	add("a.b", 1, 1)
	add("", 1, 1)
	add("twice", 2, 1)
	add("twice", 3, 1)
	add("max", 64, 1)
	resp, err := req.RequestWith(testCtx(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{kerr.InvalidPartitions.Code, kerr.InvalidPartitions.Code, 0, kerr.InvalidReplicationFactor.Code,
		kerr.InvalidTopicException.Code, kerr.InvalidTopicException.Code, 0, kerr.TopicAlreadyExists.Code, 0}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d answers for %d topics", len(resp.Topics), len(want))
	}
	for i, rt := range resp.Topics {
		if rt.ErrorCode != want[i] {
			t.Errorf("%q (%d): error %d, want %d", rt.Topic, i, rt.ErrorCode, want[i])
		}
	}
	if resp.Topics[2].NumPartitions != 1 || resp.Topics[8].NumPartitions != 64 {
		t.Errorf("partitions %d, %d", resp.Topics[2].NumPartitions, resp.Topics[8].NumPartitions)
	}
	// Metadata by topic id names the topic; an unknown id is UNKNOWN_TOPIC_ID.
	md := kmsg.NewPtrMetadataRequest()
	for _, id := range [][16]byte{resp.Topics[6].TopicID, {1, 2, 3}} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.TopicID = id
		md.Topics = append(md.Topics, mt)
	}
	mr, err := md.RequestWith(testCtx(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(mr.Topics) != 2 || mr.Topics[0].Topic == nil || *mr.Topics[0].Topic != "twice" || len(mr.Topics[0].Partitions) != 2 ||
		mr.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("metadata by id: %+v", mr.Topics)
	}
}

// TestProduceEdges: a partition outside the topic is
// UNKNOWN_TOPIC_OR_PARTITION; with acks 0 an error closes the connection
// (the client has no other way to learn of it) and a success answers
// nothing; a transactional InitProducerID and a producer epoch going
// backwards are refused.
func TestProduceEdges(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "edge", 2)
	cl := client(t, s)
	ctx := testCtx(t, 10*time.Second)
	for _, p := range []int32{2, -1, 1 << 30} {
		resp, err := rawProduce("edge", p, -1, 1000, rawBatch(-1, -1, -1, "x")).RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("partition %d: error %d", p, code)
		}
	}
	// acks 0: a good produce, then a metadata answered (nothing came for
	// the produce); then a bad one closes the connection.
	nc := rawConn(t, s)
	nc.Write(frameOf(rawProduce("edge", 0, 0, 1000, rawBatch(-1, -1, -1, "ok")), 1))
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	nc.Write(frameOf(meta, 2))
	if corr, _ := readResponse(t, nc); corr != 2 {
		t.Fatalf("answer of correlation %d after an acks-0 produce, want 2 (the metadata's)", corr)
	}
	nc.Write(frameOf(rawProduce("edge", 5, 0, 1000, rawBatch(-1, -1, -1, "bad")), 3))
	assertClosed(t, nc)
	if d, _ := c.Describe("edge"); d.Partitions[0].LogEndOffset != 1 {
		t.Fatalf("log end %d, want 1 (the acks-0 record)", d.Partitions[0].LogEndOffset)
	}

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.SetVersion(4)
	ip.TransactionalID = kmsg.StringPtr("tx")
	ipr := rawRoundTrip(t, rawConn(t, s), ip).(*kmsg.InitProducerIDResponse)
	if ipr.ErrorCode == 0 || ipr.ProducerID != -1 {
		t.Fatalf("transactional InitProducerID: error %d id %d", ipr.ErrorCode, ipr.ProducerID)
	}
	// Epoch 1 then epoch 0 of one producer id.
	pid := int64(424242)
	if rp := produceRaw(t, cl, "edge", rawBatch(pid, 1, 0, "e1")); rp.ErrorCode != 0 {
		t.Fatalf("epoch 1: error %d", rp.ErrorCode)
	}
	if rp := produceRaw(t, cl, "edge", rawBatch(pid, 0, 1, "e0")); rp.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("epoch going back: error %d", rp.ErrorCode)
	}
	// A new epoch starts its sequences again at 0.
	if rp := produceRaw(t, cl, "edge", rawBatch(pid, 2, 1, "e2")); rp.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("epoch 2 at sequence 1: error %d", rp.ErrorCode)
	}
	if rp := produceRaw(t, cl, "edge", rawBatch(pid, 2, 0, "e2")); rp.ErrorCode != 0 {
		t.Fatalf("epoch 2 at sequence 0: error %d", rp.ErrorCode)
	}
}

// TestSimpleCommits: a consumer outside any group membership (kcat -C
// with commits, a standalone consumer) commits with generation -1 and an
// empty member id; OffsetFetch answers it, -1 for partitions and topics
// the group never committed; a simple commit to a group with live members
// is refused.
func TestSimpleCommits(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "simple", 2)
	createTopic(t, c, "other", 1)
	publish(t, c, "simple", 0, "a", "b", "c")
	cl := client(t, s)
	ctx := testCtx(t, 10*time.Second)
	commit := func(group string, gen int32, member string, off int64) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID = group, gen, member
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "simple"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, off
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit("standalone", -1, "", 2); code != 0 {
		t.Fatalf("simple commit: error %d", code)
	}
	if code := commit("standalone", 3, "nobody", 2); code != kerr.IllegalGeneration.Code {
		t.Fatalf("generation 3 of an unknown group: error %d", code)
	}
	m := newTestMember(t, s, "m")
	offs, code := m.fetchOffsets(ctx, "standalone", "simple", 0, 1)
	if code != 0 || offs[0] != 2 {
		t.Fatalf("offset fetch: %v, error %d", offs, code)
	}
	if offs, _ := m.fetchOffsets(ctx, "standalone", "other", 0); offs[0] != -1 {
		t.Fatalf("a topic never committed: %v, want -1", offs)
	}
	if offs, _ := m.fetchOffsets(ctx, "standalone", "absent", 0); offs[0] != -1 {
		t.Fatalf("an absent topic: %v, want -1", offs)
	}
	if d, _ := c.Describe("simple"); d.Partitions[0].LogStartOffset != 2 {
		t.Fatalf("log start %d: the simple commit did not drive retention", d.Partitions[0].LogStartOffset)
	}
	// A group with a live member refuses a simple commit.
	j := m.join(ctx, "live", 30_000)
	if j.ErrorCode != 0 {
		t.Fatalf("join: %d", j.ErrorCode)
	}
	if code := commit("live", -1, "", 1); code == 0 {
		t.Fatal("a simple commit to a group with a member was accepted")
	}
	_ = kgo.NewOffset
	_ = context.Background
}

// TestProduceTimeoutCoversTheQueue: a produce with a short timeout queued
// behind one with a long timeout (both waiting for room in a full
// partition) is answered REQUEST_TIMED_OUT within its own timeout, not
// after the long one's wait: the timeout bounds the wait for the
// partition's append order too. The long produce waits 30 s and the
// short one's answer is read with a 5 s deadline, so a server that takes
// the partition's append lock before starting the timeout fails.
func TestProduceTimeoutCoversTheQueue(t *testing.T) {
	c, s := serve(t, 1)
	createTopic(t, c, "q", 1)
	if _, err := c.CreateGroup("q", "holder", tributary.RoundRobinAssignor); err != nil {
		t.Fatal(err)
	}
	publish(t, c, "q", 0, "a")
	long := rawConn(t, s)
	long.Write(frameOf(rawProduce("q", 0, -1, 30_000, rawBatch(-1, -1, -1, "long")), 1))
	waitConns(t, s, 1)
	time.Sleep(100 * time.Millisecond) // the long produce holds the partition
	short := rawConn(t, s)
	short.Write(frameOf(rawProduce("q", 0, -1, 200, rawBatch(-1, -1, -1, "short")), 2))
	short.SetReadDeadline(time.Now().Add(5 * time.Second))
	corr, body := readResponse(t, short)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(8)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; corr != 2 || code != kerr.RequestTimedOut.Code {
		t.Fatalf("short produce: correlation %d, error %d", corr, code)
	}
	// Room for one: the long produce gets it, the short one appended nothing.
	if _, err := c.Seek("q", "holder", 0, 1); err != nil {
		t.Fatal(err)
	}
	long.SetReadDeadline(time.Now().Add(10 * time.Second))
	corr, body = readResponse(t, long)
	resp = kmsg.NewPtrProduceResponse()
	resp.SetVersion(8)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; corr != 1 || p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("long produce: correlation %d, error %d, offset %d", corr, p.ErrorCode, p.BaseOffset)
	}
}

// compressedBatch is a magic-2 batch of values, no producer id, its
// records compressed with codec.
func compressedBatch(t *testing.T, codec kgo.CompressionCodec, values ...[]byte) []byte {
	t.Helper()
	comp, err := kgo.DefaultCompressor(codec)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	out, typ := comp.Compress(&buf, recordsBody(values))
	if typ == 0 {
		t.Fatal("nothing compressed")
	}
	now := time.Now().UnixMilli()
	return sealBatch(kmsg.RecordBatch{Attributes: int16(typ), FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1}, values, out)
}

// TestDecompressionBomb: a batch of a few kilobytes that decompresses
// past the Server's max request bytes (here 1 MiB) is MESSAGE_TOO_LARGE
// and appends nothing, whatever the codec; one below it is appended. The
// same bound holds for the partition's batches together. Broken variant
// it catches: decompressing without a bound (kgo's default decompressor
// allows 2 GiB a batch), so a 1 MiB request can make the server allocate
// gigabytes.
func TestDecompressionBomb(t *testing.T) {
	c, s := serve(t, 100, WithMaxRequestBytes(1<<20))
	cl := client(t, s)
	zeros := make([]byte, 300<<10)
	codecs := map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "bomb-" + name
			createTopic(t, c, topic, 1)
			bomb := compressedBatch(t, codec, zeros, zeros, zeros, zeros) // 1.2 MiB
			if len(bomb) > 1<<17 {
				t.Fatalf("the bomb is %d bytes compressed", len(bomb))
			}
			if rp := produceRaw(t, cl, topic, bomb); rp.ErrorCode != kerr.MessageTooLarge.Code {
				t.Fatalf("1.2 MiB decompressed: error %d, want MESSAGE_TOO_LARGE", rp.ErrorCode)
			}
			two := compressedBatch(t, codec, zeros, zeros) // 600 KiB each, 1.2 MiB together
			if rp := produceRaw(t, cl, topic, append(append([]byte(nil), two...), two...)); rp.ErrorCode != kerr.MessageTooLarge.Code {
				t.Fatalf("two batches of 600 KiB: error %d, want MESSAGE_TOO_LARGE", rp.ErrorCode)
			}
			if rp := produceRaw(t, cl, topic, two); rp.ErrorCode != 0 || rp.BaseOffset != 0 {
				t.Fatalf("600 KiB decompressed: error %d offset %d", rp.ErrorCode, rp.BaseOffset)
			}
			if d, _ := c.Describe(topic); d.Partitions[0].LogEndOffset != 2 {
				t.Fatalf("log end %d, want 2", d.Partitions[0].LogEndOffset)
			}
		})
	}
}
