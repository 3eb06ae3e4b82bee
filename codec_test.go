package tributary_test

// The built-in codecs: their names, JSON's round trips, strict decoding and
// errors, String, Bytes and Integer, their allocations and concurrent use.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/f91dcac0/tributary"
)

type order struct {
	ID    int      `json:"id"`
	Item  string   `json:"item"`
	Qty   int      `json:"qty,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

type priority int16

func TestCodecName(t *testing.T) {
	tests := []struct {
		name  string
		got   string
		wname string
	}{
		{"JSON any", tributary.JSON[any]().Name(), "JSON"},
		{"JSON RawMessage", tributary.JSON[json.RawMessage]().Name(), "JSON"},
		{"JSON struct", tributary.JSON[order]().Name(), "JSON:tributary_test.order"},
		{"JSON pointer", tributary.JSON[*order]().Name(), "JSON:*tributary_test.order"},
		{"JSON map", tributary.JSON[map[string]any]().Name(), "JSON:map[string]interface {}"},
		{"JSON slice", tributary.JSON[[]int]().Name(), "JSON:[]int"},
		{"String", tributary.String().Name(), "String"},
		{"Bytes", tributary.Bytes().Name(), "Bytes"},
		{"Integer int64", tributary.Integer[int64]().Name(), "Integer"},
		{"Integer int", tributary.Integer[int]().Name(), "Integer:int"},
		{"Integer int32", tributary.Integer[int32]().Name(), "Integer:int32"},
		{"Integer uint8", tributary.Integer[uint8]().Name(), "Integer:uint8"},
		{"Integer uint64", tributary.Integer[uint64]().Name(), "Integer:uint64"},
		{"Integer named", tributary.Integer[priority]().Name(), "Integer:tributary_test.priority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.wname {
				t.Errorf("Name() = %q, want %q", tt.got, tt.wname)
			}
		})
	}
}

func TestJSONRoundTrip(t *testing.T) {
	t.Run("struct", func(t *testing.T) {
		testRoundTrip(t, tributary.JSON[order](), order{ID: 7, Item: "tea", Qty: 2, Notes: []string{"hot", "ü"}}, `{"id":7,"item":"tea","qty":2,"notes":["hot","ü"]}`)
	})
	t.Run("pointer", func(t *testing.T) {
		testRoundTrip(t, tributary.JSON[*order](), &order{ID: 1}, `{"id":1,"item":""}`)
	})
	t.Run("nil pointer", func(t *testing.T) {
		testRoundTrip(t, tributary.JSON[*order](), nil, `null`)
	})
	t.Run("map", func(t *testing.T) {
		testRoundTrip(t, tributary.JSON[map[string]int](), map[string]int{"b": 2, "a": 1}, `{"a":1,"b":2}`)
	})
	t.Run("any", func(t *testing.T) {
		testRoundTrip[any](t, tributary.JSON[any](), []any{1.5, "x", true, nil, map[string]any{"k": []any{}}}, `[1.5,"x",true,null,{"k":[]}]`)
	})
	t.Run("string", func(t *testing.T) {
		testRoundTrip(t, tributary.JSON[string](), "a\"b<", `"a\"b\u003c"`)
	})
}

// testRoundTrip checks that c encodes v as wpayload and decodes wpayload
// back to v.
func testRoundTrip[T any](t *testing.T, c tributary.Codec[T], v T, wpayload string) {
	t.Helper()
	p, err := c.Encode(v)
	if err != nil {
		t.Fatalf("Encode(%#v): %v", v, err)
	}
	if p != wpayload {
		t.Errorf("Encode(%#v) = %q, want %q", v, p, wpayload)
	}
	got, err := c.Decode(p)
	if err != nil {
		t.Fatalf("Decode(%q): %v", p, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Errorf("Decode(%q) = %#v, want %#v", p, got, v)
	}
}

func TestJSONDecode(t *testing.T) {
	c := tributary.JSON[order]()
	tests := []struct {
		name    string
		payload string
		w       order
		werr    string // substring of the error after the prefix; "" for success
	}{
		{"object", `{"id":3,"item":"x"}`, order{ID: 3, Item: "x"}, ""},
		{"white space around", " \n\t{\"id\":3} \r\n", order{ID: 3}, ""},
		{"unknown field ignored", `{"id":3,"other":1}`, order{ID: 3}, ""},
		{"null", `null`, order{}, ""},
		{"empty", ``, order{}, "empty payload"},
		{"white space only", `   `, order{}, "unexpected end of JSON input"},
		{"trailing value", `{"id":1} {"id":2}`, order{}, "invalid character '{' after top-level value"},
		{"trailing garbage", `{"id":1}x`, order{}, "invalid character 'x' after top-level value"},
		{"two numbers", `1 2`, order{}, "after top-level value"},
		{"truncated", `{"id":1`, order{}, "unexpected end of JSON input"},
		{"not JSON", `hello`, order{}, "invalid character 'h'"},
		{"wrong type, partly filled", `{"id":5,"item":6}`, order{}, "cannot unmarshal number"},
		{"array for struct", `[1]`, order{}, "cannot unmarshal array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Decode(tt.payload)
			if tt.werr == "" {
				if err != nil {
					t.Fatalf("Decode(%q): %v", tt.payload, err)
				}
			} else {
				if err == nil {
					t.Fatalf("Decode(%q) = %#v, nil; want error containing %q", tt.payload, got, tt.werr)
				}
				const wprefix = "JSON:tributary_test.order: decode payload: "
				if msg := err.Error(); !strings.HasPrefix(msg, wprefix) || !strings.Contains(msg, tt.werr) {
					t.Errorf("Decode(%q) error %q, want prefix %q and %q", tt.payload, msg, wprefix, tt.werr)
				}
			}
			if !reflect.DeepEqual(got, tt.w) {
				t.Errorf("Decode(%q) = %#v, want %#v", tt.payload, got, tt.w)
			}
		})
	}
}

func TestJSONDecodeErrorWraps(t *testing.T) {
	_, err := tributary.JSON[order]().Decode(`{"id":"x"}`)
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		t.Errorf("Decode error %v (%T) does not wrap a *json.UnmarshalTypeError", err, err)
	}
	_, err = tributary.JSON[order]().Decode(`{`)
	var syntaxErr *json.SyntaxError
	if !errors.As(err, &syntaxErr) {
		t.Errorf("Decode error %v (%T) does not wrap a *json.SyntaxError", err, err)
	}
}

func TestJSONRawMessage(t *testing.T) {
	c := tributary.JSON[json.RawMessage]()
	tests := []struct {
		name    string
		payload string
		w       string
		werr    string
	}{
		{"compact object", `{"a":1}`, `{"a":1}`, ""},
		{"spaced object", " { \"a\" : [ 1 , 2 ] }\n", `{"a":[1,2]}`, ""},
		{"scalar", `42`, `42`, ""},
		{"string keeps its spaces", `" a b "`, `" a b "`, ""},
		{"null", `null`, `null`, ""},
		{"empty", ``, "", "empty payload"},
		{"white space only", "  ", "", "unexpected end of JSON input"},
		{"trailing value", `{} {}`, "", "after top-level value"},
		{"trailing garbage", `1x`, "", "after top-level value"},
		{"invalid", `{"a":}`, "", "invalid character '}'"},
		{"bare word", `nul`, "", "JSON:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Decode(tt.payload)
			if tt.werr != "" {
				if err == nil {
					t.Fatalf("Decode(%q) = %q, nil; want error containing %q", tt.payload, got, tt.werr)
				}
				if msg := err.Error(); !strings.HasPrefix(msg, "JSON: decode payload: ") || !strings.Contains(msg, tt.werr) {
					t.Errorf("Decode(%q) error %q, want prefix %q and %q", tt.payload, msg, "JSON: decode payload: ", tt.werr)
				}
				if got != nil {
					t.Errorf("Decode(%q) = %q on error, want nil", tt.payload, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%q): %v", tt.payload, err)
			}
			if string(got) != tt.w {
				t.Errorf("Decode(%q) = %q, want %q", tt.payload, got, tt.w)
			}
			// The result is the caller's: changing it changes nothing else.
			again, _ := c.Decode(tt.payload)
			if len(got) > 0 {
				got[0] = '#'
				if string(again) != tt.w {
					t.Errorf("second Decode(%q) = %q after changing the first's result, want %q", tt.payload, again, tt.w)
				}
			}
		})
	}
	t.Run("encode", func(t *testing.T) {
		p, err := c.Encode(json.RawMessage(` { "a" : 1 } `))
		if err != nil || p != `{"a":1}` {
			t.Errorf("Encode = %q, %v; want %q, nil", p, err, `{"a":1}`)
		}
		if _, err := c.Encode(json.RawMessage(`{`)); err == nil {
			t.Error("Encode of invalid RawMessage succeeded, want error")
		}
	})
}

func TestJSONEncodeError(t *testing.T) {
	tests := []struct {
		name    string
		encode  func() (string, error)
		wprefix string
	}{
		{"channel", func() (string, error) { return tributary.JSON[chan int]().Encode(make(chan int)) }, "JSON:chan int: encode value: "},
		{"func in any", func() (string, error) { return tributary.JSON[any]().Encode(func() {}) }, "JSON: encode value: "},
		{"NaN", func() (string, error) { return tributary.JSON[float64]().Encode(math.NaN()) }, "JSON:float64: encode value: "},
		{"+Inf in map", func() (string, error) {
			return tributary.JSON[map[string]float64]().Encode(map[string]float64{"x": math.Inf(1)})
		}, "JSON:map[string]float64: encode value: "},
		{"complex", func() (string, error) { return tributary.JSON[complex128]().Encode(1i) }, "JSON:complex128: encode value: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.encode()
			if err == nil {
				t.Fatalf("Encode = %q, nil; want error", p)
			}
			if p != "" {
				t.Errorf("Encode payload %q on error, want empty", p)
			}
			if !strings.HasPrefix(err.Error(), tt.wprefix) {
				t.Errorf("Encode error %q, want prefix %q", err, tt.wprefix)
			}
		})
	}
}

func TestStringCodec(t *testing.T) {
	c := tributary.String()
	for _, s := range []string{"", "hello", "\xff\xfe not UTF-8", "nul\x00byte", strings.Repeat("x", 1<<16)} {
		p, err := c.Encode(s)
		if err != nil || p != s {
			t.Errorf("Encode(%.20q) = %.20q, %v; want it unchanged, nil", s, p, err)
		}
		v, err := c.Decode(s)
		if err != nil || v != s {
			t.Errorf("Decode(%.20q) = %.20q, %v; want it unchanged, nil", s, v, err)
		}
	}
}

func TestStringCodecAllocs(t *testing.T) {
	c := tributary.String()
	s := strings.Repeat("payload ", 16)
	var sink string
	if n := testing.AllocsPerRun(1000, func() { sink, _ = c.Encode(s) }); n != 0 {
		t.Errorf("String().Encode allocates %v times per call, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { sink, _ = c.Decode(s) }); n != 0 {
		t.Errorf("String().Decode allocates %v times per call, want 0", n)
	}
	_ = sink
}

func TestBytesCodec(t *testing.T) {
	c := tributary.Bytes()
	tests := []struct {
		name string
		v    []byte
		w    string
	}{
		{"nil", nil, ""},
		{"empty", []byte{}, ""},
		{"text", []byte("abc"), "abc"},
		{"binary", []byte{0, 0xff, 0x80, '\n'}, "\x00\xff\x80\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := c.Encode(tt.v)
			if err != nil || p != tt.w {
				t.Fatalf("Encode(%q) = %q, %v; want %q, nil", tt.v, p, err, tt.w)
			}
			got, err := c.Decode(p)
			if err != nil || string(got) != tt.w {
				t.Fatalf("Decode(%q) = %q, %v; want %q, nil", p, got, err, tt.w)
			}
		})
	}
	t.Run("encode copies", func(t *testing.T) {
		v := []byte("abc")
		p, _ := c.Encode(v)
		v[0] = 'X'
		if p != "abc" {
			t.Errorf("payload = %q after changing the encoded slice, want %q", p, "abc")
		}
	})
	t.Run("decode returns a fresh slice", func(t *testing.T) {
		a, _ := c.Decode("abc")
		b, _ := c.Decode("abc")
		a[0] = 'X'
		if string(b) != "abc" {
			t.Errorf("second Decode = %q after changing the first's result, want %q", b, "abc")
		}
	})
}

func TestIntegerEncode(t *testing.T) {
	tests := []struct {
		name   string
		encode func() (string, error)
		w      string
	}{
		{"int64 zero", func() (string, error) { return tributary.Integer[int64]().Encode(0) }, "0"},
		{"int64 min", func() (string, error) { return tributary.Integer[int64]().Encode(math.MinInt64) }, "-9223372036854775808"},
		{"int64 max", func() (string, error) { return tributary.Integer[int64]().Encode(math.MaxInt64) }, "9223372036854775807"},
		{"int8 min", func() (string, error) { return tributary.Integer[int8]().Encode(-128) }, "-128"},
		{"int -7", func() (string, error) { return tributary.Integer[int]().Encode(-7) }, "-7"},
		{"uint8 max", func() (string, error) { return tributary.Integer[uint8]().Encode(255) }, "255"},
		{"uint64 max", func() (string, error) { return tributary.Integer[uint64]().Encode(math.MaxUint64) }, "18446744073709551615"},
		{"uint32 max", func() (string, error) { return tributary.Integer[uint32]().Encode(math.MaxUint32) }, "4294967295"},
		{"named", func() (string, error) { return tributary.Integer[priority]().Encode(-300) }, "-300"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.encode()
			if err != nil || p != tt.w {
				t.Errorf("Encode = %q, %v; want %q, nil", p, err, tt.w)
			}
		})
	}
}

func TestIntegerDecode(t *testing.T) {
	type result struct {
		v   string // the decoded value, printed with %d
		err string // the whole error message; "" for success
	}
	decode := func(d func(string) (string, error)) func(string) result {
		return func(p string) result {
			v, err := d(p)
			if err != nil {
				return result{v: v, err: err.Error()}
			}
			return result{v: v}
		}
	}
	i64 := decode(func(p string) (string, error) {
		v, err := tributary.Integer[int64]().Decode(p)
		return fmt.Sprint(v), err
	})
	i8 := decode(func(p string) (string, error) {
		v, err := tributary.Integer[int8]().Decode(p)
		return fmt.Sprint(v), err
	})
	u8 := decode(func(p string) (string, error) {
		v, err := tributary.Integer[uint8]().Decode(p)
		return fmt.Sprint(v), err
	})
	u64 := decode(func(p string) (string, error) {
		v, err := tributary.Integer[uint64]().Decode(p)
		return fmt.Sprint(v), err
	})
	pri := decode(func(p string) (string, error) {
		v, err := tributary.Integer[priority]().Decode(p)
		return fmt.Sprint(v), err
	})

	tests := []struct {
		name    string
		decode  func(string) result
		payload string
		w       result
	}{
		{"int64 zero", i64, "0", result{v: "0"}},
		{"int64 positive", i64, "42", result{v: "42"}},
		{"int64 negative", i64, "-42", result{v: "-42"}},
		{"int64 min", i64, "-9223372036854775808", result{v: "-9223372036854775808"}},
		{"int64 max", i64, "9223372036854775807", result{v: "9223372036854775807"}},
		{"int64 max+1", i64, "9223372036854775808", result{"0", `Integer: decode payload "9223372036854775808": out of range [-9223372036854775808, 9223372036854775807]`}},
		{"int64 min-1", i64, "-9223372036854775809", result{"0", `Integer: decode payload "-9223372036854775809": out of range [-9223372036854775808, 9223372036854775807]`}},
		{"empty", i64, "", result{"0", `Integer: decode payload "": not a decimal integer: no digits`}},
		{"minus only", i64, "-", result{"0", `Integer: decode payload "-": not a decimal integer: no digits`}},
		{"plus", i64, "+1", result{"0", `Integer: decode payload "+1": not a decimal integer: byte "+" at offset 0`}},
		{"leading space", i64, " 1", result{"0", `Integer: decode payload " 1": not a decimal integer: byte " " at offset 0`}},
		{"trailing space", i64, "1 ", result{"0", `Integer: decode payload "1 ": not a decimal integer: byte " " at offset 1`}},
		{"trailing newline", i64, "12\n", result{"0", `Integer: decode payload "12\n": not a decimal integer: byte "\n" at offset 2`}},
		{"leading zero", i64, "007", result{"0", `Integer: decode payload "007": not canonical: leading zero`}},
		{"negative leading zero", i64, "-07", result{"0", `Integer: decode payload "-07": not canonical: leading zero`}},
		{"minus zero", i64, "-0", result{"0", `Integer: decode payload "-0": not canonical: "-0"`}},
		{"double zero", i64, "00", result{"0", `Integer: decode payload "00": not canonical: leading zero`}},
		{"underscore", i64, "1_000", result{"0", `Integer: decode payload "1_000": not a decimal integer: byte "_" at offset 1`}},
		{"hex", i64, "0x10", result{"0", `Integer: decode payload "0x10": not a decimal integer: byte "x" at offset 1`}},
		{"float", i64, "1.5", result{"0", `Integer: decode payload "1.5": not a decimal integer: byte "." at offset 1`}},
		{"exponent", i64, "1e3", result{"0", `Integer: decode payload "1e3": not a decimal integer: byte "e" at offset 1`}},
		{"double minus", i64, "--1", result{"0", `Integer: decode payload "--1": not a decimal integer: byte "-" at offset 1`}},
		{"non-ASCII digit", i64, "١", result{"0", `Integer: decode payload "١": not a decimal integer: byte "\xd9" at offset 0`}},
		{"long garbage is cut", i64, strings.Repeat("9", 70) + "x", result{"0", `Integer: decode payload "` + strings.Repeat("9", 64) + `"...: not a decimal integer: byte "x" at offset 70`}},
		{"int8 min", i8, "-128", result{v: "-128"}},
		{"int8 max", i8, "127", result{v: "127"}},
		{"int8 over", i8, "300", result{"0", `Integer:int8: decode payload "300": out of range [-128, 127]`}},
		{"int8 under", i8, "-129", result{"0", `Integer:int8: decode payload "-129": out of range [-128, 127]`}},
		{"uint8 max", u8, "255", result{v: "255"}},
		{"uint8 over", u8, "256", result{"0", `Integer:uint8: decode payload "256": out of range [0, 255]`}},
		{"uint8 negative", u8, "-1", result{"0", `Integer:uint8: decode payload "-1": out of range [0, 255]`}},
		{"uint8 minus zero", u8, "-0", result{"0", `Integer:uint8: decode payload "-0": not canonical: "-0"`}},
		{"uint64 max", u64, "18446744073709551615", result{v: "18446744073709551615"}},
		{"uint64 over", u64, "18446744073709551616", result{"0", `Integer:uint64: decode payload "18446744073709551616": out of range [0, 18446744073709551615]`}},
		{"named int16", pri, "-32768", result{v: "-32768"}},
		{"named int16 over", pri, "32768", result{"0", `Integer:tributary_test.priority: decode payload "32768": out of range [-32768, 32767]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.decode(tt.payload); got != tt.w {
				t.Errorf("Decode(%q) = %+v, want %+v", tt.payload, got, tt.w)
			}
		})
	}
}

// TestCodecConcurrent uses one codec of each kind from many goroutines at
// once; run with -race.
func TestCodecConcurrent(t *testing.T) {
	j, i, s, b := tributary.JSON[order](), tributary.Integer[int32](), tributary.String(), tributary.Bytes()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 200 {
				o := order{ID: g*1000 + n, Item: "x"}
				p, err := j.Encode(o)
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := j.Decode(p); err != nil || got.ID != o.ID {
					t.Errorf("JSON round trip of %v = %v, %v", o, got, err)
				}
				p, _ = i.Encode(int32(-n))
				if got, err := i.Decode(p); err != nil || got != int32(-n) {
					t.Errorf("Integer round trip of %d = %d, %v", -n, got, err)
				}
				p, _ = s.Encode(p)
				if got, _ := s.Decode(p); got != p {
					t.Errorf("String round trip of %q = %q", p, got)
				}
				if got, _ := b.Decode(p); string(got) != p {
					t.Errorf("Bytes Decode of %q = %q", p, got)
				}
			}
		})
	}
	wg.Wait()
}

// FuzzJSONDecode checks that JSON decoding never panics and that whatever
// it accepts encodes and decodes again to the same value.
func FuzzJSONDecode(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `{"a":1}`, `{"a":[1,"x",{"b":null}],"c":true}`, `{"a":1}x`, `{"a":1} {}`,
		`{"a":1e400}`, `{"a":-0}`, `{"\ud800":"\udfff"}`, "{\"\xff\":1}", `{"a":"a","a":"b"}`, ` {} `, `[]`, `{"a":`,
	} {
		f.Add(s)
	}
	c := tributary.JSON[map[string]any]()
	f.Fuzz(func(t *testing.T, payload string) {
		v, err := c.Decode(payload)
		if err != nil {
			if v != nil {
				t.Fatalf("Decode(%q) = %v, %v; want nil on error", payload, v, err)
			}
			if !strings.HasPrefix(err.Error(), "JSON:map[string]interface {}: decode payload: ") {
				t.Fatalf("Decode(%q) error %q lacks the codec's prefix", payload, err)
			}
			return
		}
		p, err := c.Encode(v)
		if err != nil {
			t.Fatalf("Encode(%#v) of Decode(%q): %v", v, payload, err)
		}
		w, err := c.Decode(p)
		if err != nil {
			t.Fatalf("Decode(%q) of Encode(Decode(%q)): %v", p, payload, err)
		}
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("Decode(%q) = %#v, but its re-encoding %q decodes to %#v", payload, v, p, w)
		}
	})
}

// FuzzIntegerDecode checks that Integer decoding never panics, that it is
// canonical (whatever Decode accepts, Encode gives back byte for byte), and
// that the narrower codecs accept exactly the int64 values in their range.
func FuzzIntegerDecode(f *testing.F) {
	for _, s := range []string{
		"", "0", "-0", "1", "-1", "007", "+1", " 1", "127", "128", "-128", "-129", "255", "256", "65535",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "1e3", "١",
	} {
		f.Add(s)
	}
	c64, c8, cu16 := tributary.Integer[int64](), tributary.Integer[int8](), tributary.Integer[uint16]()
	f.Fuzz(func(t *testing.T, payload string) {
		v, err := c64.Decode(payload)
		v8, err8 := c8.Decode(payload)
		vu16, erru16 := cu16.Decode(payload)
		if err != nil {
			if v != 0 || err8 == nil || v8 != 0 {
				t.Fatalf("Decode(%q): int64 %d, %v but int8 %d, %v", payload, v, err, v8, err8)
			}
			// uint16 accepts nothing that int64 refuses.
			if erru16 == nil || vu16 != 0 {
				t.Fatalf("Decode(%q): int64 %v but uint16 %d, %v", payload, err, vu16, erru16)
			}
			return
		}
		p, err := c64.Encode(v)
		if err != nil || p != payload {
			t.Fatalf("Encode(Decode(%q)) = %q, %v; want the payload back", payload, p, err)
		}
		if w, err := c64.Decode(p); err != nil || w != v {
			t.Fatalf("Decode(Encode(%d)) = %d, %v", v, w, err)
		}
		if fits := v >= math.MinInt8 && v <= math.MaxInt8; fits != (err8 == nil) || (fits && int64(v8) != v) {
			t.Fatalf("Decode(%q): int64 %d but int8 %d, %v", payload, v, v8, err8)
		}
		if fits := v >= 0 && v <= math.MaxUint16; fits != (erru16 == nil) || (fits && int64(vu16) != v) {
			t.Fatalf("Decode(%q): int64 %d but uint16 %d, %v", payload, v, vu16, erru16)
		}
	})
}

func ExampleJSON() {
	type Order struct {
		ID   int    `json:"id"`
		Item string `json:"item"`
	}
	c := tributary.JSON[Order]()
	p, err := c.Encode(Order{ID: 7, Item: "tea"})
	if err != nil {
		panic(err)
	}
	fmt.Println(p)
	o, err := c.Decode(p)
	fmt.Printf("%+v %v\n", o, err)
	_, err = c.Decode(`{"id":"seven"}`)
	fmt.Println(err != nil)
	_, err = c.Decode(`{"id":7} trailing`)
	fmt.Println(err != nil)
	// Output:
	// {"id":7,"item":"tea"}
	// {ID:7 Item:tea} <nil>
	// true
	// true
}

func ExampleInteger() {
	c := tributary.Integer[int8]()
	fmt.Println(c.Name())
	p, _ := c.Encode(-12)
	fmt.Println(p)
	v, err := c.Decode("127")
	fmt.Println(v, err)
	_, err = c.Decode("300")
	fmt.Println(err)
	_, err = c.Decode("+5")
	fmt.Println(err)
	fmt.Println(tributary.Integer[int64]().Name())
	// Output:
	// Integer:int8
	// -12
	// 127 <nil>
	// Integer:int8: decode payload "300": out of range [-128, 127]
	// Integer:int8: decode payload "+5": not a decimal integer: byte "+" at offset 0
	// Integer
}

func ExampleBytes() {
	c := tributary.Bytes()
	b, _ := c.Decode("raw\x00bytes")
	b[0] = 'R' // the slice is the caller's
	fmt.Printf("%s %q\n", c.Name(), b)
	// Output: Bytes "Raw\x00bytes"
}

// JSON's Encode refuses a string that is not UTF-8 (json.Marshal would
// silently change it) but keeps a U+FFFD, or the text \ufffd, that the
// value holds; JSON[json.RawMessage] passes its bytes through.
func TestJSONEncodeRefusesInvalidUTF8(t *testing.T) {
	c := tributary.JSON[map[string]string]()
	for _, v := range []map[string]string{{"k": "a\xffb"}, {"k\xfe": "v"}} {
		if p, err := c.Encode(v); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("Encode(%q) = %q, %v; want an error saying the string is not valid UTF-8", v, p, err)
		}
	}
	for _, v := range []map[string]string{{"k": "\ufffd"}, {"k": `\ufffd`}, {"k": `\\ufffd`}, {`\`: `\`}} {
		p, err := c.Encode(v)
		if err != nil {
			t.Errorf("Encode(%q): %v", v, err)
			continue
		}
		if w, err := c.Decode(p); err != nil || !reflect.DeepEqual(w, v) {
			t.Errorf("Decode(Encode(%q)) = %q, %v", v, w, err)
		}
	}
	raw := tributary.JSON[json.RawMessage]()
	if p, err := raw.Encode(json.RawMessage(`"\ufffd"`)); err != nil || p != `"\ufffd"` {
		t.Errorf("JSON[json.RawMessage] Encode of a \\ufffd escape = %q, %v; want it unchanged", p, err)
	}
}
