package prune

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string // "" for valid
	}{
		{Options{Mode: ModeRun, Slot: "s", OlderThan: time.Hour}, ""},
		{Options{Mode: ModePoll, OlderThan: time.Hour}, ""},
		{Options{Mode: ModeRun, OlderThan: time.Hour}, "--slot is required"},
		{Options{Mode: "both", OlderThan: time.Hour}, `mode "both"`},
		{Options{Mode: ModePoll}, "--older-than must be positive"},
		{Options{Mode: ModePoll, OlderThan: time.Hour, Batch: -1}, "must not be negative"},
	} {
		err := tc.o.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.o, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: err %v, want %q", tc.o, err, tc.want)
		}
	}
}

func TestQuoteTable(t *testing.T) {
	if got := quoteTable("outbox"); got != `"public"."outbox"` {
		t.Errorf("outbox: %s", got)
	}
	if got := quoteTable(`app.Out"box`); got != `"app"."Out""box"` {
		t.Errorf("app.Out\"box: %s", got)
	}
}
