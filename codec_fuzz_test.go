package tributary_test

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/f91dcac0/tributary"
)

// Fuzz targets of the built-in codecs: Decode of any payload never panics,
// and Decode(Encode(v)) is v for every value Encode accepts (FuzzJSONDecode
// and FuzzIntegerDecode, in codec_test.go, check the other direction:
// what Decode accepts encodes back). Their seed corpora (the f.Add calls
// and testdata/fuzz/<target>/, which keeps every input that once failed)
// run in every go test; make test also fuzzes each briefly.

// fuzzOrder is a JSON payload with a field of each kind a fuzzed value
// reaches: strings as fields, map keys, map values, slice items, through
// a pointer and an interface.
type fuzzOrder struct {
	S string            `json:"s"`
	N int64             `json:"n"`
	F float64           `json:"f"`
	B bool              `json:"b"`
	M map[string]string `json:"m"`
	L []string          `json:"l"`
	P *string           `json:"p"`
	A any               `json:"a"`
}

func FuzzJSONRoundTrip(f *testing.F) {
	f.Add("tea", int64(7), 1.5, true, "k")
	f.Add("", int64(0), 0.0, false, "")
	f.Add("\ufffd", int64(math.MinInt64), math.MaxFloat64, true, `\ufffd`)
	f.Add(`\\ufffd "quoted" <&>`, int64(math.MaxInt64), math.SmallestNonzeroFloat64, false, "\u2028")
	f.Add("x", int64(-1), math.Copysign(0, -1), true, "k")
	c := tributary.JSON[fuzzOrder]()
	ca := tributary.JSON[any]()
	f.Fuzz(func(t *testing.T, s string, n int64, fl float64, b bool, k string) {
		v := fuzzOrder{S: s, N: n, F: fl, B: b, M: map[string]string{k: s}, L: []string{s, k}, P: &s, A: s}
		p, err := c.Encode(v)
		valid := utf8.ValidString(s) && utf8.ValidString(k)
		finite := !math.IsNaN(fl) && !math.IsInf(fl, 0)
		if err != nil {
			if valid && finite {
				t.Fatalf("Encode(%#v): %v", v, err)
			}
			if _, err := c.Decode(p); err == nil {
				t.Fatalf("Encode(%#v) failed but returned a payload %q that decodes", v, p)
			}
			return
		}
		if !valid || !finite {
			t.Fatalf("Encode(%#v) = %q, want an error: the value cannot come back", v, p)
		}
		w, err := c.Decode(p)
		if err != nil {
			t.Fatalf("Decode(Encode(%#v)) = Decode(%q): %v", v, p, err)
		}
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("Decode(Encode(%#v)) = %#v (payload %q)", v, w, p)
		}
		if p, err := ca.Encode(s); err != nil {
			t.Fatalf("JSON[any] Encode(%q): %v", s, err)
		} else if w, err := ca.Decode(p); err != nil || w != s {
			t.Fatalf("JSON[any] Decode(Encode(%q)) = %#v, %v", s, w, err)
		}
	})
}

func FuzzIntegerRoundTrip(f *testing.F) {
	for _, n := range []int64{0, 1, -1, 127, -128, 255, 65535, math.MaxInt64, math.MinInt64} {
		f.Add(n)
	}
	c64, c8, cu16, cu64 := tributary.Integer[int64](), tributary.Integer[int8](), tributary.Integer[uint16](), tributary.Integer[uint64]()
	f.Fuzz(func(t *testing.T, n int64) {
		roundTrip(t, c64, n)
		roundTrip(t, c8, int8(n))
		roundTrip(t, cu16, uint16(n))
		roundTrip(t, cu64, uint64(n))
	})
}

func roundTrip[T comparable](t *testing.T, c tributary.Codec[T], v T) {
	t.Helper()
	p, err := c.Encode(v)
	if err != nil {
		t.Fatalf("%s Encode(%v): %v", c.Name(), v, err)
	}
	if w, err := c.Decode(p); err != nil || w != v {
		t.Fatalf("%s Decode(Encode(%v)) = Decode(%q) = %v, %v", c.Name(), v, p, w, err)
	}
}

func FuzzStringCodec(f *testing.F) {
	for _, s := range []string{"", "x", "a\xffb", "\x00", "\ufffd", "\xed\xa0\x80"} {
		f.Add(s)
	}
	c := tributary.String()
	f.Fuzz(func(t *testing.T, s string) {
		v, err := c.Decode(s) // s as a payload
		if err != nil || v != s {
			t.Fatalf("Decode(%q) = %q, %v; want it unchanged", s, v, err)
		}
		roundTrip(t, c, s) // s as a value
	})
}

func FuzzBytesCodec(f *testing.F) {
	for _, s := range []string{"", "x", "a\xffb", "\x00\x01"} {
		f.Add([]byte(s))
	}
	c := tributary.Bytes()
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := c.Decode(string(b)) // b as a payload
		if err != nil || !bytes.Equal(v, b) {
			t.Fatalf("Decode(%q) = %q, %v; want the same bytes", b, v, err)
		}
		p, err := c.Encode(b) // b as a value
		if err != nil || p != string(b) {
			t.Fatalf("Encode(%q) = %q, %v", b, p, err)
		}
		w, err := c.Decode(p)
		if err != nil || !bytes.Equal(w, b) {
			t.Fatalf("Decode(Encode(%q)) = %q, %v", b, w, err)
		}
		if len(w) > 0 { // each Decode returns a fresh slice, the caller's
			w2, _ := c.Decode(p)
			w[0]++
			if !bytes.Equal(w2, b) {
				t.Fatalf("Decode(%q) returned slices that share their bytes", p)
			}
		}
	})
}
