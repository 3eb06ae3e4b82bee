package monitor

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: a
// Monitor's sampling, a consumer, a server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
