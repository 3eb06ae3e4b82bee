package engine_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine running: no
// broker call may leave work behind, and every concurrency test must wait
// for its goroutines.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
