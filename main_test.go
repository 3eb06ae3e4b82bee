package tributary_test

// TestMain: every test and example of the package runs under goleak.

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when any test or example leaves a goroutine
// running: consumers, blocked polls, waiting sends and Run's workers must
// all stop with their test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
