package decoder

import (
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// Kind says what one pgoutput message means for the relay.
type Kind uint8

// The kinds, one a message.
const (
	KindNone   Kind = iota // nothing to publish (relation, type, origin, update, delete, truncate, other tables, foreign messages)
	KindBegin              // a transaction starts
	KindEvent              // one outbox event (a row or a logical message)
	KindCommit             // the transaction ends
)

func (k Kind) String() string {
	switch k {
	case KindNone:
		return "None"
	case KindBegin:
		return "Begin"
	case KindEvent:
		return "Event"
	case KindCommit:
		return "Commit"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Output is what one pgoutput message means for the relay.
type Output struct {
	Kind      Kind
	Xid       uint32
	CommitLSN pglogrepl.LSN // LSN of the transaction's commit record (Begin.FinalLSN); set on Begin, Event and Commit
	// EndLSN is set on Commit: Commit.TransactionEndLSN, the position to confirm once the
	// transaction is delivered; and on a non-transactional logical message (KindNone with a
	// *outbox.RowError): the message's own LSN (its record's end), past which a restart does
	// not send it again.
	EndLSN     pglogrepl.LSN
	CommitTime time.Time // from Begin (UTC); set on Begin, Event and Commit
	// Event is set for KindEvent. It is also set, as far as it could be read, with KindNone and a
	// *outbox.RowError for a non-transactional logical message with the outbox prefix, so that it can be
	// dead-lettered.
	Event outbox.Event
}

// Decoder turns pgoutput messages into Outputs. It holds the relation cache and the open
// transaction's xid, commit LSN and commit time, never its rows. It is owned by the goroutine
// that reads the replication stream and is not safe for concurrent use.
type Decoder struct {
	names       [numRoles]string    // column name per role
	topic       string              // Config.Topic
	prefix      string              // logical message prefix
	msgRelation string              // "message:<prefix>"
	noMsgs      bool                // Config.IgnoreMessages
	tables      map[string]struct{} // nil: every relation
	tombstones  bool                // Config.NullPayload: a NULL payload is a nil Payload, not a bad row
	rels        map[uint32]*relation
	prof        profile // TopicTemplate, IDHeader (profile.go)

	inTx       bool
	xid        uint32
	commitLSN  pglogrepl.LSN
	commitTime time.Time

	// Scratch reused across rows so that an Insert allocates one string.
	vals       []value
	buf        []byte
	lastTopic  interned
	lastEvType interned
}

// New returns a Decoder for cfg, or the error of cfg.Validate.
func New(cfg Config) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Decoder{
		names:  names(cfg.Columns),
		topic:  cfg.Topic,
		prefix: cfg.MessagePrefix,
		noMsgs: cfg.IgnoreMessages,
		rels:   make(map[uint32]*relation),

		tombstones: cfg.NullPayload.Tombstone(),
	}
	d.prof = newProfile(cfg)
	if d.prefix == "" {
		d.prefix = defaultMessagePrefix
	}
	d.msgRelation = "message:" + d.prefix
	if len(cfg.Tables) > 0 {
		d.tables = make(map[string]struct{}, len(cfg.Tables))
		for _, t := range cfg.Tables {
			tb, _ := outbox.ParseTable(t) // checked by Validate
			d.tables[tb.String()] = struct{}{}
		}
	}
	return d, nil
}

// Decode interprets one pgoutput message received at walStart (the XLogData WALStart). Of
// data it keeps nothing but what the Output's Event.Payload aliases (doc.go). A bad row returns
// Output{Kind: KindEvent, ...} with as much of the Event as could be read (ID, Relation, Payload
// when present) and a *outbox.RowError, so the caller can dead-letter it and go on; the decoder's state
// stays consistent. A protocol error (unparsable message, Insert for an unknown relation id,
// Commit outside a transaction) returns a *ProtocolError; the message then changes no state.
func (d *Decoder) Decode(walStart pglogrepl.LSN, data []byte) (Output, error) {
	if len(data) == 0 {
		return Output{}, protocolError(walStart, 0, errors.New("empty message"))
	}
	t := pglogrepl.MessageType(data[0])
	r := &reader{buf: data[1:]}
	switch t {
	case pglogrepl.MessageTypeInsert:
		return d.insertMessage(walStart, r)
	case pglogrepl.MessageTypeBegin:
		return d.beginMessage(walStart, r)
	case pglogrepl.MessageTypeCommit:
		return d.commitMessage(walStart, r)
	case pglogrepl.MessageTypeRelation:
		return d.relationMessage(walStart, r)
	case pglogrepl.MessageTypeMessage:
		return d.logicalMessage(walStart, r)
	case pglogrepl.MessageTypeUpdate, pglogrepl.MessageTypeDelete, pglogrepl.MessageTypeTruncate,
		pglogrepl.MessageTypeType, pglogrepl.MessageTypeOrigin:
		return d.ignoredMessage(walStart, t, r)
	case pglogrepl.MessageTypeStreamStart, pglogrepl.MessageTypeStreamStop,
		pglogrepl.MessageTypeStreamCommit, pglogrepl.MessageTypeStreamAbort:
		return Output{}, protocolError(walStart, t, errors.New("streamed transaction, but proto_version 1 does not stream"))
	}
	return Output{}, protocolError(walStart, t, errors.New("unknown message type"))
}

// Reset forgets the open transaction and the relation cache (after a reconnect the server sends
// Relation messages again).
func (d *Decoder) Reset() {
	clear(d.rels)
	d.endTx()
}

// InTransaction reports whether a Begin has been seen without its Commit.
func (d *Decoder) InTransaction() bool { return d.inTx }

// beginMessage handles 'B': Int64 final LSN, Int64 commit time, Int32 xid. A Begin inside an open
// transaction (a replay after reconnect) starts over.
func (d *Decoder) beginMessage(walStart pglogrepl.LSN, r *reader) (Output, error) {
	final := pglogrepl.LSN(r.u64())
	at := r.time()
	xid := r.u32()
	if !r.done() {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeBegin, errTruncated)
	}
	d.inTx, d.xid, d.commitLSN, d.commitTime = true, xid, final, at
	return d.txOutput(KindBegin), nil
}

// commitMessage handles 'C': Int8 flags, Int64 commit LSN, Int64 end LSN, Int64 commit time.
func (d *Decoder) commitMessage(walStart pglogrepl.LSN, r *reader) (Output, error) {
	r.u8()  // flags
	r.u64() // commit LSN, the Begin's final LSN
	end := pglogrepl.LSN(r.u64())
	r.u64() // commit time, as in Begin
	if !r.done() {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeCommit, errTruncated)
	}
	if !d.inTx {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeCommit, errors.New("Commit without Begin")) //nolint:staticcheck // ST1005: starts with the pgoutput message's name
	}
	out := d.txOutput(KindCommit)
	out.EndLSN = end
	d.endTx()
	return out, nil
}

func (d *Decoder) endTx() {
	d.inTx, d.xid, d.commitLSN, d.commitTime = false, 0, 0, time.Time{}
}

// txOutput is an Output of kind k stamped with the open transaction.
func (d *Decoder) txOutput(k Kind) Output {
	return Output{Kind: k, Xid: d.xid, CommitLSN: d.commitLSN, CommitTime: d.commitTime}
}

// ignoredMessage checks the framing of a message the relay does not publish and returns KindNone.
func (d *Decoder) ignoredMessage(walStart pglogrepl.LSN, t pglogrepl.MessageType, r *reader) (Output, error) {
	ok := true
	switch t {
	case pglogrepl.MessageTypeUpdate:
		// Int32 relation id, optional ('K' | 'O') TupleData, 'N' TupleData.
		r.u32()
		k := r.u8()
		if k == 'K' || k == 'O' {
			ok = d.skipTuple(r)
			k = r.u8()
		}
		ok = ok && k == 'N' && d.skipTuple(r)
	case pglogrepl.MessageTypeDelete:
		// Int32 relation id, ('K' | 'O') TupleData.
		r.u32()
		k := r.u8()
		ok = (k == 'K' || k == 'O') && d.skipTuple(r)
	case pglogrepl.MessageTypeTruncate:
		// Int32 relation count, Int8 options, Int32 relation id per relation.
		n := r.u32()
		r.u8()
		ok = uint64(n)*4 == uint64(len(r.buf))
		r.buf = nil
	case pglogrepl.MessageTypeOrigin:
		// Int64 origin commit LSN, String origin name.
		r.u64()
		r.cstring()
	case pglogrepl.MessageTypeType:
		// Int32 type oid, String namespace, String name.
		r.u32()
		r.cstring()
		r.cstring()
	}
	if !ok || !r.done() {
		return Output{}, protocolError(walStart, t, errTruncated)
	}
	return Output{}, nil
}

func protocolError(walStart pglogrepl.LSN, t pglogrepl.MessageType, err error) error {
	return &ProtocolError{LSN: walStart, Type: t, Err: err}
}
