package slotstore_test

import (
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

func TestParseShardAccepts(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]slotstore.Shard{
		"0/1":   {Index: 0, Count: 1},
		"1/4":   {Index: 1, Count: 4},
		"63/64": {Index: 63, Count: 64},
		" 2/3 ": {Index: 2, Count: 3}, //nolint:gocritic // spaces around it are trimmed
	} {
		got, err := slotstore.ParseShard(in)
		if err != nil || got != want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// Each refusal names the input and says what to write instead.
func TestParseShardRefusesAndSaysWhatToWrite(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"0/0":  {`"0/0"`, "1 to 64", "0/1"},
		"4/4":  {`"4/4"`, "below N", "0/4 .. 3/4"},
		"-1/2": {`"-1/2"`, "counts from 0", "0/2 .. 1/2"},
		"a/b":  {`"a/b"`, "whole numbers", "e.g. 1/4"},
		"1/65": {`"1/65"`, "1 to 64", "0/64"},
		"3":    {`"3"`, "want I/N", "0/4 .. 3/4"},
		"":     {`""`, "want I/N"},
	} {
		_, err := slotstore.ParseShard(in)
		if err == nil {
			t.Errorf("ParseShard(%q) accepted it", in)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ParseShard(%q) error %q lacks %q", in, err, w)
			}
		}
	}
}

func TestShardNames(t *testing.T) {
	t.Parallel()
	s := slotstore.Shard{Index: 1, Count: 4}
	if got := s.Slot("cdc_relay"); got != "cdc_relay_s1of4" {
		t.Errorf("Slot = %q", got)
	}
	if got := s.Publication("cdc_relay_pub"); got != "cdc_relay_pub_s1of4" {
		t.Errorf("Publication = %q", got)
	}
	if got := s.String(); got != "1/4" {
		t.Errorf("String = %q", got)
	}
}

// Every shard of every count reads back from its slot and publication name, and from its
// String; no other name reads as a shard.
func TestShardOfRoundTrip(t *testing.T) {
	t.Parallel()
	for n := 1; n <= slotstore.MaxShards; n++ {
		all := slotstore.AllShards(n)
		if len(all) != n {
			t.Fatalf("AllShards(%d) has %d shards", n, len(all))
		}
		for i, s := range all {
			if s != (slotstore.Shard{Index: i, Count: n}) {
				t.Fatalf("AllShards(%d)[%d] = %v", n, i, s)
			}
			for _, name := range []string{s.Slot("cdc_relay"), s.Publication("cdc_relay_pub")} {
				base := strings.TrimSuffix(name, "_s"+strings.ReplaceAll(s.String(), "/", "of"))
				got, ok := slotstore.ShardOf(name, base)
				if !ok || got != s {
					t.Fatalf("ShardOf(%q, %q) = %v, %v; want %v", name, base, got, ok, s)
				}
			}
			if back, err := slotstore.ParseShard(s.String()); err != nil || back != s {
				t.Fatalf("ParseShard(%q) = %v, %v", s.String(), back, err)
			}
		}
	}
	for _, name := range []string{
		"cdc_relay", "cdc_relay_s", "cdc_relay_s1of", "cdc_relay_sof4", "cdc_relay_s4of4", "cdc_relay_s0of0",
		"cdc_relay_s01of4", "cdc_relay_s1of04", "cdc_relay_s0of65", "cdc_relay_s1of4x", "cdc_relay_x_s1of4",
		"cdc_relay2_s1of4", "other_s1of4", "cdc_relay_s-1of4",
	} {
		if s, ok := slotstore.ShardOf(name, "cdc_relay"); ok {
			t.Errorf("ShardOf(%q, cdc_relay) = %v, true; want not a shard", name, s)
		}
	}
}

func TestShardRowFilterQuotesTheKeyColumn(t *testing.T) {
	t.Parallel()
	for col, want := range map[string]string{
		"aggregate_id": `((hashtext("aggregate_id"::text) & 2147483647) % 4) = 1`,
		"aggregateid":  `((hashtext("aggregateid"::text) & 2147483647) % 4) = 1`,
		"Key":          `((hashtext("Key"::text) & 2147483647) % 4) = 1`,
		`a"b`:          `((hashtext("a""b"::text) & 2147483647) % 4) = 1`,
	} {
		if got := (slotstore.Shard{Index: 1, Count: 4}).RowFilter(col); got != want {
			t.Errorf("RowFilter(%q) = %s; want %s", col, got, want)
		}
	}
}
