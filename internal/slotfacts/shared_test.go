package slotfacts_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// replication and slotstore re-export the same sentinels: a caller that holds the stream's
// error and asks slotstore's sentinel (cmd's exit codes, cutover) gets the right answer.
// Each package once defined its own ErrSlotMissing, with the same text and another value.
func TestReplicationAndSlotstoreShareTheSlotSentinels(t *testing.T) {
	for _, tc := range []struct {
		name         string
		repl, store  error
		slotfactsErr error
	}{
		{"missing", replication.ErrSlotMissing, slotstore.ErrSlotMissing, slotfacts.ErrSlotMissing},
		{"active", replication.ErrSlotActive, slotstore.ErrSlotActive, slotfacts.ErrSlotActive},
		{"lost", replication.ErrSlotLost, slotstore.ErrSlotLost, slotfacts.ErrSlotLost},
		{"wrong plugin", replication.ErrWrongPlugin, slotstore.ErrSlotWrongPlugin, slotfacts.ErrSlotWrongPlugin},
	} {
		wrapped := fmt.Errorf("stream: %w", tc.repl)
		if !errors.Is(wrapped, tc.store) || !errors.Is(fmt.Errorf("store: %w", tc.store), tc.repl) || tc.repl != tc.slotfactsErr {
			t.Errorf("%s: replication's and slotstore's sentinels are different values", tc.name)
		}
	}
	if !errors.Is(slotstore.ValidateName("publication", "$p"), slotfacts.ErrBadName) {
		t.Error("slotstore's name errors do not wrap slotfacts.ErrBadName")
	}
}

// The stream and `slot create` take the same publication names: a $ after the first
// character is PostgreSQL's (an unquoted identifier may hold it); slotstore refused it.
func TestReplicationAndSlotstoreShareTheNameRules(t *testing.T) {
	for _, name := range []string{"pub$1", "cdc_pub", "$pub", "Pub", "1pub"} {
		replErr := replication.Config{Slot: "s", Publications: []string{name}}.Validate()
		replOK := replErr == nil || !errors.Is(replErr, slotfacts.ErrBadName)
		storeOK := slotstore.ValidateName("publication", name) == nil
		if replOK != storeOK {
			t.Errorf("publication %q: replication accepts it %v, slotstore %v (replication: %v)", name, replOK, storeOK, replErr)
		}
	}
}
