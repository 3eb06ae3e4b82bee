package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/kafka/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var kafkaRE = regexp.MustCompile(`tributary: Kafka protocol at (127\.0\.0\.1:[0-9]+)\n`)

// served is a `tributary serve` running in the test: its output, its
// exit status once it ends, and the interrupt that ends it.
type served struct {
	stdout, stderr lockedBuffer
	code           chan int
	interrupt      context.CancelFunc
}

// startServe runs runServe on args with stdin as its commands, and waits
// (10 s at most) for its stderr to have a line matching re, whose first
// group it returns. It fails the test if serve exits before.
func startServe(t *testing.T, args []string, stdin string, re *regexp.Regexp) (*served, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{code: make(chan int, 1), interrupt: cancel}
	go func() {
		s.code <- runServe(ctx, args, strings.NewReader(stdin), false, &s.stdout, &s.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.code:
		case <-time.After(10 * time.Second):
			t.Error("serve did not end 10 s after the interrupt")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(s.stderr.String()); m != nil {
			return s, m[1]
		}
		select {
		case c := <-s.code:
			s.code <- c
			t.Fatalf("serve %q exited %d before printing %s:\n%s%s", args, c, re, s.stdout.String(), s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve %q: no %s on stderr after 10 s:\n%s", args, re, s.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop interrupts s and checks that it exits with status 0 and that addr
// is no longer listened on.
func (s *served) stop(t *testing.T, addr string) {
	t.Helper()
	s.interrupt()
	select {
	case c := <-s.code:
		s.code <- c
		if c != exitOK {
			t.Errorf("exit status %d after the interrupt, want 0; stderr:\n%s", c, s.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not end 10 s after the interrupt")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after the exit", addr)
	}
}

// TestServeKafka runs `tributary serve -kafka 127.0.0.1:0` on a script
// and talks to it with franz-go's client: the record the script produced
// is there to fetch, three records produced to a new topic (auto-created)
// get offsets 0, 1, 2 and come back, in order, with their keys, values
// and headers; then the program exits 0 on the interrupt and stops
// listening. A serve that ignored -kafka fails at once (no "Kafka
// protocol at" line, or nothing listening there); one serving a cluster
// other than the script's fails on the script's record.
func TestServeKafka(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.tri")
	if err := os.WriteFile(script, []byte("create topic orders String 1\ncreate producer web String RoundRobin\nproduce event web orders order.json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "order.json"), []byte(`{"key": "k", "value": "pizza"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, addr := startServe(t, []string{"-kafka", "127.0.0.1:0", script}, "", kafkaRE)
	waitStderr(t, s, "commands done; serving the Kafka protocol at "+addr+" until interrupted (Ctrl-C)")
	if !strings.Contains(s.stdout.String(), "produced 0-0 to orders p0 at offset 0") {
		t.Errorf("stdout lacks the script's output:\n%s", s.stdout.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	got := consume(ctx, t, addr, "orders", 1)
	if len(got) == 1 && (string(got[0].Key) != "k" || string(got[0].Value) != "pizza" || got[0].Offset != 0) {
		t.Errorf("orders p0: key %q value %q at offset %d, want the script's k, pizza at 0", got[0].Key, got[0].Value, got[0].Offset)
	}

	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	var sent []*kgo.Record
	for i := range 3 {
		sent = append(sent, &kgo.Record{
			Topic:   "clicks",
			Key:     fmt.Appendf(nil, "user-%d", i),
			Value:   fmt.Appendf(nil, "click %d", i),
			Headers: []kgo.RecordHeader{{Key: "n", Value: fmt.Appendf(nil, "%d", i)}},
		})
	}
	for i, r := range producer.ProduceSync(ctx, sent...) {
		if r.Err != nil {
			t.Fatalf("produce %d: %v", i, r.Err)
		}
		if r.Record.Partition != 0 || r.Record.Offset != int64(i) {
			t.Errorf("produce %d: partition %d offset %d, want 0 and %d", i, r.Record.Partition, r.Record.Offset, i)
		}
	}
	producer.Close()

	got = consume(ctx, t, addr, "clicks", 3)
	for i, r := range got {
		w := sent[i]
		if r.Partition != 0 || r.Offset != int64(i) || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || !hasHeader(r, "n", fmt.Sprint(i)) {
			t.Errorf("clicks record %d: p%d offset %d key %q value %q headers %v; want p0 offset %d key %q value %q header n=%d",
				i, r.Partition, r.Offset, r.Key, r.Value, r.Headers, i, w.Key, w.Value, i)
		}
	}
	s.stop(t, addr)
}

// consume reads topic from its start with a client of its own (no group)
// until it has n records or ctx ends (a failure), and returns them.
func consume(ctx context.Context, t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d of %d records before %v", topic, len(got), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("fetch %s p%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	if len(got) != n {
		t.Errorf("%s: %d records, want %d", topic, len(got), n)
	}
	return got
}

func hasHeader(r *kgo.Record, key, value string) bool {
	for _, h := range r.Headers {
		if h.Key == key && string(h.Value) == value {
			return true
		}
	}
	return false
}

// waitStderr waits (10 s at most) for s's stderr to contain line.
func waitStderr(t *testing.T, s *served, line string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.stderr.String(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr lacks %q after 10 s:\n%s", line, s.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServeHTTPAndKafka: with both flags both are served, and the lines
// of each are printed (the monitor's, as TestServe reads them, and the
// Kafka address).
func TestServeHTTPAndKafka(t *testing.T) {
	s, addr := startServe(t, []string{"-http", "127.0.0.1:0", "-kafka", "127.0.0.1:0"}, "create topic t Integer 2\n", kafkaRE)
	re := regexp.MustCompile(`commands done; serving (http://127\.0\.0\.1:[0-9]+/) until interrupted \(Ctrl-C\), and the Kafka protocol at ` + regexp.QuoteMeta(addr) + "\n")
	waitStderr(t, s, "commands done")
	m := re.FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("stderr lacks %s:\n%s", re, s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "monitor page at "+m[1]) {
		t.Errorf("stderr lacks the URL line:\n%s", s.stderr.String())
	}
	if b := get(t, m[1]+"api/state?history=0"); !bytes.Contains(b, []byte(`"topic":"t"`)) {
		t.Errorf("state lacks topic t: %s", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The script's topic, with its two partitions, in Kafka's metadata.
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("t")
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 2 {
		t.Errorf("metadata of t: %+v, want one topic with 2 partitions", resp.Topics)
	}
	cl.Close()
	s.stop(t, addr)
}

// kcatPath is kcat's path; the test is skipped when kcat is not on PATH,
// unless TRIBUTARY_REQUIRE_KCAT=1 (set by .ci/run after installing it),
// which makes that a failure.
func kcatPath(t *testing.T) string {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("TRIBUTARY_REQUIRE_KCAT") == "1" {
			t.Fatalf("kcat is not on PATH and TRIBUTARY_REQUIRE_KCAT=1: %v", err)
		}
		t.Skipf("kcat is not on PATH (apt-get install kcat; TRIBUTARY_REQUIRE_KCAT=1 makes this a failure): %v", err)
	}
	return kcat
}

// TestServeKcat runs kcat (librdkafka's command-line client) against
// `tributary serve -kafka`: the lines of a file produced to a new topic,
// the metadata listing it, a plain consume from the beginning, and a
// consumer group's, each output compared exactly with what was produced.
// Skipped without kcat (kcatPath). A serve that ignored -kafka fails at
// the first kcat (no broker); one that lost, reordered or misnumbered records fails on the
// outputs.
func TestServeKcat(t *testing.T) {
	kcat := kcatPath(t)
	s, addr := startServe(t, []string{"-kafka", "127.0.0.1:0"}, "", kafkaRE)
	lines := []string{"first line", "second line", "third, with a comma", "fourth"}
	file := filepath.Join(t.TempDir(), "lines.txt")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", addr}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat %q: %v\nstdout:\n%s\nstderr:\n%.2000s\nserve's stderr:\n%s", args, err, stdout.String(), stderr.String(), s.stderr.String())
		}
		return stdout.String()
	}
	var want strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&want, "0 %d %s\n", i, l)
	}
	n := fmt.Sprint(len(lines))

	run(t, "-P", "-t", "kcat_lines", "-l", file)
	if md := run(t, "-L", "-t", "kcat_lines"); !strings.Contains(md, `topic "kcat_lines" with 1 partitions:`) ||
		!strings.Contains(md, "partition 0, leader 0,") || !strings.Contains(md, "broker 0 at "+addr) {
		t.Errorf("kcat -L lacks the topic, its partition or the broker at %s:\n%s", addr, md)
	}
	// -e: kcat exits at the log end, when a fetch there comes back empty.
	if got := run(t, "-C", "-t", "kcat_lines", "-o", "beginning", "-e", "-f", "%p %o %s\\n"); got != want.String() {
		t.Errorf("kcat -C printed:\n%s\nwant:\n%s", got, want.String())
	}
	t.Run("group", func(t *testing.T) {
		if got := run(t, "-G", "kcat_group", "-X", "auto.offset.reset=earliest", "-c", n, "-f", "%p %o %s\\n", "kcat_lines"); got != want.String() {
			t.Errorf("kcat -G printed:\n%s\nwant:\n%s", got, want.String())
		}
	})
	s.stop(t, addr)
}

// TestServeKcatBalancedGroup runs two kcat -G consumers of one group on
// a topic of two partitions made by serve's script: once both are members
// (DescribeGroups: Stable, two members, one partition each), two lines
// are produced to each partition, and each consumer prints exactly its
// own partition's two, in order. Broken variants caught: an assignment
// handing both partitions to one member (one kcat prints four lines or
// none), a SyncGroup giving the leader's assignment to everyone (both
// print the same partition), lost or reordered records.
func TestServeKcatBalancedGroup(t *testing.T) {
	kcat := kcatPath(t)
	s, addr := startServe(t, []string{"-kafka", "127.0.0.1:0"}, "create topic pair String\ncreate partition pair p1\n", kafkaRE)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	outs := make([]bytes.Buffer, 2)
	errs := make([]bytes.Buffer, 2)
	done := make(chan error, 2)
	for i := range outs {
		cmd := exec.CommandContext(ctx, kcat, "-b", addr, "-G", "pairs", "-X", "auto.offset.reset=earliest", "-c", "2", "-f", "%p %o %s\\n", "pair")
		cmd.Stdout, cmd.Stderr = &outs[i], &errs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"pairs"}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("DescribeGroups: %v (kcat stderr: %s / %s)", err, errs[0].String(), errs[1].String())
		}
		if g := resp.Groups[0]; g.State == "Stable" && len(g.Members) == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for p := range int32(2) {
		for i := range 2 {
			r := &kgo.Record{Topic: "pair", Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range outs {
		if err := <-done; err != nil {
			t.Fatalf("kcat -G: %v\nstderr: %s / %s", err, errs[0].String(), errs[1].String())
		}
	}
	var got []string
	for i := range outs {
		got = append(got, outs[i].String())
	}
	slices.Sort(got)
	want := []string{"0 0 p0-0\n0 1 p0-1\n", "1 0 p1-0\n1 1 p1-1\n"}
	if !slices.Equal(got, want) {
		t.Fatalf("the two kcat -G consumers printed %q, want one partition each: %q", got, want)
	}
	s.stop(t, addr)
}

// TestREADMEKafkaSession runs the kcat session README.md shows under
// "Kafka clients" against `tributary serve -kafka` (on a free port in
// place of the README's 127.0.0.1:9092): each "$ " line after the serve
// runs in sh, and its standard output must be exactly the lines below it.
// A README whose output drifted from what kcat prints fails here.
func TestREADMEKafkaSession(t *testing.T) {
	kcatPath(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Kafka clients\n")
	if !ok {
		t.Fatal(`README.md has no "## Kafka clients" section`)
	}
	_, block, ok := strings.Cut(section, "```text\n")
	if !ok {
		t.Fatal("the Kafka section has no text block")
	}
	block, _, _ = strings.Cut(block, "```")
	lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	const readmeAddr = "127.0.0.1:9092"
	if !strings.HasPrefix(lines[0], "$ tributary serve -kafka "+readmeAddr+" </dev/null &") {
		t.Fatalf("the session starts %q, want the serve line", lines[0])
	}
	s, addr := startServe(t, []string{"-kafka", "127.0.0.1:0"}, "", kafkaRE)
	commands := 0
	for i := 1; i < len(lines); {
		cmdline, ok := strings.CutPrefix(lines[i], "$ ")
		if !ok {
			t.Fatalf("line %q is neither a command nor its output", lines[i])
		}
		i++
		var want strings.Builder
		for ; i < len(lines) && !strings.HasPrefix(lines[i], "$ "); i++ {
			want.WriteString(lines[i] + "\n")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(cmdline, readmeAddr, addr))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmdline, err, stderr.String())
		}
		if stdout.String() != want.String() {
			t.Errorf("%s printed:\n%s\nREADME shows:\n%s", cmdline, stdout.String(), want.String())
		}
		commands++
	}
	if commands < 3 {
		t.Fatalf("%d commands after the serve, want the produce, the consume and the group", commands)
	}
	s.stop(t, addr)
}

// TestServeKafkaAdvertised: with -kafka-advertised, Metadata gives
// clients that address for the broker, not the listener's; without
// -kafka it is a usage error. Broken variant caught: the flag parsed and
// not passed to the front end (Metadata shows the listener).
func TestServeKafkaAdvertised(t *testing.T) {
	var stderr bytes.Buffer
	if code := runServe(context.Background(), []string{"-http", "127.0.0.1:0", "-kafka-advertised", "b.example:9092"}, strings.NewReader(""), false, io.Discard, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "-kafka-advertised needs -kafka") {
		t.Errorf("-kafka-advertised without -kafka: exit %d, %q", code, stderr.String())
	}
	for _, bad := range []string{":9092", "0.0.0.0:9092", "[::]:9092"} {
		stderr.Reset()
		if code := runServe(context.Background(), []string{"-kafka", "127.0.0.1:0", "-kafka-advertised", bad}, strings.NewReader(""), false, io.Discard, &stderr); code != exitUsage ||
			!strings.Contains(stderr.String(), "want a host clients can reach") {
			t.Errorf("-kafka-advertised %s: exit %d, %q", bad, code, stderr.String())
		}
	}
	s, addr := startServe(t, []string{"-kafka", "127.0.0.1:0", "-kafka-advertised", "broker.example:19092"}, "",
		regexp.MustCompile(`tributary: Kafka protocol at (127\.0\.0\.1:[0-9]+), clients told broker\.example:19092\n`))
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != "broker.example" || resp.Brokers[0].Port != 19092 {
		t.Errorf("Metadata's brokers %+v, want broker.example:19092", resp.Brokers)
	}
	cl.Close()
	s.stop(t, addr)
}

// TestServeKafkaWorkloads runs the kafka module's franz-go workloads
// (package kafkatest, which the module's tests also run against kfake)
// against `tributary serve -kafka`: a classic consumer group of three kgo
// members over 10,000 records on 6 partitions, one leaving after a third
// and one joining after two thirds (no record lost or misplaced,
// per-partition order within each assignment, and OffsetFetch — the
// cluster's committed offsets — at every log end), then a share consumer
// accepting, releasing and rejecting (each record's delivery counts).
func TestServeKafkaWorkloads(t *testing.T) {
	s, addr := startServe(t, []string{"-kafka", "127.0.0.1:0"}, "", kafkaRE)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ct := kmsg.NewPtrCreateTopicsRequest()
	tt := kmsg.NewCreateTopicsRequestTopic()
	tt.Topic, tt.NumPartitions, tt.ReplicationFactor = "t", 6, 1
	ct.Topics = append(ct.Topics, tt)
	if resp, err := ct.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %+v", err, resp)
	}
	st := kafkatest.GroupWorkload(t, addr, 10000, 6, kafkatest.Committed(t, addr, "g"))
	t.Logf("group: %d records delivered, %d duplicates, %d assignments, %v", st.Records, st.Duplicates, st.Assigns, st.Elapsed)
	counts := kafkatest.ShareWorkload(t, addr)
	for v, c := range counts {
		want := "[1]"
		if v[len(v)-1] == 'r' {
			want = "[1 2]"
		}
		if fmt.Sprint(c) != want {
			t.Errorf("share: record %s delivered with counts %v, want %s", v, c, want)
		}
	}
	if len(counts) != 12 {
		t.Errorf("share: %d records delivered, want 12", len(counts))
	}
	cl.Close()
	s.stop(t, addr)
}
