package testenv

import (
	"os"
	"strings"
	"testing"
)

// RequireServicesEnv names the variable that, set to 1, makes a test whose services are not
// configured fail instead of skip; scripts/test.sh (make test) sets it, and CI=true does the same.
const RequireServicesEnv = "CDC_RELAY_REQUIRE_SERVICES"

// Strict reports whether a test that lacks its services must fail rather than skip: under CI
// (CI set to anything but "" or "false") or with CDC_RELAY_REQUIRE_SERVICES=1.
func Strict() bool {
	ci := strings.ToLower(os.Getenv("CI"))
	return (ci != "" && ci != "false" && ci != "0") || os.Getenv(RequireServicesEnv) == "1"
}

// Require is the one gate of every test that needs something outside the process: it returns
// when each of vars is set, and otherwise stops the test with one line naming what it needs
// and how to get it. Under Strict that line fails the test, so a green `make test` or CI run
// means the integration tests ran; otherwise it skips it, so that `go test ./...` on a machine
// without PostgreSQL and Kafka still runs every test that needs neither.
//
// The package's entry points (PGURL, Brokers, Pool, Kafka, NewFixture, NewRelayEnv,
// TempPostgres, SecureEnv, ...) call it; a test that reads the services' variables itself must
// call it first.
func Require(t testing.TB, what string, vars ...string) {
	t.Helper()
	require(t, what, hint, vars...)
}

// require is Require with the hint that says how to get what is missing: the services' script,
// or the registry's.
func require(t testing.TB, what, hint string, vars ...string) {
	t.Helper()
	var missing []string
	for _, v := range vars {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "needs " + what + ": " + strings.Join(missing, ", ") + " not set; " + hint
	if Strict() {
		t.Fatal(msg)
	}
	t.Skip(msg + " (a skip: CI=true or " + RequireServicesEnv + "=1 makes it a failure)")
}
