package tributary_test

// Topics: CreateTopic, OpenTopic and OpenOrCreateTopic and their errors,
// the payload type on the topic and ErrTypeMismatch, a message's fields
// and ID, reserved headers and the message size bound.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// sprintCodec is a user's codec whose Name is the same for every T: two
// topics of different Go types share its payload type.
type sprintCodec[T any] struct{}

func (sprintCodec[T]) Name() string { return "Sprint" }
func (sprintCodec[T]) Encode(v T) (string, error) {
	return fmt.Sprint(v), nil
}
func (sprintCodec[T]) Decode(string) (T, error) {
	var v T
	return v, nil
}

func TestCreateTopic(t *testing.T) {
	c := testCluster(t, 10)
	tests := []struct {
		name         string
		create       func() (string, int32, error) // payload type, partitions
		wpayloadType string
		wpartitions  int32
	}{
		{"nil codec is JSON", func() (string, int32, error) {
			tp, err := tributary.CreateTopic[purchase](c, "orders", 3, nil)
			if err != nil {
				return "", 0, err
			}
			return tp.PayloadType(), tp.Partitions(), nil
		}, purchaseType, 3},
		{"String", func() (string, int32, error) {
			tp, err := tributary.CreateTopic(c, "names", 1, tributary.String())
			if err != nil {
				return "", 0, err
			}
			return tp.PayloadType(), tp.Partitions(), nil
		}, "String", 1},
		{"Integer", func() (string, int32, error) {
			tp, err := tributary.CreateTopic(c, "counts", 64, tributary.Integer[int64]())
			if err != nil {
				return "", 0, err
			}
			return tp.PayloadType(), tp.Partitions(), nil
		}, "Integer", 64},
		{"user codec", func() (string, int32, error) {
			tp, err := tributary.CreateTopic[int](c, "sprints", 2, sprintCodec[int]{})
			if err != nil {
				return "", 0, err
			}
			return tp.PayloadType(), tp.Partitions(), nil
		}, "Sprint", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt, n, err := tt.create()
			if err != nil {
				t.Fatalf("CreateTopic: %v", err)
			}
			if pt != tt.wpayloadType || n != tt.wpartitions {
				t.Fatalf("CreateTopic: payload type %q, %d partitions; want %q, %d", pt, n, tt.wpayloadType, tt.wpartitions)
			}
		})
	}
	if got, want := c.Topics(), []string{"counts", "names", "orders", "sprints"}; !slices.Equal(got, want) {
		t.Fatalf("Topics() = %v, want %v", got, want)
	}
	tp, err := tributary.OpenTopic[purchase](c, "orders", nil)
	if err != nil {
		t.Fatalf("OpenTopic(orders): %v", err)
	}
	if tp.Name() != "orders" || tp.Cluster() != c || tp.Codec().Name() != purchaseType {
		t.Fatalf("handle: name %q, cluster %p, codec %q", tp.Name(), tp.Cluster(), tp.Codec().Name())
	}
	d, err := tp.Describe()
	if err != nil || d.Topic != "orders" || len(d.Partitions) != 3 {
		t.Fatalf("Topic.Describe = (%+v, %v)", d, err)
	}
}

func TestCreateTopicDuplicate(t *testing.T) {
	c := testCluster(t, 10)
	testTopic[purchase](t, c, "orders", 2, nil)
	tests := []struct {
		name   string
		create func() error
	}{
		{"same type", func() error {
			_, err := tributary.CreateTopic[purchase](c, "orders", 2, nil)
			return err
		}},
		{"other partition count", func() error {
			_, err := tributary.CreateTopic[purchase](c, "orders", 5, nil)
			return err
		}},
		{"other type", func() error {
			_, err := tributary.CreateTopic(c, "orders", 2, tributary.String())
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, "CreateTopic(duplicate)", tt.create(), tributary.ErrExists)
			if got := len(describeTopic(t, c, "orders").Partitions); got != 2 {
				t.Fatalf("partitions = %d after a duplicate CreateTopic, want 2", got)
			}
			if _, err := tributary.OpenTopic[purchase](c, "orders", nil); err != nil {
				t.Fatalf("OpenTopic with the original type: %v", err)
			}
			_, err := tributary.OpenTopic(c, "orders", tributary.String())
			checkErr(t, "OpenTopic with the duplicate's type", err, tributary.ErrTypeMismatch)
		})
	}
}

func TestCreateTopicInvalid(t *testing.T) {
	c := testCluster(t, 10)
	tests := []struct {
		name       string
		topic      string
		partitions int32
	}{
		{"empty name", "", 1},
		{"space", "my topic", 1},
		{"dot", "a.b", 1},
		{"65 bytes", strings.Repeat("t", 65), 1},
		{"non-ASCII", "tópico", 1},
		{"0 partitions", "t", 0},
		{"negative partitions", "t", -1},
		{"65 partitions", "t", 65},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tributary.CreateTopic[purchase](c, tt.topic, tt.partitions, nil)
			checkErr(t, "CreateTopic", err, tributary.ErrInvalidArgument)
			if got := c.Topics(); len(got) != 0 {
				t.Fatalf("Topics() = %v after an invalid CreateTopic", got)
			}
		})
	}
	// The longest valid name and partition count are fine.
	testTopic[purchase](t, c, strings.Repeat("t", 64), 64, nil)
}

func TestOpenTopic(t *testing.T) {
	c := testCluster(t, 10)
	testTopic[purchase](t, c, "orders", 1, nil)
	testTopic(t, c, "names", 1, tributary.String())
	testTopic(t, c, "counts", 1, tributary.Integer[int64]())
	testTopic(t, c, "anything", 1, tributary.JSON[any]())
	testTopic[int](t, c, "sprints", 1, sprintCodec[int]{})

	tests := []struct {
		name string
		open func() error
		werr error
	}{
		{"same type, nil codec", func() error {
			_, err := tributary.OpenTopic[purchase](c, "orders", nil)
			return err
		}, nil},
		{"same type, explicit JSON", func() error {
			_, err := tributary.OpenTopic(c, "orders", tributary.JSON[purchase]())
			return err
		}, nil},
		{"same String", func() error {
			_, err := tributary.OpenTopic(c, "names", tributary.String())
			return err
		}, nil},
		{"JSON of another struct", func() error {
			_, err := tributary.OpenTopic[struct{ ID int }](c, "orders", nil)
			return err
		}, tributary.ErrTypeMismatch},
		{"String codec on a JSON topic", func() error {
			_, err := tributary.OpenTopic(c, "orders", tributary.String())
			return err
		}, tributary.ErrTypeMismatch},
		{"JSON[string] on a String topic", func() error {
			_, err := tributary.OpenTopic[string](c, "names", nil)
			return err
		}, tributary.ErrTypeMismatch},
		{"Integer[int32] on an Integer topic", func() error {
			_, err := tributary.OpenTopic(c, "counts", tributary.Integer[int32]())
			return err
		}, tributary.ErrTypeMismatch},
		{"same codec name JSON, other Go type", func() error {
			_, err := tributary.OpenTopic(c, "anything", tributary.JSON[json.RawMessage]())
			return err
		}, tributary.ErrTypeMismatch},
		{"same user codec name, other Go type", func() error {
			_, err := tributary.OpenTopic[string](c, "sprints", sprintCodec[string]{})
			return err
		}, tributary.ErrTypeMismatch},
		{"same user codec, same Go type", func() error {
			_, err := tributary.OpenTopic[int](c, "sprints", sprintCodec[int]{})
			return err
		}, nil},
		{"unknown topic", func() error {
			_, err := tributary.OpenTopic[purchase](c, "nope", nil)
			return err
		}, tributary.ErrUnknownTopic},
		{"invalid name", func() error {
			_, err := tributary.OpenTopic[purchase](c, "bad name", nil)
			return err
		}, tributary.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, "OpenTopic", tt.open(), tt.werr)
		})
	}
}

// TestPayloadTypeOnTheTopic reads the engine's records: the payload type is
// the topic's, recorded once, and no record carries it (the records hold
// exactly the user's headers); every typed message reports it as
// PayloadType. A record that does carry HeaderPayloadType (a dead letter,
// or one published by other code) has it stripped into PayloadType.
func TestPayloadTypeOnTheTopic(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	user := []tributary.Header{{Key: "trace", Value: "t1"}}
	sent := sendOK(t, pr, tp, tributary.Message[purchase]{Value: purchase{ID: 1}, Headers: user})
	sendOK(t, pr, tp, tributary.Message[purchase]{Value: purchase{ID: 2}})
	if sent.PayloadType != purchaseType {
		t.Fatalf("sent PayloadType = %q, want %q", sent.PayloadType, purchaseType)
	}

	bt, pt, err := c.Backend().OpenTopic("orders")
	if err != nil || pt != purchaseType {
		t.Fatalf("Backend().OpenTopic = (%q, %v), want %q", pt, err, purchaseType)
	}
	cons := testConsumer(t, tp, "typed", "t1") // joins first: the records stay for it
	raw, err := bt.Member("raw", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Join(); err != nil {
		t.Fatal(err)
	}
	// A third record published by other code with the header set.
	if _, err := bt.TryPublish(0, engine.Message{Payload: `{"id":3}`, Headers: []engine.Header{
		{Key: "a", Value: "1"}, {Key: tributary.HeaderPayloadType, Value: "Forged"}}}); err != nil {
		t.Fatal(err)
	}
	wheaders := [][]engine.Header{
		{{Key: "trace", Value: "t1"}},
		nil,
		{{Key: "a", Value: "1"}, {Key: tributary.HeaderPayloadType, Value: "Forged"}},
	}
	for i, want := range wheaders {
		recs, err := raw.TryPoll(nil, 1)
		if err != nil || len(recs) != 1 {
			t.Fatalf("raw TryPoll = (%v, %v)", recs, err)
		}
		if !slices.Equal(recs[0].Headers, want) {
			t.Fatalf("record %d headers = %v, want %v", i, recs[0].Headers, want)
		}
		if ok, err := raw.Ack(recs[0].Partition, recs[0].Offset); !ok || err != nil {
			t.Fatalf("raw Ack = (%v, %v)", ok, err)
		}
	}

	wants := []struct {
		pt   string
		user []tributary.Header
	}{{purchaseType, user}, {purchaseType, nil}, {"Forged", []tributary.Header{{Key: "a", Value: "1"}}}}
	for i, w := range wants {
		ms := pollOK(t, cons, 1)
		m := ms[0]
		if m.PayloadType != w.pt || !slices.Equal(m.Headers, w.user) || m.Value.ID != i+1 {
			t.Fatalf("message %d: PayloadType %q Headers %v Value %+v; want %q %v", i, m.PayloadType, m.Headers, m.Value, w.pt, w.user)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMessageFields(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 3, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "c1")
	at := time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC)
	tests := []struct {
		name    string
		in      tributary.Message[purchase]
		wid     string
		woffset int64
	}{
		{"all fields", tributary.Message[purchase]{
			Partition: 2, Key: "cust-7", Time: at, Value: purchase{ID: 1, Item: "pen"},
			Headers: []tributary.Header{{Key: "b", Value: "2"}, {Key: "a", Value: "1"}, {Key: "b", Value: ""}},
		}, "2-0", 0},
		{"second on the partition", tributary.Message[purchase]{Partition: 2, Value: purchase{ID: 2}}, "2-1", 1},
		{"partition 0", tributary.Message[purchase]{Partition: 0, Key: "k", Value: purchase{ID: 3}}, "0-0", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now()
			sent := sendOK(t, pr, tp, tt.in)
			if sent.ID != tt.wid || sent.Offset != tt.woffset || sent.Partition != tt.in.Partition || sent.Topic != "orders" {
				t.Fatalf("sent ID %q topic %q partition %d offset %d; want %q orders %d %d",
					sent.ID, sent.Topic, sent.Partition, sent.Offset, tt.wid, tt.in.Partition, tt.woffset)
			}
			// The broker's clock stamps records at its coarse clock's
			// resolution (1 ms while it runs; engine.WithClock): a reading
			// may lag the wall clock, never lead it by much.
			if tt.in.Time.IsZero() && (sent.Time.Before(before.Add(-time.Second)) || sent.Time.After(time.Now().Add(time.Millisecond))) {
				t.Fatalf("sent Time %v: want the broker clock at Send (%v, at its coarse resolution)", sent.Time, before)
			}
			if !tt.in.Time.IsZero() && !sent.Time.Equal(tt.in.Time) {
				t.Fatalf("sent Time %v, want %v", sent.Time, tt.in.Time)
			}
			if wpayload := mustJSON(t, tt.in.Value); sent.Payload != wpayload {
				t.Fatalf("sent Payload %q, want %q", sent.Payload, wpayload)
			}

			got := pollOK(t, cons, 1)[0]
			if got.ID != sent.ID || got.Topic != "orders" || got.Partition != sent.Partition || got.Offset != sent.Offset {
				t.Fatalf("received %q %s/%d/%d, want %q", got.ID, got.Topic, got.Partition, got.Offset, sent.ID)
			}
			if got.Key != tt.in.Key || !slices.Equal(got.Headers, tt.in.Headers) || !got.Time.Equal(sent.Time) {
				t.Fatalf("received key %q headers %v time %v; want %q %v %v", got.Key, got.Headers, got.Time, tt.in.Key, tt.in.Headers, sent.Time)
			}
			if got.Value != tt.in.Value || got.Payload != sent.Payload || got.Err != nil || got.Attempt != 1 || got.PayloadType != purchaseType {
				t.Fatalf("received %+v", got)
			}
			if err := cons.Ack(got); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMessageIDStable: redelivery after Retry and replay after Seek give the
// same ID; Attempt counts redeliveries and Seek resets it.
func TestMessageIDStable(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	sent := sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 1, Value: purchase{ID: 9}})
	cons := testConsumer(t, tp, "g", "c1")
	if _, err := c.CreateGroup("orders", "hold", engine.RoundRobin); err != nil { // keeps the record for replay
		t.Fatal(err)
	}

	steps := []struct {
		name     string
		before   func(m tributary.Message[purchase]) error // applied to the last message
		wattempt int32
	}{
		{"first delivery", nil, 1},
		{"after Retry", cons.Retry, 2},
		{"after a second Retry", cons.Retry, 3},
		{"after Ack and Seek back", func(m tributary.Message[purchase]) error {
			if err := cons.Ack(m); err != nil {
				return err
			}
			return cons.Seek(m.Partition, m.Offset)
		}, 1},
		{"after Seek while in flight", func(m tributary.Message[purchase]) error {
			return cons.Seek(m.Partition, m.Offset)
		}, 1},
	}
	var last tributary.Message[purchase]
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.before != nil {
				if err := st.before(last); err != nil {
					t.Fatal(err)
				}
			}
			last = pollOK(t, cons, 1)[0]
			if last.ID != sent.ID || last.ID != "1-0" || last.Attempt != st.wattempt || last.Value.ID != 9 {
				t.Fatalf("got ID %q attempt %d value %+v; want ID %q attempt %d", last.ID, last.Attempt, last.Value, sent.ID, st.wattempt)
			}
		})
	}
}

func TestReservedHeaderRefused(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	tests := []struct {
		name    string
		headers []tributary.Header
	}{
		{"only", []tributary.Header{{Key: tributary.HeaderPayloadType, Value: purchaseType}}},
		{"after a user header", []tributary.Header{{Key: "a", Value: "1"}, {Key: tributary.HeaderPayloadType, Value: "x"}}},
		{"empty value", []tributary.Header{{Key: tributary.HeaderPayloadType}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pr.TrySend(tp, tributary.Message[purchase]{Headers: tt.headers})
			checkErr(t, "TrySend", err, tributary.ErrInvalidArgument)
			_, err = pr.Send(guardCtx(t), tp, tributary.Message[purchase]{Headers: tt.headers})
			checkErr(t, "Send", err, tributary.ErrInvalidArgument)
			if got := logEndOf(t, c, "orders", 0); got != 0 {
				t.Fatalf("log end %d after refused sends, want 0", got)
			}
		})
	}
	// Dead-letter header names are not reserved for producers.
	m := sendOK(t, pr, tp, tributary.Message[purchase]{Headers: []tributary.Header{{Key: tributary.HeaderDeadLetterTopic, Value: "x"}}})
	if m.ID != "0-0" {
		t.Fatalf("ID %q, want 0-0", m.ID)
	}
}

func TestMaxMessageBytes(t *testing.T) {
	c := testCluster(t, 10, engine.WithMaxMessageBytes(200))
	tp := testTopic(t, c, "names", 1, tributary.String())
	pr := testProducer[string](t, c, "p", tributary.Manual())
	// The payload type is the topic's: no per-record header counts.
	room := 200
	tests := []struct {
		name    string
		payload int
		werr    error
	}{
		{"exactly the limit", room, nil},
		{"one byte over", room + 1, tributary.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := logEndOf(t, c, "names", 0)
			_, err := pr.TrySend(tp, tributary.Message[string]{Value: strings.Repeat("x", tt.payload)})
			checkErr(t, "TrySend("+strconv.Itoa(tt.payload)+" bytes)", err, tt.werr)
			wend := before
			if tt.werr == nil {
				wend++
			}
			if got := logEndOf(t, c, "names", 0); got != wend {
				t.Fatalf("log end %d, want %d", got, wend)
			}
		})
	}
}

func TestOpenOrCreateTopic(t *testing.T) {
	c := testCluster(t, 10)
	created, err := tributary.OpenOrCreateTopic(c, "t", 3, tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	if n := created.Partitions(); n != 3 {
		t.Fatalf("created with %d partitions, want 3", n)
	}
	opened, err := tributary.OpenOrCreateTopic(c, "t", 5, tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	if n := opened.Partitions(); n != 3 {
		t.Fatalf("an existing topic keeps its count: got %d, want 3", n)
	}
	if _, err := tributary.OpenOrCreateTopic(c, "t", 3, tributary.Bytes()); !errors.Is(err, tributary.ErrTypeMismatch) {
		t.Fatalf("another payload type: %v, want ErrTypeMismatch", err)
	}
	for _, bad := range []struct {
		name       string
		partitions int32
	}{{"bad name", 1}, {"u", 0}, {"u", 65}} {
		if _, err := tributary.OpenOrCreateTopic(c, bad.name, bad.partitions, tributary.String()); !errors.Is(err, tributary.ErrInvalidArgument) {
			t.Fatalf("%q with %d partitions: %v, want ErrInvalidArgument", bad.name, bad.partitions, err)
		}
	}
	if got := c.Topics(); !slices.Equal(got, []string{"t"}) {
		t.Fatalf("topics %v, want [t]: refused calls created nothing", got)
	}
	// Concurrent callers all get the one topic.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := tributary.OpenOrCreateTopic(c, "race", 2, tributary.String())
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func openStringTopic(t *testing.T, c *tributary.Cluster, name string) *tributary.Topic[string] {
	t.Helper()
	tp, err := tributary.OpenTopic(c, name, tributary.String())
	require.NoError(t, err)
	return tp
}

type otherString string

type fakeStringCodec struct{}

func (fakeStringCodec) Name() string { return "String" }

func (fakeStringCodec) Encode(v otherString) (string, error) { return string(v), nil }

func (fakeStringCodec) Decode(p string) (otherString, error) { return otherString(p), nil }

// A topic, producer, consumer or dead-letter topic asked for as another
// payload type than its own is ErrTypeMismatch (a codec of the same name
// for another Go type included), and the mismatch changes nothing.
func TestTypeMismatch(t *testing.T) {
	c := testCluster(t, 10)
	testTopic(t, c, "s", 2, tributary.String())
	_, err := tributary.CreateTopic(c, "n", 1, tributary.Integer[int]())
	require.NoError(t, err)
	p := testProducer[string](t, c, "p", tributary.Manual())
	_, err = tributary.NewConsumer(openStringTopic(t, c, "s"), "g", "m1")
	require.NoError(t, err)
	before, err := c.Describe("s")
	require.NoError(t, err)
	topics := c.Topics()

	_, err = tributary.OpenTopic(c, "s", tributary.Integer[int]())
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)
	_, err = tributary.OpenTopic(c, "s", tributary.JSON[string]())
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)
	_, err = tributary.OpenTopic[otherString](c, "s", fakeStringCodec{}) // same codec name, another Go type
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)
	_, err = tributary.OpenTopic[string](c, "n", nil) // JSON:string vs Integer:int
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)
	_, err = tributary.CreateTopic(c, "s", 2, tributary.Integer[int]())
	assert.ErrorIs(t, err, tributary.ErrExists)

	_, err = tributary.LookupProducer[int](c, "p")
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)
	got, err := tributary.LookupProducer[string](c, "p")
	require.NoError(t, err)
	assert.Same(t, p, got)
	_, err = tributary.LookupConsumer[int](c, "m1")
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)

	// A dead-letter topic of another type.
	s, err := tributary.OpenTopic(c, "s", tributary.String())
	require.NoError(t, err)
	_, err = tributary.NewConsumer(s, "g", "m2", tributary.WithDeadLetter("n", 3))
	assert.ErrorIs(t, err, tributary.ErrTypeMismatch)

	after, err := c.Describe("s")
	require.NoError(t, err)
	assert.Equal(t, before, after, "a mismatch changes nothing")
	assert.Equal(t, topics, c.Topics())
	assert.Equal(t, []string{"m1"}, c.Consumers())
	assert.Equal(t, []string{"p"}, c.Producers())
	require.NoError(t, c.Close())
}
