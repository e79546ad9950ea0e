package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("java is needed to read the values back with Apache Avro: %v", err)
	}
	jars := testenv.RegistryJars(t)
	args := []string{"-cp", filepath.Join(jars, "*"), filepath.Join(repoRoot(t), "schema", "testdata", "AvroRead.java"), url}
	for _, v := range values {
		args = append(args, hex.EncodeToString(v))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Apache Avro (Java) could not read the values: %v\n%s", err, stderr.String())
	}
	var got []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(sc.Text()))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("Java's line %q: %v", sc.Text(), err)
		}
		got = append(got, m)
	}
	if len(got) != len(values) {
		t.Fatalf("Java read %d values of %d:\n%s", len(got), len(values), out)
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
	if _, sig := p.Wait(t, 90*time.Second); sig != syscall.SIGKILL {
		t.Fatalf("relay was not killed by the hook (signal %v); output:\n%s", sig, p.Output())
	}
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
