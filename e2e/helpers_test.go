package e2e

import (
	"strconv"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// ids maps outbox ids (as text) to how many records carry them.
func ids(recs []*kgo.Record) map[string]int {
	m := make(map[string]int, len(recs))
	for _, r := range recs {
		m[testenv.Header(r, "outbox-id")]++
	}
	return m
}

// hasAll reports whether every id in want has arrived.
func hasAll(want []int64) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		got := ids(recs)
		for _, id := range want {
			if got[strconv.FormatInt(id, 10)] == 0 {
				return false
			}
		}
		return true
	}
}

func lsnOf(t *testing.T, r *kgo.Record) pglogrepl.LSN {
	t.Helper()
	lsn, err := pglogrepl.ParseLSN(testenv.Header(r, "cdc-lsn"))
	if err != nil {
		t.Fatalf("record %s: cdc-lsn %q: %v", testenv.Header(r, "outbox-id"), testenv.Header(r, "cdc-lsn"), err)
	}
	return lsn
}

func lsnLess(t *testing.T, a, b string) bool {
	t.Helper()
	x, err1 := pglogrepl.ParseLSN(a)
	y, err2 := pglogrepl.ParseLSN(b)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad LSNs %q %q", a, b)
	}
	return x < y
}
