package kafkatxn

import (
	"slices"
	"strings"
	"testing"
)

func TestBatchRoundTrip(t *testing.T) {
	for _, b := range []Batch{
		{Seq: 1, Table: "public.outbox", IDs: []string{"1", "2", "3"}},
		{Seq: 42, Table: "app.events", IDs: []string{"0b9d7f4e-1c2a-4a53-9d0e-5a1f3b6c7d8e"}},
		{Seq: 7, Table: "public.outbox", IDs: []string{}},
	} {
		v, err := marshalBatch(PollKey("cdc-relay-poll-"+b.Table), b)
		if err != nil {
			t.Fatalf("%+v: %v", b, err)
		}
		got, err := unmarshalBatch(v)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if got.Seq != b.Seq || got.Table != b.Table || !slices.Equal(got.IDs, b.IDs) {
			t.Fatalf("round trip of %+v gave %+v (%s)", b, got, v)
		}
	}
}

// An operator reading the checkpoint topic tells a poller's checkpoint from a slot's by its
// "poll" field, and the version rule is the slot checkpoint's.
func TestBatchValueNamesThePollerAndItsRows(t *testing.T) {
	v, err := marshalBatch(PollKey("cdc-relay-poll-public.outbox"), Batch{Seq: 3, Table: "public.outbox", IDs: []string{"10", "11"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"poll":"cdc-relay-poll-public.outbox","seq":3,"table":"public.outbox","ids":["10","11"]}`
	if string(v) != want {
		t.Errorf("value %s, want %s", v, want)
	}
	_, err = unmarshalBatch([]byte(strings.Replace(want, `"version":1`, `"version":2`, 1)))
	if err == nil || !strings.Contains(err.Error(), "a newer poller wrote it") {
		t.Errorf("a version 2 checkpoint gave %v, want a refusal that says a newer poller wrote it", err)
	}
}

func TestBatchRefusesWhatCannotBeMarked(t *testing.T) {
	for name, b := range map[string]Batch{
		"no sequence": {Table: "public.outbox", IDs: []string{"1"}},
		"no table":    {Seq: 1, IDs: []string{"1"}},
	} {
		if _, err := marshalBatch("poll:x", b); err == nil {
			t.Errorf("%s: %+v encoded", name, b)
		}
	}
}
