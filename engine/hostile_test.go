package engine_test

// Hostile tests: adversarial inputs and races against the engine, checked
// against package model (sequential scripts, small concurrent batches by
// brute-force linearization) and against engine-only invariants (storms).
// Every name here starts with "h" or "Hostile" so as not to clash with the
// other test files of the package. Goroutines report through hFail (never
// require off the test goroutine); every goroutine group runs under hRun,
// which fails with all stacks instead of hanging (SPEC rule 14).

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/model"
)

// ---------------------------------------------------------------------------
// Operations, applied identically to the engine and to the model.

const (
	hCreate = iota
	hJoin
	hLeave
	hPublish
	hPoll
	hAck
	hRetry
)

var hKindName = [...]string{"Create", "Join", "Leave", "Publish", "Poll", "Ack", "Retry"}

// hOp is one core call. n is partitionCount (Create) or maxRecords (Poll).
type hOp struct {
	kind                 int
	topic, group, member string
	part                 int32
	off                  int64
	n                    int32
	payload              string
}

func (o hOp) String() string {
	switch o.kind {
	case hCreate:
		return fmt.Sprintf("Create(%q, %d)", o.topic, o.n)
	case hJoin, hLeave:
		return fmt.Sprintf("%s(%q, %q, %q)", hKindName[o.kind], o.topic, o.group, o.member)
	case hPublish:
		p := o.payload
		if len(p) > 40 {
			p = p[:40] + "…"
		}
		return fmt.Sprintf("Publish(%q, %d, %q)", o.topic, o.part, p)
	case hPoll:
		return fmt.Sprintf("Poll(%q, %q, %q, %d)", o.topic, o.group, o.member, o.n)
	default:
		return fmt.Sprintf("%s(%q, %q, %q, %d, %d)", hKindName[o.kind], o.topic, o.group, o.member, o.part, o.off)
	}
}

func hC(topic string, n int32) hOp { return hOp{kind: hCreate, topic: topic, n: n} }
func hJ(topic, group, member string) hOp {
	return hOp{kind: hJoin, topic: topic, group: group, member: member}
}
func hL(topic, group, member string) hOp {
	return hOp{kind: hLeave, topic: topic, group: group, member: member}
}
func hPub(topic string, p int32, s string) hOp {
	return hOp{kind: hPublish, topic: topic, part: p, payload: s}
}
func hQ(topic, group, member string, n int32) hOp {
	return hOp{kind: hPoll, topic: topic, group: group, member: member, n: n}
}
func hA(topic, group, member string, p int32, off int64) hOp {
	return hOp{kind: hAck, topic: topic, group: group, member: member, part: p, off: off}
}
func hR(topic, group, member string, p int32, off int64) hOp {
	return hOp{kind: hRetry, topic: topic, group: group, member: member, part: p, off: off}
}

// hOut is a call's observable outcome. On error only Err is kept.
type hOut struct {
	Err   string // "", "invalid", or "other: …" (an error not wrapping ErrInvalidArgument)
	OK    bool
	N     int64
	Parts []int32
	Recs  []engine.Record
}

func hFinish(out hOut, err error, invalid error) hOut {
	if err == nil {
		return out
	}
	if errors.Is(err, invalid) {
		return hOut{Err: "invalid"}
	}
	return hOut{Err: "other: " + err.Error()}
}

func hEngine(b *engine.Broker, o hOp) hOut {
	var out hOut
	var err error
	switch o.kind {
	case hCreate:
		out.OK, err = b.Create(o.topic, o.n)
	case hJoin:
		out.Parts, err = b.Join(o.topic, o.group, o.member)
	case hLeave:
		out.OK, err = b.Leave(o.topic, o.group, o.member)
	case hPublish:
		out.N, err = b.Publish(o.topic, o.part, o.payload)
	case hPoll:
		out.Recs, err = b.Poll(o.topic, o.group, o.member, o.n)
	case hAck:
		out.OK, err = b.Ack(o.topic, o.group, o.member, o.part, o.off)
	case hRetry:
		out.OK, err = b.Retry(o.topic, o.group, o.member, o.part, o.off)
	}
	return hFinish(out, err, engine.ErrInvalidArgument)
}

func hModel(m *model.Broker, o hOp) hOut {
	var out hOut
	var err error
	switch o.kind {
	case hCreate:
		out.OK, err = m.Create(o.topic, o.n)
	case hJoin:
		out.Parts, err = m.Join(o.topic, o.group, o.member)
	case hLeave:
		out.OK, err = m.Leave(o.topic, o.group, o.member)
	case hPublish:
		out.N, err = m.Publish(o.topic, o.part, o.payload)
	case hPoll:
		var rs []model.Record
		rs, err = m.Poll(o.topic, o.group, o.member, o.n)
		if rs != nil {
			out.Recs = make([]engine.Record, 0, len(rs))
			for _, r := range rs {
				out.Recs = append(out.Recs, engineRecord(r))
			}
		}
	case hAck:
		out.OK, err = m.Ack(o.topic, o.group, o.member, o.part, o.off)
	case hRetry:
		out.OK, err = m.Retry(o.topic, o.group, o.member, o.part, o.off)
	}
	return hFinish(out, err, model.ErrInvalidArgument)
}

// hSame reports whether two outcomes are equal, records compared on every
// field (sameRecords: Time as an instant).
func hSame(a, b hOut) bool {
	return a.Err == b.Err && a.OK == b.OK && a.N == b.N &&
		reflect.DeepEqual(a.Parts, b.Parts) && sameRecords(a.Recs, b.Recs)
}

func hOutString(o hOut) string {
	if o.Err != "" {
		return "err " + o.Err
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "ok=%v n=%d parts=%v(nil=%v) recs=[", o.OK, o.N, o.Parts, o.Parts == nil)
	for _, r := range o.Recs {
		p := r.Payload
		if len(p) > 16 {
			p = p[:16] + "…"
		}
		fmt.Fprintf(&sb, " %s/%d/%d %q#%d", r.Topic, r.Partition, r.Offset, p, r.Attempt)
		if r.Key != "" || r.Headers != nil {
			fmt.Fprintf(&sb, " key=%q headers=%q", r.Key, r.Headers)
		}
		fmt.Fprintf(&sb, " @%d", r.Time.UnixNano())
	}
	fmt.Fprintf(&sb, " ](nil=%v)", o.Recs == nil)
	return sb.String()
}

// ---------------------------------------------------------------------------
// State probes: everything the engine lets a caller observe without changing
// anything, in a form comparable with the model.

// hInspector is the read-only inspection API engine.Broker and model.Broker share.
type hInspector interface {
	PartitionCount(topic string) (int32, error)
	LogStartOffset(topic string, partition int32) (int64, error)
	LogEndOffset(topic string, partition int32) (int64, error)
	Committed(topic, group string, partition int32) (int64, error)
	InFlight(topic, group string, partition int32) (bool, error)
	Attempts(topic, group string, partition int32) (int32, error)
}

func hErrClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, engine.ErrInvalidArgument), errors.Is(err, model.ErrInvalidArgument):
		return "invalid"
	case errors.Is(err, engine.ErrUnknownGroup), errors.Is(err, model.ErrUnknownGroup):
		return "nogroup"
	default:
		return "other:" + err.Error()
	}
}

// hProbe renders the observable state of the given topics and groups. Probe
// partitions go one past the partition count (and -1) to check the errors.
func hProbe(x hInspector, topics, groups []string) string {
	var buf []byte
	num := func(v int64, err error) {
		buf = strconv.AppendInt(append(buf, ' '), v, 10)
		if err != nil {
			buf = append(buf, hErrClass(err)...)
		}
	}
	for _, t := range topics {
		buf = strconv.AppendQuote(buf, t)
		n, err := x.PartitionCount(t)
		num(int64(n), err)
		if err != nil {
			buf = append(buf, '\n')
			continue
		}
		for p := int32(-1); p <= n; p++ {
			buf = append(buf, " | p"...)
			buf = strconv.AppendInt(buf, int64(p), 10)
			num(x.LogStartOffset(t, p))
			num(x.LogEndOffset(t, p))
			for _, g := range groups {
				buf = append(buf, ' ')
				buf = append(buf, g...)
				num(x.Committed(t, g, p))
				f, err := x.InFlight(t, g, p)
				buf = strconv.AppendBool(append(buf, '/'), f)
				buf = append(buf, hErrClass(err)...)
				a, err := x.Attempts(t, g, p)
				buf = append(buf, '#')
				num(int64(a), err)
			}
		}
		buf = append(buf, '\n')
	}
	return string(buf)
}

// hTopicsGroups returns the model's topics and the union of their groups,
// plus extra names (absent ones must be absent in the engine too).
func hTopicsGroups(m *model.Broker, extraTopics, extraGroups []string) (topics, groups []string) {
	topics = append(m.Topics(), extraTopics...)
	groups = slices.Clone(extraGroups)
	for _, t := range m.Topics() {
		gs, _ := m.Groups(t)
		groups = append(groups, gs...)
	}
	slices.Sort(topics)
	slices.Sort(groups)
	return slices.Compact(topics), slices.Compact(groups)
}

// hPair is an engine and a model driven in lockstep, on one clock.
type hPair struct {
	t     testing.TB
	b     *engine.Broker
	m     *model.Broker
	clock *testclock.Clock // both brokers' clock; do advances it before each step
	steps []hStep          // recent steps, formatted only on failure
}

func hNewPair(t testing.TB, capacity int32) *hPair {
	t.Helper()
	clock := testclock.New()
	b, err := hNew(capacity, engine.WithClock(clock.Now))
	if err != nil {
		t.Fatalf("hNew(%d): %v", capacity, err)
	}
	m, err := model.New(capacity, model.WithClock(clock.Now))
	if err != nil {
		t.Fatalf("model.New(%d): %v", capacity, err)
	}
	return &hPair{t: t, b: b, m: m, clock: clock}
}

// do applies o to both and fails on any difference in outcome, records
// compared on every field. The clock moves on by a millisecond first, so
// that records published by different steps have different times.
func (h *hPair) do(o hOp) hOut {
	h.t.Helper()
	h.clock.Advance(time.Millisecond)
	got, want := hEngine(h.b, o), hModel(h.m, o)
	if len(h.steps) >= 200 {
		h.steps = append(h.steps[:0], h.steps[len(h.steps)-30:]...)
	}
	h.steps = append(h.steps, hStep{o, want})
	if !hSame(got, want) {
		h.t.Fatalf("step %s:\n engine: %s\n model:  %s\nhistory (model outcomes):\n  %s",
			o, hOutString(got), hOutString(want), strings.Join(h.tail(30), "\n  "))
	}
	return got
}

// hStep is one call and the model's outcome of it.
type hStep struct {
	op  hOp
	out hOut
}

func (h *hPair) tail(n int) []string {
	steps := h.steps
	if len(steps) > n {
		steps = steps[len(steps)-n:]
	}
	var out []string
	for _, s := range steps {
		out = append(out, fmt.Sprintf("%s -> %s", s.op, hOutString(s.out)))
	}
	return out
}

// same fails unless the engine's observable state equals the model's, on
// every model topic and group plus the extra (possibly absent or invalid)
// names, and the model's own invariants hold.
func (h *hPair) same(extraTopics, extraGroups []string) {
	h.t.Helper()
	topics, groups := hTopicsGroups(h.m, extraTopics, extraGroups)
	h.sameOn(topics, groups)
}

// sameOn is same on exactly the given topics and groups.
func (h *hPair) sameOn(topics, groups []string) {
	h.t.Helper()
	got, want := hProbe(h.b, topics, groups), hProbe(h.m, topics, groups)
	if got != want {
		h.t.Fatalf("state differs\nengine:\n%s\nmodel:\n%s\nlast steps:\n  %s",
			got, want, strings.Join(h.tail(30), "\n  "))
	}
	if err := h.m.CheckInvariants(); err != nil {
		h.t.Fatalf("model invariant (test bug?): %v", err)
	}
}

// ---------------------------------------------------------------------------
// Goroutine plumbing.

// hRun runs fs concurrently and fails, with every stack, if they are not all
// done within d: nothing may deadlock or wait for a future event.
func hRun(t *testing.T, d time.Duration, fs ...func()) {
	t.Helper()
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Go(f)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("goroutines not done within %v (deadlock or waiting):\n%s", d, buf)
	}
}

// hFailures collects failures from goroutines and stops them early.
type hFailures struct {
	mu   sync.Mutex
	msgs []string
	stop atomic.Bool
}

func (f *hFailures) fail(format string, args ...any) {
	f.mu.Lock()
	if len(f.msgs) < 20 {
		f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	}
	f.mu.Unlock()
	f.stop.Store(true)
}

func (f *hFailures) report(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.msgs) > 0 {
		t.Fatalf("%d failure(s):\n%s", len(f.msgs), strings.Join(f.msgs, "\n"))
	}
}

const hDeadline = 30 * time.Second

// hNew builds every broker of this file: a seam for running these tests
// against a deliberately broken engine, from a test file built with the
// tributary_faults tag that replaces it with a constructor calling
// InjectFault (how the tests' power to fail was checked).
var hNew = engine.New

// ---------------------------------------------------------------------------
// Identifier, integer and payload extremes (sequential, against the model).

// hLookalikes are identifiers that look valid to a human but are not, plus
// a few valid oddities.
var hLookalikes = []string{
	"", " ", "a ", " a", "a\x00", "\x00", "\x00a", "a\x00b",
	"ａ",       // fullwidth a
	"а",       // Cyrillic a
	"A\u0301", // combining accent
	"a\u200b", // zero-width space
	"\ufeffa", // BOM
	"a.b", "a/b", "a\tb", "a\nb", "a:b", "a+b", "é", "ß",
	"\xff", "\xc0\x80", "a\xed\xa0\x80", // invalid UTF-8, overlong NUL, surrogate
	strings.Repeat("a", 63) + "é", // 65 bytes
	strings.Repeat("a", 62) + "é", // 64 bytes, still invalid
	strings.Repeat("a", 64),       // valid
	strings.Repeat("a", 65),       // too long
	strings.Repeat("a", 1000),     // far too long
	strings.Repeat("Z", 64), strings.Repeat("-", 64), strings.Repeat("_", 64), "0", "-", "_",
}

func hValidByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// hHostileIDs returns, for every byte 0..255, identifiers carrying it at
// the start and end of a 64-byte id, alone, and after 64 valid bytes; then
// the lookalikes.
func hHostileIDs() []string {
	var ids []string
	for c := 0; c < 256; c++ {
		for _, pos := range []int{0, 63} {
			id := []byte(strings.Repeat("q", 64))
			id[pos] = byte(c)
			ids = append(ids, string(id))
		}
		ids = append(ids, string([]byte{byte(c)}))
		ids = append(ids, strings.Repeat("q", 64)+string([]byte{byte(c)})) // 65 bytes
	}
	return append(ids, hLookalikes...)
}

// TestHostileIdentifiersMatchModel runs every core method with every hostile
// identifier in each of the topic, group and member positions, against a
// live state (records in flight, a memberful group), and requires the
// engine's outcomes and the resulting state to equal the model's: an invalid
// identifier is ErrInvalidArgument and changes nothing; a valid odd one works.
func TestHostileIdentifiersMatchModel(t *testing.T) {
	h := hNewPair(t, 3)
	h.do(hC("T", 4))
	for p := int32(0); p < 4; p++ {
		h.do(hPub("T", p, fmt.Sprint("r", p)))
		h.do(hPub("T", p, fmt.Sprint("s", p)))
	}
	h.do(hJ("T", "G", "m1"))
	h.do(hJ("T", "G", "m2"))
	h.do(hQ("T", "G", "m1", 1)) // p0 in flight to m1
	ids := hHostileIDs()
	for i, id := range ids {
		valid := len(id) >= 1 && len(id) <= 64
		for j := 0; j < len(id); j++ {
			valid = valid && hValidByte(id[j])
		}
		// The id as topic: create it, then use it everywhere.
		before := hProbe(h.b, []string{"T"}, []string{"G"})
		for _, o := range []hOp{
			hJ(id, "G", "m1"), hPub(id, 0, "x"), hR(id, "G", "m1", 0, 0),
			hC(id, 0), hC(id, 2), hC(id, 3),
			hPub(id, 1, "y"), hJ(id, "G", "m1"), hQ(id, "G", "m1", 64), hA(id, "G", "m1", 1, 0), hL(id, "G", "m1"),
		} {
			out := h.do(o)
			if !valid && out.Err != "invalid" {
				t.Fatalf("%s with invalid topic id: %s, want ErrInvalidArgument", o, hOutString(out))
			}
		}
		// The id as group and as member of topic T.
		for _, o := range []hOp{
			hQ("T", id, "m1", 1), hR("T", id, "m1", 0, 0), hL("T", id, "m1"),
			hJ("T", id, "m1"), hQ("T", id, "m1", 1), hA("T", id, "m1", 0, 0), hL("T", id, "m1"),
			hQ("T", "G", id, 1), hA("T", "G", id, 0, 0), hR("T", "G", id, 1, 0),
			hJ("T", "G", id), hL("T", "G", id),
		} {
			out := h.do(o)
			if !valid && out.Err != "invalid" {
				t.Fatalf("%s with invalid id: %s, want ErrInvalidArgument", o, hOutString(out))
			}
		}
		if !valid {
			if after := hProbe(h.b, []string{"T"}, []string{"G"}); after != before {
				t.Fatalf("calls with invalid id %q changed state:\nbefore:\n%s\nafter:\n%s", id, before, after)
			}
		} else {
			// A valid member joins G and leaves again: rebalances happen, G's
			// in-flight delivery of p0 may be cancelled; mirrored by the model.
			h.do(hJ("T", "G", id))
			h.do(hQ("T", "G", id, 64))
			h.do(hL("T", "G", id))
		}
		if i%16 == 0 {
			h.sameOn([]string{"T", id}, []string{"G", id})
		}
	}
	h.sameOn([]string{"T"}, []string{"G"})
	if err := h.m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestHostileIntegerExtremesMatchModel drives every integer argument to its
// extremes (int32 and int64 limits, off-by-one around each bound) against
// the model, checking the whole state after every call.
func TestHostileIntegerExtremesMatchModel(t *testing.T) {
	for _, c := range []int32{math.MinInt32, -1000, -1, 0, 1, 2, 999, 1000, 1001, math.MaxInt32} {
		_, errE := hNew(c)
		_, errM := model.New(c)
		if hErrClass(errE) != hErrClass(errM) {
			t.Fatalf("New(%d): engine %v, model %v", c, errE, errM)
		}
	}
	parts := []int32{math.MinInt32, -2, -1, 0, 1, 2, 3, 4, 63, 64, 65, math.MaxInt32}
	offs := []int64{math.MinInt64, math.MinInt64 + 1, -2, -1, 0, 1, 2, 3, math.MaxInt32, math.MaxInt32 + 1, math.MaxInt64 - 1, math.MaxInt64}
	counts := []int32{math.MinInt32, -1, 0, 1, 3, 63, 64, 65, 128, math.MaxInt32}
	h := hNewPair(t, 2)
	for _, n := range counts {
		h.do(hC("T", n)) // only 1 wins; later ones are false or invalid
		h.do(hC(fmt.Sprint("T", n+1<<20), n))
		h.same(nil, nil)
	}
	for _, n := range counts {
		h.do(hC("T", n)) // duplicate: invalid count is an error even so
	}
	h.do(hC("W", 4))
	h.do(hJ("W", "G", "a"))
	h.do(hJ("W", "H", "b"))
	extraG := []string{"G", "H", "X"}
	for _, p := range parts {
		h.do(hPub("W", p, "v"))
		h.do(hPub("W", p, "w"))
		h.do(hPub("W", p, "full?"))
		h.same([]string{"W"}, extraG)
	}
	for _, n := range []int32{math.MinInt32, -1, 0, 1, 2, 3, 64, 65, math.MaxInt32} {
		h.do(hQ("W", "G", "a", n))
		h.do(hQ("W", "G", "ghost", n))
		h.do(hQ("W", "X", "a", n))
		h.same([]string{"W"}, extraG)
	}
	for _, p := range parts {
		for _, off := range offs {
			for _, k := range []int{hAck, hRetry} {
				h.do(hOp{kind: k, topic: "W", group: "G", member: "a", part: p, off: off})
				h.do(hOp{kind: k, topic: "W", group: "X", member: "a", part: p, off: off})
				h.do(hOp{kind: k, topic: "W", group: "G", member: "b", part: p, off: off})
				h.do(hOp{kind: k, topic: "W", group: "G", member: "é", part: p, off: off})
			}
		}
		h.same([]string{"W"}, extraG)
		h.do(hQ("W", "G", "a", 64))
	}
}

// TestHostilePayloadsRoundTrip publishes payloads no text protocol would
// survive (1 MiB, empty, NUL, every byte, invalid UTF-8) and requires every
// group to receive them byte-exact, each once, in offset order.
func TestHostilePayloadsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	payloads := []string{
		"", "\x00", string(all), string(big), "\xff\xfe\xfd", "\xc0\x80", "a\xed\xa0\x80b",
		strings.Repeat("\x00", 4096), "\u2028\u2029", "\r\n", string(big[:65536]) + "\x00", "",
	}
	b, err := hNew(int32(len(payloads)))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Create("P", 2); !ok || err != nil {
		t.Fatalf("Create: %v %v", ok, err)
	}
	for _, g := range []string{"g1", "g2"} {
		if _, err := b.Join("P", g, "m"); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range payloads {
		for p := int32(0); p < 2; p++ {
			off, err := b.Publish("P", p, s)
			if err != nil || off != int64(i) {
				t.Fatalf("Publish #%d to p%d: %d %v", i, p, off, err)
			}
		}
	}
	if off, err := b.Publish("P", 0, "over"); off != -1 || err != nil {
		t.Fatalf("publish to full partition: %d %v, want -1", off, err)
	}
	for _, g := range []string{"g1", "g2"} {
		for i := range payloads {
			recs, err := b.Poll("P", g, "m", 64)
			if err != nil || len(recs) != 2 {
				t.Fatalf("%s poll #%d: %d records, %v", g, i, len(recs), err)
			}
			for j, r := range recs {
				if r.Topic != "P" || r.Partition != int32(j) || r.Offset != int64(i) {
					t.Fatalf("%s poll #%d: record %d is %s/%d/%d", g, i, j, r.Topic, r.Partition, r.Offset)
				}
				if r.Payload != payloads[i] {
					t.Fatalf("%s: payload %d not byte-exact: len %d, want %d", g, i, len(r.Payload), len(payloads[i]))
				}
				if ok, err := b.Ack("P", g, "m", r.Partition, r.Offset); !ok || err != nil {
					t.Fatalf("ack %v: %v %v", r, ok, err)
				}
			}
		}
		if recs, err := b.Poll("P", g, "m", 64); len(recs) != 0 || err != nil {
			t.Fatalf("%s: after drain poll gave %d records, %v", g, len(recs), err)
		}
	}
	for p := int32(0); p < 2; p++ {
		s, _ := b.LogStartOffset("P", p)
		e, _ := b.LogEndOffset("P", p)
		if s != int64(len(payloads)) || e != s {
			t.Fatalf("p%d: log [%d,%d) after both groups acked everything, want empty at %d", p, s, e, len(payloads))
		}
	}
}

// TestHostileSettleEmptyMemberOnMemberlessGroup: Ack and Retry with the
// empty (invalid, rule 3) member id on a group that has no members must
// return ErrInvalidArgument (rule 4: validation before state). The owner
// of every partition of a memberless group is "", so an engine that
// compared the id with the owner before validating it would return
// (false, nil).
func TestHostileSettleEmptyMemberOnMemberlessGroup(t *testing.T) {
	h := hNewPair(t, 4)
	h.do(hC("t", 2))
	h.do(hPub("t", 0, "a"))
	h.do(hJ("t", "g", "m"))
	h.do(hQ("t", "g", "m", 1))
	h.do(hL("t", "g", "m")) // g is now memberless
	for _, p := range []int32{0, 1} {
		for _, off := range []int64{0, 1, math.MaxInt64} {
			h.do(hA("t", "g", "", p, off)) // engine: (false, nil); want ErrInvalidArgument
			h.do(hR("t", "g", "", p, off))
		}
	}
	h.same(nil, []string{"g"})
}

// ---------------------------------------------------------------------------
// Sequential scripts and random scripts against the model.

// TestHostileEdgeScriptsMatchModel replays hand-written corner cases of rules
// 1–14, checking every outcome and the whole state after every step.
func TestHostileEdgeScriptsMatchModel(t *testing.T) {
	scripts := map[string][]hOp{
		"leave of last member clears in-flight, rejoin redelivers": {
			hC("t", 2), hPub("t", 0, "a"), hPub("t", 1, "b"), hJ("t", "g", "m"), hQ("t", "g", "m", 64),
			hL("t", "g", "m"), hA("t", "g", "m", 0, 0), hJ("t", "g", "m"), hA("t", "g", "m", 0, 0),
			hQ("t", "g", "m", 64), hA("t", "g", "m", 0, 0), hR("t", "g", "m", 1, 0), hQ("t", "g", "m", 1),
		},
		"join twice returns current partitions after others joined": {
			hC("t", 5), hJ("t", "g", "b"), hJ("t", "g", "a"), hJ("t", "g", "b"), hJ("t", "g", "c"),
			hJ("t", "g", "a"), hL("t", "g", "b"), hJ("t", "g", "c"), hL("t", "g", "b"), hL("t", "nog", "a"),
		},
		"poll maxRecords below eligible takes lowest partitions": {
			hC("t", 4), hPub("t", 3, "d"), hPub("t", 1, "b"), hPub("t", 2, "c"), hJ("t", "g", "m"),
			hQ("t", "g", "m", 1), hQ("t", "g", "m", 1), hQ("t", "g", "m", 1), hQ("t", "g", "m", 1),
			hR("t", "g", "m", 2, 0), hQ("t", "g", "m", 2),
		},
		"rebalance keeps in-flight of unmoved partitions only": {
			hC("t", 3), hPub("t", 0, "x"), hPub("t", 1, "y"), hPub("t", 2, "z"), hJ("t", "g", "a"),
			hQ("t", "g", "a", 64), hJ("t", "g", "b"), hA("t", "g", "a", 1, 0), hA("t", "g", "a", 0, 0),
			hA("t", "g", "a", 2, 0), hQ("t", "g", "b", 64), hJ("t", "g", "0"), hA("t", "g", "b", 1, 0),
			hQ("t", "g", "0", 9), hQ("t", "g", "a", 9), hQ("t", "g", "b", 9),
		},
		"memberless group pins retention; publish returns -1": {
			hC("t", 1), hJ("t", "g", "a"), hJ("t", "h", "a"), hL("t", "h", "a"), hPub("t", 0, "1"),
			hPub("t", 0, "2"), hPub("t", 0, "3"), hQ("t", "g", "a", 1), hA("t", "g", "a", 0, 0),
			hQ("t", "g", "a", 1), hA("t", "g", "a", 0, 1), hPub("t", 0, "4"), hJ("t", "h", "z"),
			hQ("t", "h", "z", 1), hA("t", "h", "z", 0, 0), hPub("t", 0, "5"), hPub("t", 0, "6"),
		},
		"new group starts at the log start after trims": {
			hC("t", 2), hJ("t", "g", "a"), hPub("t", 0, "1"), hPub("t", 0, "2"), hPub("t", 1, "3"),
			hQ("t", "g", "a", 64), hA("t", "g", "a", 0, 0), hA("t", "g", "a", 1, 0), hJ("t", "n", "a"),
			hQ("t", "n", "a", 64), hA("t", "n", "a", 0, 1), hQ("t", "g", "a", 64), hA("t", "g", "a", 0, 1),
		},
		"create duplicates and invalid counts": {
			hC("t", 2), hC("t", 2), hC("t", 3), hC("t", 0), hC("t", 65), hC("u", 64), hC("u", 1),
			hPub("t", 2, "x"), hPub("u", 63, "x"), hPub("u", 64, "x"),
		},
		"validation before state: invalid call about absent group": {
			hC("t", 2), hL("t", "nog", "é"), hL("t", "nog", ""), hQ("t", "nog", "a", 0), hQ("t", "nog", "", 1),
			hA("t", "nog", "a", 0, -1), hA("t", "nog", "a", 2, 0), hA("t", "nog", "a b", 0, 0),
			hR("t", "no g", "a", 0, 0), hQ("t", "nog", "a", 1), hA("t", "nog", "a", 0, 0),
			hJ("t", "g", "a"), hQ("t", "g", "zz", 65), hA("t", "g", "zz", 0, -5), hL("t", "g", "a-"),
		},
		"retry of wrong offset or partition, ack after retry": {
			hC("t", 2), hJ("t", "g", "a"), hPub("t", 0, "x"), hPub("t", 0, "y"), hQ("t", "g", "a", 64),
			hR("t", "g", "a", 0, 1), hR("t", "g", "a", 1, 0), hA("t", "g", "a", 0, 1), hR("t", "g", "a", 0, 0),
			hA("t", "g", "a", 0, 0), hQ("t", "g", "a", 64), hA("t", "g", "a", 0, 0), hA("t", "g", "a", 0, 1),
			hA("t", "g", "a", 0, 1),
		},
		"capacity 1 churn": {
			hC("t", 1), hPub("t", 0, "x"), hPub("t", 0, "y"), hJ("t", "g", "a"), hPub("t", 0, "y"),
			hQ("t", "g", "a", 1), hA("t", "g", "a", 0, 0), hPub("t", 0, "y"), hPub("t", 0, "z"),
			hJ("t", "h", "a"), hQ("t", "h", "a", 1), hA("t", "h", "a", 0, 1), hPub("t", 0, "z"),
		},
	}
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			capacity := int32(2)
			if strings.HasPrefix(name, "capacity 1") {
				capacity = 1
			}
			h := hNewPair(t, capacity)
			for _, o := range script {
				h.do(o)
				h.same([]string{"t", "u"}, []string{"g", "h", "n", "nog"})
			}
		})
	}
}

// TestHostileRandomScriptsMatchModel runs random scripts over small pools of
// valid and invalid names, surprising member orders ("Z" < "_" < "a",
// "a-" < "a0" < "a_", "10" < "9") and extreme integers, checking every
// outcome and the whole state after every step.
func TestHostileRandomScriptsMatchModel(t *testing.T) {
	topics := []string{"t", "t", "t", "U", "U", "nope", "t.x", "ｔ"}
	groups := []string{"g", "g", "G", "g-", "g_", "0", "é", "g\x00"}
	members := []string{"a", "Z", "a-", "a_", "a0", "9", "10", "_", "b", "\xff", "а", ""}
	parts := []int32{0, 0, 1, 1, 2, 3, -1, 4, math.MaxInt32, math.MinInt32}
	counts := []int32{1, 2, 3, 0, 65, math.MaxInt32}
	polls := []int32{1, 1, 2, 3, 64, 0, 65, -1}
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		h := hNewPair(t, int32(1+rng.IntN(3)))
		pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
		for step := range 150 {
			tp, g, m := pick(topics), pick(groups), pick(members)
			p := parts[rng.IntN(len(parts))]
			var o hOp
			switch k := rng.IntN(20); {
			case k < 2:
				o = hC(tp, counts[rng.IntN(len(counts))])
			case k < 5:
				o = hJ(tp, g, m)
			case k < 6:
				o = hL(tp, g, m)
			case k < 9:
				o = hPub(tp, p, fmt.Sprint(rng.IntN(100)))
			case k < 13:
				o = hQ(tp, g, m, polls[rng.IntN(len(polls))])
			default:
				// Aim at the in-flight record most of the time.
				off, err := h.m.Committed(tp, g, p)
				if err != nil || rng.IntN(5) == 0 {
					off = []int64{-1, 0, 1, math.MaxInt64, math.MinInt64}[rng.IntN(5)]
				}
				if k < 18 {
					o = hA(tp, g, m, p, off)
				} else {
					o = hR(tp, g, m, p, off)
				}
			}
			h.do(o)
			// The whole state every few steps (the model's topics and groups,
			// an absent topic, an absent and an invalid group).
			if step%3 == 2 {
				h.same([]string{"nope"}, []string{"zz", "é"})
			}
		}
		h.same(topics, groups)
	}
}

// TestHostileManyMembersOwnership: 64 partitions and up to 100 members with
// ids whose byte order surprises (digits < upper < "_" < lower, "a-" < "a0"
// < "a_"), joined and left in random order; every Join and Poll must match
// the model, and members beyond the partition count own nothing (an empty,
// non-nil slice).
func TestHostileManyMembersOwnership(t *testing.T) {
	ids := []string{"-", "0", "9", "10", "A", "Z", "_", "a", "a-", "a0", "a_", "aa", "z", "Z-", "z_", "zz"}
	for i := 0; len(ids) < 100; i++ {
		ids = append(ids, fmt.Sprintf("%c%dx", "aZ_-0"[i%5], i)) // distinct from the list above
	}
	rng := rand.New(rand.NewPCG(7, 7))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	h := hNewPair(t, 3)
	h.do(hC("T", 64))
	for p := int32(0); p < 64; p++ {
		h.do(hPub("T", p, fmt.Sprint(p)))
	}
	// One member of another group owns all 64: a poll takes at most
	// maxRecords, lowest partitions first, then the rest.
	h.do(hJ("T", "S", "solo"))
	if n := len(h.do(hQ("T", "S", "solo", 63)).Recs); n != 63 {
		t.Fatalf("Poll(63) over 64 eligible partitions took %d", n)
	}
	h.do(hQ("T", "S", "solo", 64))
	h.do(hL("T", "S", "solo"))
	for i, id := range ids {
		h.do(hJ("T", "G", id))
		if i == 63 {
			// 64 members on 64 partitions: each owns exactly the partition of
			// its sorted index; each polls exactly that record.
			sorted := slices.Clone(ids[:64])
			slices.Sort(sorted)
			for p, m := range sorted {
				parts := h.do(hJ("T", "G", m)).Parts
				if !slices.Equal(parts, []int32{int32(p)}) {
					t.Fatalf("sorted member %d %q owns %v, want [%d]", p, m, parts, p)
				}
				h.do(hQ("T", "G", m, 64))
			}
			h.same(nil, []string{"G"})
		}
	}
	h.same(nil, []string{"G"})
	// 100 members: the 64 lowest own one partition each, the rest an empty,
	// non-nil slice.
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i, m := range sorted {
		parts := h.do(hJ("T", "G", m)).Parts
		want := []int32{}
		if i < 64 {
			want = []int32{int32(i)}
		}
		if parts == nil || !slices.Equal(parts, want) {
			t.Fatalf("sorted member %d %q of 100 owns %v (nil=%v), want %v", i, m, parts, parts == nil, want)
		}
	}
	for _, m := range ids {
		h.do(hQ("T", "G", m, 64))
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for i, id := range ids {
		h.do(hL("T", "G", id))
		if i%9 == 0 {
			for _, m := range ids[i+1:] {
				out := h.do(hQ("T", "G", m, 64))
				for _, r := range out.Recs {
					h.do(hA("T", "G", m, r.Partition, r.Offset))
				}
			}
			h.same(nil, []string{"G"})
		}
	}
	h.same(nil, []string{"G"})
}

// ---------------------------------------------------------------------------
// Small concurrent histories, checked by brute-force linearization.

// hTimed is one call of a concurrent history, with ticks of a shared clock
// taken just before the call and just after it returned.
type hTimed struct {
	op        hOp
	out       hOut
	call, ret int64
}

// hExplain reports whether the calls of ev not yet done can be put in an
// order that respects real time (a call that returned before another was
// called comes first) and gives, in the model m, exactly their outcomes and
// then the final state want.
func hExplain(m *model.Broker, ev []hTimed, done []bool, left int, final func(*model.Broker) string, want string) bool {
	if left == 0 {
		return final(m) == want
	}
	for j := range ev {
		if done[j] {
			continue
		}
		minimal := true
		for i := range ev {
			if !done[i] && i != j && ev[i].ret < ev[j].call {
				minimal = false
				break
			}
		}
		if !minimal {
			continue
		}
		c := m.Clone()
		if !hSame(hModel(c, ev[j].op), ev[j].out) {
			continue
		}
		done[j] = true
		if hExplain(c, ev, done, left-1, final, want) {
			return true
		}
		done[j] = false
	}
	return false
}

// TestHostileConcurrentHistoriesLinearize: from random states (records in
// flight, memberless groups, full partitions), 2 or 3 goroutines each make
// 1 to 3 calls at once — acks, retries, polls over several partitions,
// publishes, joins and leaves (rebalances), group creation, invalid calls —
// and some order of all the calls that respects real time and program order
// must give, in the model, exactly the engine's outcomes and resulting state
// (offsets, in-flight flags and, through a final Leave of every member,
// memberships). Some rounds use templates aimed at known hazards: a poll
// over every partition racing ordered publishes or acks on its first and
// last partitions, an ack racing a rebalance and the new owner's poll, and a
// poll of the last partition racing the Leave that moves it.
func TestHostileConcurrentHistoriesLinearize(t *testing.T) {
	const topic, P = "t", 3
	groups := []string{"g", "h", "k"}
	members := []string{"a", "b", "c"}
	rng := rand.New(rand.NewPCG(11, 13))
	gen := func(m *model.Broker) hOp {
		g := groups[rng.IntN(len(groups))]
		mb := members[rng.IntN(len(members))]
		p := int32(rng.IntN(P))
		switch k := rng.IntN(16); {
		case k < 2:
			return hJ(topic, g, mb)
		case k < 3:
			return hL(topic, g, mb)
		case k < 5:
			return hPub(topic, p, fmt.Sprint(rng.IntN(10)))
		case k < 8:
			return hQ(topic, g, mb, int32(1+rng.IntN(3)))
		case k < 15:
			off, err := m.Committed(topic, g, p)
			if err != nil {
				off = 0
			}
			if a, err := m.Assignment(topic, g); err == nil && rng.IntN(4) != 0 {
				for who, ps := range a {
					if slices.Contains(ps, p) {
						mb = who
					}
				}
			}
			if k < 12 {
				return hA(topic, g, mb, p, off)
			}
			return hR(topic, g, mb, p, off)
		default:
			bad := []hOp{hA(topic, g, mb, p, -1), hQ(topic, g, "é", 1), hJ(topic, g, "a.b"), hPub(topic, P, "x"), hL(topic, "", mb)}
			return bad[rng.IntN(len(bad))]
		}
	}
	probe := func(x hInspector) string { return hProbe(x, []string{topic}, groups) }
	final := func(m *model.Broker) string {
		var sb strings.Builder
		sb.WriteString(probe(m))
		for _, g := range groups {
			for _, mb := range members {
				fmt.Fprintf(&sb, "%s/%s:%s ", g, mb, hOutString(hModel(m, hL(topic, g, mb))))
			}
		}
		return sb.String()
	}
	rounds := 1000
	if testing.Short() {
		rounds = 300
	}
	for round := range rounds {
		h := hNewPair(t, int32(1+rng.IntN(3)))
		h.do(hC(topic, P))
		var scripts [][]hOp
		switch rng.IntN(5) {
		case 0: // a three-partition poll against ordered changes at both ends
			h.do(hJ(topic, "g", "a"))
			for range rng.IntN(3) {
				h.do(hPub(topic, 0, "x"))
				h.do(hPub(topic, 2, "y"))
			}
			h.do(hJ(topic, "h", "a"))
			if rng.IntN(2) == 0 {
				h.do(hQ(topic, "g", "a", 3))
			}
			second := []hOp{hPub(topic, 0, "p"), hPub(topic, 2, "q")}
			if rng.IntN(2) == 0 {
				c0, _ := h.m.Committed(topic, "g", 0)
				c2, _ := h.m.Committed(topic, "g", 2)
				second = []hOp{hA(topic, "g", "a", 0, c0), hA(topic, "g", "a", 2, c2)}
			}
			scripts = [][]hOp{{hQ(topic, "g", "a", 3), hQ(topic, "g", "a", 3)}, second}
		case 1: // an ack racing the rebalance that moves its partition
			h.do(hJ(topic, "g", "a"))
			h.do(hJ(topic, "g", "b"))
			h.do(hPub(topic, 2, "x"))
			h.do(hPub(topic, 2, "y"))
			h.do(hQ(topic, "g", "a", 3))
			c2, _ := h.m.Committed(topic, "g", 2)
			scripts = [][]hOp{
				{hA(topic, "g", "a", 2, c2), hR(topic, "g", "a", 2, c2)},
				{hJ(topic, "g", "c"), hQ(topic, "g", "c", 3)},
				{hQ(topic, "g", "a", 3), hA(topic, "g", "c", 2, c2)},
			}
		case 2: // a poll of the last partition racing the rebalance that takes it away
			for _, m := range members {
				h.do(hJ(topic, "g", m))
			}
			h.do(hPub(topic, 2, "x"))
			h.do(hPub(topic, 1, "y"))
			scripts = [][]hOp{
				{hQ(topic, "g", "c", 3)},
				{hL(topic, "g", "c"), hQ(topic, "g", "a", 3)},
				{hQ(topic, "g", "b", 1), hJ(topic, "g", "c")},
			}
		default:
			for range 4 + rng.IntN(14) {
				h.do(gen(h.m))
			}
			scripts = make([][]hOp, 2+rng.IntN(2))
			for i := range scripts {
				for range 1 + rng.IntN(3) {
					scripts[i] = append(scripts[i], gen(h.m))
				}
			}
		}
		var clock atomic.Int64
		got := make([][]hTimed, len(scripts))
		var ready sync.WaitGroup
		ready.Add(len(scripts))
		start := make(chan struct{})
		fs := make([]func(), len(scripts))
		for i, script := range scripts {
			fs[i] = func() {
				ready.Done()
				<-start
				for _, o := range script {
					call := clock.Add(1)
					out := hEngine(h.b, o)
					got[i] = append(got[i], hTimed{op: o, out: out, call: call, ret: clock.Add(1)})
				}
			}
		}
		go func() { ready.Wait(); close(start) }()
		hRun(t, hDeadline, fs...)
		var ev []hTimed
		for _, g := range got {
			ev = append(ev, g...)
		}
		var sb strings.Builder
		sb.WriteString(probe(h.b))
		for _, g := range groups {
			for _, mb := range members {
				fmt.Fprintf(&sb, "%s/%s:%s ", g, mb, hOutString(hEngine(h.b, hL(topic, g, mb))))
			}
		}
		gotState := sb.String()
		if !hExplain(h.m.Clone(), ev, make([]bool, len(ev)), len(ev), final, gotState) {
			var hist strings.Builder
			for i, g := range got {
				for _, e := range g {
					fmt.Fprintf(&hist, "  goroutine %d [%d,%d] %s -> %s\n", i, e.call, e.ret, e.op, hOutString(e.out))
				}
			}
			t.Fatalf("round %d: the concurrent history is not linearizable\nprefix:\n  %s\nhistory:\n%sengine state after:\n%s",
				round, strings.Join(h.tail(100), "\n  "), hist.String(), gotState)
		}
	}
}

// ---------------------------------------------------------------------------
// Storms: engine-only invariants, exactly-once delivery.

// hGP names one group's cursor on one partition of the storm topic.
type hGP struct {
	group string
	part  int32
}

// hLedger records what a storm published, delivered and acknowledged.
type hLedger struct {
	mu   sync.Mutex
	pubs map[int32]map[int64]string // partition → offset → payload
	seen map[hGP]map[int64]string   // payloads delivered to a group
	acks map[hGP][]int64            // successful acks
	bad  *hFailures
	// counts, readable without mu
	nPub, nAck atomic.Int64
}

func hNewLedger(f *hFailures) *hLedger {
	return &hLedger{pubs: map[int32]map[int64]string{}, seen: map[hGP]map[int64]string{}, acks: map[hGP][]int64{}, bad: f}
}

func (l *hLedger) published(p int32, off int64, payload string) {
	l.nPub.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pubs[p] == nil {
		l.pubs[p] = map[int64]string{}
	}
	if _, dup := l.pubs[p][off]; dup {
		l.bad.fail("p%d: offset %d returned by two publishes", p, off)
	}
	l.pubs[p][off] = payload
}

func (l *hLedger) polled(g string, recs []engine.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range recs {
		if i > 0 && r.Partition <= recs[i-1].Partition {
			l.bad.fail("%s: poll result not in ascending partition order: %+v", g, recs)
		}
		k := hGP{g, r.Partition}
		if l.seen[k] == nil {
			l.seen[k] = map[int64]string{}
		}
		if prev, ok := l.seen[k][r.Offset]; ok && prev != r.Payload {
			l.bad.fail("%s p%d off %d delivered with payloads %q then %q", g, r.Partition, r.Offset, prev, r.Payload)
		}
		l.seen[k][r.Offset] = r.Payload
	}
}

func (l *hLedger) acked(g string, p int32, off int64) {
	l.nAck.Add(1)
	l.mu.Lock()
	l.acks[hGP{g, p}] = append(l.acks[hGP{g, p}], off)
	l.mu.Unlock()
}

// hPublisher publishes to its own partitions, in turn, payloads that name
// partition and offset; it is the only publisher of those partitions, so
// offsets must be consecutive.
func hPublisher(b *engine.Broker, topic string, parts []int32, l *hLedger, f *hFailures, done *atomic.Bool) func() {
	return func() {
		next := map[int32]int64{}
		for i := 0; !f.stop.Load() && !done.Load(); i++ {
			p := parts[i%len(parts)]
			payload := fmt.Sprintf("%d:%d", p, next[p])
			off, err := b.Publish(topic, p, payload)
			switch {
			case err != nil:
				f.fail("Publish(%q,%d): %v", topic, p, err)
			case off == -1:
				runtime.Gosched()
			case off != next[p]:
				f.fail("p%d: publish got offset %d, want %d (sole publisher)", p, off, next[p])
			default:
				l.published(p, off, payload)
				next[p]++
			}
		}
	}
}

// hConsume polls once as member and acks (or, one time in retryEvery,
// retries) what it got, recording everything in l.
func hConsume(b *engine.Broker, rng *rand.Rand, topic, group, member string, max int32, retryEvery int, l *hLedger, f *hFailures) {
	recs, err := b.Poll(topic, group, member, max)
	if err != nil {
		f.fail("Poll(%s,%s): %v", group, member, err)
		return
	}
	if recs == nil {
		f.fail("Poll(%s,%s) returned nil", group, member)
	}
	if len(recs) > int(max) {
		f.fail("Poll(%s,%s,%d) returned %d records", group, member, max, len(recs))
	}
	l.polled(group, recs)
	if len(recs) == 0 {
		// Let publishers run: a goroutine that never blocks keeps its P
		// for a whole 10 ms preemption slice.
		runtime.Gosched()
	}
	for _, r := range recs {
		if retryEvery > 0 && rng.IntN(retryEvery) == 0 {
			if _, err := b.Retry(topic, group, member, r.Partition, r.Offset); err != nil {
				f.fail("Retry: %v", err)
			}
			continue
		}
		ok, err := b.Ack(topic, group, member, r.Partition, r.Offset)
		if err != nil {
			f.fail("Ack: %v", err)
		}
		if ok {
			l.acked(group, r.Partition, r.Offset)
		}
	}
}

// hInvariants checks, on a quiet or live broker, the invariants that hold
// at every instant: per partition end-start <= capacity (end read first),
// and on a quiet broker, committed in [start, end] and start == min committed.
func hInvariants(b *engine.Broker, topic string, P int32, groups []string, quiet bool) error {
	for p := int32(0); p < P; p++ {
		end, err1 := b.LogEndOffset(topic, p)
		start, err2 := b.LogStartOffset(topic, p)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("p%d offsets: %v %v", p, err1, err2)
		}
		if end-start > int64(b.Capacity()) {
			return fmt.Errorf("p%d retains [%d,%d), more than capacity %d", p, start, end, b.Capacity())
		}
		if !quiet {
			continue
		}
		low := int64(math.MaxInt64)
		for _, g := range groups {
			c, err := b.Committed(topic, g, p)
			if err != nil {
				return fmt.Errorf("Committed(%s,%d): %v", g, p, err)
			}
			if c < start || c > end {
				return fmt.Errorf("%s p%d committed %d outside [%d,%d]", g, p, c, start, end)
			}
			inf, _ := b.InFlight(topic, g, p)
			if inf && c == end {
				return fmt.Errorf("%s p%d in flight at log end %d", g, p, c)
			}
			low = min(low, c)
		}
		if len(groups) > 0 && low != start {
			return fmt.Errorf("p%d: log start %d, but least committed offset is %d", p, start, low)
		}
	}
	return nil
}

// hDrainVerify quiesces nothing (the caller has): for each group it removes
// the given members, joins a drainer, polls and acks to the end; then it
// requires every group to have acked exactly [initial, end) per partition,
// each once, with the published payloads, and the log to be empty.
func hDrainVerify(t *testing.T, b *engine.Broker, topic string, P int32, initial map[string][]int64, leave []string, l *hLedger) {
	t.Helper()
	for g := range initial {
		for _, m := range leave {
			if _, err := b.Leave(topic, g, m); err != nil {
				t.Fatalf("Leave(%s,%s): %v", g, m, err)
			}
		}
		parts, err := b.Join(topic, g, "drainer")
		if err != nil || len(parts) != int(P) {
			t.Fatalf("drainer of %s owns %v (%v), want all %d partitions", g, parts, err, P)
		}
		for i := 0; ; i++ {
			recs, err := b.Poll(topic, g, "drainer", 64)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			if i > 100000 {
				t.Fatalf("drain of %s does not end", g)
			}
			l.polled(g, recs)
			for _, r := range recs {
				ok, err := b.Ack(topic, g, "drainer", r.Partition, r.Offset)
				if !ok || err != nil {
					t.Fatalf("drain ack %s %+v: %v %v", g, r, ok, err)
				}
				l.acked(g, r.Partition, r.Offset)
			}
		}
	}
	l.bad.report(t)
	var names []string
	for g := range initial {
		names = append(names, g)
	}
	if err := hInvariants(b, topic, P, names, true); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < P; p++ {
		end, _ := b.LogEndOffset(topic, p)
		start, _ := b.LogStartOffset(topic, p)
		if start != end {
			t.Fatalf("p%d: after every group drained, log retains [%d,%d)", p, start, end)
		}
		if int64(len(l.pubs[p])) != end {
			t.Fatalf("p%d: %d successful publishes recorded, log end %d", p, len(l.pubs[p]), end)
		}
		for g, init := range initial {
			got := slices.Clone(l.acks[hGP{g, p}])
			slices.Sort(got)
			want := make([]int64, 0, end-init[p])
			for off := init[p]; off < end; off++ {
				want = append(want, off)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s p%d: acked offsets %v, want each of [%d,%d) exactly once", g, p, hShort(got), init[p], end)
			}
			for _, off := range got {
				if s := l.seen[hGP{g, p}][off]; s != l.pubs[p][off] {
					t.Fatalf("%s p%d off %d: delivered %q, published %q", g, p, off, s, l.pubs[p][off])
				}
			}
		}
	}
}

func hShort(xs []int64) string {
	if len(xs) <= 40 {
		return fmt.Sprint(xs)
	}
	return fmt.Sprint(xs[:20], "…", xs[len(xs)-20:], fmt.Sprintf(" (%d)", len(xs)))
}

// TestHostileGroupGrowthRacingAcks creates 200 groups on one topic (the
// engine grows every partition's cursor array) while publishers, a steady
// group and workers hopping between the new groups publish, poll, ack and
// retry. Each new group must start at the log start offset of its creation
// instant — observable as Committed == LogStartOffset right after Join,
// before it acks anything — and must never have a record it has not acked
// trimmed: some groups stay untouched ("frozen") for a while and the log
// start may not pass them. At the end every group drains and must have acked
// exactly its records, each once.
func TestHostileGroupGrowthRacingAcks(t *testing.T) {
	const topic, P, nGroups = "T", int32(4), 200
	b, err := hNew(12)
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, P)
	f := &hFailures{}
	l := hNewLedger(f)
	initial := map[string][]int64{"base": make([]int64, P)}
	if _, err := b.Join(topic, "base", "b0"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var active []string
	frozen := map[string][]int64{}
	var created, workersDone atomic.Bool
	creator := func() {
		defer created.Store(true)
		for i := 0; i < nGroups && !f.stop.Load(); i++ {
			g := fmt.Sprintf("g%03d", i)
			parts, err := b.Join(topic, g, "c")
			if err != nil || len(parts) != int(P) {
				f.fail("Join(%s,c) = %v, %v; want all partitions", g, parts, err)
				return
			}
			init := make([]int64, P)
			for p := int32(0); p < P; p++ {
				c, err1 := b.Committed(topic, g, p)
				s, err2 := b.LogStartOffset(topic, p)
				if err1 != nil || err2 != nil || c != s {
					f.fail("new group %s p%d: committed %d (%v), log start %d (%v): a new group must start at the log start and hold it", g, p, c, err1, s, err2)
				}
				init[p] = c
			}
			if ok, err := b.Leave(topic, g, "c"); !ok || err != nil {
				f.fail("Leave(%s,c): %v %v", g, ok, err)
			}
			mu.Lock()
			initial[g] = init
			// Every 10th group stays frozen until 10 more are created.
			if i%10 == 0 {
				frozen[g] = init
			} else {
				active = append(active, g)
			}
			if i%10 == 9 {
				for fg := range frozen {
					active = append(active, fg)
				}
				clear(frozen)
			}
			mu.Unlock()
			runtime.Gosched()
		}
	}
	worker := func(id int) func() {
		return func() {
			rng := rand.New(rand.NewPCG(uint64(id), 99))
			me := fmt.Sprint("w", id)
			for !f.stop.Load() && !(created.Load() && workersDone.Load()) {
				mu.Lock()
				if len(active) == 0 {
					mu.Unlock()
					runtime.Gosched()
					continue
				}
				var g string
				if rng.IntN(3) != 0 {
					g = active[max(0, len(active)-1-rng.IntN(8))]
				} else {
					g = active[rng.IntN(len(active))]
				}
				mu.Unlock()
				if _, err := b.Join(topic, g, me); err != nil {
					f.fail("Join: %v", err)
				}
				hConsume(b, rng, topic, g, me, int32(1+rng.IntN(3)), 6, l, f)
				if rng.IntN(4) == 0 {
					b.Leave(topic, g, me)
				}
			}
		}
	}
	baseConsumer := func() {
		rng := rand.New(rand.NewPCG(5, 5))
		for !f.stop.Load() && !workersDone.Load() {
			hConsume(b, rng, topic, "base", "b0", P, 0, l, f)
		}
	}
	checker := func() {
		for !f.stop.Load() && !workersDone.Load() {
			mu.Lock()
			fz := make(map[string][]int64, len(frozen))
			for g, init := range frozen {
				fz[g] = init
			}
			mu.Unlock()
			for g, init := range fz {
				for p := int32(0); p < P; p++ {
					// Read the start first: a frozen group is only released under mu.
					s, _ := b.LogStartOffset(topic, p)
					mu.Lock()
					_, still := frozen[g]
					c, _ := b.Committed(topic, g, p)
					mu.Unlock()
					if still && (c != init[p] || s > c) {
						f.fail("frozen group %s p%d: committed %d (initially %d), log start %d: trimmed past an unacked record", g, p, c, init[p], s)
					}
				}
			}
			if err := hInvariants(b, topic, P, nil, false); err != nil {
				f.fail("%v", err)
			}
			runtime.Gosched()
		}
	}
	timer := func() {
		for !created.Load() && !f.stop.Load() {
			time.Sleep(time.Millisecond)
		}
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) && !f.stop.Load() && l.nAck.Load() < 6000 {
			time.Sleep(time.Millisecond)
		}
		workersDone.Store(true)
	}
	hRun(t, hDeadline,
		creator, worker(1), worker(2), baseConsumer, checker, timer,
		hPublisher(b, topic, []int32{0, 2}, l, f, &workersDone),
		hPublisher(b, topic, []int32{1, 3}, l, f, &workersDone),
	)
	f.report(t)
	if l.nAck.Load() < 200 {
		t.Fatalf("only %d acks before the drain", l.nAck.Load())
	}
	hDrainVerify(t, b, topic, P, initial, []string{"w1", "w2", "b0", "c"}, l)
}

// TestHostileMembershipStormSettles: members of one group join and leave in
// a storm (every Join and Leave a rebalance) while every member id polls,
// acks and retries as fast as it can, a second group consumes the same topic
// steadily, and publishers fill partitions that trims keep emptying. Checks:
// no call errors, Join results are consistent with ownership (a member's
// partitions are p ≡ i mod n for some i < n ≤ 6), and after quiescing, each
// group acked every published record exactly once with its payload.
func TestHostileMembershipStormSettles(t *testing.T) {
	const topic, P = "S", int32(6)
	b, err := hNew(8)
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, P)
	f := &hFailures{}
	l := hNewLedger(f)
	members := []string{"m0", "M1", "m-2", "m_3", "9", "zz"}
	for _, g := range []string{"A", "B"} {
		if _, err := b.Join(topic, g, "steady"); err != nil {
			t.Fatal(err)
		}
	}
	var done atomic.Bool
	var ops atomic.Int64
	churn := func(seed uint64) func() {
		return func() {
			rng := rand.New(rand.NewPCG(seed, 1))
			for !f.stop.Load() && !done.Load() {
				m := members[rng.IntN(len(members))]
				if rng.IntN(2) == 0 {
					parts, err := b.Join(topic, "A", m)
					if err != nil || parts == nil {
						f.fail("Join(A,%s) = %v, %v", m, parts, err)
					}
					// Round-robin: partitions p, p+n, p+2n… for n members.
					if len(parts) > 1 {
						n := parts[1] - parts[0]
						for i := 1; i < len(parts); i++ {
							if parts[i]-parts[i-1] != n || n < 1 || n > 8 {
								f.fail("Join(A,%s) = %v: not a round-robin share", m, parts)
							}
						}
					}
				} else if _, err := b.Leave(topic, "A", m); err != nil {
					f.fail("Leave: %v", err)
				}
				ops.Add(1)
				runtime.Gosched()
			}
		}
	}
	consumer := func(group, m string, seed uint64) func() {
		return func() {
			rng := rand.New(rand.NewPCG(seed, 2))
			for !f.stop.Load() && !done.Load() {
				hConsume(b, rng, topic, group, m, int32(1+rng.IntN(4)), 5, l, f)
				ops.Add(1)
			}
		}
	}
	fs := []func(){churn(1), churn(2), consumer("B", "steady", 3), consumer("A", "steady", 4)}
	for i, m := range members {
		fs = append(fs, consumer("A", m, uint64(10+i)))
	}
	fs = append(fs,
		hPublisher(b, topic, []int32{0, 1, 2}, l, f, &done),
		hPublisher(b, topic, []int32{3, 4, 5}, l, f, &done),
		func() {
			// Until enough happened, or for at most a few seconds.
			deadline := time.Now().Add(4 * time.Second)
			for time.Now().Before(deadline) && !f.stop.Load() &&
				(ops.Load() < 30000 || l.nPub.Load() < 3000 || l.nAck.Load() < 3000) {
				if err := hInvariants(b, topic, P, nil, false); err != nil {
					f.fail("%v", err)
				}
				time.Sleep(time.Millisecond)
			}
			done.Store(true)
		})
	hRun(t, hDeadline, fs...)
	f.report(t)
	if ops.Load() < 1000 || l.nAck.Load() < 100 {
		t.Fatalf("storm made only %d calls, %d acks", ops.Load(), l.nAck.Load())
	}
	initial := map[string][]int64{"A": make([]int64, P), "B": make([]int64, P)}
	hDrainVerify(t, b, topic, P, initial, append(members, "steady"), l)
	var total int
	for p := int32(0); p < P; p++ {
		total += len(l.pubs[p])
	}
	if total < int(P)*8 {
		t.Fatalf("storm published only %d records", total)
	}
}

// TestHostileConcurrentCreateAndUse: many goroutines Create the same topic
// with different partition counts while others call every method on it.
// Exactly one Create returns true; the topic has the winner's partition
// count; a call before the topic exists is ErrInvalidArgument and, once a
// goroutine has seen the topic, it never sees ErrInvalidArgument for it
// again; publishes to partition 0 get consecutive offsets.
func TestHostileConcurrentCreateAndUse(t *testing.T) {
	for round := range 25 {
		b, err := hNew(1000)
		if err != nil {
			t.Fatal(err)
		}
		topic := fmt.Sprint("race", round)
		f := &hFailures{}
		var wins atomic.Int32
		var winner atomic.Int32
		var fs []func()
		for i := range 6 {
			n := int32(1 + (i*11+round)%64)
			fs = append(fs, func() {
				ok, err := b.Create(topic, n)
				if err != nil {
					f.fail("Create(%q,%d): %v", topic, n, err)
				}
				if ok {
					wins.Add(1)
					winner.Store(n)
				}
			})
		}
		var offs sync.Map
		for i := range 4 {
			fs = append(fs, func() {
				seen := false
				member := fmt.Sprint("m", i)
				for j := 0; j < 60; j++ {
					var errs [7]error
					_, errs[0] = b.Publish(topic, 0, "x")
					off, _ := b.Publish(topic, 0, fmt.Sprint(i, ".", j))
					_, errs[1] = b.Join(topic, "g", member)
					var recs []engine.Record
					recs, errs[2] = b.Poll(topic, "g", member, 64)
					for _, r := range recs {
						if _, err := b.Ack(topic, "g", member, r.Partition, r.Offset); err != nil {
							f.fail("Ack of a polled record: %v", err)
						}
					}
					_, errs[3] = b.Committed(topic, "g", 0)
					if errors.Is(errs[3], engine.ErrUnknownGroup) {
						errs[3] = nil
					}
					_, errs[4] = b.Retry(topic, "g", member, 0, 0)
					_, errs[5] = b.Leave(topic, "g", member)
					_, errs[6] = b.LogEndOffset(topic, 0)
					for k, err := range errs {
						switch {
						case err == nil:
							seen = true
						case !errors.Is(err, engine.ErrInvalidArgument):
							f.fail("call %d: %v", k, err)
						case seen:
							f.fail("call %d failed after the topic was seen: %v", k, err)
						}
					}
					if errs[0] == nil && off >= 0 {
						if _, dup := offs.LoadOrStore(off, true); dup {
							f.fail("publish offset %d duplicated", off)
						}
					}
				}
			})
		}
		hRun(t, hDeadline, fs...)
		f.report(t)
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d Creates returned true", round, wins.Load())
		}
		n, err := b.PartitionCount(topic)
		if err != nil || n != winner.Load() {
			t.Fatalf("round %d: partition count %d (%v), the winning Create asked %d", round, n, err, winner.Load())
		}
		end, _ := b.LogEndOffset(topic, 0)
		count := 0
		offs.Range(func(k, _ any) bool {
			if k.(int64) >= end {
				t.Errorf("offset %d beyond log end %d", k, end)
			}
			count++
			return true
		})
		// Every successful publish used one offset; the "x" publishes are
		// not recorded, so count ≤ end, and all offsets are below end.
		if int64(count) > end {
			t.Fatalf("round %d: %d distinct offsets, log end %d", round, count, end)
		}
		if ok, err := b.Create(topic, 3); ok || err != nil {
			t.Fatalf("late duplicate Create: %v %v", ok, err)
		}
	}
}

// TestHostilePublishFullRacingTrim: with capacity 1 and 2, publishers race to
// fill one partition while two groups ack, each ack possibly trimming. Every
// successful publish gets a fresh consecutive offset, -1 uses up none, the
// log never retains more than capacity, and each group acks every record once.
func TestHostilePublishFullRacingTrim(t *testing.T) {
	for _, capacity := range []int32{1, 2} {
		b, err := hNew(capacity)
		if err != nil {
			t.Fatal(err)
		}
		b.Create("F", 1)
		f := &hFailures{}
		l := hNewLedger(f)
		for _, g := range []string{"x", "y"} {
			b.Join("F", g, "m")
		}
		var done atomic.Bool
		var full atomic.Int64
		pub := func(id int) func() {
			return func() {
				for i := 0; !f.stop.Load() && !done.Load(); i++ {
					payload := fmt.Sprintf("%d/%d", id, i)
					off, err := b.Publish("F", 0, payload)
					if err != nil {
						f.fail("Publish: %v", err)
					}
					if off == -1 {
						full.Add(1)
						runtime.Gosched()
						continue
					}
					l.published(0, off, payload)
				}
			}
		}
		cons := func(g string, seed uint64) func() {
			return func() {
				rng := rand.New(rand.NewPCG(seed, 3))
				for !f.stop.Load() && !done.Load() {
					hConsume(b, rng, "F", g, "m", 1, 4, l, f)
				}
			}
		}
		hRun(t, hDeadline, pub(1), pub(2), pub(3), cons("x", 1), cons("y", 2), func() {
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) && !f.stop.Load() && (l.nPub.Load() < 2000 || full.Load() < 500) {
				if err := hInvariants(b, "F", 1, nil, false); err != nil {
					f.fail("%v", err)
				}
				runtime.Gosched()
			}
			done.Store(true)
		})
		f.report(t)
		if full.Load() == 0 || len(l.pubs[0]) < 20 {
			t.Fatalf("capacity %d: %d publishes, %d full: the race never happened", capacity, len(l.pubs[0]), full.Load())
		}
		end, _ := b.LogEndOffset("F", 0)
		for off := int64(0); off < end; off++ {
			if _, ok := l.pubs[0][off]; !ok {
				t.Fatalf("capacity %d: offset %d below log end %d was never returned by a publish", capacity, off, end)
			}
		}
		hDrainVerify(t, b, "F", 1, map[string][]int64{"x": {0}, "y": {0}}, []string{"m"}, l)
	}
}

// TestHostileCallerScribblesResults: consumers overwrite every record and
// partition slice the broker returns (and hand them to another goroutine
// that keeps overwriting them), reuse AppendPoll buffers, and the broker
// must neither see the writes (the race detector would flag shared memory)
// nor deliver anything but what was published.
func TestHostileCallerScribblesResults(t *testing.T) {
	const topic, P = "W", int32(4)
	b, err := hNew(16)
	if err != nil {
		t.Fatal(err)
	}
	b.Create(topic, P)
	for _, g := range []string{"g1", "g2"} {
		// Both groups exist before the first publish, so both start at 0.
		if _, err := b.Join(topic, g, "a"); err != nil {
			t.Fatal(err)
		}
	}
	f := &hFailures{}
	l := hNewLedger(f)
	var done atomic.Bool
	trash := make(chan []engine.Record, 16)
	trashParts := make(chan []int32, 16)
	scribbler := func() {
		for {
			select {
			case recs, ok := <-trash:
				if !ok {
					return
				}
				for k := 0; k < 3; k++ {
					for i := range recs {
						recs[i] = engine.Record{Topic: "evil", Partition: -7, Offset: -9, Payload: "garbage"}
					}
					recs = append(recs[:cap(recs)], engine.Record{})[:0]
				}
			case parts := <-trashParts:
				for i := range parts {
					parts[i] = -1
				}
			}
		}
	}
	consumer := func(g, m string, appendPoll bool, seed uint64) func() {
		return func() {
			rng := rand.New(rand.NewPCG(seed, 4))
			var buf []engine.Record
			for !f.stop.Load() && !done.Load() {
				parts, err := b.Join(topic, g, m)
				if err != nil {
					f.fail("Join: %v", err)
					return
				}
				for i := range parts {
					parts[i] = 63
				}
				parts = append(parts, 5, 6, 7)
				trashParts <- parts
				// Others join and leave concurrently, so the share may differ,
				// but it is a round-robin share of [0,P): nothing scribbled.
				again, _ := b.Join(topic, g, m)
				if len(again) == 0 || again[0] < 0 || again[len(again)-1] >= P {
					f.fail("Join twice after scribbling: %v", again)
				}
				for i := 1; i < len(again); i++ {
					if again[i]-again[i-1] != again[1]-again[0] {
						f.fail("Join twice after scribbling: %v", again)
					}
				}
				var recs []engine.Record
				if appendPoll {
					buf, err = b.AppendPoll(buf[:0], topic, g, m, 64)
					recs = buf
				} else {
					recs, err = b.Poll(topic, g, m, 64)
				}
				if err != nil {
					f.fail("Poll: %v", err)
					return
				}
				l.polled(g, recs)
				type key struct {
					p   int32
					off int64
				}
				keys := make([]key, len(recs))
				for i, r := range recs {
					if r.Topic != topic || r.Payload != fmt.Sprintf("%d:%d", r.Partition, r.Offset) {
						f.fail("%s got %+v", g, r)
					}
					keys[i] = key{r.Partition, r.Offset}
					recs[i].Payload, recs[i].Offset, recs[i].Partition = "scribbled", 1<<40, 0
				}
				if !appendPoll {
					trash <- recs
				}
				for _, k := range keys {
					if rng.IntN(4) == 0 {
						b.Retry(topic, g, m, k.p, k.off)
					} else if ok, _ := b.Ack(topic, g, m, k.p, k.off); ok {
						l.acked(g, k.p, k.off)
					}
				}
				if rng.IntN(8) == 0 {
					b.Leave(topic, g, m)
				}
			}
		}
	}
	var consumersDone sync.WaitGroup
	consumersDone.Add(4)
	wrap := func(fn func()) func() { return func() { defer consumersDone.Done(); fn() } }
	hRun(t, hDeadline,
		wrap(consumer("g1", "a", false, 1)), wrap(consumer("g1", "b", true, 2)),
		wrap(consumer("g2", "a", true, 3)), wrap(consumer("g2", "c", false, 4)),
		scribbler,
		hPublisher(b, topic, []int32{0, 1, 2, 3}, l, f, &done),
		func() {
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) && !f.stop.Load() && l.nAck.Load() < 3000 {
				time.Sleep(time.Millisecond)
			}
			done.Store(true)
			consumersDone.Wait()
			close(trash)
		})
	f.report(t)
	if l.nAck.Load() < 50 {
		t.Fatalf("only %d acks before the drain", l.nAck.Load())
	}
	hDrainVerify(t, b, topic, P, map[string][]int64{"g1": make([]int64, P), "g2": make([]int64, P)}, []string{"a", "b", "c"}, l)
}

// TestHostileAppendPollMatchesModelPoll: AppendPoll into a caller's buffer
// that already holds records (with and without spare capacity) must leave
// those records as they are, append exactly what the model's Poll returns
// (maxRecords counting only the new ones), and on an invalid call return
// the buffer unchanged and change nothing. New with a nil Option is an
// invalid argument, not a panic.
func TestHostileAppendPollMatchesModelPoll(t *testing.T) {
	if _, err := hNew(5, nil); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("New(5, nil): %v, want ErrInvalidArgument", err)
	}
	h := hNewPair(t, 4)
	h.do(hC("t", 5))
	h.do(hJ("t", "g", "a"))
	h.do(hJ("t", "g", "b"))
	rng := rand.New(rand.NewPCG(3, 4))
	sentinel := engine.Record{Topic: "keep", Partition: 99, Offset: -5, Payload: "\x00mine"}
	for i := range 400 {
		if rng.IntN(2) == 0 {
			h.do(hPub("t", int32(rng.IntN(5)), fmt.Sprint(i)))
		}
		m := []string{"a", "b", "é", ""}[rng.IntN(4)]
		n := []int32{1, 2, 3, 64, 0, 65}[rng.IntN(6)]
		pre := rng.IntN(3)
		dst := make([]engine.Record, pre, pre+rng.IntN(3))
		for j := range dst {
			dst[j] = sentinel
		}
		before := hProbe(h.b, []string{"t"}, []string{"g"})
		out, err := h.b.AppendPoll(dst, "t", "g", m, n)
		want := hModel(h.m, hQ("t", "g", m, n))
		if len(out) < pre || (pre > 0 && &out[0] != &dst[0] && len(out) <= cap(dst)) {
			t.Fatalf("AppendPoll lost or moved the caller's prefix: len %d, pre %d", len(out), pre)
		}
		for j := 0; j < pre; j++ {
			if !reflect.DeepEqual(out[j], sentinel) {
				t.Fatalf("AppendPoll changed the caller's record %d: %+v", j, out[j])
			}
		}
		got := hFinish(hOut{Recs: slices.Clone(out[pre:])}, err, engine.ErrInvalidArgument)
		if want.Err == "" && len(want.Recs) == 0 && len(got.Recs) == 0 {
			got.Recs = want.Recs // AppendPoll may leave a nil dst nil
		}
		if !hSame(got, want) {
			t.Fatalf("AppendPoll(%d records, %q, %d): %s, model Poll: %s", pre, m, n, hOutString(got), hOutString(want))
		}
		if err != nil {
			if len(out) != pre {
				t.Fatalf("failed AppendPoll returned %d records, want the %d given", len(out), pre)
			}
			if after := hProbe(h.b, []string{"t"}, []string{"g"}); after != before {
				t.Fatalf("failed AppendPoll changed state:\n%s\n%s", before, after)
			}
		}
		for _, r := range want.Recs {
			if rng.IntN(3) > 0 {
				h.do(hA("t", "g", m, r.Partition, r.Offset))
			}
		}
		if i%50 == 0 {
			h.same(nil, []string{"g"})
		}
	}
	h.same(nil, []string{"g"})
}
