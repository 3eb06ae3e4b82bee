package tributary

// Memory the library shares or keeps: JSON decodes in place only for types
// without a user unmarshaler, and the ID arena's long IDs and retention.

import (
	"encoding/json"
	"math"
	"net"
	"reflect"
	"runtime"
	"testing"
	"time"
)

type textKey string

func (k *textKey) UnmarshalText(b []byte) error { *k = textKey(b); return nil }

type ownJSON struct{}

func (ownJSON) UnmarshalJSON([]byte) error { return nil }

type recursive struct {
	Next  *recursive
	Items []recursive
	N     int
}

type recursiveWithHook struct {
	Next *recursiveWithHook
	Hook *ownJSON
}

// TestJSONDecodeInPlaceOnlyWithoutUserUnmarshalers: the JSON codec reads
// a payload in place (no copy) exactly when json.Unmarshal into a T runs
// no user UnmarshalJSON or UnmarshalText; a T that reaches one, through
// any field, element, key or pointer, decodes a copy.
func TestJSONDecodeInPlaceOnlyWithoutUserUnmarshalers(t *testing.T) {
	inPlace := func(c any) bool { return reflect.ValueOf(c).FieldByName("inPlace").Bool() }
	cases := []struct {
		codec any
		want  bool
	}{
		{JSON[struct {
			A int
			B string
			C []byte
			D map[string]any
		}](), true},
		{JSON[any](), true},
		{JSON[map[string]int](), true},
		{JSON[struct{ T time.Time }](), true},
		{JSON[struct{ R json.RawMessage }](), true},
		{JSON[recursive](), true},
		{JSON[struct{ X any }](), true},
		{JSON[ownJSON](), false},
		{JSON[*ownJSON](), false},
		{JSON[[]ownJSON](), false},
		{JSON[[2]*ownJSON](), false},
		{JSON[map[textKey]int](), false},
		{JSON[map[string]ownJSON](), false},
		{JSON[struct{ A struct{ B *ownJSON } }](), false},
		{JSON[struct{ IP net.IP }](), false},
		{JSON[recursiveWithHook](), false},
	}
	for _, tc := range cases {
		if got := inPlace(tc.codec); got != tc.want {
			t.Errorf("%T: inPlace %v, want %v", tc.codec, got, tc.want)
		}
	}
}

// TestJSONDecodeInPlaceAllocates: a T with no user unmarshaler decodes
// without copying the payload: a 4 KiB payload of one string field costs
// the string and little more, not a second 4 KiB.
func TestJSONDecodeInPlaceAllocates(t *testing.T) {
	type T struct{ S string }
	c := JSON[T]()
	big := make([]byte, 4096)
	for i := range big {
		big[i] = 'a'
	}
	p, err := c.Encode(T{S: string(big)})
	if err != nil {
		t.Fatal(err)
	}
	var sink T
	var ms1, ms2 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	const n = 200
	for range n {
		sink, _ = c.Decode(p)
	}
	runtime.ReadMemStats(&ms2)
	if sink.S != string(big) {
		t.Fatal("decoded wrong value")
	}
	if per := (ms2.TotalAlloc - ms1.TotalAlloc) / n; per > 4096+4096/2 {
		t.Fatalf("Decode of a %d-byte payload allocates %d bytes: the payload is copied", len(p), per)
	}
}

// TestIDArenaLongIDsAcrossManyBlocks: a million IDs of the longest form
// (partition MaxInt32, offsets up to MaxInt64: 31 bytes, 132 to a block
// with 4 bytes left over), all kept, each still messageID's after the
// last was built; and IDs built concurrently at the same lengths.
func TestIDArenaLongIDsAcrossManyBlocks(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	var a idArena
	ids := make([]string, n)
	base := int64(math.MaxInt64) - int64(n) + 1
	for i := range ids {
		ids[i] = a.id(math.MaxInt32, base+int64(i))
	}
	for i, s := range ids {
		if want := messageID(math.MaxInt32, base+int64(i)); s != want {
			t.Fatalf("id %d = %q, want %q", i, s, want)
		}
	}
}

// TestIDArenaRetention: an ID kept alone keeps its whole block alive, and
// no more: a caller that keeps one ID in every few hundred (the IDs of the
// messages that failed, say) holds at most idBlockSize (1 KiB) per kept ID,
// as Message.ID documents, where a string of its own would hold 16 bytes.
func TestIDArenaRetention(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory distorts heap figures")
	}
	var a idArena
	const keep, every = 2000, 512
	kept := make([]string, 0, keep)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep * every {
		id := a.id(1, int64(100_000+i))
		if i%every == 0 {
			kept = append(kept, id)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The documented bound (Message.ID): a kept ID holds at most its
	// block; a 4 KiB block would hold about 4,000 bytes per ID here.
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / keep
	const bound = 1024 + 256 // the documented 1 KiB block, and slack
	if per > bound {
		t.Fatalf("each kept ID holds %d bytes of heap (want ≤ %d, its block)", per, bound)
	}
	runtime.KeepAlive(kept)
}
