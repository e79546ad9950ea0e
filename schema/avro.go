package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
)

// avroCodec writes a JSON payload as the Avro binary encoding of its schema. The JSON is the
// service's plain JSON: a union's value is written as it is (the first branch it fits is taken),
// or in Avro's JSON encoding ({"branch": value}); bytes and fixed are strings of code points
// 0-255 (Avro's JSON encoding); a missing field takes its default. A field the schema does not
// have, a value of the wrong type or out of range, does not fit.
//
// Most payloads are written by the schema's compiled plan (avrofast.go), straight from the
// JSON; one the plan does not take goes the general way below (avroNative, then hamba/avro),
// which writes the same bytes or says what does not fit.
type avroCodec struct {
	schema avro.Schema
	plan   *avroPlan // nil when the schema has a type only the general way writes
}

func newAvroCodec(text string) (*avroCodec, error) {
	// A cache of its own: named types of different subjects never meet.
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("parsing the Avro schema: %w", err)
	}
	return &avroCodec{schema: s, plan: newAvroPlan(s)}, nil
}

func (c *avroCodec) encode(dst, payload []byte) ([]byte, error) {
	if c.plan != nil {
		if out, ok := c.plan.encode(dst, payload); ok {
			return out, nil
		}
		// What the plan wrote past len(dst) is dropped: the general way appends over it.
	}
	return c.encodeGeneral(dst, payload)
}

// encodeGeneral is the general way: the payload decoded into Go values, checked against the
// schema and encoded by hamba/avro.
func (c *avroCodec) encodeGeneral(dst, payload []byte) ([]byte, error) {
	v, err := decodeJSON(payload)
	if err != nil {
		return nil, err
	}
	native, err := avroNative(c.schema, v, "$")
	if err != nil {
		return nil, err
	}
	b, err := avro.Marshal(c.schema, native)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// decodeJSON reads one JSON document, numbers kept as written.
func decodeJSON(payload []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := d.Token(); err == nil {
		return nil, errors.New("not JSON: data after the document")
	}
	return v, nil
}

// avroNative turns a JSON value into the Go value hamba/avro encodes for s; path names where
// in the payload it is, for the error.
func avroNative(s avro.Schema, v any, path string) (any, error) {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	mismatch := func(want string) error {
		return fmt.Errorf("%s: %s is not %s", path, jsonKind(v), want)
	}
	switch s.Type() {
	case avro.Null:
		if v != nil {
			return nil, mismatch("null")
		}
		return nil, nil
	case avro.Boolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, mismatch("a boolean")
	case avro.Int:
		n, err := jsonInt(v, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (Avro int)", path, err)
		}
		return int32(n), nil
	case avro.Long:
		n, err := jsonInt(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (Avro long)", path, err)
		}
		return n, nil
	case avro.Float, avro.Double:
		n, ok := v.(json.Number)
		if !ok {
			return nil, mismatch("a number")
		}
		bits := 64
		if s.Type() == avro.Float {
			bits = 32
		}
		f, err := strconv.ParseFloat(string(n), bits)
		if err != nil {
			return nil, fmt.Errorf("%s: %s is out of range", path, n)
		}
		if bits == 32 {
			return float32(f), nil
		}
		return f, nil
	case avro.String:
		if str, ok := v.(string); ok {
			return str, nil
		}
		return nil, mismatch("a string")
	case avro.Bytes:
		str, ok := v.(string)
		if !ok {
			return nil, mismatch("a string (Avro bytes)")
		}
		return latin1(str, path)
	case avro.Fixed:
		str, ok := v.(string)
		if !ok {
			return nil, mismatch("a string (Avro fixed)")
		}
		b, err := latin1(str, path)
		if err != nil {
			return nil, err
		}
		size := s.(*avro.FixedSchema).Size()
		if len(b) != size {
			return nil, fmt.Errorf("%s: %d bytes, the fixed type has %d", path, len(b), size)
		}
		arr := reflect.New(reflect.ArrayOf(size, reflect.TypeFor[byte]())).Elem() // hamba/avro writes fixed from [size]byte
		reflect.Copy(arr, reflect.ValueOf(b))
		return arr.Interface(), nil
	case avro.Enum:
		str, ok := v.(string)
		if !ok {
			return nil, mismatch("a string (Avro enum)")
		}
		if !slices.Contains(s.(*avro.EnumSchema).Symbols(), str) {
			return nil, fmt.Errorf("%s: %q is not a symbol of enum %s", path, str, s.(*avro.EnumSchema).FullName())
		}
		return str, nil
	case avro.Array:
		arr, ok := v.([]any)
		if !ok {
			return nil, mismatch("an array")
		}
		items := s.(*avro.ArraySchema).Items()
		out := make([]any, len(arr))
		for i, e := range arr {
			n, err := avroNative(items, e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case avro.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, mismatch("an object (Avro map)")
		}
		values := s.(*avro.MapSchema).Values()
		out := make(map[string]any, len(m))
		for k, e := range m {
			n, err := avroNative(values, e, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case avro.Record:
		return avroRecord(s.(*avro.RecordSchema), v, path)
	case avro.Union:
		return avroUnion(s.(*avro.UnionSchema), v, path)
	}
	return nil, fmt.Errorf("%s: Avro type %s is not supported", path, s.Type())
}

func avroRecord(rs *avro.RecordSchema, v any, path string) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %s is not an object (record %s)", path, jsonKind(v), rs.FullName())
	}
	out := make(map[string]any, len(rs.Fields()))
	for _, f := range rs.Fields() {
		fv, present := m[f.Name()]
		fp := path + "." + f.Name()
		if !present {
			if !f.HasDefault() {
				return nil, fmt.Errorf("%s: missing, and the field has no default", fp)
			}
			n, err := avroDefault(f.Type(), f.Default(), fp)
			if err != nil {
				return nil, err
			}
			out[f.Name()] = n
			continue
		}
		n, err := avroNative(f.Type(), fv, fp)
		if err != nil {
			return nil, err
		}
		out[f.Name()] = n
	}
	var extra []string
	for k := range m {
		if !slices.ContainsFunc(rs.Fields(), func(f *avro.Field) bool { return f.Name() == k }) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, fmt.Errorf("%s: field(s) %s not in record %s", path, strings.Join(extra, ", "), rs.FullName())
	}
	return out, nil
}

// avroUnion returns a union's value as hamba/avro's map form: {"branch name": value}, or an
// empty map for null.
func avroUnion(us *avro.UnionSchema, v any, path string) (any, error) {
	types := us.Types()
	if v == nil {
		if _, i := types.Get("null"); i >= 0 {
			return map[string]any(nil), nil
		}
		return nil, fmt.Errorf("%s: null is not allowed (union %s)", path, unionNames(types))
	}
	// Avro's JSON encoding: {"branch": value}.
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for k, e := range m {
			if bs, _ := types.Get(k); bs != nil {
				if n, err := avroNative(bs, e, path+"."+k); err == nil {
					return map[string]any{k: n}, nil
				}
			}
		}
	}
	var errs []string
	for _, bs := range types {
		if bs.Type() == avro.Null {
			continue
		}
		n, err := avroNative(bs, v, path)
		if err == nil {
			return map[string]any{avroTypeName(bs): n}, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("%s: fits no branch of union %s (%s)", path, unionNames(types), strings.Join(errs, "; "))
}

// avroDefault converts a field's default (hamba's parsed form) like a JSON value; a union's
// default is its first branch's.
func avroDefault(s avro.Schema, def any, path string) (any, error) {
	v, err := jsonRoundTrip(def)
	if err != nil {
		return nil, fmt.Errorf("%s: default: %w", path, err)
	}
	if us, ok := s.(*avro.UnionSchema); ok {
		first := us.Types()[0]
		if first.Type() == avro.Null {
			return map[string]any(nil), nil
		}
		n, err := avroNative(first, v, path)
		if err != nil {
			return nil, err
		}
		return map[string]any{avroTypeName(first): n}, nil
	}
	return avroNative(s, v, path)
}

func jsonRoundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeJSON(b)
}

// avroTypeName is the name hamba/avro knows a union branch by.
func avroTypeName(s avro.Schema) string {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	name := string(s.Type())
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		name += "." + string(ls.Logical().Type())
	}
	return name
}

func unionNames(types avro.Schemas) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = avroTypeName(t)
	}
	return "[" + strings.Join(names, ", ") + "]"
}

func jsonInt(v any, bits int) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s is not an integer", jsonKind(v))
	}
	i, err := strconv.ParseInt(string(n), 10, bits)
	if err != nil {
		if f, ferr := strconv.ParseFloat(string(n), 64); ferr == nil && f == math.Trunc(f) &&
			f >= -math.Ldexp(1, bits-1) && f < math.Ldexp(1, bits-1) {
			return int64(f), nil // 1e3, 2.0
		}
		return 0, fmt.Errorf("%s is not an integer of %d bits", n, bits)
	}
	return i, nil
}

// latin1 reads Avro's JSON form of bytes: one byte a code point, each 0-255.
func latin1(s, path string) ([]byte, error) {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 255 {
			return nil, fmt.Errorf("%s: code point %U is not a byte (Avro bytes in JSON are code points 0-255)", path, r)
		}
		b = append(b, byte(r))
	}
	return b, nil
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + string(x)
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return strconv.Quote(x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
