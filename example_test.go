package tributary_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/f91dcac0/tributary"
)

// Order is the payload of the examples' "orders" topics.
type Order struct {
	ID   int    `json:"id"`
	Item string `json:"item"`
}

func ExampleNewCluster() {
	// Each partition retains at most 100 records; deliveries not acked
	// within a minute are redelivered.
	c, err := tributary.NewCluster(100, tributary.WithAckTimeout(time.Minute))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	tributary.CreateTopic[Order](c, "orders", 4, nil)
	fmt.Println(c.Topics())

	_, err = tributary.NewCluster(0)
	fmt.Println(errors.Is(err, tributary.ErrInvalidArgument))
	// Output:
	// [orders]
	// true
}

func ExampleNewClusterOn() {
	// Two clusters on one backend share its topics.
	first, _ := tributary.NewCluster(100)
	defer first.Close()
	tributary.CreateTopic(first, "names", 1, tributary.String())

	second, _ := tributary.NewClusterOn(first.Backend())
	defer second.Close()
	names, err := tributary.OpenTopic(second, "names", tributary.String())
	fmt.Println(names.Name(), names.PayloadType(), err)
	// Output: names String <nil>
}

func ExampleCreateTopic() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()

	orders, _ := tributary.CreateTopic[Order](c, "orders", 4, nil) // nil codec: JSON
	names, _ := tributary.CreateTopic(c, "names", 1, tributary.String())
	fmt.Println(orders.Name(), orders.Partitions(), orders.PayloadType())
	fmt.Println(names.Name(), names.Partitions(), names.PayloadType())

	_, err := tributary.CreateTopic(c, "orders", 4, tributary.String())
	fmt.Println(errors.Is(err, tributary.ErrExists))
	// Output:
	// orders 4 JSON:tributary_test.Order
	// names 1 String
	// true
}

func ExampleOpenTopic() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	tributary.CreateTopic[Order](c, "orders", 4, nil)

	orders, err := tributary.OpenTopic[Order](c, "orders", nil)
	fmt.Println(orders.PayloadType(), err)

	_, err = tributary.OpenTopic(c, "orders", tributary.String())
	fmt.Println(errors.Is(err, tributary.ErrTypeMismatch))
	_, err = tributary.OpenTopic[Order](c, "invoices", nil)
	fmt.Println(errors.Is(err, tributary.ErrUnknownTopic))
	// Output:
	// JSON:tributary_test.Order <nil>
	// true
	// true
}

func ExampleNewProducer() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 3, nil)

	rr, _ := tributary.NewProducer[Order](c, "spreader", tributary.RoundRobin())
	var ids []string
	for i := range 4 {
		m, _ := rr.TrySend(orders, tributary.Message[Order]{Value: Order{ID: i}})
		ids = append(ids, m.ID)
	}
	fmt.Println(ids)

	manual, _ := tributary.NewProducer[Order](c, "pinned", tributary.Manual())
	m, _ := manual.TrySend(orders, tributary.Message[Order]{Partition: 2, Value: Order{ID: 9}})
	fmt.Println(manual.Strategy(), m.ID)

	_, err := tributary.NewProducer[Order](c, "pinned", tributary.Random())
	fmt.Println(errors.Is(err, tributary.ErrExists))
	// Output:
	// [0-0 1-0 2-0 0-1]
	// Manual 2-1
	// true
}

func ExampleProducer_Send() {
	c, _ := tributary.NewCluster(1) // one record per partition
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 1, nil)
	p, _ := tributary.NewProducer[Order](c, "web", tributary.KeyHash())
	billing, _ := tributary.NewConsumer(orders, "billing", "billing-1")
	ctx := context.Background()

	first, _ := p.Send(ctx, orders, tributary.Message[Order]{Key: "cust-7", Value: Order{ID: 1}})
	fmt.Println("sent", first.ID)

	// The partition is full: Send waits until billing acks the first order.
	done := make(chan tributary.Message[Order])
	go func() {
		m, _ := p.Send(ctx, orders, tributary.Message[Order]{Key: "cust-7", Value: Order{ID: 2}})
		done <- m
	}()
	ms, _ := billing.Poll(ctx, 1)
	billing.Ack(ms[0])
	fmt.Println("sent", (<-done).ID)

	// A cancelled context ends the wait: nothing is published.
	cctx, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	_, err := p.Send(cctx, orders, tributary.Message[Order]{Key: "cust-7", Value: Order{ID: 3}})
	fmt.Println(err)
	// Output:
	// sent 0-0
	// sent 0-1
	// context deadline exceeded
}

func ExampleProducer_TrySend() {
	c, _ := tributary.NewCluster(2)
	defer c.Close()
	names, _ := tributary.CreateTopic(c, "names", 1, tributary.String())
	p, _ := tributary.NewProducer[string](c, "p", tributary.Manual())
	for _, name := range []string{"ada", "grace", "edsger"} {
		m, err := p.TrySend(names, tributary.Message[string]{Value: name})
		fmt.Println(name, m.ID, err)
	}
	// Output:
	// ada 0-0 <nil>
	// grace 0-1 <nil>
	// edsger  tributary: partition full: topic "names" partition 0
}

func ExampleNewConsumer() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 4, nil)

	a, _ := tributary.NewConsumer(orders, "billing", "a")
	fmt.Println("a", a.Assignment())
	b, _ := tributary.NewConsumer(orders, "billing", "b") // joins: a rebalance
	fmt.Println("a", a.Assignment(), "b", b.Assignment())
	a.Close() // leaves: b takes everything
	fmt.Println("b", b.Assignment())
	fmt.Println(c.Consumers())
	// Output:
	// a [0 1 2 3]
	// a [0 2] b [1 3]
	// b [0 1 2 3]
	// [b]
}

func ExampleConsumer_Poll() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 2, nil)
	billing, _ := tributary.NewConsumer(orders, "billing", "billing-1")
	p, _ := tributary.NewProducer[Order](c, "web", tributary.Manual())

	// Poll blocks until the producer publishes.
	go p.Send(context.Background(), orders, tributary.Message[Order]{Partition: 1, Key: "cust-7",
		Headers: []tributary.Header{{Key: "trace", Value: "t-1"}}, Value: Order{ID: 1, Item: "lamp"}})
	ms, err := billing.Poll(context.Background(), 10)
	if err != nil {
		panic(err)
	}
	m := ms[0]
	fmt.Println(m.ID, m.Key, m.Headers, m.PayloadType, m.Value, m.Attempt)
	fmt.Println(billing.Ack(m), billing.Ack(m) != nil)
	// Output:
	// 1-0 cust-7 [{trace t-1}] JSON:tributary_test.Order {1 lamp} 1
	// <nil> true
}

func ExampleConsumer_Messages() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 2, nil)
	billing, _ := tributary.NewConsumer(orders, "billing", "billing-1")
	p, _ := tributary.NewProducer[Order](c, "web", tributary.KeyHash())
	for i, item := range []string{"lamp", "desk", "chair"} {
		p.TrySend(orders, tributary.Message[Order]{Key: "cust-7", Value: Order{ID: i + 1, Item: item}})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	for m, err := range billing.Messages(ctx) {
		if err != nil { // ctx ended, or the consumer was closed
			fmt.Println(err)
			break
		}
		fmt.Println(m.ID, m.Value.Item)
		billing.Ack(m)
		if n++; n == 3 {
			break
		}
	}
	// Output:
	// 1-0 lamp
	// 1-1 desk
	// 1-2 chair
}

func ExampleConsumer_AppendPoll() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	events, _ := tributary.CreateTopic(c, "events", 4, tributary.String())
	p, _ := tributary.NewProducer[string](c, "p", tributary.RoundRobin())
	cons, _ := tributary.NewConsumer(events, "g", "g-1")
	for _, v := range []string{"a", "b", "c", "d", "e", "f"} {
		p.TrySend(events, tributary.Message[string]{Value: v})
	}

	// One buffer for every poll: with room for max messages a poll
	// allocates nothing of its own.
	buf := make([]tributary.Message[string], 0, 4)
	ctx := context.Background()
	for handled := 0; handled < 6; {
		var err error
		if buf, err = cons.AppendPoll(ctx, buf[:0], 4); err != nil {
			panic(err)
		}
		var values []string
		for _, m := range buf {
			values = append(values, m.Value)
			cons.Ack(m)
			handled++
		}
		fmt.Println(values)
	}
	// Output:
	// [a b c d]
	// [e f]
}

func ExampleConsumer_Retry() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	names, _ := tributary.CreateTopic(c, "names", 1, tributary.String())
	p, _ := tributary.NewProducer[string](c, "p", tributary.Manual())
	p.TrySend(names, tributary.Message[string]{Value: "ada"})
	cons, _ := tributary.NewConsumer(names, "g", "c1")
	ctx := context.Background()

	ms, _ := cons.Poll(ctx, 1)
	fmt.Println(ms[0].ID, ms[0].Value, ms[0].Attempt)
	cons.Retry(ms[0]) // redelivered by the next poll
	ms, _ = cons.Poll(ctx, 1)
	fmt.Println(ms[0].ID, ms[0].Value, ms[0].Attempt)
	// Output:
	// 0-0 ada 1
	// 0-0 ada 2
}

func ExampleConsumer_Run() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 1, nil)
	p, _ := tributary.NewProducer[Order](c, "web", tributary.Manual())
	for i := 1; i <= 3; i++ {
		p.TrySend(orders, tributary.Message[Order]{Value: Order{ID: i}})
	}
	billing, _ := tributary.NewConsumer(orders, "billing", "billing-1",
		tributary.WithBackoff(time.Millisecond, 10*time.Millisecond))

	ctx, cancel := context.WithCancel(context.Background())
	err := billing.Run(ctx, func(ctx context.Context, m tributary.Message[Order]) error {
		fmt.Printf("order %d, message %s, attempt %d\n", m.Value.ID, m.ID, m.Attempt)
		if m.Value.ID == 2 && m.Attempt == 1 {
			return errors.New("payment service down") // retried after 1ms
		}
		if m.Value.ID == 3 {
			cancel()
		}
		return nil // acked
	})
	fmt.Println(err)
	s := billing.Stats()
	fmt.Println("handled", s.Handled, "retried", s.Retried)
	// Output:
	// order 1, message 0-0, attempt 1
	// order 2, message 0-1, attempt 1
	// order 2, message 0-1, attempt 2
	// order 3, message 0-2, attempt 1
	// context canceled
	// handled 4 retried 1
}

func ExampleConsumer_Seek() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	names, _ := tributary.CreateTopic(c, "names", 1, tributary.String())
	c.CreateGroup("names", "archive", tributary.RoundRobinAssignor) // keeps the records retained
	p, _ := tributary.NewProducer[string](c, "p", tributary.Manual())
	for _, n := range []string{"ada", "grace", "edsger"} {
		p.TrySend(names, tributary.Message[string]{Value: n})
	}
	cons, _ := tributary.NewConsumer(names, "readers", "r1")
	read := func(n int) {
		var got []string
		for range n {
			ms, _ := cons.Poll(context.Background(), 1)
			got = append(got, ms[0].ID+":"+ms[0].Value)
			cons.Ack(ms[0])
		}
		fmt.Println(got)
	}
	read(3)
	cons.Seek(0, 1) // replay from offset 1: the same messages, the same IDs
	read(2)
	fmt.Println(errors.Is(cons.Seek(0, 4), tributary.ErrOffsetOutOfRange))
	// Output:
	// [0-0:ada 0-1:grace 0-2:edsger]
	// [0-1:grace 0-2:edsger]
	// true
}

func ExampleWithDeadLetter() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 2, nil)
	p, _ := tributary.NewProducer[Order](c, "web", tributary.Manual())
	p.TrySend(orders, tributary.Message[Order]{Partition: 1, Key: "cust-7", Value: Order{ID: 13, Item: "mirror"}})

	// Two attempts, then the record goes to orders-dlq (created like orders).
	billing, _ := tributary.NewConsumer(orders, "billing", "billing-1",
		tributary.WithDeadLetter("orders-dlq", 2), tributary.WithBackoff(time.Millisecond, time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- billing.Run(ctx, func(ctx context.Context, m tributary.Message[Order]) error {
			return fmt.Errorf("order %d: unlucky", m.Value.ID)
		})
	}()

	dlq, _ := tributary.OpenTopic[Order](c, "orders-dlq", nil)
	ops, _ := tributary.NewConsumer(dlq, "ops", "ops-1")
	ms, _ := ops.Poll(ctx, 1)
	cancel()
	<-done
	m := ms[0]
	fmt.Println(m.ID, m.Key, m.Value)
	for _, h := range m.Headers {
		fmt.Printf("%s: %s\n", h.Key, h.Value)
	}
	// Output:
	// 1-0 cust-7 {13 mirror}
	// tributary-dlq-topic: orders
	// tributary-dlq-group: billing
	// tributary-dlq-partition: 1
	// tributary-dlq-offset: 0
	// tributary-dlq-attempts: 2
	// tributary-dlq-error: order 13: unlucky
}

func ExampleCluster_Describe() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 2, nil)
	p, _ := tributary.NewProducer[Order](c, "web", tributary.RoundRobin())
	for i := range 5 {
		p.TrySend(orders, tributary.Message[Order]{Value: Order{ID: i}})
	}
	billing, _ := tributary.NewConsumer(orders, "billing", "billing-1")
	ms, _ := billing.Poll(context.Background(), 2)
	billing.Ack(ms[0]) // partition 0 moves on; partition 1's record stays in flight

	d, _ := c.Describe("orders")
	for _, p := range d.Partitions {
		fmt.Printf("partition %d: offsets [%d,%d)\n", p.Partition, p.LogStartOffset, p.LogEndOffset)
	}
	for _, g := range d.Groups {
		fmt.Println("group", g.Group, g.Assignor, g.Members)
		for _, p := range g.Partitions {
			fmt.Printf("  %d: owner %s committed %d in flight %v attempts %d lag %d\n",
				p.Partition, p.Owner, p.Committed, p.InFlight, p.Attempts, p.Lag)
		}
	}
	// Output:
	// partition 0: offsets [1,3)
	// partition 1: offsets [0,2)
	// group billing RoundRobin [billing-1]
	//   0: owner billing-1 committed 1 in flight false attempts 0 lag 2
	//   1: owner billing-1 committed 0 in flight true attempts 1 lag 2
}

func ExampleCluster_SetAssignor() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 5, nil)
	a, _ := tributary.NewConsumer(orders, "billing", "a")
	b, _ := tributary.NewConsumer(orders, "billing", "b")
	fmt.Println("RoundRobin:", a.Assignment(), b.Assignment())

	c.SetAssignor("orders", "billing", tributary.RangeAssignor) // rebalances now
	fmt.Println("Range:", a.Assignment(), b.Assignment())
	// Output:
	// RoundRobin: [0 2 4] [1 3]
	// Range: [0 1 2] [3 4]
}

func ExampleCluster_CreateGroup() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 4, nil)
	ok, _ := c.CreateGroup("orders", "billing", tributary.StickyAssignor)
	fmt.Println(ok)
	ok, _ = c.CreateGroup("orders", "billing", tributary.RangeAssignor) // exists: unchanged
	fmt.Println(ok)
	tributary.NewConsumer(orders, "billing", "b1")
	d, _ := c.Describe("orders")
	fmt.Println(d.Groups[0].Group, d.Groups[0].Assignor, d.Groups[0].Members)
	// Output:
	// true
	// false
	// billing Sticky [b1]
}

func ExampleCluster_AddPartitions() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 2, nil)
	a, _ := tributary.NewConsumer(orders, "billing", "a")
	b, _ := tributary.NewConsumer(orders, "billing", "b")
	n, _ := c.AddPartitions("orders", 2)
	fmt.Println(n, orders.Partitions(), a.Assignment(), b.Assignment())
	// Output: 4 4 [0 2] [1 3]
}

func ExampleCluster_DeleteGroup() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 1, nil)
	tributary.NewConsumer(orders, "billing", "b1")
	_, err := c.DeleteGroup("orders", "billing")
	fmt.Println(errors.Is(err, tributary.ErrGroupNotEmpty))
	c.CloseConsumer("b1")
	ok, err := c.DeleteGroup("orders", "billing")
	fmt.Println(ok, err)
	// Output:
	// true
	// true <nil>
}

func ExampleCluster_Close() {
	c, _ := tributary.NewCluster(100)
	orders, _ := tributary.CreateTopic[Order](c, "orders", 1, nil)
	billing, _ := tributary.NewConsumer(orders, "billing", "billing-1")
	done := make(chan error)
	go func() {
		done <- billing.Run(context.Background(), func(context.Context, tributary.Message[Order]) error { return nil })
	}()
	c.Close()
	fmt.Println("Run:", <-done) // a closed consumer's Run returns nil
	_, err := tributary.NewProducer[Order](c, "late", tributary.Manual())
	fmt.Println(errors.Is(err, tributary.ErrClosed))
	// Output:
	// Run: <nil>
	// true
}

func ExampleLookupProducer() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	tributary.NewProducer[Order](c, "web", tributary.KeyHash())

	p, err := tributary.LookupProducer[Order](c, "web")
	fmt.Println(p.Name(), p.Strategy(), err)
	_, err = tributary.LookupProducer[string](c, "web")
	fmt.Println(errors.Is(err, tributary.ErrTypeMismatch))
	_, err = tributary.LookupProducer[Order](c, "mobile")
	fmt.Println(errors.Is(err, tributary.ErrNotFound))
	fmt.Println(c.Producers())
	// Output:
	// web KeyHash <nil>
	// true
	// true
	// [web]
}

func ExampleLookupConsumer() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic[Order](c, "orders", 2, nil)
	tributary.NewConsumer(orders, "billing", "billing-1")

	cons, err := tributary.LookupConsumer[Order](c, "billing-1")
	fmt.Println(cons.Name(), cons.Topic().Name(), cons.Assignment(), err)
	_, err = tributary.LookupConsumer[int](c, "billing-1")
	fmt.Println(errors.Is(err, tributary.ErrTypeMismatch))
	c.CloseConsumer("billing-1")
	_, err = tributary.LookupConsumer[Order](c, "billing-1")
	fmt.Println(errors.Is(err, tributary.ErrNotFound))
	// Output:
	// billing-1 orders [0 1] <nil>
	// true
	// true
}
