package tributarywm_test

// An admin Seek of a subscription's group while a message is out, in each
// position of its delivery: the partition goes on and nothing stays in
// flight.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary/engine"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// An admin Seek (Cluster.Seek of the subscription's group) while a message
// is out, in every position of its delivery: unread on the channel, with
// the handler, in its NackResendSleep. Seek cancels the in-flight delivery;
// whatever the handler then does, the partition must go on: every record
// is eventually committed and nothing stays in flight.
func TestSeekWhileMessageOut(t *testing.T) {
	type scenario struct {
		name   string
		seekTo int64 // the held message is offset 2
		// state: 0 unread, 1 with the handler, 2 nacked (sleeping)
		state int
		// then: "ack", "nack" (for state 0 and 1), after the Seek
		then string
	}
	var scs []scenario
	for _, seekTo := range []int64{0, 2, 4} {
		for _, st := range []int{0, 1, 2} {
			for _, then := range []string{"ack", "nack"} {
				if st == 2 && then == "nack" {
					continue
				}
				scs = append(scs, scenario{fmt.Sprintf("seek%d/state%d/%s", seekTo, st, then), seekTo, st, then})
			}
		}
	}
	for _, sc := range scs {
		t.Run(sc.name, func(t *testing.T) {
			c := newCluster(t, 100, engine.WithReplayWindow(100))
			const topic = "seek"
			pub := newPublisher(t, c, tributarywm.PublisherConfig{Partitions: 1})
			sub := newSubscriber(t, c, tributarywm.SubscriberConfig{ConsumerGroup: "g", NackResendSleep: 300 * time.Millisecond})
			if err := sub.SubscribeInitialize(topic); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 6; i++ {
				if err := pub.Publish(topic, newMsg(fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
			}
			ch, err := sub.Subscribe(context.Background(), topic)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				m := receive(t, ch)
				m.Ack()
				ctxDone(t, m.Context(), "after Ack")
			}
			eventually(t, "offset 2 reserved", func() bool {
				g, _ := groupOf(describe(t, c, topic), "g")
				return g.Partitions[0].Committed == 2 && g.Partitions[0].InFlight
			})
			var m *message.Message
			if sc.state >= 1 {
				m = receive(t, ch)
				if d := deliveryOf(t, m); d.Offset != 2 {
					t.Fatalf("got offset %d, want 2", d.Offset)
				}
				if sc.state == 2 {
					m.Nack()
					time.Sleep(50 * time.Millisecond) // into the 300ms sleep
				}
			}
			if _, err := c.Seek(topic, "g", 0, sc.seekTo); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // let the run loop poll the re-reservation
			if sc.state == 0 {
				m = receive(t, ch)
			}
			switch {
			case sc.state == 2:
			case sc.then == "ack":
				m.Ack()
			default:
				m.Nack()
			}
			waitDrained(t, c, topic, "g", wait, ch)
		})
	}
}
