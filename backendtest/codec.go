package backendtest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
)

// CheckCodec checks c against tributary.Codec's contract, as the library's
// tests check the built-in codecs: Name is not empty and the same on each
// call; every v in values encodes, and its payload decodes to v twice
// (compared by reflect.DeepEqual, so give values as Decode returns them);
// every payload in bad fails to decode, returning T's zero value and an
// error whose text names the codec; and, if all that holds, the same from
// 4 goroutines at once (run the test with -race). No call may panic nor
// run longer than Wait (10 s): either is a failure, and a failure quotes
// at most 200 bytes of a value or payload. A nil or typed-nil codec fails
// too. A fuzz target gives CheckCodecPayload its inputs instead.
func CheckCodec[T any](t testing.TB, c tributary.Codec[T], values []T, bad []string) {
	t.Helper()
	name, err := guard(func() (string, error) { return c.Name(), nil })
	again, err2 := guard(func() (string, error) { return c.Name(), nil })
	if err == nil {
		err = err2
	}
	if err != nil || name == "" || again != name {
		t.Fatalf("codec Name() = %s, then %s, %v: want the same non-empty name on each call", clip(name), clip(again), err)
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
				t.Errorf("%s: Decode(%s) succeeded: want an error", name, clip(p))
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
// contract says: it does not panic nor run longer than Wait (nor does
// Name); on failure it returns T's zero value and an error naming the
// codec; on success its value encodes and decodes back to itself. It
// reports whether payload decoded. The body of a fuzz
// target: f.Fuzz(func(t *testing.T, p string) { CheckCodecPayload(t, c, p) }).
func CheckCodecPayload[T any](t testing.TB, c tributary.Codec[T], payload string) bool {
	t.Helper()
	name, err := guard(func() (string, error) { return c.Name(), nil })
	if err != nil {
		t.Errorf("codec Name(): %v", err)
		return false
	}
	ok, err := checkPayload(c, name, payload)
	if err != nil {
		t.Errorf("%s: %v", name, err)
	}
	return ok
}

// checkValue is CheckCodec's check of one value.
func checkValue[T any](c tributary.Codec[T], v T) error {
	p, err := guard(func() (string, error) { return c.Encode(v) })
	if err != nil {
		return fmt.Errorf("Encode(%s): %w", clip(v), err)
	}
	for range 2 {
		if w, err := guard(func() (T, error) { return c.Decode(p) }); err != nil || !reflect.DeepEqual(w, v) {
			return fmt.Errorf("Decode(Encode(%s)) = Decode(%s) = %s, %v", clip(v), clip(p), clip(w), err)
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
		return false, fmt.Errorf("Decode(%s): %w", clip(p), err)
	case err != nil && !reflect.DeepEqual(v, zero):
		return false, fmt.Errorf("Decode(%s) = %s with error %v: want T's zero value", clip(p), clip(v), err)
	case err != nil && !strings.Contains(err.Error(), name):
		return false, fmt.Errorf("Decode(%s): error %s does not name the codec", clip(p), clip(err.Error()))
	case err != nil:
		return false, nil
	}
	return true, checkValue(c, v)
}

// errPanicked wraps a panic that guard recovered; errBlocked is guard's
// error for a call still running after Wait.
var (
	errPanicked = errors.New("panicked")
	errBlocked  = errors.New("did not return")
)

// guard calls f on a goroutine of its own and waits up to Wait for it,
// turning a panic into an error wrapping errPanicked, and a call still
// running after Wait into one wrapping errBlocked (f's goroutine is then
// left to finish, or not, on its own): a codec or assignor that panics or
// blocks fails the check instead of crashing or hanging the test binary.
func guard[V any](f func() (V, error)) (V, error) {
	type result struct {
		v   V
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{err: fmt.Errorf("%w: %s", errPanicked, clip(p))}
			}
			ch <- r
		}()
		r.v, r.err = f()
	}()
	timer := time.NewTimer(Wait)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-timer.C:
		var zero V
		return zero, fmt.Errorf("%w within %v", errBlocked, Wait)
	}
}

// clipLen is the most bytes of a value, payload or answer a failure
// quotes.
const clipLen = 200

// clip formats v with %#v (a string with %q) for a failure's text,
// shortened to clipLen bytes and its length, so that a huge value, payload
// or answer makes a failure of a few hundred bytes.
func clip(v any) string {
	var s string
	if str, ok := v.(string); ok {
		if len(str) > clipLen {
			return fmt.Sprintf("%q… (%d bytes)", str[:clipLen], len(str))
		}
		s = fmt.Sprintf("%q", str)
	} else {
		s = fmt.Sprintf("%#v", v)
	}
	if len(s) > clipLen {
		return fmt.Sprintf("%s… (%d bytes of text)", s[:clipLen], len(s))
	}
	return s
}
