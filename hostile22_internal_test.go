package tributary

import (
	"encoding/json"
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
