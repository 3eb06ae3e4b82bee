package engine_test

// The engine beside the model, one call at a time: the core calls as data
// (hOp), applied identically to an engine.Broker and a model.Broker (hEngine,
// hModel), their outcomes compared by error class (hOut), a probe of
// everything a caller can observe without changing anything (hProbe), and a
// pair of brokers stepped in lockstep that fails with the recent steps when
// an outcome or the observable state differs (hPair). The sequential
// comparisons (validation_test.go, model_scripts_test.go,
// caller_buffers_test.go) and the linearization check (linearize_test.go)
// are written in these.

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/testclock"
	"github.com/f91dcac0/tributary/model"
)

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
