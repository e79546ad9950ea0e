package e2e

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// orderAvro is the value schema the e2e tests register for their topic.
const orderAvro = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"n","type":"long"},{"name":"note","type":"string"}]}`

// registerAvro registers schema under subject in the real registry and returns its id.
func registerAvro(t *testing.T, url, subject, schema string) int {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ss, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = cl.DeleteSubject(ctx, subject, sr.SoftDelete)
		_, _ = cl.DeleteSubject(ctx, subject, sr.HardDelete)
	})
	return ss.ID
}

// javaAvroRead decodes wire-format Avro values with Apache Avro's Java library (the registry's
// jars; schema/testdata/AvroRead.java), a deserialiser the project did not write, and returns
// each value's fields as JSON.
func javaAvroRead(t *testing.T, url string, values [][]byte) []map[string]any {
	t.Helper()
	args := []string{url}
	for _, v := range values {
		args = append(args, hex.EncodeToString(v))
	}
	lines := javaLines(t, "read the values back with Apache Avro", filepath.Join("schema", "testdata", "AvroRead.java"), args...)
	var got []map[string]any
	for _, line := range lines {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("Java's line %q: %v", line, err)
		}
		got = append(got, m)
	}
	if len(got) != len(values) {
		t.Fatalf("Java read %d values of %d:\n%s", len(got), len(values), strings.Join(lines, "\n"))
	}
	return got
}

func avroRow(i int) testenv.Row {
	return testenv.Row{Key: "k" + strconv.Itoa(i%4), Payload: fmt.Sprintf(`{"n": %d, "note": "row %d"}`, i, i), EventType: "OrderPlaced"}
}

// A relay that writes Avro through the real registry is killed with kill -9 between Kafka's
// acknowledgement and the confirmation, and restarted: every row arrives as a wire-format
// value with the registered schema's id, which Apache Avro's Java library reads back to the
// row's payload; the row whose payload does not fit the schema is dead-lettered (with the
// subject and schema id, its original payload) and never published.
func TestAvroThroughRegistrySurvivesKill9(t *testing.T) {
	url := testenv.RegistryURL(t)
	testenv.RegistryJars(t)
	e := testenv.NewRelayEnv(t, false)
	subject := e.F.Topic + "-value"
	id := registerAvro(t, url, subject, orderAvro)

	want := map[string]int{} // outbox id -> n
	for i := range 12 {
		ids := e.F.Insert(t, false, avroRow(i))
		want[strconv.FormatInt(ids[0], 10)] = i
	}
	bad := e.F.Insert(t, false, testenv.Row{Key: "k1", Payload: `{"n": "not a number", "note": "bad"}`, EventType: "OrderPlaced"})[0]
	for i := 12; i < 20; i++ {
		ids := e.F.Insert(t, false, avroRow(i))
		want[strconv.FormatInt(ids[0], 10)] = i
	}
	args := []string{"--value-format", "avro", "--registry-url", url, "--status-interval", "1h"}
	p := e.Start(t, []string{"CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS=4"}, args...)
	p.WaitKilled(t, 90*time.Second)
	if e.F.SlotConfirmed(t) >= e.F.CurrentWAL(t) {
		t.Fatalf("the slot confirmed everything before the kill: nothing to replay")
	}
	p2 := e.Start(t, nil, "--value-format", "avro", "--registry-url", url)
	for i := 20; i < 26; i++ { // written while the restarted relay streams
		ids := e.F.Insert(t, false, avroRow(i))
		want[strconv.FormatInt(ids[0], 10)] = i
	}
	written := e.F.CurrentWAL(t)
	cons := testenv.Consume(t, e.F.Topic)
	recs := e.Settle(t, cons, written)

	decoded := javaAvroRead(t, url, wireValues(t, recs, id))
	seen := map[string]bool{}
	for i, r := range recs {
		oid := testenv.Header(r, "outbox-id")
		if oid == strconv.FormatInt(bad, 10) {
			t.Fatalf("the row that does not fit the schema was published: %v", decoded[i])
		}
		n, ok := want[oid]
		if !ok {
			t.Fatalf("record of unknown outbox id %s", oid)
		}
		if g := fmt.Sprint(decoded[i]["n"]); g != strconv.Itoa(n) || fmt.Sprint(decoded[i]["note"]) != "row "+strconv.Itoa(n) {
			t.Errorf("outbox id %s: Java read %v, want n=%d note=row %d", oid, decoded[i], n, n)
		}
		seen[oid] = true
	}
	for oid := range want {
		if !seen[oid] {
			t.Errorf("outbox id %s lost", oid)
		}
	}

	dlq := testenv.Consume(t, e.F.DLQ)
	letters := dlq.WaitFor(t, 30*time.Second, "the bad row's dead letter", func(r []*kgo.Record) bool { return len(r) >= 1 })
	l := letters[0]
	if got := testenv.Header(l, "outbox-id"); got != strconv.FormatInt(bad, 10) {
		t.Fatalf("dead letter of outbox id %s, want %d", got, bad)
	}
	if got := testenv.Header(l, "dlq-schema-subject"); got != subject {
		t.Errorf("dlq-schema-subject %q, want %q", got, subject)
	}
	if got := testenv.Header(l, "dlq-schema-id"); got != strconv.Itoa(id) {
		t.Errorf("dlq-schema-id %q, want %d", got, id)
	}
	if got := testenv.Header(l, "dlq-class"); got != "bad-row" {
		t.Errorf("dlq-class %q, want bad-row", got)
	}
	reason := testenv.Header(l, "dlq-error")
	if !strings.Contains(reason, subject) || !strings.Contains(reason, "schema id "+strconv.Itoa(id)) {
		t.Errorf("dlq-error %q names neither the subject nor the schema id", reason)
	}
	if !strings.Contains(string(l.Value), "not a number") {
		t.Errorf("the dead letter's value %q is not the row's payload", l.Value)
	}
	t.Logf("%d records for %d rows, read back by Apache Avro (Java); dead letter: %s", len(recs), len(want), reason)
	p2.Stop(t)
}

// A registry that goes silent is a fault, not a bad row: reading pauses (a log line and
// cdc_relay_schema_registry_unavailable say why), nothing is published, dead-lettered or
// confirmed past the waiting row, and once the registry answers again the relay resumes by
// itself and publishes every row.
func TestRegistryOutagePausesAndResumes(t *testing.T) {
	url := testenv.RegistryURL(t)
	e := testenv.NewRelayEnv(t, false)
	subject := e.F.Topic + "-value"
	registerAvro(t, url, subject, orderAvro)
	host := strings.TrimPrefix(url, "http://")
	target, path, _ := strings.Cut(host, "/")
	proxy := testenv.NewProxy(t, target)
	proxy.Stall()
	before := e.F.SlotConfirmed(t)
	var want []int64
	for i := range 5 {
		want = append(want, e.F.Insert(t, false, avroRow(i))...)
	}
	p := e.Start(t, nil, "--value-format", "avro", "--registry-url", "http://"+proxy.Addr()+"/"+path, "--metrics-addr", "127.0.0.1:0")
	addr := metricsAddr(t, p)
	testenv.Eventually(t, 60*time.Second, "the pause's log line", func() bool {
		return strings.Contains(p.Output(), "reading paused: schema registry unavailable")
	})
	metricAtLeast(t, addr, "cdc_relay_schema_registry_unavailable", 1)
	if n := testenv.EndOffset(t, e.F.Topic); n != 0 {
		t.Fatalf("%d records published while the registry was silent", n)
	}
	if n := testenv.EndOffset(t, e.F.DLQ); n != 0 {
		t.Fatalf("%d dead letters written for a registry outage", n)
	}
	if c := e.F.SlotConfirmed(t); c > before {
		// The slot may confirm the transactions before the first row's (none here) but never past it.
		t.Fatalf("the slot confirmed %s while the first row waited for the registry (was %s)", c, before)
	}
	proxy.Resume()
	written := e.F.CurrentWAL(t)
	cons := testenv.Consume(t, e.F.Topic)
	recs := e.Settle(t, cons, written)
	got := ids(recs)
	for _, id := range want {
		if got[strconv.FormatInt(id, 10)] == 0 {
			t.Errorf("outbox id %d lost after the outage", id)
		}
	}
	m := scrape(t, addr)
	if m["cdc_relay_schema_registry_unavailable"] != 0 || m["cdc_relay_schema_registry_pauses_total"] < 1 {
		t.Errorf("after the outage: unavailable %v, pauses %v; want 0 and at least 1", m["cdc_relay_schema_registry_unavailable"], m["cdc_relay_schema_registry_pauses_total"])
	}
	if n := testenv.EndOffset(t, e.F.DLQ); n != 0 {
		t.Errorf("%d dead letters after the outage", n)
	}
	p.Stop(t)
}

// A row for a topic whose subject the registry does not know, met after start (no fixed
// --topic to check then), stops the relay with exit code 2 and the subject in the message,
// without confirming past the row and without dead-lettering it: registered and restarted, the
// relay publishes it.
func TestUnknownSubjectAfterStartStopsWithoutLoss(t *testing.T) {
	url := testenv.RegistryURL(t)
	e := testenv.NewRelayEnv(t, false)
	subject := e.F.Topic + "-value"
	before := e.F.SlotConfirmed(t)
	want := e.F.Insert(t, false, avroRow(1))[0]
	p := e.Start(t, nil, "--value-format", "avro", "--registry-url", url)
	code, _ := p.Wait(t, 60*time.Second)
	if code != 2 || !strings.Contains(p.Output(), "subject "+subject) {
		t.Fatalf("exit %d, want 2 naming subject %s; output:\n%s", code, subject, p.Output())
	}
	if c := e.F.SlotConfirmed(t); c > before {
		t.Fatalf("the slot confirmed %s past the row (was %s)", c, before)
	}
	if n := testenv.EndOffset(t, e.F.DLQ); n != 0 {
		t.Fatalf("%d dead letters for a configuration fault", n)
	}
	registerAvro(t, url, subject, orderAvro)
	e.Start(t, nil, "--value-format", "avro", "--registry-url", url)
	recs := testenv.Consume(t, e.F.Topic).WaitFor(t, 60*time.Second, "the row", func(r []*kgo.Record) bool { return len(r) >= 1 })
	if got := testenv.Header(recs[0], "outbox-id"); got != strconv.FormatInt(want, 10) {
		t.Fatalf("published outbox id %s, want %d", got, want)
	}
}

// A stop while reading is paused for the registry is a clean stop that leaves the waiting
// row's transaction unconfirmed: the next start, with the registry back, publishes it.
func TestStopDuringRegistryOutageConfirmsNothingPast(t *testing.T) {
	url := testenv.RegistryURL(t)
	e := testenv.NewRelayEnv(t, false)
	registerAvro(t, url, e.F.Topic+"-value", orderAvro)
	target, path, _ := strings.Cut(strings.TrimPrefix(url, "http://"), "/")
	proxy := testenv.NewProxy(t, target)
	proxy.Stall()
	before := e.F.SlotConfirmed(t)
	want := e.F.Insert(t, false, avroRow(1), avroRow(2))
	p := e.Start(t, nil, "--value-format", "avro", "--registry-url", "http://"+proxy.Addr()+"/"+path)
	testenv.Eventually(t, 60*time.Second, "the pause's log line", func() bool {
		return strings.Contains(p.Output(), "reading paused: schema registry unavailable")
	})
	if code := p.Stop(t); code != 0 {
		t.Fatalf("stop while paused: exit %d, want 0; output:\n%s", code, p.Output())
	}
	// The relay may confirm WAL that other tests wrote before the rows' transaction (a keepalive's
	// end while nothing was pending); never the transaction itself: its commit (the records'
	// cdc-lsn, read after the restart) must not be below the confirmed position.
	stopped := e.F.SlotConfirmed(t)
	if n := testenv.EndOffset(t, e.F.Topic) + testenv.EndOffset(t, e.F.DLQ); n != 0 {
		t.Fatalf("%d records published or dead-lettered while the registry was silent", n)
	}
	written := e.F.CurrentWAL(t)
	e.Start(t, nil, "--value-format", "avro", "--registry-url", url)
	recs := e.Settle(t, testenv.Consume(t, e.F.Topic), written)
	for _, r := range recs {
		if commit := lsnOf(t, r); commit < stopped {
			t.Errorf("the slot confirmed %s (from %s) past the waiting row's commit %s", stopped, before, commit)
		}
	}
	got := ids(recs)
	for _, id := range want {
		if got[strconv.FormatInt(id, 10)] == 0 {
			t.Errorf("outbox id %d lost across the stop", id)
		}
	}
}

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
