package kafka

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// connection's goroutines end with Server.Close, every client's with its
// Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
