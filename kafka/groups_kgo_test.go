package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// workloadStats is what one run of groupWorkload saw.
type workloadStats struct {
	records    int           // delivered, duplicates included
	duplicates int           // records delivered more than once (at-least-once)
	assigns    int           // OnPartitionsAssigned calls of every member: rebalances seen
	elapsed    time.Duration // first produce to every offset committed
}

// groupWorkload produces n records (record i to partition i%parts, value
// i, so its offset is i/parts) to topic "t" of the broker at addr and
// consumes them with a classic group "g" of three kgo members, autocommit
// every 100 ms: the first member leaves (Close) after a third of the
// records, a fourth joins after two thirds. It fails the test on a record
// lost, a record at the wrong offset or partition, or a member that sees
// a partition's offsets go backwards or skip within one assignment; then
// it waits until committed (the group's committed offset per partition)
// equals every partition's record count. The broker must have the topic.
func groupWorkload(t *testing.T, addr string, n, parts int, committed func() (map[int32]int64, error)) workloadStats {
	t.Helper()
	ctx := testCtx(t, 25*time.Second)
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
		stats   workloadStats
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
				stats.assigns++
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
					stats.records++
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
						stats.duplicates++
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
	stats.elapsed = time.Since(start)
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

// TestConsumerGroupKgo runs the kgo consumer-group workload against this
// Server, then, as the reference, against franz-go's kfake, logging both
// (records delivered, duplicates, assignments, time). Broken variants it
// catches: an OffsetCommit that does not Seek (retention never frees a
// record, so the producer stalls on the full partitions at 6,000 records
// and the test fails on its deadline; with room to spare, Describe's
// committed offsets stay 0 and the final check fails); a SyncGroup that
// hands a member another member's assignment (two members fetch one
// partition: duplicates, and offsets that skip within an assignment, or a
// partition nobody fetches: records lost).
func TestConsumerGroupKgo(t *testing.T) {
	const n, parts = 10000, 6
	var ours, ref workloadStats
	t.Run("tributary", func(t *testing.T) {
		c, s := serve(t, 1000)
		if _, err := c.Backend().CreateTopic("t", parts, payloadType); err != nil {
			t.Fatal(err)
		}
		ours = groupWorkload(t, s.Addr(), n, parts, func() (map[int32]int64, error) {
			d, err := c.Describe("t")
			if err != nil {
				return nil, err
			}
			out := map[int32]int64{}
			for _, g := range d.Groups {
				if g.Group != "g" {
					continue
				}
				for _, p := range g.Partitions {
					out[p.Partition] = p.Committed
					if p.Committed != d.Partitions[p.Partition].LogEndOffset {
						out[p.Partition] = -2 // not at the log end yet
					}
				}
			}
			return out, nil
		})
		t.Logf("tributary: %d records delivered, %d duplicates, %d assignments, %v", ours.records, ours.duplicates, ours.assigns, ours.elapsed)
	})
	t.Run("kfake", func(t *testing.T) {
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, "t"))
		if err != nil {
			t.Fatal(err)
		}
		defer kc.Close()
		addr := kc.ListenAddrs()[0]
		admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		ref = groupWorkload(t, addr, n, parts, func() (map[int32]int64, error) {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group = "g"
			resp, err := req.RequestWith(context.Background(), admin)
			if err != nil {
				return nil, err
			}
			out := map[int32]int64{}
			for _, rt := range resp.Topics {
				for _, p := range rt.Partitions {
					out[p.Partition] = p.Offset
				}
			}
			return out, nil
		})
		t.Logf("kfake: %d records delivered, %d duplicates, %d assignments, %v", ref.records, ref.duplicates, ref.assigns, ref.elapsed)
	})
	t.Logf("difference (tributary − kfake): duplicates %+d, assignments %+d, time %v", ours.duplicates-ref.duplicates, ours.assigns-ref.assigns, ours.elapsed-ref.elapsed)
}
