package failover

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/build"
	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// server is one PostgreSQL server of a cluster.
type server struct {
	name string
	bin  string
	data string
	log  string
	port int
}

// url is the server's URL for database db.
func (s *server) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// cluster is a primary and a physical standby streaming from it through physical slot
// standbySlot, with failover slot sync on when the major supports it (17+).
type cluster struct {
	major            int
	dir              string
	primary, standby *server
}

const (
	db          = "cdc"
	standbySlot = "standby1"
)

// pgBin installs (if needed) and returns the bin dir of PostgreSQL major's server binaries.
func pgBin(t *testing.T, major int) string {
	t.Helper()
	root, err := build.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "pg-install.sh"), strconv.Itoa(major))
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/pg-install.sh %d: %v\n%s", major, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// asPG runs a server binary as the postgres OS user when we are root (the server refuses
// root), as scripts/lib/common.sh's as_pg does.
func asPG(name string, args ...string) *exec.Cmd {
	if os.Getuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func run(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

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
	bin := pgBin(t, major)
	dir, err := os.MkdirTemp("", "cdc-relay-failover")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		run(t, exec.Command("chown", "postgres:", dir))
	}
	_ = os.Chmod(dir, 0o755)
	c := &cluster{major: major, dir: dir,
		primary: &server{name: "primary", bin: bin, data: filepath.Join(dir, "primary"), log: filepath.Join(dir, "primary.log"), port: testenv.FreePort(t)},
		standby: &server{name: "standby", bin: bin, data: filepath.Join(dir, "standby"), log: filepath.Join(dir, "standby.log"), port: testenv.FreePort(t)},
	}
	t.Cleanup(func() {
		for _, s := range []*server{c.standby, c.primary} {
			_ = asPG(filepath.Join(bin, "pg_ctl"), "stop", "-D", s.data, "-m", "immediate", "-w", "-s").Run()
		}
		if t.Failed() {
			for _, s := range []*server{c.primary, c.standby} {
				if b, err := os.ReadFile(s.log); err == nil {
					t.Logf("%s log (last 4 KiB):\n%s", s.name, tail(b, 4096))
				}
			}
		}
		_ = os.RemoveAll(dir)
	})
	run(t, asPG(filepath.Join(bin, "initdb"), "-D", c.primary.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "-N"))
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		"port = " + strconv.Itoa(c.primary.port),
		"unix_socket_directories = '" + dir + "'",
		"wal_level = logical",
		"max_connections = 40",
		"shared_buffers = 32MB",
		"fsync = off",
		"hot_standby = on",
		"hot_standby_feedback = on",
		"max_wal_senders = 10",
		"max_replication_slots = 10",
		"wal_sender_timeout = 10s",
	}
	if major >= 17 {
		conf = append(conf, "synchronized_standby_slots = '"+standbySlot+"'")
	}
	appendConf(t, filepath.Join(c.primary.data, "postgresql.conf"), conf)
	c.primary.start(t)

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
	run(t, asPG("cp", "-a", c.primary.data, c.standby.data))
	for _, f := range []string{"postmaster.pid", "postmaster.opts"} {
		_ = os.Remove(filepath.Join(c.standby.data, f))
	}
	walDir := filepath.Join(c.standby.data, "pg_wal")
	entries, _ := os.ReadDir(walDir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(walDir, e.Name()))
	}
	run(t, asPG("mkdir", "-p", filepath.Join(walDir, "archive_status")))
	var label string
	if err := p.QueryRow(ctx, "SELECT labelfile FROM pg_backup_stop(false)").Scan(&label); err != nil {
		t.Fatalf("pg_backup_stop: %v", err)
	}
	sconf := []string{
		"port = " + strconv.Itoa(c.standby.port),
		fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres dbname=%s application_name=%s'", c.primary.port, db, standbySlot),
		"primary_slot_name = '" + standbySlot + "'",
		// Promoted, the standby is a primary without standbys: it must not wait for one.
		"synchronous_standby_names = ''",
	}
	if major >= 17 {
		sconf = append(sconf, "sync_replication_slots = on", "synchronized_standby_slots = ''")
	}
	writePG(t, filepath.Join(c.standby.data, "backup_label"), label)
	writePG(t, filepath.Join(c.standby.data, "standby.signal"), "")
	appendConf(t, filepath.Join(c.standby.data, "postgresql.auto.conf"), sconf)
	c.standby.start(t)
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

func (s *server) start(t *testing.T) {
	t.Helper()
	run(t, asPG(filepath.Join(s.bin, "pg_ctl"), "start", "-D", s.data, "-l", s.log, "-w", "-t", "60", "-s"))
}

// stopImmediate stops the server with -m immediate: no shutdown checkpoint, as a crash.
func (s *server) stopImmediate(t *testing.T) {
	t.Helper()
	run(t, asPG(filepath.Join(s.bin, "pg_ctl"), "stop", "-D", s.data, "-m", "immediate", "-w", "-s"))
}

// promote promotes the standby and waits until it accepts writes.
func (s *server) promote(t *testing.T) {
	t.Helper()
	run(t, asPG(filepath.Join(s.bin, "pg_ctl"), "promote", "-D", s.data, "-w", "-t", "60", "-s"))
}

// connect opens a normal connection to database dbname of s.
func (c *cluster) connect(t *testing.T, s *server, dbname string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.url(dbname))
	if err != nil {
		t.Fatalf("connect to the %s: %v", s.name, err)
	}
	return conn
}

// multiHost is the URL naming both servers, read-write sessions only: it leads to whichever is
// the primary.
func (c *cluster) multiHost() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		c.primary.port, c.standby.port, db)
}

func appendConf(t *testing.T, path string, lines []string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, strings.Join(lines, "\n")); err != nil {
		t.Fatal(err)
	}
}

// writePG writes a file into a data directory, owned by the server's OS user.
func writePG(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		run(t, exec.Command("chown", "postgres:", path))
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
