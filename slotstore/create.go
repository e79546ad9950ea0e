package slotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// ErrSlotExists means CreateOptions.ExportSnapshot was set and the slot already exists.
var ErrSlotExists = errors.New("replication slot already exists")

// CreateOptions says which slot and publication Create makes.
type CreateOptions struct {
	// Slot is the replication slot name, [a-z0-9_]{1,63}. Required.
	Slot string
	// Publication is the publication name, [a-z_][a-z0-9_$]{0,62}. Required.
	Publication string
	// Tables are the tables to publish, "schema.table" or "table" (schema
	// public), taken literally. Default: ["public.outbox"]. Duplicates after
	// qualification are ignored.
	Tables []string
	// ExportSnapshot, when set, is a replication connection (replication=database, same
	// database) on which a missing slot is created with CREATE_REPLICATION_SLOT ... LOGICAL
	// pgoutput EXPORT_SNAPSHOT. The snapshot's name is CreateResult.Snapshot: it sees exactly
	// the transactions committed before the slot's consistent point, and stays importable
	// (SET TRANSACTION SNAPSHOT) while that connection stays open and runs nothing else. An
	// existing slot is then ErrSlotExists: its snapshot is long gone.
	ExportSnapshot *pgconn.PgConn
	// Failover creates the slot with failover enabled (PostgreSQL 17+, on a primary): standbys
	// with slot sync keep a copy that a promoted standby streams from. Below 17, or on a
	// standby, Create returns ErrFailoverUnsupported; an existing slot without failover is
	// ErrSlotNotFailover.
	Failover bool
	// Shard, when set, makes the publication shard Shard's (slot create --shards): every
	// table is published with the row filter Shard.RowFilter(KeyColumn), so the slot
	// decodes only that shard's rows. Slot and Publication are the shard's names already
	// (Shard.Slot, Shard.Publication). Row filters need PostgreSQL 15+: below,
	// ErrRowFilterUnsupported. An existing publication must carry the shard's filter on
	// every table (ErrShardFilter).
	Shard *Shard
	// KeyColumn is the column the shard's hash reads: the relay's Kafka key column.
	// Default "aggregate_id".
	KeyColumn string
}

// ErrSlotNotFailover means a failover slot was asked for and the slot exists without failover.
var ErrSlotNotFailover = errors.New("replication slot exists without failover")

// Validate checks the names; the error wraps outbox.ErrBadName.
func (o CreateOptions) Validate() error {
	_, err := o.tables()
	return err
}

// tables validates o and returns its tables qualified, defaulted and deduplicated.
func (o CreateOptions) tables() ([]outbox.Table, error) {
	if err := ValidateName("slot", o.Slot); err != nil {
		return nil, err
	}
	if err := ValidateName("publication", o.Publication); err != nil {
		return nil, err
	}
	names := o.Tables
	if len(names) == 0 {
		names = []string{outbox.DefaultTable}
	}
	var out []outbox.Table
	seen := make(map[outbox.Table]bool)
	for _, n := range names {
		t, err := outbox.ParseTable(n)
		if err != nil {
			return nil, err
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// CreateResult says what Create did.
type CreateResult struct {
	SlotCreated        bool          // false when the slot already existed (with the pgoutput plugin: a no-op)
	PublicationCreated bool          // false when it already existed
	ConsistentPoint    pglogrepl.LSN // the new slot's consistent point (0 when it already existed)
	TablesAdded        []string      // tables added to an existing publication that lacked them, as "schema.table"
	Snapshot           string        // with CreateOptions.ExportSnapshot: the exported snapshot's name
	ServerVersion      int           // the server's major version
	Standby            bool          // the server is a standby (the slot decodes on it; PostgreSQL 16+)
	// ViaRoot: the publication publishes partitioned tables through their root
	// (publish_via_partition_root = true), as Create makes it when a table is partitioned.
	ViaRoot bool
	// ViaRootSet: Create turned publish_via_partition_root on in an existing publication.
	ViaRootSet bool
}

// Create makes the insert-only publication (publish = 'insert') for the
// tables if it is missing, or adds the tables an existing publication lacks
// (ALTER PUBLICATION ... ADD TABLE), then the logical slot with the pgoutput
// plugin if it is missing. Running it twice is a no-op that the result
// reports. An existing publication's publish option is left as it is.
//
// A partitioned table is published through its root (publish_via_partition_root
// = true): every change then names the table given, not the partition that holds
// the row, and partitions attached later are published without a change to the
// publication. An existing publication that holds a partitioned table without
// that setting is repaired (ALTER PUBLICATION ... SET).
//
// It checks everything before it changes anything: wal_level (ErrWalLevel),
// the tables (ErrNoTable), an existing slot's plugin and database
// (ErrSlotWrongPlugin, ErrSlotWrongDatabase) and the role's privileges
// (ErrPermission: CREATE on the database to create the publication, ownership
// of the tables to publish them and of the publication to alter it, the
// REPLICATION attribute or SUPERUSER to create the slot).
//
// The publication is made before the slot, so a slot never exists without
// its publication; if the slot step fails, running Create again finishes it.
func (s *Store) Create(ctx context.Context, o CreateOptions) (CreateResult, error) {
	var res CreateResult
	tables, err := o.tables()
	if err != nil {
		return res, err
	}
	ss, err := s.session(ctx)
	if err != nil {
		return res, err
	}
	if err := ss.checkWalLevel(); err != nil {
		return res, err
	}
	if res.ServerVersion, err = ServerVersion(ctx, s.conn); err != nil {
		return res, err
	}
	if err := s.conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&res.Standby); err != nil {
		return res, fmt.Errorf("read pg_is_in_recovery(): %w", err)
	}
	if err := checkCreateWhere(o, res.ServerVersion, res.Standby); err != nil {
		return res, err
	}
	if o.Shard != nil && res.ServerVersion < rowFilterVersion {
		return res, rowFilterUnsupported(o.Publication, res.ServerVersion)
	}

	slot, slotFound, err := s.lookupSlot(ctx, o.Slot)
	if err != nil {
		return res, err
	}
	if slotFound && o.Failover && slot.Type == "logical" && !slot.Failover {
		return res, fmt.Errorf("slot %q: %w: turn it on while no relay streams from it, over a replication connection: "+
			"psql \"dbname=%s replication=database\" -c 'ALTER_REPLICATION_SLOT %s (FAILOVER)'",
			o.Slot, ErrSlotNotFailover, ss.Database, o.Slot)
	}
	if slotFound && o.ExportSnapshot != nil {
		return res, fmt.Errorf("slot %q: %w: a snapshot can only be exported when the slot is created", o.Slot, ErrSlotExists)
	}
	if slotFound {
		if err := checkSlotKind(o.Slot, slot.Type, slot.Plugin, slot.Database, ss.Database); err != nil {
			return res, err
		}
	} else if err := ss.checkReplication(o.Slot, "create a replication slot"); err != nil {
		return res, err
	}

	plan, err := s.planPublication(ctx, ss, o.Publication, tables)
	if err != nil {
		return res, err
	}
	if o.Shard != nil {
		if plan.Filter, err = s.checkShard(ctx, o, tables, plan); err != nil {
			return res, err
		}
	}
	if res.Standby && (len(plan.Missing) > 0 || plan.SetViaRoot) {
		return res, fmt.Errorf("publication %q: %w: this server is a standby (read-only), and the publication lacks %s; "+
			"create or extend it on the primary (cdc-relay slot create against the primary does, or run there: %s), "+
			"then run slot create on the standby again", o.Publication, ErrStandbyReadOnly, planWants(plan), publicationDDL(o.Publication, plan))
	}

	// Checks done: from here on, change things.
	if res.PublicationCreated, res.TablesAdded, plan, err = s.applyPublication(ctx, ss, o.Publication, tables, plan); err != nil {
		return res, err
	}
	res.ViaRoot, res.ViaRootSet = plan.ViaRoot || plan.SetViaRoot, plan.Exists && plan.SetViaRoot
	if !slotFound && o.ExportSnapshot != nil {
		res.ConsistentPoint, res.Snapshot, err = createSlotWithSnapshot(ctx, o.ExportSnapshot, o.Slot, ss.Role)
		res.SlotCreated = err == nil
		return res, err
	}
	if !slotFound {
		res.ConsistentPoint, res.SlotCreated, err = s.createSlot(ctx, ss, o.Slot, o.Failover)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// pubPlan is what Create must do to the publication.
type pubPlan struct {
	Exists  bool
	Missing []outbox.Table // tables to publish: all of them for a new publication
	// Filter, when not "", is the row filter every table is published with (a shard's).
	Filter string
	// ViaRoot: the publication publishes through partition roots (already, or once created).
	ViaRoot bool
	// SetViaRoot: it must be made to (a partitioned table in it or among the tables, and
	// publish_via_partition_root off or, for a new publication, to be set at creation).
	SetViaRoot bool
}

// planPublication reads the publication, checks the tables exist, and
// checks the privileges for what must change.
func (s *Store) planPublication(ctx context.Context, ss session, pub string, tables []outbox.Table) (pubPlan, error) {
	// Every requested table must exist, even one already published.
	owned := make(map[outbox.Table]tableRow, len(tables))
	for _, t := range tables {
		row, err := s.lookupTable(ctx, t)
		if err != nil {
			return pubPlan{}, err
		}
		owned[t] = row
	}

	row, found, err := s.lookupPublication(ctx, pub)
	if err != nil {
		return pubPlan{}, err
	}
	partitioned := false
	for _, t := range tables {
		partitioned = partitioned || owned[t].Kind == "p"
	}
	plan := pubPlan{Exists: found, ViaRoot: found && row.ViaRoot}
	switch {
	case !found:
		if !ss.CanCreate {
			return pubPlan{}, fmt.Errorf("publication %q: %w: role %q cannot create a publication: it needs CREATE "+
				"on database %q; as the database owner or a superuser run: GRANT CREATE ON DATABASE %s TO %s",
				pub, ErrPermission, ss.Role, ss.Database,
				pgx.Identifier{ss.Database}.Sanitize(), pgx.Identifier{ss.Role}.Sanitize())
		}
		plan.Missing = tables
		plan.SetViaRoot = partitioned
	case row.AllTables:
		// FOR ALL TABLES already publishes every table.
	default:
		// A member partitioned table is not in row.Tables while the publication publishes
		// through the partitions: row.Members has it.
		have := make(map[string]bool, len(row.Tables)+len(row.Members))
		for _, t := range append(append([]string(nil), row.Tables...), row.Members...) {
			have[t] = true
		}
		for _, t := range tables {
			if !have[t.String()] {
				plan.Missing = append(plan.Missing, t)
			}
		}
		if len(plan.Missing) > 0 && !row.IsOwner {
			return pubPlan{}, fmt.Errorf("publication %q: %w: role %q cannot add tables to it: it is owned by %q; "+
				"run as %q, or as a superuser run: ALTER PUBLICATION %s OWNER TO %s",
				pub, ErrPermission, ss.Role, row.Owner, row.Owner,
				pgx.Identifier{pub}.Sanitize(), pgx.Identifier{ss.Role}.Sanitize())
		}
	}
	// A partitioned table asked for, or named in the publication: published through its root.
	if found && !row.ViaRoot && (partitioned || len(row.Partitioned) > 0) {
		plan.SetViaRoot = true
		if !row.IsOwner {
			return pubPlan{}, fmt.Errorf("publication %q: %w: role %q cannot make it publish partitioned tables through their root "+
				"(publish_via_partition_root): it is owned by %q; run as %q, or as %q run: %s",
				pub, ErrPermission, ss.Role, row.Owner, row.Owner, row.Owner, viaRootDDL(pub))
		}
	}
	for _, t := range plan.Missing {
		if tr := owned[t]; !tr.IsOwner {
			return pubPlan{}, fmt.Errorf("publication %q: %w: role %q cannot publish table %q: only the owner of a "+
				"table can add it to a publication, and %q owns it; run as %q, or as a superuser run: ALTER TABLE %s OWNER TO %s",
				pub, ErrPermission, ss.Role, t.String(), tr.Owner, tr.Owner,
				t.Sanitize(), pgx.Identifier{ss.Role}.Sanitize())
		}
	}
	return plan, nil
}

// applyPublication carries out plan. If another session created the
// publication or added a table since the plan was made, it plans again once.
// It returns the plan it carried out.
func (s *Store) applyPublication(ctx context.Context, ss session, pub string, tables []outbox.Table, plan pubPlan) (created bool, added []string, done pubPlan, err error) {
	for attempt := 0; ; attempt++ {
		created, added, err = s.applyPublicationOnce(ctx, ss, pub, plan)
		if err == nil || pgCode(err) != pgerrcode.DuplicateObject || attempt > 0 {
			return created, added, plan, err
		}
		filter := plan.Filter
		if plan, err = s.planPublication(ctx, ss, pub, tables); err != nil {
			return false, nil, plan, err
		}
		plan.Filter = filter
	}
}

func (s *Store) applyPublicationOnce(ctx context.Context, ss session, pub string, plan pubPlan) (created bool, added []string, err error) {
	if !plan.Exists {
		if _, err := s.conn.Exec(ctx, publicationDDL(pub, plan)); err != nil {
			return false, nil, ddlError("publication", pub, "create publication", ss.Role, err)
		}
		return true, nil, nil
	}
	// Root first: once a partitioned table is added, its changes are published under the
	// name the setting says.
	if plan.SetViaRoot {
		if _, err := s.conn.Exec(ctx, viaRootDDL(pub)); err != nil {
			return false, nil, ddlError("publication", pub, "set publish_via_partition_root on publication", ss.Role, err)
		}
	}
	if len(plan.Missing) == 0 {
		return false, nil, nil
	}
	if _, err := s.conn.Exec(ctx, addTablesDDL(pub, plan.Missing, plan.Filter)); err != nil {
		return false, nil, ddlError("publication", pub, "add tables to publication", ss.Role, err)
	}
	for _, t := range plan.Missing {
		added = append(added, t.String())
	}
	return false, added, nil
}

// createSlot makes the logical pgoutput slot. If another session created it
// meanwhile, it checks that slot's kind and reports created=false.
func (s *Store) createSlot(ctx context.Context, ss session, slot string, failover bool) (pglogrepl.LSN, bool, error) {
	var lsnText *string
	q := `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`
	if failover {
		q = `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)`
	}
	err := s.conn.QueryRow(ctx, q, slot).Scan(&lsnText)
	if pgCode(err) == pgerrcode.DuplicateObject {
		row, found, lerr := s.lookupSlot(ctx, slot)
		if lerr != nil {
			return 0, false, lerr
		}
		if found {
			return 0, false, checkSlotKind(slot, row.Type, row.Plugin, row.Database, ss.Database)
		}
	}
	if pgCode(err) == pgerrcode.InsufficientPrivilege {
		return 0, false, fmt.Errorf("%w (server said: %w)", replicationDenied(slot, "create a replication slot", ss.Role), err)
	}
	if err != nil {
		return 0, false, fmt.Errorf("slot %q: create logical replication slot: %w", slot, err)
	}
	lsn, err := scanLSN(lsnText)
	if err != nil {
		return 0, true, fmt.Errorf("slot %q: consistent point: %w", slot, err)
	}
	return lsn, true, nil
}

// createSlotWithSnapshot makes the logical pgoutput slot over the replication connection
// repl and exports its snapshot.
func createSlotWithSnapshot(ctx context.Context, repl *pgconn.PgConn, slot, role string) (pglogrepl.LSN, string, error) {
	r, err := pglogrepl.CreateReplicationSlot(ctx, repl, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
	switch {
	case pgCode(err) == pgerrcode.DuplicateObject:
		return 0, "", fmt.Errorf("slot %q: %w (created meanwhile by another session)", slot, ErrSlotExists)
	case pgCode(err) == pgerrcode.InsufficientPrivilege:
		return 0, "", fmt.Errorf("%w (server said: %w)", replicationDenied(slot, "create a replication slot", role), err)
	case err != nil:
		return 0, "", fmt.Errorf("slot %q: create logical replication slot with an exported snapshot: %w", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(r.ConsistentPoint)
	if err != nil {
		return 0, "", fmt.Errorf("slot %q: consistent point %q: %w", slot, r.ConsistentPoint, err)
	}
	return lsn, r.SnapshotName, nil
}

// ddlError wraps a failed DDL statement, adding ErrPermission when the
// server refused it for lack of privilege.
func ddlError(kind, name, what, role string, err error) error {
	if pgCode(err) == pgerrcode.InsufficientPrivilege {
		return fmt.Errorf("%s %q: %w: role %q cannot %s: %w", kind, name, ErrPermission, role, what, err)
	}
	return fmt.Errorf("%s %q: %s: %w", kind, name, what, err)
}

// ErrStandbyReadOnly means Create would have to change the publication on a standby.
var ErrStandbyReadOnly = errors.New("a standby cannot change publications")

// checkCreateWhere refuses a failover slot below PostgreSQL 17 or on a standby, and a slot on
// a standby below 16 (logical decoding on a standby came with 16).
func checkCreateWhere(o CreateOptions, version int, standby bool) error {
	switch {
	case o.Failover && version < 17:
		return fmt.Errorf("slot %q: %w: --failover needs PostgreSQL 17 or later, and this server is %d; below 17 a logical "+
			"slot does not survive a promotion: create the slot without --failover and see docs/failover.md for the "+
			"recovery procedure", o.Slot, ErrFailoverUnsupported, version)
	case o.Failover && standby:
		return fmt.Errorf("slot %q: %w: this server is a standby; create the failover slot on the primary "+
			"(the standby copies it when sync_replication_slots = on)", o.Slot, ErrFailoverUnsupported)
	case standby && version < 16:
		return fmt.Errorf("slot %q: %w: this server is a standby of PostgreSQL %d, and logical decoding on a standby needs 16 "+
			"or later; create the slot on the primary", o.Slot, ErrFailoverUnsupported, version)
	case o.ExportSnapshot != nil && standby:
		return fmt.Errorf("slot %q: %w: cutover needs the primary, since it marks rows as published", o.Slot, ErrStandbyReadOnly)
	}
	return nil
}

func tableList(ts []outbox.Table) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.String()
	}
	return strings.Join(names, ", ")
}

// publicationDDL is the statement (or statements, separated by "; ") that would carry out plan.
func publicationDDL(pub string, plan pubPlan) string {
	if !plan.Exists {
		with := "publish = 'insert'"
		if plan.SetViaRoot {
			with += ", publish_via_partition_root = true"
		}
		return "CREATE PUBLICATION " + pgx.Identifier{pub}.Sanitize() + " FOR TABLE " + sanitizeList(plan.Missing, plan.Filter) + " WITH (" + with + ")"
	}
	var stmts []string
	if plan.SetViaRoot {
		stmts = append(stmts, viaRootDDL(pub))
	}
	if len(plan.Missing) > 0 {
		stmts = append(stmts, addTablesDDL(pub, plan.Missing, plan.Filter))
	}
	return strings.Join(stmts, "; ")
}

// viaRootDDL makes publication pub publish partitioned tables through their root.
func viaRootDDL(pub string) string {
	return "ALTER PUBLICATION " + pgx.Identifier{pub}.Sanitize() + " SET (publish_via_partition_root = true)"
}

func addTablesDDL(pub string, tables []outbox.Table, filter string) string {
	return "ALTER PUBLICATION " + pgx.Identifier{pub}.Sanitize() + " ADD TABLE " + sanitizeList(tables, filter)
}

// sanitizeList is the quoted tables, each with the row filter WHERE (filter) when filter is not "".
func sanitizeList(ts []outbox.Table, filter string) string {
	list := make([]string, len(ts))
	for i, t := range ts {
		list[i] = t.Sanitize()
		if filter != "" {
			list[i] += " WHERE (" + filter + ")"
		}
	}
	return strings.Join(list, ", ")
}

// planWants says what plan would change, for a standby's refusal.
func planWants(plan pubPlan) string {
	var what []string
	if len(plan.Missing) > 0 {
		what = append(what, tableList(plan.Missing))
	}
	if plan.SetViaRoot {
		what = append(what, "publish_via_partition_root = true (it holds a partitioned table)")
	}
	return strings.Join(what, " and ")
}
