package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// `cdc-bench shards` takes its sizes from flags, with the defaults the docs name, and refuses
// bad ones with exit code 2 and a message naming the flag, before any service is needed.
func TestShardsArgs(t *testing.T) {
	fakeServices(t)
	var stderr bytes.Buffer
	sc, code := parseShards([]string{"--pg-bin", t.TempDir(), "--filter-rows", "-1"}, &stderr)
	if code != -1 {
		t.Fatalf("defaults: code %d: %s", code, stderr.String())
	}
	if sc.Rows != 200_000 || sc.TxSize != 1 || sc.Repeats != 3 || !slices.Equal(sc.Shards, []int{1, 2, 4}) || sc.FilterRows != -1 ||
		!slices.Equal(sc.Brokers, []string{"127.0.0.1:2"}) || !strings.HasPrefix(sc.OutDir, filepath.Join("results", "shards-")) {
		t.Errorf("defaults: %+v", sc)
	}
	sc, code = parseShards([]string{"--rows", "1000", "--shards", "0,1,8", "--repeats", "1", "--filter-rows", "-1", "--out", "/tmp/r"}, &stderr)
	if code != -1 || sc.Rows != 1000 || !slices.Equal(sc.Shards, []int{0, 1, 8}) || sc.Repeats != 1 || !strings.HasPrefix(sc.OutDir, "/tmp/r/shards-") {
		t.Errorf("flags: code %d, %+v", code, sc)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--rows", "0"}, 2, "--rows 0: want a positive number"},
		{[]string{"--shards", "1,65"}, 2, `--shards: bench: shard count "65": want a number from 1 to 64`},
		{[]string{"--shards", "2,2"}, 2, "given twice"},
		{[]string{"--pg-bin", "/nonexistent"}, 2, "pg_recvlogical not found"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-h"}, 0, "usage: cdc-bench shards"},
	} {
		stderr.Reset()
		if _, code := parseShards(c.args, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: code %d, stderr %q; want code %d and %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
	// run dispatches the subcommand.
	stderr.Reset()
	var stdout bytes.Buffer
	if code := run([]string{"shards", "--repeats", "0"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--repeats 0") {
		t.Errorf("run shards: code %d, %q", code, stderr.String())
	}
}
