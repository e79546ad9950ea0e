package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// The promotion's advice is a configuration error (exit 2) that names run's --table as given;
// without one, and without the server to read the publication on, it names no table rather
// than a default, and says where the table is to be read.
func TestPromotedSlotAdviceNeverNamesADefaultTable(t *testing.T) {
	err := promotedSlotAdvice(context.Background(), nil, "s", []string{"p"}, []string{"app.outbox"}, 2)
	var u *usageError
	if !errors.As(err, &u) || !errors.Is(err, slotstore.ErrSlotMissing) {
		t.Fatalf("err = %v, want a usage error wrapping ErrSlotMissing", err)
	}
	if want := "cdc-relay cutover --slot s --publication p --table app.outbox`"; !strings.Contains(err.Error(), want) {
		t.Errorf("with --table: %v\nwant %q", err, want)
	}
	err = promotedSlotAdvice(context.Background(), nil, "s", []string{"p"}, nil, 2)
	for _, w := range []string{"--table TABLE (the outbox table publication p publishes", failoverSection} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("without --table or server: %v\nwant %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "public.outbox") {
		t.Errorf("the advice names a default table: %v", err)
	}
}
