package slotstore_test

import (
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/slotstore"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Timeline asks IDENTIFY_SYSTEM over a replication connection of its own and leaves the
// configuration it was given as it was (the caller's connections stay normal ones).
func TestTimelineOfTheServer(t *testing.T) {
	cfg := testenv.PGConfig(t)
	tl, err := slotstore.Timeline(t.Context(), &cfg.Config, 10*time.Second)
	if err != nil {
		t.Fatalf("Timeline: %v", err)
	}
	if tl < 1 {
		t.Errorf("Timeline = %d, want 1 or more", tl)
	}
	if _, ok := cfg.RuntimeParams["replication"]; ok {
		t.Error("Timeline set replication= in the caller's configuration")
	}
}
