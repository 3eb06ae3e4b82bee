package engine_test

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
)

// Tests of Broker.Snapshot: Describe plus every retained record, of one
// instant (SPEC rule 23). The differential test compares it with
// model.Snapshot on random sequences.

// TestSnapshotRecords publishes messages with keys, headers and times to
// two partitions, consumes some so that retention and the replay window
// act, and checks that every partition's records are exactly the retained
// published ones, log start to log end, Attempt 0; that the description is
// Describe's; that the headers are copies; and that a snapshot changes
// nothing.
func TestSnapshotRecords(t *testing.T) {
	clock := testclock.New()
	f := ftNew(t, 5, engine.WithClock(clock.Now), engine.WithReplayWindow(1))
	f.create("t", 2)
	published := map[int32][]engine.Record{} // per partition, by offset: what a snapshot must show
	for i := range 9 {
		p := int32(i % 2)
		m := engine.Message{Payload: fmt.Sprintf("m%d", i)}
		switch i % 3 {
		case 0:
			m.Key = "k" + strconv.Itoa(i)
		case 1:
			m.Headers = []engine.Header{{Key: "h", Value: strconv.Itoa(i)}, {Key: "h", Value: "again"}}
		case 2:
			m.Time = testclock.Epoch.Add(-time.Duration(i) * time.Hour)
		}
		if i == 4 {
			f.join("t", "g", "m") // offsets before it are retained for g
		}
		clock.Advance(time.Second)
		off, err := f.PublishMessage("t", p, m)
		require.NoError(t, err)
		require.Equal(t, int64(len(published[p])), off)
		w := engine.Record{Topic: "t", Partition: p, Offset: off, Payload: m.Payload, Key: m.Key, Headers: m.Headers, Time: m.Time}
		if w.Time.IsZero() {
			w.Time = clock.Now()
		}
		published[p] = append(published[p], w)
	}
	// g commits offsets 0 and 1 of partition 0: offset 0 is trimmed, 1
	// stays as the replay window; 2 is in flight.
	for off := range int64(2) {
		recs, err := f.Poll("t", "g", "m", 1)
		require.NoError(t, err)
		require.Equal(t, off, recs[0].Offset)
		ok, err := f.Ack("t", "g", "m", 0, off)
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, err := f.Poll("t", "g", "m", 1)
	require.NoError(t, err)

	before, err := f.Describe("t")
	require.NoError(t, err)
	require.Equal(t, int64(1), before.Partitions[0].LogStartOffset, "offset 0 trimmed, 1 in the window")
	s, err := f.Snapshot("t")
	require.NoError(t, err)
	require.Equal(t, before, s.TopicDescription)
	require.Len(t, s.Records, 2)
	for p, d := range s.Partitions {
		want := published[int32(p)][d.LogStartOffset:d.LogEndOffset]
		require.Len(t, s.Records[p], len(want), "partition %d", p)
		for i, r := range s.Records[p] {
			w := want[i]
			require.Equal(t, []any{w.Topic, w.Partition, w.Offset, w.Payload, w.Key, w.Headers, int32(0)},
				[]any{r.Topic, r.Partition, r.Offset, r.Payload, r.Key, r.Headers, r.Attempt}, "partition %d offset %d", p, w.Offset)
			require.True(t, w.Time.Equal(r.Time), "partition %d offset %d: time %v, want %v", p, w.Offset, r.Time, w.Time)
		}
	}
	after, err := f.Describe("t")
	require.NoError(t, err)
	require.Equal(t, before, after, "a snapshot changes nothing")

	// The headers are the caller's: changing them changes no later
	// snapshot, nor what a poll delivers.
	var withHeaders *engine.Record
	for i := range s.Records[1] {
		if s.Records[1][i].Headers != nil {
			withHeaders = &s.Records[1][i]
		}
	}
	require.NotNil(t, withHeaders)
	wantHeaders := published[1][withHeaders.Offset].Headers
	withHeaders.Headers[0].Value = "changed"
	withHeaders.Headers = append(withHeaders.Headers[:1], engine.Header{Key: "x"})
	again, err := f.Snapshot("t")
	require.NoError(t, err)
	require.Equal(t, wantHeaders, again.Records[1][withHeaders.Offset-again.Partitions[1].LogStartOffset].Headers)
	require.Equal(t, "again", wantHeaders[1].Value, "the published slice is untouched too")
}

func TestSnapshotEmptyAndInvalid(t *testing.T) {
	f := ftNew(t, 2)
	f.create("t", 3)
	s, err := f.Snapshot("t")
	require.NoError(t, err)
	require.Equal(t, [][]engine.Record{{}, {}, {}}, s.Records, "one empty, non-nil slice per partition")
	d, err := f.Describe("t")
	require.NoError(t, err)
	require.Equal(t, d, s.TopicDescription)
	n, err := f.AddPartitions("t", 2)
	require.NoError(t, err)
	s, err = f.Snapshot("t")
	require.NoError(t, err)
	require.Len(t, s.Records, int(n), "added partitions appear")
	for _, topic := range []string{"nope", "", "bad.id", string(make([]byte, 65))} {
		s, err := f.Snapshot(topic)
		require.ErrorIs(t, err, engine.ErrInvalidArgument, "%q", topic)
		require.Equal(t, engine.TopicSnapshot{}, s)
	}
}

// TestSnapshotIsAtomic: one goroutine publishes to partition 0, then 1,
// then 0, … in program order while a consumer acks (moving log starts) and
// others take snapshots. Every snapshot is of one instant, so partition 1
// is never ahead of partition 0 and at most one behind, each partition's
// records run exactly from its log start to its log end in publish order,
// and every group's committed offset lies within the log. A snapshot that
// locked the partitions one after another, releasing each, would see
// partition 1 ahead.
func TestSnapshotIsAtomic(t *testing.T) {
	rounds := 3000
	if raceEnabled {
		rounds = 1000
	}
	f := ftNew(t, 64)
	f.create("t", 2)
	f.join("t", "g", "m")
	var (
		done      atomic.Bool
		snapshots atomic.Int64
		wg        sync.WaitGroup
		errs      = make(chan error, 8)
	)
	fail := func(format string, args ...any) {
		select {
		case errs <- fmt.Errorf(format, args...):
		default:
		}
	}
	wg.Go(func() { // the publisher
		defer done.Store(true)
		for snapshots.Load() < 2 && len(errs) == 0 {
			runtime.Gosched() // start once the snapshots have
		}
		for i := range rounds {
			for p := range int32(2) {
				for { // a full partition: publish again once the consumer made room
					off, err := f.Publish("t", p, strconv.Itoa(i))
					if err != nil || off != int64(i) && off != -1 {
						fail("publish %d to p%d: %d, %v", i, p, off, err)
						return
					}
					if off >= 0 {
						break
					}
					runtime.Gosched()
				}
			}
		}
	})
	wg.Go(func() { // a consumer moving the log starts
		for !done.Load() {
			recs, err := f.Poll("t", "g", "m", 2)
			if err != nil {
				fail("poll: %v", err)
				return
			}
			for _, r := range recs {
				if ok, err := f.Ack("t", "g", "m", r.Partition, r.Offset); err != nil || !ok {
					fail("ack p%d@%d: %v, %v", r.Partition, r.Offset, ok, err)
					return
				}
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			for !done.Load() {
				s, err := f.Snapshot("t")
				if err != nil {
					fail("snapshot: %v", err)
					return
				}
				snapshots.Add(1)
				if msg := checkSnapshot(s); msg != "" {
					fail("%s", msg)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Positive(t, snapshots.Load())
	t.Logf("%d snapshots of %d rounds", snapshots.Load(), rounds)
}

// checkSnapshot returns what is inconsistent in s, a snapshot of
// TestSnapshotIsAtomic's topic, or "".
func checkSnapshot(s engine.TopicSnapshot) string {
	e0, e1 := s.Partitions[0].LogEndOffset, s.Partitions[1].LogEndOffset
	if e1 > e0 || e0 > e1+1 {
		return fmt.Sprintf("log ends p0 %d, p1 %d: not one instant of publishes to p0, p1, p0, …", e0, e1)
	}
	for p, d := range s.Partitions {
		rs := s.Records[p]
		if int64(len(rs)) != d.LogEndOffset-d.LogStartOffset {
			return fmt.Sprintf("p%d: %d records for log [%d,%d)", p, len(rs), d.LogStartOffset, d.LogEndOffset)
		}
		for i, r := range rs {
			if off := d.LogStartOffset + int64(i); r.Offset != off || r.Payload != strconv.FormatInt(off, 10) || r.Partition != int32(p) {
				return fmt.Sprintf("p%d: record %d is p%d@%d %q, want offset %d", p, i, r.Partition, r.Offset, r.Payload, off)
			}
		}
		for _, g := range s.Groups {
			if c := g.Partitions[p].Committed; c < d.LogStartOffset || c > d.LogEndOffset {
				return fmt.Sprintf("p%d: group %s committed %d outside log [%d,%d)", p, g.Group, c, d.LogStartOffset, d.LogEndOffset)
			}
		}
	}
	return ""
}
