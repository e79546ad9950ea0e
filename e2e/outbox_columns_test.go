package e2e

// The outbox table's columns: what the payload column may be and hold, and columns and tables
// that change while the relay streams.

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// protobufBytes are protobuf bytes with 0x00 and bytes that are not UTF-8: what a bytea
// payload column holds and its record's value must be, exactly.
var protobufBytes = []byte{0x0a, 0x05, 'h', 'e', 'l', 'l', 'o', 0x10, 0x00, 0xff, 0x80, 0xfe, 0x00}

// payloadType changes the fixture's (empty) payload column to typ.
func payloadType(t *testing.T, f *testenv.Fixture, typ string) {
	t.Helper()
	if _, err := f.Pool.Exec(context.Background(), `ALTER TABLE `+f.Table+` ALTER COLUMN payload TYPE `+typ+` USING NULL`); err != nil {
		t.Fatal(err)
	}
}

// insertPayload writes one row whose payload is payload (a []byte for bytea, a string for
// text; nil for NULL) and returns its outbox id as the outbox-id header says it.
func insertPayload(t *testing.T, f *testenv.Fixture, topic, key string, payload any, headers string) string {
	t.Helper()
	var h any
	if headers != "" {
		h = headers
	}
	return strconv.FormatInt(f.InsertValues(t, f.Table, "aggregate_id, topic, payload, headers", "$1, $2, $3, $4::jsonb", key, topic, payload, h), 10)
}

// wantBytes reports a record whose value is not want exactly, or whose content-type (with
// --format cloudevents) is not ct.
func wantBytes(t *testing.T, what string, r *kgo.Record, want []byte, ct string) {
	t.Helper()
	switch {
	case r == nil:
		t.Errorf("%s: no record", what)
	case !bytes.Equal(r.Value, want) || (r.Value == nil) != (want == nil):
		t.Errorf("%s: value %q (%x), want %x", what, r.Value, r.Value, want)
	case testenv.Header(r, "content-type") != ct || headerCount(r, "content-type") != 1:
		t.Errorf("%s: content-type headers %v, want %s once", what, r.Headers, ct)
	}
}

// byteaRows inserts the rows both publishers' bytea tests publish: protobuf bytes, an empty
// bytea, and protobuf bytes whose row names its own content-type.
func byteaRows(t *testing.T, f *testenv.Fixture) (proto, empty, typed string) {
	proto = insertPayload(t, f, f.Topic, "k1", protobufBytes, "")
	empty = insertPayload(t, f, f.Topic, "k2", []byte{}, "")
	typed = insertPayload(t, f, f.Topic, "k3", protobufBytes, `{"content-type": "application/x-protobuf"}`)
	return proto, empty, typed
}

func checkByteaRecords(t *testing.T, cons *testenv.Consumer, proto, empty, typed string) {
	t.Helper()
	recs := byOutboxID(cons.WaitFor(t, 60*time.Second, "the three bytea rows", func(r []*kgo.Record) bool { return len(r) >= 3 }))
	wantBytes(t, "protobuf bytes", recs[proto], protobufBytes, "application/octet-stream")
	wantBytes(t, "empty bytea", recs[empty], []byte{}, "application/octet-stream")
	wantBytes(t, "protobuf bytes with the row's content-type", recs[typed], protobufBytes, "application/x-protobuf")
}

// `run`: a bytea payload's record value is its bytes exactly (0x00 and invalid UTF-8
// included; pgoutput sends its hex text), an empty bytea an empty value, and a CloudEvent's
// content-type says application/octet-stream unless the row names its own.
func TestByteaPayloadIsItsBytesRun(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	payloadType(t, e.F, "bytea")
	cons := testenv.Consume(t, e.F.Topic)
	p := e.Start(t, nil, "--format", "cloudevents")
	proto, empty, typed := byteaRows(t, e.F)
	checkByteaRecords(t, cons, proto, empty, typed)
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
}

// `poll`: the same records as run's.
func TestByteaPayloadIsItsBytesPoll(t *testing.T) {
	t.Parallel()
	e := newPollEnv(t)
	payloadType(t, e.F, "bytea")
	cons := testenv.Consume(t, e.F.Topic)
	proto, empty, typed := byteaRows(t, e.F)
	p := e.Start(t, nil, "--format", "cloudevents")
	checkByteaRecords(t, cons, proto, empty, typed)
	if p.Exited() {
		t.Fatalf("the poller exited:\n%s", p.Output())
	}
}

// A payload column of a type the relay does not publish is refused at start (exit 2) by run
// and poll, with a message that names the column, its type and the types that work.
func TestPayloadColumnOfAnotherTypeIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	payloadType(t, e.F, "integer")
	for _, args := range [][]string{
		{"run", "--dlq-topic", e.F.DLQ},
		{"poll", "--table", e.F.Table, "--dlq-topic", e.F.DLQ},
	} {
		out, errOut, code := testenv.Run(t, 30*time.Second, e.Bin, e.Env, args...)
		if code != 2 || !strings.Contains(errOut, `column "payload" of `+e.F.Table+` is of type integer`) ||
			!strings.Contains(errOut, "bytea, text, varchar, json, jsonb") {
			t.Errorf("%s: exit %d, want 2 naming the type and the types that work\n%s%s", args[0], code, out, errOut)
		}
	}
}

// A NULL payload with --null-payload tombstone is a record with a null value (a compacted
// topic's delete); an empty payload is an empty, non-null value. The same in run (both
// delivery modes) and poll.
func TestNullPayloadTombstone(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, f *testenv.Fixture, cons *testenv.Consumer, p *testenv.Proc, ids [3]string) {
		t.Helper()
		recs := byOutboxID(cons.WaitFor(t, 60*time.Second, "the three rows", func(r []*kgo.Record) bool { return len(r) >= 3 }))
		if r := recs[ids[0]]; r == nil || r.Value != nil || string(r.Key) != "gone" {
			t.Errorf("NULL payload: %+v, want a null value keyed gone", r)
		}
		if r := recs[ids[1]]; r == nil || r.Value == nil || len(r.Value) != 0 {
			t.Errorf("empty payload: %+v, want an empty, non-null value", r)
		}
		if r := recs[ids[2]]; r == nil || string(r.Value) != "v" {
			t.Errorf("payload v: %+v", r)
		}
		if n := testenv.EndOffset(t, f.DLQ); n != 0 {
			t.Errorf("%d dead letters, want none", n)
		}
		if p.Exited() {
			t.Fatalf("exited:\n%s", p.Output())
		}
	}
	rows := func(f *testenv.Fixture) [3]string {
		return [3]string{insertPayload(t, f, f.Topic, "gone", nil, ""), insertPayload(t, f, f.Topic, "empty", "", ""), insertPayload(t, f, f.Topic, "k", "v", "")}
	}
	// A publisher: its fixture, how it starts with the given arguments, its consumer's options,
	// and whether the rows are written before it starts (the poller's) or after.
	type publisher struct {
		f         *testenv.Fixture
		start     func(args ...string) *testenv.Proc
		opts      []kgo.Opt
		rowsFirst bool
	}
	for _, c := range []struct {
		name string
		pub  func(t *testing.T) publisher
	}{
		{"run", func(t *testing.T) publisher {
			e := testenv.NewRelayEnv(t, false)
			return publisher{f: e.F, start: func(args ...string) *testenv.Proc { return e.Start(t, nil, args...) }}
		}},
		{"run-exactly-once", func(t *testing.T) publisher {
			e := newEOSEnv(t)
			return publisher{f: e.F, start: func(args ...string) *testenv.Proc { return e.start(t, nil, args...) },
				opts: []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}}
		}},
		{"poll", func(t *testing.T) publisher {
			e := newPollEnv(t)
			return publisher{f: e.F, start: func(args ...string) *testenv.Proc { return e.Start(t, nil, args...) }, rowsFirst: true}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pub := c.pub(t)
			payloadType(t, pub.f, "text")
			cons := testenv.Consume(t, pub.f.Topic, pub.opts...)
			var ids [3]string
			if pub.rowsFirst {
				ids = rows(pub.f)
			}
			p := pub.start("--null-payload", "tombstone")
			if !pub.rowsFirst {
				ids = rows(pub.f)
			}
			check(t, pub.f, cons, p, ids)
		})
	}
	// Without the flag a NULL payload stays a bad row.
	t.Run("poll-default", func(t *testing.T) {
		t.Parallel()
		e := newPollEnv(t)
		payloadType(t, e.F, "text")
		dlq := testenv.Consume(t, e.F.DLQ)
		id := insertPayload(t, e.F, e.F.Topic, "gone", nil, "")
		e.Start(t, nil)
		r := dlq.WaitFor(t, 60*time.Second, "the dead letter", func(r []*kgo.Record) bool { return len(r) >= 1 })[0]
		if testenv.Header(r, "outbox-id") != id || !strings.Contains(testenv.Header(r, "dlq-error"), "payload is NULL") {
			t.Errorf("dead letter %v", r.Headers)
		}
	})
}

// Schema changes mid-stream follow the new Relation messages: a column added to the outbox
// (a mapped optional one, and one the relay does not map) is used by the rows that have it; a
// mapped column renamed away makes rows bad (dead-lettered, the stream goes on) until it is
// renamed back; a second outbox table added to the publication is published from its first
// row, without a restart.
func TestSchemaChangesMidStream(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := f.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`ALTER TABLE ` + f.Table + ` DROP COLUMN event_type`)
	p := e.Start(t, nil)
	cons := testenv.Consume(t, f.Topic)
	dlq := testenv.Consume(t, f.DLQ)
	byID := func(recs []*kgo.Record, id int64) *kgo.Record { return byOutboxID(recs)[strconv.FormatInt(id, 10)] }

	before := f.InsertValues(t, f.Table, `aggregate_id, topic, payload`, `'k1', $1, '{"n": 1}'`, f.Topic)
	cons.WaitFor(t, 30*time.Second, "a row before any change", hasAll([]int64{before}))

	// ADD COLUMN: the mapped optional event_type, and a column the relay does not know.
	exec(`ALTER TABLE ` + f.Table + ` ADD COLUMN event_type text, ADD COLUMN tenant text`)
	added := f.InsertValues(t, f.Table, `aggregate_id, topic, payload, event_type, tenant`, `'k1', $1, '{"n": 2}', 'order.created', 'acme'`, f.Topic)
	recs := cons.WaitFor(t, 30*time.Second, "a row using the added columns", hasAll([]int64{added}))
	if r := byID(recs, added); testenv.Header(r, "event-type") != "order.created" {
		t.Errorf("the added event_type column was not mapped: headers %v", r.Headers)
	}
	if r := byID(recs, before); testenv.Header(r, "event-type") != "" {
		t.Errorf("a row from before the column existed has event-type %q", testenv.Header(r, "event-type"))
	}

	// RENAME a mapped column away: bad rows, dead-lettered with the reason; then back.
	exec(`ALTER TABLE ` + f.Table + ` RENAME COLUMN aggregate_id TO agg_id`)
	renamed := f.InsertValues(t, f.Table, `agg_id, topic, payload`, `'k1', $1, '{"n": 3}'`, f.Topic)
	exec(`ALTER TABLE ` + f.Table + ` RENAME COLUMN agg_id TO aggregate_id`)
	back := f.InsertValues(t, f.Table, `aggregate_id, topic, payload`, `'k1', $1, '{"n": 4}'`, f.Topic)
	dl := dlq.WaitFor(t, 30*time.Second, "the row written while aggregate_id was renamed", hasAll([]int64{renamed}))
	if r := byID(dl, renamed); !strings.Contains(testenv.Header(r, "dlq-error"), `column "aggregate_id": mapped column is not in the relation`) {
		t.Errorf("dlq-error %q", testenv.Header(r, "dlq-error"))
	}

	// A second outbox table joins the publication.
	second := f.Table + "_second"
	exec(testenv.OutboxDDL(second))
	t.Cleanup(func() { _, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+second) })
	exec(`SELECT setval(pg_get_serial_sequence($1, 'id'), 1000)`, second) // ids apart from the first table's
	if out, errOut, code := testenv.Run(t, 30*time.Second, e.Bin, e.Env, "slot", "create", "--table", f.Table+","+second); code != 0 ||
		!strings.Contains(out, "added to publication") {
		t.Fatalf("slot create --table %s: exit %d\n%s%s", second, code, out, errOut)
	}
	fromSecond := f.InsertValues(t, second, `aggregate_id, topic, payload`, `'k9', $1, '{"n": 5}'`, f.Topic)
	after := f.InsertValues(t, f.Table, `aggregate_id, topic, payload`, `'k1', $1, '{"n": 6}'`, f.Topic)

	recs = cons.WaitFor(t, 30*time.Second, "rows after every change", hasAll([]int64{back, fromSecond, after}))
	if byID(recs, renamed) != nil {
		t.Errorf("the row without aggregate_id was published")
	}
	if r := byID(recs, fromSecond); string(r.Key) != "k9" {
		t.Errorf("row of the second table: key %q", r.Key)
	}
	// Per key in commit order: before, added, back, after.
	var order []string
	for _, r := range recs {
		if string(r.Key) == "k1" {
			order = append(order, testenv.Header(r, "outbox-id"))
		}
	}
	want := []string{strconv.FormatInt(before, 10), strconv.FormatInt(added, 10), strconv.FormatInt(back, 10), strconv.FormatInt(after, 10)}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("key k1 arrived as %v, want %v", order, want)
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
}
