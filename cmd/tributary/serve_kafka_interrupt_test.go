package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestServeKafkaInterruptBlockedProducer: `serve -kafka -capacity 2` with
// a kgo producer blocked on a full partition (no group frees room; the
// producer's request timeout 60 s): an interrupt ends the program with the
// commands' status 0 and stops listening within stop's 10 s, without
// waiting for the blocked Produce; the producer's two first records were
// written. Broken variant it catches: a Server.Close that waits for its
// handlers (the blocked Produce holds it for the 60 s request timeout:
// stop fails after 10 s).
func TestServeKafkaInterruptBlockedProducer(t *testing.T) {
	s, addr := startServe(t, []string{"-kafka", "127.0.0.1:0", "-capacity", "2", "-"}, "", kafkaRE)
	waitStderr(t, s, "commands done; serving the Kafka protocol at "+addr)
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("full"), kgo.AllowAutoTopicCreation(),
		kgo.ProduceRequestTimeout(60*time.Second), kgo.RecordDeliveryTimeout(90*time.Second), kgo.MaxBufferedRecords(10))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 2 {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	var blocked atomic.Int32
	p.Produce(ctx, &kgo.Record{Value: []byte("r2")}, func(*kgo.Record, error) { blocked.Add(1) })
	time.Sleep(300 * time.Millisecond) // the third record's Produce waits for room
	if blocked.Load() != 0 {
		t.Fatal("the third record was answered although the partition is full")
	}
	start := time.Now()
	s.stop(t, addr)
	t.Logf("serve ended %v after the interrupt", time.Since(start))
	if strings.Contains(s.stderr.String(), "panic") {
		t.Errorf("stderr: %s", s.stderr.String())
	}
}

// TestServeKafkaJetStream: `serve -kafka -backend jetstream` (an embedded
// NATS server, as `-backend jetstream` starts one) serves Kafka clients
// too: records a kgo producer writes to an auto-created topic come back in
// order at offsets 0, 1, 2, and the program exits 0 on the interrupt.
// and a group's commit is read back by OffsetFetch. Broken variants it
// catches: a front end that cannot serve the JetStream backend (a
// produce, fetch or commit error); a commit not stored (OffsetFetch -1).
func TestServeKafkaJetStream(t *testing.T) {
	s, addr := startServe(t, []string{"-kafka", "127.0.0.1:0", "-backend", "jetstream", "-"}, "", kafkaRE)
	waitStderr(t, s, "commands done; serving the Kafka protocol at "+addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("js"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var sent []*kgo.Record
	for i := range 3 {
		sent = append(sent, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)})
	}
	for i, r := range p.ProduceSync(ctx, sent...) {
		if r.Err != nil {
			t.Fatalf("produce %d: %v", i, r.Err)
		}
		if r.Record.Offset != int64(i) {
			t.Errorf("produce %d: offset %d", i, r.Record.Offset)
		}
	}
	got := consume(ctx, t, addr, "js", 3)
	for i, r := range got {
		if r.Offset != int64(i) || string(r.Value) != fmt.Sprintf("v%d", i) {
			t.Errorf("record %d: offset %d value %q", i, r.Offset, r.Value)
		}
	}
	// A group's commit is stored in the JetStream backend and read back.
	g, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("jsg"), kgo.ConsumeTopics("js"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var recs []*kgo.Record
	for len(recs) < 3 && ctx.Err() == nil {
		recs = append(recs, g.PollFetches(ctx).Records()...)
	}
	if err := g.CommitRecords(ctx, recs...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "jsg"
	resp, err := req.RequestWith(ctx, g)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].Offset != 3 {
		t.Fatalf("OffsetFetch: %v %+v, want js p0 at 3", err, resp)
	}
	g.Close()
	s.stop(t, addr)
	if !strings.Contains(s.stderr.String(), "jetstream") && !strings.Contains(s.stderr.String(), "JetStream") {
		t.Logf("stderr:\n%s", s.stderr.String())
	}
}
