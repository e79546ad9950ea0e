package e2e

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// wireValues returns the values of recs, and fails the test unless each is in the wire format
// (magic byte 0) with schema id id.
func wireValues(t *testing.T, recs []*kgo.Record, id int) [][]byte {
	t.Helper()
	values := make([][]byte, len(recs))
	for i, r := range recs {
		if len(r.Value) < 5 || r.Value[0] != 0 || int(binary.BigEndian.Uint32(r.Value[1:5])) != id {
			t.Fatalf("record %s: value %q is not the wire format with schema id %d", testenv.Header(r, "outbox-id"), r.Value, id)
		}
		values[i] = r.Value
	}
	return values
}

// checkAvroRecords checks that recs are the rows of want (outbox id -> n), each once, in the
// wire format with schema id, compressed with codec, and read back by Apache Avro (Java).
func checkAvroRecords(t *testing.T, url string, id int, codec uint8, recs []*kgo.Record, want map[string]int) {
	t.Helper()
	values := wireValues(t, recs, id)
	for _, r := range recs {
		if c := r.Attrs.CompressionType(); c != codec {
			t.Errorf("record %s: batch codec %d, want %d", testenv.Header(r, "outbox-id"), c, codec)
		}
	}
	decoded := javaAvroRead(t, url, values)
	seen := map[string]int{}
	for i, r := range recs {
		oid := testenv.Header(r, "outbox-id")
		n, ok := want[oid]
		if !ok {
			t.Fatalf("record of unexpected outbox id %s (Java read %v)", oid, decoded[i])
		}
		if g := fmt.Sprint(decoded[i]["n"]); g != strconv.Itoa(n) {
			t.Errorf("outbox id %s: Java read %v, want n=%d", oid, decoded[i], n)
		}
		seen[oid]++
	}
	for oid := range want {
		if seen[oid] != 1 {
			t.Errorf("outbox id %s: %d records, want 1", oid, seen[oid])
		}
	}
}

// checkSchemaLetter checks the one dead letter of the row whose payload does not fit.
func checkSchemaLetter(t *testing.T, letters []*kgo.Record, bad int64, subject string, id int) {
	t.Helper()
	if len(letters) != 1 || testenv.Header(letters[0], "outbox-id") != strconv.FormatInt(bad, 10) {
		t.Fatalf("%d dead letters, want the one of outbox id %d", len(letters), bad)
	}
	l := letters[0]
	if testenv.Header(l, "dlq-schema-subject") != subject || testenv.Header(l, "dlq-schema-id") != strconv.Itoa(id) || testenv.Header(l, "dlq-class") != "bad-row" {
		t.Errorf("dead letter: subject %q, schema id %q, class %q; want %s, %d, bad-row", testenv.Header(l, "dlq-schema-subject"),
			testenv.Header(l, "dlq-schema-id"), testenv.Header(l, "dlq-class"), subject, id)
	}
}

// avroRows registers orderAvro under the subject of the fixture topic's values and writes
// insertAvroRows' ten fitting rows and the one that does not fit.
func avroRows(t *testing.T, url string, f *testenv.Fixture) (subject string, id int, want map[string]int, bad int64) {
	t.Helper()
	subject = f.Topic + "-value"
	id = registerAvro(t, url, subject, orderAvro)
	want, bad = insertAvroRows(t, f, 10)
	return subject, id, want, bad
}

// insertAvroRows writes n fitting rows and one that does not fit, in one transaction each. Each
// fitting row's note is over 4 KiB, so every batch holding one is compressed (the relay sends
// batches under 4 KiB uncompressed whatever the codec).
func insertAvroRows(t *testing.T, f *testenv.Fixture, n int) (want map[string]int, bad int64) {
	t.Helper()
	want = map[string]int{}
	for i := range n {
		if i == n/2 {
			bad = f.Insert(t, false, testenv.Row{Key: "k1", Payload: `{"n": 1}`, EventType: "OrderPlaced"})[0] // no note
		}
		row := avroRow(i)
		row.Payload = fmt.Sprintf(`{"n": %d, "note": "row %d %s"}`, i, i, strings.Repeat("again ", 700))
		want[strconv.FormatInt(f.Insert(t, false, row)[0], 10)] = i
	}
	return want, bad
}

// In exactly-once mode the values are encoded before they enter the Kafka transaction: a
// read_committed consumer sees each row once, in the wire format, zstd-compressed, and the row
// that does not fit is dead-lettered in the same transactions.
func TestAvroExactlyOnceRun(t *testing.T) {
	url := testenv.RegistryURL(t)
	e := newEOSEnv(t)
	subject, id, want, bad := avroRows(t, url, e.F)
	written := e.F.CurrentWAL(t)
	p := e.start(t, nil, "--value-format", "avro", "--registry-url", url, "--compression", "zstd:3")
	testenv.Eventually(t, 90*time.Second, "the slot to confirm past the rows", func() bool { return e.F.SlotConfirmed(t) >= written })
	checkAvroRecords(t, url, id, 4, readCommitted(t, e.F.Topic), want)
	checkSchemaLetter(t, readCommitted(t, e.F.DLQ), bad, subject, id)
	p.Stop(t)
}

// `poll` encodes the same way, here through the registry's HTTPS port with its CA from a file:
// each row once in the wire format (lz4-compressed), the row that does not fit dead-lettered
// with its subject and schema id, and every row marked.
func TestAvroPoll(t *testing.T) {
	url := testenv.RegistryURL(t)
	e := newPollEnv(t)
	subject, id, want, bad := avroRows(t, url, e.F)
	tlsURL, ca := testenv.RegistryTLS(t) // the same registry over HTTPS, its CA from a file
	p := e.Start(t, nil, "--value-format", "avro", "--registry-url", tlsURL, "--registry-ca-file", ca, "--compression", "lz4")
	testenv.Eventually(t, 60*time.Second, "every row marked", func() bool { return e.pending(t) == 0 })
	recs := testenv.Consume(t, e.F.Topic).WaitFor(t, 30*time.Second, "the rows", func(r []*kgo.Record) bool { return len(r) >= len(want) })
	checkAvroRecords(t, url, id, 3, recs, want)
	checkSchemaLetter(t, testenv.Consume(t, e.F.DLQ).WaitFor(t, 30*time.Second, "the letter", func(r []*kgo.Record) bool { return len(r) >= 1 }), bad, subject, id)
	p.Stop(t)
}

// TestAvroTombstoneStaysNull pins that a NULL payload published as a tombstone keeps its null
// value under a registry format: a compacted topic deletes a key only on a null value, which no
// schema encodes (an encoder handed the nil payload would dead-letter it as a misfit).
func TestAvroTombstoneStaysNull(t *testing.T) {
	url := testenv.RegistryURL(t)
	check := func(t *testing.T, f *testenv.Fixture, cons *testenv.Consumer, id int, gone, kept string) {
		t.Helper()
		recs := byOutboxID(cons.WaitFor(t, 60*time.Second, "both rows", func(r []*kgo.Record) bool { return len(r) >= 2 }))
		if r := recs[gone]; r == nil || r.Value != nil || string(r.Key) != "gone" {
			t.Errorf("NULL payload under --value-format avro: %+v, want a null value keyed gone", r)
		}
		if r := recs[kept]; r == nil || len(r.Value) < 5 || r.Value[0] != 0 || int(binary.BigEndian.Uint32(r.Value[1:5])) != id {
			t.Errorf("the other row: %+v, want the wire format with schema id %d", r, id)
		}
		if n := testenv.EndOffset(t, f.DLQ); n != 0 {
			t.Errorf("%d dead letters, want none", n)
		}
	}
	t.Run("run", func(t *testing.T) {
		e := testenv.NewRelayEnv(t, false)
		id := registerAvro(t, url, e.F.Topic+"-value", orderAvro)
		cons := testenv.Consume(t, e.F.Topic)
		p := e.Start(t, nil, "--value-format", "avro", "--registry-url", url, "--null-payload", "tombstone")
		gone := insertPayload(t, e.F, e.F.Topic, "gone", nil, "")
		kept := insertPayload(t, e.F, e.F.Topic, "k", `{"n": 1, "note": "kept"}`, "")
		check(t, e.F, cons, id, gone, kept)
		p.Stop(t)
	})
	t.Run("poll", func(t *testing.T) {
		e := newPollEnv(t)
		id := registerAvro(t, url, e.F.Topic+"-value", orderAvro)
		cons := testenv.Consume(t, e.F.Topic)
		gone := insertPayload(t, e.F, e.F.Topic, "gone", nil, "")
		kept := insertPayload(t, e.F, e.F.Topic, "k", `{"n": 1, "note": "kept"}`, "")
		p := e.Start(t, nil, "--value-format", "avro", "--registry-url", url, "--null-payload", "tombstone")
		check(t, e.F, cons, id, gone, kept)
		p.Stop(t)
	})
}
