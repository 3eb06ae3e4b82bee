package kafka

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/twmb/franz-go/pkg/kgo"
)

// crashDialer dials for one kgo client until crash, which closes every
// connection it made and refuses new ones: the client goes silent, as a
// process that died, without a leave.
type crashDialer struct {
	mu      sync.Mutex
	conns   []net.Conn
	crashed bool
}

func (d *crashDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.crashed {
		return nil, fmt.Errorf("crashed")
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *crashDialer) crash() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.crashed = true
	for _, c := range d.conns {
		c.Close()
	}
}

// TestShareChurnKgo: kgo share consumers of group "crew" on 4 partitions
// join, leave (Close) and crash (connections cut, no leave: removed
// after the cluster's 2.5 s session timeout; kgo heartbeats a share group
// at most once a second, whatever interval the broker asks for, so a
// timeout under a second expires live members too) while a kgo producer
// writes 2,000 records into partitions of capacity 100 (so it waits on the
// acknowledgements). Every record is accepted: Tributary's Describe shows
// every partition committed to its log end with nothing in flight; and
// each record's deliveries carry distinct delivery counts (a record
// delivered again after a crash or a rebalance counts up, never repeats
// a count). Broken variants it catches: a crashed member never removed
// (its partitions are never fetched again: the deadline ends the test),
// the records a crashed member held left acquired (the same), a
// redelivery with the old count (a repeated count).
func TestShareChurnKgo(t *testing.T) {
	const n, parts = 2000, 4
	c, s := serveCluster(t, 100, []tributary.ClusterOption{tributary.WithSessionTimeout(2500 * time.Millisecond)})
	createTopic(t, c, "flow", parts)
	ctx := testCtx(t, 15*time.Second)
	p := client(t, s, kgo.DefaultProduceTopic("flow"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var perr atomic.Value
	for i := range n {
		p.Produce(ctx, &kgo.Record{Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
		})
	}
	var (
		mu       sync.Mutex
		counts   = make([][]int32, n)
		accepted int
		progress = make(chan struct{}, 1)
		wg       sync.WaitGroup
	)
	type consumer struct {
		cl     *kgo.Client
		d      *crashDialer
		cancel context.CancelFunc
	}
	start := func(id int) *consumer {
		d := &crashDialer{}
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.ClientID(fmt.Sprint("crew", id)), kgo.Dialer(d.dial),
			kgo.ShareGroup("crew"), kgo.ConsumeTopics("flow"), kgo.FetchMaxWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				fs := cl.PollFetches(pctx)
				if fs.IsClientClosed() {
					return
				}
				mu.Lock()
				for _, r := range fs.Records() {
					v, err := strconv.Atoi(string(r.Value))
					if err != nil || v < 0 || v >= n {
						t.Errorf("consumer %d: record %q", id, r.Value)
						continue
					}
					if len(counts[v]) == 0 {
						accepted++
					}
					counts[v] = append(counts[v], r.DeliveryCount())
					r.Ack(kgo.AckAccept)
				}
				mu.Unlock()
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}()
		return &consumer{cl: cl, d: d, cancel: cancel}
	}
	waitSeen := func(k int) {
		t.Helper()
		for {
			mu.Lock()
			u := accepted
			mu.Unlock()
			if u >= k {
				return
			}
			select {
			case <-progress:
			case <-ctx.Done():
				d, _ := c.Describe("flow")
				s.share.mu.Lock()
				for _, g := range s.share.groups {
					for _, m := range g.members {
						t.Logf("front end member %s name %s lastSeen %v epoch %d handles %d", m.id, m.name, m.lastSeen, m.epoch, len(m.handles))
					}
				}
				s.share.mu.Unlock()
				t.Fatalf("%d of %d records delivered; Tributary: %+v", u, n, d)
			}
		}
	}
	live := map[int]*consumer{0: start(0), 1: start(1)}
	var crashed []*consumer
	defer func() {
		for _, cs := range live {
			cs.cancel()
			cs.cl.Close()
		}
		for _, cs := range crashed {
			cs.cancel()
		}
		wg.Wait()
		var cw sync.WaitGroup
		for _, cs := range crashed {
			cw.Add(1)
			go func() { defer cw.Done(); cs.cl.Close() }()
		}
		cw.Wait()
	}()
	// +2, crash 0, +3, leave 1, +4, crash 2: three live at the end.
	type step struct {
		id    int
		crash bool
		leave bool
	}
	steps := []step{{id: 2}, {id: 0, crash: true}, {id: 3}, {id: 1, leave: true}, {id: 4}, {id: 2, crash: true}}
	for i, st := range steps {
		waitSeen((i + 1) * n / 8)
		cs := live[st.id]
		switch {
		case st.crash:
			cs.d.crash()
			cs.cancel()
			crashed = append(crashed, cs)
			delete(live, st.id)
		case st.leave:
			cs.cancel()
			cs.cl.Close()
			delete(live, st.id)
		default:
			live[st.id] = start(st.id)
		}
	}
	waitSeen(n)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err, _ := perr.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
	waitFor(t, ctx, "every partition committed to its log end", func() bool { return committedAll(c, "flow", "crew", n/parts) })
	g := shareGroupState(t, c, "flow", "crew")
	for _, gp := range g.Partitions {
		if gp.InFlight {
			t.Fatalf("partition %d: a record still in flight after every record was accepted", gp.Partition)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for v, cs := range counts {
		if len(cs) == 0 {
			t.Fatalf("record %d never delivered", v)
		}
		again += len(cs) - 1
		distinct := slices.Clone(cs)
		slices.Sort(distinct)
		if len(slices.Compact(distinct)) != len(cs) {
			t.Errorf("record %d delivered with counts %v", v, cs)
		}
	}
	t.Logf("%d records, %d delivered again", n, again)
}
