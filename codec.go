package tributary

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"
	"unsafe"
)

// Codec turns a topic's typed values into the engine's string payloads and
// back. JSON, String, Bytes and Integer are built in; users may write their
// own. Implementations must be safe for concurrent use: one Codec serves
// every producer and consumer of a topic.
type Codec[T any] interface {
	// Name is the payload type recorded on the topic at creation and
	// reported by every Message of it (PayloadType), e.g. "String",
	// "Integer", "JSON:main.Order". Two codecs with the same Name must
	// read each other's payloads.
	Name() string
	// Encode returns v's payload. It returns an error, naming the codec,
	// for a value it cannot represent; it never panics on such a value.
	Encode(v T) (string, error)
	// Decode returns the value of payload. It returns an error, naming the
	// codec and saying what is wrong with the payload, and T's zero value,
	// for a payload that Encode could not have produced; it never panics,
	// whatever the payload.
	Decode(payload string) (T, error)
}

// JSON returns a Codec that carries values of T as JSON, by encoding/json
// (json.Marshal and json.Unmarshal, so struct tags and the Marshaler and
// Unmarshaler interfaces apply).
//
// Its Name is "JSON" when T is any or json.RawMessage (the payload may be
// any JSON value), and otherwise "JSON:" followed by reflect's name of T,
// e.g. "JSON:main.Order" or "JSON:map[string]interface {}".
//
// Encode returns json.Marshal's error, wrapped, for a value it refuses
// (a channel, a function, a NaN or infinite float, a cycle), and an error
// for a value holding a string (or map key) that is not valid UTF-8:
// json.Marshal would replace each invalid byte with U+FFFD, and Decode
// would return another value than the one sent. (A json.Marshaler or
// json.RawMessage inside the value that writes the escape \ufffd itself is
// refused the same way; a JSON[json.RawMessage] codec checks nothing of
// the kind: its payload is the message's own bytes.)
//
// Decode accepts exactly one JSON value, with optional white space around
// it: an empty payload and trailing data after the value are errors, as is
// a value that does not fit T (the error wraps encoding/json's, e.g. a
// *json.SyntaxError or *json.UnmarshalTypeError). On error it returns T's
// zero value, never a partly filled one. For json.RawMessage, Decode
// validates the payload and returns a compacted copy (insignificant white
// space removed) that the caller owns.
// Decode copies nothing of the payload (the broker's record, shared by
// every reader) unless T holds a type with an UnmarshalJSON or
// UnmarshalText of its own (time.Time's and json.RawMessage's aside): such
// a method is handed part of a copy, which it may change or keep.
//
// The codec holds no state; it is safe for concurrent use.
func JSON[T any]() Codec[T] {
	name := "JSON"
	if t := reflect.TypeFor[T](); t != reflect.TypeFor[any]() && t != reflect.TypeFor[json.RawMessage]() {
		name = "JSON:" + t.String()
	}
	return jsonCodec[T]{name: name, checkUTF8: reflect.TypeFor[T]() != reflect.TypeFor[json.RawMessage](),
		inPlace: !reachesUnmarshaler(reflect.TypeFor[T](), map[reflect.Type]bool{})}
}

type jsonCodec[T any] struct {
	name      string // Name's answer, fixed by JSON
	checkUTF8 bool   // refuse what json.Marshal coerced to valid UTF-8 (not for json.RawMessage)
	// inPlace: json.Unmarshal into a T runs no user code, so it may read
	// the payload's own bytes (reachesUnmarshaler is false).
	inPlace bool
}

// reachesUnmarshaler reports whether json.Unmarshal into a zero value of t
// may call an UnmarshalJSON or UnmarshalText other than encoding/json's
// and time's own: t, or a type it holds (through pointers, slices, arrays,
// maps and struct fields), implements json.Unmarshaler or
// encoding.TextUnmarshaler, by value or pointer. Such a method is handed
// part of Unmarshal's input, and may write to it or keep it (its contract
// only asks it to copy what it keeps), so Decode then gives Unmarshal a
// copy of the payload: the payload is the broker's record, shared by
// every reader, and a string, which nothing may write. Interface types
// reach none: a zero value's nil interface decodes into encoding/json's
// own types. seen holds the types visited (recursive types).
func reachesUnmarshaler(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t {
	case reflect.TypeFor[json.RawMessage](), reflect.TypeFor[time.Time]():
		return false // copy what they keep; write nothing
	}
	if t.Kind() != reflect.Interface {
		for _, u := range []reflect.Type{reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()} {
			if t.Implements(u) || reflect.PointerTo(t).Implements(u) {
				return true
			}
		}
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return reachesUnmarshaler(t.Elem(), seen)
	case reflect.Map:
		return reachesUnmarshaler(t.Key(), seen) || reachesUnmarshaler(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if reachesUnmarshaler(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

func (c jsonCodec[T]) Name() string { return c.name }

func (c jsonCodec[T]) Encode(v T) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%s: encode value: %w", c.name, err)
	}
	if c.checkUTF8 && replacedInvalidUTF8(b) {
		return "", fmt.Errorf("%s: encode value: a string is not valid UTF-8 (encoding/json would replace its invalid bytes with U+FFFD, changing the value)", c.name)
	}
	// b is json.Marshal's fresh slice and nothing else references it or
	// writes to it again: the payload is a string over it, not a copy.
	return unsafe.String(unsafe.SliceData(b), len(b)), nil
}

// replacedInvalidUTF8 reports whether json.Marshal's output b holds the
// escape \ufffd, which encoding/json writes for each byte of a string that
// is not UTF-8 (a U+FFFD that was in the string is written as itself).
// Outside strings JSON has no backslash, so every backslash starts an
// escape; an escaped backslash is skipped with what it escapes.
func replacedInvalidUTF8(b []byte) bool {
	i := bytes.IndexByte(b, '\\')
	if i < 0 {
		return false
	}
	for ; i < len(b)-1; i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] == 'u' && bytes.HasPrefix(b[i+2:], []byte("fffd")) {
			return true
		}
		i++ // the escaped byte: \\ is one backslash, not the start of an escape
	}
	return false
}

func (c jsonCodec[T]) Decode(payload string) (T, error) {
	var v T
	if err := c.decodeInto(payload, &v); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// decodeInto is Decode writing the value to *v, which holds T's zero
// value; on error *v may hold part of a value (the caller zeroes it).
func (c jsonCodec[T]) decodeInto(payload string, v *T) error {
	if payload == "" {
		return fmt.Errorf("%s: decode payload: empty payload", c.name)
	}
	if raw, ok := any(v).(*json.RawMessage); ok {
		// json.Compact validates the whole payload (one value, no
		// trailing data) and writes a fresh copy.
		var buf bytes.Buffer
		buf.Grow(len(payload))
		if err := json.Compact(&buf, []byte(payload)); err != nil {
			return fmt.Errorf("%s: decode payload: %w", c.name, err)
		}
		*raw = buf.Bytes()
		return nil
	}
	// json.Unmarshal checks the whole payload before it stores anything,
	// so trailing data after the value is an error, not ignored.
	// json.Unmarshal itself only reads its input and keeps no reference
	// to it (strings it decodes are copies), so it reads the payload in
	// place, unless a user's UnmarshalJSON or UnmarshalText would be
	// handed part of it (inPlace false): that gets a copy.
	var in []byte
	if c.inPlace {
		in = unsafe.Slice(unsafe.StringData(payload), len(payload))
	} else {
		in = []byte(payload)
	}
	if err := json.Unmarshal(in, v); err != nil {
		return fmt.Errorf("%s: decode payload: %w", c.name, err)
	}
	return nil
}

// decoderInto is a codec of this package that decodes into a Message's
// Value in place (Topic.fill), so that no T is allocated per message for
// json.Unmarshal's pointer and copied out: decodeInto(payload, v) is
// Decode(payload) writing to *v, which holds T's zero value; on error *v
// may hold part of a value, which the caller replaces with the zero value.
type decoderInto[T any] interface {
	decodeInto(payload string, v *T) error
}

// String returns the Codec whose payload is the string itself. Its Name is
// "String". Encode and Decode return their argument unchanged, never fail
// (any bytes are accepted, valid UTF-8 or not) and allocate nothing. It is
// safe for concurrent use.
func String() Codec[string] { return stringCodec{} }

type stringCodec struct{}

func (stringCodec) Name() string                          { return "String" }
func (stringCodec) Encode(v string) (string, error)       { return v, nil }
func (stringCodec) Decode(payload string) (string, error) { return payload, nil }

// Bytes returns the Codec whose payload is the raw bytes of a []byte. Its
// Name is "Bytes". Encode copies v into the payload (a nil or empty slice
// gives the empty payload) and never fails; Decode never fails and returns
// a fresh slice of len(payload) bytes that the caller owns and may modify.
// It is safe for concurrent use.
func Bytes() Codec[[]byte] { return bytesCodec{} }

type bytesCodec struct{}

func (bytesCodec) Name() string                          { return "Bytes" }
func (bytesCodec) Encode(v []byte) (string, error)       { return string(v), nil }
func (bytesCodec) Decode(payload string) ([]byte, error) { return []byte(payload), nil }

// Int is the set of integer types an Integer codec carries: every signed
// and unsigned integer kind, named types included (but not uintptr).
type Int interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Integer returns a Codec that carries values of T as decimal text
// (strconv): 42 is "42", -7 is "-7".
//
// Its Name is "Integer" when T is int64, and otherwise "Integer:" followed
// by reflect's name of T, e.g. "Integer:int32" or "Integer:main.Priority".
//
// Encode never fails. Decode is strict: it accepts exactly what Encode
// produces, so Encode(Decode(p)) == p whenever Decode succeeds. An optional
// "-" then one or more ASCII digits, with no white space, no "+", no
// leading zeros other than "0" itself and no "-0"; anything else is an
// error naming the payload. A value outside T's range is an error naming
// the value and the range, e.g.
//
//	Integer:int8: decode payload "300": out of range [-128, 127]
//
// On error it returns 0. The codec holds no mutable state; it is safe for
// concurrent use.
func Integer[T Int]() Codec[T] {
	t := reflect.TypeFor[T]()
	c := integerCodec[T]{name: "Integer", bits: t.Bits()}
	if t != reflect.TypeFor[int64]() {
		c.name = "Integer:" + t.String()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		c.signed = true
		c.min = -1 << (c.bits - 1)
		c.max = 1<<(c.bits-1) - 1
	default:
		c.max = math.MaxUint64 >> (64 - c.bits)
	}
	return c
}

type integerCodec[T Int] struct {
	name   string // Name's answer
	signed bool   // T is a signed kind
	bits   int    // T's size in bits: 8, 16, 32 or 64
	min    int64  // T's least value (0 when unsigned)
	max    uint64 // T's greatest value
}

func (c integerCodec[T]) Name() string { return c.name }

func (c integerCodec[T]) Encode(v T) (string, error) {
	if c.signed {
		return strconv.FormatInt(int64(v), 10), nil
	}
	return strconv.FormatUint(uint64(v), 10), nil
}

// maxQuoted is the longest payload an Integer decode error quotes whole, in
// bytes; a longer one is cut and marked with "...".
const maxQuoted = 64

func quotePayload(p string) string {
	if len(p) > maxQuoted {
		return strconv.Quote(p[:maxQuoted]) + "..."
	}
	return strconv.Quote(p)
}

func (c integerCodec[T]) Decode(payload string) (T, error) {
	digits, neg := payload, false
	if len(digits) > 0 && digits[0] == '-' {
		digits, neg = digits[1:], true
	}
	if err := checkDigits(digits, neg); err != nil {
		return 0, fmt.Errorf("%s: decode payload %s: %w", c.name, quotePayload(payload), err)
	}
	if c.signed {
		n, err := strconv.ParseInt(payload, 10, c.bits)
		if err != nil {
			return 0, c.rangeError(payload)
		}
		return T(n), nil
	}
	if neg {
		return 0, c.rangeError(payload)
	}
	n, err := strconv.ParseUint(payload, 10, c.bits)
	if err != nil {
		return 0, c.rangeError(payload)
	}
	return T(n), nil
}

// checkDigits says what, if anything, keeps digits (a payload less its
// leading "-", if neg) from being the canonical decimal form of an integer.
func checkDigits(digits string, neg bool) error {
	if digits == "" {
		return errors.New("not a decimal integer: no digits")
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return fmt.Errorf("not a decimal integer: byte %q at offset %d", digits[i:i+1], i+boolInt(neg))
		}
	}
	if len(digits) > 1 && digits[0] == '0' {
		return errors.New("not canonical: leading zero")
	}
	if neg && digits == "0" {
		return errors.New(`not canonical: "-0"`)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rangeError reports a well-formed payload whose value does not fit T.
func (c integerCodec[T]) rangeError(payload string) error {
	return fmt.Errorf("%s: decode payload %s: out of range [%d, %d]", c.name, quotePayload(payload), c.min, c.max)
}
