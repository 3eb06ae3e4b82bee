package kafka

import (
	"fmt"
	"testing"

	"github.com/f91dcac0/tributary/kafka/kafkatest"
	"github.com/twmb/franz-go/pkg/kfake"
)

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
	ours := kafkatest.ShareWorkload(t, s.Addr())
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	kc.SetGroupConfigs("workers", map[string]string{"share.auto.offset.reset": "earliest"})
	ref := kafkatest.ShareWorkload(t, kc.ListenAddrs()[0])
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
