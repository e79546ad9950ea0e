package slotstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

func TestStatusFields(t *testing.T) {
	t.Parallel()
	e, ctx, store, res := created(t)

	before := status(t, ctx, store, e.Slot, e.Pub)
	var curDB, keepSize string
	if err := e.admin.QueryRow(ctx, `SELECT current_database(), current_setting('max_slot_wal_keep_size')`).Scan(&curDB, &keepSize); err != nil {
		t.Fatal(err)
	}
	if before.Slot != e.Slot || before.Plugin != "pgoutput" || before.Database != curDB {
		t.Errorf("slot=%q plugin=%q database=%q, want %q pgoutput %q", before.Slot, before.Plugin, before.Database, e.Slot, curDB)
	}
	if before.Active || before.ActivePID != 0 {
		t.Errorf("active=%v pid=%d, want an idle slot", before.Active, before.ActivePID)
	}
	if before.ConfirmedFlushLSN != res.ConsistentPoint {
		t.Errorf("confirmed_flush_lsn = %s, want the consistent point %s", before.ConfirmedFlushLSN, res.ConsistentPoint)
	}
	if before.RestartLSN == 0 || before.RestartLSN > before.ConfirmedFlushLSN {
		t.Errorf("restart_lsn = %s, want non-zero and <= confirmed_flush_lsn %s", before.RestartLSN, before.ConfirmedFlushLSN)
	}
	if before.CurrentWALLSN < before.ConfirmedFlushLSN {
		t.Errorf("current WAL %s is behind confirmed_flush_lsn %s", before.CurrentWALLSN, before.ConfirmedFlushLSN)
	}
	if want := int64(before.CurrentWALLSN - before.ConfirmedFlushLSN); before.LagBytes != want {
		t.Errorf("lag = %d, want current - confirmed = %d", before.LagBytes, want)
	}
	if want := int64(before.CurrentWALLSN - before.RestartLSN); before.RetainedWALBytes != want {
		t.Errorf("retained = %d, want current - restart = %d", before.RetainedWALBytes, want)
	}
	// What the version knows: the suite's server is 15 by default; the version matrix runs 14 to 18.
	var version int
	if err := e.admin.QueryRow(ctx, `SELECT current_setting('server_version_num')::int / 10000`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if before.ServerVersion != version || before.Standby || before.Temporary {
		t.Errorf("server_version=%d standby=%v temporary=%v, want %d, a primary's persistent slot", before.ServerVersion, before.Standby, before.Temporary, version)
	}
	if version < 17 {
		if before.Failover != nil || before.Synced != nil || before.InvalidationReason != nil || before.InactiveSince != nil {
			t.Errorf("PostgreSQL %d: failover=%v synced=%v invalidation_reason=%v inactive_since=%v, want all nil (unknown before 17)",
				version, before.Failover, before.Synced, before.InvalidationReason, before.InactiveSince)
		}
	} else if before.Failover == nil || *before.Failover || before.Synced == nil || *before.Synced ||
		before.InvalidationReason == nil || *before.InvalidationReason != "" || before.InactiveSince == nil {
		t.Errorf("PostgreSQL %d: failover=%v synced=%v invalidation_reason=%v inactive_since=%v, want false, false, \"\", a time",
			version, before.Failover, before.Synced, before.InvalidationReason, before.InactiveSince)
	}
	if before.WALStatus != "reserved" {
		t.Errorf("wal_status = %q, want reserved for a fresh slot", before.WALStatus)
	}
	if keepSize == "-1" {
		if before.SafeWALSize != nil {
			t.Errorf("safe_wal_size = %d with max_slot_wal_keep_size = -1, want nil (unlimited)", *before.SafeWALSize)
		}
	} else if before.SafeWALSize == nil || *before.SafeWALSize <= 0 {
		t.Errorf("safe_wal_size = %v with max_slot_wal_keep_size = %s, want a positive size", before.SafeWALSize, keepSize)
	}
	wantPub := &slotstore.PublicationStatus{Name: e.Pub, Tables: []string{"public." + e.Table}, Publish: "insert"}
	if p := before.Publication; p == nil || p.Name != wantPub.Name || p.AllTables || p.Publish != "insert" ||
		!slices.Equal(p.Tables, wantPub.Tables) {
		t.Errorf("publication = %+v, want %+v", p, wantPub)
	}

	// Write WAL the slot has not consumed: the lag grows, the slot does not move.
	e.exec(t, fmt.Sprintf(`INSERT INTO %s (aggregate_id, topic, payload)
SELECT 'agg-' || i, 'orders', jsonb_build_object('i', i) FROM generate_series(1, 200) i`,
		pgx.Identifier{"public", e.Table}.Sanitize()))
	after, err := store.Status(ctx, e.Slot, "")
	if err != nil {
		t.Fatalf("Status after writes: %v", err)
	}
	if after.CurrentWALLSN <= before.CurrentWALLSN || after.LagBytes <= before.LagBytes ||
		after.RetainedWALBytes <= before.RetainedWALBytes {
		t.Errorf("after writing WAL: current %s -> %s, lag %d -> %d, retained %d -> %d; want all to grow",
			before.CurrentWALLSN, after.CurrentWALLSN, before.LagBytes, after.LagBytes,
			before.RetainedWALBytes, after.RetainedWALBytes)
	}
	if after.ConfirmedFlushLSN != before.ConfirmedFlushLSN {
		t.Errorf("confirmed_flush_lsn moved from %s to %s without a consumer", before.ConfirmedFlushLSN, after.ConfirmedFlushLSN)
	}
	if after.Publication != nil {
		t.Errorf("publication = %+v, want nil when not asked for", after.Publication)
	}

	// A publication name that does not exist leaves Publication nil: Status reports, CheckRun judges.
	other, err := store.Status(ctx, e.Slot, e.base+"_nopub")
	if err != nil || other.Publication != nil {
		t.Errorf("Status with a missing publication = %+v, %v; want no error and a nil Publication", other.Publication, err)
	}
}

func TestStatusMissingSlot(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, err := slotstore.New(connect(t)).Status(testCtx(t), e.Slot, e.Pub)
	if !errors.Is(err, slotstore.ErrSlotMissing) {
		t.Fatalf("Status of a missing slot: err = %v, want ErrSlotMissing", err)
	}
	for _, want := range []string{`"` + e.Slot + `"`, "cdc-relay slot create --slot " + e.Slot + " --publication " + e.Pub} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestStatusJSONFromServer(t *testing.T) {
	t.Parallel()
	e, ctx, store, _ := created(t)
	st := status(t, ctx, store, e.Slot, e.Pub)
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if m["confirmed_flush_lsn"] != st.ConfirmedFlushLSN.String() || m["restart_lsn"] != st.RestartLSN.String() ||
		m["current_wal_lsn"] != st.CurrentWALLSN.String() {
		t.Errorf("JSON LSNs = %v %v %v, want X/Y text", m["confirmed_flush_lsn"], m["restart_lsn"], m["current_wal_lsn"])
	}
	if _, err := pglogrepl.ParseLSN(m["confirmed_flush_lsn"].(string)); err != nil {
		t.Errorf("confirmed_flush_lsn is not X/Y: %v", err)
	}
	if st.SafeWALSize == nil && m["safe_wal_size"] != nil {
		t.Errorf("safe_wal_size = %v, want null when unlimited", m["safe_wal_size"])
	}
	pub, _ := m["publication"].(map[string]any)
	if pub == nil || pub["publish"] != "insert" || pub["name"] != e.Pub {
		t.Errorf("publication = %v, want name %q publish insert", m["publication"], e.Pub)
	}
	var back slotstore.Status
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal into Status: %v", err)
	}
	if back.ConfirmedFlushLSN != st.ConfirmedFlushLSN || back.WALStatus != st.WALStatus || back.Slot != st.Slot {
		t.Errorf("round trip = %+v, want %+v", back, st)
	}
}

func TestStatusJSONFormat(t *testing.T) {
	t.Parallel()
	safe := int64(1 << 30)
	for _, tc := range []struct {
		name string
		st   slotstore.Status
		want string
	}{{
		name: "unlimited",
		st: slotstore.Status{
			Slot: "s", Plugin: "pgoutput", Database: "cdc",
			ConfirmedFlushLSN: pglogrepl.LSN(0x1_0000_00A8), RestartLSN: pglogrepl.LSN(0x16B3748),
			CurrentWALLSN: pglogrepl.LSN(0x1_0000_0100), LagBytes: 88, RetainedWALBytes: 4271216312,
			WALStatus: "reserved", ServerVersion: 15,
		},
		want: `{"slot":"s","plugin":"pgoutput","database":"cdc","active":false,"active_pid":0,` +
			`"confirmed_flush_lsn":"1/A8","restart_lsn":"0/16B3748","current_wal_lsn":"1/100",` +
			`"lag_bytes":88,"retained_wal_bytes":4271216312,"wal_status":"reserved","safe_wal_size":null,"publication":null` +
			`,"server_version":15,"standby":false,"temporary":false,"invalidation_reason":null,"inactive_since":null,"failover":null,"synced":null}`,
	}, {
		name: "limited and active with publication",
		st: slotstore.Status{
			Slot: "s", Plugin: "pgoutput", Database: "cdc", Active: true, ActivePID: 4242,
			WALStatus: "extended", SafeWALSize: &safe, ServerVersion: 15,
			Publication: &slotstore.PublicationStatus{Name: "p", Tables: []string{"public.outbox"}, Publish: "insert"},
		},
		want: `{"slot":"s","plugin":"pgoutput","database":"cdc","active":true,"active_pid":4242,` +
			`"confirmed_flush_lsn":"0/0","restart_lsn":"0/0","current_wal_lsn":"0/0",` +
			`"lag_bytes":0,"retained_wal_bytes":0,"wal_status":"extended","safe_wal_size":1073741824,` +
			`"publication":{"name":"p","all_tables":false,"tables":["public.outbox"],"publish":"insert"}` +
			`,"server_version":15,"standby":false,"temporary":false,"invalidation_reason":null,"inactive_since":null,"failover":null,"synced":null}`,
	}, {
		// PostgreSQL 17+: a failover slot's copy on a standby, synced, inactive, valid.
		name: "17 synced copy on a standby",
		st: slotstore.Status{
			Slot: "s", Plugin: "pgoutput", Database: "cdc", WALStatus: "reserved", ServerVersion: 17, Standby: true,
			InvalidationReason: ptr(""), InactiveSince: ptr(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)),
			Failover: ptr(true), Synced: ptr(true),
		},
		want: `{"slot":"s","plugin":"pgoutput","database":"cdc","active":false,"active_pid":0,` +
			`"confirmed_flush_lsn":"0/0","restart_lsn":"0/0","current_wal_lsn":"0/0",` +
			`"lag_bytes":0,"retained_wal_bytes":0,"wal_status":"reserved","safe_wal_size":null,"publication":null,` +
			`"server_version":17,"standby":true,"temporary":false,"invalidation_reason":"","inactive_since":"2025-01-02T03:04:05Z",` +
			`"failover":true,"synced":true}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []any{tc.st, &tc.st} { // value and pointer marshal alike
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != tc.want {
					t.Errorf("json.Marshal(%T) =\n%s\nwant\n%s", v, b, tc.want)
				}
				var back slotstore.Status
				if err := json.Unmarshal(b, &back); err != nil {
					t.Fatal(err)
				}
				if again, _ := json.Marshal(back); string(again) != tc.want {
					t.Errorf("round trip =\n%s\nwant\n%s", again, tc.want)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
