package tribotel_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: a
// consumer's Run, the SDK's providers.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
