package kafka

import (
	"testing"

	"github.com/f91dcac0/tributary/kafka/kafkatest"
	"github.com/twmb/franz-go/pkg/kfake"
)

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
	var ours, ref kafkatest.GroupStats
	t.Run("tributary", func(t *testing.T) {
		c, s := serve(t, 1000)
		if _, err := c.Backend().CreateTopic("t", parts, payloadType); err != nil {
			t.Fatal(err)
		}
		ours = kafkatest.GroupWorkload(t, s.Addr(), n, parts, func() (map[int32]int64, error) {
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
		t.Logf("tributary: %d records delivered, %d duplicates, %d assignments, %v", ours.Records, ours.Duplicates, ours.Assigns, ours.Elapsed)
	})
	t.Run("kfake", func(t *testing.T) {
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, "t"))
		if err != nil {
			t.Fatal(err)
		}
		defer kc.Close()
		addr := kc.ListenAddrs()[0]
		ref = kafkatest.GroupWorkload(t, addr, n, parts, kafkatest.Committed(t, addr, "g"))
		t.Logf("kfake: %d records delivered, %d duplicates, %d assignments, %v", ref.Records, ref.Duplicates, ref.Assigns, ref.Elapsed)
	})
	t.Logf("difference (tributary − kfake): duplicates %+d, assignments %+d, time %v", ours.Duplicates-ref.Duplicates, ours.Assigns-ref.Assigns, ours.Elapsed-ref.Elapsed)
}
