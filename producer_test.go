package tributary_test

// Producers: each partitioner's choice of partition, nil and invalid
// arguments, an Encode that fails, a closed producer, TrySend on a full
// partition, and a blocking Send that waits for room and ends by its
// context or Close.

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

func TestProducerStrategy(t *testing.T) {
	c := testCluster(t, 10)
	tests := []struct {
		p     tributary.Partitioner
		wname string
	}{
		{tributary.Manual(), "Manual"},
		{tributary.Random(), "Random"},
		{tributary.RoundRobin(), "RoundRobin"},
		{tributary.KeyHash(), "KeyHash"},
		{lastPartition{}, "Last"},
	}
	for _, tt := range tests {
		t.Run(tt.wname, func(t *testing.T) {
			pr := testProducer[purchase](t, c, "p-"+tt.wname, tt.p)
			if pr.Name() != "p-"+tt.wname || pr.Strategy() != tt.wname {
				t.Fatalf("Name %q Strategy %q, want p-%s %s", pr.Name(), pr.Strategy(), tt.wname, tt.wname)
			}
		})
	}
}

func TestProducerManual(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 3, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	tests := []struct {
		name       string
		partition  int32
		wpartition int32
		werr       error
	}{
		{"partition 0", 0, 0, nil},
		{"partition 2", 2, 2, nil},
		{"partition 1", 1, 1, nil},
		{"negative", -1, 0, tributary.ErrInvalidArgument},
		{"partition count", 3, 0, tributary.ErrInvalidArgument},
		{"far out", math.MaxInt32, 0, tributary.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := totalRecords(t, c, "orders")
			for _, send := range []func() (tributary.Message[purchase], error){
				func() (tributary.Message[purchase], error) {
					return pr.TrySend(tp, tributary.Message[purchase]{Partition: tt.partition})
				},
				func() (tributary.Message[purchase], error) {
					return pr.Send(guardCtx(t), tp, tributary.Message[purchase]{Partition: tt.partition})
				},
			} {
				m, err := send()
				checkErr(t, "send", err, tt.werr)
				if err == nil && m.Partition != tt.wpartition {
					t.Fatalf("sent to partition %d, want %d", m.Partition, tt.wpartition)
				}
			}
			wtotal := before
			if tt.werr == nil {
				wtotal += 2
			}
			if got := totalRecords(t, c, "orders"); got != wtotal {
				t.Fatalf("%d records in the topic, want %d", got, wtotal)
			}
		})
	}
}

// totalRecords is the sum of topic's log end offsets: every record ever
// published to it.
func totalRecords(t testing.TB, c *tributary.Cluster, topic string) int64 {
	t.Helper()
	var n int64
	for _, p := range describeTopic(t, c, topic).Partitions {
		n += p.LogEndOffset
	}
	return n
}

func TestProducerRoundRobin(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 3, nil)
	pr := testProducer[purchase](t, c, "p", tributary.RoundRobin())
	var got []int32
	for i := range 7 {
		m := sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 2, Key: "same", Value: purchase{ID: i}})
		got = append(got, m.Partition)
	}
	if want := []int32{0, 1, 2, 0, 1, 2, 0}; !slices.Equal(got, want) {
		t.Fatalf("partitions %v, want %v", got, want)
	}
}

func TestProducerKeyHash(t *testing.T) {
	c := testCluster(t, 100)
	tests := []struct {
		name       string
		partitions int32
	}{
		{"1 partition", 1},
		{"3 partitions", 3},
		{"7 partitions", 7},
		{"64 partitions", 64},
	}
	keys := []string{"a", "customer-7", "customer-8", "21", "ключ", "a much longer key than four bytes", "x\x00y"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			suffix := strconv.Itoa(int(tt.partitions))
			tp := testTopic[purchase](t, c, "t"+suffix, tt.partitions, nil)
			pr := testProducer[purchase](t, c, "p"+suffix, tributary.KeyHash())
			for _, key := range keys {
				wpartition := (tributary.Murmur2(key) & 0x7fffffff) % tt.partitions
				for range 2 { // the same key, the same partition
					m := sendOK(t, pr, tp, tributary.Message[purchase]{Key: key, Partition: 99})
					if m.Partition != wpartition {
						t.Fatalf("key %q went to partition %d, want %d", key, m.Partition, wpartition)
					}
				}
			}
		})
	}
	t.Run("Kafka's vector", func(t *testing.T) {
		// Murmur2("21") is -973932308 (Kafka's test vector): partition
		// (h & 0x7fffffff) % 4 = 1174551340 % 4 = 0.
		tp := testTopic[purchase](t, c, "kafka", 4, nil)
		pr := testProducer[purchase](t, c, "kafka", tributary.KeyHash())
		if m := sendOK(t, pr, tp, tributary.Message[purchase]{Key: "21"}); m.Partition != 0 {
			t.Fatalf("key 21 went to partition %d, want 0", m.Partition)
		}
	})
	t.Run("empty key round-robins", func(t *testing.T) {
		tp := testTopic[purchase](t, c, "nokey", 3, nil)
		pr := testProducer[purchase](t, c, "nokey", tributary.KeyHash())
		var got []int32
		for range 4 {
			got = append(got, sendOK(t, pr, tp, tributary.Message[purchase]{}).Partition)
		}
		if want := []int32{0, 1, 2, 0}; !slices.Equal(got, want) {
			t.Fatalf("partitions %v, want %v", got, want)
		}
	})
}

func TestProducerRandom(t *testing.T) {
	c := testCluster(t, 1000)
	tp := testTopic[purchase](t, c, "orders", 4, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Random())
	seen := map[int32]int{}
	for range 200 {
		m := sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 7})
		if m.Partition < 0 || m.Partition >= 4 {
			t.Fatalf("partition %d outside [0,4)", m.Partition)
		}
		seen[m.Partition]++
	}
	// 200 uniform draws miss one of 4 partitions with probability < 1e-24.
	if len(seen) != 4 {
		t.Fatalf("partitions seen %v, want all 4", seen)
	}
	for p, n := range seen {
		if got := logEndOf(t, c, "orders", p); got != int64(n) {
			t.Fatalf("partition %d has %d records, the sends said %d", p, got, n)
		}
	}
}

// lastPartition is a user's Partitioner: everything to the last partition.
type lastPartition struct{}

func (lastPartition) Name() string { return "Last" }
func (lastPartition) Partition(_ string, _, partitions int32) (int32, error) {
	return partitions - 1, nil
}

// fixedPartitioner answers p, err whatever it is asked.
type fixedPartitioner struct {
	p   int32
	err error
}

func (fixedPartitioner) Name() string { return "Fixed" }
func (f fixedPartitioner) Partition(string, int32, int32) (int32, error) {
	return f.p, f.err
}

var errNoPartition = errors.New("no partition for you")

func TestProducerUserPartitioner(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 3, nil)
	tests := []struct {
		name       string
		p          tributary.Partitioner
		wpartition int32
		werr       error
	}{
		{"last", lastPartition{}, 2, nil},
		{"fixed 1", fixedPartitioner{p: 1}, 1, nil},
		{"error", fixedPartitioner{p: 0, err: errNoPartition}, 0, errNoPartition},
		{"negative", fixedPartitioner{p: -1}, 0, tributary.ErrInvalidArgument},
		{"partition count", fixedPartitioner{p: 3}, 0, tributary.ErrInvalidArgument},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := testProducer[purchase](t, c, "p"+string(rune('a'+i)), tt.p)
			before := totalRecords(t, c, "orders")
			m, err := pr.TrySend(tp, tributary.Message[purchase]{})
			checkErr(t, "TrySend", err, tt.werr)
			m2, err2 := pr.Send(guardCtx(t), tp, tributary.Message[purchase]{})
			checkErr(t, "Send", err2, tt.werr)
			wtotal := before
			if tt.werr == nil {
				wtotal += 2
				if m.Partition != tt.wpartition || m2.Partition != tt.wpartition {
					t.Fatalf("sent to %d and %d, want %d", m.Partition, m2.Partition, tt.wpartition)
				}
			}
			if got := totalRecords(t, c, "orders"); got != wtotal {
				t.Fatalf("%d records, want %d", got, wtotal)
			}
		})
	}
}

func TestNewProducerNilPartitioner(t *testing.T) {
	c := testCluster(t, 10)
	for name, p := range map[string]tributary.Partitioner{
		"nil":       nil,
		"typed nil": (*nilPartitioner)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tributary.NewProducer[purchase](c, "p", p)
			checkErr(t, "NewProducer", err, tributary.ErrInvalidArgument)
			if got := c.Producers(); len(got) != 0 {
				t.Fatalf("Producers() = %v", got)
			}
		})
	}
}

type nilPartitioner struct{ tributary.Partitioner }

func TestProducerNilArguments(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	_, err := pr.TrySend(nil, tributary.Message[purchase]{})
	checkErr(t, "TrySend(nil topic)", err, tributary.ErrInvalidArgument)
	_, err = pr.Send(guardCtx(t), nil, tributary.Message[purchase]{})
	checkErr(t, "Send(nil topic)", err, tributary.ErrInvalidArgument)
	//lint:ignore SA1012 a nil Context is the point of the test
	_, err = pr.Send(nil, tp, tributary.Message[purchase]{}) //nolint:staticcheck
	checkErr(t, "Send(nil ctx)", err, tributary.ErrInvalidArgument)
	if got := totalRecords(t, c, "orders"); got != 0 {
		t.Fatalf("%d records published", got)
	}
}

func TestProducerEncodeError(t *testing.T) {
	c := testCluster(t, 10)
	tests := []struct {
		name string
		send func() error
	}{
		{"func", func() error {
			tp := testTopic[func()](t, c, "funcs", 1, nil)
			pr := testProducer[func()](t, c, "funcs", tributary.Manual())
			_, err := pr.TrySend(tp, tributary.Message[func()]{Value: func() {}})
			return err
		}},
		{"chan", func() error {
			tp := testTopic[chan int](t, c, "chans", 1, nil)
			pr := testProducer[chan int](t, c, "chans", tributary.Manual())
			_, err := pr.Send(guardCtx(t), tp, tributary.Message[chan int]{Value: make(chan int)})
			return err
		}},
		{"NaN", func() error {
			tp := testTopic[float64](t, c, "floats", 1, nil)
			pr := testProducer[float64](t, c, "floats", tributary.Manual())
			_, err := pr.TrySend(tp, tributary.Message[float64]{Value: math.NaN()})
			return err
		}},
		{"Inf in a struct", func() error {
			type reading struct{ V float64 }
			tp := testTopic[reading](t, c, "readings", 1, nil)
			pr := testProducer[reading](t, c, "readings", tributary.Manual())
			_, err := pr.Send(guardCtx(t), tp, tributary.Message[reading]{Value: reading{math.Inf(1)}})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, "send", tt.send(), tributary.ErrEncode)
		})
	}
	for _, topic := range c.Topics() {
		if got := totalRecords(t, c, topic); got != 0 {
			t.Fatalf("topic %s: %d records published by failed encodes", topic, got)
		}
	}
}

func TestProducerClosed(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	pr.Close()
	_, err := pr.TrySend(tp, tributary.Message[purchase]{})
	checkErr(t, "TrySend", err, tributary.ErrClosed)
	_, err = pr.Send(guardCtx(t), tp, tributary.Message[purchase]{})
	checkErr(t, "Send", err, tributary.ErrClosed)
	if got := totalRecords(t, c, "orders"); got != 0 {
		t.Fatalf("%d records published by a closed producer", got)
	}
}

func TestTrySendFull(t *testing.T) {
	c := testCluster(t, 2)
	tp := testTopic[purchase](t, c, "orders", 2, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	for i := range 2 {
		sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 0, Value: purchase{ID: i}})
	}
	_, err := pr.TrySend(tp, tributary.Message[purchase]{Partition: 0})
	checkErr(t, "TrySend on a full partition", err, tributary.ErrPartitionFull)
	if got := logEndOf(t, c, "orders", 0); got != 2 {
		t.Fatalf("log end %d, want 2: the refused send used an offset", got)
	}
	// The other partition has room.
	if m := sendOK(t, pr, tp, tributary.Message[purchase]{Partition: 1}); m.ID != "1-0" {
		t.Fatalf("ID %q, want 1-0", m.ID)
	}
	// A partitioner's choice that was full is reported in the Message.
	kp := testProducer[purchase](t, c, "k", tributary.KeyHash())
	refused := 0
	for _, key := range []string{"a", "b", "c", "d", "e", "f"} {
		want := tributary.Murmur2(key) & 0x7fffffff % 2
		m, err := kp.TrySend(tp, tributary.Message[purchase]{Key: key})
		if err == nil {
			continue // partition 1 had room
		}
		checkErr(t, "TrySend by key", err, tributary.ErrPartitionFull)
		if refused++; m.Partition != want || m.ID != "" {
			t.Fatalf("key %q: full partition reported as %d (ID %q), want %d", key, m.Partition, m.ID, want)
		}
	}
	if refused == 0 {
		t.Fatal("no key mapped to a full partition: the check above never ran")
	}
}

// TestSendWaitsForRoom: Send on a full partition blocks until retention
// removes a record (an ack, a DeleteGroup, a forward Seek), then publishes.
func TestSendWaitsForRoom(t *testing.T) {
	tests := []struct {
		name string
		free func(t *testing.T, c *tributary.Cluster, tp *tributary.Topic[purchase])
	}{
		{"ack", func(t *testing.T, c *tributary.Cluster, tp *tributary.Topic[purchase]) {
			cons := testConsumer(t, tp, "g", "c1")
			m := pollOK(t, cons, 1)[0]
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}},
		{"DeleteGroup", func(t *testing.T, c *tributary.Cluster, tp *tributary.Topic[purchase]) {
			// g acks the record; only "laggard" (made with g) keeps it.
			cons := testConsumer(t, tp, "g", "c1")
			if err := cons.Ack(pollOK(t, cons, 1)[0]); err != nil {
				t.Fatal(err)
			}
			if got := describeTopic(t, c, "orders").Partitions[0].LogStartOffset; got != 0 {
				t.Fatalf("log start %d, want 0: laggard keeps the record", got)
			}
			if ok, err := c.DeleteGroup("orders", "laggard"); !ok || err != nil {
				t.Fatalf("DeleteGroup = (%v, %v)", ok, err)
			}
		}},
		{"forward Seek", func(t *testing.T, c *tributary.Cluster, tp *tributary.Topic[purchase]) {
			if ok, err := c.Seek("orders", "g", 0, 1); !ok || err != nil {
				t.Fatalf("Seek = (%v, %v)", ok, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCluster(t, 1)
			tp := testTopic[purchase](t, c, "orders", 1, nil)
			if _, err := c.CreateGroup("orders", "g", engine.RoundRobin); err != nil {
				t.Fatal(err)
			}
			pr := testProducer[purchase](t, c, "p", tributary.Manual())
			sendOK(t, pr, tp, tributary.Message[purchase]{Value: purchase{ID: 1}})
			if tt.name == "DeleteGroup" {
				// A second group, present before g acks, that keeps the record.
				if _, err := c.CreateGroup("orders", "laggard", engine.RoundRobin); err != nil {
					t.Fatal(err)
				}
			}
			done := goResult(func() (tributary.Message[purchase], error) {
				return pr.Send(guardCtx(t), tp, tributary.Message[purchase]{Value: purchase{ID: 2}})
			})
			stillBlocked(t, "Send on a full partition", done)
			if got := logEndOf(t, c, "orders", 0); got != 1 {
				t.Fatalf("log end %d while Send waits, want 1", got)
			}
			tt.free(t, c, tp)
			r := awaitResult(t, "Send after room was made", done)
			if r.err != nil || r.v.ID != "0-1" || r.v.Value.ID != 2 {
				t.Fatalf("Send = (%+v, %v), want ID 0-1", r.v, r.err)
			}
			if got := logEndOf(t, c, "orders", 0); got != 2 {
				t.Fatalf("log end %d, want 2", got)
			}
		})
	}
}

func TestSendCancelledWhileWaiting(t *testing.T) {
	c := testCluster(t, 1)
	tp := testTopic[purchase](t, c, "orders", 1, nil)
	pr := testProducer[purchase](t, c, "p", tributary.Manual())
	sendOK(t, pr, tp, tributary.Message[purchase]{})
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		werr error
	}{
		{"cancel", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			done := goResult(func() (tributary.Message[purchase], error) {
				return pr.Send(ctx, tp, tributary.Message[purchase]{})
			})
			if tt.werr == context.Canceled {
				stillBlocked(t, "Send on a full partition", done)
				cancel()
			}
			r := awaitResult(t, "Send after its context ended", done)
			checkErr(t, "Send", r.err, tt.werr)
			if got := logEndOf(t, c, "orders", 0); got != 1 {
				t.Fatalf("log end %d, want 1: nothing published", got)
			}
		})
	}
	t.Run("already cancelled", func(t *testing.T) {
		// A context that has ended before a send that must wait returns at
		// once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := pr.Send(ctx, tp, tributary.Message[purchase]{})
		checkErr(t, "Send(cancelled ctx, full)", err, context.Canceled)
	})
}

// A Send waiting for room ends with ErrClosed when its producer, or the
// cluster, is closed; nothing is published.
func TestSendWaitingEndsOnClose(t *testing.T) {
	for _, closer := range []string{"producer", "cluster"} {
		t.Run(closer, func(t *testing.T) {
			c, err := tributary.NewCluster(1)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tp, err := tributary.CreateTopic(c, "t", 1, tributary.String())
			if err != nil {
				t.Fatal(err)
			}
			p, err := tributary.NewProducer[string](c, "p", tributary.RoundRobin())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.TrySend(tp, tributary.Message[string]{Value: "fills"}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := p.Send(context.Background(), tp, tributary.Message[string]{Value: "waits"})
				done <- err
			}()
			time.Sleep(20 * time.Millisecond) // usually reaches the wait; ErrClosed either way
			if closer == "producer" {
				err = p.Close()
			} else {
				err = c.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, tributary.ErrClosed) {
					t.Fatalf("Send after Close: %v, want ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Send still waiting after Close")
			}
			d, err := c.Describe("t")
			if err != nil {
				t.Fatal(err)
			}
			if end := d.Partitions[0].LogEndOffset; end != 1 {
				t.Fatalf("log end %d, want 1: the waiting Send published", end)
			}
		})
	}
}

// A Send blocked on a full partition ends with its context's error when the
// context is cancelled or its deadline passes, and publishes nothing.
func TestSendCancelledWhileBlocked(t *testing.T) {
	c := testCluster(t, 1)
	in := testTopic(t, c, "in", 1, tributary.String())
	p := testProducer[string](t, c, "p", tributary.Manual())
	sendOK(t, p, in, tributary.Message[string]{Partition: 0, Value: "a"}) // full; no group, so nothing is ever removed

	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := p.Send(ctx, in, tributary.Message[string]{Value: "b"})
		res <- err
	}()
	stillPending(t, res, 30*time.Millisecond, "Send into a full partition")
	start := time.Now()
	cancel()
	assert.ErrorIs(t, awaitDone(t, res, time.Second, "cancelled Send"), context.Canceled)
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, int64(1), logEndOf(t, c, "in", 0), "nothing published")

	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	_, err := p.Send(dctx, in, tributary.Message[string]{Value: "c"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = p.Send(ctx, in, tributary.Message[string]{Value: "d"}) // already cancelled
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(1), logEndOf(t, c, "in", 0), "nothing published")
}
