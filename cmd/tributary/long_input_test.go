package main

import (
	"bytes"
	"strings"
	"testing"
	"testing/fstest"
)

// An error repeats at most maxEcho bytes of any one piece of user input: a
// script line of 1 MiB (or a command-line argument as long) gives an error
// of a few hundred bytes, whichever argument, option, tuple item, event
// file field or flag holds it.

// maxErrorLine bounds an error's line in these tests: the longest fixed
// text (a usage, a list of names) plus a few cut echoes.
const maxErrorLine = 600

// huge is a 64 KiB piece of input (any size over maxEcho is cut the same;
// the test also has a 1 MiB identifier): ASCII, then two-byte characters,
// so a cut at maxEcho falls inside a character unless it keeps UTF-8 whole.
var huge = strings.Repeat("a", 63) + strings.Repeat("é", 32*1024)

func TestErrorsCutLongInput(t *testing.T) {
	files := fstest.MapFS{
		"ok.json":          {Data: []byte(`{"value": "ok"}`)},
		"hugekey.json":     {Data: []byte(`{"key": ` + strings.Repeat("1", 1<<20-20) + `, "value": "x"}`)},
		"hugevalue.json":   {Data: []byte(`{"value": ` + strings.Repeat("7", 1<<20-20) + `}`)},
		"hugefield.json":   {Data: []byte(`{"` + huge + `": 1, "value": "x"}`)},
		"hugeheader.json":  {Data: []byte(`{"headers": {"` + huge + `": 1}, "value": "x"}`)},
		"hugetwice.json":   {Data: []byte(`{"` + huge + `": 1, "` + huge + `": 1}`)},
		"hugereserve.json": {Data: []byte(`{"headers": {"tributary-payload-type": "` + huge + `"}, "value": "x"}`)},
	}
	// Each command with arguments that would work; every argument in turn
	// becomes huge. {} marks where the event file's name goes.
	templates := map[string][]string{
		"create topic":                   {"create topic", "nt", "String", "2"},
		"create partition":               {"create partition", "t", "px"},
		"create consumer group":          {"create consumer group", "ng", "t", "Range", "--from", "latest", "--dead-letter", "dl", "--max-attempts", "2", "--backoff", "1s"},
		"create consumer":                {"create consumer", "g", "c9", "--dead-letter", "dl", "--max-attempts", "2"},
		"create producer":                {"create producer", "np", "String", "Key"},
		"delete consumer group":          {"delete consumer group", "g"},
		"delete consumer":                {"delete consumer", "c1"},
		"produce event":                  {"produce event", "m", "t", "ok.json", "p0"},
		"consume event":                  {"consume event", "c1", "p0", "--fail"},
		"consume events":                 {"consume events", "c1", "p0", "3"},
		"show topics":                    {"show topics", "extra"},
		"show topic":                     {"show topic", "t"},
		"show consumer group":            {"show consumer group", "g"},
		"parallel produce":               {"parallel produce", "(m, t, ok.json, p0),", "(k, t, ok.json)"},
		"parallel consume":               {"parallel consume", "(c1, p0, 2)"},
		"set consumer group rebalancing": {"set consumer group rebalancing", "g", "Sticky"},
		"playback":                       {"playback", "c1", "p0", "0"},
		"help":                           {"help", "create", "topic"},
		"quit":                           {"quit"},
		"exit":                           {"exit"},
	}
	extra := [][]string{ // a second form of a command
		{"delete consumer", "g", "c1"},
		{"create consumer", "g", "c9", "--dead-letter", "dl"},
	}
	for _, c := range commands {
		if _, ok := templates[c.name()]; !ok {
			t.Errorf("command %q has no template here: add one", c.name())
		}
	}
	var lines []string
	forms := extra
	for _, tmpl := range templates {
		forms = append(forms, tmpl)
	}
	for _, tmpl := range forms {
		for i := 1; i < len(tmpl); i++ {
			args := append([]string(nil), tmpl...)
			switch {
			case strings.HasPrefix(args[i], "("): // a tuple: each item in turn
				items := strings.Split(strings.Trim(args[i], "(),"), ", ")
				for k := range items {
					its := append([]string(nil), items...)
					its[k] = huge
					args[i] = "(" + strings.Join(its, ", ") + ")"
					lines = append(lines, strings.Join(args, " "))
				}
				continue
			case strings.HasPrefix(args[i], "--"):
				args[i] = "--" + huge
			default:
				args[i] = huge
			}
			lines = append(lines, strings.Join(args, " "))
		}
	}
	lines = append(lines, "create topic "+strings.Repeat("t", 1<<20-32)+" String", huge, huge+" topic", "create "+huge, "create topic t2 String "+huge,
		"parallel produce "+huge, "parallel produce (m, t, ok.json, p0) "+huge, "parallel consume ("+huge)
	for _, f := range []string{"hugekey.json", "hugevalue.json", "hugefield.json", "hugeheader.json", "hugetwice.json", "hugereserve.json"} {
		lines = append(lines, "produce event k t "+f)
	}
	for _, line := range lines {
		s, _ := testSession(t, files)
		for _, setup := range []string{
			"create topic t String 2", "create consumer group g t RoundRobin", "create consumer g c1",
			"create producer m String Manual", "create producer k String Key", "produce event m t ok.json p0",
		} {
			mustExec(t, s, setup)
		}
		err := s.exec(line)
		if err == nil {
			continue // it worked: nothing to cut
		}
		if msg := errText(err); len(msg) > maxErrorLine {
			t.Errorf("%s…: the error is %d bytes: %s…", line[:min(len(line), 80)], len(msg), msg[:min(len(msg), 300)])
		} else if !validUTF8Cut(msg) {
			t.Errorf("%s…: the error cuts a UTF-8 sequence: %q", line[:min(len(line), 80)], msg)
		}
	}
}

// validUTF8Cut reports whether msg, once errText made it printable, still
// has no "?" that stands for a split "é" (errText turns invalid UTF-8 into
// "?"; the input holds no "?").
func validUTF8Cut(msg string) bool {
	return !strings.Contains(msg, "é?") && !strings.Contains(msg, "a?")
}

// The program's command line: flags, modes and file names as long as an
// argument may be.
func TestCommandLineErrorsCutLongInput(t *testing.T) {
	for _, args := range [][]string{
		{huge}, {"-" + huge}, {"-capacity", huge}, {"-capacity=" + huge}, {"-clock", huge}, {"-backend", huge},
		{"-backend", "jetstream", "-nats", huge}, {"-nats", huge}, {"run", huge}, {"run", "-" + huge, "x"},
		{"run", "-seed", huge, "x"}, {"run", "a", huge}, {"audit", huge}, {"audit", "-partitions", huge},
		{"audit", "-retry", huge}, {"audit", "-churn", huge}, {"audit", "-seed", huge}, {"audit", "-" + huge},
	} {
		var out, errOut bytes.Buffer
		code := run(args, strings.NewReader(""), &out, &errOut)
		if code == exitOK {
			t.Errorf("%.40q…: exit status 0, want an error", args)
			continue
		}
		if n := errOut.Len(); n > maxErrorLine || n == 0 {
			t.Errorf("%.40q…: standard error is %d bytes: %.300s…", args, n, errOut.String())
		}
	}
}
