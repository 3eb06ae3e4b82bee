package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEventFile reads arbitrary bytes as an event file. It never panics; a
// refusal is one short line (errBadEvent, user input cut); an accepted
// file is UTF-8, gives back only characters it holds (no U+FFFD that
// encoding/json made of a bad byte or half a surrogate pair), has its
// headers sorted with distinct names, and reads the same once written
// back as JSON. Every payload kind's parse of its value never panics
// either. The seed corpus (below and testdata/fuzz/FuzzEventFile/, which
// keeps every input that once failed) runs in every go test.
func FuzzEventFile(f *testing.F) {
	for _, s := range []string{
		`{"value": "ok"}`,
		`{"key": "alice", "headers": {"source": "web", "a": "b"}, "value": "pizza for alice"}`,
		`{"value": 5}`, `{"value": -9223372036854775808}`, `{"value": 1.5}`,
		`{"value": {"a": [1, "x", null, true]}}`,
		`{"value": "\ud83d\ude00 \u00e9 \\ufffd \ufffd"}`,
		`{"valeu": "ok"}`, `{"value": "x", "value": "y"}`, `{"key": null, "value": 1}`,
		`{"headers": {"n": 1}, "value": "ok"}`, `{"value": "x"} garbage`, ``, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &session{readFile: func(string) ([]byte, error) { return b, nil }}
		ev, err := s.readEvent("e.json")
		if err != nil {
			if !errors.Is(err, errBadEvent) {
				t.Fatalf("readEvent(%q): %v, want errBadEvent", b, err)
			}
			if line := errText(err); len(line) > 400 || strings.Contains(line, "\n") {
				t.Fatalf("readEvent(%q): the error is not one short line (%d bytes): %s", b, len(line), line)
			}
			return
		}
		if !utf8.Valid(b) {
			t.Fatalf("readEvent accepted %q, which is not UTF-8", b)
		}
		texts := []string{ev.Key}
		for i, h := range ev.Headers {
			texts = append(texts, h.Key, h.Value)
			if i > 0 && ev.Headers[i-1].Key >= h.Key {
				t.Fatalf("readEvent(%q): headers %v not sorted by distinct names", b, ev.Headers)
			}
		}
		if v, err := stringKind.parse(ev.Value); err == nil {
			texts = append(texts, v)
		}
		integerKind.parse(ev.Value) //nolint:errcheck // only: it must not panic
		jsonKind.parse(ev.Value)    //nolint:errcheck // only: it must not panic
		if got, in := strings.Count(strings.Join(texts, ""), "\ufffd"), replacementsIn(b); got > in {
			t.Fatalf("readEvent(%q) gave %d U+FFFD for %d in the file: %q", b, got, in, texts)
		}
		// Written back as JSON, the event reads the same.
		headers := map[string]string{}
		for _, h := range ev.Headers {
			headers[h.Key] = h.Value
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // the value's "&" stays "&"
		if err := enc.Encode(map[string]any{"key": ev.Key, "headers": headers, "value": ev.Value}); err != nil {
			t.Fatalf("readEvent(%q) = %+v, which does not marshal: %v", b, ev, err)
		}
		again := buf.Bytes()
		s.readFile = func(string) ([]byte, error) { return again, nil }
		ev2, err := s.readEvent("again.json")
		if err != nil {
			t.Fatalf("readEvent(%q) = %+v, but its JSON %q is refused: %v", b, ev, again, err)
		}
		if ev2.Key != ev.Key || !slices.Equal(ev2.Headers, ev.Headers) || !bytes.Equal(compact(t, ev2.Value), compact(t, ev.Value)) {
			t.Fatalf("readEvent(%q) = %+v, but its JSON %q reads %+v", b, ev, again, ev2)
		}
	})
}

// replacementsIn counts the U+FFFD a JSON text may hold: the character
// itself and its \u escapes (a count that includes a few escaped
// backslashes followed by "ufffd" is only too high, never too low).
func replacementsIn(b []byte) int {
	lower := bytes.ToLower(b)
	return bytes.Count(b, []byte("\ufffd")) + bytes.Count(lower, []byte(`\ufffd`))
}

func compact(t *testing.T, raw []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		t.Fatalf("json.Compact(%q): %v", raw, err)
	}
	return out.Bytes()
}
