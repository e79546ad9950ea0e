package kafkatxn

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: the clients a test makes
// must be closed by the test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
