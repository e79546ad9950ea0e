package slotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// FailoverRequirements says what a failover slot needs from the servers (PostgreSQL 17+), for
// the preflight of `slot create --failover` and of a relay whose slot has failover on.
const FailoverRequirements = `A failover slot survives a promotion only when the servers are set up for it:
  on each standby:  sync_replication_slots = on, hot_standby_feedback = on,
                    primary_slot_name = a physical slot on the primary,
                    primary_conninfo with dbname=... (the slot sync worker connects to a database);
  on the primary:   synchronized_standby_slots = that physical slot (every standby that may be promoted),
                    so that no transaction reaches the relay before the standby has it.`

// ErrFailoverUnsupported means a failover slot was asked of a server before PostgreSQL 17, or
// of a standby.
var ErrFailoverUnsupported = errors.New("failover slots are not supported here")

// PhysicalSlot is a physical replication slot as the primary shows it: normally a standby's.
type PhysicalSlot struct {
	Name       string
	Active     bool
	Feedback   bool // the standby has reported an xmin (hot_standby_feedback = on; it may not have reported yet)
	Listed     bool // named in synchronized_standby_slots
	RestartLSN pglogrepl.LSN
}

// FailoverReport is what the primary shows about keeping failover slots in step with its
// standbys. Warnings say what is missing, each with what to set.
type FailoverReport struct {
	ServerVersion            int
	SynchronizedStandbySlots []string
	PhysicalSlots            []PhysicalSlot
	Warnings                 []string
}

// CheckFailover reads, on a primary of PostgreSQL 17 or later, synchronized_standby_slots and
// the physical slots, and warns where a standby would not be ready to take over the relay's
// failover slot. It sees only what the primary shows: a standby's own settings are checked by
// CheckFailoverStandby.
func (s *Store) CheckFailover(ctx context.Context) (FailoverReport, error) {
	var rep FailoverReport
	v, err := ServerVersion(ctx, s.conn)
	if err != nil {
		return rep, err
	}
	rep.ServerVersion = v
	if v < 17 {
		return rep, fmt.Errorf("%w: PostgreSQL %d has no failover slots (17 and later do); "+
			"see docs/failover.md for the recovery procedure before 17", ErrFailoverUnsupported, v)
	}
	var sss string
	if err := s.conn.QueryRow(ctx, `SELECT current_setting('synchronized_standby_slots')`).Scan(&sss); err != nil {
		return rep, fmt.Errorf("read synchronized_standby_slots: %w", err)
	}
	listed := map[string]bool{}
	for _, n := range strings.Split(sss, ",") {
		if n = strings.TrimSpace(n); n != "" {
			rep.SynchronizedStandbySlots = append(rep.SynchronizedStandbySlots, n)
			listed[n] = true
		}
	}
	rows, err := s.conn.Query(ctx, `
SELECT slot_name::text, active, (xmin IS NOT NULL OR catalog_xmin IS NOT NULL), coalesce(restart_lsn::text, '0/0')
FROM pg_replication_slots WHERE slot_type = 'physical' ORDER BY slot_name`)
	if err != nil {
		return rep, fmt.Errorf("read physical slots: %w", err)
	}
	defer rows.Close()
	found := map[string]bool{}
	for rows.Next() {
		var p PhysicalSlot
		var lsn string
		if err := rows.Scan(&p.Name, &p.Active, &p.Feedback, &lsn); err != nil {
			return rep, fmt.Errorf("read physical slots: %w", err)
		}
		p.RestartLSN, _ = pglogrepl.ParseLSN(lsn)
		p.Listed = listed[p.Name]
		found[p.Name] = true
		rep.PhysicalSlots = append(rep.PhysicalSlots, p)
	}
	if err := rows.Err(); err != nil {
		return rep, fmt.Errorf("read physical slots: %w", err)
	}
	warn := func(format string, a ...any) { rep.Warnings = append(rep.Warnings, fmt.Sprintf(format, a...)) }
	if len(rep.SynchronizedStandbySlots) == 0 {
		warn("synchronized_standby_slots is empty: the relay may receive and publish a transaction before a standby has it; "+
			"if that standby is promoted, the transaction is gone and the new timeline reuses its LSNs for other ones, "+
			"so the slot there may stand past rows the relay never saw; set it on the primary to the standby's physical slot "+
			"(ALTER SYSTEM SET synchronized_standby_slots = '%s'; SELECT pg_reload_conf())", firstOr(rep.PhysicalSlots, "standby_slot"))
	}
	for _, n := range rep.SynchronizedStandbySlots {
		if !found[n] {
			warn("synchronized_standby_slots names %q, which is not a physical slot on this server: create it "+
				"(SELECT pg_create_physical_replication_slot('%s')) and make it the standby's primary_slot_name, or fix the setting", n, n)
		}
	}
	if len(rep.PhysicalSlots) == 0 {
		warn("no physical replication slot on this primary: a standby syncs failover slots only when it streams " +
			"through one (primary_slot_name); create one with pg_create_physical_replication_slot and name it on the standby")
	}
	for _, p := range rep.PhysicalSlots {
		switch {
		case !p.Listed && p.Active:
			warn("the standby streaming from physical slot %q is not covered by synchronized_standby_slots: a transaction the relay "+
				"publishes may be missing on it if it is promoted; add %q to synchronized_standby_slots", p.Name, p.Name)
		case p.Listed && !p.Active:
			warn("no standby streams from physical slot %q, which synchronized_standby_slots names: the relay waits "+
				"for it and publishes nothing until it streams again (or it is removed from the setting)", p.Name)
		}
	}
	return rep, nil
}

func firstOr(ps []PhysicalSlot, def string) string {
	if len(ps) > 0 {
		return ps[0].Name
	}
	return def
}

// CheckFailoverStandby checks a standby's side of slot sync (PostgreSQL 17+): it must be in
// recovery, with sync_replication_slots and hot_standby_feedback on, a primary_slot_name that
// the primary's synchronized_standby_slots lists (primaryListed; nil skips that check), and a
// dbname in primary_conninfo (readable only by a superuser or pg_read_all_settings; otherwise
// a warning says it was not checked). It returns the warnings.
func (s *Store) CheckFailoverStandby(ctx context.Context, primaryListed []string) ([]string, error) {
	var (
		inRecovery               bool
		syncSlots, feedback, psn string
	)
	err := s.conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('sync_replication_slots'),
       current_setting('hot_standby_feedback'), current_setting('primary_slot_name')`).Scan(&inRecovery, &syncSlots, &feedback, &psn)
	if err != nil {
		return nil, fmt.Errorf("standby: read settings: %w", err)
	}
	var warns []string
	if !inRecovery {
		return []string{"the standby URL leads to a server that is not in recovery (a primary): give a standby's URL"}, nil
	}
	if syncSlots != "on" {
		warns = append(warns, "standby: sync_replication_slots is off: failover slots are not copied to it; set it on (ALTER SYSTEM SET sync_replication_slots = on; SELECT pg_reload_conf())")
	}
	if feedback != "on" {
		warns = append(warns, "standby: hot_standby_feedback is off: slot sync needs it on (ALTER SYSTEM SET hot_standby_feedback = on; SELECT pg_reload_conf())")
	}
	switch {
	case psn == "":
		warns = append(warns, "standby: primary_slot_name is empty: slot sync needs the standby to stream through a physical slot on the primary")
	case primaryListed != nil && !contains(primaryListed, psn):
		warns = append(warns, fmt.Sprintf("standby: its physical slot %q is not in the primary's synchronized_standby_slots (%s): "+
			"a transaction the relay publishes may be missing on it if it is promoted", psn, strings.Join(primaryListed, ",")))
	}
	var conninfo string
	if err := s.conn.QueryRow(ctx, `SELECT current_setting('primary_conninfo')`).Scan(&conninfo); err != nil {
		warns = append(warns, "standby: primary_conninfo is not readable by this role, so its dbname was not checked (slot sync needs one)")
	} else if !strings.Contains(conninfo, "dbname=") {
		warns = append(warns, "standby: primary_conninfo has no dbname=...: the slot sync worker cannot connect; add dbname=<a database> to it")
	}
	return warns, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// PrepareFailoverSync makes a new failover slot syncable within seconds. A standby copies a
// new slot only once the slot's restart_lsn and catalog_xmin have passed the standby's own
// ("remote slot precedes local slot"), and they move only when the slot's client confirms
// past a running-transactions record. So it logs one (pg_log_standby_snapshot) and advances
// the slot to the end of that record, twice (the first pass makes the candidates, the second
// applies them), but only while the slot has nothing to publish up to there: it never moves
// the slot past a change the relay has not published.
//
// What "nothing to publish" covers is exactly what the advance passes: the target is the end of
// the logged record (a record boundary), the peek runs only once the server has flushed WAL up
// to it (decoding reads flushed WAL alone: a commit written but not flushed would be missed by
// the peek and passed by an advance to the WAL end), and the peek decodes with every publication
// of the database and the logical messages, a superset of what `run` may stream with
// publications and more (run takes several --publication names; create knows one). It reports
// whether it advanced; false means the relay's first confirmation will do it. ctx should carry
// a deadline: with synchronized_standby_slots set, decoding waits for the standby.
func (s *Store) PrepareFailoverSync(ctx context.Context, slot string, publications []string) (bool, error) {
	if err := ValidateName("slot", slot); err != nil {
		return false, err
	}
	for i := 0; i < 2; i++ {
		var snap string
		if err := s.conn.QueryRow(ctx, `SELECT pg_log_standby_snapshot()::text`).Scan(&snap); err != nil {
			return false, fmt.Errorf("slot %q: log a standby snapshot: %w", slot, err)
		}
		target, err := pglogrepl.ParseLSN(snap)
		if err != nil {
			return false, fmt.Errorf("slot %q: the standby snapshot's position %q: %w", slot, snap, err)
		}
		if err := s.waitFlushed(ctx, target); err != nil {
			return false, fmt.Errorf("slot %q: %w", slot, err)
		}
		var changes int64
		err = s.conn.QueryRow(ctx, `
SELECT count(*) FROM pg_logical_slot_peek_binary_changes($1, $2::pg_lsn, NULL,
  'proto_version', '1', 'messages', 'true', 'publication_names',
  (SELECT string_agg(quote_ident(n), ',') FROM (SELECT pubname::text FROM pg_publication UNION SELECT unnest($3::text[])) p(n)))`,
			slot, target.String(), publications).Scan(&changes)
		if err != nil {
			return false, fmt.Errorf("slot %q: peek at changes: %w", slot, err)
		}
		if changes > 0 {
			return false, nil
		}
		if _, err := s.conn.Exec(ctx, `SELECT pg_replication_slot_advance($1, $2::pg_lsn)`, slot, target.String()); err != nil {
			return false, fmt.Errorf("slot %q: advance: %w", slot, err)
		}
	}
	return true, nil
}

// waitFlushed waits until the server has flushed its WAL up to lsn (the WAL writer does within
// wal_writer_delay), polling every 10ms.
func (s *Store) waitFlushed(ctx context.Context, lsn pglogrepl.LSN) error {
	for {
		var flushed string
		if err := s.conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text`).Scan(&flushed); err != nil {
			return fmt.Errorf("read the flushed WAL position: %w", err)
		}
		if f, err := pglogrepl.ParseLSN(flushed); err == nil && f >= lsn {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("WAL up to %s not flushed: %w", lsn, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WaitSynced waits on a standby until slot is synced and persisted there (synced, not
// temporary: a promotion keeps it), polling every 100ms, and returns how long that took.
// nudge, when not nil, is called every second while it waits.
func WaitSynced(ctx context.Context, standby *pgx.Conn, slot string, nudge func(context.Context)) (time.Duration, error) {
	start := time.Now()
	st := New(standby)
	for i := 0; ; i++ {
		if nudge != nil && i%10 == 0 {
			nudge(ctx)
		}
		s, err := st.Status(ctx, slot, "")
		if err == nil && s.Synced != nil && *s.Synced && !s.Temporary {
			return time.Since(start), nil
		}
		if err != nil && !errors.Is(err, ErrSlotMissing) {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("slot %q is not synced to the standby after %s: %w", slot, time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
