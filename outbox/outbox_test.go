package outbox_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/internal/contract"
	"github.com/cdc-relay/cdc-relay/outbox"
)

func TestParseHeaders(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // k=v;... in order
		bad  bool
	}{
		{`{"b": "x", "a": 1, "c": {"d": [1, 2]}, "e": null, "f": "a\"b\u00e9"}`, `a=1;b=x;c={"d": [1, 2]};e=null;f=a"bé`, false},
		{`null`, ``, false},
		{`{}`, ``, false},
		{`  {"k": "v"}  `, `k=v`, false},
		{`[1]`, ``, true},
		{`"s"`, ``, true},
		{`{"k": `, ``, true},
		{`{"outbox_id": "1", "x-cdc-lsn": "2"}`, `outbox_id=1;x-cdc-lsn=2`, false},
	} {
		hs, err := outbox.ParseHeaders([]byte(c.in))
		if c.bad {
			if !errors.Is(err, outbox.ErrBadHeaders) {
				t.Errorf("%s: got %v, want ErrBadHeaders", c.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		var got []string
		for _, h := range hs {
			got = append(got, h.Key+"="+string(h.Value))
		}
		if strings.Join(got, ";") != c.want {
			t.Errorf("%s: got %q, want %q", c.in, strings.Join(got, ";"), c.want)
		}
	}
}

// Reserved names make a bad row; the other headers are kept for the dead letter.
func TestParseHeadersRefusesReservedNames(t *testing.T) {
	for in, want := range map[string]string{
		`{"outbox-id": "1"}`:                          `headers: "outbox-id" is reserved by the record contract`,
		`{"cdc-lsn": "0/1", "k": "v"}`:                `headers: "cdc-lsn" is reserved by the record contract`,
		`{"Outbox-Table": "x", "dlq-error": "e"}`:     `headers: "Outbox-Table", "dlq-error" are reserved by the record contract`,
		`{"aggregate-id": 1, "event-type": "e"}`:      `headers: "aggregate-id", "event-type" are reserved by the record contract`,
		`{"cdc-commit-time": "t", "dlq-whatever": 1}`: `headers: "cdc-commit-time", "dlq-whatever" are reserved by the record contract`,
	} {
		hs, err := outbox.ParseHeaders([]byte(in))
		if !errors.Is(err, outbox.ErrReservedHeader) || err.Error() != want {
			t.Errorf("%s: got %v, want %s", in, err, want)
		}
		for _, h := range hs {
			if contract.Reserved(h.Key) {
				t.Errorf("%s: reserved header %q kept", in, h.Key)
			}
		}
	}
	if hs, _ := outbox.ParseHeaders([]byte(`{"cdc-lsn": "0/1", "k": "v"}`)); len(hs) != 1 || hs[0].Key != "k" {
		t.Errorf("the other headers are not kept for the dead letter: %v", hs)
	}
}

func TestParseTable(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, c := range []struct{ in, str, sql string }{
		{"outbox", "public.outbox", `"public"."outbox"`},
		{"app.outbox", "app.outbox", `"app"."outbox"`},
		{"Weird.Name", "Weird.Name", `"Weird"."Name"`},
		{`app.Out"box`, `app.Out"box`, `"app"."Out""box"`},
		{"Ops.Dead Letters", "Ops.Dead Letters", `"Ops"."Dead Letters"`}, // literal: no case folding
		{`a"b.c`, `a"b.c`, `"a""b"."c"`},
		{long + "." + long, long + "." + long, `"` + long + `"."` + long + `"`},
	} {
		tb, err := outbox.ParseTable(c.in)
		if err != nil || tb.String() != c.str || tb.Sanitize() != c.sql {
			t.Errorf("%s: %s %s, %v; want %s %s", c.in, tb, tb.Sanitize(), err, c.str, c.sql)
		}
	}
	for _, in := range []string{"", ".", "a.", ".b", "a.b.c", "a\x00b", strings.Repeat("x", 64), "public." + strings.Repeat("x", 64), "public.", "pub\x00lic.dead"} {
		if _, err := outbox.ParseTable(in); !errors.Is(err, outbox.ErrBadName) {
			t.Errorf("%q: %v, want ErrBadName", in, err)
		}
	}
}

func TestColumnsWithDefaults(t *testing.T) {
	got := outbox.Columns{Payload: "body"}.WithDefaults()
	want := outbox.Columns{ID: "id", AggregateID: "aggregate_id", Topic: "topic", Payload: "body", EventType: "event_type",
		Headers: "headers", CreatedAt: "created_at", PublishedAt: "published_at"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestRowErrorMessage(t *testing.T) {
	for _, c := range []struct {
		err  *outbox.RowError
		want string
	}{
		{&outbox.RowError{LSN: 0x16B3748, Relation: "public.outbox", ID: "42", Column: "aggregate_id", Err: outbox.ErrNullKey},
			`outbox: bad row at 0/16B3748 in public.outbox (id 42), column "aggregate_id": aggregate_id is NULL`},
		{&outbox.RowError{Relation: "app.outbox", ID: "7", Column: "payload", Err: outbox.ErrNullPayload}, // a polled row: no LSN
			`outbox: bad row in app.outbox (id 7), column "payload": payload is NULL`},
		{&outbox.RowError{Relation: "message:outbox"}, `outbox: bad row in message:outbox: unknown reason`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
		if !outbox.IsBadRow(fmt.Errorf("wrapped: %w", c.err)) || (c.err.Err != nil && !errors.Is(c.err, c.err.Err)) {
			t.Errorf("%s: IsBadRow or Unwrap broken", c.want)
		}
	}
	if outbox.IsBadRow(errors.New("x")) {
		t.Error("IsBadRow of a plain error")
	}
}
