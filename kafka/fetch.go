package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readChunk is how many records one read by offset copies at most.
const readChunk = 256

// pollInterval is how often a Fetch waiting for records reads again on a
// backend that cannot wake it (no tributary.OffsetReader).
const pollInterval = 50 * time.Millisecond

// logOffsets returns a partition's log start and end offsets.
func (s *Server) logOffsets(topic string, partition int32) (int64, int64, error) {
	if s.reader != nil {
		return s.reader.LogOffsets(topic, partition)
	}
	d, err := s.backend.Describe(topic)
	if err != nil {
		return 0, 0, err
	}
	if partition < 0 || int(partition) >= len(d.Partitions) {
		return 0, 0, tributary.ErrInvalidArgument
	}
	p := d.Partitions[partition]
	return p.LogStartOffset, p.LogEndOffset, nil
}

// readAt appends up to max records of a partition from offset on, with the
// log offsets of the same read: the backend's OffsetReader, or a Snapshot.
func (s *Server) readAt(dst []engine.Record, topic string, partition int32, offset int64, max int32) ([]engine.Record, int64, int64, error) {
	if s.reader != nil {
		return s.reader.ReadAt(dst, topic, partition, offset, max)
	}
	snap, err := s.backend.Snapshot(topic)
	if err != nil {
		return dst, 0, 0, err
	}
	if partition < 0 || int(partition) >= len(snap.Partitions) {
		return dst, 0, 0, tributary.ErrInvalidArgument
	}
	pd := snap.Partitions[partition]
	if offset < pd.LogStartOffset || offset > pd.LogEndOffset {
		return dst, pd.LogStartOffset, pd.LogEndOffset, tributary.ErrOffsetOutOfRange
	}
	recs := snap.Records[partition][offset-pd.LogStartOffset:]
	return append(dst, recs[:min(len(recs), int(max))]...), pd.LogStartOffset, pd.LogEndOffset, nil
}

// fetchPart is one partition of a Fetch, resolved.
type fetchPart struct {
	topic string
	rp    *kmsg.FetchResponseTopicPartition
	req   *kmsg.FetchRequestTopicPartition
}

// handleFetch reads each partition by offset from FetchOffset, within
// PartitionMaxBytes and MaxBytes (always at least one record, so a record
// larger than the limits still comes, as Kafka), as one uncompressed
// magic-2 batch. When fewer than MinBytes are found it waits, up to
// MaxWaitMillis, for a publish to one of the topics. No fetch sessions
// (KIP-227): SessionID is always 0, so clients send full fetches; a
// request naming a session gets FETCH_SESSION_ID_NOT_FOUND. A fetch
// offset outside [log start, log end] is OFFSET_OUT_OF_RANGE: Tributary
// removes a record once every consumer group has committed past it (SPEC
// rule 13), and a reader outside any group holds no records back.
// Fetches from followers (ReplicaID ≥ 0) are refused with
// NOT_LEADER_OR_FOLLOWER.
func handleFetch(s *Server, r *request, req *kmsg.FetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.Version >= 7 && req.SessionID != 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	var parts []fetchPart
	var topics []string
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, known := t.Topic, true
		if req.Version >= 13 {
			name, known = s.topicByID(t.TopicID)
		}
		for j := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = t.Partitions[j].Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		rtp := &resp.Topics[len(resp.Topics)-1]
		var h tributary.BackendTopic
		var err error
		if known {
			h, err = s.topic(name)
		}
		for j := range rtp.Partitions {
			rp := &rtp.Partitions[j]
			switch {
			case !known:
				rp.ErrorCode = kerr.UnknownTopicID.Code
			case err != nil:
				rp.ErrorCode = errorCode(err)
			case req.Version < 15 && req.ReplicaID >= 0, req.Version >= 15 && req.ReplicaState.ID >= 0:
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			case rp.Partition < 0 || rp.Partition >= h.Partitions():
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				parts = append(parts, fetchPart{topic: name, rp: rp, req: &t.Partitions[j]})
			}
		}
		if known && err == nil {
			topics = append(topics, name)
		}
	}

	wait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	ctx := r.ctx
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	var buf []engine.Record
	for {
		var wake []<-chan struct{}
		if s.reader != nil && req.MinBytes > 0 {
			for _, t := range topics {
				if ch, err := s.reader.Appended(t); err == nil {
					wake = append(wake, ch)
				}
			}
		}
		budget := int64(req.MaxBytes)
		if req.Version < 3 || budget <= 0 {
			budget = 1 << 62
		}
		total := int64(0)
		failed := false
		for _, p := range parts {
			n := s.fetchPartition(p, &buf, min(budget-total, int64(p.req.PartitionMaxBytes)), total == 0)
			total += n
			failed = failed || p.rp.ErrorCode != 0
		}
		if total >= int64(req.MinBytes) || failed || wait <= 0 || len(parts) == 0 {
			return resp, nil
		}
		if err := waitAny(ctx, wake); err != nil {
			if r.ctx.Err() != nil {
				return nil, r.ctx.Err() // the client went away or the Server closed
			}
			return resp, nil // MaxWaitMillis passed
		}
	}
}

// waitAny waits for one of chs to close, or, with none, for pollInterval;
// it returns ctx's error when ctx ends first.
func waitAny(ctx context.Context, chs []<-chan struct{}) error {
	if len(chs) == 0 {
		t := time.NewTimer(pollInterval)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	if len(chs) == 1 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-chs[0]:
			return nil
		}
	}
	done := make(chan struct{})
	defer close(done)
	woke := make(chan struct{}, 1)
	for _, ch := range chs {
		go func() {
			select {
			case <-ch:
				select {
				case woke <- struct{}{}:
				default:
				}
			case <-done:
			}
		}()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-woke:
		return nil
	}
}

// fetchPartition fills p.rp with the records from p.req.FetchOffset on,
// within limit bytes (at least one record when first), and returns the
// bytes of records it put there.
func (s *Server) fetchPartition(p fetchPart, buf *[]engine.Record, limit int64, first bool) int64 {
	rp := p.rp
	rp.ErrorCode, rp.RecordBatches = 0, []byte{} // empty, not null: librdkafka refuses a null record set
	offset := p.req.FetchOffset
	var w batchWriter
	size := int64(0)
	for {
		got, start, end, err := s.readAt((*buf)[:0], p.topic, rp.Partition, offset, readChunk)
		*buf = got
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = end, end, start
		if err != nil {
			if w.n == 0 {
				rp.ErrorCode = errorCode(err)
				if !errors.Is(err, tributary.ErrOffsetOutOfRange) {
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				}
				return 0
			}
			break // retention moved past what was read: send what was
		}
		stop := false
		for i := range got {
			n := recordSize(&got[i])
			if size+n > limit && (size > 0 || !first) {
				stop = true
				break
			}
			size += n
			w.add(&got[i])
		}
		if stop || len(got) < readChunk {
			break
		}
		offset = got[len(got)-1].Offset + 1
		clear(got) // drop the references to payloads already encoded
	}
	clear(*buf)
	if w.n > 0 {
		rp.RecordBatches = w.finish(nil)
	}
	return size
}

// recordSize is about what a record takes in a batch: its bytes plus the
// varints around them.
func recordSize(r *engine.Record) int64 {
	n := int64(len(r.Key)+len(r.Payload)) + 20
	for _, h := range r.Headers {
		n += int64(len(h.Key)+len(h.Value)) + 10
	}
	return n
}

// batchWriter encodes records of consecutive offsets of one partition as
// one uncompressed magic-2 record batch with CreateTime timestamps. An
// empty key is sent as a null key (Tributary's "no key").
type batchWriter struct {
	n       int32
	base    int64
	last    int64
	firstTS int64
	maxTS   int64
	body    []byte
	rec     []byte
}

func (w *batchWriter) add(r *engine.Record) {
	ts := r.Time.UnixMilli()
	if w.n == 0 {
		w.base, w.firstTS, w.maxTS = r.Offset, ts, ts
	}
	w.n++
	w.last = r.Offset
	w.maxTS = max(w.maxTS, ts)
	rec := append(w.rec[:0], 0) // attributes
	rec = binary.AppendVarint(rec, ts-w.firstTS)
	rec = binary.AppendVarint(rec, r.Offset-w.base)
	if r.Key == "" {
		rec = binary.AppendVarint(rec, -1)
	} else {
		rec = binary.AppendVarint(rec, int64(len(r.Key)))
		rec = append(rec, r.Key...)
	}
	rec = binary.AppendVarint(rec, int64(len(r.Payload)))
	rec = append(rec, r.Payload...)
	rec = binary.AppendVarint(rec, int64(len(r.Headers)))
	for _, h := range r.Headers {
		rec = binary.AppendVarint(rec, int64(len(h.Key)))
		rec = append(rec, h.Key...)
		rec = binary.AppendVarint(rec, int64(len(h.Value)))
		rec = append(rec, h.Value...)
	}
	w.body = binary.AppendVarint(w.body, int64(len(rec)))
	w.body = append(w.body, rec...)
	w.rec = rec
}

// finish appends the batch of the records added (at least one) to dst.
func (w *batchWriter) finish(dst []byte) []byte {
	b := kmsg.RecordBatch{
		FirstOffset:     w.base,
		Magic:           2,
		LastOffsetDelta: int32(w.last - w.base),
		FirstTimestamp:  w.firstTS,
		MaxTimestamp:    w.maxTS,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      w.n,
		Records:         w.body,
	}
	start := len(dst)
	if dst == nil {
		dst = make([]byte, 0, len(w.body)+61)
	}
	dst = b.AppendTo(dst)
	enc := dst[start:]
	binary.BigEndian.PutUint32(enc[8:], uint32(len(enc)-12))
	binary.BigEndian.PutUint32(enc[17:], crc32.Checksum(enc[21:], crc32c))
	return dst
}

// appendBatch appends recs (consecutive offsets of one partition) to dst
// as one batch (batchWriter).
func appendBatch(dst []byte, recs []engine.Record) []byte {
	var w batchWriter
	for i := range recs {
		w.add(&recs[i])
	}
	return w.finish(dst)
}

// handleListOffsets answers each partition's earliest (-2: the log
// start), latest (-1: the log end) or max-timestamp (-3: the first record
// of the largest timestamp, with that timestamp) offset, or the first offset whose record's timestamp is at least the
// one asked for (-1 when none is). Other negative timestamps (tiered
// storage's -4 and -5) are INVALID_REQUEST.
func handleListOffsets(s *Server, r *request, req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		h, err := s.topic(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, 0
			switch {
			case err != nil:
				rp.ErrorCode = errorCode(err)
			case p.Partition < 0 || p.Partition >= h.Partitions():
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				rp.Timestamp, rp.Offset, rp.ErrorCode = s.listOffset(t.Topic, p.Partition, p.Timestamp)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// listOffset resolves one ListOffsets timestamp to (timestamp, offset, code).
func (s *Server) listOffset(topic string, partition int32, ts int64) (int64, int64, int16) {
	start, end, err := s.logOffsets(topic, partition)
	if err != nil {
		return -1, -1, errorCode(err)
	}
	switch {
	case ts == -2:
		return -1, start, 0
	case ts == -1:
		return -1, end, 0
	case ts == -3:
		// The first record of the largest timestamp, not the last record:
		// producers' timestamps need not grow (Kafka, KAFKA-16310).
		maxTS, maxOff := int64(-1), int64(-1)
		if err := s.scan(topic, partition, start, end, func(r *engine.Record) bool {
			if ms := r.Time.UnixMilli(); maxOff < 0 || ms > maxTS {
				maxTS, maxOff = ms, r.Offset
			}
			return true
		}); err != nil {
			return -1, -1, errorCode(err)
		}
		return maxTS, maxOff, 0
	case ts < 0:
		return -1, -1, kerr.InvalidRequest.Code
	}
	foundTS, found := int64(-1), int64(-1)
	if err := s.scan(topic, partition, start, end, func(r *engine.Record) bool {
		if ms := r.Time.UnixMilli(); ms >= ts {
			foundTS, found = ms, r.Offset
			return false
		}
		return true
	}); err != nil {
		return -1, -1, errorCode(err)
	}
	return foundTS, found, 0
}

// scan calls f on each retained record of a partition from start on,
// below end, in offset order, until f returns false; retention moving
// past the offset reached resumes at the new log start.
func (s *Server) scan(topic string, partition int32, start, end int64, f func(*engine.Record) bool) error {
	var buf []engine.Record
	for off := start; off < end; {
		got, _, _, err := s.readAt(buf[:0], topic, partition, off, readChunk)
		buf = got
		if errors.Is(err, tributary.ErrOffsetOutOfRange) {
			if off, _, err = s.logOffsets(topic, partition); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return nil
		}
		for i := range got {
			if got[i].Offset >= end || !f(&got[i]) {
				return nil
			}
		}
		off = got[len(got)-1].Offset + 1
	}
	return nil
}
