package schema

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// The schemas the compiled plan is checked on against the general way (avroNative, then
// hamba/avro), which is its oracle.
var planSchemas = map[string]string{
	"all":   allTypesAvro,
	"order": orderAvro,
	"tree": `{"type":"record","name":"Node","namespace":"t","fields":[
		{"name":"v","type":"int"},
		{"name":"kids","type":{"type":"array","items":"Node"},"default":[]},
		{"name":"next","type":["null","Node"],"default":null}]}`,
	"unions": `{"type":"record","name":"U","fields":[
		{"name":"a","type":["string","long","null"]},
		{"name":"b","type":["null",{"type":"long","logicalType":"timestamp-millis"},{"type":"map","values":"int"}],"default":null},
		{"name":"c","type":["boolean","double",{"type":"array","items":"null"}]},
		{"name":"d","type":["null",{"type":"enum","name":"E","symbols":["X","Y"]},{"type":"fixed","name":"F","size":3}]},
		{"name":"e","type":["null",{"type":"record","name":"P","fields":[{"name":"long","type":"long"}]},"long"],"default":null},
		{"name":"f","type":{"type":"string","logicalType":"uuid"},"default":"u"},
		{"name":"g","type":["float","string"],"default":1.5},
		{"name":"h","type":"bytes","default":"\u00ff\u0000"}]}`,
}

// TestAvroPlanWritesWhatTheGeneralWayWrites: random payloads, right and wrong, for each schema;
// whatever the plan writes, the general way writes byte for byte, and every payload the general
// way writes the plan takes too (so none pays for the slow way without need).
func TestAvroPlanWritesWhatTheGeneralWayWrites(t *testing.T) {
	for name, text := range planSchemas {
		t.Run(name, func(t *testing.T) {
			c, err := newAvroCodec(text)
			if err != nil {
				t.Fatal(err)
			}
			if c.plan == nil {
				t.Fatal("no plan compiled for the schema")
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			var took, refused int
			for range 20000 {
				g := &payloadGen{rng: rng, faults: rng.IntN(3) == 0}
				payload := g.value(c.schema, 0)
				mangled := rng.IntN(20) == 0
				if mangled {
					payload = mangle(rng, payload)
				}
				want, wantErr := c.encodeGeneral([]byte("hdr"), []byte(payload))
				got, ok := c.plan.encode([]byte("hdr"), []byte(payload))
				switch {
				case ok && wantErr != nil:
					t.Fatalf("%s: the plan wrote %x, the general way refuses it: %v", payload, got, wantErr)
				case ok && !bytes.Equal(got, want):
					t.Fatalf("%s:\nplan    %x\ngeneral %x", payload, got, want)
				case !ok && wantErr == nil && !mangled: // text after the document: the general way's reader may let it pass
					t.Fatalf("%s: the plan does not take it, the general way writes %x", payload, want)
				}
				full, fullErr := c.encode([]byte("hdr"), []byte(payload))
				if fmt.Sprint(fullErr) != fmt.Sprint(wantErr) || !bytes.Equal(full, want) {
					t.Fatalf("%s: encode gave %x, %v; the general way %x, %v", payload, full, fullErr, want, wantErr)
				}
				if ok {
					took++
				} else {
					refused++
				}
			}
			if took < 2000 || refused < 1000 {
				t.Errorf("the payloads were %d taken and %d refused: too few of one kind to compare", took, refused)
			}
		})
	}
}

// TestAvroPlanMapOfManyKeysReadsAsTheGeneralWays: hamba/avro writes a map's entries in Go's map
// order (random); the plan writes them in the JSON's. Both read back the same.
func TestAvroPlanMapOfManyKeysReadsAsTheGeneralWays(t *testing.T) {
	text := `{"type":"record","name":"M","fields":[{"name":"m","type":{"type":"map","values":["null","string"]}}]}`
	c, err := newAvroCodec(text)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"m":{`)
	for i := range 250 { // three blocks
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":"v%d"`, i, i)
	}
	b.WriteString(`,"n":null}}`)
	want, err := c.encodeGeneral(nil, []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := c.plan.encode(nil, []byte(b.String()))
	if !ok {
		t.Fatal("the plan does not take a map of 251 keys")
	}
	if g, w := goavroRecord(t, text, got), goavroRecord(t, text, want); !reflect.DeepEqual(g, w) {
		t.Errorf("the plan's map reads as %v, the general way's as %v", g, w)
	}
}

// FuzzAvroPlanMatchesGeneral: for any payload, what the plan writes the general way writes
// (the same datum; the map's entries may come in another order), and what it refuses the
// general way refuses too, or writes.
func FuzzAvroPlanMatchesGeneral(f *testing.F) {
	c, codec := allTypesFuzz(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		want, wantErr := c.encodeGeneral(nil, payload)
		got, ok := c.plan.encode(nil, payload)
		if !ok {
			return
		}
		if wantErr != nil {
			t.Fatalf("%q: the plan wrote %x, the general way refuses it: %v", payload, got, wantErr)
		}
		if bytes.Equal(got, want) {
			return
		}
		g, _, gerr := codec.NativeFromBinary(got)
		w, _, werr := codec.NativeFromBinary(want)
		if gerr != nil || werr != nil || !reflect.DeepEqual(g, w) {
			t.Fatalf("%q:\nplan    %x (%v)\ngeneral %x (%v)", payload, got, gerr, want, werr)
		}
	})
}

// payloadGen writes a JSON payload for a schema: mostly fitting, with faults (wrong types,
// missing and unknown fields, values out of range) when faults is set, and the JSON written in
// the ways a producer may (keys in any order, a key twice, escapes, 1e2 for 100, unions as the
// plain value or Avro's {"branch": value}).
type payloadGen struct {
	rng    *rand.Rand
	faults bool
}

func (g *payloadGen) fault() bool { return g.faults && g.rng.IntN(12) == 0 }

func (g *payloadGen) value(s avro.Schema, depth int) string {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if g.fault() {
		return g.anyJSON(depth)
	}
	switch s.Type() {
	case avro.Null:
		return "null"
	case avro.Boolean:
		return strconv.FormatBool(g.rng.IntN(2) == 0)
	case avro.Int:
		return g.integer(32)
	case avro.Long:
		return g.integer(64)
	case avro.Float, avro.Double:
		return []string{"0", "-1.5", "3.25e2", "1E-3", "123456789.125", "3.4e38", "1e39", "-0", "7"}[g.rng.IntN(9)]
	case avro.String:
		return g.str()
	case avro.Bytes:
		return []string{`""`, `"\u0000\u00ff"`, `"ab"`, `"é"`, `"\u0100"`}[g.rng.IntN(5)]
	case avro.Fixed:
		size := s.(*avro.FixedSchema).Size()
		if g.faults && g.rng.IntN(4) == 0 {
			size++
		}
		return strconv.Quote(strings.Repeat("\u00e9", size))
	case avro.Enum:
		syms := s.(*avro.EnumSchema).Symbols()
		if g.faults && g.rng.IntN(4) == 0 {
			return `"NOPE"`
		}
		return strconv.Quote(syms[g.rng.IntN(len(syms))])
	case avro.Array:
		n := g.rng.IntN(4)
		if g.rng.IntN(30) == 0 {
			n = 100 + g.rng.IntN(150)
		}
		if depth > 3 {
			n = 0
		}
		items := make([]string, n)
		for i := range items {
			items[i] = g.value(s.(*avro.ArraySchema).Items(), depth+1)
		}
		return "[" + strings.Join(items, g.sep()) + "]"
	case avro.Map:
		if g.rng.IntN(2) == 0 || depth > 3 {
			return "{ }"
		}
		return `{"k` + strconv.Itoa(g.rng.IntN(3)) + `":` + g.value(s.(*avro.MapSchema).Values(), depth+1) + "}"
	case avro.Record:
		rs := s.(*avro.RecordSchema)
		var kv []string
		for _, f := range rs.Fields() {
			if (f.HasDefault() || g.faults) && g.rng.IntN(4) == 0 {
				continue // missing: its default, or an error without one
			}
			if depth > 3 && f.HasDefault() {
				continue
			}
			kv = append(kv, g.key(f.Name())+":"+g.value(f.Type(), depth+1))
			if g.rng.IntN(25) == 0 {
				kv = append(kv, g.key(f.Name())+":"+g.value(f.Type(), depth+1)) // given twice: the last counts
			}
		}
		if g.fault() {
			kv = append(kv, `"unknown":1`)
		}
		if g.rng.IntN(3) == 0 {
			g.rng.Shuffle(len(kv), func(i, j int) { kv[i], kv[j] = kv[j], kv[i] })
		}
		return "{" + strings.Join(kv, g.sep()) + "}"
	case avro.Union:
		types := s.(*avro.UnionSchema).Types()
		b := types[g.rng.IntN(len(types))]
		v := g.value(b, depth+1)
		if g.rng.IntN(3) == 0 {
			return "{" + strconv.Quote(avroTypeName(b)) + ":" + v + "}"
		}
		return v
	}
	return "null"
}

func (g *payloadGen) integer(bits int) string {
	switch g.rng.IntN(10) {
	case 0:
		return "1e2"
	case 1:
		return "-2.0"
	case 2:
		if bits == 32 {
			return "2147483648" // out of range
		}
		return "-9223372036854775808"
	case 3:
		return "9007199254740993"
	case 4:
		return "1.5"
	}
	return strconv.Itoa(g.rng.IntN(2000) - 1000)
}

func (g *payloadGen) str() string {
	return []string{`""`, `"plain"`, `"héllo"`, `"tab\there"`, `"\u00e9\ud83d\ude00"`, `"quote\"d"`, "\"bad\xffutf8\"", `"X"`, `"Y"`}[g.rng.IntN(9)]
}

func (g *payloadGen) key(name string) string {
	if g.rng.IntN(15) == 0 && name != "" {
		return `"\u` + fmt.Sprintf("%04x", name[0]) + name[1:] + `"` // the same key, escaped
	}
	return strconv.Quote(name)
}

func (g *payloadGen) sep() string { return []string{",", " , ", ",\n\t"}[g.rng.IntN(3)] }

func (g *payloadGen) anyJSON(depth int) string {
	switch g.rng.IntN(8) {
	case 0:
		return "null"
	case 1:
		return "true"
	case 2:
		return g.integer(64)
	case 3:
		return g.str()
	case 4:
		if depth < 4 {
			return "[" + g.anyJSON(depth+1) + "]"
		}
	case 5:
		if depth < 4 {
			return `{"long":` + g.anyJSON(depth+1) + "}"
		}
	case 6:
		return `{"x":1,"x":2}`
	}
	return "1.25"
}

// mangle breaks or pads a payload's text.
func mangle(rng *rand.Rand, p string) string {
	switch rng.IntN(6) {
	case 0:
		return p + " "
	case 1:
		return p + " {}"
	case 2:
		if len(p) > 1 {
			return p[:rng.IntN(len(p))]
		}
	case 3:
		return " \n" + p
	case 4:
		return strings.Replace(p, ":", ": 01", 1)
	}
	return p + " x"
}
