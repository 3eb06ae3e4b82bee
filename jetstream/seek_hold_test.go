package jetstream_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// A Seek's cursor write is its linearization point, and no purge can
// overtake it: a Poll that delivers from the sought offset after the
// write, then an evicting publish whose retention pass read the cursors
// before it (committed 3: record 0 looks fully committed) and now raises
// the log start, leave Seek reporting true, the Poll's delivery of record
// 0 standing and the publish finding the partition full (record 0 is in
// flight, so nothing is fully committed in the model's order: Seek, Poll,
// publish). A Seek that writes and then fences on the log start lets the
// raise pass its write and reports ErrOffsetOutOfRange after the Poll
// acted on the write, which no order explains (the seek mix of the
// linearizability check, about 1 history in 600 under load). The hooks
// pause the publish's pass at its raise of low and run the Poll and the
// raise between the Seek's cursor write and its next request.
func TestSeekNotOvertakenByPurge(t *testing.T) {
	b, bt, m := fullPastWindow(t)
	var (
		phase             atomic.Int32 // 1: the publish waits at its raise
		atRaise, goRaise  = make(chan struct{}), make(chan struct{})
		pubDone           = make(chan struct{})
		pubErr            error
		polled            []engine.Record
		pollErr           error
		seekWrote, raised atomic.Bool
	)
	jetstream.SetLossy(b, func(key string, written bool) bool {
		switch {
		case !written && strings.HasPrefix(key, "low.t.") && phase.CompareAndSwap(0, 1):
			close(atRaise) // the publish's pass: cursors read (committed 3), low not yet raised
			<-goRaise
			raised.Store(true)
		case written && key == "cursor.t.g.0" && phase.Load() == 1 && seekWrote.CompareAndSwap(false, true):
			polled, pollErr = m.TryPoll(nil, 1) // acts on the Seek's write
			close(goRaise)
			select { // the raise overtakes the write, unless it waits for the Seek
			case <-pubDone:
			case <-time.After(500 * time.Millisecond):
			}
		}
		return false
	})
	go func() {
		defer close(pubDone)
		_, pubErr = bt.TryPublish(0, engine.Message{Payload: "y"})
	}()
	<-atRaise
	ok, seekErr := b.Seek("t", "g", 0, 0)
	<-pubDone
	jetstream.SetLossy(b, nil)
	if !seekWrote.Load() || !raised.Load() {
		t.Fatalf("hooks: Seek's write seen %v, the raise reached %v", seekWrote.Load(), raised.Load())
	}
	if pollErr != nil || len(polled) != 1 || polled[0].Offset != 0 {
		t.Fatalf("Poll after the Seek's write = %v, %v; want record 0", recs(polled), pollErr)
	}
	if seekErr != nil || !ok {
		t.Fatalf("Seek to 0 = %v, %v, after a Poll delivered from its write; want true", ok, seekErr)
	}
	if !errors.Is(pubErr, tributary.ErrPartitionFull) {
		t.Fatalf("publish = %v, want partition full (record 0 in flight, nothing fully committed)", pubErr)
	}
	d := must(b.Describe("t")).of(t)
	if p := d.Groups[0].Partitions[0]; p.Committed != 0 || !p.InFlight || d.Partitions[0].LogStartOffset != 0 {
		t.Fatalf("after Seek, Poll and publish: %+v, log start %d; want committed 0 in flight, log start 0", p, d.Partitions[0].LogStartOffset)
	}
}

// fullPastWindow returns a backend with topic t of one partition full
// (capacity 5, records 0 to 4, replay window 4) and member m of group g
// joined, with records 0 to 2 acked: committed 3, log start 0 (3 − 4 is
// below it), so a publish evicts record 0 and a Seek back to 0 is in range.
func fullPastWindow(t *testing.T) (*jetstream.Backend, tributary.BackendTopic, tributary.BackendMember) {
	t.Helper()
	b, _, bt, m := fullPastWindowOn(t, jetstream.Config{Capacity: 5, ReplayWindow: 4})
	return b, bt, m
}

// fullPastWindowOn is fullPastWindow with cfg (Capacity 5, ReplayWindow 4),
// also returning the embedded server, for a second Backend of it.
func fullPastWindowOn(t *testing.T, cfg jetstream.Config) (*jetstream.Backend, *jetstream.Server, tributary.BackendTopic, tributary.BackendMember) {
	t.Helper()
	b, srv := start(t, cfg)
	bt := topic(t, b, "t", 1)
	for range 5 {
		pub(t, bt, 0, "x")
	}
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	for off := range int64(3) {
		poll(t, m, 1)
		ok, err := m.Ack(0, off)
		wantBool(t, "Ack", ok, err, true)
	}
	return b, srv, bt, m
}

// A Seek back decides its range from the other groups' committed offsets
// it reads under its hold; an Ack of another group settles by one
// compare-and-set of the cursor its poll wrote, reading nothing. The
// Seek's stamps (every other group's cursor on the partition written
// unchanged before those reads) make such an Ack fail its
// compare-and-set and wait for the hold, so it cannot commit between the
// Seek's reads and its write: else a Describe between that commit and the
// Seek's write shows the log start past the Seek's offset, and the Seek
// then succeeds and moves the log start back. Here group a has committed
// 2 and holds record 2 in flight, group b has committed 5 (log start 2,
// no window); b seeks back to 2 and, at its cursor write, a's Ack of 2 is
// sent and given 300 ms.
func TestSeekBackNotPassedByFastAck(t *testing.T) {
	b, _ := start(t, jetstream.Config{Capacity: 10})
	bt := topic(t, b, "t", 1)
	for range 5 {
		pub(t, bt, 0, "x")
	}
	ma, mb := member(t, bt, "a", "m"), member(t, bt, "b", "m")
	must(ma.Join()).of(t)
	must(mb.Join()).of(t)
	for off := range int64(5) {
		poll(t, mb, 1)
		ok, err := mb.Ack(0, off)
		wantBool(t, "b's Ack", ok, err, true)
		if off < 3 {
			poll(t, ma, 1)
			if off < 2 {
				ok, err := ma.Ack(0, off)
				wantBool(t, "a's Ack", ok, err, true)
			}
		}
	}
	if d := must(b.Describe("t")).of(t); d.Partitions[0].LogStartOffset != 2 {
		t.Fatalf("set-up: log start %d, want 2", d.Partitions[0].LogStartOffset)
	}
	var (
		once atomic.Bool
		ack  = newAckAtSeekWrite()
	)
	jetstream.SetLossy(b, func(key string, written bool) bool {
		if !written && key == "cursor.t.b.0" && once.CompareAndSwap(false, true) {
			ack.run(b, ma)
		}
		return false
	})
	ok, err := b.Seek("t", "b", 0, 2)
	ack.wait()
	jetstream.SetLossy(b, nil)
	if !ack.started.Load() {
		t.Fatal("hook: the Seek's cursor write was not seen")
	}
	ack.check(t, b, ok, err)
}

// ackAtSeekWrite is a's Ack of offset 2 sent at b's Seek's cursor write
// (run, from a SetLossy hook) and given 300 ms there; if it returns in
// time, a Describe records the log start it leaves (during).
type ackAtSeekWrite struct {
	started atomic.Bool
	done    chan struct{}
	ok      bool
	err     error
	during  int64 // -1: no Describe between the Ack's return and the Seek's write
}

func newAckAtSeekWrite() *ackAtSeekWrite {
	return &ackAtSeekWrite{done: make(chan struct{}), during: -1}
}

func (a *ackAtSeekWrite) run(b *jetstream.Backend, ma tributary.BackendMember) {
	a.started.Store(true)
	go func() {
		defer close(a.done)
		a.ok, a.err = ma.Ack(0, 2)
	}()
	select {
	case <-a.done:
		if d, err := b.Describe("t"); err == nil {
			a.during = d.Partitions[0].LogStartOffset
		}
	case <-time.After(300 * time.Millisecond):
	}
}

// wait waits for the Ack, if run sent it.
func (a *ackAtSeekWrite) wait() {
	if a.started.Load() {
		<-a.done
	}
}

// check checks, after wait, the Ack and the outcome of b's Seek to 2
// (seekOK, seekErr) beside it: the Seek succeeds (the log start was 2
// when it began), not after a Describe showed the log start past 2, and
// leaves a committed 3, b 2 and the log start 2.
func (a *ackAtSeekWrite) check(t *testing.T, b *jetstream.Backend, seekOK bool, seekErr error) {
	t.Helper()
	wantBool(t, "a's Ack of 2", a.ok, a.err, true)
	d := must(b.Describe("t")).of(t)
	start := d.Partitions[0].LogStartOffset
	if seekErr == nil && seekOK && a.during > 2 {
		t.Fatalf("Seek of b to 2 = true after a Describe (a's Ack of 2 returned) showed the log start at %d; the log start is now %d", a.during, start)
	}
	if seekErr != nil || !seekOK {
		t.Fatalf("Seek of b to 2 = %v, %v; want true (the log start was 2 when it began)", seekOK, seekErr)
	}
	if ca, cb := d.Groups[0].Partitions[0].Committed, d.Groups[1].Partitions[0].Committed; ca != 3 || cb != 2 || start != 2 {
		t.Fatalf("after the Seek and the Ack: a committed %d, b %d, log start %d; want 3, 2, 2", ca, cb, start)
	}
}

// A Seek back's stamp of another group's cursor is written by
// compare-and-set on the revision it read; a reservation by a poll that
// read that cursor and low before the Seek's hold can land between the
// stamp's read and its write. That reservation is its poll's write, kept
// for a fast Ack (the poll saw no hold), and its revision is the cursor's
// last: unless the stamp reads the cursor again and writes it, the Ack's
// compare-and-set succeeds under the hold, between the Seek's read of
// the committed offsets and its write, and a Describe there shows the log
// start past the Seek's offset, which the Seek then moves back. Here
// group a has committed 2, group b 5 (log start 2, no window); a's poll
// of record 2 is paused at its reservation write, b's Seek back to 2
// runs until its stamp of a's cursor has read it, the reservation lands,
// the stamp is sent; at b's cursor write a's Ack of 2 is sent and given
// 300 ms.
func TestSeekStampNotPassedByReservation(t *testing.T) {
	for _, snapshots := range []bool{true, false} {
		name := "snapshots"
		if !snapshots {
			name = "key-by-key"
		}
		t.Run(name, func(t *testing.T) {
			b, _ := start(t, jetstream.Config{Capacity: 10})
			jetstream.SetSnapshots(b, snapshots)
			bt := topic(t, b, "t", 1)
			for range 5 {
				pub(t, bt, 0, "x")
			}
			ma, mb := member(t, bt, "a", "m"), member(t, bt, "b", "m")
			must(ma.Join()).of(t)
			must(mb.Join()).of(t)
			for off := range int64(5) {
				poll(t, mb, 1)
				ok, err := mb.Ack(0, off)
				wantBool(t, "b's Ack", ok, err, true)
				if off < 2 {
					poll(t, ma, 1)
					ok, err := ma.Ack(0, off)
					wantBool(t, "a's Ack", ok, err, true)
				}
			}
			if d := must(b.Describe("t")).of(t); d.Partitions[0].LogStartOffset != 2 {
				t.Fatalf("set-up: log start %d, want 2", d.Partitions[0].LogStartOffset)
			}
			var (
				aWrites   atomic.Int32 // writes of a's cursor seen: 1 the poll's, 2 the stamp's
				atPoll    = make(chan struct{})
				stampRead = make(chan struct{})
				pollDone  = make(chan struct{})
				seekDone  = make(chan struct{})
				bWrite    atomic.Bool
				ack       = newAckAtSeekWrite()
				seekOK    bool
				seekErr   error
				polled    []engine.Record
				pollErr   error
			)
			jetstream.SetLossy(b, func(key string, written bool) bool {
				switch {
				case written:
				case key == "cursor.t.a.0":
					switch aWrites.Add(1) {
					case 1: // a's reservation: cursor and low read, no hold
						close(atPoll)
						<-stampRead
					case 2: // b's stamp of a's cursor: read before the reservation landed
						close(stampRead)
						<-pollDone
					}
				case key == "cursor.t.b.0" && bWrite.CompareAndSwap(false, true):
					ack.run(b, ma)
				}
				return false
			})
			go func() {
				defer close(pollDone)
				polled, pollErr = ma.TryPoll(nil, 1)
			}()
			<-atPoll
			go func() {
				defer close(seekDone)
				seekOK, seekErr = b.Seek("t", "b", 0, 2)
			}()
			<-seekDone
			<-pollDone
			ack.wait()
			jetstream.SetLossy(b, nil)
			if pollErr != nil || len(polled) != 1 || polled[0].Offset != 2 {
				t.Fatalf("a's poll = %v, %v; want record 2", recs(polled), pollErr)
			}
			if aWrites.Load() < 2 || !ack.started.Load() {
				t.Fatalf("hook: %d writes of a's cursor, b's cursor write seen %v; want the poll's, the stamp's, and b's write", aWrites.Load(), ack.started.Load())
			}
			ack.check(t, b, seekOK, seekErr)
		})
	}
}
