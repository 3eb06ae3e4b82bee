package tribprom_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: a scrape
// starts none, and every cluster, producer and consumer a test makes is
// closed by it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
