package porcupine_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: every
// workload waits for its clients, and every check for porcupine's workers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
