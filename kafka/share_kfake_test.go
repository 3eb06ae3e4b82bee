package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareWorkload creates topic "orders" of 2 partitions at addr, produces
// six records to each (a: accept, r: release once then accept, x:
// reject) with a kgo producer, consumes them with a kgo share consumer of
// group "workers" acknowledging as their kind says, and returns each
// record's delivery counts.
func shareWorkload(t *testing.T, addr string) map[string][]int32 {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	p := clientAt(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
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
	cl := clientAt(t, addr, kgo.ShareGroup("workers"), kgo.ConsumeTopics("orders"), kgo.FetchMaxWait(50*time.Millisecond))
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

// TestShareBesideKfake runs one kgo share-consumer workload (accept,
// release, reject) against the front end and, as the reference, against
// franz-go's kfake, and compares the delivery counts record by record:
// both must deliver every record once, and a released one a second time
// with count 2. Differences are logged (kfake archives a rejected record;
// the front end dead-letters it when the group has a dead-letter topic,
// which this workload does not set, so both archive it). kfake's share
// groups start at the log end unless share.auto.offset.reset is earliest;
// Tributary's at the log start.
func TestShareBesideKfake(t *testing.T) {
	_, s := serve(t, 100)
	ours := shareWorkload(t, s.Addr())
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	kc.SetGroupConfigs("workers", map[string]string{"share.auto.offset.reset": "earliest"})
	ref := shareWorkload(t, kc.ListenAddrs()[0])
	if len(ours) != 12 || len(ref) != 12 {
		t.Fatalf("records delivered: %d here, %d on kfake, want 12", len(ours), len(ref))
	}
	differ := 0
	for v, want := range ref {
		if fmt.Sprint(ours[v]) != fmt.Sprint(want) {
			differ++
			t.Errorf("record %s: delivery counts %v here, %v on kfake", v, ours[v], want)
		}
		if v[len(v)-1] == 'r' && fmt.Sprint(want) != "[1 2]" {
			t.Errorf("kfake: released record %s delivered %v, want [1 2]", v, want)
		}
	}
	t.Logf("share workload: %d records, %d with other delivery counts than kfake's", len(ref), differ)
}
