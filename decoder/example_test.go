package decoder_test

import (
	"encoding/binary"
	"fmt"
	"github.com/cdc-relay/cdc-relay/outbox"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/jackc/pglogrepl"
)

// The replication loop hands every XLogData payload to Decode and acts on the Kind: events go to
// Kafka, bad rows to the dead-letter destination, and the Commit's EndLSN is confirmed once every
// event of the transaction is acknowledged.
func ExampleDecoder() {
	d, err := decoder.New(decoder.Config{Tables: []string{"outbox"}})
	if err != nil {
		panic(err)
	}
	for _, m := range exampleStream() {
		out, err := d.Decode(m.walStart, m.data)
		switch {
		case outbox.IsBadRow(err):
			fmt.Println("dead-letter:", err)
		case err != nil:
			fmt.Println("reconnect:", err)
			d.Reset()
		case out.Kind == decoder.KindBegin:
			fmt.Println("begin", out.Xid, out.CommitLSN)
		case out.Kind == decoder.KindEvent:
			fmt.Printf("publish %s key=%s topic=%s value=%s\n", out.Event.ID, out.Event.AggregateID, out.Event.Topic, out.Event.Payload)
		case out.Kind == decoder.KindCommit:
			fmt.Println("confirm", out.EndLSN, "once delivered")
		}
	}
	// Output:
	// begin 778 0/16B3800
	// publish 42 key=order-1 topic=orders value={"total": 10}
	// dead-letter: outbox: bad row at 0/16B3790 in public.outbox (id 43), column "aggregate_id": aggregate_id is empty
	// confirm 0/16B3830 once delivered
}

type walMessage struct {
	walStart pglogrepl.LSN
	data     []byte
}

// exampleStream is what pgoutput sends for one transaction that inserts two outbox rows.
func exampleStream() []walMessage {
	be := binary.BigEndian
	str := func(b []byte, s string) []byte { return append(append(b, s...), 0) }
	rel := be.AppendUint32([]byte{'R'}, 16385)
	rel = be.AppendUint16(append(str(str(rel, "public"), "outbox"), 'd'), 4)
	for _, c := range []string{"id", "aggregate_id", "topic", "payload"} {
		rel = be.AppendUint32(be.AppendUint32(str(append(rel, 0), c), 25), 0xFFFFFFFF)
	}
	row := func(vals ...string) []byte {
		b := be.AppendUint16(append(be.AppendUint32([]byte{'I'}, 16385), 'N'), uint16(len(vals)))
		for _, v := range vals {
			b = append(be.AppendUint32(append(b, 't'), uint32(len(v))), v...)
		}
		return b
	}
	begin := be.AppendUint32(be.AppendUint64(be.AppendUint64([]byte{'B'}, 0x16B3800), 0), 778)
	commit := be.AppendUint64(be.AppendUint64(be.AppendUint64([]byte{'C', 0}, 0x16B3800), 0x16B3830), 0)
	return []walMessage{
		{0x16B3700, rel},
		{0x16B3700, begin},
		{0x16B3748, row("42", "order-1", "orders", `{"total": 10}`)},
		{0x16B3790, row("43", "", "orders", `{"total": 11}`)},
		{0x16B3800, commit},
	}
}
