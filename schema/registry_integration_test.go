package schema

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// These tests run against the real schema registry of scripts/registry-up.sh (Apicurio Registry,
// Confluent-compatible API). Schemas are registered under subjects named after the test; the
// values are read back with libraries this package does not use to write them: goavro for
// Avro, google.golang.org/protobuf's dynamicpb over a descriptor built by hand for Protobuf.

// registerReal registers s under subject in the real registry with a client of its own and
// returns the id the registry gave it.
func registerReal(t *testing.T, url, subject string, s sr.Schema) int {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(t.Context(), subject, s)
	if err != nil {
		t.Fatalf("registering %s in the registry: %v", subject, err)
	}
	return ss.ID
}

func TestRealRegistryAvroValueDecodesWithGoavro(t *testing.T) {
	url := testenv.RegistryURL(t)
	topic := testenv.Name(t)
	id := registerReal(t, url, topic+"-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	e := newEncoder(t, Config{URLs: []string{url}, Format: FormatAvro})
	if err := e.Check(t.Context(), topic+"-value"); err != nil {
		t.Fatalf("Check: %v", err)
	}
	val, err := e.Encode(t.Context(), topic, "", []byte(`{"id":7,"customer":"grace","status":"PAID","lines":[{"sku":"Z","qty":1,"price":0.25}]}`))
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	gotID, body := wireID(t, val)
	if gotID != id {
		t.Fatalf("value's schema id %d, the registry gave %d", gotID, id)
	}
	// A consumer's path: the schema by the id in the value, from the registry, then goavro.
	cl, _ := sr.NewClient(sr.URLs(url))
	byID, err := cl.SchemaByID(t.Context(), gotID)
	if err != nil {
		t.Fatalf("schema by id %d: %v", gotID, err)
	}
	m := goavroRecord(t, byID.Schema, body)
	line := m["lines"].([]any)[0].(map[string]any)
	if m["id"] != int64(7) || m["customer"] != "grace" || m["status"] != "PAID" || m["note"] != nil ||
		line["sku"] != "Z" || line["qty"] != int32(1) || line["price"] != 0.25 {
		t.Fatalf("goavro read %v", m)
	}
	_, err = e.Encode(t.Context(), topic, "", []byte(`{"id":7}`))
	var pe *PayloadError
	if !errors.As(err, &pe) || pe.SchemaID != id || pe.Subject != topic+"-value" {
		t.Fatalf("a payload without its required fields = %v, want a *PayloadError with id %d", err, id)
	}
}

func TestRealRegistryAvroValueDecodesWithApacheAvroJava(t *testing.T) {
	url := testenv.RegistryURL(t)
	jars := testenv.RegistryJars(t)
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("java is not on PATH (the registry needs it too): %v", err)
	}
	topic := testenv.Name(t)
	id := registerReal(t, url, topic+"-value", sr.Schema{Schema: allTypesAvro, Type: sr.TypeAvro})
	e := newEncoder(t, Config{URLs: []string{url}, Format: FormatAvro})
	val, err := e.Encode(t.Context(), topic, "", []byte(`{"b":true,"i":-7,"l":9007199254740993,"f":1.5,"d":-2.25,"s":"héllo",
		"by":"AB","fx":"ab","ts":1700000000123,"day":19700,"m":{"k":3},"u":"text","uj":{"long":5},"un":null,"nested":{"x":4}}`))
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if got, _ := wireID(t, val); got != id {
		t.Fatalf("value's schema id %d, the registry gave %d", got, id)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, "-cp", filepath.Join(jars, "*"), filepath.Join("testdata", "AvroRead.java"), url, hex.EncodeToString(val))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Apache Avro (Java) could not read the value: %v\n%s", err, stderr.String())
	}
	d := json.NewDecoder(strings.NewReader(string(out)))
	d.UseNumber()
	var got map[string]any
	if err := d.Decode(&got); err != nil {
		t.Fatalf("Java's output %q: %v", out, err)
	}
	want := map[string]string{"b": "true", "i": "-7", "l": "9007199254740993", "f": "1.5", "d": "-2.25", "s": "héllo",
		"by": "AB", "fx": "[97 98]", "ts": "1700000000123", "day": "19700", "m": "map[k:3]", "u": "text", "uj": "5",
		"un": "<nil>", "nested": "map[x:4]", "withDefault": "dflt"}
	for k, w := range want {
		if g := fmt.Sprint(got[k]); g != w {
			t.Errorf("Java read %s = %s, want %s (all: %s)", k, g, w, out)
		}
	}
}

// shopDescriptor is orderProto's file descriptor, written out by hand (not compiled from the
// text the encoder compiles).
func shopDescriptor(t *testing.T) *descriptorpb.FileDescriptorProto {
	t.Helper()
	field := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type, label descriptorpb.FieldDescriptorProto_Label, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(), Label: label.Enum(),
			JsonName: proto.String(map[string]string{"order_id": "orderId"}[name])}
		if f.GetJsonName() == "" {
			f.JsonName = proto.String(name)
		}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	return &descriptorpb.FileDescriptorProto{
		Name: proto.String("shop.proto"), Package: proto.String("shop"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Order"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("id", 1, descriptorpb.FieldDescriptorProto_TYPE_INT64, opt, ""),
				field("customer", 2, descriptorpb.FieldDescriptorProto_TYPE_STRING, opt, ""),
				field("lines", 3, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, descriptorpb.FieldDescriptorProto_LABEL_REPEATED, ".shop.Order.Line"),
			},
			NestedType: []*descriptorpb.DescriptorProto{{
				Name: proto.String("Line"),
				Field: []*descriptorpb.FieldDescriptorProto{
					field("sku", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING, opt, ""),
					field("qty", 2, descriptorpb.FieldDescriptorProto_TYPE_INT32, opt, ""),
				},
			}},
		}, {
			Name: proto.String("Refund"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("order_id", 1, descriptorpb.FieldDescriptorProto_TYPE_INT64, opt, ""),
				field("reason", 2, descriptorpb.FieldDescriptorProto_TYPE_STRING, opt, ""),
			},
		}},
	}
}

func TestRealRegistryProtobufValueDecodesWithDynamicpb(t *testing.T) {
	url := testenv.RegistryURL(t)
	topic := testenv.Name(t)
	id := registerReal(t, url, topic+"-value", sr.Schema{Schema: orderProto, Type: sr.TypeProtobuf})
	fd, err := protodesc.NewFile(shopDescriptor(t), nil)
	if err != nil {
		t.Fatalf("the hand-written descriptor: %v", err)
	}

	for _, tc := range []struct {
		message, payload string
		index            []byte
		check            func(*dynamicpb.Message) bool
	}{
		{"shop.Order", `{"id":"12","customer":"ada","lines":[{"sku":"A","qty":3}]}`, []byte{0}, func(m *dynamicpb.Message) bool {
			d := m.Descriptor()
			lines := m.Get(d.Fields().ByName("lines")).List()
			line := lines.Get(0).Message()
			return m.Get(d.Fields().ByName("id")).Int() == 12 && m.Get(d.Fields().ByName("customer")).String() == "ada" &&
				lines.Len() == 1 && line.Get(line.Descriptor().Fields().ByName("qty")).Int() == 3
		}},
		{"shop.Refund", `{"order_id":"12","reason":"late"}`, []byte{2, 2}, func(m *dynamicpb.Message) bool {
			d := m.Descriptor()
			return m.Get(d.Fields().ByName("order_id")).Int() == 12 && m.Get(d.Fields().ByName("reason")).String() == "late"
		}},
	} {
		e := newEncoder(t, Config{URLs: []string{url}, Format: FormatProtobuf, ProtobufMessage: tc.message})
		val, err := e.Encode(t.Context(), topic, "", []byte(tc.payload))
		if err != nil {
			t.Fatalf("%s: Encode: %v", tc.message, err)
		}
		gotID, body := wireID(t, val)
		if gotID != id || !strings.HasPrefix(string(body), string(tc.index)) {
			t.Fatalf("%s: value %x: want schema id %d then message indexes %x", tc.message, val, id, tc.index)
		}
		// The consumer's side of the message indexes, by franz-go's reader of them.
		index, rest, err := (&sr.ConfluentHeader{}).DecodeIndex(body, 8)
		if err != nil {
			t.Fatal(err)
		}
		md := fd.Messages().Get(index[0])
		for _, i := range index[1:] {
			md = md.Messages().Get(i)
		}
		if string(md.FullName()) != tc.message {
			t.Fatalf("indexes %v name %s, want %s", index, md.FullName(), tc.message)
		}
		msg := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(rest, msg); err != nil {
			t.Fatalf("%s: dynamicpb: %v", tc.message, err)
		}
		if !tc.check(msg) {
			t.Fatalf("%s: dynamicpb read %v", tc.message, msg)
		}
	}
}

func TestRealRegistryJSONSchemaValueIsTheValidatedJSON(t *testing.T) {
	url := testenv.RegistryURL(t)
	topic := testenv.Name(t)
	id := registerReal(t, url, topic+"-value", sr.Schema{Schema: orderJSONSchema, Type: sr.TypeJSON})
	e := newEncoder(t, Config{URLs: []string{url}, Format: FormatJSONSchema})
	payload := `{"id":5,"customer":"lin"}`
	val, err := e.Encode(t.Context(), topic, "", []byte(payload))
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	gotID, body := wireID(t, val)
	var got map[string]any
	if gotID != id || json.Unmarshal(body, &got) != nil || got["id"] != 5.0 || got["customer"] != "lin" {
		t.Fatalf("value %q: want schema id %d then the JSON %s", val, id, payload)
	}
	_, err = e.Encode(t.Context(), topic, "", []byte(`{"id":5,"customer":"lin","extra":1}`))
	var pe *PayloadError
	if !errors.As(err, &pe) || pe.SchemaID != id {
		t.Fatalf("a payload the schema forbids = %v, want a *PayloadError with id %d", err, id)
	}
}

func TestRealRegistryUnknownSubjectIsConfigError(t *testing.T) {
	url := testenv.RegistryURL(t)
	e := newEncoder(t, Config{URLs: []string{url}, Format: FormatAvro})
	err := e.Check(t.Context(), testenv.Name(t)+"-value")
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Check of a subject the registry does not have = %v, want a *ConfigError", err)
	}
}

func TestRealRegistryRegistersWhenAskedAndWirePassThroughChecksIDs(t *testing.T) {
	url := testenv.RegistryURL(t)
	topic := testenv.Name(t)
	subject := topic + "-value"
	e := newEncoder(t, Config{URLs: []string{url}, Format: FormatAvro, Register: true,
		Schemas: map[string]sr.Schema{subject: {Schema: orderAvro, Type: sr.TypeAvro}}})
	val, err := e.Encode(t.Context(), topic, "", []byte(`{"id":1,"customer":"c","lines":[]}`))
	if err != nil {
		t.Fatalf("Encode with registering on: %v", err)
	}
	cl, _ := sr.NewClient(sr.URLs(url))
	latest, err := cl.SchemaByVersion(t.Context(), subject, -1)
	if err != nil {
		t.Fatalf("the registered subject: %v", err)
	}
	if id, _ := wireID(t, val); id != latest.ID {
		t.Fatalf("value's id %d, the registry's latest for %s is %d", id, subject, latest.ID)
	}

	w := newEncoder(t, Config{URLs: []string{url}, Format: FormatWire})
	if out, err := w.Encode(t.Context(), topic, "", val); err != nil || string(out) != string(val) {
		t.Fatalf("wire pass-through of a value with a registered id = %x, %v", out, err)
	}
	unknown := []byte{0, 0x7f, 0xff, 0xff, 0xf0, 2}
	_, err = w.Encode(t.Context(), topic, "", unknown)
	var pe *PayloadError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "not known to the registry") {
		t.Fatalf("wire value with an id the registry never gave = %v, want a *PayloadError", err)
	}
}

func TestRealRegistryOverTLS(t *testing.T) {
	url, ca := testenv.RegistryTLS(t)
	topic := testenv.Name(t)
	registerReal(t, testenv.RegistryURL(t), topic+"-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	e := newEncoder(t, Config{URLs: []string{url}, Format: FormatAvro, CAFile: ca})
	if _, err := e.Encode(t.Context(), topic, "", []byte(`{"id":1,"customer":"c","lines":[]}`)); err != nil {
		t.Fatalf("Encode over TLS with the CA: %v", err)
	}
	untrusting := newEncoder(t, Config{URLs: []string{url}, Format: FormatAvro})
	err := untrusting.Check(t.Context(), topic+"-value")
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "not signed by a CA the relay trusts") {
		t.Fatalf("Check over TLS without the CA = %v, want a *ConfigError saying to set the CA", err)
	}
}

func TestRealRegistrySilentIsUnavailableAndEncodingResumes(t *testing.T) {
	url := testenv.RegistryURL(t)
	topic := testenv.Name(t)
	registerReal(t, url, topic+"-value", sr.Schema{Schema: orderAvro, Type: sr.TypeAvro})
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.Addr()
	e := newEncoder(t, Config{URLs: []string{viaProxy.String()}, Format: FormatAvro, Timeout: 500 * time.Millisecond})
	payload := []byte(`{"id":1,"customer":"c","lines":[]}`)

	proxy.Stall() // a partition: connections open, nothing answers
	_, err = e.Encode(t.Context(), topic, "", payload)
	var ue *UnavailableError
	if !errors.As(err, &ue) || !Retriable(err) {
		t.Fatalf("Encode while the registry does not answer = %v, want a retriable *UnavailableError", err)
	}
	proxy.Resume()
	if _, err := e.Encode(t.Context(), topic, "", payload); err != nil {
		t.Fatalf("Encode once the registry answers again: %v", err)
	}
}
