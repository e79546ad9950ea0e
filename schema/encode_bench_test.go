package schema

import (
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/cdc-relay/cdc-relay/testkit/orderevent"
)

// The order event of cdc-bench (tools/internal/bench), as PostgreSQL's jsonb writes it (keys by
// length, not in the schema's order), and its JSON Schema; its Avro and Protobuf schemas are
// the benchmark's own (testkit/orderevent).
const (
	benchPayload    = `{"items": [{"qty": 2, "sku": "espresso"}], "event": "order.created", "amount": 12.5, "currency": "EUR", "customer": "customer-3", "order_id": 421337}`
	benchJSONSchema = `{"type":"object","required":["event","order_id","customer","amount","currency","items"],
  "additionalProperties":false,
  "properties":{"event":{"type":"string"},"order_id":{"type":"integer"},"customer":{"type":"string"},
    "amount":{"type":"number"},"currency":{"type":"string"},
    "items":{"type":"array","items":{"type":"object","required":["sku","qty"],
      "properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}}}}`
)

// benchEncode measures Encoder.Encode of the order event in format fm, its subject looked up
// before the timer starts: the per-record cost of --value-format.
func benchEncode(b *testing.B, fm Format, text string, typ sr.SchemaType) {
	f := srfake.New()
	b.Cleanup(f.Close)
	if _, _, err := f.RegisterSchema("orders-value", sr.Schema{Schema: text, Type: typ}); err != nil {
		b.Fatal(err)
	}
	e, err := New(Config{URLs: []string{f.URL()}, Format: fm})
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(benchPayload)
	if _, err := e.Encode(b.Context(), "orders", "", payload); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := e.Encode(b.Context(), "orders", "", payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeAvro(b *testing.B) { benchEncode(b, FormatAvro, orderevent.Avro, sr.TypeAvro) }
func BenchmarkEncodeProtobuf(b *testing.B) {
	benchEncode(b, FormatProtobuf, orderevent.Protobuf, sr.TypeProtobuf)
}
func BenchmarkEncodeJSONSchema(b *testing.B) {
	benchEncode(b, FormatJSONSchema, benchJSONSchema, sr.TypeJSON)
}

// BenchmarkEncodeAvroGeneral is the general way alone (every payload's way before the compiled
// plan), for comparison.
func BenchmarkEncodeAvroGeneral(b *testing.B) {
	c, err := newAvroCodec(orderevent.Avro)
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(benchPayload)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := c.encodeGeneral(make([]byte, 0, len(payload)+8), payload); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBenchPayloadTakesThePlan: the benchmark's event is written by the compiled plan.
func TestBenchPayloadTakesThePlan(t *testing.T) {
	c, err := newAvroCodec(orderevent.Avro)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.plan.encode(nil, []byte(benchPayload)); !ok {
		t.Fatal("the plan does not take the benchmark's order event")
	}
}
