package replication

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestValidate(t *testing.T) {
	ok := Config{ConnString: "postgres://x@h/db", Slot: "s_1", Publications: []string{"p"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"no url":           {Slot: "s", Publications: []string{"p"}},
		"upper-case slot":  {ConnString: "x", Slot: "Slot", Publications: []string{"p"}},
		"slot with quote":  {ConnString: "x", Slot: "s'; DROP", Publications: []string{"p"}},
		"no publication":   {ConnString: "x", Slot: "s"},
		"publication list": {ConnString: "x", Slot: "s", Publications: []string{"a,b"}},
		"negative":         {ConnString: "x", Slot: "s", Publications: []string{"p"}, StatusInterval: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestNewRejectsBadURLWithoutEchoingThePassword(t *testing.T) {
	_, err := New(Config{ConnString: "postgres://u:s3cret@host:notaport/db", Slot: "s", Publications: []string{"p"}})
	if err == nil {
		t.Fatal("bad URL accepted")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error leaks the password: %v", err)
	}
}

func TestAckOnlyMovesForward(t *testing.T) {
	s, err := New(Config{ConnString: "postgres://u@h/db", Slot: "s", Publications: []string{"p"}})
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
		{ErrSlotMissing, false},
		{ErrSlotLost, false},
		{ErrSlotActive, true},
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
		"active":      {&pgconn.PgError{Code: "55006", Message: `replication slot "s" is active for PID 7`}, ErrSlotActive},
		"missing":     {&pgconn.PgError{Code: "42704", Message: `replication slot "s" does not exist`}, ErrSlotMissing},
		"publication": {&pgconn.PgError{Code: "42704", Message: `publication "p" does not exist`}, ErrPublicationMissing},
		"lost":        {&pgconn.PgError{Code: "55000", Message: `can no longer get changes from replication slot "s"`}, ErrSlotLost},
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
}

func TestBackoffGrowsAndIsBounded(t *testing.T) {
	lo, hi := 100*time.Millisecond, 2*time.Second
	for attempt := 0; attempt < 40; attempt++ {
		d := backoff(lo, hi, attempt)
		ceil := min(lo<<min(attempt, 16), hi)
		if d < ceil/2 || d > ceil {
			t.Errorf("attempt %d: %s outside [%s, %s]", attempt, d, ceil/2, ceil)
		}
	}
}
