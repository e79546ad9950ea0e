package schema

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

const orderAvro = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"long"},
	{"name":"customer","type":"string"},
	{"name":"note","type":["null","string"],"default":null},
	{"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]},"default":"NEW"},
	{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
		{"name":"sku","type":"string"},{"name":"qty","type":"int"},{"name":"price","type":"double"}]}}}
]}`

// fakeRegistry is srfake counting the requests it serves.
type fakeRegistry struct {
	*srfake.Registry
	requests atomic.Int64
}

func newFake(t *testing.T, opts ...srfake.Option) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{Registry: srfake.New(opts...)}
	t.Cleanup(f.Close)
	f.Intercept(func(http.ResponseWriter, *http.Request) bool { f.requests.Add(1); return false })
	return f
}

func (f *fakeRegistry) register(t *testing.T, subject string, s sr.Schema) int {
	t.Helper()
	id, _, err := f.RegisterSchema(subject, s)
	if err != nil {
		t.Fatalf("registering %s in the fake: %v", subject, err)
	}
	return id
}

func newEncoder(t *testing.T, cfg Config) *Encoder {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// wireID checks the 5-byte header and returns the id and the rest.
func wireID(t *testing.T, b []byte) (int, []byte) {
	t.Helper()
	if len(b) < 5 || b[0] != 0 {
		t.Fatalf("value %x does not start with magic byte 0 and a 4-byte schema id", b)
	}
	return int(binary.BigEndian.Uint32(b[1:5])), b[5:]
}

// goavroRecord reads body, an Avro datum of the record schema, with goavro (a library this
// package does not use to write it) and fails the test unless it reads all of it.
func goavroRecord(t *testing.T, schema string, body []byte) map[string]any {
	t.Helper()
	codec, err := goavro.NewCodec(schema)
	if err != nil {
		t.Fatal(err)
	}
	native, rest, err := codec.NativeFromBinary(body)
	if err != nil || len(rest) != 0 {
		t.Fatalf("goavro decode: %v (%d bytes left)", err, len(rest))
	}
	return native.(map[string]any)
}

func TestAvroValueIsConfluentWireFormatDecodedByGoavro(t *testing.T) {
	f := newFake(t)
	id := f.register(t, "orders-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro})

	val, err := e.Encode(t.Context(), "orders", "OrderPlaced",
		[]byte(`{"id":42,"customer":"ada","note":"ring twice","lines":[{"sku":"A-1","qty":2,"price":9.5}]}`))
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	gotID, body := wireID(t, val)
	if gotID != id {
		t.Fatalf("schema id in the value = %d, registered %d", gotID, id)
	}
	m := goavroRecord(t, orderAvro, body)
	if m["id"] != int64(42) || m["customer"] != "ada" || m["status"] != "NEW" {
		t.Errorf("decoded %v: want id 42, customer ada, status NEW (the default)", m)
	}
	if note, _ := m["note"].(map[string]any); note["string"] != "ring twice" {
		t.Errorf("note = %v, want the union's string branch", m["note"])
	}
	line := m["lines"].([]any)[0].(map[string]any)
	if line["sku"] != "A-1" || line["qty"] != int32(2) || line["price"] != 9.5 {
		t.Errorf("line = %v", line)
	}
}

func TestEachSubjectIsLookedUpOnceNotPerRecord(t *testing.T) {
	f := newFake(t)
	f.register(t, "orders-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	f.register(t, "refunds-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro})
	f.requests.Store(0)
	for i := range 200 {
		topic := "orders"
		if i%2 == 1 {
			topic = "refunds"
		}
		if _, err := e.Encode(t.Context(), topic, "", []byte(`{"id":1,"customer":"c","lines":[]}`)); err != nil {
			t.Fatalf("Encode %d: %v", i, err)
		}
	}
	if n := f.requests.Load(); n != 2 {
		t.Errorf("200 records of 2 subjects made %d registry requests, want 2 (one a subject)", n)
	}
}

func TestConcurrentEncodesShareOneLookup(t *testing.T) {
	f := newFake(t)
	f.register(t, "orders-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro})
	f.requests.Store(0)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := e.Encode(t.Context(), "orders", "", []byte(`{"id":1,"customer":"c","lines":[]}`)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := f.requests.Load(); n != 1 {
		t.Errorf("8 goroutines encoding 400 records of one subject made %d requests, want 1", n)
	}
}

func TestSubjectIsLookedUpAgainAfterMaxAgeAndStaleIsUsedWhileRegistryIsDown(t *testing.T) {
	f := newFake(t)
	id1 := f.register(t, "orders-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro, MaxAge: time.Minute})
	now := time.Now()
	e.now = func() time.Time { return now }
	payload := []byte(`{"id":1,"customer":"c","lines":[]}`)
	if _, err := e.Encode(t.Context(), "orders", "", payload); err != nil {
		t.Fatal(err)
	}
	// A new version: seen after MaxAge.
	v2 := strings.Replace(orderAvro, `{"name":"customer","type":"string"},`, `{"name":"customer","type":"string"},{"name":"vip","type":"boolean","default":false},`, 1)
	id2 := f.register(t, "orders-value", sr.Schema{Schema: v2, Type: sr.TypeAvro})
	if id2 == id1 {
		t.Fatal("the fake gave the new version the old id")
	}
	now = now.Add(2 * time.Minute)
	val, err := e.Encode(t.Context(), "orders", "", payload)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := wireID(t, val); got != id2 {
		t.Fatalf("after MaxAge the value has schema id %d, want the latest %d", got, id2)
	}
	// Registry down at the next refresh: the cached schema keeps working.
	f.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	now = now.Add(2 * time.Minute)
	if val, err = e.Encode(t.Context(), "orders", "", payload); err != nil {
		t.Fatalf("Encode with a cached schema while the registry is down: %v", err)
	}
	if got, _ := wireID(t, val); got != id2 {
		t.Fatalf("stale value has schema id %d, want %d", got, id2)
	}
}

func TestUnknownSubjectIsConfigError(t *testing.T) {
	f := newFake(t)
	e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro})
	err := e.Check(t.Context(), "nobody-value")
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Subject != "nobody-value" || !strings.Contains(ce.Error(), "register the subject's schema") {
		t.Fatalf("Check of an unknown subject = %v, want a *ConfigError naming it and what to do", err)
	}
	if _, err := e.Encode(t.Context(), "nobody", "", []byte(`{}`)); !errors.As(err, &ce) {
		t.Fatalf("Encode for an unknown subject = %v, want a *ConfigError", err)
	}
}

func TestRefusedCredentialsAreConfigErrorAndPasswordComesFromFile(t *testing.T) {
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("relay:s3cret"))
	f := newFake(t, srfake.WithAuth(want))
	f.register(t, "orders-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("guess"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, user, file string
	}{{"no credentials", "", ""}, {"wrong password", "relay", bad}} {
		e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro, User: tc.user, PasswordFile: tc.file})
		err := e.Check(t.Context(), "orders-value")
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(ce.Error(), "refused the credentials") {
			t.Errorf("%s: Check = %v, want a *ConfigError saying the credentials were refused", tc.name, err)
		}
		if strings.Contains(err.Error(), "guess") {
			t.Errorf("%s: the error shows the password: %v", tc.name, err)
		}
	}
	e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro, User: "relay", PasswordFile: good})
	if err := e.Check(t.Context(), "orders-value"); err != nil {
		t.Fatalf("Check with the password from the file: %v", err)
	}
}

func TestBadConfigIsConfigErrorBeforeAnyCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no URL", Config{Format: FormatAvro}, "no registry URL"},
		{"format", Config{URLs: []string{"http://x"}, Format: "xml"}, "use avro, protobuf, json-schema or wire"},
		{"user without password", Config{URLs: []string{"http://x"}, Format: FormatAvro, User: "u"}, "needs a password file"},
		{"missing password file", Config{URLs: []string{"http://x"}, Format: FormatAvro, User: "u", PasswordFile: "/nonexistent/pw"}, "registry password file"},
		{"missing CA", Config{URLs: []string{"https://x"}, Format: FormatAvro, CAFile: "/nonexistent/ca.crt"}, "registry CA file"},
	} {
		_, err := New(tc.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want a *ConfigError containing %q", tc.name, err, tc.want)
		}
	}
}

func TestRegistryDownIsUnavailableAndEncodingResumesWhenItAnswers(t *testing.T) {
	f := newFake(t)
	f.register(t, "orders-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro})
	var down atomic.Bool
	down.Store(true)
	f.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		if down.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return true
		}
		return false
	})
	payload := []byte(`{"id":1,"customer":"c","lines":[]}`)
	_, err := e.Encode(t.Context(), "orders", "", payload)
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Subject != "orders-value" || !Retriable(err) {
		t.Fatalf("Encode while the registry answers 502 = %v, want a retriable *UnavailableError", err)
	}
	down.Store(false)
	if _, err := e.Encode(t.Context(), "orders", "", payload); err != nil {
		t.Fatalf("Encode once the registry answers again: %v", err)
	}

	// Too slow: the request's timeout is a fault, not a verdict on the row.
	f.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "slow-value") {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return true
		}
		return false
	})
	f.register(t, "slow-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	slow := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro, Timeout: 200 * time.Millisecond})
	if _, err := slow.Encode(t.Context(), "slow", "", payload); !errors.As(err, &ue) {
		t.Fatalf("Encode while the registry takes longer than the timeout = %v, want an *UnavailableError", err)
	}

	// Nothing listening at all.
	closed := srfake.New()
	url := closed.URL()
	closed.Close()
	e = newEncoder(t, Config{URLs: []string{url}, Format: FormatAvro, Timeout: 2 * time.Second})
	if _, err := e.Encode(t.Context(), "orders", "", payload); !errors.As(err, &ue) {
		t.Fatalf("Encode with no registry listening = %v, want an *UnavailableError", err)
	}
	if err := e.Check(context.Background()); !errors.As(err, &ue) {
		t.Fatalf("Check with no registry listening = %v, want an *UnavailableError", err)
	}
}

func TestPayloadThatDoesNotFitIsPayloadErrorWithSubjectAndID(t *testing.T) {
	f := newFake(t)
	avroID := f.register(t, "orders-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	protoID := f.register(t, "pb-value", sr.Schema{Schema: orderProto, Type: sr.TypeProtobuf})
	jsonID := f.register(t, "js-value", sr.Schema{Schema: orderJSONSchema, Type: sr.TypeJSON})
	for _, tc := range []struct {
		name    string
		format  Format
		topic   string
		id      int
		payload string
		want    string
	}{
		{"avro missing field", FormatAvro, "orders", avroID, `{"id":1,"lines":[]}`, "$.customer: missing"},
		{"avro wrong type", FormatAvro, "orders", avroID, `{"id":"one","customer":"c","lines":[]}`, `$.id: "one" is not an integer`},
		{"avro int out of range", FormatAvro, "orders", avroID, `{"id":1,"customer":"c","lines":[{"sku":"s","qty":3000000000,"price":1}]}`, "not an integer of 32 bits"},
		{"avro extra field", FormatAvro, "orders", avroID, `{"id":1,"customer":"c","lines":[],"coupon":"X"}`, "coupon not in record shop.Order"},
		{"avro enum", FormatAvro, "orders", avroID, `{"id":1,"customer":"c","lines":[],"status":"LOST"}`, `"LOST" is not a symbol`},
		{"avro not JSON", FormatAvro, "orders", avroID, `{"id":`, "not JSON"},
		{"protobuf unknown field", FormatProtobuf, "pb", protoID, `{"id":"1","coupon":"X"}`, "coupon"},
		{"protobuf wrong type", FormatProtobuf, "pb", protoID, `{"id":"x"}`, "id"},
		{"json-schema violation", FormatJSONSchema, "js", jsonID, `{"id":1}`, "customer"},
		{"json-schema wrong type", FormatJSONSchema, "js", jsonID, `{"id":"1","customer":"c"}`, "id"},
	} {
		e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: tc.format})
		_, err := e.Encode(t.Context(), tc.topic, "", []byte(tc.payload))
		var pe *PayloadError
		if !errors.As(err, &pe) || Retriable(err) {
			t.Errorf("%s: Encode = %v, want a *PayloadError, not retriable", tc.name, err)
			continue
		}
		if pe.Subject != tc.topic+"-value" || pe.SchemaID != tc.id || pe.Format != tc.format || !strings.Contains(pe.Error(), tc.want) {
			t.Errorf("%s: %#v (%v), want subject %s-value, id %d, an error containing %q", tc.name, pe, pe, tc.topic, tc.id, tc.want)
		}
	}
}

func TestWireFormatPassesKnownIDsAndRejectsTheRest(t *testing.T) {
	f := newFake(t)
	id := f.register(t, "orders-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatWire})
	known := append([]byte{0, 0, 0, 0, byte(id)}, 0x54, 0x06)
	f.requests.Store(0)
	for range 50 {
		out, err := e.Encode(t.Context(), "orders", "", known)
		if err != nil || string(out) != string(known) {
			t.Fatalf("Encode of a value with a known id = %x, %v; want it as it is", out, err)
		}
	}
	if n := f.requests.Load(); n != 1 {
		t.Errorf("50 values of one known id made %d registry requests, want 1", n)
	}
	for _, tc := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"JSON text", []byte(`{"id":1}`), "not in the wire format"},
		{"short", []byte{0, 0, 1}, "not in the wire format"},
		{"unknown id", []byte{0, 0, 0, 0x30, 0x39, 1}, "schema id 12345 is not known"},
	} {
		_, err := e.Encode(t.Context(), "orders", "", tc.value)
		var pe *PayloadError
		if !errors.As(err, &pe) || pe.Subject != "orders-value" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Encode = %v, want a *PayloadError containing %q", tc.name, err, tc.want)
		}
	}
	// The unknown id is remembered for a while: a run of such rows is not a request each.
	f.requests.Store(0)
	for range 10 {
		if _, err := e.Encode(t.Context(), "orders", "", []byte{0, 0, 0, 0x30, 0x39, 1}); err == nil {
			t.Fatal("an unknown id passed")
		}
	}
	if n := f.requests.Load(); n != 0 {
		t.Errorf("10 values of an id just found unknown made %d requests, want 0", n)
	}
}

func TestRecordStrategyNamesSubjectByEventTypeAndPicksItsMessage(t *testing.T) {
	f := newFake(t)
	id := f.register(t, "shop.Refund", sr.Schema{Schema: orderProto, Type: sr.TypeProtobuf})
	e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatProtobuf, Strategy: StrategyRecord})
	if s := e.Subject("orders", "shop.Refund"); s != "shop.Refund" {
		t.Fatalf("Subject = %q, want the event type", s)
	}
	f.requests.Store(0)
	_, err := e.Encode(t.Context(), "orders", "", []byte(`{"orderId":"7"}`))
	var pe *PayloadError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "no event type") || f.requests.Load() != 0 {
		t.Fatalf("a row without an event type = %v (%d requests), want a *PayloadError and no request", err, f.requests.Load())
	}
	val, err := e.Encode(t.Context(), "orders", "shop.Refund", []byte(`{"orderId":"7","reason":"late"}`))
	if err != nil {
		t.Fatal(err)
	}
	gotID, body := wireID(t, val)
	// shop.Refund is the file's second message: indexes [1] are the count 1 and the index 1,
	// as zig-zag varints (2, 2).
	if gotID != id || len(body) < 2 || body[0] != 2 || body[1] != 2 {
		t.Fatalf("value %x: want schema id %d then message indexes 02 02", val, id)
	}
}

func TestRegisterIsOffByDefaultAndRegistersWhenOn(t *testing.T) {
	f := newFake(t)
	local := map[string]sr.Schema{"orders-value": {Schema: orderAvro, Type: sr.TypeAvro}}
	e := newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro, Schemas: local})
	var ce *ConfigError
	if err := e.Check(t.Context(), "orders-value"); !errors.As(err, &ce) {
		t.Fatalf("Check with registering off = %v, want a *ConfigError (unknown subject)", err)
	}
	if f.SubjectExists("orders-value") {
		t.Fatal("registering off registered the subject")
	}
	e = newEncoder(t, Config{URLs: []string{f.URL()}, Format: FormatAvro, Schemas: local, Register: true})
	val, err := e.Encode(t.Context(), "orders", "", []byte(`{"id":1,"customer":"c","lines":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	ss, ok := f.GetSchema("orders-value", 1)
	if !ok {
		t.Fatal("registering on did not register the subject")
	}
	if got, _ := wireID(t, val); got != ss.ID {
		t.Fatalf("value's schema id %d, registered %d", got, ss.ID)
	}
}
