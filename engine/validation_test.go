package engine_test

// Validation (rules 3, 4 and 5): identifiers that look valid and are not
// (lookalikes, invalid UTF-8, lengths around 64 bytes) and integer
// extremes of partitions, offsets and counts, each call checked against
// model.Broker for its outcome and the whole observable state after it;
// payloads no text protocol would survive (1 MiB, empty, NUL, every byte,
// invalid UTF-8) delivered byte-exact; and validation before state for Ack
// and Retry of a memberless group.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/model"
)

// hLookalikes are identifiers that look valid to a human but are not, plus
// a few valid oddities.
var hLookalikes = []string{
	"", " ", "a ", " a", "a\x00", "\x00", "\x00a", "a\x00b",
	"ａ",       // fullwidth a
	"а",       // Cyrillic a
	"A\u0301", // combining accent
	"a\u200b", // zero-width space
	"\ufeffa", // BOM
	"a.b", "a/b", "a\tb", "a\nb", "a:b", "a+b", "é", "ß",
	"\xff", "\xc0\x80", "a\xed\xa0\x80", // invalid UTF-8, overlong NUL, surrogate
	strings.Repeat("a", 63) + "é", // 65 bytes
	strings.Repeat("a", 62) + "é", // 64 bytes, still invalid
	strings.Repeat("a", 64),       // valid
	strings.Repeat("a", 65),       // too long
	strings.Repeat("a", 1000),     // far too long
	strings.Repeat("Z", 64), strings.Repeat("-", 64), strings.Repeat("_", 64), "0", "-", "_",
}

func hValidByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// hByteIDs returns, for every byte 0..255, identifiers carrying it at
// the start and end of a 64-byte id, alone, and after 64 valid bytes; then
// the lookalikes.
func hByteIDs() []string {
	var ids []string
	for c := 0; c < 256; c++ {
		for _, pos := range []int{0, 63} {
			id := []byte(strings.Repeat("q", 64))
			id[pos] = byte(c)
			ids = append(ids, string(id))
		}
		ids = append(ids, string([]byte{byte(c)}))
		ids = append(ids, strings.Repeat("q", 64)+string([]byte{byte(c)})) // 65 bytes
	}
	return append(ids, hLookalikes...)
}

// TestIdentifiersMatchModel runs every core method with every hostile
// identifier in each of the topic, group and member positions, against a
// live state (records in flight, a memberful group), and requires the
// engine's outcomes and the resulting state to equal the model's: an invalid
// identifier is ErrInvalidArgument and changes nothing; a valid odd one works.
func TestIdentifiersMatchModel(t *testing.T) {
	h := hNewPair(t, 3)
	h.do(hC("T", 4))
	for p := int32(0); p < 4; p++ {
		h.do(hPub("T", p, fmt.Sprint("r", p)))
		h.do(hPub("T", p, fmt.Sprint("s", p)))
	}
	h.do(hJ("T", "G", "m1"))
	h.do(hJ("T", "G", "m2"))
	h.do(hQ("T", "G", "m1", 1)) // p0 in flight to m1
	ids := hByteIDs()
	for i, id := range ids {
		valid := len(id) >= 1 && len(id) <= 64
		for j := 0; j < len(id); j++ {
			valid = valid && hValidByte(id[j])
		}
		// The id as topic: create it, then use it everywhere.
		before := hProbe(h.b, []string{"T"}, []string{"G"})
		for _, o := range []hOp{
			hJ(id, "G", "m1"), hPub(id, 0, "x"), hR(id, "G", "m1", 0, 0),
			hC(id, 0), hC(id, 2), hC(id, 3),
			hPub(id, 1, "y"), hJ(id, "G", "m1"), hQ(id, "G", "m1", 64), hA(id, "G", "m1", 1, 0), hL(id, "G", "m1"),
		} {
			out := h.do(o)
			if !valid && out.Err != "invalid" {
				t.Fatalf("%s with invalid topic id: %s, want ErrInvalidArgument", o, hOutString(out))
			}
		}
		// The id as group and as member of topic T.
		for _, o := range []hOp{
			hQ("T", id, "m1", 1), hR("T", id, "m1", 0, 0), hL("T", id, "m1"),
			hJ("T", id, "m1"), hQ("T", id, "m1", 1), hA("T", id, "m1", 0, 0), hL("T", id, "m1"),
			hQ("T", "G", id, 1), hA("T", "G", id, 0, 0), hR("T", "G", id, 1, 0),
			hJ("T", "G", id), hL("T", "G", id),
		} {
			out := h.do(o)
			if !valid && out.Err != "invalid" {
				t.Fatalf("%s with invalid id: %s, want ErrInvalidArgument", o, hOutString(out))
			}
		}
		if !valid {
			if after := hProbe(h.b, []string{"T"}, []string{"G"}); after != before {
				t.Fatalf("calls with invalid id %q changed state:\nbefore:\n%s\nafter:\n%s", id, before, after)
			}
		} else {
			// A valid member joins G and leaves again: rebalances happen, G's
			// in-flight delivery of p0 may be cancelled; mirrored by the model.
			h.do(hJ("T", "G", id))
			h.do(hQ("T", "G", id, 64))
			h.do(hL("T", "G", id))
		}
		if i%16 == 0 {
			h.sameOn([]string{"T", id}, []string{"G", id})
		}
	}
	h.sameOn([]string{"T"}, []string{"G"})
	if err := h.m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestIntegerExtremesMatchModel drives every integer argument to its
// extremes (int32 and int64 limits, off-by-one around each bound) against
// the model, checking the whole state after every call.
func TestIntegerExtremesMatchModel(t *testing.T) {
	for _, c := range []int32{math.MinInt32, -1000, -1, 0, 1, 2, 999, 1000, 1001, math.MaxInt32} {
		_, errE := hNew(c)
		_, errM := model.New(c)
		if hErrClass(errE) != hErrClass(errM) {
			t.Fatalf("New(%d): engine %v, model %v", c, errE, errM)
		}
	}
	parts := []int32{math.MinInt32, -2, -1, 0, 1, 2, 3, 4, 63, 64, 65, math.MaxInt32}
	offs := []int64{math.MinInt64, math.MinInt64 + 1, -2, -1, 0, 1, 2, 3, math.MaxInt32, math.MaxInt32 + 1, math.MaxInt64 - 1, math.MaxInt64}
	counts := []int32{math.MinInt32, -1, 0, 1, 3, 63, 64, 65, 128, math.MaxInt32}
	h := hNewPair(t, 2)
	for _, n := range counts {
		h.do(hC("T", n)) // only 1 wins; later ones are false or invalid
		h.do(hC(fmt.Sprint("T", n+1<<20), n))
		h.same(nil, nil)
	}
	for _, n := range counts {
		h.do(hC("T", n)) // duplicate: invalid count is an error even so
	}
	h.do(hC("W", 4))
	h.do(hJ("W", "G", "a"))
	h.do(hJ("W", "H", "b"))
	extraG := []string{"G", "H", "X"}
	for _, p := range parts {
		h.do(hPub("W", p, "v"))
		h.do(hPub("W", p, "w"))
		h.do(hPub("W", p, "full?"))
		h.same([]string{"W"}, extraG)
	}
	for _, n := range []int32{math.MinInt32, -1, 0, 1, 2, 3, 64, 65, math.MaxInt32} {
		h.do(hQ("W", "G", "a", n))
		h.do(hQ("W", "G", "ghost", n))
		h.do(hQ("W", "X", "a", n))
		h.same([]string{"W"}, extraG)
	}
	for _, p := range parts {
		for _, off := range offs {
			for _, k := range []int{hAck, hRetry} {
				h.do(hOp{kind: k, topic: "W", group: "G", member: "a", part: p, off: off})
				h.do(hOp{kind: k, topic: "W", group: "X", member: "a", part: p, off: off})
				h.do(hOp{kind: k, topic: "W", group: "G", member: "b", part: p, off: off})
				h.do(hOp{kind: k, topic: "W", group: "G", member: "é", part: p, off: off})
			}
		}
		h.same([]string{"W"}, extraG)
		h.do(hQ("W", "G", "a", 64))
	}
}

// TestPayloadsRoundTrip publishes payloads no text protocol would
// survive (1 MiB, empty, NUL, every byte, invalid UTF-8) and requires every
// group to receive them byte-exact, each once, in offset order.
func TestPayloadsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	payloads := []string{
		"", "\x00", string(all), string(big), "\xff\xfe\xfd", "\xc0\x80", "a\xed\xa0\x80b",
		strings.Repeat("\x00", 4096), "\u2028\u2029", "\r\n", string(big[:65536]) + "\x00", "",
	}
	b, err := hNew(int32(len(payloads)))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Create("P", 2); !ok || err != nil {
		t.Fatalf("Create: %v %v", ok, err)
	}
	for _, g := range []string{"g1", "g2"} {
		if _, err := b.Join("P", g, "m"); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range payloads {
		for p := int32(0); p < 2; p++ {
			off, err := b.Publish("P", p, s)
			if err != nil || off != int64(i) {
				t.Fatalf("Publish #%d to p%d: %d %v", i, p, off, err)
			}
		}
	}
	if off, err := b.Publish("P", 0, "over"); off != -1 || err != nil {
		t.Fatalf("publish to full partition: %d %v, want -1", off, err)
	}
	for _, g := range []string{"g1", "g2"} {
		for i := range payloads {
			recs, err := b.Poll("P", g, "m", 64)
			if err != nil || len(recs) != 2 {
				t.Fatalf("%s poll #%d: %d records, %v", g, i, len(recs), err)
			}
			for j, r := range recs {
				if r.Topic != "P" || r.Partition != int32(j) || r.Offset != int64(i) {
					t.Fatalf("%s poll #%d: record %d is %s/%d/%d", g, i, j, r.Topic, r.Partition, r.Offset)
				}
				if r.Payload != payloads[i] {
					t.Fatalf("%s: payload %d not byte-exact: len %d, want %d", g, i, len(r.Payload), len(payloads[i]))
				}
				if ok, err := b.Ack("P", g, "m", r.Partition, r.Offset); !ok || err != nil {
					t.Fatalf("ack %v: %v %v", r, ok, err)
				}
			}
		}
		if recs, err := b.Poll("P", g, "m", 64); len(recs) != 0 || err != nil {
			t.Fatalf("%s: after drain poll gave %d records, %v", g, len(recs), err)
		}
	}
	for p := int32(0); p < 2; p++ {
		s, _ := b.LogStartOffset("P", p)
		e, _ := b.LogEndOffset("P", p)
		if s != int64(len(payloads)) || e != s {
			t.Fatalf("p%d: log [%d,%d) after both groups acked everything, want empty at %d", p, s, e, len(payloads))
		}
	}
}

// TestSettleEmptyMemberOnMemberlessGroup: Ack and Retry with the
// empty (invalid, rule 3) member id on a group that has no members must
// return ErrInvalidArgument (rule 4: validation before state). The owner
// of every partition of a memberless group is "", so an engine that
// compared the id with the owner before validating it would return
// (false, nil).
func TestSettleEmptyMemberOnMemberlessGroup(t *testing.T) {
	h := hNewPair(t, 4)
	h.do(hC("t", 2))
	h.do(hPub("t", 0, "a"))
	h.do(hJ("t", "g", "m"))
	h.do(hQ("t", "g", "m", 1))
	h.do(hL("t", "g", "m")) // g is now memberless
	for _, p := range []int32{0, 1} {
		for _, off := range []int64{0, 1, math.MaxInt64} {
			h.do(hA("t", "g", "", p, off)) // engine: (false, nil); want ErrInvalidArgument
			h.do(hR("t", "g", "", p, off))
		}
	}
	h.same(nil, []string{"g"})
}

// TestMaxMessageBytesBoundary publishes messages whose sizes (key, header
// keys, header values and payload, in bytes: SPEC rule 15) are counted by
// hand here, on brokers whose WithMaxMessageBytes is one byte below the
// size, the size and one above it: engine and model both refuse the first
// with ErrInvalidArgument, leaving the log as it was, and accept the other
// two; a record polled back carries the message byte for byte, its headers
// a copy (nil for nil or empty headers) that neither the publisher's slice
// nor a change to a polled record reaches.
func TestMaxMessageBytesBoundary(t *testing.T) {
	long := strings.Repeat("v", 4096)
	many := make([]engine.Header, 1000)
	for i := range many {
		many[i] = engine.Header{Key: "k", Value: "vv"}
	}
	cases := []struct {
		name string
		msg  engine.Message
		size int
	}{
		{"payload only", engine.Message{Payload: "abc"}, 3},
		{"key only", engine.Message{Key: "kk"}, 2},
		{"nil headers", engine.Message{Key: "k", Headers: nil, Payload: "p"}, 2},
		{"empty headers", engine.Message{Key: "k", Headers: []engine.Header{}, Payload: "p"}, 2},
		{"empty header", engine.Message{Headers: []engine.Header{{}}, Payload: "p"}, 1},
		{"header key and value", engine.Message{Key: "k", Headers: []engine.Header{{Key: "hk", Value: "hvv"}}, Payload: "pp"}, 8},
		{"multibyte and NUL", engine.Message{Key: "é", Headers: []engine.Header{{Key: "\x00", Value: "\xff"}}, Payload: "日"}, 7},
		{"a long header value", engine.Message{Headers: []engine.Header{{Key: "h", Value: long}}}, 4097},
		{"a thousand headers", engine.Message{Headers: many, Payload: "x"}, 3001},
	}
	for _, tc := range cases {
		for _, limit := range []int{tc.size - 1, tc.size, tc.size + 1} {
			if limit < 1 {
				continue
			}
			t.Run(fmt.Sprintf("%s/limit %d", tc.name, limit), func(t *testing.T) {
				e, err := engine.New(4, engine.WithMaxMessageBytes(limit))
				if err != nil {
					t.Fatal(err)
				}
				m, err := model.New(4, model.WithMaxMessageBytes(limit))
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range []interface {
					Create(string, int32) (bool, error)
					Join(string, string, string) ([]int32, error)
				}{e, m} {
					if _, err := b.Create("t", 1); err != nil {
						t.Fatal(err)
					}
					if _, err := b.Join("t", "g", "m"); err != nil {
						t.Fatal(err)
					}
				}
				headers := slices.Clone(tc.msg.Headers)
				msg := tc.msg
				msg.Headers = headers
				eoff, eerr := e.PublishMessage("t", 0, msg)
				mh := make([]model.Header, len(headers))
				for i, h := range headers {
					mh[i] = model.Header(h)
				}
				if headers == nil {
					mh = nil
				}
				moff, merr := m.PublishMessage("t", 0, model.Message{Key: msg.Key, Headers: mh, Payload: msg.Payload})
				want := tc.size <= limit
				if (eerr == nil) != want || (merr == nil) != want || eoff != moff {
					t.Fatalf("size %d, limit %d: engine (%d, %v), model (%d, %v); want accepted %v", tc.size, limit, eoff, eerr, moff, merr, want)
				}
				if !want {
					if !errors.Is(eerr, engine.ErrInvalidArgument) || !errors.Is(merr, model.ErrInvalidArgument) {
						t.Fatalf("engine %v, model %v: want ErrInvalidArgument", eerr, merr)
					}
					if end, _ := e.LogEndOffset("t", 0); end != 0 {
						t.Fatalf("refused publish: log end %d, want 0", end)
					}
					return
				}
				for i := range headers {
					headers[i].Value += "!" // the publisher's slice, changed after the publish
				}
				recs, err := e.Poll("t", "g", "m", 1)
				if err != nil || len(recs) != 1 {
					t.Fatalf("Poll: %v, %v", recs, err)
				}
				r := recs[0]
				if r.Key != tc.msg.Key || r.Payload != tc.msg.Payload || !slices.Equal(r.Headers, tc.msg.Headers) {
					t.Fatalf("record %q %q %q, want %q %q %q", r.Key, r.Payload, r.Headers, tc.msg.Key, tc.msg.Payload, tc.msg.Headers)
				}
				if len(tc.msg.Headers) == 0 && r.Headers != nil {
					t.Fatalf("headers %#v, want nil", r.Headers)
				}
				if len(r.Headers) > 0 {
					r.Headers[0].Key = "changed"
				}
				if ok, err := e.Retry("t", "g", "m", 0, 0); !ok || err != nil {
					t.Fatalf("Retry: %v, %v", ok, err)
				}
				again, err := e.Poll("t", "g", "m", 1)
				if err != nil || len(again) != 1 || !slices.Equal(again[0].Headers, tc.msg.Headers) {
					t.Fatalf("redelivery %v, %v: headers want %q", again, err, tc.msg.Headers)
				}
			})
		}
	}
}
