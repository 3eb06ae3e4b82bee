package tributary_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/f91dcac0/tributary"
)

// ExampleLogHooks turns on the library's logs: rebalances at Info, dead
// letters, expiries and outages at Warn, per-record events at Debug.
func ExampleLogHooks() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	// A text handler without the time, so that the output is the same on
	// every run; a service passes its own logger.
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	c.AddHooks(tributary.LogHooks(slog.New(h)))
	orders, _ := tributary.CreateTopic(c, "orders", 2, tributary.String())
	cons, _ := tributary.NewConsumer(orders, "billing", "b1")
	cons.Close()
	// Output:
	// level=INFO msg="tributary: partitions assigned" topic=orders group=billing member=b1 partitions="[0 1]"
	// level=INFO msg="tributary: partitions revoked" topic=orders group=billing member=b1 partitions="[0 1]"
}

// ExampleCluster_AddHooks counts what a consumer acks, per topic, with a
// hook of its own; OnSend adds a header every record carries to its
// handler.
func ExampleCluster_AddHooks() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	acked := map[string]int{} // only the consumer's goroutine writes it
	c.AddHooks(tributary.Hooks{
		OnSend: func(_ context.Context, s *tributary.SendInfo) func(int64, error) {
			s.Headers = append(s.Headers, tributary.Header{Key: "sent-by", Value: s.Producer})
			return nil
		},
		OnAck: func(d tributary.Delivery) { acked[d.Topic]++ },
	})
	orders, _ := tributary.CreateTopic(c, "orders", 1, tributary.String())
	p, _ := tributary.NewProducer[string](c, "web", tributary.RoundRobin())
	p.TrySend(orders, tributary.Message[string]{Value: "book"})
	cons, _ := tributary.NewConsumer(orders, "billing", "b1")
	msgs, _ := cons.TryPoll(1)
	fmt.Println(msgs[0].Value, msgs[0].Headers)
	cons.Ack(msgs[0])
	fmt.Println(acked)
	// Output:
	// book [{sent-by web}]
	// map[orders:1]
}
