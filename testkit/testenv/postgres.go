package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/testkit/build"
)

// PGServer is a throwaway PostgreSQL server of the test's own: its data directory Data and log
// Log under a directory of the test's (PGDir), its binaries Bin and a free port. The one helper
// the Go tests use to run a server besides the shared one (TempPostgres, e2e/failover's
// primary and standby); scripts/lib/pg.sh is the dev scripts' equivalent. Started, it is
// stopped (-m immediate) at cleanup, and its log's tail is logged if the test failed.
type PGServer struct {
	Name           string // in messages: "primary"
	Bin, Data, Log string
	Port           int
	dir            string
}

// PGDir makes a directory for throwaway servers, removed at cleanup (registered before the
// servers' own cleanups, so it runs after them), and reachable by the postgres OS user when
// the test runs as root (the server refuses to run as root: AsPG).
func PGDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Getuid() == 0 {
		MustRun(t, exec.Command("chown", "postgres:", dir))
	}
	_ = os.Chmod(dir, 0o755)
	return dir
}

// NewPGServer names a server NAME in dir (data dir dir/NAME, log dir/NAME.log) on a free port,
// with the server binaries in bin; nothing is created yet (Init, or copy a data directory there).
func NewPGServer(t testing.TB, bin, dir, name string) *PGServer {
	t.Helper()
	s := &PGServer{Name: name, Bin: bin, Data: filepath.Join(dir, name), Log: filepath.Join(dir, name+".log"), Port: FreePort(t), dir: dir}
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(s.Data, "postmaster.pid")); err == nil {
			_ = s.ctl("stop", "-D", s.Data, "-m", "immediate", "-w", "-s").Run()
		}
		if t.Failed() {
			if b, err := os.ReadFile(s.Log); err == nil {
				t.Logf("%s log (last 4 KiB):\n%s", s.Name, tail(b, 4096))
			}
		}
	})
	return s
}

// Init initdb's the server (user postgres, trust on loopback and its socket, replication
// included) with postgresql.conf's lines for it (its port, loopback, socket in its dir, small
// and fsync off), then conf's (later lines win: "max_connections = 40").
func (s *PGServer) Init(t testing.TB, conf ...string) {
	t.Helper()
	MustRun(t, AsPG(filepath.Join(s.Bin, "initdb"), "-D", s.Data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "-N"))
	s.AppendConf(t, "postgresql.conf", append([]string{
		"listen_addresses = '127.0.0.1'",
		"port = " + strconv.Itoa(s.Port),
		"unix_socket_directories = '" + s.dir + "'",
		"max_connections = 30",
		"shared_buffers = 32MB",
		"fsync = off",
	}, conf...)...)
	s.WriteFile(t, "pg_hba.conf", "local all all trust\nhost all all 127.0.0.1/32 trust\nlocal replication all trust\nhost replication all 127.0.0.1/32 trust\n")
}

// AppendConf appends lines to a configuration file of the data directory (postgresql.conf,
// postgresql.auto.conf).
func (s *PGServer) AppendConf(t testing.TB, file string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(s.Data, file), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, strings.Join(lines, "\n")); err != nil {
		t.Fatal(err)
	}
}

// WriteFile writes a file into the data directory, owned by the server's OS user.
func (s *PGServer) WriteFile(t testing.TB, file, content string) {
	t.Helper()
	path := filepath.Join(s.Data, file)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		MustRun(t, exec.Command("chown", "postgres:", path))
	}
}

// Start starts the server and waits until it accepts connections.
func (s *PGServer) Start(t testing.TB) {
	t.Helper()
	if out, err := s.ctl("start", "-D", s.Data, "-l", s.Log, "-w", "-t", "60", "-s").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(s.Log)
		t.Fatalf("start the %s PostgreSQL: %v\n%s\n%s", s.Name, err, out, tail(log, 4096))
	}
}

// StopImmediate stops the server with -m immediate: no shutdown checkpoint, as a crash.
func (s *PGServer) StopImmediate(t testing.TB) {
	t.Helper()
	MustRun(t, s.ctl("stop", "-D", s.Data, "-m", "immediate", "-w", "-s"))
}

// Promote promotes a standby and waits until it accepts writes.
func (s *PGServer) Promote(t testing.TB) {
	t.Helper()
	MustRun(t, s.ctl("promote", "-D", s.Data, "-w", "-t", "60", "-s"))
}

// URL is the server's URL for database db (user postgres, trust, no TLS).
func (s *PGServer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

func (s *PGServer) ctl(args ...string) *exec.Cmd {
	return AsPG(filepath.Join(s.Bin, "pg_ctl"), args...)
}

// AsPG runs a command as the postgres OS user when the test runs as root (the server refuses
// root), as scripts/lib/common.sh's as_pg does.
func AsPG(name string, args ...string) *exec.Cmd {
	if os.Getuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// MustRun runs cmd and fails the test with its output if it fails.
func MustRun(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// PGBin returns the bin dir of PostgreSQL major's server binaries, installing them first if
// needed (scripts/pg-install.sh: Debian's 15, the other majors from Maven Central).
func PGBin(t testing.TB, major int) string {
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

// TempPostgres initdb's and starts a throwaway PostgreSQL of the test's own on a free port, with
// the given postgresql.conf lines (e.g. "wal_level = replica"), and returns its URL (database
// postgres, user postgres, trust). It is stopped and removed at cleanup. Tests use it for
// server-wide settings they must not change on the shared server. It needs the server binaries:
// CDC_RELAY_DEV_PG_BIN, which scripts/dev-up.sh exports.
func TempPostgres(t testing.TB, conf ...string) string {
	t.Helper()
	Require(t, "the PostgreSQL server binaries", "CDC_RELAY_DEV_PG_BIN")
	return StartPGServer(t, os.Getenv("CDC_RELAY_DEV_PG_BIN"), "cdc-relay-pg", "data", conf...).URL("postgres")
}

// StartPGServer is NewPGServer in a directory of the test's own (PGDir(t, prefix)), initdb'd
// with the given postgresql.conf lines and started; it is stopped and removed at cleanup.
func StartPGServer(t testing.TB, bin, prefix, name string, conf ...string) *PGServer {
	t.Helper()
	s := NewPGServer(t, bin, PGDir(t, prefix), name)
	s.Init(t, conf...)
	s.Start(t)
	return s
}
