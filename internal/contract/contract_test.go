package contract

import (
	"errors"
	"testing"
)

func TestReserved(t *testing.T) {
	for _, n := range []string{
		"outbox-id", "outbox-table", "aggregate-id", "event-type", "cdc-lsn", "cdc-commit-time",
		"dlq-error", "dlq-original-topic", "dlq-relation", "dlq-", "dlq-anything-later",
		"Outbox-Id", "OUTBOX-TABLE", "Cdc-Lsn", "DLQ-Error", "Dlq-x",
		"ce_specversion", "ce_id", "ce_source", "ce_type", "ce_time", "ce_", "ce_partitionkey", "CE_ID", "Ce_Type",
	} {
		if !Reserved(n) {
			t.Errorf("%q is not reserved", n)
		}
	}
	for _, n := range []string{
		"", "outbox", "outbox-id2", "x-outbox-id", "outbox_id", "correlation-id", "traceparent",
		"dlq", "dlqerror", "cdc-lsn ", " cdc-lsn", "cdc-other", "event_type",
		"tracestate", "content-type", "ce", "ce-id", "cedar", "x-ce_id",
	} {
		if Reserved(n) {
			t.Errorf("%q is reserved", n)
		}
	}
}

func TestReservedError(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  string
	}{
		{[]string{"outbox-id"}, `headers: "outbox-id" is reserved by the record contract`},
		{[]string{"cdc-lsn", "Outbox-Id"}, `headers: "cdc-lsn", "Outbox-Id" are reserved by the record contract`},
	} {
		err := ReservedError(c.names)
		if err.Error() != c.want || !errors.Is(err, ErrReserved) {
			t.Errorf("%v: %q (Is ErrReserved: %v), want %q", c.names, err, errors.Is(err, ErrReserved), c.want)
		}
	}
}
