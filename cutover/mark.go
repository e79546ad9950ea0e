package cutover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// MarkOptions configure MarkDelivered.
type MarkOptions struct {
	Slot         string   // the relay's slot; required
	Publications []string // the relay's publications; required
	Table        string   // the outbox table, "schema.table"; default "public.outbox"
	// Columns name the columns the relay reads (the peek decodes rows as it does) and the
	// poller's PublishedAt; zero fields take the defaults.
	Columns outbox.Columns
}

// MarkResult says what MarkDelivered did.
type MarkResult struct {
	Confirmed   pglogrepl.LSN // the slot's confirmed_flush_lsn: rows committed before it were marked
	MarkLSN     pglogrepl.LSN // lsn0: the peek's end
	Snapshot    string        // the marking transaction's snapshot (pg_current_snapshot)
	Undelivered int           // rows of the table in transactions after Confirmed up to MarkLSN: left pending
	Marked      int64         // rows marked published
}

// MarkDelivered sets published_at on every pending row the slot has confirmed, on conn, using
// peek for the slot. Both are normal connections; the relay must be stopped. See the package
// documentation.
func MarkDelivered(ctx context.Context, conn, peek *pgx.Conn, o MarkOptions) (MarkResult, error) {
	var res MarkResult
	if o.Slot == "" || len(o.Publications) == 0 {
		return res, errors.New("cutover: the slot and its publications are required")
	}
	if o.Table == "" {
		o.Table = outbox.DefaultTable
	}
	tbl, err := outbox.ParseTable(o.Table)
	if err != nil {
		return res, fmt.Errorf("cutover: %w", err)
	}
	table := tbl.String()
	dec, err := decoder.New(decoder.Config{Columns: o.Columns, Tables: []string{table}, Topic: "-"})
	if err != nil {
		return res, err
	}
	// A relay just stopped may hold the slot for a moment longer.
	for wait := 0; ; wait++ {
		err := checkSlot(ctx, conn, o.Slot, &res)
		if err == nil {
			break
		}
		if !errors.Is(err, slotstore.ErrSlotActive) || wait >= 50 {
			return res, err
		}
		if !retry.Sleep(ctx, 200*time.Millisecond) {
			return res, ctx.Err()
		}
	}

	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return res, fmt.Errorf("cutover: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&res.Snapshot); err != nil {
		return res, fmt.Errorf("cutover: take the snapshot: %w", err)
	}

	var lsn0 string
	if err := peek.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn0); err != nil {
		return res, fmt.Errorf("cutover: read the WAL position: %w", err)
	}
	if res.MarkLSN, err = pglogrepl.ParseLSN(lsn0); err != nil {
		return res, fmt.Errorf("cutover: WAL position %q: %w", lsn0, err)
	}
	rows, err := peek.Query(ctx, `SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes($1, $2::pg_lsn, NULL,
		'proto_version', '1', 'publication_names', $3)`, o.Slot, lsn0, strings.Join(o.Publications, ","))
	if err != nil {
		return res, fmt.Errorf("cutover: peek at slot %s: %w", o.Slot, err)
	}
	// Never nil: pgx sends a nil slice as NULL, and NOT (id = ANY(NULL)) is NULL, which would
	// mark nothing at all after a clean stop (the peek finds no undelivered row then).
	undelivered := []string{}
	for rows.Next() {
		var lsnText string
		var data []byte
		if err := rows.Scan(&lsnText, &data); err != nil {
			rows.Close()
			return res, fmt.Errorf("cutover: peek at slot %s: %w", o.Slot, err)
		}
		lsn, err := pglogrepl.ParseLSN(lsnText)
		if err != nil {
			rows.Close()
			return res, fmt.Errorf("cutover: peek at slot %s: LSN %q: %w", o.Slot, lsnText, err)
		}
		out, err := dec.Decode(lsn, data)
		if err != nil && !outbox.IsBadRow(err) {
			rows.Close()
			return res, fmt.Errorf("cutover: decode the slot's changes: %w", err)
		}
		if out.Kind == decoder.KindEvent && out.Event.Relation == table && out.Event.ID != "" {
			undelivered = append(undelivered, out.Event.ID)
		}
	}
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("cutover: peek at slot %s: %w (is `cdc-relay run` still streaming from it?)", o.Slot, err)
	}
	res.Undelivered = len(undelivered)

	cols := o.Columns.WithDefaults()
	id, pub := pgx.Identifier{cols.ID}.Sanitize(), pgx.Identifier{cols.PublishedAt}.Sanitize()
	tag, err := tx.Exec(ctx, `UPDATE `+tbl.Sanitize()+` SET `+pub+` = now() WHERE `+pub+` IS NULL AND NOT (`+id+`::text = ANY($1::text[]))`, undelivered)
	if err != nil {
		return res, fmt.Errorf("cutover: mark the delivered rows of %s: %w", o.Table, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("cutover: commit: %w", err)
	}
	res.Marked = tag.RowsAffected()
	return res, nil
}

// checkSlot reads the slot's confirmed position and refuses an active or lost slot.
func checkSlot(ctx context.Context, conn *pgx.Conn, slot string, res *MarkResult) error {
	var active bool
	var confirmed *string
	var walStatus string
	err := conn.QueryRow(ctx, `SELECT active, confirmed_flush_lsn::text, coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1`, slot).
		Scan(&active, &confirmed, &walStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("slot %q: %w", slot, slotstore.ErrSlotMissing)
	}
	if err != nil {
		return fmt.Errorf("cutover: read slot %q: %w", slot, err)
	}
	if walStatus == "lost" {
		return fmt.Errorf("cutover: slot %q: %w: which rows reached Kafka is unknown, so mark nothing and let the poller publish them all", slot, slotstore.ErrSlotLost)
	}
	if active {
		return fmt.Errorf("cutover: slot %q: %w: stop `cdc-relay run` first", slot, slotstore.ErrSlotActive)
	}
	if confirmed != nil {
		if res.Confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return fmt.Errorf("cutover: slot %q confirmed_flush_lsn %q: %w", slot, *confirmed, err)
		}
	}
	return nil
}
