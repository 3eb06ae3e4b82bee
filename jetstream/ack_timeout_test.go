package jetstream_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/jetstream"
)

// An ack timeout too long to run out (MaxInt64: past the year 2262 from
// any delivery) never redelivers: the record stays in flight, a TryPoll
// finds nothing and a Poll waits, as with no ack timeout; the Ack still
// commits it.
func TestAckTimeoutHugeNeverRedelivers(t *testing.T) {
	b, _ := start(t, jetstream.Config{AckTimeout: time.Duration(math.MaxInt64)})
	bt := topic(t, b, "t", 1)
	pub(t, bt, 0, "a")
	m := member(t, bt, "g", "m")
	must(m.Join()).of(t)
	wantRecs(t, poll(t, m, 1), rec{0, 0, "a", 1})
	wantRecs(t, poll(t, m, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if rs, err := m.Poll(ctx, nil, nil, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Poll = %v, %v; want it to wait out ctx", recs(rs), err)
	}
	ok, err := m.Ack(0, 0)
	wantBool(t, "Ack", ok, err, true)
}
