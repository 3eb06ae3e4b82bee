package monitor

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"html"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// The browser test loads the page in headless Chromium and reads the DOM
// its script built. Chromium is looked for on PATH; when it is missing
// and the test runs as root with apt-get, the test installs Debian's
// chromium package (about a minute). When it cannot, the test is skipped,
// unless TRIBUTARY_BROWSER=1 (make test-browser, CI), which makes a
// missing browser a failure.

var screenshotOut = flag.String("screenshot", "", "also write the browser test's screenshot of the page to this `file` (docs/images/monitor.png: go test ./monitor -run Browser -screenshot ../docs/images/monitor.png)")

var (
	browserOnce sync.Once
	browserPath string
	browserWhy  string // why there is none
)

// chromium returns the browser's path, installing it when it can.
func chromium(t *testing.T) string {
	t.Helper()
	browserOnce.Do(func() {
		browserPath, browserWhy = findChromium()
		if browserPath != "" {
			return
		}
		if os.Geteuid() != 0 {
			browserWhy += "; not root, so apt-get install -y chromium cannot run"
			return
		}
		if _, err := exec.LookPath("apt-get"); err != nil {
			browserWhy += "; no apt-get to install it with"
			return
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", "apt-get update -qq && apt-get install -y -qq chromium")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			browserWhy += fmt.Sprintf("; apt-get install -y chromium failed after %v: %v\n%s", time.Since(start).Round(time.Second), err, lastLines(out, 10))
			return
		}
		t.Logf("installed chromium with apt-get in %v", time.Since(start).Round(time.Second))
		browserPath, browserWhy = findChromium()
	})
	if browserPath == "" {
		if os.Getenv("TRIBUTARY_BROWSER") == "1" {
			t.Fatalf("TRIBUTARY_BROWSER=1 but no browser: %s", browserWhy)
		}
		t.Skipf("no browser: %s (make test-browser, or TRIBUTARY_BROWSER=1, makes this a failure)", browserWhy)
	}
	return browserPath
}

func findChromium() (string, string) {
	names := []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, ""
		}
	}
	return "", "none of " + strings.Join(names, ", ") + " on PATH"
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// browse runs headless Chromium on url with the extra arguments (one of
// --dump-dom, --screenshot=FILE) and returns its standard output.
func browse(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile, err := os.MkdirTemp("", "tributary-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(profile)
	argv := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + profile,
	}, args...)
	argv = append(argv, url)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, lastLines(stderr.Bytes(), 20))
	}
	t.Logf("chromium %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return stdout.Bytes()
}

// gate pauses the traffic: producers and consumers wait at it while closed.
type gate struct {
	mu     sync.Mutex // guards paused; cond's lock
	cond   *sync.Cond
	paused bool
	busy   sync.WaitGroup // goroutines between two waits at the gate
}

func newGate() *gate { g := &gate{}; g.cond = sync.NewCond(&g.mu); return g }

// pass waits while the gate is paused or ctx has ended (then false).
func (g *gate) pass(ctx context.Context) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.paused && ctx.Err() == nil {
		g.cond.Wait()
	}
	return ctx.Err() == nil
}

func (g *gate) set(paused bool) { g.mu.Lock(); g.paused = paused; g.mu.Unlock(); g.cond.Broadcast() }

// traffic is a live cluster: a producer sending to orders (3 partitions)
// every 2 ms; group billing (Range: b1, b2) taking 10 ms a record, so its
// lag grows; group audit (a1) keeping up; group fraud dead-lettering the
// records whose key is "bad" after 2 attempts.
type traffic struct {
	c    *tributary.Cluster
	g    *gate
	stop func()
}

func startTraffic(t *testing.T) *traffic {
	t.Helper()
	c, err := tributary.NewCluster(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	orders, err := tributary.CreateTopic(c, "orders", 3, tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tributary.CreateTopic(c, "payments", 1, tributary.String()); err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct {
		name string
		a    engine.Assignor
		opts []tributary.GroupOption
	}{
		{"billing", engine.Range, nil},
		{"audit", engine.RoundRobin, nil},
		{"fraud", engine.Sticky, []tributary.GroupOption{tributary.WithDeadLetter("orders-dlq", 2), tributary.WithBackoff(time.Millisecond, time.Millisecond)}},
	} {
		if _, err := c.CreateGroup("orders", g.name, g.a, g.opts...); err != nil {
			t.Fatal(err)
		}
	}
	p, err := tributary.NewProducer[string](c, "web", tributary.RoundRobin())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{c: c, g: newGate()}
	var wg sync.WaitGroup
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	run(func() {
		for i := 0; tr.g.pass(ctx); i++ {
			key := "ok"
			if i%50 == 7 {
				key = "bad"
			}
			if _, err := p.Send(ctx, orders, tributary.Message[string]{Key: key, Value: "order " + strconv.Itoa(i)}); err != nil && ctx.Err() == nil {
				t.Errorf("Send: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	consume := func(group, name string, each time.Duration) {
		cons, err := tributary.NewConsumer(orders, group, name)
		if err != nil {
			t.Fatal(err)
		}
		run(func() {
			defer cons.Close()
			for tr.g.pass(ctx) {
				ms, err := cons.Poll(ctx, 1)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("Poll by %s: %v", name, err)
					}
					return
				}
				time.Sleep(each)
				for _, m := range ms {
					if err := cons.Ack(m); err != nil {
						t.Errorf("Ack by %s: %v", name, err)
					}
				}
			}
		})
	}
	consume("billing", "b1", 10*time.Millisecond)
	consume("billing", "b2", 10*time.Millisecond)
	consume("audit", "a1", 0)
	fraud, err := tributary.NewConsumer(orders, "fraud", "f1")
	if err != nil {
		t.Fatal(err)
	}
	run(func() {
		defer fraud.Close()
		// Run cannot wait at the gate between records: its handler does,
		// so a paused fraud consumer holds at most its batch.
		err := fraud.Run(ctx, func(ctx context.Context, m tributary.Message[string]) error {
			if !tr.g.pass(ctx) {
				return ctx.Err()
			}
			if m.Key == "bad" {
				return errors.New("card declined")
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			t.Errorf("Run of f1: %v", err)
		}
	})
	tr.stop = func() {
		cancel()
		tr.g.set(false)
		wg.Wait()
		c.Close()
	}
	return tr
}

// settle pauses the traffic and waits until two Describes of every topic
// 50 ms apart agree, and returns them.
func (tr *traffic) settle(t *testing.T) map[string]engine.TopicDescription {
	t.Helper()
	tr.g.set(true)
	var last map[string]engine.TopicDescription
	deadline := time.Now().Add(guard)
	for {
		now := map[string]engine.TopicDescription{}
		for _, topic := range tr.c.Topics() {
			d, err := tr.c.Describe(topic)
			if err != nil {
				t.Fatal(err)
			}
			now[topic] = d
		}
		if reflect.DeepEqual(now, last) {
			return now
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not settle after the traffic paused")
		}
		last = now
		time.Sleep(50 * time.Millisecond)
	}
}

// element is one start tag of a dumped DOM: its attributes, and the HTML
// up to the next start tag of the same name (a row's cells).
type element struct {
	attrs map[string]string
	inner string
}

var (
	attrRE = regexp.MustCompile(`([a-z][a-z0-9-]*)="([^"]*)"`)
	cellRE = regexp.MustCompile(`<td[^>]*data-col="([a-z-]+)"[^>]*>([^<]*)</td>`)
)

// elements returns the start tags <tag ...> of dom that have the
// attribute data-row (or any attribute, when row is "") equal to row.
func elements(dom, tag, row string) []element {
	var out []element
	parts := strings.Split(dom, "<"+tag+" ")
	for _, p := range parts[1:] {
		end := strings.IndexByte(p, '>')
		if end < 0 {
			continue
		}
		e := element{attrs: map[string]string{}, inner: p[end+1:]}
		for _, m := range attrRE.FindAllStringSubmatch(p[:end], -1) {
			e.attrs[m[1]] = html.UnescapeString(m[2])
		}
		if row == "" || e.attrs["data-row"] == row {
			out = append(out, e)
		}
	}
	return out
}

// cells returns a row's cells by data-col, as text.
func (e element) cells() map[string]string {
	out := map[string]string{}
	inner := e.inner
	if i := strings.Index(inner, "</tr>"); i >= 0 {
		inner = inner[:i]
	}
	for _, m := range cellRE.FindAllStringSubmatch(inner, -1) {
		out[m[1]] = html.UnescapeString(m[2])
	}
	return out
}

// checkPage checks that dom, the page as the browser built it, shows
// exactly the topics, partitions and groups of want (Describe's), with
// their offsets, owners and lag, in the data attributes and the cells.
func checkPage(dom string, want map[string]engine.TopicDescription) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !strings.Contains(dom, `data-ready="true"`) {
		return errors.New("the page never rendered a state (no data-ready on body)")
	}
	attr := func(e element, name string, w any) {
		if got, ws := e.attrs[name], fmt.Sprint(w); got != ws {
			fail("%s row %v: %s=%q, want %q", e.attrs["data-row"], e.attrs, name, got, ws)
		}
	}
	cell := func(e element, name string, w any) {
		if got, ws := e.cells()[name], fmt.Sprint(w); got != ws {
			fail("%s row %v: cell %s %q, want %q", e.attrs["data-row"], e.attrs, name, got, ws)
		}
	}
	key := func(parts ...any) string { return fmt.Sprint(parts...) }
	parts := map[string]element{}
	for _, e := range elements(dom, "tr", "partition") {
		parts[key(e.attrs["data-topic"], "/", e.attrs["data-partition"])] = e
	}
	groups := map[string]element{}
	for _, e := range elements(dom, "tr", "group") {
		groups[key(e.attrs["data-topic"], "/", e.attrs["data-group"])] = e
	}
	gparts := map[string]element{}
	for _, e := range elements(dom, "tr", "group-partition") {
		gparts[key(e.attrs["data-topic"], "/", e.attrs["data-group"], "/", e.attrs["data-partition"])] = e
	}
	var wparts, wgroups, wgparts int
	for topic, d := range want {
		for _, p := range d.Partitions {
			wparts++
			e, ok := parts[key(topic, "/", p.Partition)]
			if !ok {
				fail("no row of %s partition %d", topic, p.Partition)
				continue
			}
			attr(e, "data-log-start", p.LogStartOffset)
			attr(e, "data-log-end", p.LogEndOffset)
			cell(e, "log-start", p.LogStartOffset)
			cell(e, "log-end", p.LogEndOffset)
		}
		for _, g := range d.Groups {
			wgroups++
			e, ok := groups[key(topic, "/", g.Group)]
			if !ok {
				fail("no row of group %s of %s", g.Group, topic)
				continue
			}
			var lag int64
			for _, p := range g.Partitions {
				lag += p.Lag
				wgparts++
				pe, ok := gparts[key(topic, "/", g.Group, "/", p.Partition)]
				if !ok {
					fail("no row of group %s of %s on partition %d", g.Group, topic, p.Partition)
					continue
				}
				attr(pe, "data-owner", p.Owner)
				attr(pe, "data-committed", p.Committed)
				attr(pe, "data-in-flight", p.InFlight)
				attr(pe, "data-lag", p.Lag)
				cell(pe, "committed", p.Committed)
				cell(pe, "lag", p.Lag)
			}
			attr(e, "data-assignor", g.Assignor)
			attr(e, "data-members", strings.Join(g.Members, " "))
			attr(e, "data-lag", lag)
			cell(e, "lag", lag)
		}
	}
	if len(parts) != wparts || len(groups) != wgroups || len(gparts) != wgparts {
		fail("the page has %d partition, %d group and %d group-partition rows, want %d, %d and %d",
			len(parts), len(groups), len(gparts), wparts, wgroups, wgparts)
	}
	return errors.Join(errs...)
}

// TestBrowserPage loads the page of a live cluster in headless Chromium:
// while the traffic runs, billing's lag grows and the charts have points;
// once it is paused, the DOM shows exactly what Describe says. Pages with
// a wrong lag, committed offset or a missing group are rejected by the
// same check, and the dead letters of fraud are listed.
func TestBrowserPage(t *testing.T) {
	bin := chromium(t)
	begin := time.Now()
	tr := startTraffic(t)
	defer tr.stop()
	m := New(tr.c, WithInterval(200*time.Millisecond))
	defer m.Close()
	srv := httptest.NewServer(m)
	defer srv.Close()
	m.Start()

	// Traffic for 3 s: billing's lag grows from sample to sample.
	time.Sleep(3 * time.Second)
	st := m.State(-1)
	if len(st.History) < 5 {
		t.Fatalf("%d samples after 3 s at 200 ms", len(st.History))
	}
	billingLag := func(s Sample) (sum int64) {
		for _, ts := range s.Topics {
			for _, g := range ts.Groups {
				if ts.Topic == "orders" && g.Group == "billing" {
					for _, l := range g.Lag {
						sum += l
					}
				}
			}
		}
		return sum
	}
	first, last := billingLag(st.History[1]), billingLag(st.History[len(st.History)-1])
	if last <= first || last == 0 {
		t.Fatalf("billing's lag went from %d to %d: the test's consumers are not slower than its producer", first, last)
	}
	t.Logf("billing's lag grew from %d to %d", first, last)

	shot := filepath.Join(t.TempDir(), "monitor.png")
	browse(t, bin, srv.URL+"/", "--screenshot="+shot, "--window-size=1280,1200", "--hide-scrollbars", "--virtual-time-budget=3000")
	checkScreenshot(t, shot)

	want := tr.settle(t)
	dom := string(browse(t, bin, srv.URL+"/", "--dump-dom", "--virtual-time-budget=3000"))
	if err := checkPage(dom, want); err != nil {
		t.Fatalf("the page does not show Describe's state:\n%v", err)
	}
	if d := want["orders"]; len(d.Groups) != 3 || d.Groups[1].Partitions[0].Lag == 0 {
		t.Fatalf("orders' groups %+v: want audit, billing and fraud, billing with lag", d.Groups)
	}
	for _, chart := range []string{`data-chart="rate" data-topic="orders"`, `data-chart="lag" data-topic="orders" data-group="billing"`} {
		i := strings.Index(dom, chart)
		if i < 0 {
			t.Fatalf("no chart %s", chart)
		}
		paths := elements(dom[i:strings.Index(dom[i:], "</svg>")+i], "path", "")
		if len(paths) != 3 {
			t.Fatalf("chart %s has %d lines, want 3 (a partition each)", chart, len(paths))
		}
		for _, p := range paths {
			if n, _ := strconv.Atoi(p.attrs["data-points"]); n < 5 {
				t.Errorf("chart %s line %s has %d points, want 5 or more", chart, p.attrs["data-series"], n)
			}
		}
	}
	dls := elements(dom, "tr", "dead-letter")
	if len(dls) == 0 {
		t.Errorf("no dead letters shown, want fraud's")
	}
	for _, e := range dls {
		if e.attrs["data-group"] != "fraud" || e.attrs["data-dlq-topic"] != "orders-dlq" || e.attrs["data-attempt"] != "2" {
			t.Errorf("dead letter row %v: want group fraud, orders-dlq, attempt 2", e.attrs)
		}
	}

	// The same check rejects wrong pages.
	for _, broken := range []struct {
		name  string
		fault func(*State)
	}{
		{"lag off by one", func(s *State) { s.Topics[0].Groups[1].Partitions[2].Lag++ }},
		{"committed of another partition", func(s *State) {
			ps := s.Topics[0].Groups[1].Partitions
			ps[0].Committed = ps[1].Committed + 1
		}},
		{"a group missing", func(s *State) { s.Topics[0].Groups = s.Topics[0].Groups[:2] }},
		{"a partition missing", func(s *State) { s.Topics[0].Partitions = s.Topics[0].Partitions[:2] }},
	} {
		bm := New(tr.c, WithInterval(200*time.Millisecond))
		bm.cfg.fault = func(s *State) {
			if len(s.Topics) > 0 && s.Topics[0].Topic == "orders" {
				broken.fault(s)
			}
		}
		bsrv := httptest.NewServer(bm)
		bdom := string(browse(t, bin, bsrv.URL+"/", "--dump-dom", "--virtual-time-budget=2000"))
		bsrv.Close()
		bm.Close()
		if err := checkPage(bdom, want); err == nil {
			t.Errorf("broken page (%s) passed the check", broken.name)
		} else {
			t.Logf("broken page (%s) rejected: %.200s", broken.name, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	if *screenshotOut != "" {
		b, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*screenshotOut, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("browser test: %v in all", time.Since(begin).Round(time.Millisecond))
}

// checkScreenshot checks that file is a 1280-pixel-wide PNG that is not a
// blank page: it has many colours (text, lines of several colours).
func checkScreenshot(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if w := img.Bounds().Dx(); w != 1280 {
		t.Errorf("screenshot %d pixels wide, want 1280", w)
	}
	colours := map[[3]uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			colours[[3]uint32{cr >> 12, cg >> 12, cb >> 12}] = true
		}
	}
	if len(colours) < 20 {
		t.Errorf("screenshot has %d colours: a blank page?", len(colours))
	}
}
