package slotstore_test

import (
	"slices"
	"testing"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// A publication that publishes more than inserts names what the relay ignores, and the fix.
func TestPublicationIgnoredOperations(t *testing.T) {
	for publish, want := range map[string][]string{
		"insert":                           nil,
		"insert, update":                   {"update"},
		"insert, update, delete, truncate": {"update", "delete", "truncate"},
	} {
		p := slotstore.PublicationStatus{Name: "cdc_pub", Publish: publish}
		if got := p.Ignored(); !slices.Equal(got, want) {
			t.Errorf("publish %q: Ignored() = %q, want %q", publish, got, want)
		}
	}
	p := slotstore.PublicationStatus{Name: "cdc_pub"}
	if got, want := p.InsertOnlySQL(), `ALTER PUBLICATION "cdc_pub" SET (publish = 'insert')`; got != want {
		t.Errorf("InsertOnlySQL() = %q, want %q", got, want)
	}
}
