package tributarywm_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	tributarywm "github.com/f91dcac0/tributary/watermill"
)

// lockedBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSlogLogger: the adapter given Watermill's slog adapter
// (watermill.NewSlogLogger) logs a subscription's partitions at Info as it
// starts, the change when a second subscription of its group takes some
// (seen at its next poll), and what it held when it closes.
func TestSlogLogger(t *testing.T) {
	c := newCluster(t, 100)
	var out lockedBuffer
	logger := watermill.NewSlogLogger(slog.New(slog.NewTextHandler(&out, nil)))
	pub, err := tributarywm.NewPublisher(c, tributarywm.PublisherConfig{Partitions: 2}, logger)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{ConsumerGroup: "billing", Partitions: 2}, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := sub.Subscribe(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	// logged waits for a line holding every part (Watermill's fields
	// come in no fixed order).
	logged := func(parts ...string) bool {
		has := func() bool {
			for _, line := range strings.Split(out.String(), "\n") {
				all := true
				for _, p := range parts {
					all = all && strings.Contains(line, p)
				}
				if all {
					return true
				}
			}
			return false
		}
		deadline := time.Now().Add(5 * time.Second)
		for !has() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		return has()
	}
	if !logged(`level=INFO msg="Partitions assigned"`, "consumer_group=billing", "topic=orders", `partitions="[0 1]"`, `gained="[0 1]"`, "lost=[]") {
		t.Fatalf("no assignment logged at Info:\n%s", out.String())
	}
	sub2, err := tributarywm.NewSubscriber(c, tributarywm.SubscriberConfig{ConsumerGroup: "billing", Partitions: 2}, logger)
	if err != nil {
		t.Fatal(err)
	}
	ch2, err := sub2.Subscribe(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	// A message on each partition: the first subscription polls again
	// and finds the partition the second took gone.
	for _, id := range []string{"a", "b"} {
		if err := pub.Publish("orders", message.NewMessage(id, []byte(id))); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []<-chan *message.Message{ch, ch2} {
		receive(t, c).Ack()
	}
	if !logged(`msg="Partitions assigned"`, "gained=[]", "lost=[") {
		t.Errorf("the first subscription's loss of a partition not logged:\n%s", out.String())
	}
	sub2.Close()
	sub.Close()
	if !logged(`level=INFO msg="Subscription closed"`, "partitions_revoked=[") {
		t.Errorf("no close logged:\n%s", out.String())
	}
}
