package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/model"
)

// The differential test runs the same operation sequence on engine and on the
// sequential reference model and compares every result and, after every
// operation, the observable state (log start/end offsets, committed offsets,
// in-flight flags). Sequences are decoded from bytes so that the random test
// and the fuzz target share one generator; on a mismatch the sequence is
// shrunk to a shortest failing one and printed.

// op is one decoded call. kind selects the method; unused fields are zero.
type op struct {
	kind      string
	topic     string
	group     string
	member    string
	partition int32
	offset    int64
	n         int32 // partitionCount for Create, maxRecords for Poll
	payload   string
	// aim, for Ack and Retry, makes the call target a record of the latest
	// non-empty poll (record aim-1, modulo its length), with that poll's
	// group, so that successful acks and retries are common. ownMember
	// keeps the decoded member instead of the poller (a non-owner's ack).
	aim       int
	ownMember bool
}

func (o op) String() string {
	switch o.kind {
	case "Create":
		return fmt.Sprintf("Create(%q, %d)", o.topic, o.n)
	case "Join", "Leave":
		return fmt.Sprintf("%s(%q, %q, %q)", o.kind, o.topic, o.group, o.member)
	case "Publish":
		return fmt.Sprintf("Publish(%q, %d, %q)", o.topic, o.partition, o.payload)
	case "Poll":
		return fmt.Sprintf("Poll(%q, %q, %q, %d)", o.topic, o.group, o.member, o.n)
	default:
		return fmt.Sprintf("%s(%q, %q, %q, %d, %d)", o.kind, o.topic, o.group, o.member, o.partition, o.offset)
	}
}

// byteSource hands out bytes of a fuzz input, then zeros.
type byteSource struct{ b []byte }

func (s *byteSource) next() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *byteSource) pick(xs ...string) string { return xs[int(s.next())%len(xs)] }

// Mostly valid names, some invalid or unknown, so that errors and absent
// groups/members are exercised alongside the happy path.
var (
	topicNames  = []string{"t0", "t0", "t0", "t1", "t1", "nope", "bad.id", ""}
	groupNames  = []string{"g0", "g0", "g1", "g1", "G", "g 2", strings.Repeat("g", 65)}
	memberNames = []string{"a", "a", "b", "b", "c", "B", "a10", "a9", "é", ""}
)

// decode turns bytes into a capacity (1..4) and a sequence of operations.
func decode(data []byte) (int32, []op) {
	s := &byteSource{b: data}
	capacity := int32(s.next()%4) + 1
	var ops []op
	for len(s.b) > 0 {
		o := op{topic: s.pick(topicNames...)}
		switch k := s.next() % 16; {
		case k == 0:
			o.kind = "Create"
			o.n = int32(s.next()%6) - 1 // -1..4, so 0 and -1 are invalid
		case k <= 2:
			o.kind = "Join"
			o.group, o.member = s.pick(groupNames...), s.pick(memberNames...)
		case k == 3:
			o.kind = "Leave"
			o.group, o.member = s.pick(groupNames...), s.pick(memberNames...)
		case k <= 7:
			o.kind = "Publish"
			o.partition = int32(s.next()%6) - 1
			o.payload = fmt.Sprintf("p%d", s.next())
		case k <= 10:
			o.kind = "Poll"
			o.group, o.member = s.pick(groupNames...), s.pick(memberNames...)
			o.n = int32(s.next()%5) - 0 // 0..4, 0 invalid
			if s.next()%16 == 0 {
				o.n = 65
			}
		default:
			o.kind = "Ack"
			if k >= 14 {
				o.kind = "Retry"
			}
			o.group, o.member = s.pick(groupNames...), s.pick(memberNames...)
			o.partition = int32(s.next()%6) - 1
			o.offset = int64(s.next()%8) - 1
			if a := s.next(); a%4 != 0 {
				o.aim, o.ownMember = int(a), a%4 == 3
			}
		}
		ops = append(ops, o)
	}
	return capacity, ops
}

// outcome is a call's result reduced to what both implementations share.
type outcome struct {
	Invalid  bool // errors.Is(err, ErrInvalidArgument)
	OtherErr string
	Bool     bool
	Int      int64
	Parts    []int32
	Records  []string
}

// subject is the engine's API as the differential test drives it, so that a
// deliberately broken wrapper can be checked too.
type subject interface {
	Create(topic string, partitionCount int32) (bool, error)
	Join(topic, group, member string) ([]int32, error)
	Leave(topic, group, member string) (bool, error)
	Publish(topic string, partition int32, payload string) (int64, error)
	Poll(topic, group, member string, maxRecords int32) ([]engine.Record, error)
	Ack(topic, group, member string, partition int32, offset int64) (bool, error)
	Retry(topic, group, member string, partition int32, offset int64) (bool, error)
	LogStartOffset(topic string, partition int32) (int64, error)
	LogEndOffset(topic string, partition int32) (int64, error)
	Committed(topic, group string, partition int32) (int64, error)
	InFlight(topic, group string, partition int32) (bool, error)
}

// newSubject builds the implementation under test for a capacity.
type newSubject func(capacity int32) (subject, error)

func realEngine(capacity int32) (subject, error) { return engine.New(capacity) }

// caller is the core API of either implementation, R being its Record type.
type caller[R any] interface {
	Create(topic string, partitionCount int32) (bool, error)
	Join(topic, group, member string) ([]int32, error)
	Leave(topic, group, member string) (bool, error)
	Publish(topic string, partition int32, payload string) (int64, error)
	Poll(topic, group, member string, maxRecords int32) ([]R, error)
	Ack(topic, group, member string, partition int32, offset int64) (bool, error)
	Retry(topic, group, member string, partition int32, offset int64) (bool, error)
}

// outcomeOf makes call o on b; show prints a record, invalid is b's
// invalid-argument sentinel.
func outcomeOf[R any](b caller[R], o op, show func(R) string, invalid error) outcome {
	var (
		out outcome
		err error
	)
	switch o.kind {
	case "Create":
		out.Bool, err = b.Create(o.topic, o.n)
	case "Join":
		out.Parts, err = b.Join(o.topic, o.group, o.member)
	case "Leave":
		out.Bool, err = b.Leave(o.topic, o.group, o.member)
	case "Publish":
		out.Int, err = b.Publish(o.topic, o.partition, o.payload)
	case "Poll":
		var recs []R
		recs, err = b.Poll(o.topic, o.group, o.member, o.n)
		if recs != nil {
			out.Records = []string{}
		}
		for _, r := range recs {
			out.Records = append(out.Records, show(r))
		}
	case "Ack":
		out.Bool, err = b.Ack(o.topic, o.group, o.member, o.partition, o.offset)
	case "Retry":
		out.Bool, err = b.Retry(o.topic, o.group, o.member, o.partition, o.offset)
	}
	out.Invalid = errors.Is(err, invalid)
	if err != nil && !out.Invalid {
		out.OtherErr = err.Error()
	}
	return out
}

func engineOutcome(b subject, o op) outcome {
	return outcomeOf[engine.Record](b, o, func(r engine.Record) string {
		return fmt.Sprintf("%s/%d/%d %q", r.Topic, r.Partition, r.Offset, r.Payload)
	}, engine.ErrInvalidArgument)
}

func modelOutcome(b *model.Broker, o op) outcome {
	return outcomeOf[model.Record](b, o, func(r model.Record) string {
		return fmt.Sprintf("%s/%d/%d %q", r.Topic, r.Partition, r.Offset, r.Payload)
	}, model.ErrInvalidArgument)
}

// cursorState is one group's position on one partition.
type cursorState struct {
	Committed int64
	InFlight  bool
}

// partitionState is what both implementations expose about one partition.
type partitionState struct {
	Start, End int64
	Groups     map[string]cursorState
}

// snapshot reads the observable state of every topic the model knows, from
// both implementations, in the same shape. It fails the test on an
// inspection error, which would itself be a divergence.
func snapshot(t testing.TB, e subject, m *model.Broker) (ws, ms map[string][]partitionState) {
	ws, ms = map[string][]partitionState{}, map[string][]partitionState{}
	for _, name := range m.Topics() {
		n, err := m.PartitionCount(name)
		if err != nil {
			t.Fatalf("model.PartitionCount(%q): %v", name, err)
		}
		groups, err := m.Groups(name)
		if err != nil {
			t.Fatalf("model.Groups(%q): %v", name, err)
		}
		for p := int32(0); p < n; p++ {
			var w, v partitionState
			var errs []error
			var err error
			w.Start, err = e.LogStartOffset(name, p)
			errs = append(errs, err)
			w.End, err = e.LogEndOffset(name, p)
			errs = append(errs, err)
			v.Start, err = m.LogStartOffset(name, p)
			errs = append(errs, err)
			v.End, err = m.LogEndOffset(name, p)
			errs = append(errs, err)
			w.Groups, v.Groups = map[string]cursorState{}, map[string]cursorState{}
			for _, g := range groups {
				var wc, vc cursorState
				wc.Committed, err = e.Committed(name, g, p)
				errs = append(errs, err)
				wc.InFlight, err = e.InFlight(name, g, p)
				errs = append(errs, err)
				vc.Committed, err = m.Committed(name, g, p)
				errs = append(errs, err)
				vc.InFlight, err = m.InFlight(name, g, p)
				errs = append(errs, err)
				w.Groups[g], v.Groups[g] = wc, vc
			}
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("inspecting %s/%d: %v", name, p, err)
			}
			ws[name] = append(ws[name], w)
			ms[name] = append(ms[name], v)
		}
	}
	return ws, ms
}

// divergence runs ops on a fresh engine and model and returns a description
// of the first difference, or "" when they agree throughout.
func divergence(t testing.TB, mk newSubject, capacity int32, ops []op) string {
	e, err := mk(capacity)
	if err != nil {
		t.Fatalf("engine.New(%d): %v", capacity, err)
	}
	m, err := model.New(capacity)
	if err != nil {
		t.Fatalf("model.New(%d): %v", capacity, err)
	}
	var lastPoll op // the latest poll that returned records
	var lastRecs []model.Record
	for i, o := range ops {
		if o.aim != 0 && len(lastRecs) > 0 {
			r := lastRecs[(o.aim-1)%len(lastRecs)]
			o.topic, o.group = lastPoll.topic, lastPoll.group
			if !o.ownMember {
				o.member = lastPoll.member
			}
			o.partition, o.offset = r.Partition, r.Offset
		}
		o.aim, o.ownMember = 0, false
		ops[i] = o // report the call as made
		if o.kind == "Poll" {
			if recs, err := m.Clone().Poll(o.topic, o.group, o.member, o.n); err == nil && len(recs) > 0 {
				lastPoll, lastRecs = o, recs
			}
		}
		// reflect.DeepEqual is the fast check; cmp.Diff explains a mismatch.
		got, want := engineOutcome(e, o), modelOutcome(m, o)
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("op %d %v: result (-model +engine):\n%s", i, o, cmp.Diff(want, got))
		}
		es, ms := snapshot(t, e, m)
		if !reflect.DeepEqual(ms, es) {
			return fmt.Sprintf("after op %d %v: state (-model +engine):\n%s", i, o, cmp.Diff(ms, es))
		}
	}
	return ""
}

// shrink returns a shortest-found failing subsequence of ops: it cuts the
// tail after the first failure, then greedily drops single operations while
// the sequence still fails.
func shrink(t testing.TB, mk newSubject, capacity int32, ops []op) []op {
	for n := 1; n <= len(ops); n++ {
		if divergence(t, mk, capacity, ops[:n]) != "" {
			ops = ops[:n]
			break
		}
	}
	for i := len(ops) - 1; i >= 0; i-- {
		cand := append(append([]op{}, ops[:i]...), ops[i+1:]...)
		if divergence(t, mk, capacity, cand) != "" {
			ops = cand
		}
	}
	return ops
}

// compareWithModel decodes data, runs it on mk's implementation and on the
// model, and returns "" when they agree, or a report with the shortest
// failing sequence found and its shrunk length.
func compareWithModel(t testing.TB, mk newSubject, data []byte) (report string, shrunk int) {
	capacity, ops := decode(data)
	if divergence(t, mk, capacity, ops) == "" {
		return "", 0
	}
	min := shrink(t, mk, capacity, ops)
	var sb strings.Builder
	fmt.Fprintf(&sb, "engine and model diverge; shortest failing sequence found (capacity %d, %d of %d ops):\n", capacity, len(min), len(ops))
	for _, o := range min {
		fmt.Fprintf(&sb, "  %v\n", o)
	}
	sb.WriteString(divergence(t, mk, capacity, min))
	return sb.String(), len(min)
}

func checkAgainstModel(t *testing.T, data []byte) {
	if report, _ := compareWithModel(t, realEngine, data); report != "" {
		t.Fatal(report)
	}
}

// randomSequence returns the bytes of a random sequence of about length
// operations that starts by creating topic t0 with 3 partitions, so that few
// sequences are all-invalid.
func randomSequence(rng *rand.Rand, length int) []byte {
	data := make([]byte, length*4+1)
	for j := range data {
		data[j] = byte(rng.Uint32())
	}
	data[1], data[2], data[3] = 0, 0, 4
	return data
}

// TestEngineMatchesModel runs thousands of random sequences of valid and
// invalid calls, with capacities of 1 to 4 so that partitions fill up, and
// groups joining and leaving.
func TestEngineMatchesModel(t *testing.T) {
	sequences, length := 3000, 120
	if raceEnabled || testing.Short() {
		sequences = 1000 // the race detector adds nothing to a sequential test
	}
	rng := rand.New(rand.NewPCG(2026, 11))
	for i := 0; i < sequences; i++ {
		checkAgainstModel(t, randomSequence(rng, length))
		if t.Failed() {
			return
		}
	}
}

// retryCommits is a broken broker whose Retry commits like Ack.
type retryCommits struct{ *engine.Broker }

func (b retryCommits) Retry(topic, group, member string, partition int32, offset int64) (bool, error) {
	return b.Ack(topic, group, member, partition, offset)
}

// pollSkipsFirst is a broken broker whose Poll loses the first record of a
// multi-record result.
type pollSkipsFirst struct{ *engine.Broker }

// Poll hides the first record of a multi-record result (it stays in flight).
func (b pollSkipsFirst) Poll(topic, group, member string, maxRecords int32) ([]engine.Record, error) {
	recs, err := b.Broker.Poll(topic, group, member, maxRecords)
	if len(recs) > 1 {
		recs = recs[1:]
	}
	return recs, err
}

// publishIgnoresFull is a broken broker that reports 0 instead of -1 for a
// full partition.
type publishIgnoresFull struct{ *engine.Broker }

func (b publishIgnoresFull) Publish(topic string, partition int32, payload string) (int64, error) {
	off, err := b.Broker.Publish(topic, partition, payload)
	if off == -1 {
		off = 0
	}
	return off, err
}

// TestDifferentialCatchesBrokenBrokers shows the differential check can
// fail: each broken wrapper must be caught within a bounded number of random
// sequences, and the shrinker must cut the failing sequence down.
func TestDifferentialCatchesBrokenBrokers(t *testing.T) {
	broken := map[string]newSubject{
		"retry commits": func(c int32) (subject, error) {
			b, err := engine.New(c)
			return retryCommits{b}, err
		},
		"poll hides a record": func(c int32) (subject, error) {
			b, err := engine.New(c)
			return pollSkipsFirst{b}, err
		},
		"publish ignores full": func(c int32) (subject, error) {
			b, err := engine.New(c)
			return publishIgnoresFull{b}, err
		},
	}
	for name, mk := range broken {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 7))
			for i := 1; i <= 200; i++ {
				report, shrunk := compareWithModel(t, mk, randomSequence(rng, 120))
				if report == "" {
					continue
				}
				t.Logf("caught after %d sequences, shrunk to %d ops", i, shrunk)
				if shrunk > 12 {
					t.Errorf("shrunk sequence has %d ops, want at most 12:\n%s", shrunk, report)
				}
				return
			}
			t.Fatal("broken broker not caught in 200 sequences")
		})
	}
}

// FuzzEngineMatchesModel is the same check driven by the fuzzer:
// go test -fuzz FuzzEngineMatchesModel ./engine/
func FuzzEngineMatchesModel(f *testing.F) {
	f.Add([]byte{1, 0, 0, 3, 1, 0, 0, 0, 4, 0, 0, 1, 8, 0, 0, 0, 0, 1})
	f.Add([]byte("tributary differential seed with some bytes in it"))
	f.Fuzz(checkAgainstModel)
}
