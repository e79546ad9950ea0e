package decoder

import (
	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// relation is the decoder's view of one Relation message: where each outbox column sits in the
// relation's tuples. It is built once per Relation message so that an Insert needs no lookups.
type relation struct {
	name     string // "schema.table"
	ncols    int
	selected bool          // decoded; false when Config.Tables excludes it
	col      [numRoles]int // tuple index of each role's column; -1 when the relation lacks it
	tcol     []int         // tuple index of each topic template column; -1 when missing
	// binary: the payload column is bytea, whose text (hex) the decoder turns back into bytes.
	binary bool
}

// relationMessage handles 'R': Int32 relation id, String namespace, String name, Int8 replica
// identity, Int16 column count, then per column Int8 flags, String name, Int32 type, Int32 typmod.
// A Relation for a known id (ALTER TABLE) replaces the entry.
func (d *Decoder) relationMessage(walStart pglogrepl.LSN, r *reader) (Output, error) {
	id := r.u32()
	namespace := r.cstring()
	name := r.cstring()
	r.u8() // replica identity
	ncols := int(r.u16())
	if r.bad {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeRelation, errTruncated)
	}
	rel := &relation{ncols: ncols, tcol: d.prof.templateCols()}
	for i := range rel.col {
		rel.col[i] = -1
	}
	for i := 0; i < ncols && !r.bad; i++ {
		r.u8() // flags
		col := r.cstring()
		oid := r.u32() // type oid
		r.u32()        // type modifier
		d.prof.match(rel, i, col)
		for role, want := range d.names {
			if rel.col[role] < 0 && string(col) == want && (role != roleTopic || d.topic == "") {
				rel.col[role] = i
				if role == rolePayload {
					_, rel.binary = outbox.PayloadTypeOID(oid)
				}
			}
		}
	}
	if !r.done() {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeRelation, errTruncated)
	}
	if len(namespace) == 0 {
		rel.name = "pg_catalog." + string(name) // the protocol sends "" for pg_catalog
	} else {
		rel.name = string(namespace) + "." + string(name)
	}
	_, rel.selected = d.tables[rel.name]
	rel.selected = rel.selected || d.tables == nil
	d.rels[id] = rel
	return Output{}, nil
}
