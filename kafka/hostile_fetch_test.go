package kafka

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchOnce sends f with cl and returns its one partition's answer.
func fetchOnce(t *testing.T, cl *kgo.Client, f *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
	t.Helper()
	resp, err := f.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// recordsOf decodes a fetch answer's record batches.
func recordsOf(t *testing.T, b []byte) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	for len(b) > 0 {
		bs, err := parseBatches(b[:12+int(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])))], 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		for _, bt := range bs {
			for _, r := range bt.records {
				r.OffsetDelta += int32(bt.FirstOffset)
				out = append(out, r)
			}
		}
		b = b[12+int(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11]))):]
	}
	return out
}

// TestFetchLargerThanLimits: a record larger than the fetch's MaxBytes and
// PartitionMaxBytes still comes when it is the first, alone; the small
// ones after it come on the next fetch.
func TestFetchLargerThanLimits(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "big", 1)
	big := strings.Repeat("x", 10_000)
	publish(t, c, "big", 0, big, "a", "b")
	cl := client(t, s)
	f := waitingFetch("big", 0, 0, 0)
	f.MaxBytes, f.Topics[0].Partitions[0].PartitionMaxBytes = 1000, 500
	rp := fetchOnce(t, cl, f)
	recs := recordsOf(t, rp.RecordBatches)
	if rp.ErrorCode != 0 || len(recs) != 1 || string(recs[0].Value) != big {
		t.Fatalf("error %d, %d records: want the big one alone", rp.ErrorCode, len(recs))
	}
	f.Topics[0].Partitions[0].FetchOffset = 1
	recs = recordsOf(t, fetchOnce(t, cl, f).RecordBatches)
	if len(recs) != 2 || string(recs[0].Value) != "a" || recs[1].OffsetDelta != 2 {
		t.Fatalf("%d records after the big one", len(recs))
	}
	// A kgo consumer with limits below the record gets it too.
	cons := client(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"big": {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxBytes(1000), kgo.FetchMaxPartitionBytes(500))
	ctx := testCtx(t, 10*time.Second)
	var got []*kgo.Record
	for len(got) < 3 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	if string(got[0].Value) != big || string(got[2].Value) != "b" {
		t.Fatalf("kgo got %d bytes, then %q", len(got[0].Value), got[2].Value)
	}
}

// TestFetchOffsets: a fetch at the log end is empty (no error, the high
// watermark), beyond it or below the log start (records removed once the
// only group committed past them) is OFFSET_OUT_OF_RANGE with the log's
// offsets; a kgo consumer asked for a removed offset resets to the log
// start.
func TestFetchOffsets(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "offs", 1)
	publish(t, c, "offs", 0, "0", "1", "2", "3", "4", "5")
	if _, err := c.CreateGroup("offs", "g", tributary.RoundRobinAssignor); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Seek("offs", "g", 0, 3); err != nil {
		t.Fatal(err)
	}
	cl := client(t, s)
	cases := []struct {
		offset int64
		code   int16
		n      int
	}{
		{6, 0, 0},
		{7, kerr.OffsetOutOfRange.Code, 0},
		{1 << 40, kerr.OffsetOutOfRange.Code, 0},
		{2, kerr.OffsetOutOfRange.Code, 0},
		{-1, kerr.OffsetOutOfRange.Code, 0},
		{3, 0, 3},
	}
	for _, k := range cases {
		rp := fetchOnce(t, cl, waitingFetch("offs", 0, k.offset, 0))
		if n := len(recordsOf(t, rp.RecordBatches)); rp.ErrorCode != k.code || n != k.n || rp.HighWatermark != 6 || rp.LogStartOffset != 3 {
			t.Fatalf("fetch at %d: error %d, %d records, log %d..%d; want %d, %d, 3..6", k.offset, rp.ErrorCode, n, rp.LogStartOffset, rp.HighWatermark, k.code, k.n)
		}
	}
	cons := client(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"offs": {0: kgo.NewOffset().At(1)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(testCtx(t, 10*time.Second))
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 3 {
		t.Fatalf("kgo after a reset: %d records, first %+v", len(recs), recs)
	}
}

// listOffsets asks one partition's offset for ts.
func listOffsets(t *testing.T, cl *kgo.Client, topic string, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// TestListOffsets: -2 the log start, -1 the log end, -3 the record of the
// largest timestamp (KIP-734; Kafka since KAFKA-16310 answers the record
// itself, not the last one), a timestamp the first record at or after it.
// Timestamps here are producers' and out of order.
func TestListOffsets(t *testing.T) {
	c, s := serve(t, 100)
	createTopic(t, c, "ts", 1)
	p := client(t, s, kgo.DefaultProduceTopic("ts"))
	ctx := testCtx(t, 10*time.Second)
	for _, ms := range []int64{1000, 5000, 2000, 3000} {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Timestamp: time.UnixMilli(ms)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ ts, offset, wantTS int64 }{
		{-2, 0, -1},
		{-1, 4, -1},
		{-3, 1, 5000},
		{0, 0, 1000},
		{1500, 1, 5000},
		{5000, 1, 5000},
		{5001, -1, -1},
	}
	for _, k := range cases {
		rp := listOffsets(t, p, "ts", k.ts)
		if rp.ErrorCode != 0 || rp.Offset != k.offset || rp.Timestamp != k.wantTS {
			t.Errorf("timestamp %d: error %d offset %d timestamp %d, want offset %d timestamp %d", k.ts, rp.ErrorCode, rp.Offset, rp.Timestamp, k.offset, k.wantTS)
		}
	}
	if rp := listOffsets(t, p, "ts", -7); rp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("timestamp -7: error %d", rp.ErrorCode)
	}
	_ = bytes.Equal
}
