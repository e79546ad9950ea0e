package testenv

import (
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/build"
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
