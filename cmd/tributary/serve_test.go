package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/monitor"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

const serveScript = `create topic orders String 2
create consumer group billing orders Range
create consumer group audit orders RoundRobin
create consumer billing c1
create consumer billing c2
create consumer audit a1
create producer web String RoundRobin
produce event web orders order.json
produce event web orders order.json
produce event web orders order.json
consume event c1 p0
create consumer group fraud orders Sticky --dead-letter dlq --max-attempts 1
create consumer fraud f1
consume event f1 p1 --fail
`

var urlRE = regexp.MustCompile(`commands done; serving (http://127\.0\.0\.1:[0-9]+/) until interrupted`)

// TestServe runs `tributary serve -http 127.0.0.1:0 FILE`: the monitor's
// JSON has the script's groups, members and lag once the commands are
// done, the page is served, and the program serves until interrupted,
// then exits 0 and stops listening.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.tri")
	if err := os.WriteFile(script, []byte(serveScript), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "order.json"), []byte(`{"key": "k", "value": "pizza"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- runServe(ctx, []string{"-http", "127.0.0.1:0", script}, strings.NewReader(""), false, &stdout, &stderr)
	}()

	var url string
	deadline := time.Now().Add(10 * time.Second)
	for url == "" {
		if m := urlRE.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case c := <-code:
			t.Fatalf("serve exited %d before serving:\n%s%s", c, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no URL on stderr after 10 s:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(stderr.String(), "monitor page at "+url) {
		t.Errorf("stderr lacks the URL line:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "produced 0-1 to orders p0 at offset 1") {
		t.Errorf("stdout lacks the script's output:\n%s", stdout.String())
	}

	var st monitor.State
	if err := json.Unmarshal(get(t, url+"api/state"), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Topics) != 2 || st.Topics[0].Topic != "dlq" || st.Topics[1].Topic != "orders" {
		t.Fatalf("topics %+v, want dlq and orders", st.Topics)
	}
	orders := st.Topics[1]
	type wgroup struct {
		assignor, members string
		lag               []int64
	}
	want := map[string]wgroup{
		"audit":   {"RoundRobin", "a1", []int64{2, 1}},
		"billing": {"Range", "c1 c2", []int64{1, 1}}, // c1 consumed orders p0's first event
		"fraud":   {"Sticky", "f1", []int64{2, 0}},   // f1 dead-lettered p1's
	}
	if len(orders.Groups) != len(want) {
		t.Fatalf("groups %+v, want audit, billing and fraud", orders.Groups)
	}
	for _, g := range orders.Groups {
		w := want[g.Group]
		var lag []int64
		for _, p := range g.Partitions {
			lag = append(lag, p.Lag)
		}
		if g.Assignor != w.assignor || strings.Join(g.Members, " ") != w.members || !slices.Equal(lag, w.lag) {
			t.Errorf("group %s: %s, members %v, lag %v; want %s, %s, %v", g.Group, g.Assignor, g.Members, lag, w.assignor, w.members, w.lag)
		}
	}
	if len(st.DeadLetters) != 1 {
		t.Fatalf("dead letters %+v, want f1's", st.DeadLetters)
	}
	if d := st.DeadLetters[0]; d.Topic != "orders" || d.Group != "fraud" || d.Partition != 1 || d.Offset != 0 || d.Attempt != 1 || d.DeadLetterTopic != "dlq" || !strings.Contains(d.Cause, "--fail") {
		t.Errorf("dead letter %+v, want orders/fraud p1 offset 0 attempt 1 to dlq, cause the --fail", d)
	}
	if page := get(t, url); !bytes.Contains(page, []byte("Tributary monitor")) {
		t.Errorf("GET / is not the page:\n%.200s", page)
	}

	select {
	case c := <-code:
		t.Fatalf("serve exited %d before it was interrupted", c)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("exit status %d after the interrupt, want 0; stderr:\n%s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not end 10 s after the interrupt")
	}
	if resp, err := http.Get(url + "api/state"); err == nil {
		resp.Body.Close()
		t.Errorf("still serving after the exit")
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, b)
	}
	return b
}

// TestServeCommandLine: serve's own errors, each before anything runs.
func TestServeCommandLine(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wcode   int
		wstderr string
	}{
		{nil, exitUsage, "-http ADDR or -kafka ADDR is required"},
		{[]string{"-capacity", "5"}, exitUsage, "-http ADDR or -kafka ADDR is required"},
		{[]string{"-http", "8080"}, exitUsage, `-http "8080": want HOST:PORT`},
		{[]string{"-kafka", "9092"}, exitUsage, `-kafka "9092": want HOST:PORT, such as 127.0.0.1:9092`},
		{[]string{"-http", "127.0.0.1:0", "-kafka", "localhost"}, exitUsage, `-kafka "localhost": want HOST:PORT`},
		{[]string{"-http", "127.0.0.1:0", "a", "b"}, exitUsage, "want at most one FILE, got 2"},
		{[]string{"-http", "127.0.0.1:0", "-capacity", "0"}, exitUsage, "-capacity 0: must be in"},
		{[]string{"-http", "127.0.0.1:0", "/nonexistent/s.tri"}, exitFailed, "no such file"},
		{[]string{"-http", "256.0.0.1:1"}, exitFailed, "tributary serve: listen tcp"},
		{[]string{"-kafka", "256.0.0.1:1"}, exitFailed, "tributary serve: listen tcp"},
		{[]string{"-http", "127.0.0.1:0", "-kafka", "256.0.0.1:1"}, exitFailed, "tributary serve: listen tcp"},
	} {
		var stdout, stderr bytes.Buffer
		got := runServe(context.Background(), tt.args, strings.NewReader(""), false, &stdout, &stderr)
		if got != tt.wcode || !strings.Contains(stderr.String(), tt.wstderr) {
			t.Errorf("serve %q: exit %d, stderr %q; want %d and %q", tt.args, got, stderr.String(), tt.wcode, tt.wstderr)
		}
	}
	var stdout, stderr bytes.Buffer
	if got := runServe(context.Background(), []string{"-h"}, nil, false, &stdout, &stderr); got != exitOK || !strings.Contains(stdout.String(), "-http address") || !strings.Contains(stdout.String(), "-kafka address") {
		t.Errorf("serve -h: exit %d, stdout %q", got, stdout.String())
	}
}

// TestServeStdin: without FILE the commands come from standard input; a
// failing command gives exit status 1 once interrupted, and the page
// serves what ran before it.
func TestServeStdin(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- runServe(ctx, []string{"-http", "127.0.0.1:0"}, strings.NewReader("create topic t Integer\ncreate topic t Integer\n"), false, &stdout, &stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !urlRE.MatchString(stderr.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("not serving after 10 s:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	url := urlRE.FindStringSubmatch(stderr.String())[1]
	if b := get(t, url+"api/state?history=0"); !bytes.Contains(b, []byte(`"topic":"t"`)) {
		t.Errorf("state lacks topic t: %s", b)
	}
	if !strings.Contains(stderr.String(), `stdin:2: topic "t" already exists`) {
		t.Errorf("stderr lacks the failing line:\n%s", stderr.String())
	}
	cancel()
	if c := <-code; c != exitFailed {
		t.Errorf("exit status %d, want 1 (a command failed)", c)
	}
}
