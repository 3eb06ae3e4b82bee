package jetstream_test

// Crashes of real processes killed with SIGKILL: a nats-server (alone, or a
// node of a 3-node cluster) under a producer and a consumer, and a consumer
// process. Nothing acked is lost or delivered again, and the consumer that
// comes back, or the one that survives, resumes with the dead one's records.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
	"github.com/nats-io/nats-server/v2/server"
)

// The crash tests run nats-server as a separate OS process: this test
// binary re-executed with crashDirEnv and crashPortEnv set runs
// TestCrashChildServer, which serves JetStream from a file store in that
// directory on that loopback port until it is killed.
const (
	crashDirEnv  = "TRIBUTARY_CRASH_CHILD_DIR"
	crashPortEnv = "TRIBUTARY_CRASH_CHILD_PORT"
	// For a node of a cluster: its name, its route port and every node's
	// route URL, comma-separated.
	crashNameEnv   = "TRIBUTARY_CRASH_CHILD_NAME"
	crashRouteEnv  = "TRIBUTARY_CRASH_CHILD_ROUTE_PORT"
	crashRoutesEnv = "TRIBUTARY_CRASH_CHILD_ROUTES"
)

// TestCrashChildServer is the server process of the crash tests; it skips
// unless started by one (crashServer).
func TestCrashChildServer(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the nats-server process of the crash tests, started by them")
	}
	port, err := strconv.Atoi(os.Getenv(crashPortEnv))
	if err != nil {
		t.Fatalf("%s: %v", crashPortEnv, err)
	}
	opts := &server.Options{
		ServerName: "tributary-crash", Host: "127.0.0.1", Port: port,
		JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
	}
	if name := os.Getenv(crashNameEnv); name != "" {
		rp, err := strconv.Atoi(os.Getenv(crashRouteEnv))
		if err != nil {
			t.Fatalf("%s: %v", crashRouteEnv, err)
		}
		opts.ServerName = name
		opts.Cluster = server.ClusterOpts{Name: "tributary-crash", Host: "127.0.0.1", Port: rp}
		for _, r := range strings.Split(os.Getenv(crashRoutesEnv), ",") {
			u, err := url.Parse(r)
			if err != nil {
				t.Fatalf("%s: %v", crashRoutesEnv, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("not ready after 10s")
	}
	fmt.Println("ready")
	select {} // until SIGKILL
}

// crashServer is a nats-server in a child process, on a fixed loopback
// port and file store, that can be killed with SIGKILL and started again.
type crashServer struct {
	t    *testing.T
	dir  string
	port int
	env  []string // a cluster node's name, route port and routes
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// freePort returns a loopback port free now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newCrashServer(t *testing.T) *crashServer {
	s := &crashServer{t: t, dir: t.TempDir(), port: freePort(t)}
	s.start()
	t.Cleanup(s.kill)
	return s
}

// newCrashCluster starts n nodes of one cluster, each a process with its
// file store, routed to all the others.
func newCrashCluster(t *testing.T, n int) []*crashServer {
	nodes := make([]*crashServer, n)
	routes := make([]string, n)
	rports := make([]int, n)
	for i := range n {
		rports[i] = freePort(t)
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", rports[i])
	}
	for i := range n {
		nodes[i] = &crashServer{t: t, dir: t.TempDir(), port: freePort(t), env: []string{
			crashNameEnv + "=" + fmt.Sprintf("tributary-crash-n%d", i),
			crashRouteEnv + "=" + strconv.Itoa(rports[i]),
			crashRoutesEnv + "=" + strings.Join(routes, ","),
		}}
		nodes[i].start()
		t.Cleanup(nodes[i].kill)
	}
	return nodes
}

// crashURLs is the nodes' client URLs, comma-separated.
func crashURLs(nodes []*crashServer) string {
	us := make([]string, len(nodes))
	for i, n := range nodes {
		us[i] = n.url()
	}
	return strings.Join(us, ",")
}

func (s *crashServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// start runs the child and waits (at most 20 s) until it serves.
func (s *crashServer) start() {
	s.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChildServer$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(append(os.Environ(), crashDirEnv+"="+s.dir, crashPortEnv+"="+strconv.Itoa(s.port)), s.env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	ready := make(chan bool, 1)
	s.cmd, s.done = cmd, make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if sc.Text() == "ready" && !ok {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		cmd.Wait() //nolint:errcheck // killed: the error says so
		close(s.done)
	}()
	select {
	case ok := <-ready:
		if !ok {
			s.t.Fatal("the server process ended before it served")
		}
	case <-time.After(20 * time.Second):
		s.kill()
		s.t.Fatal("the server process did not serve within 20s")
	}
}

// kill sends SIGKILL to the child, if running, and waits for it to end.
func (s *crashServer) kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck // already ended: nothing to kill
	<-s.done
	s.cmd = nil
}

// TestServerCrashLosesNothing: a producer and a consumer over TCP to a
// nats-server process that is killed with SIGKILL twice mid-run and
// restarted on its file store (runCrashWorkload): every record whose Send
// succeeded is delivered (none lost), no record is delivered again after
// its Ack succeeded (no commit lost in a crash), per partition records
// arrive in offset order, and consumption resumes after each restart.
// Records may be published twice (a Send whose reply was lost is tried
// again) and delivered twice (an Ack whose reply was lost): both are
// counted, neither is a failure.
func TestServerCrashLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kills server processes")
	}
	r := runCrashWorkload(t, []*crashServer{newCrashServer(t)}, jetstream.Config{}, 3*time.Minute)
	t.Log(r)
	for _, p := range r.problems {
		t.Error(p)
	}
	if r.outages == 0 {
		t.Error("no call met the outage: the crashes were not exercised")
	}
}

// TestServerCrashCheckCatchesMemoryStorage: the same workload on memory
// storage, which a crash wipes, must fail the check (the broken variant).
func TestServerCrashCheckCatchesMemoryStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("kills server processes")
	}
	r := runCrashWorkload(t, []*crashServer{newCrashServer(t)}, jetstream.Config{Storage: jetstream.MemoryStorage}, 15*time.Second)
	t.Log(r)
	if len(r.problems) == 0 {
		t.Fatal("a crash of a memory-stored server passed the check")
	}
}

// crashReport is what runCrashWorkload counted, and what it found wrong.
type crashReport struct {
	values, parts int
	lost          int // values whose Send succeeded and that were never delivered
	ackedAgain    int // deliveries of a record after its Ack had succeeded
	twoOwners     int // deliveries of a record to another consumer than its first
	redelivered   int // deliveries beyond the first, in all
	sendsAgain    int // Sends tried again after ErrUnavailable
	records       int // distinct records delivered
	outages       int // calls that met ErrUnavailable
	resumed       []time.Duration
	problems      []string
}

func (r crashReport) String() string {
	return fmt.Sprintf("%d values over %d partitions, 2 consumers, a server process killed (SIGKILL) and restarted at a third and at two thirds delivered: %d lost, %d delivered again after a successful Ack, %d delivered to a second consumer, %d redelivered in all, %d Sends tried again, %d records delivered, %d calls met ErrUnavailable; consumption resumed %v after the restarts; %d problems",
		r.values, r.parts, r.lost, r.ackedAgain, r.twoOwners, r.redelivered, r.sendsAgain, r.records, r.outages, r.resumed, len(r.problems))
}

// TestClusterNodeCrashLosesNothing: the same workload on a 3-node
// cluster of processes with Replicas 3, one node killed with SIGKILL and
// restarted at a third (node 0) and at two thirds (node 1) consumed.
// With TRIBUTARY_JS_CLUSTER=1 (make test-jetstream).
func TestClusterNodeCrashLosesNothing(t *testing.T) {
	if os.Getenv("TRIBUTARY_JS_CLUSTER") != "1" {
		t.Skip("a 3-node cluster: TRIBUTARY_JS_CLUSTER=1 (make test-jetstream)")
	}
	r := runCrashWorkload(t, newCrashCluster(t, 3), jetstream.Config{Replicas: 3}, 3*time.Minute)
	t.Log(r)
	for _, p := range r.problems {
		t.Error(p)
	}
	if r.outages == 0 {
		t.Log("no call met an outage: the killed nodes' streams failed over within each request")
	}
}

// runCrashWorkload runs a producer of n values (at most backlog ahead of
// the consumer) and a consumer that polls, records and acks, both riding
// out ErrUnavailable, on a backend made with cfg over nodes, and kills
// with SIGKILL and restarts node 0 once a third and node 1 (node 0 again
// on one node) once two thirds of the values are delivered. A problem (an
// error, a check failed, the timeout) is recorded and ends the run.
func runCrashWorkload(t *testing.T, nodes []*crashServer, cfg jetstream.Config, timeout time.Duration) (r crashReport) {
	const parts, n, backlog = 4, 600, 40
	r.values, r.parts = n, parts
	cfg.URL, cfg.Capacity, cfg.RequestTimeout = crashURLs(nodes), 2*n, time.Second
	// A cluster places streams once it has elected its leaders: Open and
	// CreateTopic are tried again on ErrUnavailable for up to 30 s.
	ready := func(what string, err error, start time.Time) bool {
		if err == nil {
			return true
		}
		if !errors.Is(err, tributary.ErrUnavailable) || time.Since(start) > 30*time.Second {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
		return false
	}
	var b *jetstream.Backend
	var err error
	for start := time.Now(); ; {
		if b, err = jetstream.Open(cfg); ready("Open", err, start) {
			break
		}
	}
	defer b.Close()
	c := must(tributary.NewClusterOn(b)).of(t)
	defer c.Close()
	var tp *tributary.Topic[int]
	for start := time.Now(); ; {
		if tp, err = tributary.CreateTopic(c, "orders", parts, tributary.JSON[int]()); ready("CreateTopic", err, start) {
			break
		}
	}
	p := must(tributary.NewProducer[int](c, "p", tributary.RoundRobin())).of(t)
	consumers := []*tributary.Consumer[int]{
		must(tributary.NewConsumer(tp, "g", "c1")).of(t),
		must(tributary.NewConsumer(tp, "g", "c2")).of(t),
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cctx, finish := context.WithCancel(ctx) // the consumers', ended once every value is seen
	defer finish()

	type ref struct {
		p   int32
		off int64
	}
	var (
		mu        sync.Mutex          // guards all below and r
		sent      = map[int]bool{}    // values whose Send succeeded
		delivered = map[ref]int{}     // deliveries per record
		owner     = map[ref]string{}  // the consumer a record was first delivered to
		value     = map[ref]int{}     // the value at each record
		acked     = map[ref]bool{}    // records whose Ack succeeded
		seen      = map[int]bool{}    // values delivered
		last      = map[int32]int64{} // per partition: the highest offset delivered
		progress  = make(chan struct{}, 1)
	)
	for i := range parts {
		last[int32(i)] = -1
	}
	problem := func(format string, args ...any) {
		mu.Lock()
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
		mu.Unlock()
		cancel()
	}
	retryable := func(err error) bool {
		if !errors.Is(err, tributary.ErrUnavailable) || ctx.Err() != nil {
			return false
		}
		mu.Lock()
		r.outages++
		mu.Unlock()
		return true
	}
	seenCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: deferred later, run first
	defer cancel()
	wg.Go(func() { // the producer: every value until its Send succeeds
		for v := range n {
			for {
				_, err := p.Send(ctx, tp, tributary.Message[int]{Value: v})
				if err == nil {
					mu.Lock()
					sent[v] = true
					mu.Unlock()
					break
				}
				if !retryable(err) {
					problem("Send(%d): %v", v, err)
					return
				}
				mu.Lock()
				r.sendsAgain++
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
			for seenCount() < v-backlog && ctx.Err() == nil {
				time.Sleep(time.Millisecond) // keep the producer busy across the crashes
			}
		}
	})
	consumed := make(chan struct{}) // closed once every value is seen
	var once sync.Once
	for _, cons := range consumers {
		wg.Go(func() { // a consumer: poll, record, ack until every value is seen
			for {
				ms, err := cons.Poll(cctx, 16)
				if retryable(err) {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if err != nil {
					if cctx.Err() == nil { // else finished, or timed out (reported by waitFor)
						problem("%s: Poll: %v", cons.Name(), err)
					}
					return
				}
				for _, m := range ms {
					rf := ref{m.Partition, m.Offset}
					mu.Lock()
					if acked[rf] {
						r.ackedAgain++
					}
					if o, ok := owner[rf]; !ok {
						owner[rf] = cons.Name()
					} else if o != cons.Name() {
						r.twoOwners++
					}
					if rf.off < last[rf.p] {
						r.problems = append(r.problems, fmt.Sprintf("partition %d: offset %d after %d", rf.p, rf.off, last[rf.p]))
					}
					last[rf.p] = max(last[rf.p], rf.off)
					if v, ok := value[rf]; ok && v != m.Value {
						r.problems = append(r.problems, fmt.Sprintf("%v: value %d, earlier %d", rf, m.Value, v))
					}
					value[rf], seen[m.Value] = m.Value, true
					delivered[rf]++
					all := len(seen) == n
					mu.Unlock()
					select {
					case progress <- struct{}{}:
					default:
					}
					for {
						err := cons.Ack(m)
						if retryable(err) {
							time.Sleep(20 * time.Millisecond)
							continue
						}
						if err == nil {
							mu.Lock()
							acked[rf] = true
							mu.Unlock()
						} else if !errors.Is(err, tributary.ErrNotInFlight) {
							problem("%s: Ack(%v): %v", cons.Name(), rf, err)
							return
						} // not in flight: an earlier try took effect, its reply lost
						break
					}
					if all {
						once.Do(func() { close(consumed); finish() })
						return
					}
				}
			}
		})
	}
	waitFor := func(done func() bool, what string) bool {
		for !done() {
			select {
			case <-progress:
			case <-consumed:
				return done()
			case <-ctx.Done():
				problem("%s: %d of %d values delivered after %v", what, seenCount(), n, timeout)
				return false
			}
		}
		return true
	}
	for i, at := range []int{n / 3, 2 * n / 3} {
		if !waitFor(func() bool { return seenCount() >= at }, fmt.Sprintf("before the crash at %d", at)) {
			break
		}
		node := nodes[i%len(nodes)]
		node.kill()
		time.Sleep(200 * time.Millisecond)
		node.start()
		restarted, before := time.Now(), seenCount()
		if !waitFor(func() bool { return seenCount() > before }, fmt.Sprintf("after the restart at %d", at)) {
			break
		}
		r.resumed = append(r.resumed, time.Since(restarted))
	}
	waitFor(func() bool { return seenCount() == n }, "at the end")
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for v := range n {
		if sent[v] && !seen[v] {
			r.lost++
		}
	}
	for _, k := range delivered {
		r.redelivered += k - 1
	}
	r.records = len(delivered)
	if len(sent) != n {
		r.problems = append(r.problems, fmt.Sprintf("%d of %d Sends succeeded", len(sent), n))
	}
	if r.lost > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d values sent and never delivered", r.lost))
	}
	if r.ackedAgain > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d deliveries of records already acked: commits lost in a crash", r.ackedAgain))
	}
	if r.twoOwners > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d deliveries to a second consumer (no rebalance happens here)", r.twoOwners))
	}
	return r
}

// crashConsumerEnv, set to a server URL, makes TestCrashChildConsumer the
// consumer process of TestConsumerCrashResumesAtOnce.
const crashConsumerEnv = "TRIBUTARY_CRASH_CHILD_CONSUMER_URL"

// crashSessionEnv, if set, is the consumer process's session timeout.
const crashSessionEnv = "TRIBUTARY_CRASH_CHILD_SESSION"

// TestCrashChildConsumer is the consumer process of
// TestConsumerCrashResumesAtOnce: consumer c1 of group g on topic orders,
// in Run; it prints "acked <partition> <offset>" for each of the first
// crashAcked records it handles (its Ack lands before the next handler
// call), then "stuck" and blocks in the handler until it is killed.
func TestCrashChildConsumer(t *testing.T) {
	url := os.Getenv(crashConsumerEnv)
	if url == "" {
		t.Skip("the consumer process of the crash tests, started by them")
	}
	var session time.Duration
	if v := os.Getenv(crashSessionEnv); v != "" {
		var err error
		if session, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := jetstream.Open(jetstream.Config{URL: url, Capacity: 100, RequestTimeout: 5 * time.Second, SessionTimeout: session})
	if err != nil {
		t.Fatal(err)
	}
	c := must(tributary.NewClusterOn(b)).of(t)
	tp := must(tributary.OpenTopic(c, "orders", tributary.JSON[int]())).of(t)
	cons := must(tributary.NewConsumer(tp, "g", "c1", tributary.WithBatch(8))).of(t)
	handled := 0
	err = cons.Run(context.Background(), func(_ context.Context, m tributary.Message[int]) error {
		if handled > 0 {
			fmt.Printf("acked %d %d\n", prev.p, prev.off)
		}
		if handled == crashAcked {
			fmt.Println("stuck")
			select {} // until SIGKILL
		}
		prev.p, prev.off = m.Partition, m.Offset
		handled++
		return nil
	})
	t.Fatalf("Run returned: %v", err)
}

// crashAcked is how many records the consumer process handles before it
// blocks; prev is the one it handled last, whose Ack has landed once the
// next handler call starts (Run acks before it calls the handler again).
const crashAcked = 10

var prev struct {
	p   int32
	off int64
}

// TestConsumerCrashResumesAtOnce: a consumer process killed with SIGKILL
// in its handler, with records of several partitions in flight to it, and
// a new process under the same member name: the new consumer's Rejoin
// takes every in-flight record back at once (SPEC rule 25; no ack timeout
// is set, so without it they would stay in flight for good), and every
// record the dead process had not acked is handled, the one it was
// handling with Attempt 2.
func TestConsumerCrashResumesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a consumer process")
	}
	c, tp, url := crashTopic(t, 0)
	acked := killStuckConsumer(t, url, 0)
	d := must(c.Describe("orders")).of(t)
	inFlight := 0
	for _, pd := range d.Groups[0].Partitions {
		if pd.InFlight {
			inFlight++
		}
	}
	if inFlight < 2 {
		t.Fatalf("%d partitions in flight to the killed process, want at least 2 (its handler's and its batch's): %+v", inFlight, d.Groups[0])
	}
	restarted := time.Now()
	cons := must(tributary.NewConsumer(tp, "g", "c1")).of(t)
	took, handled, again := consumeRest(t, cons, acked, restarted, 20*time.Second, nil)
	t.Logf("a consumer process killed (SIGKILL) in its handler after %d acks, %d partitions in flight to it; the restarted consumer handled the other %d records in %v, %d of them redelivered (Attempt 2)", len(acked), inFlight, handled, took, again)
	if again < inFlight {
		t.Errorf("%d records redelivered, want at least the %d that were in flight", again, inFlight)
	}
}

// crashRecords is how many records crashTopic publishes.
const crashRecords = 40

// crashTopic starts an embedded server, and on it a backend with session
// timeout session, a cluster and topic orders of 4 partitions holding
// crashRecords records; it returns the cluster, the topic and the server's
// URL for a consumer process.
func crashTopic(t *testing.T, session time.Duration) (*tributary.Cluster, *tributary.Topic[int], string) {
	t.Helper()
	b, srv := start(t, jetstream.Config{Capacity: 100, RequestTimeout: 5 * time.Second, SessionTimeout: session})
	c := must(tributary.NewClusterOn(b)).of(t)
	t.Cleanup(func() { c.Close() })
	tp := must(tributary.CreateTopic(c, "orders", 4, tributary.JSON[int]())).of(t)
	p := must(tributary.NewProducer[int](c, "p", tributary.RoundRobin())).of(t)
	for v := range crashRecords {
		must(p.TrySend(tp, tributary.Message[int]{Value: v})).of(t)
	}
	return c, tp, srv.ClientURL()
}

// consumeRest runs cons until it has handled every record of crashTopic's
// that acked (the killed process's) does not hold, failing the test if it
// handles one of those again or takes longer than limit. It returns the
// time from since until the last was handled, how many it handled and how
// many of them came with Attempt above 1. done, if not nil, runs in the
// handler of the last one.
func consumeRest(t *testing.T, cons *tributary.Consumer[int], acked map[crashRef]bool, since time.Time, limit time.Duration, done func()) (took time.Duration, handled, again int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	seen := map[crashRef]int32{}
	err := cons.Run(ctx, func(_ context.Context, m tributary.Message[int]) error {
		r := crashRef{m.Partition, m.Offset}
		if acked[r] {
			t.Errorf("%v handled again: the killed process had acked it", r)
		}
		seen[r] = m.Attempt
		if len(seen)+len(acked) == crashRecords {
			took = time.Since(since)
			if done != nil {
				done()
			}
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || took == 0 {
		t.Fatalf("Run = %v after %d of the %d records the killed process had not acked, %v after it was killed", err, len(seen), crashRecords-len(acked), time.Since(since))
	}
	for _, a := range seen {
		if a > 1 {
			again++
		}
	}
	return took, len(seen), again
}

// crashRef names a record: partition and offset.
type crashRef struct {
	p   int32
	off int64
}

// killStuckConsumer runs TestCrashChildConsumer as a process on the server
// at url (session: its session timeout, 0 for none), waits until it is
// stuck in its handler, kills it with SIGKILL and returns the records it
// acked.
func killStuckConsumer(t *testing.T, url string, session time.Duration) map[crashRef]bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChildConsumer$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), crashConsumerEnv+"="+url)
	if session > 0 {
		cmd.Env = append(cmd.Env, crashSessionEnv+"="+session.String())
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[crashRef]bool{}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the consumer process ended before it was stuck")
			}
			var r crashRef
			if _, err := fmt.Sscanf(l, "acked %d %d", &r.p, &r.off); err == nil {
				acked[r] = true
			} else if l == "stuck" {
				break wait
			}
		case <-deadline:
			cmd.Process.Kill() //nolint:errcheck // the test fails anyway
			t.Fatal("the consumer process did not get stuck within 60s")
		}
	}
	cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck // it ended: nothing to kill
	for range lines {
	}
	cmd.Wait() //nolint:errcheck // killed
	if len(acked) != crashAcked {
		t.Fatalf("the consumer process acked %d records, want %d", len(acked), crashAcked)
	}
	return acked
}

// TestConsumerCrashExpires: a consumer process killed with SIGKILL in its
// handler that never comes back, under a session timeout of 2 s (SPEC
// rule 24, every process configured alike): another consumer of the
// group, started after the kill, gets the dead member's partitions once
// its session has run out (the survivor's heartbeats expire it) and
// handles every record the dead one had not acked, those in flight to it
// with Attempt 2, within the session timeout plus a few heartbeat
// intervals of the kill.
func TestConsumerCrashExpires(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a consumer process")
	}
	const session = 2 * time.Second
	c, tp, url := crashTopic(t, session)
	acked := killStuckConsumer(t, url, session)
	killed := time.Now()
	cons := must(tributary.NewConsumer(tp, "g", "c2")).of(t)
	took, handled, again := consumeRest(t, cons, acked, killed, 30*time.Second, func() {
		if d, err := c.Describe("orders"); err != nil || len(d.Groups[0].Members) != 1 || d.Groups[0].Members[0] != "c2" {
			t.Errorf("Describe = %+v, %v; want c2 the one member", d.Groups, err)
		}
	})
	bound := session + 3*tributary.HeartbeatInterval(session) + time.Second
	t.Logf("a consumer process killed (SIGKILL) in its handler after %d acks and never restarted, session timeout %v: another consumer handled the other %d records %v after the kill (bound %v), %d of them redelivered", len(acked), session, handled, took, bound, again)
	if again < 1 {
		t.Error("no record redelivered: the dead member's deliveries were not cancelled")
	}
	if took > bound {
		t.Errorf("the dead member's records were handled %v after the kill, more than %v", took, bound)
	}
}
