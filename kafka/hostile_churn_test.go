package kafka

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// churnWorkload produces n records (record i to partition i%parts, value
// i) to topic "churn" of a Server of capacity 1,000 per partition (so the
// producer waits on the group's commits) and consumes them with classic
// group "cg" while five kgo members join and leave: two start, then at
// each eighth of the records one joins or one leaves (Close: LeaveGroup),
// ending with two; with static, members have group instance ids
// (KIP-345) inst0..inst2 and a Close sends no LeaveGroup: members 3 and 4
// take the places of the closed 0 and 1 (same instance ids), ending with
// three. balancers are the members' group balancers (none: kgo's
// default, cooperative-sticky). It fails on a record never delivered, one
// at another partition or offset than produced, or a partition whose
// committed offset (Cluster.Describe) does not reach its log end.
func churnWorkload(t *testing.T, n, parts int, static bool, balancers ...kgo.GroupBalancer) {
	c, s := serve(t, 1000)
	createTopic(t, c, "churn", int32(parts))
	ctx := testCtx(t, 15*time.Second)
	p := client(t, s, kgo.DefaultProduceTopic("churn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var pmu sync.Mutex
	var perr error
	for i := range n {
		p.Produce(ctx, &kgo.Record{Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				pmu.Lock()
				perr = err
				pmu.Unlock()
			}
		})
	}
	var (
		mu       sync.Mutex
		seen     = make([]int, n)
		unique   int
		bad      error
		progress = make(chan struct{}, 1)
		wg       sync.WaitGroup
	)
	start := func(id int) *kgo.Client {
		opts := []kgo.Opt{kgo.SeedBrokers(s.Addr()), kgo.ClientID(fmt.Sprint("churn", id)),
			kgo.ConsumerGroup("cg"), kgo.ConsumeTopics("churn"),
			kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(3 * time.Second),
			kgo.RebalanceTimeout(3 * time.Second), kgo.AutoCommitInterval(100 * time.Millisecond),
			kgo.FetchMaxWait(100 * time.Millisecond)}
		if static {
			opts = append(opts, kgo.InstanceID(fmt.Sprint("inst", id%3)))
		}
		if len(balancers) > 0 {
			opts = append(opts, kgo.Balancers(balancers...))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollRecords(ctx, 100)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					v, err := strconv.Atoi(string(r.Value))
					if err != nil || v < 0 || v >= n || int32(v%parts) != r.Partition || int64(v/parts) != r.Offset {
						bad = fmt.Errorf("member %d: record %q at %d@%d", id, r.Value, r.Partition, r.Offset)
						return
					}
					if seen[v]++; seen[v] == 1 {
						unique++
					}
				})
				mu.Unlock()
				select {
				case progress <- struct{}{}:
				default:
				}
				time.Sleep(2 * time.Millisecond)
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
			case <-progress:
			case <-ctx.Done():
				t.Fatalf("%d of %d records delivered", u, n)
			}
		}
	}
	live := map[int]*kgo.Client{0: start(0), 1: start(1)}
	defer func() {
		for _, cl := range live {
			cl.Close()
		}
		wg.Wait()
	}()
	// +2 +3 -0 +4 -1 -2 -3: five members, two at the end.
	steps := []int{2, 3, -0 - 100, 4, -1 - 100, -2 - 100, -3 - 100}
	if static {
		// Instance ids inst0..inst2: 3 takes 0's place after it closed
		// (a static member's Close sends no LeaveGroup), 4 takes 1's.
		steps = []int{2, -0 - 100, 3, -1 - 100, 4}
	}
	for i, st := range steps {
		waitUnique((i + 1) * n / 8)
		if st >= 0 {
			live[st] = start(st)
		} else {
			live[-st-100].Close()
			delete(live, -st-100)
		}
	}
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
		d, err := c.Describe("churn")
		if err != nil {
			t.Fatal(err)
		}
		done, got := false, ""
		for _, g := range d.Groups {
			if g.Group != "cg" {
				continue
			}
			done = true
			for _, gp := range g.Partitions {
				end := d.Partitions[gp.Partition].LogEndOffset
				got += fmt.Sprintf(" %d:%d/%d", gp.Partition, gp.Committed, end)
				if gp.Committed != end || end != int64((n-int(gp.Partition)+parts-1)/parts) {
					done = false
				}
			}
		}
		if done {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("committed/log end:%s", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for v, k := range seen {
		if k == 0 {
			t.Fatalf("record %d never delivered", v)
		}
		dups += k - 1
	}
	t.Logf("%d records, %d delivered again after a rebalance", n, dups)
}

// TestGroupChurnKgo runs churnWorkload (20,000 records, 4 partitions)
// with kgo's default cooperative-sticky balancer and with the eager range
// balancer, and with static members replaced under their instance ids.
// Redelivery after a rebalance is allowed (at least once); loss
// is not. Broken variants it catches: an OffsetCommit that does not Seek
// (retention frees nothing: the producer stalls at 4,000 records and the
// deadline ends the test), a SyncGroup that hands a member another's
// assignment or none (a partition nobody fetches: records never
// delivered), a LeaveGroup that does not rebalance (the leaver's
// partitions stay with it: the deadline ends the test).
func TestGroupChurnKgo(t *testing.T) {
	t.Run("cooperative-sticky", func(t *testing.T) { churnWorkload(t, 20000, 4, false) })
	t.Run("eager-range", func(t *testing.T) { churnWorkload(t, 20000, 4, false, kgo.RangeBalancer()) })
	t.Run("static-cooperative", func(t *testing.T) { churnWorkload(t, 20000, 4, true) })
}
