package testenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/build"
)

// FreePort returns a loopback TCP port nobody listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// script runs scripts/NAME ARGS from the module root with the test's environment (so
// CDC_RELAY_DEV_DIR and the CDC_RELAY_DEV_*_PORT variables select which pair it controls).
func script(t testing.TB, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	root, err := build.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", name), args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// KafkaCtl runs scripts/kafka-ctl.sh ACTION (pause, resume, kill, start, restart) on the broker
// CDC_RELAY_BROKERS names, after checking that the script controls that broker.
func KafkaCtl(t testing.TB, action string) {
	t.Helper()
	CheckControlled(t)
	script(t, 3*time.Minute, "kafka-ctl.sh", action)
}

// PGCtl runs scripts/pg-ctl.sh ACTION (restart, stop, start, kill) on the server
// CDC_RELAY_PG_URL names, after checking that the script controls that server.
func PGCtl(t testing.TB, action string) {
	t.Helper()
	CheckControlled(t)
	script(t, 3*time.Minute, "pg-ctl.sh", action)
}

// CheckControlled fails the test unless scripts/kafka-ctl.sh and scripts/pg-ctl.sh control the
// very services the test talks to: the ports in CDC_RELAY_BROKERS and CDC_RELAY_PG_URL must be
// the ones the scripts use (CDC_RELAY_DEV_KAFKA_PORT, CDC_RELAY_DEV_PG_PORT or their defaults).
// Pausing some other broker would prove nothing and disturb whoever uses it.
func CheckControlled(t testing.TB) {
	t.Helper()
	want := func(env, def string) string {
		if v := os.Getenv(env); v != "" {
			return v
		}
		return def
	}
	kport := want("CDC_RELAY_DEV_KAFKA_PORT", "19092")
	pport := want("CDC_RELAY_DEV_PG_PORT", "15432")
	brokers := Brokers(t)
	if len(brokers) != 1 || !strings.HasSuffix(brokers[0], ":"+kport) {
		t.Fatalf("CDC_RELAY_BROKERS=%v is not the broker scripts/kafka-ctl.sh controls (port %s): "+
			"start the pair with scripts/dev-up.sh under the same CDC_RELAY_DEV_* variables", brokers, kport)
	}
	u, err := url.Parse(PGURL(t))
	if err != nil || u.Port() != pport {
		t.Fatalf("CDC_RELAY_PG_URL=%s is not the server scripts/pg-ctl.sh controls (port %s): "+
			"start the pair with scripts/dev-up.sh under the same CDC_RELAY_DEV_* variables", PGURL(t), pport)
	}
}

// TempPostgres initdb's and starts a throwaway PostgreSQL of the test's own on a free port, with
// the given postgresql.conf lines (e.g. "wal_level = replica"), and returns its URL (database
// postgres, user postgres, trust). It is stopped and removed at cleanup. Tests use it for
// server-wide settings they must not change on the shared server. It needs the server binaries:
// CDC_RELAY_DEV_PG_BIN, which scripts/dev-up.sh exports.
func TempPostgres(t testing.TB, conf ...string) string {
	t.Helper()
	Require(t, "the PostgreSQL server binaries", "CDC_RELAY_DEV_PG_BIN")
	bin := os.Getenv("CDC_RELAY_DEV_PG_BIN")
	dir, err := os.MkdirTemp("", "cdc-relay-pg")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	port := FreePort(t)
	asPG := func(name string, args ...string) *exec.Cmd {
		if os.Getuid() == 0 { // the server refuses to run as root
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
		return exec.Command(filepath.Join(bin, name), args...)
	}
	if os.Getuid() == 0 {
		if out, err := exec.Command("chown", "postgres:", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v\n%s", dir, err, out)
		}
		_ = os.Chmod(dir, 0o755)
	}
	t.Cleanup(func() {
		_ = asPG("pg_ctl", "stop", "-D", data, "-m", "immediate", "-w", "-s").Run()
		_ = os.RemoveAll(dir)
	})
	if out, err := asPG("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "-N").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	lines := append([]string{
		"listen_addresses = '127.0.0.1'",
		"port = " + strconv.Itoa(port),
		"unix_socket_directories = '" + dir + "'",
		"max_connections = 30",
		"shared_buffers = 32MB",
		"fsync = off",
	}, conf...)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, strings.Join(lines, "\n"))
	f.Close()
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\nlocal replication all trust\nhost replication all 127.0.0.1/32 trust\n"
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		_ = exec.Command("chown", "-R", "postgres:", data).Run()
	}
	if out, err := asPG("pg_ctl", "start", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "-s").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		t.Fatalf("start a throwaway PostgreSQL: %v\n%s\n%s", err, out, log)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}
