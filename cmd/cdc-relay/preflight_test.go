package main

import (
	"errors"
	"strings"
	"testing"
)

// A --table the publication does not stream is a configuration error (exit 2) that names the
// table and how to add it; tables without a schema mean public; no --table checks nothing.
func TestCheckTables(t *testing.T) {
	published := []string{"public.outbox", "billing.outbox"}
	for _, ok := range [][]string{nil, {"outbox"}, {"public.outbox"}, {"billing.outbox", "outbox"}} {
		if err := checkTables(ok, published, []string{"p"}); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	err := checkTables([]string{"outbox", "other"}, published, []string{"p"})
	var ue *usageError
	if !errors.As(err, &ue) {
		t.Fatalf("want a usage error, got %v", err)
	}
	for _, want := range []string{"--table public.other is not in publication p", "ALTER PUBLICATION p ADD TABLE public.other"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}
