package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// A typed consumer on a backend with a session timeout whose session
// expires (another member's Heartbeat expires it) rejoins and goes on
// (ConsumerStats.Expired); it is the only incarnation of its name, so its
// Run must never end fenced.
func TestHJSExpiredConsumerFencesItself(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	const session = 30 * time.Millisecond
	b, _ := start(t, jetstream.Config{Capacity: 100, SessionTimeout: session, Clock: clk.Now, RequestTimeout: 5 * time.Second})
	c := must(tributary.NewClusterOn(b)).of(t)
	defer c.Close()
	tp := must(tributary.CreateTopic(c, "orders", 64, tributary.JSON[int]())).of(t)
	cons := must(tributary.NewConsumer(tp, "g", "w")).of(t)
	bt, _, err := b.OpenTopic("orders")
	if err != nil {
		t.Fatal(err)
	}
	z := member(t, bt, "g", "z")
	must(z.Join()).of(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		ended <- cons.Run(ctx, func(context.Context, tributary.Message[int]) error { return nil })
	}()
	deadline := time.Now().Add(40 * time.Second)
	for round := 0; round < 40 && time.Now().Before(deadline); round++ {
		before := cons.Stats().Expired
		clk.Add(4 * session)
		if _, err := z.Heartbeat(); err != nil {
			t.Fatal(err)
		}
		for w := time.Now().Add(3 * time.Second); time.Now().Before(w) && cons.Stats().Expired == before; {
			select {
			case err := <-ended:
				t.Fatalf("round %d (%d expiries so far): the only consumer of its name: Run = %v", round, before, err)
			case <-time.After(5 * time.Millisecond):
			}
		}
		time.Sleep(50 * time.Millisecond) // heartbeats tick meanwhile
		select {
		case err := <-ended:
			t.Fatalf("round %d (%d expiries): the only consumer of its name: Run = %v", round, cons.Stats().Expired, err)
		default:
		}
	}
	cancel()
	err = <-ended
	if errors.Is(err, tributary.ErrFenced) {
		t.Fatalf("Run = %v", err)
	}
	t.Logf("expired %d times, Run = %v", cons.Stats().Expired, err)
}
