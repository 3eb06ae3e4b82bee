package tributary_test

// Consumers: Poll's blocking and wake-ups, Ack, Retry, Seek and rebalances,
// undecodable payloads, the consumer options and the dead-letter topic,
// Run's ack, retry, backoff and dead-letter paths, and several groups.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

func TestPollBlocksUntilPublish(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "c1")

	done := goResult(func() ([]tributary.Message[purchase], error) { return cons.Poll(guardCtx(t), 8) })
	waitPollBlocked(t, cons, 1)
	stillBlocked(t, "Poll of an empty topic", done)
	sent := sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 1, Value: purchase{ID: 5}})
	r := awaitResult(t, "Poll after a publish", done)
	if r.err != nil || len(r.v) != 1 || r.v[0].ID != sent.ID || r.v[0].Value.ID != 5 {
		t.Fatalf("Poll = (%+v, %v), want the message %s", r.v, r.err, sent.ID)
	}
	if s := cons.Stats(); s.Waits < 1 || s.Wakeups < 1 {
		t.Fatalf("Stats = %+v, want at least one wait and one wakeup", s)
	}
}

func TestPollReturnsAtOnce(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 3, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	for _, p := range []int32{2, 0, 2, 1} {
		sendOK(t, pr, tp, tributary.Message[purchase]{Partition: p})
	}
	cons := testConsumer(t, tp, "g", "c1")
	tests := []struct {
		name string
		max  int32
		wids []string
	}{
		{"max 2 takes the lowest partitions", 2, []string{"0-0", "1-0"}},
		{"one per partition", 64, []string{"2-0"}}, // 0 and 1 are in flight
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			for _, m := range pollOK(t, cons, tt.max) {
				ids = append(ids, m.ID)
			}
			if !slices.Equal(ids, tt.wids) {
				t.Fatalf("Poll(%d) = %v, want %v", tt.max, ids, tt.wids)
			}
		})
	}
	if s := cons.Stats(); s.Waits != 0 {
		t.Fatalf("Stats = %+v: Poll waited though records were deliverable", s)
	}
	ms, err := cons.TryPoll(64)
	if err != nil || len(ms) != 0 {
		t.Fatalf("TryPoll with everything in flight = (%v, %v), want none", ms, err)
	}
}

func TestPollInvalid(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	cons := testConsumer(t, tp, "g", "c1")
	for _, max := range []int32{0, -1, 65, 1000} {
		t.Run(strconv.Itoa(int(max)), func(t *testing.T) {
			_, err := cons.Poll(guardCtx(t), max)
			checkErr(t, "Poll", err, tributary.ErrInvalidArgument)
			_, err = cons.TryPoll(max)
			checkErr(t, "TryPoll", err, tributary.ErrInvalidArgument)
		})
	}
	t.Run("nil context", func(t *testing.T) {
		_, err := cons.Poll(nil, 1) //nolint:staticcheck // the point of the test
		checkErr(t, "Poll(nil)", err, tributary.ErrInvalidArgument)
	})
}

func TestPollContextEnds(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	cons := testConsumer(t, tp, "g", "c1")
	tests := []struct {
		name string
		werr error
	}{
		{"cancel", context.Canceled},
		{"deadline", context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ctx context.Context
			var cancel context.CancelFunc
			if tt.werr == context.Canceled {
				ctx, cancel = context.WithCancel(context.Background())
			} else {
				ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
			}
			defer cancel()
			waits := cons.Stats().Waits
			done := goResult(func() ([]tributary.Message[purchase], error) { return cons.Poll(ctx, 1) })
			if tt.werr == context.Canceled {
				waitPollBlocked(t, cons, waits+1)
				cancel()
			}
			r := awaitResult(t, "Poll after its context ended", done)
			checkErr(t, "Poll", r.err, tt.werr)
		})
	}
	// The consumer still works.
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	sent := sendOK(t, pr, tp, tributary.Message[purchase]{})
	if m := pollOK(t, cons, 1); m[0].ID != sent.ID {
		t.Fatalf("Poll = %v after cancelled polls", m)
	}
}

func TestPollClose(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	cons := testConsumer(t, tp, "g", "c1")
	done := goResult(func() ([]tributary.Message[purchase], error) { return cons.Poll(guardCtx(t), 1) })
	waitPollBlocked(t, cons, 1)
	if err := cons.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := awaitResult(t, "Poll after Close", done)
	checkErr(t, "blocked Poll after Close", r.err, tributary.ErrClosed)
	_, err := cons.Poll(guardCtx(t), 1)
	checkErr(t, "Poll on a closed consumer", err, tributary.ErrClosed)
	_, err = cons.TryPoll(1)
	checkErr(t, "TryPoll on a closed consumer", err, tributary.ErrClosed)
	if err := cons.Close(); err != nil {
		t.Fatalf("Close twice: %v", err)
	}
	if g := groupDesc(t, c, "orders", "g"); len(g.Members) != 0 {
		t.Fatalf("members after Close: %v", g.Members)
	}
}

func TestAckRetry(t *testing.T) {
	type step struct {
		op   string // "ack", "retry", "poll"
		werr error
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"ack once", []step{{"ack", nil}}},
		{"double ack", []step{{"ack", nil}, {"ack", tributary.ErrNotInFlight}}},
		{"retry then ack the released delivery", []step{{"retry", nil}, {"ack", tributary.ErrNotInFlight}}},
		{"double retry", []step{{"retry", nil}, {"retry", tributary.ErrNotInFlight}}},
		{"ack after Close", []step{{"close", nil}, {"ack", tributary.ErrNotInFlight}}},
		{"retry after Close", []step{{"close", nil}, {"retry", tributary.ErrNotInFlight}}},
		{"ack after Seek", []step{{"seek", nil}, {"ack", tributary.ErrNotInFlight}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCluster(t, 10)
			tp := testTopic[purchase](t, c, "orders", 1, nil)
			pr := testProducer[purchase](t, c, "p", tributary.Manual())
			sendOK(t, pr, tp, tributary.Message[purchase]{})
			cons := testConsumer(t, tp, "g", "c1")
			m := pollOK(t, cons, 1)[0]
			for i, st := range tt.steps {
				var err error
				switch st.op {
				case "ack":
					err = cons.Ack(m)
				case "retry":
					err = cons.Retry(m)
				case "close":
					err = cons.Close()
				case "seek":
					err = cons.Seek(0, 0)
				}
				checkErr(t, fmt.Sprintf("step %d (%s)", i, st.op), err, st.werr)
			}
		})
	}
	t.Run("not the in-flight record", func(t *testing.T) {
		c := testCluster(t, 10)
		tp := testTopic[purchase](t, c, "orders", 2, nil)
		pr := testProducer[purchase](t, c, "p", tributary.Manual())
		sendOK(t, pr, tp, tributary.Message[purchase]{})
		sendOK(t, pr, tp, tributary.Message[purchase]{})
		cons := testConsumer(t, tp, "g", "c1")
		m := pollOK(t, cons, 1)[0]
		tests := []struct {
			name      string
			partition int32
			offset    int64
			werr      error
		}{
			{"next offset", 0, 1, tributary.ErrNotInFlight},
			{"other partition", 1, 0, tributary.ErrNotInFlight},
			{"negative offset", 0, -1, tributary.ErrInvalidArgument},
			{"partition out of range", 2, 0, tributary.ErrInvalidArgument},
			{"negative partition", -1, 0, tributary.ErrInvalidArgument},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				bad := tributary.Message[purchase]{Partition: tt.partition, Offset: tt.offset}
				checkErr(t, "Ack", cons.Ack(bad), tt.werr)
				checkErr(t, "Retry", cons.Retry(bad), tt.werr)
			})
		}
		if g := groupDesc(t, c, "orders", "g"); !g.Partitions[0].InFlight || g.Partitions[0].Committed != 0 {
			t.Fatalf("refused acks changed the group: %+v", g.Partitions[0])
		}
		if err := cons.Ack(m); err != nil {
			t.Fatalf("Ack of the in-flight record: %v", err)
		}
		if g := groupDesc(t, c, "orders", "g"); g.Partitions[0].InFlight || g.Partitions[0].Committed != 1 {
			t.Fatalf("after Ack: %+v, want committed 1, nothing in flight", g.Partitions[0])
		}
	})
}

// TestAckAfterRebalance is docs/contract.md's rebalance example through the typed API.
func TestAckAfterRebalance(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 3, nil)
	pr := testProducer[purchase](t, c, "p", tributary.RoundRobin())
	for i := range 3 {
		sendOK(t, pr, tp, tributary.Message[purchase]{Value: purchase{ID: i}})
	}
	a := testConsumer(t, tp, "g", "a")
	ms := pollOK(t, a, 3)
	if len(ms) != 3 {
		t.Fatalf("a polled %d messages, want 3", len(ms))
	}
	b := testConsumer(t, tp, "g", "b")
	if got, want := a.Assignment(), []int32{0, 2}; !slices.Equal(got, want) {
		t.Fatalf("a owns %v, want %v", got, want)
	}
	if got, want := b.Assignment(), []int32{1}; !slices.Equal(got, want) {
		t.Fatalf("b owns %v, want %v", got, want)
	}
	checkErr(t, "a acks the moved partition 1", a.Ack(ms[1]), tributary.ErrNotInFlight)
	checkErr(t, "a retries the moved partition 1", a.Retry(ms[1]), tributary.ErrNotInFlight)
	checkErr(t, "a acks kept partition 0", a.Ack(ms[0]), nil)
	checkErr(t, "a acks kept partition 2", a.Ack(ms[2]), nil)
	got := pollOK(t, b, 3)
	if len(got) != 1 || got[0].ID != "1-0" || got[0].Attempt != 2 {
		t.Fatalf("b polled %+v, want 1-0 at attempt 2", got)
	}
	checkErr(t, "b acks", b.Ack(got[0]), nil)
}

func TestAssignmentRebalance(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 5, nil)
	members := map[string]*tributary.Consumer[purchase]{}
	top := t // consumers live for the whole test, not one step
	steps := []struct {
		name  string
		join  string // member to add
		leave string // member to close
		want  map[string][]int32
	}{
		{"b alone", "b", "", map[string][]int32{"b": {0, 1, 2, 3, 4}}},
		{"a joins", "a", "", map[string][]int32{"a": {0, 2, 4}, "b": {1, 3}}},
		{"c joins", "c", "", map[string][]int32{"a": {0, 3}, "b": {1, 4}, "c": {2}}},
		{"a leaves", "", "a", map[string][]int32{"b": {0, 2, 4}, "c": {1, 3}}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.join != "" {
				members[st.join] = testConsumer(top, tp, "g", st.join)
			}
			if st.leave != "" {
				members[st.leave].Close()
				delete(members, st.leave)
				if got := members["b"].Assignment(); len(got) == 0 {
					t.Fatal("b owns nothing")
				}
			}
			for name, want := range st.want {
				if got := members[name].Assignment(); !slices.Equal(got, want) {
					t.Fatalf("%s owns %v, want %v", name, got, want)
				}
			}
		})
	}
	// A closed consumer owns nothing.
	closed := testConsumer(t, tp, "g", "zz")
	closed.Close()
	if got := closed.Assignment(); len(got) != 0 {
		t.Fatalf("closed consumer owns %v", got)
	}
}

func TestConsumerSeek(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	for i := range 3 {
		sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 0, Value: purchase{ID: i}})
	}
	cons := testConsumer(t, tp, "g", "c1")
	consume := func(n int) []string {
		var ids []string
		for range n {
			m := pollOK(t, cons, 1)[0]
			ids = append(ids, m.ID)
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
		return ids
	}
	first := consume(3)
	if want := []string{"0-0", "0-1", "0-2"}; !slices.Equal(first, want) {
		t.Fatalf("first pass %v, want %v", first, want)
	}
	// Acked by the only group, the records are gone: the log start is 3.
	checkErr(t, "Seek before the log start", cons.Seek(0, 0), tributary.ErrOffsetOutOfRange)

	// With a second group holding the records, the first can replay them.
	c2 := testCluster(t, 10)
	tp2 := testTopic[purchase](t, c2, "orders", 2, nil)
	pr2 := testProducer[purchase](t, c2, "p", tributary.Manual())
	if _, err := c2.CreateGroup("orders", "hold", engine.RoundRobin); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		sendOK(t, pr2, tp2, tributary.Message[purchase]{Partition: 0, Value: purchase{ID: i}})
	}
	cons = testConsumer(t, tp2, "g", "c1")
	first = consume(3)
	tests := []struct {
		name   string
		offset int64
		wids   []string
		werr   error
	}{
		{"replay from 0", 0, first, nil},
		{"replay from 1", 1, first[1:], nil},
		{"past the end", 4, nil, tributary.ErrOffsetOutOfRange},
		{"negative", -1, nil, tributary.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cons.Seek(0, tt.offset)
			checkErr(t, "Seek", err, tt.werr)
			if err != nil {
				return
			}
			if got := consume(len(tt.wids)); !slices.Equal(got, tt.wids) {
				t.Fatalf("replayed %v, want %v", got, tt.wids)
			}
		})
	}
	checkErr(t, "Seek(partition out of range)", cons.Seek(2, 0), tributary.ErrInvalidArgument)

	t.Run("wakes a blocked Poll", func(t *testing.T) {
		waits := cons.Stats().Waits
		done := goResult(func() ([]tributary.Message[purchase], error) { return cons.Poll(guardCtx(t), 1) })
		waitPollBlocked(t, cons, waits+1)
		if err := cons.Seek(0, 2); err != nil {
			t.Fatal(err)
		}
		r := awaitResult(t, "Poll after Seek", done)
		if r.err != nil || r.v[0].ID != "0-2" {
			t.Fatalf("Poll = (%v, %v), want 0-2", r.v, r.err)
		}
	})
}

func TestPollUndecodable(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	publishRaw(t, c, "orders", 0, engine.Message{Key: "k", Payload: "not json"})
	cons := testConsumer(t, tp, "g", "c1")
	m := pollOK(t, cons, 1)[0]
	if !errors.Is(m.Err, tributary.ErrDecode) || m.Value != (purchase{}) || m.Payload != "not json" || m.Key != "k" || m.ID != "0-0" {
		t.Fatalf("undecodable message = %+v, want Err wrapping ErrDecode and the zero Value", m)
	}
	if err := cons.Ack(m); err != nil {
		t.Fatalf("Ack of an undecodable message: %v", err)
	}
}

func TestNewConsumerOptionsInvalid(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	tests := []struct {
		name  string
		group string
		opts  []tributary.ConsumerOption
	}{
		{"batch 0", "g", []tributary.ConsumerOption{tributary.WithBatch(0)}},
		{"batch 65", "g", []tributary.ConsumerOption{tributary.WithBatch(65)}},
		{"backoff 0", "g", []tributary.ConsumerOption{tributary.WithBackoff(0, time.Second)}},
		{"backoff negative", "g", []tributary.ConsumerOption{tributary.WithBackoff(-time.Millisecond, time.Second)}},
		{"backoff above max", "g", []tributary.ConsumerOption{tributary.WithBackoff(2*time.Second, time.Second)}},
		{"dead letter 0 attempts", "g", []tributary.ConsumerOption{tributary.WithDeadLetter("x", 0)}},
		{"dead letter 1001 attempts", "g", []tributary.ConsumerOption{tributary.WithDeadLetter("x", 1001)}},
		{"dead letter is the topic", "g", []tributary.ConsumerOption{tributary.WithDeadLetter("orders", 3)}},
		{"dead letter invalid name", "g", []tributary.ConsumerOption{tributary.WithDeadLetter("bad name", 3)}},
		{"nil option", "g", []tributary.ConsumerOption{nil}},
		{"invalid group", "bad group", nil},
		{"empty group", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tributary.NewConsumer(tp, tt.group, "c1", tt.opts...)
			checkErr(t, "NewConsumer", err, tributary.ErrInvalidArgument)
			if got := c.Consumers(); len(got) != 0 {
				t.Fatalf("Consumers() = %v after a refused NewConsumer", got)
			}
			if got, want := c.Topics(), []string{"orders"}; !slices.Equal(got, want) {
				t.Fatalf("Topics() = %v, want %v", got, want)
			}
			if g := describeTopic(t, c, "orders").Groups; len(g) != 0 {
				t.Fatalf("groups %+v after a refused NewConsumer", g)
			}
		})
	}
	// The extremes are valid.
	testConsumer(t, tp, "g", "ok", tributary.WithBatch(1), tributary.WithBatch(64),
		tributary.WithBackoff(time.Nanosecond, time.Nanosecond), tributary.WithDeadLetter("dlq", 1000))
}

func TestDeadLetterTopic(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 3, nil)
	testTopic(t, c, "strings", 1, tributary.String())
	testTopic[int](t, c, "ints", 1, nil)
	testTopic[purchase](t, c, "existing", 1, nil)
	tests := []struct {
		name        string
		dlq         string
		werr        error
		wpartitions int32
	}{
		{"created like the topic", "orders-dlq", nil, 3},
		{"existing of the same type", "existing", nil, 1},
		{"existing String topic", "strings", tributary.ErrTypeMismatch, 0},
		{"existing JSON of another type", "ints", tributary.ErrTypeMismatch, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "c" + strconv.Itoa(i)
			cons, err := tributary.NewConsumer(tp, "g"+strconv.Itoa(i), name, tributary.WithDeadLetter(tt.dlq, 3))
			checkErr(t, "NewConsumer", err, tt.werr)
			if err != nil {
				if slices.Contains(c.Consumers(), name) {
					t.Fatalf("refused consumer registered: %v", c.Consumers())
				}
				return
			}
			defer cons.Close()
			d, err := tributary.OpenTopic[purchase](c, tt.dlq, nil)
			if err != nil {
				t.Fatalf("OpenTopic(dead-letter topic): %v", err)
			}
			if d.Partitions() != tt.wpartitions || d.PayloadType() != purchaseType {
				t.Fatalf("dead-letter topic: %d partitions, type %q; want %d, %q", d.Partitions(), d.PayloadType(), tt.wpartitions, purchaseType)
			}
		})
	}
}

// lagZero reports whether group has committed everything on topic.
func lagZero(t testing.TB, c *tributary.Cluster, topic, group string) func() bool {
	return func() bool {
		for _, g := range describeTopic(t, c, topic).Groups {
			if g.Group != group {
				continue
			}
			for _, p := range g.Partitions {
				if p.Lag != 0 || p.InFlight {
					return false
				}
			}
			return true
		}
		return false
	}
}

func TestRunAcks(t *testing.T) {
	c := testCluster(t, 100)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	pr := testProducer[purchase](t, c, "p", tributary.RoundRobin())
	cons := testConsumer(t, tp, "g", "c1")
	var mu sync.Mutex
	var got []string
	stop := runConsumer(t, cons, func(_ context.Context, m tributary.Message[purchase]) error {
		mu.Lock()
		got = append(got, fmt.Sprintf("%s:%d", m.ID, m.Value.ID))
		mu.Unlock()
		return nil
	})
	for i := range 6 {
		sendOK(t, pr, tp, tributary.Message[purchase]{Value: purchase{ID: i}})
	}
	waitFor(t, "the group to commit everything", lagZero(t, c, "orders", "g"))
	checkErr(t, "Run after cancel", stop(), context.Canceled)

	mu.Lock()
	slices.Sort(got)
	mu.Unlock()
	if want := []string{"0-0:0", "0-1:2", "0-2:4", "1-0:1", "1-1:3", "1-2:5"}; !slices.Equal(got, want) {
		t.Fatalf("handled %v, want %v", got, want)
	}
	if s := cons.Stats(); s.Handled != 6 || s.Acked != 6 || s.Retried != 0 || s.DeadLettered != 0 || s.Polls == 0 {
		t.Fatalf("Stats = %+v, want 6 handled and acked", s)
	}
}

func TestRunRetries(t *testing.T) {
	tests := []struct {
		name string
		fail func(m tributary.Message[purchase]) error // called for each delivery
	}{
		{"error", func(m tributary.Message[purchase]) error {
			if m.Attempt < 3 {
				return errors.New("not yet")
			}
			return nil
		}},
		{"panic", func(m tributary.Message[purchase]) error {
			if m.Attempt < 3 {
				panic("not yet")
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCluster(t, 10)
			tp := testTopic[purchase](t, c, "orders", 2, nil)
			pr := testProducer[purchase](t, c, "p", tributary.Manual())
			cons := testConsumer(t, tp, "g", "c1", fastRetry)
			var mu sync.Mutex
			attempts := map[string][]int32{}
			stop := runConsumer(t, cons, func(_ context.Context, m tributary.Message[purchase]) error {
				mu.Lock()
				attempts[m.ID] = append(attempts[m.ID], m.Attempt)
				mu.Unlock()
				return tt.fail(m)
			})
			sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 0})
			sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 1})
			waitFor(t, "both records committed", lagZero(t, c, "orders", "g"))
			checkErr(t, "Run", stop(), context.Canceled)
			mu.Lock()
			defer mu.Unlock()
			for _, id := range []string{"0-0", "1-0"} {
				if got, want := attempts[id], []int32{1, 2, 3}; !slices.Equal(got, want) {
					t.Fatalf("attempts of %s = %v, want %v", id, got, want)
				}
			}
			if s := cons.Stats(); s.Handled != 6 || s.Acked != 2 || s.Retried != 4 || s.DeadLettered != 0 {
				t.Fatalf("Stats = %+v, want 6 handled, 2 acked, 4 retried", s)
			}
		})
	}
}

// TestRunBackoff: a failed record is redelivered no sooner than its
// backoff, which doubles per attempt up to the cap. Only lower bounds are
// checked: timers never fire early, but may fire late.
func TestRunBackoff(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	const initial, max = 10 * time.Millisecond, 25 * time.Millisecond
	cons := testConsumer(t, tp, "g", "c1", tributary.WithBackoff(initial, max))
	var mu sync.Mutex
	var at []time.Time
	stop := runConsumer(t, cons, func(_ context.Context, m tributary.Message[purchase]) error {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		if m.Attempt < 4 {
			return errors.New("fail")
		}
		return nil
	})
	sendOK(t, pr, tp, tributary.Message[purchase]{})
	waitFor(t, "the record committed", lagZero(t, c, "orders", "g"))
	checkErr(t, "Run", stop(), context.Canceled)
	mu.Lock()
	defer mu.Unlock()
	wmin := []time.Duration{initial, 2 * initial, max} // 10ms, 20ms, then 40ms capped at 25ms
	if len(at) != len(wmin)+1 {
		t.Fatalf("%d deliveries, want %d", len(at), len(wmin)+1)
	}
	for i, w := range wmin {
		if gap := at[i+1].Sub(at[i]); gap < w {
			t.Fatalf("delivery %d came %v after the failure of delivery %d, want at least %v", i+2, gap, i+1, w)
		}
	}
}

// TestRunRetryHoldsOnlyItsPartition: while one partition's record waits
// for its retry, the others go on.
func TestRunRetryHoldsOnlyItsPartition(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "c1", tributary.WithBackoff(time.Hour, time.Hour))
	var mu sync.Mutex
	var handled []string
	stop := runConsumer(t, cons, func(_ context.Context, m tributary.Message[purchase]) error {
		mu.Lock()
		handled = append(handled, m.ID)
		mu.Unlock()
		if m.Partition == 0 {
			return errors.New("partition 0 fails")
		}
		return nil
	})
	sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 0})
	for range 3 {
		sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 1})
	}
	waitFor(t, "partition 1 committed", func() bool {
		return groupDesc(t, c, "orders", "g").Partitions[1].Committed == 3
	})
	checkErr(t, "Run", stop(), context.Canceled)
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(strings.Join(handled, ","), "0-0"); n != 1 {
		t.Fatalf("handled %v: 0-0 %d times, want once (its retry waits an hour)", handled, n)
	}
	if g := groupDesc(t, c, "orders", "g"); g.Partitions[0].Committed != 0 {
		t.Fatalf("partition 0 committed %d, want 0", g.Partitions[0].Committed)
	}
}

func TestRunDeadLetter(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	user := []tributary.Header{{Key: "trace", Value: "abc"}, {Key: "tenant", Value: "7"}}
	sent := sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 1, Key: "cust-7", Headers: user, Time: at, Value: purchase{ID: 42, Item: "lamp"}})
	cons := testConsumer(t, tp, "billing", "b1", fastRetry, tributary.WithDeadLetter("orders-dlq", 3))
	var mu sync.Mutex
	var attempts []int32
	stop := runConsumer(t, cons, func(_ context.Context, m tributary.Message[purchase]) error {
		mu.Lock()
		attempts = append(attempts, m.Attempt)
		mu.Unlock()
		return fmt.Errorf("card declined for order %d", m.Value.ID)
	})

	dlq, err := tributary.OpenTopic[purchase](c, "orders-dlq", nil)
	if err != nil {
		t.Fatal(err)
	}
	reader := testConsumer(t, dlq, "ops", "ops-1")
	got := pollOK(t, reader, 64)
	if len(got) != 1 {
		t.Fatalf("dead-letter topic holds %d messages, want 1", len(got))
	}
	dl := got[0]
	wheaders := append(slices.Clone(user),
		tributary.Header{Key: tributary.HeaderDeadLetterTopic, Value: "orders"},
		tributary.Header{Key: tributary.HeaderDeadLetterGroup, Value: "billing"},
		tributary.Header{Key: tributary.HeaderDeadLetterPartition, Value: "1"},
		tributary.Header{Key: tributary.HeaderDeadLetterOffset, Value: "0"},
		tributary.Header{Key: tributary.HeaderDeadLetterAttempts, Value: "3"},
		tributary.Header{Key: tributary.HeaderDeadLetterError, Value: "card declined for order 42"},
	)
	if !slices.Equal(dl.Headers, wheaders) {
		t.Fatalf("dead letter headers\n got %v\nwant %v", dl.Headers, wheaders)
	}
	// The record itself carries the payload type, as every dead letter
	// does (other records do not: it is the topic's).
	snap, err := c.Backend().Snapshot("orders-dlq")
	if err != nil {
		t.Fatal(err)
	}
	if recs := snap.Records[1]; len(recs) != 1 || !slices.Contains(recs[0].Headers, tributary.Header{Key: tributary.HeaderPayloadType, Value: purchaseType}) {
		t.Fatalf("dead-letter records %+v: want one carrying %s %q", snap.Records, tributary.HeaderPayloadType, purchaseType)
	}
	if dl.Key != "cust-7" || !dl.Time.Equal(at) || dl.Value != sent.Value || dl.Payload != sent.Payload ||
		dl.PayloadType != purchaseType || dl.Partition != 1 || dl.Topic != "orders-dlq" {
		t.Fatalf("dead letter = %+v, want the original key, time, value, payload type, partition 1", dl)
	}
	waitFor(t, "the origin partition to move on", func() bool {
		return groupDesc(t, c, "orders", "billing").Partitions[1].Committed == 1
	})
	checkErr(t, "Run", stop(), context.Canceled)
	mu.Lock()
	defer mu.Unlock()
	if want := []int32{1, 2, 3}; !slices.Equal(attempts, want) {
		t.Fatalf("attempts %v, want %v", attempts, want)
	}
	if s := cons.Stats(); s.Handled != 3 || s.Retried != 2 || s.DeadLettered != 1 || s.Acked != 0 {
		t.Fatalf("Stats = %+v, want 3 handled, 2 retried, 1 dead-lettered, 0 acked", s)
	}
}

func TestRunDeadLetterDecodeFailure(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	// Published through the engine: no codec, no payload-type header.
	publishRaw(t, c, "orders", 0, engine.Message{Key: "k", Payload: `{"id": "not a number"}`,
		Headers: []engine.Header{{Key: "h", Value: "v"}}})
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[purchase]{Value: purchase{ID: 2}})
	cons := testConsumer(t, tp, "g", "c1", fastRetry, tributary.WithDeadLetter("orders-dlq", 5))
	var mu sync.Mutex
	var handled []string
	stop := runConsumer(t, cons, func(_ context.Context, m tributary.Message[purchase]) error {
		mu.Lock()
		handled = append(handled, m.ID)
		mu.Unlock()
		return nil
	})
	dlq, err := tributary.OpenTopic[purchase](c, "orders-dlq", nil)
	if err != nil {
		t.Fatal(err)
	}
	reader := testConsumer(t, dlq, "ops", "ops-1")
	dl := pollOK(t, reader, 1)[0]
	waitFor(t, "the good record acked", lagZero(t, c, "orders", "g"))
	checkErr(t, "Run", stop(), context.Canceled)

	hv := map[string]string{}
	for _, h := range dl.Headers {
		hv[h.Key] = h.Value
	}
	if hv["h"] != "v" || hv[tributary.HeaderDeadLetterAttempts] != "1" || hv[tributary.HeaderDeadLetterOffset] != "0" ||
		hv[tributary.HeaderDeadLetterTopic] != "orders" || hv[tributary.HeaderDeadLetterGroup] != "g" {
		t.Fatalf("dead letter headers %v", dl.Headers)
	}
	if e := hv[tributary.HeaderDeadLetterError]; !strings.HasPrefix(e, tributary.ErrDecode.Error()) || !strings.Contains(e, "offset 0") {
		t.Fatalf("dead-letter error header %q, want the decode error", e)
	}
	if dl.PayloadType != purchaseType || dl.Payload != `{"id": "not a number"}` || dl.Key != "k" {
		t.Fatalf("dead letter = %+v: want the topic's payload type and the original payload and key", dl)
	}
	if !errors.Is(dl.Err, tributary.ErrDecode) {
		t.Fatalf("dead letter decodes: Err %v", dl.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"0-1"}; !slices.Equal(handled, want) {
		t.Fatalf("handler saw %v, want %v: an undecodable record never reaches it", handled, want)
	}
	if s := cons.Stats(); s.Handled != 1 || s.Acked != 1 || s.DeadLettered != 1 || s.Retried != 0 {
		t.Fatalf("Stats = %+v", s)
	}
}

func TestRunInvalid(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	cons := testConsumer(t, tp, "g", "c1")
	ok := func(context.Context, tributary.Message[purchase]) error { return nil }

	checkErr(t, "Run(nil handler)", cons.Run(guardCtx(t), nil), tributary.ErrInvalidArgument)
	checkErr(t, "Run(nil ctx)", cons.Run(nil, ok), tributary.ErrInvalidArgument) //nolint:staticcheck // the point of the test

	stop := runConsumer(t, cons, ok)
	waitPollBlocked(t, cons, 1)
	checkErr(t, "second concurrent Run", cons.Run(guardCtx(t), ok), tributary.ErrInvalidArgument)
	// The first Run is unaffected and still a member.
	if g := groupDesc(t, c, "orders", "g"); !slices.Equal(g.Members, []string{"c1"}) {
		t.Fatalf("members %v after a refused Run, want [c1]", g.Members)
	}
	checkErr(t, "first Run", stop(), context.Canceled)
}

func TestRunCancelLeavesGroup(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	cons := testConsumer(t, tp, "g", "c1")
	other := testConsumer(t, tp, "g", "c2")
	stop := runConsumer(t, cons, func(context.Context, tributary.Message[purchase]) error { return nil })
	waitPollBlocked(t, cons, 1)
	checkErr(t, "Run", stop(), context.Canceled)
	if g := groupDesc(t, c, "orders", "g"); !slices.Equal(g.Members, []string{"c2"}) {
		t.Fatalf("members %v after Run returned, want [c2]", g.Members)
	}
	if got, want := other.Assignment(), []int32{0, 1}; !slices.Equal(got, want) {
		t.Fatalf("c2 owns %v after c1 left, want %v", got, want)
	}
	if slices.Contains(c.Consumers(), "c1") {
		t.Fatalf("Consumers() = %v still lists c1", c.Consumers())
	}
	// The name is free again.
	testConsumer(t, tp, "g", "c1")
}

func TestRunClosedByHandler(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	cons := testConsumer(t, tp, "g", "c1")
	sendOK(t, pr, tp, tributary.Message[purchase]{})
	err := cons.Run(guardCtx(t), func(ctx context.Context, m tributary.Message[purchase]) error {
		if err := c.CloseConsumer("c1"); err != nil {
			return err
		}
		<-ctx.Done() // Close ends the handler's context
		return ctx.Err()
	})
	checkErr(t, "Run closed by its handler", err, nil)
	if g := groupDesc(t, c, "orders", "g"); len(g.Members) != 0 || g.Partitions[0].Committed != 0 {
		t.Fatalf("group %+v: want no member and the record not committed", g)
	}
}

// A handler that ignores its context beyond the stop grace is abandoned:
// Run returns, and the record is not acked, even once the handler returns.
func TestRunHandlerIgnoringContext(t *testing.T) {
	for _, grace := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(grace.String(), func(t *testing.T) {
			c := testCluster(t, 10)
			tp := testTopic[purchase](t, c, "orders", 1, nil)
			pr := testProducer[purchase](t, c, "p", tributary.Manual())
			cons := testConsumer(t, tp, "g", "c1", tributary.WithStopGrace(grace))
			sendOK(t, pr, tp, tributary.Message[purchase]{})
			release := make(chan struct{})
			entered := make(chan struct{})
			returned := make(chan struct{})
			stop := runConsumer(t, cons, func(context.Context, tributary.Message[purchase]) error {
				defer close(returned)
				close(entered)
				<-release // ignores ctx
				return nil
			})
			<-entered
			checkErr(t, "Run with a stuck handler", stop(), context.Canceled)
			close(release) // the abandoned handler ends; goleak checks its goroutine
			<-returned
			if p := groupDesc(t, c, "orders", "g").Partitions[0]; p.Committed != 0 || p.InFlight || len(groupDesc(t, c, "orders", "g").Members) != 0 {
				t.Fatalf("partition %+v: want the abandoned record unacked, released by Run's leave", p)
			}
		})
	}
}

// TestManyGroups runs several consumers of several groups under one
// errgroup: each group receives every record exactly once, in offset order
// per partition.
func TestManyGroups(t *testing.T) {
	const (
		partitions = 4
		records    = 200
	)
	c := testCluster(t, 1000)
	tp := testTopic[purchase](t, c, "orders", partitions, nil)
	groups := []struct {
		name      string
		consumers int
	}{
		{"billing", 1},
		{"shipping", 2},
		{"audit", 3},
	}
	type seen struct {
		mu      sync.Mutex
		offsets [partitions][]int64
	}
	received := map[string]*seen{}
	var all []*tributary.Consumer[purchase]
	for _, g := range groups {
		received[g.name] = &seen{}
		for i := range g.consumers {
			all = append(all, testConsumer(t, tp, g.name, fmt.Sprintf("%s-%d", g.name, i), tributary.WithBatch(3)))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eg, ctx := errgroup.WithContext(ctx)
	for _, cons := range all {
		group := strings.Split(cons.Name(), "-")[0]
		s := received[group]
		eg.Go(func() error {
			return cons.Run(ctx, func(_ context.Context, m tributary.Message[purchase]) error {
				s.mu.Lock()
				s.offsets[m.Partition] = append(s.offsets[m.Partition], m.Offset)
				s.mu.Unlock()
				return nil
			})
		})
	}
	pr := testProducer[purchase](t, c, "p", tributary.KeyHash())
	wcount := [partitions]int64{}
	for i := range records {
		m, err := pr.Send(guardCtx(t), tp, tributary.Message[purchase]{Key: "k" + strconv.Itoa(i), Value: purchase{ID: i}})
		if err != nil {
			t.Fatal(err)
		}
		wcount[m.Partition]++
	}
	for _, g := range groups {
		waitFor(t, g.name+" to commit everything", lagZero(t, c, "orders", g.name))
	}
	cancel()
	checkErr(t, "errgroup", eg.Wait(), context.Canceled)

	for _, g := range groups {
		s := received[g.name]
		for p := range partitions {
			got := s.offsets[p]
			if int64(len(got)) != wcount[p] {
				t.Fatalf("group %s partition %d: %d records handled, want %d", g.name, p, len(got), wcount[p])
			}
			for i, off := range got {
				if off != int64(i) {
					t.Fatalf("group %s partition %d: offsets %v, want 0..%d once each in order", g.name, p, got, wcount[p]-1)
				}
			}
		}
	}
	if d := describeTopic(t, c, "orders"); d.Partitions[0].LogStartOffset != d.Partitions[0].LogEndOffset {
		t.Fatalf("partition 0 retains [%d,%d) after every group acked", d.Partitions[0].LogStartOffset, d.Partitions[0].LogEndOffset)
	}
}

// TestPollDecodesIntoZeroValue: a payload that sets one field before
// failing on another gives Err and the zero Value, not the half-set one,
// and a message polled into a reused slot of an appended-to buffer holds
// only its own payload's fields, not the slot's earlier message's.
func TestPollDecodesIntoZeroValue(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	publishRaw(t, c, "orders", 0, engine.Message{Payload: `{"item":"half","id":"not a number"}`})
	publishRaw(t, c, "orders", 0, engine.Message{Payload: `{"id":7,"item":"full"}`})
	publishRaw(t, c, "orders", 0, engine.Message{Payload: `{"id":8}`})
	cons := testConsumer(t, tp, "g", "c1")
	half := pollOK(t, cons, 1)
	if !errors.Is(half[0].Err, tributary.ErrDecode) || half[0].Value != (purchase{}) {
		t.Fatalf("poll = %+v, want the message undecodable with the zero Value", half)
	}
	if err := cons.Ack(half[0]); err != nil {
		t.Fatal(err)
	}
	ms := pollOK(t, cons, 1)
	if ms[0].Err != nil || ms[0].Value != (purchase{ID: 7, Item: "full"}) {
		t.Fatalf("second message = %+v, want {7 full}", ms[0])
	}
	if err := cons.Ack(ms[0]); err != nil {
		t.Fatal(err)
	}
	buf, err := cons.TryAppendPoll(ms[:0], 1) // the slot that holds {7 full}
	if err != nil || len(buf) != 1 || buf[0].Err != nil || buf[0].Value != (purchase{ID: 8}) {
		t.Fatalf("TryAppendPoll into a reused slot = %+v, %v; want {8 \"\"}", buf, err)
	}
}
