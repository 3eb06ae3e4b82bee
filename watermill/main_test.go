package tributarywm_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests. The suite's
// own multiplied subscriber (tests.TestConcurrentSubscribe, TestPublishSubscribeInOrder)
// forwards each subscription's messages to one channel in a goroutine that
// blocks for ever once its reader has stopped reading; those are
// Watermill's, not this package's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/ThreeDotsLabs/watermill/internal/subscriber.(*multiplier).Subscribe.func2"),
		goleak.IgnoreAnyFunction("github.com/ThreeDotsLabs/watermill/internal/subscriber.(*multiplier).Subscribe.func3"),
	)
}
