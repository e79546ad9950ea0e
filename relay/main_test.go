package relay

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: everything this package
// starts must be stopped and waited for by whoever started it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
