package bench

import (
	"context"
	"strings"
	"testing"
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
