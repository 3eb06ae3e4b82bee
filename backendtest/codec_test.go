package backendtest_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/backendtest"
)

// The codec and assignor checks on broken implementations: each is
// reported as at least one failure, never as a panic of the test binary
// nor as a check that does not return, and no failure's text grows with a
// huge answer.

// brokenCodec is a Codec[string] whose methods do what its fields say:
// name (nil: "Broken") answers Name, and encode and decode (nil: the
// identity) Encode and Decode.
type brokenCodec struct {
	name   func() string
	encode func(string) (string, error)
	decode func(string) (string, error)
}

func (c *brokenCodec) Name() string {
	if c.name == nil {
		return "Broken"
	}
	return c.name()
}

func (c *brokenCodec) Encode(v string) (string, error) {
	if c.encode == nil {
		return v, nil
	}
	return c.encode(v)
}

func (c *brokenCodec) Decode(p string) (string, error) {
	if c.decode == nil {
		return p, nil
	}
	return c.decode(p)
}

// maxFailureText bounds the text of one reported failure, in bytes: a
// check quotes a value, a payload or an answer shortened, never whole.
const maxFailureText = 4096

// recordedCheck runs check on a recorder and returns its failures; a
// panic out of check counts as one starting with "panic: ", and a check
// still running after within fails the test.
func recordedCheck(t *testing.T, within time.Duration, check func(testing.TB)) []string {
	t.Helper()
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				rec.record(fmt.Sprint("panic: ", v))
			}
		}()
		check(rec)
	}()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("the check has not returned after %v", within)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.failures...)
}

// wantReported fails unless failures holds at least one failure, none a
// panic and none longer than maxFailureText.
func wantReported(t *testing.T, failures []string) {
	t.Helper()
	if len(failures) == 0 {
		t.Error("no failure reported")
	}
	for _, f := range failures {
		if strings.HasPrefix(f, "panic: ") {
			t.Errorf("the check panicked instead of failing: %.300s", f)
		}
		if len(f) > maxFailureText {
			t.Errorf("a failure of %d bytes, want at most %d: %.300s…", len(f), maxFailureText, f)
		}
	}
}

// shortWait lowers backendtest.Wait to d for the rest of the test.
func shortWait(t *testing.T, d time.Duration) {
	t.Helper()
	w := backendtest.Wait
	backendtest.Wait = d
	t.Cleanup(func() { backendtest.Wait = w })
}

// blocked returns a channel that stays open until the test ends: a codec
// or assignor method that receives from it blocks for the test's length.
func blocked(t *testing.T) <-chan struct{} {
	ch := make(chan struct{})
	t.Cleanup(func() { close(ch) })
	return ch
}

func TestCheckCodecReportsBrokenCodecs(t *testing.T) {
	shortWait(t, 100*time.Millisecond)
	block := blocked(t)
	huge := strings.Repeat("x", 1<<20)
	var calls atomic.Int32
	for name, c := range map[string]tributary.Codec[string]{
		"nil":         nil,
		"typed nil":   (*brokenCodec)(nil),
		"empty name":  &brokenCodec{name: func() string { return "" }},
		"name panics": &brokenCodec{name: func() string { panic("name") }},
		"name panics the 2nd time": &brokenCodec{name: func() string {
			calls.Add(1)
			if calls.Load() > 1 {
				panic("name")
			}
			return "Broken"
		}},
		"name blocks":   &brokenCodec{name: func() string { <-block; return "Broken" }},
		"encode panics": &brokenCodec{encode: func(string) (string, error) { panic("encode") }},
		"encode blocks": &brokenCodec{encode: func(v string) (string, error) { <-block; return v, nil }},
		"decode panics": &brokenCodec{decode: func(string) (string, error) { panic("decode") }},
		"decode blocks": &brokenCodec{decode: func(p string) (string, error) { <-block; return p, nil }},
		"encode huge":   &brokenCodec{encode: func(string) (string, error) { return huge, nil }},
		"decode huge":   &brokenCodec{decode: func(string) (string, error) { return huge, nil }},
		"decode error without the codec's name": &brokenCodec{decode: func(p string) (string, error) {
			if p == "bad" {
				return "", errors.New("no")
			}
			return p, nil
		}},
	} {
		t.Run(name, func(t *testing.T) {
			calls.Store(0)
			wantReported(t, recordedCheck(t, guardWait, func(tb testing.TB) {
				backendtest.CheckCodec(tb, c, []string{"a", huge}, []string{"bad"})
			}))
		})
	}
}

func TestCheckCodecPayloadReportsBrokenCodecs(t *testing.T) {
	shortWait(t, 100*time.Millisecond)
	block := blocked(t)
	for name, c := range map[string]tributary.Codec[string]{
		"nil":           nil,
		"typed nil":     (*brokenCodec)(nil),
		"name panics":   &brokenCodec{name: func() string { panic("name") }},
		"name blocks":   &brokenCodec{name: func() string { <-block; return "Broken" }},
		"decode panics": &brokenCodec{decode: func(string) (string, error) { panic("decode") }},
		"decode blocks": &brokenCodec{decode: func(p string) (string, error) { <-block; return p, nil }},
		"encode panics": &brokenCodec{encode: func(string) (string, error) { panic("encode") }},
		"decode huge":   &brokenCodec{decode: func(string) (string, error) { return strings.Repeat("y", 1<<20), nil }},
	} {
		t.Run(name, func(t *testing.T) {
			wantReported(t, recordedCheck(t, guardWait, func(tb testing.TB) {
				if backendtest.CheckCodecPayload(tb, c, "p") {
					tb.Errorf("CheckCodecPayload reported a decode")
				}
			}))
		})
	}
}

// guardWait is how long a check on a broken codec or assignor may take
// with backendtest.Wait lowered to 100 ms.
const guardWait = 5 * time.Second
