package backendtest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/f91dcac0/tributary"
)

// CheckCodec checks c against tributary.Codec's contract, as the library's
// tests check the built-in codecs: Name is not empty and the same on each
// call; every v in values encodes, and its payload decodes to v twice
// (compared by reflect.DeepEqual, so give values as Decode returns them);
// every payload in bad fails to decode, returning T's zero value and an
// error whose text names the codec; and, if all that holds, the same from
// 4 goroutines at once (run the test with -race). No call may panic. A
// fuzz target gives CheckCodecPayload its inputs instead.
func CheckCodec[T any](t testing.TB, c tributary.Codec[T], values []T, bad []string) {
	t.Helper()
	name, err := guard(func() (string, error) { return c.Name(), nil })
	if err != nil || name == "" || c.Name() != name {
		t.Fatalf("codec Name() = %q, %v: want the same non-empty name on each call", name, err)
	}
	check := func() {
		t.Helper()
		for _, v := range values {
			if err := checkValue(c, v); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		for _, p := range bad {
			if ok, err := checkPayload(c, name, p); err != nil {
				t.Errorf("%s: %v", name, err)
			} else if ok {
				t.Errorf("%s: Decode(%q) succeeded: want an error", name, p)
			}
		}
	}
	check()
	if t.Failed() {
		return // once is enough; the concurrent run is for the race detector
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(check)
	}
	wg.Wait()
}

// CheckCodecPayload checks c's Decode of payload, any bytes, as the Codec
// contract says: it does not panic; on failure it returns T's zero value
// and an error naming the codec; on success its value encodes and decodes
// back to itself. It reports whether payload decoded. The body of a fuzz
// target: f.Fuzz(func(t *testing.T, p string) { CheckCodecPayload(t, c, p) }).
func CheckCodecPayload[T any](t testing.TB, c tributary.Codec[T], payload string) bool {
	t.Helper()
	ok, err := checkPayload(c, c.Name(), payload)
	if err != nil {
		t.Errorf("%s: %v", c.Name(), err)
	}
	return ok
}

// checkValue is CheckCodec's check of one value.
func checkValue[T any](c tributary.Codec[T], v T) error {
	p, err := guard(func() (string, error) { return c.Encode(v) })
	if err != nil {
		return fmt.Errorf("Encode(%#v): %w", v, err)
	}
	for range 2 {
		if w, err := guard(func() (T, error) { return c.Decode(p) }); err != nil || !reflect.DeepEqual(w, v) {
			return fmt.Errorf("Decode(Encode(%#v)) = Decode(%q) = %#v, %v", v, p, w, err)
		}
	}
	return nil
}

// checkPayload is CheckCodecPayload's check, reporting instead of failing.
func checkPayload[T any](c tributary.Codec[T], name, p string) (bool, error) {
	v, err := guard(func() (T, error) { return c.Decode(p) })
	var zero T
	switch {
	case errors.Is(err, errPanicked):
		return false, fmt.Errorf("Decode(%q): %w", p, err)
	case err != nil && !reflect.DeepEqual(v, zero):
		return false, fmt.Errorf("Decode(%q) = %#v with error %v: want T's zero value", p, v, err)
	case err != nil && !strings.Contains(err.Error(), name):
		return false, fmt.Errorf("Decode(%q): error %q does not name the codec", p, err)
	case err != nil:
		return false, nil
	}
	return true, checkValue(c, v)
}

// errPanicked wraps a panic that guard recovered.
var errPanicked = errors.New("panicked")

// guard calls f, turning a panic into an error wrapping errPanicked.
func guard[V any](f func() (V, error)) (v V, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanicked, r)
		}
	}()
	return f()
}
