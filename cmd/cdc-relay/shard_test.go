package main

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
)

// run --shard I/N streams the shard's slot and publications, so everything named after the
// slot is the shard's: the slot the relay holds (which keeps a second relay of the same shard
// waiting), the slot watcher's, and the exactly-once transactional id and checkpoint key.
func TestRunShardStreamsTheShardsSlotAndPublications(t *testing.T) {
	var f runFlags
	fs := newFlagSet("run", "", io.Discard)
	f.register(fs)
	err := f.parse(fs, []string{"--pg-url", "postgres://u@h/db", "--brokers", "b:9092", "--slot", "cdc_relay",
		"--publication", "cdc_relay_pub,other_pub", "--shard", "1/4", "--delivery", "exactly-once"})
	if err != nil {
		t.Fatal(err)
	}
	rcfg, _, err := f.buildRunConfig(t.Context(), fs, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if rcfg.Replication.Slot != "cdc_relay_s1of4" || f.c.slot != "cdc_relay_s1of4" {
		t.Errorf("slot %q (flags %q), want cdc_relay_s1of4", rcfg.Replication.Slot, f.c.slot)
	}
	if want := []string{"cdc_relay_pub_s1of4", "other_pub_s1of4"}; !slices.Equal(rcfg.Replication.Publications, want) {
		t.Errorf("publications %v, want %v", rcfg.Replication.Publications, want)
	}
	if rcfg.ExactlyOnce == nil || rcfg.ExactlyOnce.TransactionalID != "" {
		t.Fatalf("exactly-once %+v: want it on with the default transactional id", rcfg.ExactlyOnce)
	}
	// The relay's producer takes kafkatxn's default for its slot (relay.New).
	if got := kafkatxn.TransactionalID(rcfg.Replication.Slot); got != "cdc-relay-cdc_relay_s1of4" {
		t.Errorf("transactional id %q, want cdc-relay-cdc_relay_s1of4", got)
	}
	if f.shard.baseSlot != "cdc_relay" || !slices.Equal(f.shard.basePubs, []string{"cdc_relay_pub", "other_pub"}) {
		t.Errorf("base names %q %v", f.shard.baseSlot, f.shard.basePubs)
	}
}

// Without --shard nothing changes.
func TestRunWithoutShardKeepsTheNames(t *testing.T) {
	var f runFlags
	fs := newFlagSet("run", "", io.Discard)
	f.register(fs)
	if err := f.parse(fs, []string{"--pg-url", "postgres://u@h/db", "--brokers", "b:9092", "--slot", "cdc_relay", "--publication", "p"}); err != nil {
		t.Fatal(err)
	}
	if f.c.slot != "cdc_relay" || !slices.Equal(f.pubs, listFlag{"p"}) || f.shard.shard != nil {
		t.Errorf("slot %q publications %v shard %v", f.c.slot, f.pubs, f.shard.shard)
	}
}

// A bad --shard or --shards is a usage error (exit 2) that says what to write, before any
// connection is tried.
func TestShardFlagsRefuseBadValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--slot", "s", "--publication", "p", "--shard", "4/4"}, "0/4 .. 3/4"},
		{[]string{"run", "--slot", "s", "--publication", "p", "--shard", "a/b"}, "whole numbers"},
		{[]string{"run", "--slot", "s", "--publication", "p", "--shard", "0/0"}, "1 to 64"},
		{[]string{"run", "--slot", strings.Repeat("s", 60), "--publication", "p", "--shard", "1/4"}, "--slot may have at most 57 characters"},
		{[]string{"poll", "--shard", "-1/2"}, "0/2 .. 1/2"},
		{[]string{"slot", "create", "--slot", "s", "--publication", "p", "--shards", "65"}, "--shards 65: use 1 to 64"},
		{[]string{"slot", "create", "--slot", "s", "--publication", "p", "--shards", "-1"}, "--shards -1: use 1 to 64"},
		{[]string{"slot", "create", "--slot", "s", "--publication", "p", "--column-aggregate-id", "k"}, "--column-aggregate-id goes with --shards"},
		{[]string{"slot", "create", "--slot", "s", "--publication", "p", "--shards", "2", "--profile", "nope"}, `--profile "nope": unknown`},
	} {
		var stdout, stderr bytes.Buffer
		// An unreachable server: a check that waited for a connection would fail differently.
		args := append(c.args, "--pg-url", "postgres://u@127.0.0.1:1/db", "--brokers", "127.0.0.1:1")
		if c.args[0] == "slot" {
			args = append(c.args, "--pg-url", "postgres://u@127.0.0.1:1/db")
		}
		code := run(args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 saying %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// slot create --shards takes the key column from --profile unless --column-aggregate-id says.
func TestSlotCreateShardsKeyColumn(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "3"}, "aggregate_id"},
		{[]string{"--shards", "3", "--profile", "debezium"}, "aggregateid"},
		{[]string{"--shards", "3", "--profile", "debezium", "--column-aggregate-id", "k"}, "k"},
	} {
		var s shardsFlags
		fs := flag.NewFlagSet("slot create", flag.ContinueOnError)
		s.register(fs, true)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := s.parse(fs); err != nil || s.key != c.want {
			t.Errorf("%q: key %q, %v; want %q", c.args, s.key, err, c.want)
		}
	}
}
