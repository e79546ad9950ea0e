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
		{Options{Mode: ModeRun, OlderThan: time.Hour}, "Options.Slot is required"},
		{Options{Mode: "both", OlderThan: time.Hour}, `Options.Mode "both"`},
		{Options{Mode: ModePoll}, "Options.OlderThan must be positive"},
		{Options{Mode: ModePoll, OlderThan: time.Hour, Batch: -1}, "must not be negative"},
		{Options{Mode: ModePoll, OlderThan: time.Hour, Table: "a.b.c"}, `table "a.b.c": invalid name`},
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

// The report names a backend by pid, and a prepared transaction by gid with what ends it.
func TestHolderString(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := (&Holder{PID: 42, User: "app", App: "orders", State: "idle in transaction", Since: at}).String()
	if want := `pid 42 (user "app", application "orders", idle in transaction since 2026-01-02T03:04:05Z)`; b != want {
		t.Errorf("backend: %s\nwant %s", b, want)
	}
	p := (&Holder{Prepared: "tx-7", User: "app", Since: at}).String()
	if !strings.Contains(p, `prepared transaction "tx-7"`) || !strings.Contains(p, "COMMIT PREPARED or ROLLBACK PREPARED") {
		t.Errorf("prepared: %s", p)
	}
}
