package tributary_test

import (
	"encoding/json"
	"testing"

	"github.com/f91dcac0/tributary"
)

// The typed library's allocation-free paths under attack: payloads
// shared with the broker, buffers kept between polls, the iterator and
// Run's worker.

// scribble is a JSON value whose UnmarshalJSON works on its input in place
// (upper-casing it, then reading it), which encoding/json's Unmarshaler
// contract allows: it promises only that the input is valid JSON, and asks
// an implementation to copy it to keep it after returning.
type scribble struct{ S string }

func (s *scribble) UnmarshalJSON(b []byte) error {
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	var v struct{ S string }
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	s.S = v.S
	return nil
}

// keeper marshals as "abc" and keeps the bytes its UnmarshalJSON is given
// (which its contract asks it to copy); the test writes over them later.
type keeper struct{ kept []byte }

func (k *keeper) MarshalJSON() ([]byte, error) { return []byte(`"abc"`), nil }

func (k *keeper) UnmarshalJSON(b []byte) error {
	k.kept = b
	return nil
}

// TestJSONDecodeNeverWritesTheRecord: a JSON payload decoded by a type whose
// UnmarshalJSON writes to its input leaves the broker's record as it was
// sent: another group receives, and a Snapshot shows, the payload the
// producer sent. A Decode that hands encoding/json the payload's own bytes
// (unsafe.Slice over the record's string) lets the first consumer rewrite
// the record for every later reader.
func TestJSONDecodeNeverWritesTheRecord(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.JSON[scribble]())
	pr := testProducer[scribble](t, c, "p", tributary.Manual())
	a := testConsumer(t, tp, "ga", "a")
	b := testConsumer(t, tp, "gb", "b")
	sent := sendOK(t, pr, tp, tributary.Message[scribble]{Value: scribble{S: "quiet"}})
	want := `{"S":"quiet"}`
	if sent.Payload != want {
		t.Fatalf("sent payload %q, want %q", sent.Payload, want)
	}
	ma := pollOK(t, a, 1)[0]
	if ma.Err != nil || ma.Value.S != "QUIET" {
		t.Fatalf("group ga received %+v", ma)
	}
	if ma.Payload != want || sent.Payload != want {
		t.Fatalf("after group ga decoded it: its Payload %q, the sent message's %q; want %q", ma.Payload, sent.Payload, want)
	}
	mb := pollOK(t, b, 1)[0]
	if mb.Payload != want {
		t.Fatalf("group gb received payload %q, want %q (the record was rewritten by another group's decode)", mb.Payload, want)
	}
	snap, err := tp.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Messages[0][0].Payload; got != want {
		t.Fatalf("Snapshot payload %q, want %q", got, want)
	}
}

// TestJSONDecodeKeptBytesAreNotTheRecord: a field's UnmarshalJSON that
// keeps its input (against the contract, but harmless while Decode reads a
// copy) and writes to it later changes neither the message's Payload nor
// the record.
func TestJSONDecodeKeptBytesAreNotTheRecord(t *testing.T) {
	type T struct{ K *keeper }
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.JSON[T]())
	pr := testProducer[T](t, c, "p", tributary.Manual())
	a := testConsumer(t, tp, "ga", "a")
	b := testConsumer(t, tp, "gb", "b")
	sendOK(t, pr, tp, tributary.Message[T]{Value: T{K: &keeper{}}})
	want := `{"K":"abc"}`
	m := pollOK(t, a, 1)[0]
	if m.Err != nil || m.Value.K == nil || string(m.Value.K.kept) != `"abc"` || m.Payload != want {
		t.Fatalf("group ga received %+v", m)
	}
	for i := range m.Value.K.kept {
		m.Value.K.kept[i] = 'X'
	}
	if m.Payload != want {
		t.Fatalf("after a kept input was written: the message's Payload %q, want %q", m.Payload, want)
	}
	if mb := pollOK(t, b, 1)[0]; mb.Payload != want {
		t.Fatalf("group gb received payload %q, want %q", mb.Payload, want)
	}
}

// shared is a value whose MarshalJSON returns a buffer it keeps and
// writes again later.
type shared struct{ buf []byte }

func (s shared) MarshalJSON() ([]byte, error) { return s.buf, nil }

// TestJSONEncodeOwnsItsPayload: a MarshalJSON that returns a buffer it
// keeps and later overwrites changes neither the sent message's Payload
// nor the record (Encode's string is over json.Marshal's own copy).
func TestJSONEncodeOwnsItsPayload(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.JSON[shared]())
	pr := testProducer[shared](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "a")
	v := shared{buf: []byte(`"abc"`)}
	sent := sendOK(t, pr, tp, tributary.Message[shared]{Value: v})
	copy(v.buf, `"XYZ"`)
	if sent.Payload != `"abc"` {
		t.Fatalf("sent Payload %q after the Marshaler's buffer was overwritten, want %q", sent.Payload, `"abc"`)
	}
	if m := pollOK(t, cons, 1)[0]; m.Payload != `"abc"` {
		t.Fatalf("received Payload %q, want %q", m.Payload, `"abc"`)
	}
}
