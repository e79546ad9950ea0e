package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// connectPG opens a normal connection, turning failures into errors that say where and what.
func connectPG(ctx context.Context, c *common) (*pgx.Conn, error) {
	cfg := c.pg.Copy()
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "cdc-relay"
	}
	cctx, cancel := context.WithTimeout(ctx, c.pgTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL at %s:%d: %w (%s)", cfg.Host, cfg.Port, err, pgConnectHint(err))
	}
	return conn, nil
}

// waitForPG connects for the preflight, waiting while the server cannot be reached (down,
// restarting, starting up), as the running relay does: a relay (re)started during an outage
// must not exit into its supervisor's growing back-off. What retrying cannot fix (refused
// credentials, TLS verification, a missing database) ends it at once. It returns a nil
// connection and nil error when ctx ends first.
func waitForPG(ctx context.Context, c *common, log *slog.Logger) (conn *pgx.Conn, err error) {
	err = retry.Startup.Until(ctx, func(attempt int) error {
		if conn, err = connectPG(ctx, c); err == nil && attempt > 0 {
			log.Info("PostgreSQL answers: starting")
		}
		return err
	}, replication.IsRetryable, func(err error, wait time.Duration) {
		log.Warn("waiting for PostgreSQL: it is unreachable; retrying", "retry_in", wait, "cause", err)
	})
	if err != nil && ctx.Err() != nil {
		return nil, nil
	}
	return conn, err
}

// deadLetterTableUsage describes --dead-letter-table, which run and slot create share: both
// must name the same table.
const deadLetterTableUsage = "PostgreSQL table, schema.table (a bare name means public.name), where a record goes when the dead-letter topic " +
	"refuses it too; created if missing (give run and slot create the same one)"

// slotErr turns slotstore's configuration findings into usage errors (exit 2).
func slotErr(err error) error {
	switch {
	case errors.Is(err, outbox.ErrBadName), errors.Is(err, slotstore.ErrWalLevel),
		errors.Is(err, slotstore.ErrNoTable), errors.Is(err, slotstore.ErrPublicationMissing),
		errors.Is(err, slotstore.ErrPublicationEmpty), errors.Is(err, slotstore.ErrPublicationNoInsert),
		errors.Is(err, slotstore.ErrSlotMissing), errors.Is(err, slotstore.ErrSlotWrongPlugin),
		errors.Is(err, slotstore.ErrSlotWrongDatabase), errors.Is(err, slotstore.ErrPermission),
		errors.Is(err, slotstore.ErrFailoverUnsupported), errors.Is(err, slotstore.ErrSlotNotFailover),
		errors.Is(err, slotstore.ErrStandbyReadOnly), errors.Is(err, slotstore.ErrPublicationNotViaRoot):
		return &usageError{err}
	}
	return err
}

func cmdSlotCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	var pub, deadTable, standbyURL, primaryURL string
	var failover bool
	var syncWait time.Duration
	var tables listFlag
	var shards shardsFlags
	fs := newFlagSet("slot create", "slot create --pg-url URL --slot NAME --publication NAME [--table public.outbox] [--dead-letter-table public.cdc_relay_dead_letters] "+
		"[--failover [--standby-url URL]] [--primary-url URL] [--shards N [--column-aggregate-id COLUMN]]", stderr)
	c.register(fs)
	fs.StringVar(&pub, "publication", "", "publication to create (insert-only) or extend")
	fs.BoolVar(&failover, "failover", false, "create the slot with failover on (PostgreSQL 17+, on the primary): standbys with slot sync keep a copy that a promoted standby streams from")
	fs.StringVar(&standbyURL, "standby-url", "", "with --failover: a standby's URL; its slot-sync settings are checked and create waits until the standby has the slot")
	fs.DurationVar(&syncWait, "sync-timeout", 60*time.Second, "with --standby-url: how long to wait for the standby to have the slot")
	fs.StringVar(&primaryURL, "primary-url", "", "when --pg-url is a standby (decoding on a standby, PostgreSQL 16+): the primary's URL, where create logs the running-transactions record the standby's slot creation waits for")
	fs.Var(&tables, "table", "outbox table(s) to publish, schema.table, comma-separated or repeated; a partitioned table is published through its root "+
		"(publish_via_partition_root = true): every record names it, never a partition, and partitions attached later need nothing (default public.outbox)")
	fs.StringVar(&deadTable, "dead-letter-table", deadletters.DefaultTable, deadLetterTableUsage)
	shards.register(fs, true)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	if err := shards.parse(fs); err != nil {
		return err
	}
	ddl, err := deadletters.TableDDL(deadTable)
	if err != nil {
		return &usageError{fmt.Errorf("--dead-letter-table: %w", err)}
	}
	if pub == "" {
		return usageErr("--publication is required (or set CDC_RELAY_PUBLICATION)")
	}
	if standbyURL != "" && !failover {
		return usageErr("--standby-url goes with --failover")
	}
	if standbyURL != "" && shards.count > 0 {
		return usageErr("--standby-url and --shards: check each shard's slot on the standby with slot status --slot <slot>_s<I>of<N> --standby-url URL")
	}
	opts := slotstore.CreateOptions{Slot: c.slot, Publication: pub, Tables: tables, Failover: failover}
	if err := opts.Validate(); err != nil {
		return &usageError{err}
	}
	conn, err := connectPG(ctx, &c)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	stop, err := whileCreatingOnStandby(ctx, conn, &c, primaryURL, stderr)
	if err != nil {
		return err
	}
	if shards.count > 0 {
		err := createShards(ctx, conn, opts, shards, stdout)
		stop()
		if err != nil {
			return err
		}
		return readyDeadLetterTable(ctx, conn, deadTable, ddl, stdout, stderr)
	}
	res, err := slotstore.New(conn).Create(ctx, opts)
	stop()
	if err != nil {
		return slotErr(err)
	}
	viaRoot := ""
	if res.ViaRoot {
		viaRoot = ", partitioned tables published through their root"
	}
	switch {
	case res.PublicationCreated:
		fmt.Fprintf(stdout, "created publication %s (insert only%s)\n", pub, viaRoot)
	case res.ViaRootSet:
		fmt.Fprintf(stdout, "publication %s now publishes partitioned tables through their root (publish_via_partition_root = true): records name the table, not the partition\n", pub)
	default:
		fmt.Fprintf(stdout, "publication %s already exists\n", pub)
		warnPublicationPublishesMore(ctx, conn, c.slot, pub, stderr)
	}
	if len(res.TablesAdded) > 0 {
		fmt.Fprintf(stdout, "added to publication %s: %s\n", pub, strings.Join(res.TablesAdded, ", "))
	}
	kind := "pgoutput"
	if failover {
		kind = "pgoutput, failover"
	}
	if res.SlotCreated {
		fmt.Fprintf(stdout, "created slot %s (%s) at %s\n", c.slot, kind, res.ConsistentPoint)
	} else {
		fmt.Fprintf(stdout, "slot %s already exists (%s): nothing to do\n", c.slot, kind)
	}
	if res.Standby {
		fmt.Fprintf(stdout, "the slot is on a standby: %s\n", standbyDecodingNote)
		fmt.Fprintf(stderr, "cdc-relay: note: the dead-letter table is not created on a standby (it is read-only): create it "+
			"on the primary with slot create there; a record that both Kafka topics refuse then holds the relay's position\n")
		return nil
	}
	if failover {
		if err := failoverCreated(ctx, conn, &c, pub, standbyURL, syncWait, stdout, stderr); err != nil {
			return err
		}
	}
	return readyDeadLetterTable(ctx, conn, deadTable, ddl, stdout, stderr)
}

// readyDeadLetterTable creates the dead-letter table if missing, or says how to. The slot and
// publication are what run needs; the dead-letter table is the last resort for records the
// dead-letter topic refuses, and the relay also creates it on first use.
func readyDeadLetterTable(ctx context.Context, conn *pgx.Conn, deadTable, ddl string, stdout, stderr io.Writer) error {
	if err := deadletters.CreateTable(ctx, conn, deadTable); err != nil {
		fmt.Fprintf(stderr, "cdc-relay: warning: %v\nThe relay parks a record there only when the dead-letter topic refuses it too, "+
			"and holds its position while it cannot. Create it as a role that may, and let the relay's role insert into it:\n%s;\n",
			err, ddl)
		return nil
	}
	tbl, _ := outbox.ParseTable(deadTable) // checked above
	fmt.Fprintf(stdout, "dead-letter table %s is ready\n", tbl)
	return nil
}

// slotConn parses a slot command's flags, checks them and the slot's name, and connects.
func slotConn(ctx context.Context, fs *flag.FlagSet, args []string, c *common) (*pgx.Conn, error) {
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := slotstore.ValidateName("slot", c.slot); err != nil {
		return nil, &usageError{err}
	}
	return connectPG(ctx, c)
}

func cmdSlotStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	var pub, standbyURL string
	var asJSON bool
	var ops opsFlags
	fs := newFlagSet("slot status", "slot status --pg-url URL --slot NAME [--publication NAME] [--standby-url URL] [--json] [--wal-retained-warn-bytes N]", stderr)
	c.register(fs)
	fs.StringVar(&pub, "publication", "", "also show this publication")
	fs.StringVar(&standbyURL, "standby-url", "", "also show the slot's copy on this standby (failover slots, PostgreSQL 17+): synced, and whether a promotion would keep it")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	ops.registerWarn(fs)
	conn, err := slotConn(ctx, fs, args, &c)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	plain, shards, err := shardStatuses(ctx, conn, c.slot, pub)
	if err != nil {
		return slotErr(err)
	}
	if len(shards) > 0 {
		return printShardStatuses(stdout, plain, shards, asJSON, ops.warnBytes)
	}
	st := *plain
	var standby *slotstore.Status
	if standbyURL != "" {
		if standby, err = standbyCopy(ctx, &c, standbyURL); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if standbyURL == "" {
			return enc.Encode(st)
		}
		// The status's own keys, then the standby's copy (null when the standby lacks it).
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		cp, err := json.Marshal(standby)
		if err != nil {
			return err
		}
		b = append(append(append(b[:len(b)-1], `,"standby_copy":`...), cp...), '}')
		return enc.Encode(json.RawMessage(b))
	}
	printStatus(stdout, st)
	printRetainedCheck(stdout, st, ops.warnBytes)
	if standbyURL != "" {
		fmt.Fprintf(stdout, "%-20s %s\n", "standby_copy", standbyCopyText(standby))
	} else if st.Failover != nil && *st.Failover && !st.Standby {
		fmt.Fprintf(stdout, "%-20s %s\n", "standby_copy", "not checked: give --standby-url to see whether a standby has the slot")
	}
	return nil
}

func printStatus(w io.Writer, st slotstore.Status) {
	active := "no"
	if st.Active {
		active = fmt.Sprintf("yes (pid %d)", st.ActivePID)
	}
	safe := "unlimited (max_slot_wal_keep_size = -1)"
	if st.SafeWALSize != nil {
		safe = fmt.Sprintf("%d bytes", *st.SafeWALSize)
	}
	rows := [][2]string{
		{"slot", st.Slot},
		{"plugin", st.Plugin},
		{"database", st.Database},
		{"active", active},
		{"confirmed_flush_lsn", st.ConfirmedFlushLSN.String()},
		{"restart_lsn", st.RestartLSN.String()},
		{"current_wal_lsn", currentWALText(st)},
		{"lag", fmt.Sprintf("%d bytes (current WAL - confirmed_flush_lsn)", st.LagBytes)},
		{"retained_wal", fmt.Sprintf("%d bytes (current WAL - restart_lsn)", st.RetainedWALBytes)},
		{"wal_status", st.WALStatus},
		{"safe_wal_size", safe},
	}
	rows = append(rows, versionRows(st)...)
	if p := st.Publication; p != nil {
		tables := strings.Join(p.Tables, ", ")
		if p.AllTables {
			tables = "ALL TABLES"
		}
		rows = append(rows, [2]string{"publication", fmt.Sprintf("%s (publish %s): %s", p.Name, p.Publish, tables)})
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-20s %s\n", r[0], r[1])
	}
	if st.WALStatus == "lost" {
		what, prevent := slotstore.LostCause(st.InvalidationReason, "")
		fmt.Fprintf(w, "\nThe slot is lost: PostgreSQL invalidated it because %s.\n"+
			"Drop and re-create it, then republish the rows written meanwhile (e.g. with cdc-relay poll).\n"+
			"So that it does not happen again, %s.\n", what, prevent)
	}
}

func cmdSlotDrop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	var pub string
	var shards shardsFlags
	fs := newFlagSet("slot drop", "slot drop --pg-url URL --slot NAME [--publication NAME] [--shards N]", stderr)
	c.register(fs)
	fs.StringVar(&pub, "publication", "", "also drop this publication")
	shards.register(fs, false)
	conn, err := slotConn(ctx, fs, args, &c)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if shards.count != 0 {
		if err := shards.parse(fs); err != nil {
			return err
		}
		return dropShards(ctx, conn, c.slot, pub, shards.count, stdout)
	}
	if err := slotstore.New(conn).Drop(ctx, c.slot, pub); err != nil {
		return slotErr(err)
	}
	fmt.Fprintf(stdout, "dropped slot %s\n", c.slot)
	if pub != "" {
		fmt.Fprintf(stdout, "dropped publication %s\n", pub)
	}
	return nil
}

// warnPublicationPublishesMore says, after slot create found the publication, that it
// publishes more than inserts, which the relay ignores, and how to make it insert-only. It is
// left as it is: another consumer may read the same publication.
func warnPublicationPublishesMore(ctx context.Context, conn *pgx.Conn, slot, pub string, stderr io.Writer) {
	st, err := slotstore.New(conn).Status(ctx, slot, pub)
	if err != nil || st.Publication == nil {
		return
	}
	if ignored := st.Publication.Ignored(); len(ignored) > 0 {
		fmt.Fprintf(stderr, "cdc-relay: note: publication %s publishes %s besides inserts, which the relay ignores (it publishes "+
			"outbox inserts only): they are decoded and dropped. Left as it is (another consumer may need them); "+
			"to make it insert-only run: %s;\n", pub, strings.Join(ignored, ", "), st.Publication.InsertOnlySQL())
	}
}
