package slotstore

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// A lost slot cannot be produced on the shared test server without changing
// max_slot_wal_keep_size for every test, so its judgement is tested here.
func TestCheckRunStatusLost(t *testing.T) {
	st := Status{Slot: "s1", Plugin: "pgoutput", Database: "cdc", WALStatus: "lost",
		Publication: &PublicationStatus{Name: "p1", Tables: []string{"public.outbox"}, Publish: "insert"}}
	ex := statusExtra{SlotType: "logical", CurrentDB: "cdc", KeepSize: "1GB", PubFound: true, PubPublishes: true}
	err := checkRunStatus(st, ex, "p1")
	if !errors.Is(err, ErrSlotLost) {
		t.Fatalf("err = %v, want ErrSlotLost", err)
	}
	for _, want := range []string{"max_slot_wal_keep_size (1GB)", "cdc-relay slot drop --slot s1",
		"cdc-relay slot create --slot s1 --publication p1", "outbox table"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}

	for _, ws := range []string{"reserved", "extended", "unreserved"} {
		st.WALStatus = ws
		if err := checkRunStatus(st, ex, "p1"); err != nil {
			t.Errorf("wal_status %s: err = %v, want nil", ws, err)
		}
	}
}

func TestCheckRunStatusOtherDatabase(t *testing.T) {
	st := Status{Slot: "s1", Plugin: "pgoutput", Database: "other", WALStatus: "reserved"}
	ex := statusExtra{SlotType: "logical", CurrentDB: "cdc", PubFound: true, PubPublishes: true}
	if err := checkRunStatus(st, ex, "p1"); !errors.Is(err, ErrSlotWrongDatabase) {
		t.Fatalf("err = %v, want ErrSlotWrongDatabase", err)
	}
	st.Plugin = "test_decoding"
	if err := checkRunStatus(st, ex, "p1"); !errors.Is(err, ErrSlotWrongPlugin) || !strings.Contains(err.Error(), "test_decoding") {
		t.Fatalf("err = %v, want ErrSlotWrongPlugin naming test_decoding", err)
	}
}

// wal_level cannot be changed on the shared test server without a restart,
// so the message is tested here.
func TestWalLevelError(t *testing.T) {
	err := session{WalLevel: "replica"}.checkWalLevel()
	if !errors.Is(err, ErrWalLevel) {
		t.Fatalf("err = %v, want ErrWalLevel", err)
	}
	for _, want := range []string{"replica", "wal_level = logical", "restart"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if err := (session{WalLevel: "logical"}).checkWalLevel(); err != nil {
		t.Errorf("logical: err = %v", err)
	}
}

func TestCreateOptionsTables(t *testing.T) {
	got, err := CreateOptions{Slot: "s", Publication: "p"}.tables()
	if err != nil || !slices.Equal(got, []outbox.Table{{Schema: "public", Name: "outbox"}}) {
		t.Errorf("default tables = %v, %v; want [public.outbox]", got, err)
	}
	got, err = CreateOptions{Slot: "s", Publication: "p", Tables: []string{"outbox", "public.outbox", "app.Outbox"}}.tables()
	if err != nil || !slices.Equal(got, []outbox.Table{{Schema: "public", Name: "outbox"}, {Schema: "app", Name: "Outbox"}}) {
		t.Errorf("tables = %v, %v; want [public.outbox app.Outbox]", got, err)
	}
}

// PostgreSQL 17 and 18 say why a slot was invalidated (invalidation_reason): the error says what
// that reason means and what to change, instead of blaming max_slot_wal_keep_size for every
// lost slot (a slot lost to VACUUM on a standby's primary, to a lowered wal_level or to
// idle_replication_slot_timeout was sent to raise a setting that had nothing to do with it).
func TestCheckRunStatusLostSaysWhy(t *testing.T) {
	ex := statusExtra{SlotType: "logical", CurrentDB: "cdc", KeepSize: "1GB", PubFound: true, PubPublishes: true}
	for reason, want := range map[string][]string{
		"wal_removed":            {"max_slot_wal_keep_size (1GB)", "invalidation_reason wal_removed", "raise max_slot_wal_keep_size"},
		"rows_removed":           {"VACUUM", "invalidation_reason rows_removed", "hot_standby_feedback = on", "primary_slot_name"},
		"wal_level_insufficient": {"wal_level was lowered", "invalidation_reason wal_level_insufficient", "wal_level = logical"},
		"idle_timeout":           {"idle_replication_slot_timeout", "invalidation_reason idle_timeout", "keep a relay running"},
		"some_future_reason":     {"invalidation_reason some_future_reason"},
	} {
		st := Status{Slot: "s1", Plugin: "pgoutput", Database: "cdc", WALStatus: "lost", InvalidationReason: &reason,
			Publication: &PublicationStatus{Name: "p1", Tables: []string{"public.outbox"}, Publish: "insert"}}
		err := checkRunStatus(st, ex, "p1")
		if !errors.Is(err, ErrSlotLost) {
			t.Fatalf("%s: err = %v, want ErrSlotLost", reason, err)
		}
		for _, w := range append(want, "cdc-relay slot drop --slot s1", "outbox table") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", reason, err, w)
			}
		}
		if reason != "wal_removed" && strings.Contains(err.Error(), "max_slot_wal_keep_size") {
			t.Errorf("%s: error blames max_slot_wal_keep_size: %q", reason, err)
		}
	}
}
