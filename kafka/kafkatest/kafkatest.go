// Package kafkatest holds the Kafka client workloads that the kafka
// module's tests run against its Server and against franz-go's kfake,
// and that the program's tests run against `tributary serve -kafka`: one
// workload, three brokers. Each takes a testing.TB and fails it on what it
// checks.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// client is a kgo client of the broker at addr, closed when the test
// ends.
func client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Committed returns a reader of group's committed offsets per partition
// by OffsetFetch at addr (-1 where it has none), for GroupWorkload.
func Committed(t testing.TB, addr, group string) func() (map[int32]int64, error) {
	admin := client(t, addr)
	return func() (map[int32]int64, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = group
		resp, err := req.RequestWith(context.Background(), admin)
		if err != nil {
			return nil, err
		}
		if resp.ErrorCode != 0 {
			return nil, fmt.Errorf("OffsetFetch: error %d", resp.ErrorCode)
		}
		out := map[int32]int64{}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				out[p.Partition] = p.Offset
			}
		}
		return out, nil
	}
}

// GroupStats is what one run of GroupWorkload saw.
type GroupStats struct {
	Records    int           // delivered, duplicates included
	Duplicates int           // records delivered more than once (at-least-once)
	Assigns    int           // OnPartitionsAssigned calls of every member: rebalances seen
	Elapsed    time.Duration // first produce to every offset committed
}

// GroupWorkload produces n records (record i to partition i%parts, value
// i, so its offset is i/parts) to topic "t" of the broker at addr and
// consumes them with a classic group "g" of three kgo members, autocommit
// every 100 ms: the first member leaves (Close) after a third of the
// records, a fourth joins after two thirds. It fails the test on a record
// lost, a record at the wrong offset or partition, or a member that sees
// a partition's offsets go backwards or skip within one assignment; then
// it waits until committed (the group's committed offset per partition)
// equals every partition's record count (Committed reads it from the
// broker). The broker must have the topic, of parts partitions. It takes
// 25 s at most.
func GroupWorkload(t testing.TB, addr string, n, parts int, committed func() (map[int32]int64, error)) GroupStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	start := time.Now()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var perr error
	var pmu sync.Mutex
	for i := range n {
		p.Produce(ctx, &kgo.Record{Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))}, func(r *kgo.Record, err error) {
			if err != nil {
				pmu.Lock()
				perr = err
				pmu.Unlock()
			}
		})
	}

	var (
		mu      sync.Mutex
		seen    = make([]int, n)
		unique  int
		stats   GroupStats
		bad     error
		uniqueC = make(chan struct{}, 1)
	)
	type memberLog struct {
		last map[int32]int64 // partition → last offset seen in the current assignment
	}
	var wg sync.WaitGroup
	startMember := func(id int) *kgo.Client {
		ml := &memberLog{last: map[int32]int64{}}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(fmt.Sprint("member", id)),
			kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.HeartbeatInterval(100*time.Millisecond), kgo.SessionTimeout(6*time.Second),
			kgo.RebalanceTimeout(6*time.Second), kgo.AutoCommitInterval(100*time.Millisecond),
			kgo.FetchMaxWait(100*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				stats.Assigns++
				for _, p := range a["t"] {
					delete(ml.last, p)
				}
			}),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					t.Logf("member %d: commit on revoke: %v", id, err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, p := range r["t"] {
					delete(ml.last, p)
				}
			}),
		)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollRecords(ctx, 50)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				fs.EachError(func(topic string, p int32, err error) {
					if !errors.Is(err, context.Canceled) {
						t.Logf("member %d: fetch %s/%d: %v", id, topic, p, err)
					}
				})
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					stats.Records++
					v, err := strconv.Atoi(string(r.Value))
					switch {
					case err != nil || v < 0 || v >= n:
						bad = fmt.Errorf("member %d: record %s/%d@%d has value %q", id, r.Topic, r.Partition, r.Offset, r.Value)
						return
					case int32(v%parts) != r.Partition || int64(v/parts) != r.Offset:
						bad = fmt.Errorf("member %d: record %d at %d@%d, produced to %d@%d", id, v, r.Partition, r.Offset, v%parts, v/parts)
					}
					if last, ok := ml.last[r.Partition]; ok && r.Offset != last+1 {
						bad = fmt.Errorf("member %d: partition %d offset %d after %d within one assignment", id, r.Partition, r.Offset, last)
					}
					ml.last[r.Partition] = r.Offset
					if seen[v]++; seen[v] == 1 {
						unique++
					} else {
						stats.Duplicates++
					}
				})
				mu.Unlock()
				select {
				case uniqueC <- struct{}{}:
				default:
				}
				time.Sleep(5 * time.Millisecond) // work: lets the leave and the join fall mid-run
			}
		}()
		return cl
	}
	waitUnique := func(k int) {
		t.Helper()
		for {
			mu.Lock()
			u, b := unique, bad
			mu.Unlock()
			if b != nil {
				t.Fatal(b)
			}
			if u >= k {
				return
			}
			select {
			case <-uniqueC:
			case <-ctx.Done():
				t.Fatalf("%d of %d records consumed after %v", u, n, time.Since(start))
			}
		}
	}
	members := []*kgo.Client{startMember(0), startMember(1), startMember(2)}
	defer func() {
		for _, cl := range members {
			cl.Close()
		}
		wg.Wait()
	}()
	waitUnique(n / 3)
	members[0].Close() // leaves the group
	waitUnique(2 * n / 3)
	members = append(members, startMember(3))
	waitUnique(n)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	pmu.Lock()
	if perr != nil {
		t.Fatalf("produce: %v", perr)
	}
	pmu.Unlock()
	for {
		c, err := committed()
		if err != nil {
			t.Fatal(err)
		}
		done := len(c) == parts
		for p := range int32(parts) {
			if c[p] != int64((n-int(p)+parts-1)/parts) { // records of partition p
				done = false
			}
		}
		if done {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("committed offsets %v, want every partition's record count", c)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stats.Elapsed = time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if bad != nil {
		t.Fatal(bad)
	}
	for v, k := range seen {
		if k == 0 {
			t.Fatalf("record %d never consumed", v)
		}
	}
	return stats
}

// ShareWorkload creates topic "orders" of 2 partitions at addr, produces
// six records to each (a: accept, r: release once then accept, x:
// reject) with a kgo producer, consumes them with a kgo share consumer of
// group "workers" acknowledging as their kind says, and returns each
// record's delivery counts.
func ShareWorkload(t testing.TB, addr string) map[string][]int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ct := kmsg.NewPtrCreateTopicsRequest()
	tt := kmsg.NewCreateTopicsRequestTopic()
	tt.Topic, tt.NumPartitions, tt.ReplicationFactor = "orders", 2, 1
	ct.Topics = append(ct.Topics, tt)
	if resp, err := ct.RequestWith(ctx, p); err != nil || (resp.Topics[0].ErrorCode != 0 && resp.Topics[0].ErrorCode != 36) {
		t.Fatalf("CreateTopics: %v %+v", err, resp)
	}
	total := 0
	for part := range int32(2) {
		for i, kind := range []string{"a", "r", "x", "a", "x", "r"} {
			r := &kgo.Record{Topic: "orders", Partition: part, Value: []byte(fmt.Sprintf("p%d-%d-%s", part, i, kind))}
			if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			total++
			if kind == "r" {
				total++
			}
		}
	}
	cl := client(t, addr, kgo.ShareGroup("workers"), kgo.ConsumeTopics("orders"), kgo.FetchMaxWait(50*time.Millisecond))
	got := map[string][]int32{}
	for seen := 0; seen < total; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("after %d of %d deliveries: %v (got %v)", seen, total, err, got)
		}
		for _, r := range fs.Records() {
			v := string(r.Value)
			got[v] = append(got[v], r.DeliveryCount())
			seen++
			switch {
			case v[len(v)-1] == 'r' && r.DeliveryCount() == 1:
				r.Ack(kgo.AckRelease)
			case v[len(v)-1] == 'x':
				r.Ack(kgo.AckReject)
			default:
				r.Ack(kgo.AckAccept)
			}
		}
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	return got
}
