package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A full partition holds a produce until retention makes room (a group's
// commit), and nothing is dropped or duplicated.
func TestProduceWaitsForRoom(t *testing.T) {
	c, s := serve(t, 5)
	if _, err := tributary.CreateTopic(c, "full", 1, tributary.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGroup("full", "g", tributary.RoundRobinAssignor); err != nil {
		t.Fatal(err)
	}
	p := client(t, s, kgo.DefaultProduceTopic("full"), kgo.ProduceRequestTimeout(300*time.Millisecond), kgo.RecordRetries(1000))
	ctx := testCtx(t, 30*time.Second)
	done := make(chan error, 1)
	go func() {
		var err error
		for i := range 8 {
			if err = p.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				break
			}
		}
		done <- err
	}()
	waitFor(t, testCtx(t, 10*time.Second), "5 records", func() bool { d, _ := c.Describe("full"); return d.Partitions[0].LogEndOffset == 5 })
	select {
	case err := <-done:
		t.Fatalf("all 8 records produced into a partition of capacity 5 with no commit: %v", err)
	case <-time.After(700 * time.Millisecond): // two produce timeouts: the client retried
	}
	if _, err := c.Seek("full", "g", 0, 5); err != nil { // the group commits all five
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d, _ := c.Describe("full")
	if d.Partitions[0].LogStartOffset != 5 || d.Partitions[0].LogEndOffset != 8 {
		t.Fatalf("log %d..%d, want 5..8: a record was dropped or duplicated", d.Partitions[0].LogStartOffset, d.Partitions[0].LogEndOffset)
	}
}

// rawBatch is a magic-2 batch of values from an idempotent producer.
func rawBatch(pid int64, epoch int16, seq int32, values ...string) []byte {
	vs := make([][]byte, len(values))
	for i, v := range values {
		vs[i] = []byte(v)
	}
	now := time.Now().UnixMilli()
	return sealBatch(kmsg.RecordBatch{FirstTimestamp: now, MaxTimestamp: now, ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq}, vs, recordsBody(vs))
}

// recordsBody is values encoded as the records of a batch, without keys
// or headers, at offset deltas 0, 1, 2, ….
func recordsBody(values [][]byte) []byte {
	var body, rec []byte
	for i, v := range values {
		rec = append(rec[:0], 0)
		rec = binary.AppendVarint(rec, 0)
		rec = binary.AppendVarint(rec, int64(i))
		rec = binary.AppendVarint(rec, -1)
		rec = binary.AppendVarint(rec, int64(len(v)))
		rec = append(rec, v...)
		rec = binary.AppendVarint(rec, 0)
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	return body
}

// sealBatch completes b (magic 2, the values' count and last offset
// delta, records as given) and encodes it with its length and CRC.
func sealBatch(b kmsg.RecordBatch, values [][]byte, records []byte) []byte {
	b.Magic, b.LastOffsetDelta, b.NumRecords, b.Records = 2, int32(len(values)-1), int32(len(values)), records
	enc := b.AppendTo(nil)
	binary.BigEndian.PutUint32(enc[8:], uint32(len(enc)-12))
	binary.BigEndian.PutUint32(enc[17:], crc32.Checksum(enc[21:], crc32c))
	return enc
}

func produceRaw(t *testing.T, cl *kgo.Client, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return produceRawTo(t, cl, topic, 0, 1000, records)
}

// A retried batch of an idempotent producer is answered with its first
// offsets, not appended again; a gap in sequences is refused.
func TestIdempotentRetry(t *testing.T) {
	c, s := serve(t, 100)
	cl := client(t, s)
	ip, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(context.Background(), cl)
	if err != nil || ip.ErrorCode != 0 {
		t.Fatal(err, ip)
	}
	pid := ip.ProducerID
	steps := []struct {
		seq    int32
		values []string
		code   int16
		base   int64
	}{
		{0, []string{"a", "b"}, 0, 0},
		{0, []string{"a", "b"}, 0, 0}, // the same batch again: its offsets
		{2, []string{"c"}, 0, 2},
		{5, []string{"x"}, kerr.OutOfOrderSequenceNumber.Code, -1},
		{3, []string{"d"}, 0, 3},
	}
	for i, st := range steps {
		rp := produceRaw(t, cl, "idem", rawBatch(pid, 0, st.seq, st.values...))
		if rp.ErrorCode != st.code || rp.BaseOffset != st.base {
			t.Fatalf("step %d: error %d base %d, want %d %d", i, rp.ErrorCode, rp.BaseOffset, st.code, st.base)
		}
	}
	if d, _ := c.Describe("idem"); d.Partitions[0].LogEndOffset != 4 {
		t.Fatalf("log end %d, want 4 (a, b, c, d once each)", d.Partitions[0].LogEndOffset)
	}
	// A corrupted CRC is CORRUPT_MESSAGE and appends nothing.
	b := rawBatch(-1, -1, -1, "z")
	b[len(b)-1] ^= 0xff
	if rp := produceRaw(t, cl, "idem", b); rp.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("corrupt batch: error %d", rp.ErrorCode)
	}
	if d, _ := c.Describe("idem"); d.Partitions[0].LogEndOffset != 4 {
		t.Fatalf("log end %d after a corrupt batch", d.Partitions[0].LogEndOffset)
	}
}

// TestFullPartitionHoldsNoOther: one Produce of a batch for each of four
// partitions, two of them full: the two with room are appended while the
// full ones still wait, and the full ones share the request's one
// deadline (answered REQUEST_TIMED_OUT once, not one timeout after the
// other). Broken variants caught: partitions appended one after another
// (the free partitions stay empty while the first full one waits; the
// answer comes after two timeouts).
func TestFullPartitionHoldsNoOther(t *testing.T) {
	c, s := serve(t, 2)
	if _, err := tributary.CreateTopic(c, "four", 4, tributary.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGroup("four", "g", tributary.RoundRobinAssignor); err != nil {
		t.Fatal(err)
	}
	cl := client(t, s)
	for _, p := range []int32{0, 2} { // fill partitions 0 and 2
		if rp := produceRawTo(t, cl, "four", p, 1000, rawBatch(-1, -1, -1, "a", "b")); rp.ErrorCode != 0 {
			t.Fatalf("filling partition %d: error %d", p, rp.ErrorCode)
		}
	}
	const timeout = 1500 * time.Millisecond
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, int32(timeout/time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "four"
	for p := range int32(4) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, rawBatch(-1, -1, -1, "x")
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	start := time.Now()
	answered := make(chan *kmsg.ProduceResponse, 1)
	go func() {
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Error(err)
		}
		answered <- resp
	}()
	waitFor(t, testCtx(t, 10*time.Second), "partitions 1 and 3 appended", func() bool {
		d, _ := c.Describe("four")
		return d.Partitions[1].LogEndOffset == 1 && d.Partitions[3].LogEndOffset == 1
	})
	select {
	case <-answered:
		t.Fatal("answered before the full partitions' timeout")
	default:
	}
	resp := <-answered
	elapsed := time.Since(start)
	if resp == nil {
		t.Fatal("no response")
	}
	for _, rp := range resp.Topics[0].Partitions {
		want := int16(0)
		if rp.Partition%2 == 0 {
			want = kerr.RequestTimedOut.Code
		}
		if rp.ErrorCode != want {
			t.Errorf("partition %d: error %d, want %d", rp.Partition, rp.ErrorCode, want)
		}
	}
	if elapsed >= 2*timeout {
		t.Errorf("answered after %v: the full partitions waited one after the other (timeout %v)", elapsed, timeout)
	}
}

func produceRawTo(t *testing.T, cl *kgo.Client, topic string, partition int32, timeoutMillis int32, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp, err := rawProduce(topic, partition, -1, timeoutMillis, records).RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}
