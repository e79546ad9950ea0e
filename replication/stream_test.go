package replication

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
)

func mustParse(t *testing.T, s string) *pgx.ConnConfig {
	t.Helper()
	cc, err := pgx.ParseConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func TestValidate(t *testing.T) {
	cc := mustParse(t, "postgres://x@h/db")
	ok := Config{Conn: cc, Slot: "s_1", Publications: []string{"p"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"no connection":    {Slot: "s", Publications: []string{"p"}},
		"upper-case slot":  {Conn: cc, Slot: "Slot", Publications: []string{"p"}},
		"slot with quote":  {Conn: cc, Slot: "s'; DROP", Publications: []string{"p"}},
		"no publication":   {Conn: cc, Slot: "s"},
		"publication list": {Conn: cc, Slot: "s", Publications: []string{"a,b"}},
		"negative":         {Conn: cc, Slot: "s", Publications: []string{"p"}, StatusInterval: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A multi-host configuration reaches the replication connection whole: every host as a
// fallback and the target_session_attrs check, so a failover finds the new primary. The
// caller's configuration is not changed (the other connections copy it too).
func TestNewKeepsTheFallbacksAndTheSessionCheck(t *testing.T) {
	cc := mustParse(t, "host=pg-a,pg-b port=5432,5433 user=u dbname=db sslmode=disable target_session_attrs=read-write connect_timeout=3")
	if len(cc.Fallbacks) != 1 || cc.ValidateConnect == nil {
		t.Fatalf("pgx parsed %d fallbacks, ValidateConnect %v: the test's premise is off", len(cc.Fallbacks), cc.ValidateConnect != nil)
	}
	s, err := New(Config{Conn: cc, Slot: "s", Publications: []string{"p"}})
	if err != nil {
		t.Fatal(err)
	}
	rc := s.connCfg
	if rc.Host != "pg-a" || rc.Port != 5432 || len(rc.Fallbacks) != 1 || rc.Fallbacks[0].Host != "pg-b" || rc.Fallbacks[0].Port != 5433 {
		t.Errorf("replication connection tries %s:%d then %+v, want pg-a:5432 then pg-b:5433", rc.Host, rc.Port, rc.Fallbacks)
	}
	if rc.ValidateConnect == nil {
		t.Error("the replication connection lost target_session_attrs=read-write: it would stream from a standby after a failover")
	}
	if rc.RuntimeParams["replication"] != "database" || rc.ConnectTimeout != 3*time.Second {
		t.Errorf("replication=%q, connect timeout %s; want database, 3s", rc.RuntimeParams["replication"], rc.ConnectTimeout)
	}
	if _, ok := cc.RuntimeParams["replication"]; ok || rc.Fallbacks[0] == cc.Fallbacks[0] {
		t.Error("New changed or shares the caller's configuration; it must work on a copy")
	}
}

func TestAckOnlyMovesForward(t *testing.T) {
	s, err := New(Config{Conn: mustParse(t, "postgres://u@h/db"), Slot: "s", Publications: []string{"p"}})
	if err != nil {
		t.Fatal(err)
	}
	s.Ack(100)
	s.Ack(50)
	if s.Flushed() != 100 {
		t.Fatalf("flushed %s after a lower Ack", s.Flushed())
	}
	s.Ack(200)
	if s.Flushed() != 200 {
		t.Fatalf("flushed %s", s.Flushed())
	}
}

func TestIsRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{io.EOF, true},
		{&pgconn.PgError{Code: "57P01"}, true}, // pg_terminate_backend / fast shutdown
		{&pgconn.PgError{Code: "57P03"}, true}, // starting up
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "28P01"}, false}, // wrong password
		{&pgconn.PgError{Code: "42501"}, false}, // permission
		{slotfacts.ErrSlotMissing, false},
		{slotfacts.ErrSlotLost, false},
		{slotfacts.ErrSlotActive, true},
		{nil, false},
	} {
		if got := IsRetryable(c.err); got != c.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestClassifyServerErrors(t *testing.T) {
	cases := map[string]struct {
		pg   *pgconn.PgError
		want error
	}{
		"active":      {&pgconn.PgError{Code: "55006", Message: `replication slot "s" is active for PID 7`}, slotfacts.ErrSlotActive},
		"missing":     {&pgconn.PgError{Code: "42704", Message: `replication slot "s" does not exist`}, slotfacts.ErrSlotMissing},
		"publication": {&pgconn.PgError{Code: "42704", Message: `publication "p" does not exist`}, slotfacts.ErrPublicationMissing},
		"lost":        {&pgconn.PgError{Code: "55000", Message: `can no longer get changes from replication slot "s"`}, slotfacts.ErrSlotLost},
	}
	for name, c := range cases {
		err := classify(c.pg, "s")
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v is not %v", name, err, c.want)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			t.Errorf("%s: the server's error is not kept", name)
		}
	}
	if err := classify(io.EOF, "s"); err != io.EOF {
		t.Errorf("non-server error changed: %v", err)
	}
	if msg := classify(cases["lost"].pg, "s").Error(); !strings.Contains(msg, "slot drop") || !strings.Contains(msg, "slot create") {
		t.Errorf("a lost slot must say how to recover: %s", msg)
	}
	// A slot invalidated for another reason than removed WAL (rows_removed on a standby,
	// wal_level_insufficient, idle_timeout on 18) must not be blamed on max_slot_wal_keep_size:
	// the message carries the server's own detail and points to slot status for the reason.
	conflict := &pgconn.PgError{Code: "55000", Message: `can no longer get changes from replication slot "s"`,
		Detail: "This slot has been invalidated because it was conflicting with recovery."}
	msg := classify(conflict, "s").Error()
	if strings.Contains(msg, "max_slot_wal_keep_size") || !strings.Contains(msg, "conflicting with recovery") || !strings.Contains(msg, "slot status") {
		t.Errorf("a slot lost to a recovery conflict must say so, not blame max_slot_wal_keep_size: %s", msg)
	}
}
