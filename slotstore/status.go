package slotstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Status is a replication slot as pg_replication_slots shows it, with the
// WAL it holds back, and optionally its publication.
//
// json.Marshal writes LSNs as "X/Y" text, safe_wal_size as null when
// unlimited, and publication as null when not read or not found.
type Status struct {
	Slot              string             `json:"slot"`
	Plugin            string             `json:"plugin"`   // "" for a physical slot
	Database          string             `json:"database"` // "" for a physical slot
	Active            bool               `json:"active"`
	ActivePID         int32              `json:"active_pid"` // 0 when not active
	ConfirmedFlushLSN pglogrepl.LSN      `json:"confirmed_flush_lsn"`
	RestartLSN        pglogrepl.LSN      `json:"restart_lsn"`        // 0 when lost
	CurrentWALLSN     pglogrepl.LSN      `json:"current_wal_lsn"`    // pg_current_wal_lsn()
	LagBytes          int64              `json:"lag_bytes"`          // current WAL - confirmed_flush_lsn
	RetainedWALBytes  int64              `json:"retained_wal_bytes"` // current WAL - restart_lsn; 0 when lost
	WALStatus         string             `json:"wal_status"`         // reserved|extended|unreserved|lost
	SafeWALSize       *int64             `json:"safe_wal_size"`      // nil when max_slot_wal_keep_size = -1 (unlimited), or lost
	Publication       *PublicationStatus `json:"publication"`        // nil unless asked for and found

	// What the server version knows. ServerVersion is the major (15, 17, ...); Standby is
	// pg_is_in_recovery(), and then CurrentWALLSN is the replay position.
	ServerVersion int  `json:"server_version"`
	Standby       bool `json:"standby"`
	Temporary     bool `json:"temporary"` // on a standby: a synced slot not yet persisted (not usable after a promotion)
	// 17+ only, nil below (the server does not know them): why the slot was invalidated ("" when
	// it is not), since when it is inactive (nil while active), whether it is a failover slot and
	// whether it was synced from a primary (meaningful on a standby).
	InvalidationReason *string    `json:"invalidation_reason"`
	InactiveSince      *time.Time `json:"inactive_since"`
	Failover           *bool      `json:"failover"`
	Synced             *bool      `json:"synced"`
}

// PublicationStatus is a publication as pg_publication shows it.
type PublicationStatus struct {
	Name      string   `json:"name"`
	AllTables bool     `json:"all_tables"` // FOR ALL TABLES
	Tables    []string `json:"tables"`     // "schema.table", sorted; never nil
	Publish   string   `json:"publish"`    // the operations published, e.g. "insert" or "insert, update"
}

// statusJSON is Status with its LSNs as text.
type statusJSON struct {
	Slot              string             `json:"slot"`
	Plugin            string             `json:"plugin"`
	Database          string             `json:"database"`
	Active            bool               `json:"active"`
	ActivePID         int32              `json:"active_pid"`
	ConfirmedFlushLSN string             `json:"confirmed_flush_lsn"`
	RestartLSN        string             `json:"restart_lsn"`
	CurrentWALLSN     string             `json:"current_wal_lsn"`
	LagBytes          int64              `json:"lag_bytes"`
	RetainedWALBytes  int64              `json:"retained_wal_bytes"`
	WALStatus         string             `json:"wal_status"`
	SafeWALSize       *int64             `json:"safe_wal_size"`
	Publication       *PublicationStatus `json:"publication"`

	ServerVersion      int        `json:"server_version"`
	Standby            bool       `json:"standby"`
	Temporary          bool       `json:"temporary"`
	InvalidationReason *string    `json:"invalidation_reason"`
	InactiveSince      *time.Time `json:"inactive_since"`
	Failover           *bool      `json:"failover"`
	Synced             *bool      `json:"synced"`
}

// RetainsMoreThan reports whether the slot retains more WAL than warn bytes (never when warn
// is 0 or less: the check is disabled).
func (st Status) RetainsMoreThan(warn int64) bool { return warn > 0 && st.RetainedWALBytes > warn }

// MarshalJSON writes the status with snake_case keys and LSNs as "X/Y" text.
func (st Status) MarshalJSON() ([]byte, error) {
	return json.Marshal(statusJSON{
		Slot:              st.Slot,
		Plugin:            st.Plugin,
		Database:          st.Database,
		Active:            st.Active,
		ActivePID:         st.ActivePID,
		ConfirmedFlushLSN: st.ConfirmedFlushLSN.String(),
		RestartLSN:        st.RestartLSN.String(),
		CurrentWALLSN:     st.CurrentWALLSN.String(),
		LagBytes:          st.LagBytes,
		RetainedWALBytes:  st.RetainedWALBytes,
		WALStatus:         st.WALStatus,
		SafeWALSize:       st.SafeWALSize,
		Publication:       st.Publication,

		ServerVersion:      st.ServerVersion,
		Standby:            st.Standby,
		Temporary:          st.Temporary,
		InvalidationReason: st.InvalidationReason,
		InactiveSince:      st.InactiveSince,
		Failover:           st.Failover,
		Synced:             st.Synced,
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (st *Status) UnmarshalJSON(b []byte) error {
	var v statusJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	out := Status{
		Slot:             v.Slot,
		Plugin:           v.Plugin,
		Database:         v.Database,
		Active:           v.Active,
		ActivePID:        v.ActivePID,
		LagBytes:         v.LagBytes,
		RetainedWALBytes: v.RetainedWALBytes,
		WALStatus:        v.WALStatus,
		SafeWALSize:      v.SafeWALSize,
		Publication:      v.Publication,

		ServerVersion:      v.ServerVersion,
		Standby:            v.Standby,
		Temporary:          v.Temporary,
		InvalidationReason: v.InvalidationReason,
		InactiveSince:      v.InactiveSince,
		Failover:           v.Failover,
		Synced:             v.Synced,
	}
	for _, f := range []struct {
		text string
		dst  *pglogrepl.LSN
	}{{v.ConfirmedFlushLSN, &out.ConfirmedFlushLSN}, {v.RestartLSN, &out.RestartLSN}, {v.CurrentWALLSN, &out.CurrentWALLSN}} {
		if f.text == "" {
			continue
		}
		lsn, err := pglogrepl.ParseLSN(f.text)
		if err != nil {
			return fmt.Errorf("slot status: %w", err)
		}
		*f.dst = lsn
	}
	*st = out
	return nil
}

// Status reads the slot from pg_replication_slots and, when publication is
// not "", the publication (Status.Publication stays nil if it does not
// exist). A missing slot is ErrSlotMissing.
func (s *Store) Status(ctx context.Context, slot, publication string) (Status, error) {
	st, _, err := s.status(ctx, slot, publication)
	return st, err
}

// statusExtra is what status reads besides Status, for CheckRun.
type statusExtra struct {
	SlotType       string
	CurrentDB      string
	KeepSize       string // max_slot_wal_keep_size as the server shows it
	PubFound       bool
	PubPublishes   bool     // the publication publishes inserts
	PubViaRoot     bool     // publish_via_partition_root
	PubPartitioned []string // the partitioned tables named in it
}

func (s *Store) status(ctx context.Context, slot, publication string) (Status, statusExtra, error) {
	var ex statusExtra
	if err := ValidateName("slot", slot); err != nil {
		return Status{}, ex, err
	}
	if publication != "" {
		if err := ValidateName("publication", publication); err != nil {
			return Status{}, ex, err
		}
	}
	version, err := ServerVersion(ctx, s.conn)
	if err != nil {
		return Status{}, ex, err
	}
	// Columns the server version knows; older servers answer NULL for them.
	newer := "NULL::text, NULL::timestamptz, NULL::bool, NULL::bool"
	if version >= 17 {
		newer = "coalesce(s.invalidation_reason::text, ''), s.inactive_since, s.failover, s.synced"
	}
	var (
		st                      Status
		confirmed, restart, cur *string
	)
	st.ServerVersion = version
	// A standby cannot tell its current WAL insert position: it has its replay position.
	err = s.conn.QueryRow(ctx, `
SELECT s.slot_name::text, s.slot_type, coalesce(s.plugin::text, ''), coalesce(s.database::text, ''),
       s.active, coalesce(s.active_pid, 0), s.temporary,
       s.confirmed_flush_lsn::text, s.restart_lsn::text, w.lsn::text,
       coalesce(pg_wal_lsn_diff(w.lsn, s.confirmed_flush_lsn), 0)::bigint,
       coalesce(pg_wal_lsn_diff(w.lsn, s.restart_lsn), 0)::bigint,
       coalesce(s.wal_status, ''), s.safe_wal_size,
       current_database()::text, current_setting('max_slot_wal_keep_size'), w.standby,
       `+newer+`
FROM pg_replication_slots s,
     (SELECT pg_is_in_recovery() AS standby,
             CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn) w
WHERE s.slot_name = $1`, slot).Scan(
		&st.Slot, &ex.SlotType, &st.Plugin, &st.Database,
		&st.Active, &st.ActivePID, &st.Temporary,
		&confirmed, &restart, &cur,
		&st.LagBytes, &st.RetainedWALBytes,
		&st.WALStatus, &st.SafeWALSize,
		&ex.CurrentDB, &ex.KeepSize, &st.Standby,
		&st.InvalidationReason, &st.InactiveSince, &st.Failover, &st.Synced)
	if errors.Is(err, pgx.ErrNoRows) {
		return Status{}, ex, notFound(slot, publication)
	}
	if err != nil {
		return Status{}, ex, fmt.Errorf("slot %q: read pg_replication_slots: %w", slot, err)
	}
	for _, f := range []struct {
		text *string
		dst  *pglogrepl.LSN
	}{{confirmed, &st.ConfirmedFlushLSN}, {restart, &st.RestartLSN}, {cur, &st.CurrentWALLSN}} {
		if *f.dst, err = scanLSN(f.text); err != nil {
			return Status{}, ex, fmt.Errorf("slot %q: %w", slot, err)
		}
	}

	if publication != "" {
		row, found, err := s.lookupPublication(ctx, publication)
		if err != nil {
			return st, ex, err
		}
		if found {
			ex.PubFound, ex.PubPublishes = true, row.Insert
			ex.PubViaRoot, ex.PubPartitioned = row.ViaRoot, row.Partitioned
			st.Publication = &PublicationStatus{
				Name:      publication,
				AllTables: row.AllTables,
				Tables:    row.Tables,
				Publish:   row.Publish,
			}
		}
	}
	return st, ex, nil
}

// notFound is ErrSlotMissing with the command that creates the slot.
func notFound(slot, publication string) error {
	if publication == "" {
		publication = "NAME"
	}
	return fmt.Errorf("slot %q: %w: create it with `cdc-relay slot create --slot %s --publication %s`",
		slot, ErrSlotMissing, slot, publication)
}

// ServerVersion returns the server's major version (server_version_num / 10000, e.g. 17).
func ServerVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var num int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&num); err != nil {
		return 0, fmt.Errorf("read server_version_num: %w", err)
	}
	return num / 10000, nil
}
