package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/f91dcac0/tributary/examples"
)

// testSession is a session on a cluster of capacity 1000 whose event files
// come from files, writing to the returned buffer.
func testSession(t *testing.T, files fstest.MapFS) (*session, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	s, err := newSession(&out, files.ReadFile, sessionFlags{capacity: 1000, window: 1000, now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close() })
	return s, &out
}

func mustExec(t *testing.T, s *session, line string) {
	t.Helper()
	if err := s.exec(line); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
}

// A parallel produce publishes every event exactly once, whatever the
// interleaving: each partition's offsets are 0..n-1 and every event value
// appears once in the topic.
func TestParallelProduceExactlyOnce(t *testing.T) {
	const events = 48
	files := fstest.MapFS{}
	var tuples []string
	producers := []string{"rr", "key", "rnd", "man"}
	for i := range events {
		name := fmt.Sprintf("e%d.json", i)
		files[name] = &fstest.MapFile{Data: fmt.Appendf(nil, `{"key": "k%d", "value": %d}`, i, i)}
		p := producers[i%len(producers)]
		if p == "man" {
			tuples = append(tuples, fmt.Sprintf("(%s, t, %s, p%d)", p, name, i%4))
		} else {
			tuples = append(tuples, fmt.Sprintf("(%s, t, %s)", p, name))
		}
	}
	s, out := testSession(t, files)
	mustExec(t, s, "create topic t Integer 4")
	mustExec(t, s, "create producer rr Integer RoundRobin")
	mustExec(t, s, "create producer key Integer Key")
	mustExec(t, s, "create producer rnd Integer Random")
	mustExec(t, s, "create producer man Integer Manual")
	out.Reset()
	mustExec(t, s, "parallel produce "+strings.Join(tuples, ", "))
	if rows := tableRows(t, out.String(), "PRODUCER"); len(rows) != events {
		t.Fatalf("parallel produce printed %d rows, want %d:\n%s", len(rows), events, out)
	}
	snap, err := s.topics["t"].snapshot()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for p, ms := range snap.Messages {
		for i, m := range ms {
			if m.Offset != int64(i) {
				t.Errorf("partition %d: offset %d at position %d", p, m.Offset, i)
			}
			seen[m.Value]++
		}
	}
	for i := range events {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Errorf("event %d published %d times, want once", i, n)
		}
	}
}

// A parallel consume delivers every event exactly once to the consumer
// owning its partition, each consumer's events in offset order.
func TestParallelConsumeInOrder(t *testing.T) {
	files := fstest.MapFS{}
	s, out := testSession(t, files)
	mustExec(t, s, "create topic t Integer 4")
	mustExec(t, s, "create consumer group g t RoundRobin")
	for i := range 4 {
		mustExec(t, s, fmt.Sprintf("create consumer g c%d", i))
	}
	mustExec(t, s, "create producer m Integer Manual")
	const perPartition = 25
	for i := range 4 * perPartition {
		name := fmt.Sprintf("e%d.json", i)
		files[name] = &fstest.MapFile{Data: fmt.Appendf(nil, `{"value": %d}`, i)}
		mustExec(t, s, fmt.Sprintf("produce event m t %s %d", name, i%4))
	}
	out.Reset()
	// Two tuples on one partition race for its events: together they must
	// still take each event once, in order per tuple.
	mustExec(t, s, "parallel consume (c0, p0, 100), (c1, p1, 100), (c2, p2, 100), (c3, p3, 100), (c3, p3, 100)")
	rows := tableRows(t, out.String(), "CONSUMER")
	got := map[string]int{}
	last := map[string]int64{} // consumer/partition → last offset
	resets := 0                // c3's second tuple starts again
	for _, r := range rows {
		if r[7] == "(nothing" {
			continue
		}
		off, _ := strconv.ParseInt(r[2], 10, 64)
		k := r[0] + "/" + r[1]
		if prev, ok := last[k]; ok && off <= prev {
			if resets++; r[0] != "c3" || resets > 1 {
				t.Errorf("%s: offset %d after %d", k, off, prev)
			}
		}
		last[k] = off
		if want := fmt.Sprintf("c%s", strings.TrimPrefix(r[1], "p")); r[0] != want {
			t.Errorf("row %v: partition %s consumed by %s, its owner is %s", r, r[1], r[0], want)
		}
		got[r[7]]++
	}
	for i := range 4 * perPartition {
		if n := got[strconv.Itoa(i)]; n != 1 {
			t.Errorf("event %d consumed %d times, want once", i, n)
		}
	}
}

// tableRows returns the whitespace-split rows of the table whose header
// starts with first.
func tableRows(t *testing.T, out, first string) [][]string {
	t.Helper()
	var rows [][]string
	in := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == first:
			in = true
		case in && len(f) > 0:
			rows = append(rows, f)
		}
	}
	return rows
}

// Every shipped example script runs to the end without an error, and the
// demo shows what it promises.
func TestExampleScripts(t *testing.T) {
	scripts, err := fs.Glob(examples.FS, "*.tri")
	if err != nil || len(scripts) < 2 {
		t.Fatalf("example scripts: %v, %v", scripts, err)
	}
	for _, name := range scripts {
		t.Run(name, func(t *testing.T) {
			script, err := examples.FS.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			f := sessionFlags{echo: true, capacity: 1000, window: 1000, now: time.Now}
			if code := runScript(f, bytes.NewReader(script), name, examples.FS.ReadFile, &out, &errOut); code != exitOK || errOut.Len() > 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
			}
			if name != "demo.tri" {
				return
			}
			for _, want := range []string{
				`(?m)^b2 left billing \(Range\): b1 \[p0 p1 p2 eu\]$`, // a rebalance after delete consumer
				`(?m)^rebalanced shipping \(Range\): `,
				`(?m)^rebalanced shipping \(Sticky\): `,
				`(?m)^a1 +p0 +0 +0-0 +2 +\S+ +dead-lettered to orders-dlq +"soup for bob"$`,
				`tributary-dlq-attempts=2`,
				`(?m)^removed s3 from shipping \(Sticky\): s1 \[p0 p1\] s2 \[p2 eu\]$`, // delete consumer <group> <member>
				`(?m)^from latest; retry for ever`,                                     // create consumer group … --from latest
				`(?m)^billing replays orders p1 from offset 1 to 3$`,
				`(?m)^created producer \w+: type \w+, strategy Random$`,
			} {
				if !regexp.MustCompile(want).MatchString(out.String()) {
					t.Errorf("demo output lacks %s", want)
				}
			}
		})
	}
}

// README's CLI transcript is what the program prints for the command shown
// above it, so that a reader following it gets the same output.
func TestREADMETranscript(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "$ go run ./cmd/tributary "
	_, after, ok := strings.Cut(string(readme), prompt)
	if !ok {
		t.Fatalf("README has no transcript starting %q", prompt)
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("README's transcript block does not end")
	}
	cmdline, want, _ := strings.Cut(block, "\n")
	args := strings.Fields(cmdline)
	t.Chdir("../..")
	var out, errOut bytes.Buffer
	if code := run(args, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("tributary %s: exit %d: %s", cmdline, code, errOut.String())
	}
	if got := out.String(); got != want {
		t.Errorf("README transcript differs from the output of tributary %s.\ngot:\n%s\nwant:\n%s", cmdline, got, want)
	}
	if !slices.Contains(args, "-clock") {
		t.Errorf("the README command should fix -clock so that its times match")
	}
}

// A script line over the limit ends the script with one error naming its
// line, -keep-going or not: skipping to its end could read for ever.
func TestLongLine(t *testing.T) {
	script := "create topic ok String\ncreate topic " + strings.Repeat("x", maxLine+10) + " String\ncreate topic after String\n"
	var out, errOut bytes.Buffer
	f := sessionFlags{keepGoing: true, capacity: 10, window: 0, now: time.Now}
	code := runScript(f, strings.NewReader(script), "long.tri", osReader("."), &out, &errOut)
	if code != exitFailed || errOut.String() != fmt.Sprintf("long.tri:2: cannot read the script: the line is longer than %d bytes\n", maxLine) {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	if !strings.Contains(out.String(), "created topic ok") || strings.Contains(out.String(), "after") {
		t.Fatalf("want line 1 run and line 3 not: %q", out.String())
	}
}

// An endless line (a script that is /dev/zero) ends at the limit instead
// of reading for ever.
func TestEndlessScript(t *testing.T) {
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		f := sessionFlags{keepGoing: true, capacity: 10, now: time.Now}
		done <- runScript(f, zeros{}, "zero", osReader("."), &out, &errOut)
	}()
	select {
	case code := <-done:
		if code != exitFailed || !strings.HasPrefix(errOut.String(), "zero:1: cannot read the script: the line is longer than") {
			t.Fatalf("exit %d, stderr %q", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an endless script line was read for ever")
	}
}

// zeros is an endless stream of zero bytes, like /dev/zero.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
