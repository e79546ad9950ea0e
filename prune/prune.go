package prune

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// Mode says which publisher marks rows published.
type Mode string

// The modes, named by the publisher command and what it marks rows published with.
const (
	ModeRun  Mode = "run"  // the replication slot's confirmed position
	ModePoll Mode = "poll" // the published_at column
)

var (
	// ErrNotConfirmed means the slot did not confirm the mark within Options.Wait: the relay is
	// stopped, behind, or a standby is not streaming. Nothing was deleted.
	ErrNotConfirmed = errors.New("prune: the slot has not confirmed the current WAL position")
)

// Options say what to prune. Zero fields take the defaults stated.
type Options struct {
	Mode      Mode          // required
	Table     string        // "schema.table" or "table"; default "public.outbox"
	Slot      string        // ModeRun: the slot whose relay publishes the table. Required there.
	OlderThan time.Duration // only rows with created_at older than this; required, > 0
	Batch     int           // rows per DELETE; default 1000
	Wait      time.Duration // ModeRun: how long to wait for the slot to confirm the mark; default 2m

	// Columns: ID (unique, ordered: batches walk it), CreatedAt and, in ModePoll, PublishedAt
	// are read; zero fields take the defaults.
	Columns outbox.Columns

	// Partitions, when set, prunes a partitioned table by whole partitions instead of rows:
	// each partition (but the default one) that holds rows, all created before OlderThan and
	// published, is dropped or detached; a partition with one unpublished or newer row is
	// kept whole. Batch is not used then.
	Partitions PartitionAction

	// Progress, when set, is called after each batch with the rows deleted so far (with
	// Partitions: after each partition, with the partitions removed so far).
	Progress func(deleted int64)
	// PollInterval is how often the slot is read while waiting; default 200ms.
	PollInterval time.Duration
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	var errs []error
	switch o.Mode {
	case ModeRun:
		if o.Slot == "" {
			errs = append(errs, errors.New("prune: Options.Slot is required with Options.Mode run (the slot whose relay publishes the table)"))
		}
	case ModePoll:
	default:
		errs = append(errs, fmt.Errorf("prune: Options.Mode %q: use run or poll", o.Mode))
	}
	if o.Table != "" {
		if _, err := outbox.ParseTable(o.Table); err != nil {
			errs = append(errs, fmt.Errorf("prune: %w", err))
		}
	}
	if o.OlderThan <= 0 {
		errs = append(errs, errors.New("prune: Options.OlderThan must be positive (e.g. 168h)"))
	}
	switch o.Partitions {
	case "", PartitionsDrop, PartitionsDetach:
	default:
		errs = append(errs, fmt.Errorf("prune: Options.Partitions %q: use drop or detach", o.Partitions))
	}
	if o.Batch < 0 || o.Wait < 0 {
		errs = append(errs, errors.New("prune: Options.Batch and Options.Wait must not be negative"))
	}
	return errors.Join(errs...)
}

func (o Options) withDefaults() Options {
	o.Table = cmp.Or(o.Table, outbox.DefaultTable)
	o.Columns = o.Columns.WithDefaults()
	o.Batch = cmp.Or(o.Batch, 1000)
	o.Wait = cmp.Or(o.Wait, 2*time.Minute)
	o.PollInterval = cmp.Or(o.PollInterval, 200*time.Millisecond)
	return o
}

// Result says what Run did.
type Result struct {
	Deleted int64
	Batches int
	Cutoff  time.Time // rows created before this were candidates
	// ModeRun only: the mark and the slot position that covered it.
	MarkXmin  uint64        // pg_snapshot_xmin at the mark (xid8)
	MarkLSN   pglogrepl.LSN // pg_current_wal_insert_lsn after it
	Confirmed pglogrepl.LSN // the slot's confirmed_flush_lsn when deletion started
	// Kept counts the rows created before Cutoff that are still in the table after the run
	// (at most KeptLimit are counted): rows whose transaction had not finished before the
	// oldest transaction open at the mark. They go on a later run.
	Kept int64
	// Holder, when Kept > 0, is the oldest transaction open after the deletes: what holds the
	// kept rows back now. Nil when none is open (the next run deletes them).
	Holder *Holder

	// With Options.Partitions: the partitions dropped or detached, and those kept (a row in
	// them unpublished, created after the cutoff or without a creation time; empty; or the
	// default partition), "schema.table".
	Partitions     []string
	PartitionsKept []string
}

// Holder describes an open transaction.
type Holder struct {
	PID      int32     // its backend; 0 for a prepared transaction
	Prepared string    // the gid of a prepared (two-phase) transaction
	User     string    // its role
	App      string    // application_name
	State    string    // e.g. "idle in transaction"
	Since    time.Time // when the transaction began (prepared: when it was prepared)
}

func (h *Holder) String() string {
	if h.Prepared != "" {
		return fmt.Sprintf("prepared transaction %q of %s, prepared at %s (COMMIT PREPARED or ROLLBACK PREPARED it)",
			h.Prepared, h.User, h.Since.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("pid %d (user %q, application %q, %s since %s)", h.PID, h.User, h.App, h.State, h.Since.UTC().Format(time.RFC3339))
}

// KeptLimit bounds the count of kept rows, so reporting them never scans without end.
const KeptLimit = 100_000

// Run deletes published rows older than OlderThan in batches on conn (a normal connection,
// not in a transaction) and returns how many. See the package documentation for how ModeRun
// decides that a row was published.
func Run(ctx context.Context, conn *pgx.Conn, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	o = o.withDefaults()
	t, _ := outbox.ParseTable(o.Table) // checked by Validate
	tbl := t.Sanitize()
	id, created := pgx.Identifier{o.Columns.ID}.Sanitize(), pgx.Identifier{o.Columns.CreatedAt}.Sanitize()
	var res Result
	if err := conn.QueryRow(ctx, `SELECT now() - make_interval(secs => $1)`, o.OlderThan.Seconds()).Scan(&res.Cutoff); err != nil {
		return res, fmt.Errorf("prune: read the server's clock: %w", err)
	}

	// $1 cutoff, $2 batch size, $3 mark xid (ModeRun).
	var published string
	args := []any{res.Cutoff, o.Batch}
	switch o.Mode {
	case ModePoll:
		published = pgx.Identifier{o.Columns.PublishedAt}.Sanitize() + ` IS NOT NULL`
	case ModeRun:
		if err := mark(ctx, conn, o, &res); err != nil {
			return res, err
		}
		// xmin precedes the mark; a negative age is a row older than 2^31 transactions.
		published = `(age(xmin) > age($3::text::xid) OR age(xmin) < 0)`
		args = append(args, strconv.FormatUint(res.MarkXmin&0xFFFFFFFF, 10))
	}
	if o.Partitions != "" {
		// The same judgement, its mark as $2.
		if o.Mode == ModeRun {
			published = `(age(xmin) > age($2::text::xid) OR age(xmin) < 0)`
		}
		err := runPartitions(ctx, conn, o, t, published, partitionArgs(o, &res), &res) // fills res: call it before res is read
		return res, err
	}
	q := `WITH batch AS (
    SELECT ` + id + ` FROM ` + tbl + `
    WHERE ` + created + ` < $1 AND ` + published + `
    ORDER BY ` + id + ` LIMIT $2)
DELETE FROM ` + tbl + ` t USING batch WHERE t.` + id + ` = batch.` + id
	for {
		tag, err := conn.Exec(ctx, q, args...)
		if err != nil {
			return res, fmt.Errorf("prune: delete from %s: %w", o.Table, err)
		}
		n := tag.RowsAffected()
		res.Deleted += n
		if n > 0 {
			res.Batches++
			if o.Progress != nil {
				o.Progress(res.Deleted)
			}
		}
		if n < int64(o.Batch) {
			break
		}
	}
	if o.Mode == ModeRun {
		kq := `SELECT count(*) FROM (SELECT 1 FROM ` + tbl + ` WHERE ` + created + ` < $1 LIMIT $2) k`
		if err := conn.QueryRow(ctx, kq, res.Cutoff, KeptLimit).Scan(&res.Kept); err != nil {
			return res, fmt.Errorf("prune: count the rows kept in %s: %w", o.Table, err)
		}
		if res.Kept > 0 {
			h, err := oldestOpen(ctx, conn)
			if err != nil {
				return res, err
			}
			res.Holder = h
		}
	}
	return res, nil
}

// mark takes the mark (xmin0, then lsn0) and waits until the slot confirms lsn0.
func mark(ctx context.Context, conn *pgx.Conn, o Options, res *Result) error {
	var xmin string
	if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&xmin); err != nil {
		return fmt.Errorf("prune: read the oldest running transaction: %w", err)
	}
	x, err := strconv.ParseUint(xmin, 10, 64)
	if err != nil {
		return fmt.Errorf("prune: snapshot xmin %q: %w", xmin, err)
	}
	res.MarkXmin = x
	var lsn string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		return fmt.Errorf("prune: read the WAL position: %w", err)
	}
	if res.MarkLSN, err = pglogrepl.ParseLSN(lsn); err != nil {
		return fmt.Errorf("prune: WAL position %q: %w", lsn, err)
	}
	deadline := time.Now().Add(o.Wait)
	for {
		var confirmed *string
		var walStatus string
		err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1`, o.Slot).Scan(&confirmed, &walStatus)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("prune: slot %q: %w (check --slot)", o.Slot, slotstore.ErrSlotMissing)
		}
		if err != nil {
			return fmt.Errorf("prune: read slot %q: %w", o.Slot, err)
		}
		if walStatus == "lost" {
			return fmt.Errorf("prune: slot %q: %w: which rows reached Kafka is unknown; re-create it and republish before pruning (see `cdc-relay slot status`)", o.Slot, slotstore.ErrSlotLost)
		}
		if confirmed != nil {
			if res.Confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
				return fmt.Errorf("prune: slot %q confirmed_flush_lsn %q: %w", o.Slot, *confirmed, err)
			}
			if res.Confirmed >= res.MarkLSN {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: slot %q confirmed %s, the mark is %s (waited %s; is `cdc-relay run` streaming from it?); nothing was deleted",
				ErrNotConfirmed, o.Slot, res.Confirmed, res.MarkLSN, o.Wait)
		}
		if !retry.Sleep(ctx, o.PollInterval) {
			return ctx.Err()
		}
	}
}

// oldestOpen returns the oldest transaction with an xid open now, other than this session's,
// or nil: a backend, or a prepared transaction if that is older.
func oldestOpen(ctx context.Context, conn *pgx.Conn) (*Holder, error) {
	var h Holder
	var backendAge, preparedAge int64 = -1, -1
	err := conn.QueryRow(ctx, `SELECT pid, coalesce(usename::text, ''), coalesce(application_name, ''), coalesce(state, ''), coalesce(xact_start, now()), age(backend_xid)
		FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() ORDER BY age(backend_xid) DESC LIMIT 1`).Scan(&h.PID, &h.User, &h.App, &h.State, &h.Since, &backendAge)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("prune: look up the oldest open transaction: %w", err)
	}
	var p Holder
	err = conn.QueryRow(ctx, `SELECT gid, owner::text, prepared, age(transaction) FROM pg_prepared_xacts ORDER BY age(transaction) DESC LIMIT 1`).Scan(&p.Prepared, &p.User, &p.Since, &preparedAge)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("prune: look up the oldest prepared transaction: %w", err)
	}
	switch {
	case preparedAge > backendAge:
		return &p, nil
	case backendAge >= 0:
		return &h, nil
	}
	return nil, nil
}
