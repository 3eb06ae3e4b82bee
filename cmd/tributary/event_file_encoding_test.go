package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An event file that is not UTF-8, or whose JSON strings escape half a
// UTF-16 surrogate pair, is refused like any bad input — one line naming
// the file, the place and the problem, exit status 1, nothing produced —
// instead of being stored with U+FFFD where encoding/json would put it.
func TestEventFileThatIsNotUTF8IsRefused(t *testing.T) {
	files := map[string]string{
		"value.json":    "{\"value\": \"a\xffb\"}",
		"key.json":      "{\"key\": \"k\xff\", \"value\": \"x\"}",
		"header.json":   "{\"headers\": {\"h\xfe\": \"v\"}, \"value\": \"x\"}",
		"json.json":     "{\"value\": {\"a\": \"\xc3\"}}",
		"high.json":     `{"value": "\ud800x"}`,
		"low.json":      "{\"key\": \"ok\",\n \"value\": \"\\uDC00\"}",
		"unpaired.json": `{"value": "\ud800\u0041"}`,
	}
	want := map[string]string{
		"value.json":    "bad event file value.json: byte 0xff at line 1, column 13 is not UTF-8 (an event file is UTF-8 text)",
		"key.json":      "bad event file key.json: byte 0xff at line 1, column 11 is not UTF-8 (an event file is UTF-8 text)",
		"header.json":   "bad event file header.json: byte 0xfe at line 1, column 16 is not UTF-8 (an event file is UTF-8 text)",
		"json.json":     "bad event file json.json: byte 0xc3 at line 1, column 18 is not UTF-8 (an event file is UTF-8 text)",
		"high.json":     `bad event file high.json: \ud800 at line 1, column 12 is half a UTF-16 surrogate pair, not a character`,
		"low.json":      `bad event file low.json: \uDC00 at line 2, column 12 is half a UTF-16 surrogate pair, not a character`,
		"unpaired.json": `bad event file unpaired.json: \ud800 at line 1, column 12 is half a UTF-16 surrogate pair, not a character`,
	}
	dir := t.TempDir()
	script := "create topic s String\ncreate topic j JSON\ncreate producer p String RoundRobin\ncreate producer q JSON RoundRobin\n"
	var lines []string
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		topic, producer := "s", "p"
		if name == "json.json" {
			topic, producer = "j", "q"
		}
		lines = append(lines, name)
		script += "produce event " + producer + " " + topic + " " + name + "\n"
	}
	script += "show topics\n"
	if err := os.WriteFile(filepath.Join(dir, "s.tri"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run([]string{"run", "-keep-going", filepath.Join(dir, "s.tri")}, strings.NewReader(""), &out, &errOut)
	if code != exitFailed {
		t.Errorf("exit status %d, want %d", code, exitFailed)
	}
	got := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
	if len(got) != len(lines) {
		t.Fatalf("standard error has %d lines, want %d:\n%s", len(got), len(lines), errOut.String())
	}
	for i, name := range lines {
		if !strings.HasSuffix(got[i], ": "+want[name]) {
			t.Errorf("line %d: %q, want it to end with %q", i+1, got[i], want[name])
		}
	}
	// show topics: both topics still hold 0 events.
	rows := tableRows(t, out.String(), "TOPIC")
	if len(rows) != 2 {
		t.Fatalf("show topics printed %d rows, want 2:\n%s", len(rows), out.String())
	}
	for _, row := range rows {
		if row[3] != "0" {
			t.Errorf("topic %s holds %s events after refused produces, want 0 (%v)", row[0], row[3], row)
		}
	}
}
