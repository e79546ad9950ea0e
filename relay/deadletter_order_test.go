package relay

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/record"
)

// An acknowledgement passed a letter only if the letter's record was produced before it, is of
// its topic and key, and is not parked yet: that is the gap DESIGN.md names ("A key's later
// records wait for its dead letter"), and the relay reports exactly those.
func TestAcknowledgementPassesOnlyUnparkedLettersOfEarlierRecordsOfItsKey(t *testing.T) {
	b := newLetterBudget(100, 1<<20, func() (int64, int64) { return 0, 0 })
	rec := func(topic, key string) *kgo.Record { return &kgo.Record{Topic: topic, Key: []byte(key)} }
	letter := func(topic, key string) *kgo.Record {
		return record.DeadLetter("dlq", rec(topic, key), "public.outbox", errors.New("refused"))
	}
	l5 := letter("orders", "k1")
	l9 := letter("orders", "k1")
	other := letter("orders", "k2")
	k1, k2 := letterKey{topic: "orders", key: "k1"}, letterKey{topic: "orders", key: "k2"}
	b.add(deadLetter{rec: l5, key: k1, ordered: true, seq: 5})
	b.add(deadLetter{rec: l9, key: k1, ordered: true, seq: 9})
	b.add(deadLetter{rec: other, key: k2, ordered: true, seq: 3})
	b.add(deadLetter{rec: letter("orders", "k1"), key: k1, seq: 1}) // a bad row's: holds nothing

	if got := b.passed(k1, 4); got != nil {
		t.Errorf("a record produced before every letter of its key passed %d letters", len(got))
	}
	if got := b.passed(k1, 7); len(got) != 1 || got[0].rec != l5 {
		t.Errorf("record 7 of k1: passed %v, want the letter of record 5 alone", got)
	}
	if got := b.passed(k1, 12); len(got) != 2 || got[0].rec != l5 || got[1].rec != l9 {
		t.Errorf("record 12 of k1: passed %v, want the letters of records 5 and 9, oldest first", got)
	}
	if got := b.passed(letterKey{topic: "payments", key: "k1"}, 12); got != nil {
		t.Errorf("a record of another topic passed %d letters", len(got))
	}
	b.remove(l5)
	if got := b.passed(k1, 7); got != nil {
		t.Errorf("record 7 of k1 passed a parked letter")
	}
	if got := b.passed(k1, 12); len(got) != 1 || got[0].rec != l9 {
		t.Errorf("record 12 of k1 after the letter of 5 was parked: passed %v, want the letter of 9", got)
	}
	b.remove(l9)
	b.remove(other)
	if b.ordered.Load() != 0 || len(b.keys) != 0 {
		t.Errorf("after every ordered letter was parked: %d ordered, keys %v", b.ordered.Load(), b.keys)
	}
}
