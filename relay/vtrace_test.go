package relay

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// traceHash is the hash of what a schedule did, as the world outside the relay saw it: every
// replication session (when it started on the bubble's clock, where it asked to start, where
// the slot was, how it ended), every standby status (when, which session, what flush
// position), every record on Kafka (topic, partition, offset, outbox table and id, dead-letter
// cause) and every letter the table took, in the order they happened. It returns the hash and
// the number of events. Run after checkEnd (which read Kafka to its end).
func (h *harness) traceHash() (string, int) {
	sum := sha256.New()
	n := 0
	for _, s := range h.srv.Sessions() {
		n++
		traceInts(sum, 's', int64(s.Session), int64(s.Requested), int64(s.Slot), int64(s.Start), s.At.UnixNano())
		sum.Write([]byte(s.End))
	}
	for _, st := range h.srv.Statuses() {
		n++
		reply := int64(0)
		if st.ReplyRequested {
			reply = 1
		}
		traceInts(sum, 'f', int64(st.Session), int64(st.Write), int64(st.Flush), int64(st.Apply), reply, st.At.UnixNano())
	}
	h.idx.mu.Lock()
	for _, r := range h.idx.recs {
		n++
		traceInts(sum, 'k', int64(r.part), r.off)
		sum.Write([]byte(r.topic + "\x00" + r.key + "\x00" + r.id + "\x00" + r.dlqErr + "\x00" + r.dlqFrom + "\x00"))
	}
	h.idx.mu.Unlock()
	for _, r := range h.store.all() {
		n++
		traceInts(sum, 't')
		sum.Write(r.Key)
		for _, hd := range r.Headers {
			sum.Write([]byte(hd.Key + "\x00" + string(hd.Value) + "\x00"))
		}
	}
	return hex.EncodeToString(sum.Sum(nil)[:8]), n
}

func traceInts(w hash.Hash, tag byte, vs ...int64) {
	b := make([]byte, 1, 1+8*len(vs))
	b[0] = tag
	for _, v := range vs {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	w.Write(b)
}
