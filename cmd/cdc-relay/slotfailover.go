package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// standbyDecodingNote says what decoding on a standby needs and how its slot advances.
const standbyDecodingNote = "decoding on a standby (PostgreSQL 16+) needs wal_level = logical on the primary and on the standby, " +
	"and hot_standby_feedback = on with a physical slot (primary_slot_name), or the primary may remove catalog rows the slot " +
	"still needs and the slot is invalidated. The relay confirms as on a primary, but the slot's restart_lsn only moves at a " +
	"running-transactions record replayed from the primary: its bgwriter writes one every 15 s while it writes WAL " +
	"(SELECT pg_log_standby_snapshot() on the primary writes one at once), and an idle primary retains nothing"

// whileCreatingOnStandby helps a slot creation on a standby, which waits for a running-transactions
// record from the primary: with primaryURL it logs one there every second until stop is called;
// without, it says what the wait is for. On a primary it does nothing.
func whileCreatingOnStandby(ctx context.Context, conn *pgx.Conn, c *common, primaryURL string, stderr io.Writer) (stop func(), err error) {
	var standby bool
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&standby); err != nil {
		return nil, fmt.Errorf("read pg_is_in_recovery(): %w", err)
	}
	if !standby {
		if primaryURL != "" {
			return nil, usageErr("--primary-url is for creating a slot on a standby, and --pg-url leads to a primary")
		}
		return func() {}, nil
	}
	if primaryURL == "" {
		fmt.Fprintf(stderr, "cdc-relay: creating a slot on a standby waits for a running-transactions record from the primary "+
			"(its bgwriter writes one every 15 s while it writes WAL); on an idle primary run SELECT pg_log_standby_snapshot() "+
			"there, or give --primary-url\n")
		return func() {}, nil
	}
	primary, err := connectAt(ctx, c, "primary-url", primaryURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer primary.Close(context.Background())
		for {
			if _, err := primary.Exec(ctx, `SELECT pg_log_standby_snapshot()`); err != nil && ctx.Err() == nil {
				fmt.Fprintf(stderr, "cdc-relay: warning: pg_log_standby_snapshot() on the primary: %v\n", err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}

// failoverCreated runs after `slot create --failover` on a primary: it makes the slot syncable
// at once, prints what the servers need and what is missing, and with standbyURL waits until
// the standby has the slot.
func failoverCreated(ctx context.Context, conn *pgx.Conn, c *common, pub, standbyURL string, syncWait time.Duration, stdout, stderr io.Writer) error {
	store := slotstore.New(conn)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	advanced, err := store.PrepareFailoverSync(pctx, c.slot, []string{pub})
	cancel()
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "cdc-relay: warning: could not move the new slot past a running-transactions record (%v); "+
			"standbys copy it once the relay has confirmed a position\n", err)
	case !advanced:
		fmt.Fprintf(stdout, "the slot has changes to publish already: standbys copy it once the relay confirms its first position\n")
	}
	rep, err := store.CheckFailover(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", slotstore.FailoverRequirements)
	for _, w := range rep.Warnings {
		fmt.Fprintf(stderr, "cdc-relay: warning: %s\n", w)
	}
	if standbyURL == "" {
		fmt.Fprintf(stdout, "give --standby-url to check a standby's settings and wait until it has the slot\n")
		return nil
	}
	standby, err := connectAt(ctx, c, "standby-url", standbyURL)
	if err != nil {
		return err
	}
	defer standby.Close(context.Background())
	warns, err := slotstore.New(standby).CheckFailoverStandby(ctx, rep.SynchronizedStandbySlots)
	if err != nil {
		return err
	}
	for _, w := range warns {
		fmt.Fprintf(stderr, "cdc-relay: warning: %s\n", w)
	}
	// The standby creates its copy at its slot sync worker's next cycle (it naps up to 30 s when
	// idle; a configuration reload wakes it) and persists it once the primary's slot has passed
	// the standby's own catalog xmin, which moves on as transactions run: so the wait keeps
	// logging running-transactions records and advancing the slot (while it has nothing to
	// publish) and reloading the standby's configuration.
	nudge := func(ctx context.Context) {
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, _ = store.PrepareFailoverSync(nctx, c.slot, []string{pub})
		_, _ = standby.Exec(nctx, `SELECT pg_reload_conf()`)
	}
	wctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	took, err := slotstore.WaitSynced(wctx, standby, c.slot, nudge)
	if err != nil {
		return fmt.Errorf("%w; the standby logs why (e.g. \"could not synchronize replication slot\": then the relay's "+
			"confirmations move the slot on, and slot status --standby-url says when the standby has it)", err)
	}
	fmt.Fprintf(stdout, "the standby has the slot (synced, persisted) after %s: a promotion keeps it\n", took.Round(time.Millisecond))
	return nil
}

// standbyCopy reads the slot on a standby; nil when the standby does not have it.
func standbyCopy(ctx context.Context, c *common, standbyURL string) (*slotstore.Status, error) {
	conn, err := connectAt(ctx, c, "standby-url", standbyURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	st, err := slotstore.New(conn).Status(ctx, c.slot, "")
	if errors.Is(err, slotstore.ErrSlotMissing) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--standby-url: %w", err)
	}
	if !st.Standby {
		return nil, usageErr("--standby-url leads to a server that is not in recovery (a primary): give a standby's URL")
	}
	return &st, nil
}

func standbyCopyText(st *slotstore.Status) string {
	switch {
	case st == nil:
		return "MISSING: the standby has no copy; a promotion now loses the slot (is the slot created with --failover, and is the standby set up? see slot create --failover)"
	case st.Synced == nil || !*st.Synced:
		return "NOT SYNCED: the standby has a slot of this name that was not copied from the primary"
	case st.Temporary:
		return fmt.Sprintf("NOT YET: synced but not persisted (confirmed %s); the standby persists it once the slot passed its own "+
			"catalog xmin (\"remote slot precedes local slot\" in its log), i.e. after the relay's next confirmation", st.ConfirmedFlushLSN)
	}
	return fmt.Sprintf("synced and persisted: a promotion keeps it (confirmed_flush_lsn %s there)", st.ConfirmedFlushLSN)
}

func currentWALText(st slotstore.Status) string {
	if st.Standby {
		return st.CurrentWALLSN.String() + " (a standby: the replay position)"
	}
	return st.CurrentWALLSN.String()
}

// versionRows are the status lines whose values depend on the server version.
func versionRows(st slotstore.Status) [][2]string {
	server := fmt.Sprintf("PostgreSQL %d, primary", st.ServerVersion)
	if st.Standby {
		server = fmt.Sprintf("PostgreSQL %d, standby (in recovery)", st.ServerVersion)
	}
	rows := [][2]string{{"server", server}}
	if st.Failover == nil {
		note := fmt.Sprintf("not shown before PostgreSQL 17 (this is %d)", st.ServerVersion)
		return append(rows, [2]string{"failover", fmt.Sprintf("no: PostgreSQL %d has no failover slots (17+), a promotion loses the slot", st.ServerVersion)},
			[2]string{"invalidation_reason", note}, [2]string{"inactive_since", note})
	}
	failover := "no: a promotion loses the slot (slot create --failover makes a failover slot)"
	if *st.Failover {
		failover = "yes"
	}
	rows = append(rows, [2]string{"failover", failover})
	if st.Standby {
		synced := "no: created on this standby"
		switch {
		case st.Synced != nil && *st.Synced && st.Temporary:
			synced = "yes, not yet persisted: a promotion now would lose it"
		case st.Synced != nil && *st.Synced:
			synced = "yes: a promotion keeps it"
		}
		rows = append(rows, [2]string{"synced", synced})
	}
	reason := "none"
	if st.InvalidationReason != nil && *st.InvalidationReason != "" {
		reason = *st.InvalidationReason
	}
	inactive := "active"
	if st.InactiveSince != nil {
		inactive = st.InactiveSince.UTC().Format(time.RFC3339)
	}
	return append(rows, [2]string{"invalidation_reason", reason}, [2]string{"inactive_since", inactive})
}

// failoverPreflight logs, at relay startup, what the slot's server needs for a failover or for
// decoding on a standby, and warns where the primary shows something missing. It never stops
// the relay: the settings can be fixed while it runs.
func failoverPreflight(ctx context.Context, conn *pgx.Conn, st slotstore.Status, log *slog.Logger) {
	switch {
	case st.Standby:
		log.Info("the slot is on a standby: " + standbyDecodingNote)
	case st.Failover != nil && *st.Failover:
		rep, err := slotstore.New(conn).CheckFailover(ctx)
		if err != nil {
			log.Warn("cannot check the failover setup", "cause", err)
			return
		}
		log.Info("failover slot: a promoted standby with slot sync continues from its copy of the slot",
			"synchronized_standby_slots", rep.SynchronizedStandbySlots)
		for _, w := range rep.Warnings {
			log.Warn("failover setup: " + w)
		}
	case st.Failover != nil:
		log.Info("the slot has failover off: a promotion of a standby loses it (slot create --failover makes a failover slot; docs/failover.md)")
	}
}

// failoverSection is where the recovery after a promotion below PostgreSQL 17 is described.
const failoverSection = `docs/failover.md, "Failover: a standby promoted, and decoding from a standby", "Before PostgreSQL 17"`

// promotedSlotAdvice is run's answer to a missing slot on a server whose timeline is above 1:
// it has been promoted, and the slot most likely stayed on the old primary (a supervisor
// restarting the relay after the stream's own recovery message lands here). `slot create` would
// start a new slot now and lose every row committed between the old slot's confirmed position and
// now; cutover loses nothing (DESIGN.md, "Every session starts"). c is the promoted server
// (nil: not known): the cutover it advises names --table as run was given it or, without one,
// the tables the publications publish on that server, each partitioned table by its root.
func promotedSlotAdvice(ctx context.Context, c *common, slot string, pubs, tables []string, timeline int32) error {
	table := strings.Join(tables, ",")
	if table == "" {
		table = "TABLE"
		published, err := publishedTables(ctx, c, pubs)
		switch {
		case err == nil && len(published) > 0:
			table = strings.Join(published, ",")
		case err == nil:
			err = errors.New("it publishes no table")
		}
		if err != nil {
			table += fmt.Sprintf(" (the outbox table publication %s publishes; reading it on this server failed: %v)", pubs[0], err)
		}
	}
	return usageErr("slot %q: %w on this server, which has been promoted (timeline %d, IDENTIFY_SYSTEM): a standby became the primary and the slot "+
		"stayed on the old primary (before PostgreSQL 17 no logical slot moves to a standby; on 17+ only a slot made with "+
		"`cdc-relay slot create --failover`, on a standby with slot sync). Do NOT run `cdc-relay slot create`: a new slot "+
		"starts now, and the rows committed between the old slot's confirmed position and now would never be published. "+
		"To recover without loss (%s): 1. run `cdc-relay cutover --slot %s --publication %s --table %s` against "+
		"this server: it creates the slot and publishes every pending outbox row committed before it (duplicates, never loss); "+
		"2. then start `cdc-relay run` again (never before cutover finished)",
		slot, slotstore.ErrSlotMissing, timeline, failoverSection, slot, pubs[0], table)
}

// publishedTables returns the tables the publications publish on the server c names,
// "schema.table", a partition by its root.
func publishedTables(ctx context.Context, c *common, pubs []string) ([]string, error) {
	if c == nil {
		return nil, errors.New("the server is not known")
	}
	conn, err := connectPG(ctx, c)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	qctx, cancel := context.WithTimeout(ctx, c.pgTimeout)
	defer cancel()
	rows, err := conn.Query(qctx, `
SELECT DISTINCT rn.nspname::text || '.' || rc.relname::text
FROM pg_publication_tables pt
JOIN pg_namespace n ON n.nspname = pt.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
JOIN pg_class rc ON rc.oid = CASE WHEN c.relispartition THEN pg_partition_root(c.oid) ELSE c.oid END
JOIN pg_namespace rn ON rn.oid = rc.relnamespace
WHERE pt.pubname = ANY($1) ORDER BY 1`, pubs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// connectAt connects to the server of url, the value of --flag, with c's other connection
// settings (a bad url is a usage error).
func connectAt(ctx context.Context, c *common, flag, url string) (*pgx.Conn, error) {
	cc, err := c.at(flag, url)
	if err != nil {
		return nil, err
	}
	conn, err := connectPG(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return conn, nil
}
