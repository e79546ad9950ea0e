package faults

import (
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// writing starts reading the fixture's topic and committing into its table, a transaction of
// 1 to 5 rows every interval (testenv's Writer), until the run's Stop or Finish.
func writing(t *testing.T, e *testenv.RelayEnv, interval time.Duration) (*testenv.Writing, *testenv.Consumer) {
	cons := testenv.Consume(t, e.F.Topic)
	return testenv.NewWriter(e.F.Pool, e.F.Table, e.F.Topic).Start(t, cons, interval), cons
}
