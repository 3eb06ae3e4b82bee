package tributarywm_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary"
	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// Example_router is docs/watermill.md's Watermill program, kept compiling
// and correct by this test (TestDocsWatermillProgram checks the page shows
// this body): a Watermill router handling a topic of four partitions through the
// consumer group "billing", one customer's orders in order.
func Example_router() {
	cluster, _ := tributary.NewCluster(1000) // records retained per partition
	defer cluster.Close()
	byCustomer := func(_ string, m *message.Message) (string, error) { return m.Metadata.Get("customer"), nil }
	pub, _ := tributarywm.NewPublisher(cluster, tributarywm.PublisherConfig{Partitions: 4, PartitionKey: byCustomer}, nil)
	for i := 1; i <= 3; i++ { // creates "orders" with 4 partitions; one key, one partition
		msg := message.NewMessage(fmt.Sprintf("order-%d", i), []byte(`{"total":42}`))
		msg.Metadata.Set("customer", "cust-7")
		pub.Publish("orders", msg)
	}
	sub, _ := tributarywm.NewSubscriber(cluster, tributarywm.SubscriberConfig{ConsumerGroup: "billing"}, nil)
	router, _ := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	handled := make(chan struct{})
	router.AddConsumerHandler("bill", "orders", sub, func(msg *message.Message) error {
		d, _ := tributarywm.DeliveryFromContext(msg.Context())
		fmt.Printf("%s %s: partition %d offset %d attempt %d\n", msg.UUID, msg.Payload, d.Partition, d.Offset, d.Attempt)
		handled <- struct{}{}
		return nil // nil acks; an error nacks: the message comes again
	})
	go router.Run(context.Background())
	<-handled
	<-handled
	<-handled
	router.Close()
	// Output:
	// order-1 {"total":42}: partition 1 offset 0 attempt 1
	// order-2 {"total":42}: partition 1 offset 1 attempt 1
	// order-3 {"total":42}: partition 1 offset 2 attempt 1
}

// docs/watermill.md shows Example_router's body, one tab less indented, in
// a Go block.
func TestDocsWatermillProgram(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../docs/watermill.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "func Example_router() {\n")
	body, _, ok2 := strings.Cut(body, "\t// Output:")
	if !ok || !ok2 {
		t.Fatal("example_test.go: Example_router not found")
	}
	var want strings.Builder
	want.WriteString("```go\n")
	for _, l := range strings.SplitAfter(body, "\n") {
		want.WriteString(strings.TrimPrefix(l, "\t"))
	}
	want.WriteString("```\n")
	if !strings.Contains(string(readme), want.String()) {
		t.Errorf("docs/watermill.md has no Go block equal to Example_router's body:\n%s", want.String())
	}
}
