package tributary_test

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/f91dcac0/tributary"
)

// Example_library is README's "Library" program, kept compiling and
// correct by this test: a typed topic, a key-hash producer and a consumer
// group running until it has handled every order.
func Example_library() {
	type Order struct {
		ID    int    `json:"id"`
		Email string `json:"email"`
	}
	cluster, _ := tributary.NewCluster(1000) // records retained per partition
	orders, _ := tributary.CreateTopic(cluster, "orders", 4, tributary.JSON[Order]())
	producer, _ := tributary.NewProducer[Order](cluster, "web", tributary.KeyHash())
	ctx, cancel := context.WithCancel(context.Background())
	for i := 1; i <= 3; i++ { // same key, same partition: per-customer order
		producer.Send(ctx, orders, tributary.Message[Order]{Key: "cust-42", Value: Order{ID: i, Email: "a@b.c"}})
	}
	billing, _ := tributary.NewConsumer(orders, "billing", "billing-1",
		tributary.WithDeadLetter("orders-dlq", 5)) // 5 attempts, then the dead-letter topic
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return billing.Run(ctx, func(ctx context.Context, m tributary.Message[Order]) error {
			fmt.Printf("order %d (message %s, attempt %d)\n", m.Value.ID, m.ID, m.Attempt)
			if m.Value.ID == 3 {
				cancel() // done: stop the consumer
			}
			return nil // nil acks; an error retries with backoff
		})
	})
	fmt.Println(g.Wait())
	// Output:
	// order 1 (message 0-0, attempt 1)
	// order 2 (message 0-1, attempt 1)
	// order 3 (message 0-2, attempt 1)
	// context canceled
}
