package jetstream_test

// What a published record carries, kept exactly or refused as an invalid
// argument that changes nothing: headers (also bytes that are not UTF-8),
// keys, times outside 1678–2262, empty and huge payloads, big keys and
// headers, and MaxMessageBytes at its boundaries.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

func TestHeadersKeyTime(t *testing.T) {
	b, _ := start(t, jetstream.Config{MaxMessageBytes: 40})
	bt := topic(t, b, "t", 1)
	at := time.Unix(1234, 5678)
	hs := []engine.Header{{Key: "Tributary-Key", Value: "x"}, {Key: "a", Value: "1"}, {Key: "a", Value: "2"}, {Key: "nl", Value: "x\r\ny"}, {}}
	must(bt.TryPublish(0, engine.Message{Key: "k\n", Headers: hs, Payload: "p", Time: at})).of(t)
	if _, err := bt.TryPublish(0, engine.Message{Payload: string(make([]byte, 41))}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("oversized: %v", err)
	}
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	rs := must(m.TryPoll(nil, 5)).of(t)
	if len(rs) != 1 {
		t.Fatalf("records %+v", rs)
	}
	r := rs[0]
	if r.Key != "k\n" || !slices.Equal(r.Headers, hs) || !r.Time.Equal(at) || r.Payload != "p" || r.Topic != "t" {
		t.Fatalf("record %+v", r)
	}
}

// Messages: MaxMessageBytes boundaries, headers with hostile bytes, empty
// payloads and keys, times.
func TestMessages(t *testing.T) {
	const max = 200
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage, MaxMessageBytes: max, Capacity: 50})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	// Exactly max bytes, split every way: accepted.
	exact := []engine.Message{
		{Payload: strings.Repeat("p", max)},
		{Key: strings.Repeat("k", max)},
		{Headers: []engine.Header{{Key: strings.Repeat("h", max)}}},
		{Headers: []engine.Header{{Value: strings.Repeat("v", max)}}},
		{Key: "kk", Payload: strings.Repeat("p", max-10), Headers: []engine.Header{{Key: "h", Value: strings.Repeat("v", 7)}}},
	}
	for i, msg := range exact {
		if _, err := bt.TryPublish(0, msg); err != nil {
			t.Errorf("exact %d: %v", i, err)
		}
	}
	before := stateOf(t, b, "t")
	over := []engine.Message{
		{Payload: strings.Repeat("p", max+1)},
		{Key: strings.Repeat("k", max+1)},
		{Key: "k", Payload: strings.Repeat("p", max)},
		{Payload: strings.Repeat("p", max), Headers: []engine.Header{{Key: "h"}}},
		{Payload: strings.Repeat("p", max), Headers: []engine.Header{{Value: "v"}}},
		{Headers: []engine.Header{{Key: strings.Repeat("h", max/2)}, {Value: strings.Repeat("v", max/2+1)}}},
		{Payload: strings.Repeat("é", max/2+1)}, // max+2 bytes, fewer runes
	}
	for i, msg := range over {
		_, err := bt.TryPublish(0, msg)
		wantInvalid(t, fmt.Sprintf("over %d", i), err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = bt.Publish(ctx, nil, 0, msg)
		cancel()
		wantInvalid(t, fmt.Sprintf("over %d (Publish)", i), err)
	}
	wantSame(t, "oversized messages", before, stateOf(t, b, "t"))
	for range exact {
		rs := must(m.TryPoll(nil, 1)).of(t)
		if len(rs) != 1 {
			t.Fatalf("poll: %v", rs)
		}
		must(m.Ack(0, rs[0].Offset)).of(t)
	}

	// Hostile header and key bytes: kept exactly, in order, duplicates
	// included; empty payload; times at the edges.
	evil := []string{"", ":", "a:b", "\r\n", "X: y\r\nZ: w", "\x00", "\x00\x01\x7f", "é☃", "Tributary-Key", "Tributary-Time", "Nats-Msg-Id", "Nats-Expected-Last-Sequence"}
	for i, s := range evil {
		msg := engine.Message{Key: s, Payload: "", Headers: []engine.Header{{Key: s, Value: s}, {Key: s, Value: "dup"}, {Key: "k", Value: s}}}
		off := must(bt.TryPublish(0, msg)).of(t)
		rs := must(m.TryPoll(nil, 1)).of(t)
		if len(rs) != 1 || rs[0].Offset != off {
			t.Fatalf("evil %d: poll %v", i, rs)
		}
		r := rs[0]
		if r.Key != s || r.Payload != "" || !slices.Equal(r.Headers, msg.Headers) {
			t.Errorf("evil %d %q: got key %q payload %q headers %q", i, s, r.Key, r.Payload, r.Headers)
		}
		if r.Time.IsZero() {
			t.Errorf("evil %d: zero time", i)
		}
		must(m.Ack(0, off)).of(t)
	}
}

// Header bytes that are not UTF-8 must come back unchanged (the engine
// keeps strings as bytes).
func TestHeaderInvalidUTF8(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	msg := engine.Message{Key: "\xff\xfe", Payload: "\xff", Headers: []engine.Header{{Key: "\xff", Value: "a\xc3"}}}
	must(bt.TryPublish(0, msg)).of(t)
	rs := must(m.TryPoll(nil, 1)).of(t)
	if len(rs) != 1 {
		t.Fatalf("poll: %v", rs)
	}
	if rs[0].Key != msg.Key || rs[0].Payload != msg.Payload {
		t.Fatalf("key %q payload %q", rs[0].Key, rs[0].Payload)
	}
	if !slices.Equal(rs[0].Headers, msg.Headers) {
		t.Fatalf("header bytes that are not valid UTF-8 are not kept: published %q, polled %q (topic.go encode: json.Marshal of the header pairs replaces invalid UTF-8 with U+FFFD)", msg.Headers, rs[0].Headers)
	}
}

// Message times outside int64 nanoseconds since 1970 (before 1678, after
// 2262) must come back as given, or be refused; never silently changed.
func TestMessageTime(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	times := []time.Time{
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	var bad []string
	for _, ts := range times {
		off, err := bt.TryPublish(0, engine.Message{Payload: "x", Time: ts})
		if err != nil {
			continue // refused: acceptable
		}
		rs := must(m.TryPoll(nil, 1)).of(t)
		if len(rs) != 1 || rs[0].Offset != off {
			t.Fatalf("poll %v", rs)
		}
		if !rs[0].Time.Equal(ts) {
			bad = append(bad, fmt.Sprintf("published %v, polled %v", ts, rs[0].Time))
		}
		must(m.Ack(0, off)).of(t)
	}
	if len(bad) > 0 {
		t.Fatalf("message times outside the int64 UnixNano range are silently changed (topic.go encode: ts.UnixNano()): %s", strings.Join(bad, "; "))
	}
}

// Payloads near and over the server's max_payload (1 MiB): a clear error,
// nothing changed, the connection still usable; one that fits round-trips
// through Poll and Snapshot.
func TestHugePayload(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	big := strings.Repeat("x", 1<<20-4096)
	off := must(bt.TryPublish(0, engine.Message{Payload: big})).of(t)
	rs := must(m.TryPoll(nil, 1)).of(t)
	if len(rs) != 1 || rs[0].Offset != off || rs[0].Payload != big {
		t.Fatalf("big record not polled back intact (%d records)", len(rs))
	}
	s := must(b.Snapshot("t")).of(t)
	if len(s.Records[0]) != 1 || s.Records[0][0].Payload != big {
		t.Fatalf("big record not in the snapshot")
	}
	before := stateOf(t, b, "t")
	for _, n := range []int{1 << 20, 1<<20 + 1, 2 << 20} {
		start := time.Now()
		_, err := bt.TryPublish(0, engine.Message{Payload: strings.Repeat("y", n)})
		if err == nil {
			t.Errorf("payload of %d bytes accepted over max_payload", n)
			continue
		}
		t.Logf("payload %d bytes: %v (engine.ErrInvalidArgument: %v, ErrUnavailable: %v) in %v", n, err,
			errors.Is(err, engine.ErrInvalidArgument), errors.Is(err, jetstream.ErrUnavailable), time.Since(start))
		if time.Since(start) > 3*time.Second {
			t.Errorf("oversized publish took %v", time.Since(start))
		}
	}
	// Headers count too: a payload that fits alone, plus a big header.
	_, err := bt.TryPublish(0, engine.Message{Payload: strings.Repeat("y", 1<<20-100), Headers: []engine.Header{{Key: "h", Value: strings.Repeat("v", 200)}}})
	if err == nil {
		t.Errorf("payload + headers over max_payload accepted")
	}
	wantSame(t, "oversized publishes", before, stateOf(t, b, "t"))
	ok, err := m.Ack(0, off)
	wantBool(t, "Ack after oversized publishes", ok, err, true)
	pub(t, bt, 0, "small")
}

// A key or headers of some tens of KiB, far below max_payload and with no
// MaxMessageBytes, must publish and come back intact, or be refused as an
// invalid argument changing nothing; not fail as "server unavailable".
func TestBigKeyHeaders(t *testing.T) {
	b, _ := start(t, jetstream.Config{Storage: jetstream.MemoryStorage})
	bt := topic(t, b, "t", 1)
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	before := stateOf(t, b, "t")
	var bad []string
	for _, msg := range []engine.Message{
		{Key: strings.Repeat("k", 60<<10)},
		{Headers: []engine.Header{{Key: "h", Value: strings.Repeat("v", 60<<10)}}},
	} {
		off, err := bt.TryPublish(0, msg)
		switch {
		case errors.Is(err, engine.ErrInvalidArgument):
			wantSame(t, "refused big key", before, stateOf(t, b, "t"))
		case err != nil:
			bad = append(bad, fmt.Sprintf("key %d bytes, headers %d bytes: %v", len(msg.Key), len(msg.Headers), err))
		default:
			rs := must(m.TryPoll(nil, 1)).of(t)
			if len(rs) != 1 || rs[0].Offset != off || rs[0].Key != msg.Key || !slices.Equal(rs[0].Headers, msg.Headers) {
				t.Fatalf("big key/headers not polled back intact")
			}
			must(m.Ack(0, off)).of(t)
			before = stateOf(t, b, "t")
		}
	}
	if len(bad) > 0 {
		t.Fatalf("a message whose key or headers exceed about 48 KiB (60 KiB here, payload empty, no MaxMessageBytes, far below the documented 1 MiB max_payload) is refused by the server's 64 KiB NATS header limit (API error 10097; topic.go encode puts the base64 key and headers in NATS headers) and reported as ErrUnavailable, not ErrInvalidArgument, while the engine accepts it: %s", strings.Join(bad, "; "))
	}
}
