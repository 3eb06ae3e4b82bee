package tributary_test

import (
	"errors"
	"testing"

	"github.com/f91dcac0/tributary"
)

// A duplicate topic, producer or consumer is one sentence naming it,
// `tributary: topic "orders" already exists`, and errors.Is finds
// ErrExists in it.
func TestExistsErrorsNameTheDuplicate(t *testing.T) {
	c, err := tributary.NewCluster(10)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	orders, err := tributary.CreateTopic(c, "orders", 1, tributary.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tributary.NewProducer[string](c, "web", tributary.RoundRobin()); err != nil {
		t.Fatal(err)
	}
	if _, err := tributary.NewConsumer(orders, "g", "c1"); err != nil {
		t.Fatal(err)
	}
	_, errTopic := tributary.CreateTopic(c, "orders", 1, tributary.String())
	_, errProducer := tributary.NewProducer[string](c, "web", tributary.RoundRobin())
	// c1 on another group (on the same group it would be c1's next
	// incarnation, which supersedes it: member_liveness_test.go).
	_, errConsumer := tributary.NewConsumer(orders, "other", "c1")
	for _, tt := range []struct {
		err  error
		want string
	}{
		{errTopic, `tributary: topic "orders" already exists`},
		{errProducer, `tributary: producer "web" already exists`},
		{errConsumer, `tributary: consumer "c1" already exists`},
	} {
		if !errors.Is(tt.err, tributary.ErrExists) || tt.err.Error() != tt.want {
			t.Errorf("got %v (ErrExists: %v), want %q", tt.err, errors.Is(tt.err, tributary.ErrExists), tt.want)
		}
	}
}
