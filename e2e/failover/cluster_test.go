package failover

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// cluster is a primary and a physical standby streaming from it through physical slot
// standbySlot, with failover slot sync on when the major supports it (17+).
type cluster struct {
	major            int
	dir              string
	primary, standby *testenv.PGServer
}

const (
	db          = "cdc"
	standbySlot = "standby1"
)

// newCluster initdb's a primary of the given major, starts it, makes a standby of it without
// pg_basebackup (whose Debian 15 build refuses other majors): pg_backup_start, a copy of the
// data directory, pg_backup_stop's label as backup_label, standby.signal and primary_conninfo;
// and waits until the standby streams. Writes are synchronous to the standby, so a commit a
// writer saw succeed survives the promotion. Both are stopped and removed at cleanup.
func newCluster(t *testing.T, major int) *cluster {
	t.Helper()
	// The servers are the test's own; Kafka is the shared one. Asked first, before installing
	// and starting anything.
	testenv.Require(t, "Kafka", "CDC_RELAY_BROKERS")
	bin := testenv.PGBin(t, major)
	dir := testenv.PGDir(t, "cdc-relay-failover")
	c := &cluster{major: major, dir: dir,
		primary: testenv.NewPGServer(t, bin, dir, "primary"),
		standby: testenv.NewPGServer(t, bin, dir, "standby"),
	}
	conf := []string{
		"wal_level = logical",
		"max_connections = 40",
		"hot_standby = on",
		"hot_standby_feedback = on",
		"max_wal_senders = 10",
		"max_replication_slots = 10",
		"wal_sender_timeout = 10s",
	}
	if major >= 17 {
		conf = append(conf, "synchronized_standby_slots = '"+standbySlot+"'")
	}
	c.primary.Init(t, conf...)
	c.primary.Start(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := c.connect(t, c.primary, "postgres")
	defer p.Close(ctx)
	for _, q := range []string{"CREATE DATABASE " + db, "SELECT pg_create_physical_replication_slot('" + standbySlot + "')"} {
		if _, err := p.Exec(ctx, q); err != nil {
			t.Fatalf("primary: %s: %v", q, err)
		}
	}
	// The base backup, by hand: a non-exclusive backup stays open in this session.
	if _, err := p.Exec(ctx, "SELECT pg_backup_start('cdc-relay-failover-test', true)"); err != nil {
		t.Fatalf("pg_backup_start: %v", err)
	}
	testenv.MustRun(t, testenv.AsPG("cp", "-a", c.primary.Data, c.standby.Data))
	for _, f := range []string{"postmaster.pid", "postmaster.opts"} {
		_ = os.Remove(filepath.Join(c.standby.Data, f))
	}
	walDir := filepath.Join(c.standby.Data, "pg_wal")
	entries, _ := os.ReadDir(walDir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(walDir, e.Name()))
	}
	testenv.MustRun(t, testenv.AsPG("mkdir", "-p", filepath.Join(walDir, "archive_status")))
	var label string
	if err := p.QueryRow(ctx, "SELECT labelfile FROM pg_backup_stop(false)").Scan(&label); err != nil {
		t.Fatalf("pg_backup_stop: %v", err)
	}
	sconf := []string{
		"port = " + strconv.Itoa(c.standby.Port),
		fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres dbname=%s application_name=%s'", c.primary.Port, db, standbySlot),
		"primary_slot_name = '" + standbySlot + "'",
		// Promoted, the standby is a primary without standbys: it must not wait for one.
		"synchronous_standby_names = ''",
	}
	if major >= 17 {
		sconf = append(sconf, "sync_replication_slots = on", "synchronized_standby_slots = ''")
	}
	c.standby.WriteFile(t, "backup_label", label)
	c.standby.WriteFile(t, "standby.signal", "")
	c.standby.AppendConf(t, "postgresql.auto.conf", sconf...)
	c.standby.Start(t)
	c.waitStreaming(t)
	// Synchronous from now on (set after the standby streams, or the statements above would wait).
	for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = '" + standbySlot + "'", "SELECT pg_reload_conf()"} {
		if _, err := p.Exec(ctx, q); err != nil {
			t.Fatalf("primary: %s: %v", q, err)
		}
	}
	return c
}

// waitStreaming waits until the standby streams from the primary through its slot.
func (c *cluster) waitStreaming(t *testing.T) {
	t.Helper()
	p := c.connect(t, c.primary, db)
	defer p.Close(context.Background())
	testenv.Eventually(t, 60*time.Second, "the standby to stream", func() bool {
		var n int
		_ = p.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'`, standbySlot).Scan(&n)
		return n == 1
	})
}

// connect opens a normal connection to database dbname of s.
func (c *cluster) connect(t *testing.T, s *testenv.PGServer, dbname string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL(dbname))
	if err != nil {
		t.Fatalf("connect to the %s: %v", s.Name, err)
	}
	return conn
}

// multiHost is the URL naming both servers, read-write sessions only: it leads to whichever is
// the primary.
func (c *cluster) multiHost() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		c.primary.Port, c.standby.Port, db)
}
