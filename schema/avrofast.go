package schema

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/hamba/avro/v2"
)

// avroPlan is an Avro schema compiled once for writing JSON straight to Avro binary: the JSON is
// walked token by token and each value written as the schema's type for it, with no generic map
// in between. It writes what avroCodec's general path (avroNative, then hamba/avro) writes, and
// it only answers yes or no: a payload it does not take (a value that does not fit, anything
// unusual in the JSON) goes to the general path, which encodes it or says what is wrong. So the
// values written and the reasons a row is refused are the general path's.
type avroPlan struct {
	root *avroNode
}

type avroNode struct {
	kind avro.Type

	fields []avroField    // record
	index  map[string]int // record: field name -> fields index
	elem   *avroNode      // array items, map values
	enum   map[string]int // enum symbol -> index
	size   int            // fixed
	types  []*avroNode    // union branches, in the schema's order
	names  map[string]int // union branch name (as hamba/avro knows it) -> index
	null   int            // union: the null branch's index, -1 without one
}

type avroField struct {
	name string
	node *avroNode
	// def is the field's default as Avro binary, computed by the general path; hasDef false
	// when the field has none (or the general path cannot write it).
	def    []byte
	hasDef bool
}

// avroBlockLength is hamba/avro's default: arrays and maps are written in blocks of at most
// 100 items, each headed by the negated count and the block's size in bytes.
const avroBlockLength = 100

// newAvroPlan compiles s, or returns nil when s has a type the plan does not write the way the
// general path does (then every payload takes the general path).
func newAvroPlan(s avro.Schema) *avroPlan {
	seen := map[avro.Schema]*avroNode{}
	root, ok := compileAvroNode(s, seen)
	if !ok {
		return nil
	}
	return &avroPlan{root: root}
}

func compileAvroNode(s avro.Schema, seen map[avro.Schema]*avroNode) (*avroNode, bool) {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if n, ok := seen[s]; ok {
		return n, true // a named type met again: the record being compiled
	}
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		switch ls.Logical().Type() {
		case avro.Date, avro.TimeMillis, avro.TimeMicros, avro.TimestampMillis, avro.TimestampMicros,
			avro.LocalTimestampMillis, avro.LocalTimestampMicros, avro.UUID:
		default:
			return nil, false // decimal and duration: hamba/avro writes them from other Go types
		}
	}
	n := &avroNode{kind: s.Type(), null: -1}
	switch s.Type() {
	case avro.Null, avro.Boolean, avro.Int, avro.Long, avro.Float, avro.Double, avro.String, avro.Bytes:
	case avro.Fixed:
		n.size = s.(*avro.FixedSchema).Size()
	case avro.Enum:
		n.enum = map[string]int{}
		for i, sym := range s.(*avro.EnumSchema).Symbols() {
			n.enum[sym] = i
		}
	case avro.Array, avro.Map:
		seen[s] = n
		var elem avro.Schema
		if a, isArray := s.(*avro.ArraySchema); isArray {
			elem = a.Items()
		} else {
			elem = s.(*avro.MapSchema).Values()
		}
		e, ok := compileAvroNode(elem, seen)
		if !ok {
			return nil, false
		}
		n.elem = e
	case avro.Record:
		seen[s] = n
		rs := s.(*avro.RecordSchema)
		n.index = map[string]int{}
		for i, f := range rs.Fields() {
			fn, ok := compileAvroNode(f.Type(), seen)
			if !ok {
				return nil, false
			}
			af := avroField{name: f.Name(), node: fn}
			if f.HasDefault() {
				if native, err := avroDefault(f.Type(), f.Default(), "$"); err == nil {
					if b, err := avro.Marshal(f.Type(), native); err == nil {
						af.def, af.hasDef = b, true
					}
				}
			}
			n.fields = append(n.fields, af)
			n.index[f.Name()] = i
		}
	case avro.Union:
		seen[s] = n
		n.names = map[string]int{}
		for i, t := range s.(*avro.UnionSchema).Types() {
			bn, ok := compileAvroNode(t, seen)
			if !ok {
				return nil, false
			}
			n.types = append(n.types, bn)
			if bn.kind == avro.Null && n.null < 0 {
				n.null = i
			}
			if name := avroTypeName(t); name != "" {
				if _, dup := n.names[name]; !dup {
					n.names[name] = i
				}
			}
		}
	default:
		return nil, false
	}
	return n, true
}

// encode appends payload's Avro binary to dst; false when the payload is not one the plan takes
// (dst may then hold a partial value past its original length).
func (p *avroPlan) encode(dst, payload []byte) ([]byte, bool) {
	var spans [32]int
	d := jsonWalker{b: payload, spans: spans[:0]}
	d.ws()
	dst, ok := d.value(p.root, dst)
	if !ok {
		return dst, false
	}
	d.ws()
	return dst, d.i == len(d.b)
}

// jsonWalker reads one JSON document in place. Every method returns false for what it does not
// take, valid JSON or not: the general path then decides.
type jsonWalker struct {
	b     []byte
	i     int
	depth int
	spans []int // record field positions, a stack shared by nested records
}

const maxJSONDepth = 512

func (d *jsonWalker) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonWalker) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *jsonWalker) literal(word string) bool {
	if len(d.b)-d.i >= len(word) && string(d.b[d.i:d.i+len(word)]) == word {
		d.i += len(word)
		return true
	}
	return false
}

// value writes the JSON value at d.i as n's type.
func (d *jsonWalker) value(n *avroNode, dst []byte) ([]byte, bool) {
	switch n.kind {
	case avro.Null:
		return dst, d.literal("null")
	case avro.Boolean:
		switch {
		case d.literal("true"):
			return append(dst, 1), true
		case d.literal("false"):
			return append(dst, 0), true
		}
		return dst, false
	case avro.Int, avro.Long:
		bits := 64
		if n.kind == avro.Int {
			bits = 32
		}
		num, ok := d.number()
		if !ok {
			return dst, false
		}
		v, ok := jsonIntOf(num, bits)
		if !ok {
			return dst, false
		}
		return appendAvroLong(dst, v), true
	case avro.Float, avro.Double:
		num, ok := d.number()
		if !ok {
			return dst, false
		}
		if n.kind == avro.Float {
			f, err := strconv.ParseFloat(unsafeString(num), 32)
			if err != nil {
				return dst, false
			}
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), true
		}
		f, err := strconv.ParseFloat(unsafeString(num), 64)
		if err != nil {
			return dst, false
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), true
	case avro.String:
		s, ok := d.str()
		if !ok {
			return dst, false
		}
		dst = appendAvroLong(dst, int64(len(s)))
		return append(dst, s...), true
	case avro.Bytes, avro.Fixed:
		s, ok := d.str()
		if !ok {
			return dst, false
		}
		start := len(dst)
		if n.kind == avro.Bytes {
			dst = appendAvroLong(dst, int64(utf8.RuneCount(s)))
		}
		body := len(dst)
		for len(s) > 0 {
			r, size := utf8.DecodeRune(s)
			if r > 255 {
				return dst[:start], false
			}
			dst = append(dst, byte(r))
			s = s[size:]
		}
		if n.kind == avro.Fixed && len(dst)-body != n.size {
			return dst[:start], false
		}
		return dst, true
	case avro.Enum:
		s, ok := d.str()
		if !ok {
			return dst, false
		}
		i, ok := n.enum[string(s)]
		if !ok {
			return dst, false
		}
		return appendAvroLong(dst, int64(i)), true
	case avro.Array:
		return d.array(n, dst)
	case avro.Map:
		return d.object(n, dst)
	case avro.Record:
		return d.record(n, dst)
	case avro.Union:
		return d.union(n, dst)
	}
	return dst, false
}

// blocks writes the items item writes, in hamba/avro's blocks, then the closing empty block.
// item is called at each item's start with the item's index and returns false at the end.
func (d *jsonWalker) blocks(dst []byte, item func(dst []byte) ([]byte, bool, bool)) ([]byte, bool) {
	for {
		start := len(dst)
		count := 0
		for count < avroBlockLength {
			var more, ok bool
			dst, more, ok = item(dst)
			if !ok {
				return dst, false
			}
			if !more {
				break
			}
			count++
		}
		if count == 0 {
			return append(dst, 0), true
		}
		dst = insertBlockHeader(dst, start, count)
		if count < avroBlockLength {
			return append(dst, 0), true
		}
	}
}

// list writes the members of the JSON array or object that d.i is inside (past its opening and
// the white space after it) up to its closing byte, in blocks: member reads the member at d.i
// and writes it.
func (d *jsonWalker) list(dst []byte, closing byte, member func(dst []byte) ([]byte, bool)) ([]byte, bool) {
	first, done := true, false
	return d.blocks(dst, func(dst []byte) ([]byte, bool, bool) {
		if done {
			return dst, false, true
		}
		if first {
			first = false
			if d.peek() == closing {
				d.i++
				return dst, false, true
			}
		}
		dst, ok := member(dst)
		if !ok {
			return dst, false, false
		}
		more, ok := d.next(closing)
		done = !more
		return dst, ok, ok
	})
}

// next reads past the white space, then the comma (more is true: another member follows, and
// the white space after the comma is read too) or the closing byte (more is false) that
// follows a member of an array or object.
func (d *jsonWalker) next(closing byte) (more, ok bool) {
	d.ws()
	switch d.peek() {
	case ',':
		d.i++
		d.ws()
		return true, true
	case closing:
		d.i++
		return false, true
	}
	return false, false
}

// key reads an object member's key and the colon after it, and the white space around that.
func (d *jsonWalker) key() ([]byte, bool) {
	k, ok := d.str()
	if !ok {
		return nil, false
	}
	d.ws()
	if d.peek() != ':' {
		return nil, false
	}
	d.i++
	d.ws()
	return k, true
}

// eachMember reads the members of the array or object that d.i is inside (past its opening and
// the white space after it) and its closing byte: member reads the member at d.i.
func (d *jsonWalker) eachMember(closing byte, member func() bool) bool {
	if d.peek() == closing {
		d.i++
		return true
	}
	for {
		if !member() {
			return false
		}
		if more, ok := d.next(closing); !more {
			return ok
		}
	}
}

// insertBlockHeader puts a block's header before its items, which start at start.
func insertBlockHeader(dst []byte, start, count int) []byte {
	var hdr [20]byte
	size := len(dst) - start
	h := hdr[:0]
	if size > 0 {
		h = appendAvroLong(h, -int64(count))
		h = appendAvroLong(h, int64(size))
	} else {
		h = appendAvroLong(h, int64(count))
	}
	dst = append(dst, h...)
	copy(dst[start+len(h):], dst[start:start+size])
	copy(dst[start:], h)
	return dst
}

func (d *jsonWalker) array(n *avroNode, dst []byte) ([]byte, bool) {
	if d.peek() != '[' || !d.enter() {
		return dst, false
	}
	d.i++
	d.ws()
	dst, ok := d.list(dst, ']', func(dst []byte) ([]byte, bool) {
		return d.value(n.elem, dst)
	})
	d.depth--
	return dst, ok
}

// object writes a JSON object as an Avro map. A key given twice is left to the general path.
func (d *jsonWalker) object(n *avroNode, dst []byte) ([]byte, bool) {
	if d.peek() != '{' || !d.enter() {
		return dst, false
	}
	objStart, dstStart := d.i, len(dst)
	d.i++
	d.ws()
	dup := false
	var keys []string
	dst, ok := d.list(dst, '}', func(dst []byte) ([]byte, bool) {
		k, ok := d.key()
		if !ok {
			return dst, false
		}
		ks := string(k)
		if slices.Contains(keys, ks) {
			dup = true
			return dst, false
		}
		keys = append(keys, ks)
		dst = appendAvroLong(dst, int64(len(ks)))
		dst = append(dst, ks...)
		return d.value(n.elem, dst)
	})
	d.depth--
	if dup {
		d.i, dst = objStart, dst[:dstStart]
		return d.objectOfRepeatedKeys(n, dst)
	}
	return dst, ok
}

// objectOfRepeatedKeys writes a JSON object that has a key more than once as encoding/json
// reads it: the last value of each key counts.
func (d *jsonWalker) objectOfRepeatedKeys(n *avroNode, dst []byte) ([]byte, bool) {
	if !d.enter() {
		return dst, false
	}
	dst, ok := d.repeatedKeysBody(n, dst)
	d.depth--
	return dst, ok
}

func (d *jsonWalker) repeatedKeysBody(n *avroNode, dst []byte) ([]byte, bool) {
	d.i++
	d.ws()
	var keys []string
	var at []int
	if !d.eachMember('}', func() bool {
		k, ok := d.key()
		if !ok {
			return false
		}
		i := slices.Index(keys, string(k))
		if i < 0 {
			keys, at = append(keys, string(k)), append(at, 0)
			i = len(keys) - 1
		}
		at[i] = d.i
		return d.skip()
	}) {
		return dst, false
	}
	end := d.i
	next := 0
	dst, ok := d.blocks(dst, func(dst []byte) ([]byte, bool, bool) {
		if next == len(keys) {
			return dst, false, true
		}
		dst = appendAvroLong(dst, int64(len(keys[next])))
		dst = append(dst, keys[next]...)
		d.i = at[next]
		next++
		dst, ok := d.value(n.elem, dst)
		return dst, true, ok
	})
	d.i = end
	return dst, ok
}

// record writes a JSON object's fields in the schema's order. While the keys come in that order
// each value is written as it is read; from the first that does not, the rest are noted and
// written after the object is read. A missing field takes its default.
func (d *jsonWalker) record(n *avroNode, dst []byte) ([]byte, bool) {
	if d.peek() != '{' || !d.enter() {
		return dst, false
	}
	base := len(d.spans)
	for range n.fields {
		d.spans = append(d.spans, -1)
	}
	dst, ok := d.recordFields(n, dst, base)
	d.spans = d.spans[:base]
	d.depth--
	return dst, ok
}

// recordFields is record's body: the fields' positions are d.spans[base:].
func (d *jsonWalker) recordFields(n *avroNode, dst []byte, base int) ([]byte, bool) {
	d.i++
	d.ws()
	objStart, dstStart := d.i, len(dst) // just past the '{'
	next := 0                           // fields [0, next) are written
	inOrder := true
again:
	if d.peek() == '}' {
		d.i++
	} else {
		for {
			k, ok := d.key()
			if !ok {
				return dst, false
			}
			fi, known := n.index[string(k)]
			if !known {
				return dst, false
			}
			switch {
			case fi < next:
				// A key given twice, the first already written: read the object again,
				// noting every value, so that the last counts.
				d.restart(base, len(n.fields))
				d.i, dst, next, inOrder = objStart, dst[:dstStart], 0, false
				goto again
			case inOrder && fi == next:
				if dst, ok = d.value(n.fields[fi].node, dst); !ok {
					// A later value of the same key may fit: read the object again, noting.
					d.restart(base, len(n.fields))
					d.i, dst, next, inOrder = objStart, dst[:dstStart], 0, false
					goto again
				}
				next++
			default:
				inOrder = false
				d.spans[base+fi] = d.i
				if !d.skip() {
					return dst, false
				}
			}
			more, ok := d.next('}')
			if !ok {
				return dst, false
			}
			if !more {
				break
			}
		}
	}
	end := d.i
	for fi := next; fi < len(n.fields); fi++ {
		f := &n.fields[fi]
		if at := d.spans[base+fi]; at >= 0 {
			d.i = at
			var ok bool
			if dst, ok = d.value(f.node, dst); !ok {
				return dst, false
			}
			continue
		}
		if !f.hasDef {
			return dst, false
		}
		dst = append(dst, f.def...)
	}
	d.i = end
	return dst, true
}

// restart forgets the positions noted of a record's fields, to read its object again.
func (d *jsonWalker) restart(base, fields int) {
	for i := base; i < base+fields; i++ {
		d.spans[i] = -1
	}
}

// union writes the branch's index and the value: null as the null branch; an object of one key
// naming a branch, whose value fits it, as that branch (Avro's JSON encoding); else the first
// branch other than null the value fits.
func (d *jsonWalker) union(n *avroNode, dst []byte) ([]byte, bool) {
	if d.peek() == 'n' {
		if n.null < 0 || !d.literal("null") {
			return dst, false
		}
		return appendAvroLong(dst, int64(n.null)), true
	}
	start, mark := d.i, len(dst)
	if d.peek() == '{' {
		if branch, at, end, ok := d.soleKey(n); ok {
			d.i = at
			out, ok := d.value(n.types[branch], appendAvroLong(dst, int64(branch)))
			if ok {
				d.i = end
				return out, true
			}
			dst = out[:mark]
		}
		d.i = start
	}
	for i, t := range n.types {
		if t.kind == avro.Null {
			continue
		}
		d.i = start
		out, ok := d.value(t, appendAvroLong(dst, int64(i)))
		if ok {
			return out, true
		}
		dst = out[:mark]
	}
	return dst, false
}

// soleKey reads the object at d.i; if its keys are all one key naming a branch of n, it returns
// the branch, where the (last) value starts and where the object ends.
func (d *jsonWalker) soleKey(n *avroNode) (branch, at, end int, ok bool) {
	if !d.enter() {
		return 0, 0, 0, false
	}
	branch, at, end, ok = d.soleKeyBody(n)
	d.depth--
	return branch, at, end, ok
}

func (d *jsonWalker) soleKeyBody(n *avroNode) (branch, at, end int, ok bool) {
	d.i++
	d.ws()
	var key []byte
	read := d.eachMember('}', func() bool {
		k, ok := d.key()
		if !ok || (key != nil && string(k) != string(key)) {
			return false
		}
		key, at = k, d.i
		return d.skip()
	})
	if !read || key == nil {
		return 0, 0, 0, false
	}
	branch, named := n.names[string(key)]
	return branch, at, d.i, named
}

func (d *jsonWalker) enter() bool {
	d.depth++
	if d.depth > maxJSONDepth {
		d.depth--
		return false
	}
	return true
}

// skip reads past one JSON value, checking it is one.
func (d *jsonWalker) skip() bool {
	switch c := d.peek(); {
	case c == '"':
		_, ok := d.str()
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		_, ok := d.number()
		return ok
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '[' || c == '{':
		if !d.enter() {
			return false
		}
		ok := d.skipComposite(c)
		d.depth--
		return ok
	}
	return false
}

// skipComposite reads past the array or object opened by c at d.i.
func (d *jsonWalker) skipComposite(c byte) bool {
	closing := byte(']')
	if c == '{' {
		closing = '}'
	}
	d.i++
	d.ws()
	return d.eachMember(closing, func() bool {
		if c == '{' {
			if _, ok := d.key(); !ok {
				return false
			}
		}
		return d.skip()
	})
}

// str reads a JSON string and returns its text: the bytes between the quotes when they need no
// decoding, else the string as encoding/json decodes it.
func (d *jsonWalker) str() ([]byte, bool) {
	if d.peek() != '"' {
		return nil, false
	}
	start := d.i + 1
	plain := true
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			d.i = j + 1
			s := d.b[start:j]
			if plain {
				return s, true
			}
			var out string // escapes or bytes that are not UTF-8: as encoding/json reads them
			if err := json.Unmarshal(d.b[start-1:j+1], &out); err != nil {
				return nil, false
			}
			return []byte(out), true
		case c == '\\':
			plain = false
			j++
			if j >= len(d.b) {
				return nil, false
			}
			switch d.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(d.b) {
					return nil, false
				}
				for _, h := range d.b[j+1 : j+5] {
					if !isHex(h) {
						return nil, false
					}
				}
				j += 4
			default:
				return nil, false
			}
		case c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			if r, size := utf8.DecodeRune(d.b[j:]); r == utf8.RuneError && size == 1 {
				plain = false
			} else {
				j += size - 1
			}
		}
	}
	return nil, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number reads a JSON number and returns its text.
func (d *jsonWalker) number() ([]byte, bool) {
	b, i := d.b, d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	num := b[d.i:i]
	d.i = i
	return num, true
}

// jsonIntOf is jsonInt for a number's text: an integer of bits bits, or a number written
// otherwise (1e3, 2.0) whose value is one.
func jsonIntOf(num []byte, bits int) (int64, bool) {
	if len(num) > 0 && len(num) <= 18 {
		neg := num[0] == '-'
		digits := num
		if neg {
			digits = num[1:]
		}
		var v int64
		simple := len(digits) > 0
		for _, c := range digits {
			if c < '0' || c > '9' {
				simple = false
				break
			}
			v = v*10 + int64(c-'0')
		}
		if simple {
			if neg {
				v = -v
			}
			if bits == 32 && (v < math.MinInt32 || v > math.MaxInt32) {
				return 0, false
			}
			return v, true
		}
	}
	v, err := jsonInt(json.Number(num), bits)
	return v, err == nil
}

// appendAvroLong appends v as Avro writes a long: a zig-zag varint (so does the Confluent wire
// format's protobuf message index).
func appendAvroLong(dst []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
