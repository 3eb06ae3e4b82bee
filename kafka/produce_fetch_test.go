package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProduceConsumeKgo(t *testing.T) {
	_, s := serve(t, 1000)
	p := client(t, s, kgo.DefaultProduceTopic("orders"), kgo.AllowAutoTopicCreation())
	ctx := testCtx(t, 20*time.Second)
	const n = 50
	for i := range n {
		r := &kgo.Record{Key: []byte(fmt.Sprint("k", i%3)), Value: []byte(fmt.Sprint("v", i)), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
		if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %d got offset %d", i, r.Offset)
		}
	}
	c := client(t, s, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < n {
		fs := c.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		if string(r.Value) != fmt.Sprint("v", i) || r.Offset != int64(i) || string(r.Key) != fmt.Sprint("k", i%3) || len(r.Headers) != 1 {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
}
