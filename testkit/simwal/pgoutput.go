package simwal

import (
	"encoding/binary"
	"time"

	"github.com/jackc/pglogrepl"
)

// Encoders for pgoutput v1 messages, after the PostgreSQL "Logical Replication Message
// Formats" page. The decoder's tests write their messages with these too, and pin them to
// pglogrepl (decoder/pgoutput_test.go).

type msg []byte

func (m msg) u8(v byte) msg      { return append(m, v) }
func (m msg) u16(v uint16) msg   { return binary.BigEndian.AppendUint16(m, v) }
func (m msg) u32(v uint32) msg   { return binary.BigEndian.AppendUint32(m, v) }
func (m msg) u64(v uint64) msg   { return binary.BigEndian.AppendUint64(m, v) }
func (m msg) str(s string) msg   { return append(append(m, s...), 0) }
func (m msg) ts(t time.Time) msg { return m.u64(uint64(PgTime(t))) }

// PgTime is t in microseconds since 2000-01-01, PostgreSQL's epoch.
func PgTime(t time.Time) int64 { return t.UnixMicro() - 946684800*1e6 }

// Type OIDs of Relation columns.
const (
	OIDInt8  = 20
	OIDText  = 25
	OIDJSONB = 3802
)

// Column is a Relation column.
type Column struct {
	Name string
	OID  uint32
}

// Relation is a table whose inserts the server streams. The first column is the key.
type Relation struct {
	ID        uint32
	Namespace string
	Name      string
	Columns   []Column
}

// OutboxRelation is an outbox table with every column the decoder knows by default.
func OutboxRelation(id uint32) *Relation {
	return &Relation{ID: id, Namespace: "public", Name: "outbox", Columns: []Column{
		{"id", OIDInt8}, {"aggregate_id", OIDText}, {"topic", OIDText}, {"payload", OIDJSONB},
		{"event_type", OIDText}, {"headers", OIDJSONB},
	}}
}

// BeginMsg is pgoutput's Begin.
func BeginMsg(finalLSN pglogrepl.LSN, at time.Time, xid uint32) []byte {
	return msg{'B'}.u64(uint64(finalLSN)).ts(at).u32(xid)
}

// CommitMsg is pgoutput's Commit.
func CommitMsg(commitLSN, endLSN pglogrepl.LSN, at time.Time) []byte {
	return msg{'C'}.u8(0).u64(uint64(commitLSN)).u64(uint64(endLSN)).ts(at)
}

// RelationMsg is pgoutput's Relation.
func RelationMsg(r *Relation) []byte {
	m := msg{'R'}.u32(r.ID).str(r.Namespace).str(r.Name).u8('d').u16(uint16(len(r.Columns)))
	for i, c := range r.Columns {
		flags := byte(0)
		if i == 0 {
			flags = 1
		}
		m = m.u8(flags).str(c.Name).u32(c.OID).u32(0xFFFFFFFF)
	}
	return m
}

// Value is one TupleData column: nil is NULL.
type Value *string

// Text makes a text Value.
func Text(s string) Value { return &s }

// InsertMsg is pgoutput's Insert of a new tuple into rel.
func InsertMsg(rel uint32, vals []Value) []byte {
	m := msg{'I'}.u32(rel).u8('N').u16(uint16(len(vals)))
	for _, v := range vals {
		if v == nil {
			m = m.u8('n')
			continue
		}
		m = append(m.u8('t').u32(uint32(len(*v))), *v...)
	}
	return m
}

// LogicalMsg is pgoutput's Message (pg_logical_emit_message).
func LogicalMsg(transactional bool, lsn pglogrepl.LSN, prefix, content string) []byte {
	flags := byte(0)
	if transactional {
		flags = 1
	}
	m := msg{'M'}.u8(flags).u64(uint64(lsn)).str(prefix).u32(uint32(len(content)))
	return append(m, content...)
}

// XLogData frames a pgoutput message as the walsender sends it in CopyData.
func XLogData(walStart, walEnd pglogrepl.LSN, sent time.Time, payload []byte) []byte {
	m := msg{'w'}.u64(uint64(walStart)).u64(uint64(walEnd)).ts(sent)
	return append(m, payload...)
}

// Keepalive is a primary keepalive message.
func Keepalive(walEnd pglogrepl.LSN, sent time.Time, reply bool) []byte {
	r := byte(0)
	if reply {
		r = 1
	}
	return msg{'k'}.u64(uint64(walEnd)).ts(sent).u8(r)
}
