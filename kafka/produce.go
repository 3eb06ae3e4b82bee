package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// partKey names one partition of a topic.
type partKey struct {
	topic     string
	partition int32
}

// producers holds the ids InitProducerID hands out and, per producer id
// and partition, the sequence state of an idempotent producer (Kafka's
// enable.idempotence): a retried batch whose records were appended is
// answered with their offsets, not appended again.
type producers struct {
	// mu guards next, seqs and partial. Taken under a partition's append
	// lock (Server.appendMu), never the other way round.
	mu   sync.Mutex
	next int64
	seqs map[seqKey]*seqState
	// partial is, per partition, the last batch without a producer id
	// that a timeout cut short (a full partition): a retry of the same
	// batch (the same bytes: CRC, length, first timestamp, records)
	// appends only the records it lacks, so a producer that is not
	// idempotent neither duplicates the records appended before the
	// timeout nor, with a batch larger than the room retention makes at
	// a time, retries it for ever.
	partial map[partKey]partialBatch
}

// partialBatch is a batch cut short: its identity, the records appended
// and the offset of its first.
type partialBatch struct {
	crc            int32
	length         int32
	firstTimestamp int64
	numRecords     int32
	count          int32
	base           int64
}

func (pb partialBatch) is(b *batch) bool {
	return pb.crc == b.CRC && pb.length == b.Length && pb.firstTimestamp == b.FirstTimestamp && pb.numRecords == b.NumRecords
}

type seqKey struct {
	pid       int64
	topic     string
	partition int32
}

// seqState is an idempotent producer's state on one partition: its epoch,
// the sequence number its next batch must start with, and its last
// batches (Kafka keeps five), to answer a retry of one of them.
type seqState struct {
	epoch  int16
	next   int32
	recent [5]batchInfo
	n      int // batches recorded, for recent's ring
}

// batchInfo is one appended batch: its first sequence, record count and
// the offset its first record got.
type batchInfo struct {
	firstSeq, count int32
	base            int64
}

func (p *producers) init() {
	p.seqs = map[seqKey]*seqState{}
	p.partial = map[partKey]partialBatch{}
	p.next = time.Now().UnixMilli() << 16 // distinct across restarts, as ids are never persisted
}

// handleInitProducerID gives an idempotent producer a new id, epoch 0.
// A transactional id is refused (transactions are not served):
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report as fatal.
func handleInitProducerID(s *Server, r *request, req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil
	}
	s.producers.mu.Lock()
	resp.ProducerID = s.producers.next
	s.producers.next++
	s.producers.mu.Unlock()
	resp.ProducerEpoch = 0
	return resp, nil
}

// handleProduce appends each partition's record batches (magic 2, any of
// Kafka's compressions) record by record, with the request's timeout as
// the wait for room in a full partition (Tributary's retention, SPEC rule
// 13): when it runs out the partition answers REQUEST_TIMED_OUT, which
// clients retry, so nothing is dropped. A batch cut short by the timeout
// keeps the records it appended, and its retry appends only the rest
// (an idempotent producer's by sequence, another's by the batch's bytes:
// producers.partial), so nothing is duplicated either. Acks 0, 1 and -1 are served alike
// (one broker: an append is acknowledged by all replicas at once); acks 0
// writes no response, and closes the connection on an error, as Kafka.
// A partition's batches that decompress past the Server's max request
// bytes are MESSAGE_TOO_LARGE, refused before they are decompressed whole.
func handleProduce(s *Server, r *request, req *kmsg.ProduceRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		for _, t := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, kerr.InvalidRequiredAcks.Code, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	// One deadline for the whole request, and the partitions appended
	// concurrently: a full partition neither holds the others back nor
	// adds its wait to theirs.
	timeout := time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond
	ctx := r.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var wg sync.WaitGroup
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		resp.Topics = append(resp.Topics, rt)
	}
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			rp.Default()
			rp.Partition = p.Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			if req.TransactionID != nil {
				rp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				continue
			}
			wg.Go(func() { s.producePartition(ctx, rp, t.Topic, p.Records, timeout > 0) })
		}
	}
	wg.Wait()
	failed := false
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			failed = failed || rp.ErrorCode != 0
		}
	}
	if req.Acks == 0 {
		if failed {
			return nil, errors.New("produce with acks 0 failed: closing the connection, as Kafka does")
		}
		return nil, nil
	}
	return resp, nil
}

// producePartition fills rp with the outcome of appending one
// partition's record set.
func (s *Server) producePartition(ctx context.Context, rp *kmsg.ProduceResponseTopicPartition, topic string, records []byte, wait bool) {
	base, code, msg := s.produce(ctx, topic, rp.Partition, records, wait)
	rp.BaseOffset, rp.ErrorCode = base, code
	if msg != "" {
		rp.ErrorMessage = kmsg.StringPtr(msg)
	}
	if code == 0 && s.reader != nil {
		if start, _, err := s.reader.LogOffsets(topic, rp.Partition); err == nil {
			rp.LogStartOffset = start
		}
	}
}

// produce appends the batches of one partition and returns the offset of
// its first record, or -1 and Kafka's error code with a message. With
// wait, a full partition is waited on until ctx ends (the request's
// timeout); without, it fails at once.
func (s *Server) produce(ctx context.Context, topic string, partition int32, records []byte, wait bool) (int64, int16, string) {
	h, err := s.topicOrCreate(topic, true)
	if err != nil {
		return -1, errorCode(err), err.Error()
	}
	if partition < 0 || partition >= h.Partitions() {
		return -1, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("partition %d outside [0, %d)", partition, h.Partitions())
	}
	batches, err := parseBatches(records, int64(s.maxRequestBytes))
	if errors.Is(err, errDecompressLimit) {
		return -1, kerr.MessageTooLarge.Code, err.Error()
	}
	if err != nil {
		return -1, kerr.CorruptMessage.Code, err.Error()
	}
	lock := s.appendLock(topic, partition)
	select {
	case lock <- struct{}{}:
	case <-ctx.Done():
		return -1, kerr.RequestTimedOut.Code, "the partition's earlier appends still wait for room (retention waits for every group's commits)"
	}
	defer func() { <-lock }()
	base := int64(-1)
	for _, b := range batches {
		off, code, msg := s.appendBatch(ctx, h, partition, b, wait)
		if code != 0 {
			return -1, code, msg
		}
		if base < 0 {
			base = off
		}
	}
	return base, 0, ""
}

// appendLock returns the partition's append lock: a channel of one slot,
// taken by sending, so that a wait for it ends with the request's context.
func (s *Server) appendLock(topic string, partition int32) chan struct{} {
	k := partKey{topic, partition}
	if m, ok := s.appendMu.Load(k); ok {
		return m.(chan struct{})
	}
	m, _ := s.appendMu.LoadOrStore(k, make(chan struct{}, 1))
	return m.(chan struct{})
}

// batch is one decoded record batch.
type batch struct {
	kmsg.RecordBatch
	records []kmsg.Record
}

// parseBatches decodes a Produce partition's record set: one or more
// magic-2 record batches, CRC-checked, decompressed. Anything else (an
// old message set, a bad CRC, trailing bytes) is an error.
//
// limit bounds the bytes its batches decompress to, all together
// (errDecompressLimit).
func parseBatches(b []byte, limit int64) ([]batch, error) {
	var out []batch
	for len(b) > 0 {
		if len(b) < 61 {
			return nil, fmt.Errorf("record batch of %d bytes: shorter than its 61-byte header", len(b))
		}
		n := int32(binary.BigEndian.Uint32(b[8:]))
		if n < 49 || int64(n) > int64(len(b)-12) {
			return nil, fmt.Errorf("record batch length %d beyond the %d bytes sent", n, len(b)-12)
		}
		raw := b[:12+n]
		b = b[12+n:]
		if magic := int8(raw[16]); magic != 2 {
			return nil, fmt.Errorf("record batch magic %d: only magic 2 (Kafka 0.11+) is served", magic)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			return nil, fmt.Errorf("record batch: %w", err)
		}
		if crc := crc32.Checksum(raw[21:], crc32c); int32(crc) != rb.CRC {
			return nil, errors.New("record batch CRC mismatch")
		}
		if rb.Attributes&0x20 != 0 {
			return nil, errors.New("control batches (transaction markers) are not served")
		}
		if rb.NumRecords < 0 || rb.NumRecords > 1<<20 {
			return nil, fmt.Errorf("record batch of %d records", rb.NumRecords)
		}
		recs, err := decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&0x0007), limit)
		if err != nil {
			return nil, fmt.Errorf("record batch: %w", err)
		}
		limit -= int64(len(recs))
		bt := batch{RecordBatch: rb, records: make([]kmsg.Record, 0, rb.NumRecords)}
		for range rb.NumRecords {
			length, k := binary.Varint(recs)
			if k <= 0 || length < 0 || length > int64(len(recs)-k) {
				return nil, errors.New("record batch: a record's length runs past the batch")
			}
			rec := kmsg.NewRecord()
			if err := rec.ReadFrom(recs[:k+int(length)]); err != nil {
				return nil, fmt.Errorf("record batch: %w", err)
			}
			bt.records = append(bt.records, rec)
			recs = recs[k+int(length):]
		}
		if len(recs) > 0 {
			return nil, fmt.Errorf("record batch: %d bytes after its %d records", len(recs), rb.NumRecords)
		}
		out = append(out, bt)
	}
	if len(out) == 0 {
		return nil, errors.New("no record batch")
	}
	return out, nil
}

// appendBatch appends one batch under the partition's append lock,
// checking an idempotent producer's sequence first.
func (s *Server) appendBatch(ctx context.Context, h tributary.BackendTopic, partition int32, b batch, wait bool) (int64, int16, string) {
	skip := int32(0) // records of a retried batch already appended
	base := int64(-1)
	var st *seqState
	if b.ProducerID >= 0 {
		k := seqKey{b.ProducerID, h.Name(), partition}
		s.producers.mu.Lock()
		st = s.producers.seqs[k]
		if st == nil || b.ProducerEpoch > st.epoch {
			if b.FirstSequence != 0 {
				code := kerr.OutOfOrderSequenceNumber.Code
				if st == nil { // an id from before a restart: the client starts again (KIP-360)
					code = kerr.UnknownProducerID.Code
				}
				s.producers.mu.Unlock()
				return -1, code, fmt.Sprintf("first batch of producer %d epoch %d on this partition has sequence %d, not 0", b.ProducerID, b.ProducerEpoch, b.FirstSequence)
			}
			st = &seqState{epoch: b.ProducerEpoch}
			s.producers.seqs[k] = st
		}
		if b.ProducerEpoch < st.epoch {
			s.producers.mu.Unlock()
			return -1, kerr.InvalidProducerEpoch.Code, fmt.Sprintf("producer epoch %d below %d", b.ProducerEpoch, st.epoch)
		}
		found := false
		for _, bi := range st.recent {
			if bi.count > 0 && bi.firstSeq == b.FirstSequence {
				if bi.count >= b.NumRecords { // a retry of a batch appended whole
					s.producers.mu.Unlock()
					return bi.base, 0, ""
				}
				skip, base, found = bi.count, bi.base, true // appended in part before a timeout
			}
		}
		switch {
		case found:
		case b.FirstSequence > st.next:
			next := st.next
			s.producers.mu.Unlock()
			return -1, kerr.OutOfOrderSequenceNumber.Code, fmt.Sprintf("sequence %d, expected %d", b.FirstSequence, next)
		case b.FirstSequence < st.next:
			s.producers.mu.Unlock()
			return -1, kerr.DuplicateSequenceNumber.Code, fmt.Sprintf("sequence %d older than the last five batches", b.FirstSequence)
		}
		s.producers.mu.Unlock()
	} else {
		s.producers.mu.Lock()
		if pb, ok := s.producers.partial[partKey{h.Name(), partition}]; ok && pb.is(&b) {
			skip, base = pb.count, pb.base
		}
		s.producers.mu.Unlock()
	}
	appended := skip
	var err error
	for i := skip; i < int32(len(b.records)); i++ {
		rec := &b.records[i]
		m := engine.Message{Key: string(rec.Key), Payload: string(rec.Value),
			Time: time.UnixMilli(b.FirstTimestamp + rec.TimestampDelta64)}
		if len(rec.Headers) > 0 {
			m.Headers = make([]engine.Header, len(rec.Headers))
			for j, hd := range rec.Headers {
				m.Headers[j] = engine.Header{Key: hd.Key, Value: string(hd.Value)}
			}
		}
		var off int64
		if wait {
			off, err = h.Publish(ctx, nil, partition, m)
		} else {
			off, err = h.TryPublish(partition, m)
		}
		if err != nil {
			break
		}
		if base < 0 {
			base = off
		}
		appended++
	}
	if st != nil && appended > skip {
		s.producers.mu.Lock()
		if appended == int32(len(b.records)) {
			st.next = b.FirstSequence + appended
		}
		st.remember(batchInfo{firstSeq: b.FirstSequence, count: appended, base: base})
		s.producers.mu.Unlock()
	}
	if st == nil && appended > 0 {
		k := partKey{h.Name(), partition}
		s.producers.mu.Lock()
		if appended < int32(len(b.records)) {
			s.producers.partial[k] = partialBatch{crc: b.CRC, length: b.Length, firstTimestamp: b.FirstTimestamp,
				numRecords: b.NumRecords, count: appended, base: base}
		} else {
			delete(s.producers.partial, k)
		}
		s.producers.mu.Unlock()
	}
	switch {
	case err == nil:
		return base, 0, ""
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, tributary.ErrPartitionFull):
		return -1, kerr.RequestTimedOut.Code, fmt.Sprintf("partition full: %d of %d records appended before the timeout (retention waits for every group's commits)", appended, len(b.records))
	case errors.Is(err, tributary.ErrInvalidArgument):
		return -1, kerr.MessageTooLarge.Code, err.Error()
	default:
		return -1, errorCode(err), err.Error()
	}
}

// remember records bi, replacing the entry of the same first sequence
// (a batch completed by its retry) or the oldest.
func (st *seqState) remember(bi batchInfo) {
	for i := range st.recent {
		if st.recent[i].count > 0 && st.recent[i].firstSeq == bi.firstSeq {
			st.recent[i] = bi
			return
		}
	}
	st.recent[st.n%len(st.recent)] = bi
	st.n++
}
