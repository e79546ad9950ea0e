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
