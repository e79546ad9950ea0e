package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// wantAll reports each of wants that text (what names it: a table, a file) lacks, with the text.
func wantAll(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}

// wantNothingLeft reports the tables, slots, publications and topics named prefix_* that a
// run left behind.
func wantNothingLeft(ctx context.Context, t *testing.T, e *env, prefix string) {
	t.Helper()
	like := strings.ReplaceAll(prefix, "_", `\_`) + `\_%`
	var left int
	err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_class WHERE relname LIKE $1)
     + (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1)
     + (SELECT count(*) FROM pg_publication WHERE pubname LIKE $1)`, like).Scan(&left)
	if err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d tables, slots and publications named %s_* left", left, prefix)
	}
	topics, err := e.adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, prefix+"_") {
			t.Errorf("topic %s left", name)
		}
	}
}

// wantInvalid checks that Validate refuses each configuration of cases with an error that
// says its key.
func wantInvalid[C interface{ Validate() error }](t *testing.T, cases map[string]C) {
	t.Helper()
	for want, c := range cases {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", c, err, want)
		}
	}
}

// needServices skips the test without PostgreSQL and Kafka (fails it under
// CDC_RELAY_REQUIRE_SERVICES) and returns a context that ends after d, or with the test.
func needServices(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	testenv.Require(t, "PostgreSQL and Kafka", "CDC_RELAY_PG_URL", "CDC_RELAY_BROKERS")
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testEnv is an env on the services for looking at what a run left, closed with the test.
func testEnv(ctx context.Context, t *testing.T) *env {
	t.Helper()
	e, err := newEnv(ctx, Config{Writers: 1}.withDefaults(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}
