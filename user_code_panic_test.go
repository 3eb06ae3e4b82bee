package tributary_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// User code that panics — a Codec's Encode, Decode or Name, a
// Partitioner's Partition or Name, a Handler, even one that ends its
// goroutine — must come back as an error of the call that ran it, never
// crash the process, and change nothing that the failed call would not
// have changed.

// errBoom is what the panicking user code below panics with when it
// panics with an error.
var errBoom = errors.New("boom")

// panickyCodec is a String-like codec whose methods panic on demand:
// Encode on the value "encode-panic", Decode on the payload "panic" (with
// errBoom) and on "panic-string" (with a string), Name when name is set.
type panickyCodec struct{ nameQuirk bool }

func (c panickyCodec) Name() string {
	if c.nameQuirk {
		panic("Name boom")
	}
	return "String"
}

func (panickyCodec) Encode(v string) (string, error) {
	if v == "encode-panic" {
		panic(errBoom)
	}
	return v, nil
}

func (panickyCodec) Decode(p string) (string, error) {
	switch p {
	case "panic":
		panic(errBoom)
	case "panic-string":
		panic("Decode boom")
	}
	return p, nil
}

// panickyPartitioner panics in Partition for the key "panic", returns an
// error for the key "fail" and partition 0 otherwise; its Name panics
// when nameQuirk is set.
type panickyPartitioner struct{ nameQuirk bool }

var errPartition = errors.New("no partition for you")

func (p panickyPartitioner) Name() string {
	if p.nameQuirk {
		panic("Name boom")
	}
	return "Panicky"
}

func (panickyPartitioner) Partition(key string, _, _ int32) (int32, error) {
	switch key {
	case "panic":
		panic("Partition boom")
	case "fail":
		return -1, errPartition
	}
	return 0, nil
}

func TestCodecEncodePanicFailsSendAndPublishesNothing(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[string](t, c, "t", 1, panickyCodec{})
	pr := testProducer[string](t, c, "p", tributary.Manual())

	_, err := pr.TrySend(tp, tributary.Message[string]{Value: "encode-panic"})
	checkErr(t, "TrySend of a value whose Encode panics", err, tributary.ErrEncode)
	checkErr(t, "TrySend of a value whose Encode panics(errBoom)", err, errBoom)
	if !strings.Contains(err.Error(), "Encode panicked: boom") {
		t.Errorf("TrySend error %q does not say Encode panicked", err)
	}
	_, err = pr.Send(guardCtx(t), tp, tributary.Message[string]{Value: "encode-panic"})
	checkErr(t, "Send of a value whose Encode panics", err, tributary.ErrEncode)
	if end := logEndOf(t, c, "t", 0); end != 0 {
		t.Fatalf("log end %d after two failed sends, want 0: something was published", end)
	}
	// The producer and the topic still work.
	if m := sendOK(t, pr, tp, tributary.Message[string]{Value: "fine"}); m.Offset != 0 {
		t.Fatalf("the next send landed at offset %d, want 0", m.Offset)
	}
}

func TestPartitionerPanicFailsSendAndPublishesNothing(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 2, tributary.String())
	pr := testProducer[string](t, c, "p", panickyPartitioner{})

	_, err := pr.TrySend(tp, tributary.Message[string]{Key: "panic", Value: "v"})
	checkErr(t, "TrySend whose partitioner panics", err, tributary.ErrPartitioner)
	if !strings.Contains(err.Error(), "Partition panicked: Partition boom") {
		t.Errorf("TrySend error %q does not say Partition panicked", err)
	}
	_, err = pr.Send(guardCtx(t), tp, tributary.Message[string]{Key: "panic", Value: "v"})
	checkErr(t, "Send whose partitioner panics", err, tributary.ErrPartitioner)
	// A partitioner's error is ErrPartitioner too, and still its own error.
	_, err = pr.TrySend(tp, tributary.Message[string]{Key: "fail", Value: "v"})
	checkErr(t, "TrySend whose partitioner fails", err, tributary.ErrPartitioner)
	checkErr(t, "TrySend whose partitioner fails (its error)", err, errPartition)
	for p := int32(0); p < 2; p++ {
		if end := logEndOf(t, c, "t", p); end != 0 {
			t.Fatalf("partition %d: log end %d after failed sends, want 0", p, end)
		}
	}
	sendOK(t, pr, tp, tributary.Message[string]{Value: "fine"})
}

// Decode's panic makes the message one that does not decode, wherever
// messages are made: Poll, TryPoll, TryPollPartition, Snapshot.
func TestCodecDecodePanicIsAnUndecodablePayload(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[string](t, c, "t", 1, panickyCodec{})
	pr := testProducer[string](t, c, "p", tributary.Manual())
	for _, v := range []string{"panic", "panic-string"} {
		sendOK(t, pr, tp, tributary.Message[string]{Value: v})
	}
	cons := testConsumer(t, tp, "g", "c1")

	check := func(how string, m tributary.Message[string], wantText string) {
		t.Helper()
		if !errors.Is(m.Err, tributary.ErrDecode) || !strings.Contains(m.Err.Error(), wantText) {
			t.Errorf("%s: Message.Err = %v, want ErrDecode saying %q", how, m.Err, wantText)
		}
		if m.Value != "" {
			t.Errorf("%s: Value %q, want the zero value", how, m.Value)
		}
	}
	snap, err := tp.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	check("Snapshot", snap.Messages[0][0], "Decode panicked: boom")
	check("Snapshot", snap.Messages[0][1], "Decode panicked: Decode boom")
	m, ok, err := cons.TryPollPartition(0)
	if err != nil || !ok {
		t.Fatalf("TryPollPartition: %v, %v", ok, err)
	}
	check("TryPollPartition", m, "Decode panicked: boom")
	checkErr(t, "Message.Err of a panic(errBoom)", m.Err, errBoom)
	checkErr(t, "Ack", cons.Ack(m), nil)
	ms, err := cons.TryPoll(1)
	if err != nil || len(ms) != 1 {
		t.Fatalf("TryPoll: %v, %v", ms, err)
	}
	check("TryPoll", ms[0], "Decode panicked: Decode boom")
	checkErr(t, "Retry", cons.Retry(ms[0]), nil)
	ms = pollOK(t, cons, 1)
	check("Poll", ms[0], "Decode panicked: Decode boom")
}

// In Run, a payload whose Decode panics is handled as one that does not
// decode: never given to the handler; dead-lettered at once with a
// dead-letter topic, retried without one.
func TestRunDeadLettersAPayloadWhoseDecodePanics(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[string](t, c, "t", 1, panickyCodec{})
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "panic"})
	sendOK(t, pr, tp, tributary.Message[string]{Value: "good"})
	cons := testConsumer(t, tp, "g", "c1", tributary.WithDeadLetter("dlq", 3))

	ctx, cancel := context.WithCancel(guardCtx(t))
	var handled []string
	done := goResult(func() (struct{}, error) {
		return struct{}{}, cons.Run(ctx, func(_ context.Context, m tributary.Message[string]) error {
			handled = append(handled, m.Value)
			cancel()
			return nil
		})
	})
	awaitResult(t, "Run", done)
	if len(handled) != 1 || handled[0] != "good" {
		t.Fatalf("handler saw %q, want only the good record", handled)
	}
	dlq, err := tributary.OpenTopic[string](c, "dlq", panickyCodec{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := dlq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Messages[0]) != 1 {
		t.Fatalf("dead-letter topic holds %d records, want 1", len(snap.Messages[0]))
	}
	d := snap.Messages[0][0]
	if d.Payload != "panic" || headerOf(d.Headers, tributary.HeaderDeadLetterAttempts) != "1" ||
		!strings.Contains(headerOf(d.Headers, tributary.HeaderDeadLetterError), "Decode panicked: boom") {
		t.Fatalf("dead letter %+v: want payload \"panic\", attempts 1, an error saying Decode panicked", d)
	}
}

func TestRunRetriesAPayloadWhoseDecodePanicsWithoutDeadLetterTopic(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[string](t, c, "t", 1, panickyCodec{})
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "panic"})
	cons := testConsumer(t, tp, "g", "c1", tributary.WithBackoff(time.Millisecond, time.Millisecond))
	ctx, cancel := context.WithCancel(guardCtx(t))
	defer cancel()
	var handled atomic.Int64
	done := goResult(func() (struct{}, error) {
		return struct{}{}, cons.Run(ctx, func(context.Context, tributary.Message[string]) error {
			handled.Add(1)
			return nil
		})
	})
	waitFor(t, "the record retried three times", func() bool { return cons.Stats().Retried >= 3 })
	cancel()
	awaitResult(t, "Run", done)
	if handled.Load() != 0 {
		t.Fatalf("the handler ran %d times on a payload that does not decode", handled.Load())
	}
	if g := groupDesc(t, c, "t", "g"); g.Partitions[0].Committed != 0 {
		t.Fatalf("committed offset %d, want 0: the undecodable record was acked", g.Partitions[0].Committed)
	}
}

// A Name that panics is read once, when the codec or partitioner is given:
// that call fails and nothing is created.
func TestPanickingNameIsRefusedWhereGiven(t *testing.T) {
	c := testCluster(t, 10)
	_, err := tributary.CreateTopic[string](c, "t", 1, panickyCodec{nameQuirk: true})
	checkErr(t, "CreateTopic with a panicking Codec.Name", err, tributary.ErrInvalidArgument)
	if got := c.Topics(); len(got) != 0 {
		t.Fatalf("topics %v after a refused CreateTopic", got)
	}
	testTopic(t, c, "s", 1, tributary.String())
	_, err = tributary.OpenTopic[string](c, "s", panickyCodec{nameQuirk: true})
	checkErr(t, "OpenTopic with a panicking Codec.Name", err, tributary.ErrInvalidArgument)
	_, err = tributary.NewProducer[string](c, "p", panickyPartitioner{nameQuirk: true})
	checkErr(t, "NewProducer with a panicking Partitioner.Name", err, tributary.ErrInvalidArgument)
	if got := c.Producers(); len(got) != 0 {
		t.Fatalf("producers %v after a refused NewProducer", got)
	}
}

// A handler's panic is a failure whose error holds the panic value and the
// stack of the handler that panicked (here read in the dead letter).
func TestHandlerPanicErrorHoldsItsStack(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "v"})
	cons := testConsumer(t, tp, "g", "c1", tributary.WithDeadLetter("dlq", 1))
	ctx, cancel := context.WithCancel(guardCtx(t))
	defer cancel()
	done := goResult(func() (struct{}, error) { return struct{}{}, cons.Run(ctx, panickingHandler) })
	waitFor(t, "the dead letter", func() bool { return cons.Stats().DeadLettered == 1 })
	cancel()
	awaitResult(t, "Run", done)
	dlq, err := tributary.OpenTopic(c, "dlq", tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := dlq.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	text := headerOf(snap.Messages[0][0].Headers, tributary.HeaderDeadLetterError)
	if !strings.HasPrefix(text, "handler panicked: kaboom\n") || !strings.Contains(text, "panickingHandler") {
		t.Fatalf("dead letter error %q: want the panic value, then a stack naming panickingHandler", text)
	}
}

func panickingHandler(context.Context, tributary.Message[string]) error { panic("kaboom") }

// A handler that ends its goroutine (runtime.Goexit, what t.FailNow does)
// fails its record like a panic; Run goes on with a new worker.
func TestHandlerGoexitFailsItsRecordAndRunGoesOn(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[string]{Value: "a"})
	sendOK(t, pr, tp, tributary.Message[string]{Value: "b"})
	cons := testConsumer(t, tp, "g", "c1", tributary.WithBackoff(time.Millisecond, time.Millisecond))
	ctx, cancel := context.WithCancel(guardCtx(t))
	defer cancel()
	var seen []string
	done := goResult(func() (struct{}, error) {
		return struct{}{}, cons.Run(ctx, func(_ context.Context, m tributary.Message[string]) error {
			seen = append(seen, m.Value)
			if m.Value == "a" && m.Attempt == 1 {
				runtime.Goexit()
			}
			if m.Value == "b" {
				cancel()
			}
			return nil
		})
	})
	r := awaitResult(t, "Run after a handler's Goexit", done)
	checkErr(t, "Run", r.err, context.Canceled)
	if strings.Join(seen, " ") != "a a b" {
		t.Fatalf("handler calls %q, want a (Goexit), a (retried), b", seen)
	}
	if s := cons.Stats(); s.Retried != 1 || s.Acked < 1 {
		t.Fatalf("stats %+v: want 1 retry and the retried record acked", s)
	}
}

// panickyJSON's UnmarshalJSON sets the value, then panics on the input
// "panic" (a JSON string).
type panickyJSON struct{ S string }

func (p *panickyJSON) UnmarshalJSON(b []byte) error {
	p.S = "half-set"
	if string(b) == `"panic"` {
		panic(errBoom)
	}
	return json.Unmarshal(b, &p.S)
}

// A JSON value whose UnmarshalJSON panics, under the JSON codec: the
// message is one that
// does not decode, its Value the zero value, not what the method set
// before it panicked, and the next message decodes.
func TestJSONUnmarshalPanicIsAnUndecodablePayload(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.JSON[panickyJSON]())
	publishRaw(t, c, "t", 0, engine.Message{Payload: `"panic"`})
	publishRaw(t, c, "t", 0, engine.Message{Payload: `"fine"`})
	cons := testConsumer(t, tp, "g", "c1")
	m := pollOK(t, cons, 1)[0]
	if !errors.Is(m.Err, tributary.ErrDecode) || !strings.Contains(m.Err.Error(), "Decode panicked: boom") || m.Value != (panickyJSON{}) {
		t.Fatalf("message = %+v, want ErrDecode saying Decode panicked, and the zero Value", m)
	}
	if err := cons.Ack(m); err != nil {
		t.Fatal(err)
	}
	if m := pollOK(t, cons, 1)[0]; m.Err != nil || m.Value != (panickyJSON{S: "fine"}) {
		t.Fatalf("next message = %+v, want {fine}", m)
	}
}

// A handler that panics fails its record: Run retries it, then dead-letters
// it with the panic in its error header, and handles the next record.
func TestHandlerPanicIsRetriedThenDeadLettered(t *testing.T) {
	c := testCluster(t, 10)
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "bad"})
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "good"})
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithDeadLetter("in-dlq", 3), tributary.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)

	var badCalls atomic.Int32
	good := make(chan tributary.Message[string], 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
		if m.Value == "bad" {
			badCalls.Add(1)
			panic("kaboom " + strconv.Itoa(int(m.Attempt)))
		}
		good <- m
		return nil
	})
	select {
	case m := <-good:
		assert.Equal(t, int64(1), m.Offset)
	case err := <-done:
		t.Fatalf("Run returned %v before handling the good record", err)
	case <-time.After(guard):
		t.Fatal("the good record after a panicking one was never handled")
	}
	cancel()
	assert.ErrorIs(t, awaitDone(t, done, guard, "Run"), context.Canceled)

	assert.Equal(t, int32(3), badCalls.Load(), "handler calls for the panicking record")
	s := cons.Stats()
	assert.Equal(t, int64(2), s.Retried)
	assert.Equal(t, int64(1), s.DeadLettered)
	assert.Equal(t, int64(1), s.Acked)

	dlq, err := tributary.OpenTopic(c, "in-dlq", tributary.String())
	require.NoError(t, err)
	dc, err := tributary.NewConsumer(dlq, "dlq-readers", "r1")
	require.NoError(t, err)
	dm := pollOne(t, dc)
	assert.Equal(t, "bad", dm.Value)
	assert.Contains(t, headerOf(dm.Headers, tributary.HeaderDeadLetterError), "kaboom 3")
	assert.Equal(t, "3", headerOf(dm.Headers, tributary.HeaderDeadLetterAttempts))
	assert.Equal(t, "in", headerOf(dm.Headers, tributary.HeaderDeadLetterTopic))
	assert.Equal(t, "0", headerOf(dm.Headers, tributary.HeaderDeadLetterOffset))
	require.NoError(t, dc.Close())
}

// A panic's dead letter must still fit a cluster with a message size limit
// that the original record fits with room to spare: the error header must
// not carry an unbounded stack trace.
func TestHandlerPanicDeadLetterFitsMaxMessageBytes(t *testing.T) {
	c := testCluster(t, 10, engine.WithMaxMessageBytes(1024))
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "bad"})
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "good"})
	cons, err := tributary.NewConsumer(in, "g", "m1", tributary.WithDeadLetter("in-dlq", 2), tributary.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	good := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, cons, func(_ context.Context, m tributary.Message[string]) error {
		if m.Value == "bad" {
			panic("kaboom")
		}
		good <- struct{}{}
		return nil
	})
	returned := false
	select {
	case <-good:
	case err := <-done:
		returned = true
		t.Errorf("Run returned %v: the panic's dead letter did not fit a 1024-byte limit", err)
	case <-time.After(guard):
		t.Error("the good record was never handled")
	}
	cancel()
	if !returned {
		<-done
	}
}
