package schema

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"
)

// Every Avro type the JSON can carry, encoded by the package and read back by goavro (a library
// the package does not use to encode).
const allTypesAvro = `{"type":"record","name":"All","fields":[
	{"name":"b","type":"boolean"},
	{"name":"i","type":"int"},
	{"name":"l","type":"long"},
	{"name":"f","type":"float"},
	{"name":"d","type":"double"},
	{"name":"s","type":"string"},
	{"name":"by","type":"bytes"},
	{"name":"fx","type":{"type":"fixed","name":"Two","size":2}},
	{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"day","type":{"type":"int","logicalType":"date"}},
	{"name":"m","type":{"type":"map","values":"long"}},
	{"name":"u","type":["null","long","string"]},
	{"name":"uj","type":["null","long","string"]},
	{"name":"un","type":["null","string"]},
	{"name":"nested","type":["null",{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"}]}]},
	{"name":"withDefault","type":"string","default":"dflt"}
]}`

func TestAvroEncodesEveryJSONTypeAsGoavroReadsIt(t *testing.T) {
	c, err := newAvroCodec(allTypesAvro)
	if err != nil {
		t.Fatal(err)
	}
	payload := `{"b":true,"i":-7,"l":9007199254740993,"f":1.5,"d":-2.25,"s":"héllo","by":"\u0000\u00ff","fx":"ab",
		"ts":1700000000123,"day":19700,"m":{"k":3},"u":"text","uj":{"long":5},"un":null,"nested":{"x":4}}`
	body, err := c.encode(nil, []byte(payload))
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	m := goavroRecord(t, allTypesAvro, body)
	checks := map[string]bool{
		"b":           m["b"] == true,
		"i":           m["i"] == int32(-7),
		"l":           m["l"] == int64(9007199254740993), // beyond float64's integers: kept exact
		"f":           m["f"] == float32(1.5),
		"d":           m["d"] == -2.25,
		"s":           m["s"] == "héllo",
		"by":          bytes.Equal(m["by"].([]byte), []byte{0, 0xff}),
		"fx":          bytes.Equal(m["fx"].([]byte), []byte("ab")),
		"ts":          m["ts"].(time.Time).Equal(time.UnixMilli(1700000000123)),
		"day":         m["day"].(time.Time).Equal(time.Unix(19700*86400, 0)),
		"m":           m["m"].(map[string]any)["k"] == int64(3),
		"u":           m["u"].(map[string]any)["string"] == "text",
		"uj":          m["uj"].(map[string]any)["long"] == int64(5),
		"un":          m["un"] == nil,
		"nested":      m["nested"].(map[string]any)["Inner"].(map[string]any)["x"] == int32(4),
		"withDefault": m["withDefault"] == "dflt",
	}
	for k, ok := range checks {
		if !ok {
			t.Errorf("field %s decoded as %#v", k, m[k])
		}
	}
}

func TestAvroRejectsWhatDoesNotFit(t *testing.T) {
	c, err := newAvroCodec(`{"type":"record","name":"R","fields":[{"name":"fx","type":{"type":"fixed","name":"Two","size":2}},
		{"name":"u","type":["long","boolean"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		`{"fx":"abc","u":1}`,   // fixed of the wrong size
		`{"fx":"ab","u":null}`, // null where the union has none
		`{"fx":"ab","u":"x"}`,  // no branch
		`{"fx":"ab","u":1.5}`,  // not an integer
		`{"fx":"€€","u":1}`,    // not bytes
		`{"fx":"ab","u":1} {}`, // two documents
	} {
		if _, err := c.encode(nil, []byte(p)); err == nil || errors.Is(err, nil) {
			t.Errorf("%s: encoded, want an error", p)
		}
	}
}

// FuzzAvroEncode: any payload is encoded or refused with an error, never a panic, and what is
// encoded is a datum goavro reads whole.
func FuzzAvroEncode(f *testing.F) {
	c, codec := allTypesFuzz(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		body, err := c.encode(nil, payload)
		if err != nil {
			return
		}
		if _, rest, err := codec.NativeFromBinary(body); err != nil || len(rest) != 0 {
			t.Fatalf("encoded %q as %x, which goavro does not read whole: %v (%d bytes left)", payload, body, err, len(rest))
		}
	})
}

// allTypesFuzz seeds f with payloads for allTypesAvro (fitting ones: the edges of each type,
// keys out of order, unions both ways; and some that do not fit) and returns the schema's
// codec and goavro's, which reads what it writes.
func allTypesFuzz(f *testing.F) (*avroCodec, *goavro.Codec) {
	f.Helper()
	for _, p := range []string{
		`{"b":true,"i":1,"l":2,"f":1,"d":2,"s":"","by":"","fx":"ab","ts":0,"day":0,"m":{},"u":null,"uj":null,"un":null,"nested":null}`,
		`{"b":false,"i":2147483647,"l":-9223372036854775808,"f":3.4e38,"d":1e308,"s":"x","by":"\u00ff","fx":"\u0000\u0001","ts":1,"day":-1,"m":{"a":1},"u":{"string":"s"},"uj":7,"un":"n","nested":{"x":1}}`,
		`{"b":false,"i":2147483647,"l":-9223372036854775808,"f":3.4e38,"d":1e308,"s":"x\u00e9","by":"\u00ff","fx":"\u0000\u0001","ts":1,"day":-1,"m":{"a":1},"u":{"string":"s"},"uj":7,"un":"n","nested":{"x":1}}`,
		`{"nested":{"Inner":{"x":1}},"i":1e2,"l":2.0,"b":true,"f":1,"d":2,"s":"","by":"","fx":"ab","ts":0,"day":0,"m":{},"u":null,"uj":{"long":1},"un":null}`,
		`{"i":1e2}`, `[]`, `null`, `{"u":{"long":"x"}}`,
	} {
		f.Add([]byte(p))
	}
	c, err := newAvroCodec(allTypesAvro)
	if err != nil {
		f.Fatal(err)
	}
	codec, err := goavro.NewCodec(allTypesAvro)
	if err != nil {
		f.Fatal(err)
	}
	return c, codec
}
