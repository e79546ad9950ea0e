package outbox

import (
	"errors"
	"strings"
	"testing"
)

func TestPayloadTypes(t *testing.T) {
	for typ, want := range map[string][2]bool{
		"bytea": {true, true}, "text": {true, false}, "json": {true, false}, "jsonb": {true, false},
		"character varying": {true, false}, "character varying(200)": {true, false},
		"integer": {false, false}, "character(5)": {false, false}, "xml": {false, false}, "bytea[]": {false, false},
	} {
		if ok, bin := PayloadTypeName(typ); ok != want[0] || bin != want[1] {
			t.Errorf("PayloadTypeName(%q) = %v, %v; want %v", typ, ok, bin, want)
		}
	}
	for oid, want := range map[uint32][2]bool{OIDBytea: {true, true}, OIDText: {true, false}, OIDVarchar: {true, false},
		OIDJSON: {true, false}, OIDJSONB: {true, false}, 23: {false, false}} {
		if ok, bin := PayloadTypeOID(oid); ok != want[0] || bin != want[1] {
			t.Errorf("PayloadTypeOID(%d) = %v, %v; want %v", oid, ok, bin, want)
		}
	}
	if err := PayloadTypeError("column-payload", "payload", "public.outbox", "integer"); !strings.Contains(err.Error(), PayloadTypes) {
		t.Errorf("the refusal does not list the types: %v", err)
	}
}

func TestDecodeByteaReusesItsBuffer(t *testing.T) {
	buf := make([]byte, 0, 8)
	got, err := DecodeBytea(buf, []byte(`\x00ff`))
	if err != nil || string(got) != "\x00\xff" || &got[:1][0] != &buf[:1][0] {
		t.Errorf("DecodeBytea = %x, %v, want 00ff in the buffer given", got, err)
	}
	if _, err := DecodeBytea(nil, []byte(`\400`)); !errors.Is(err, ErrBadBytea) {
		t.Errorf(`\400: %v, want ErrBadBytea (an octal escape above \377)`, err)
	}
}

func TestNullPayloadFlag(t *testing.T) {
	var n NullPayload
	if n.Tombstone() {
		t.Error("the zero value makes tombstones")
	}
	if err := n.Set("tombstone"); err != nil || !n.Tombstone() {
		t.Errorf("Set(tombstone): %v", err)
	}
	if err := n.Set("drop"); err == nil || !strings.Contains(err.Error(), "dead-letter") || !n.Tombstone() {
		t.Errorf("Set(drop) = %v: want an error naming the values, and the value unchanged", err)
	}
}
