package kafkatxn

import (
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestCheckpointRoundTrip(t *testing.T) {
	for _, cp := range []Checkpoint{
		{Slot: "s", Position: 0x16B3748},
		{Slot: "s", Position: 0x16B3748, Split: Split{LSN: 0x2000000, Records: 500_000}, SystemID: "7412345678901234567", Timeline: 2},
		{Slot: "s", Position: 0x16B3748, Split: Split{LSN: 0x16B3748, Records: 1}},
	} {
		b, err := cp.MarshalBinary()
		if err != nil {
			t.Fatalf("%+v: %v", cp, err)
		}
		var got Checkpoint
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got != cp {
			t.Fatalf("round trip of %+v gave %+v (%s)", cp, got, b)
		}
	}
}

// The value is meant to be read by operators with any Kafka tool: LSNs in PostgreSQL's text.
func TestCheckpointValueNamesLSNsAsPostgreSQLDoes(t *testing.T) {
	b, err := Checkpoint{Slot: "s", Position: 0x16B3748, Split: Split{LSN: 0x2000010, Records: 3}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"version":1`, `"position":"0/16B3748"`, `"split_lsn":"0/2000010"`, `"split_records":3`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}

func TestCheckpointRefusesWhatWouldSkipWrongly(t *testing.T) {
	for name, cp := range map[string]Checkpoint{
		"no slot":              {Position: 1},
		"split before":         {Slot: "s", Position: 0x200, Split: Split{LSN: 0x100, Records: 1}},
		"negative split count": {Slot: "s", Position: 0x100, Split: Split{LSN: 0x200, Records: -1}},
	} {
		if _, err := cp.MarshalBinary(); err == nil {
			t.Errorf("%s: %+v encoded", name, cp)
		}
	}
	var cp Checkpoint
	for name, v := range map[string]string{
		"newer version": `{"version":2,"slot":"s","position":"0/1"}`,
		"no version":    `{"slot":"s","position":"0/1"}`,
		"bad position":  `{"version":1,"slot":"s","position":"16B3748"}`,
		"bad split":     `{"version":1,"slot":"s","position":"0/1","split_lsn":"x","split_records":2}`,
		"not json":      `0/1`,
	} {
		err := cp.UnmarshalBinary([]byte(v))
		if err == nil {
			t.Errorf("%s: %s decoded as %+v", name, v, cp)
			continue
		}
		if name == "newer version" && !strings.Contains(err.Error(), "a newer relay wrote it") {
			t.Errorf("%s: %v does not say why", name, err)
		}
	}
}

// A replay skips exactly what committed Kafka transactions carry: whole transactions whose
// commit record starts before the position, and the first records of the split one.
func TestCheckpointSkip(t *testing.T) {
	cp := Checkpoint{Slot: "s", Position: 0x1000, Split: Split{LSN: 0x3000, Records: 7}}
	for _, c := range []struct {
		final   pglogrepl.LSN
		whole   bool
		records int64
	}{
		{0x0FFF, true, 0},  // committed before the position: carried whole
		{0x1000, false, 0}, // starts at the position: the next transaction, not carried
		{0x2000, false, 0}, // between: not carried (the split one is later)
		{0x3000, false, 7}, // the split transaction: its first 7 records
		{0x3001, false, 0},
	} {
		whole, records := cp.Skip(c.final)
		if whole != c.whole || records != c.records {
			t.Errorf("Skip(%s) = %v, %d; want %v, %d", c.final, whole, records, c.whole, c.records)
		}
	}
	if whole, records := (Checkpoint{Slot: "s", Position: 0x1000}).Skip(0x1000); whole || records != 0 {
		t.Errorf("no split: Skip(position) = %v, %d", whole, records)
	}
}
