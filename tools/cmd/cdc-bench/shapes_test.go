package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// `cdc-bench shapes` takes its sizes from flags, defaults small enough for a few minutes on
// two cores, and refuses bad ones with exit code 2 and a message naming the flag.
func TestShapesArgs(t *testing.T) {
	fakeServices(t)
	var stderr bytes.Buffer
	cfg, code, ok := shapesConfig(nil, &stderr)
	if !ok || code != 0 {
		t.Fatalf("defaults: code %d: %s", code, stderr.String())
	}
	if cfg.Rows != 100_000 || cfg.Payload != 512 || cfg.TxSize != 100 || cfg.Repeats != 3 || cfg.PGURL != "postgres://bench@127.0.0.1:1/x" ||
		!slices.Equal(cfg.Brokers, []string{"127.0.0.1:2"}) || !strings.HasPrefix(cfg.OutDir, filepath.Join("results", "shapes-")) {
		t.Errorf("defaults: %+v", cfg)
	}
	cfg, _, ok = shapesConfig([]string{"--rows", "200000", "--payload", "1024", "--repeats", "5", "--tx-size", "1", "--brokers", "a:1,b:2", "--out", "/tmp/r"}, &stderr)
	if !ok || cfg.Rows != 200_000 || cfg.Payload != 1024 || cfg.Repeats != 5 || cfg.TxSize != 1 ||
		!slices.Equal(cfg.Brokers, []string{"a:1", "b:2"}) || !strings.HasPrefix(cfg.OutDir, "/tmp/r/shapes-") {
		t.Errorf("flags: %+v", cfg)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--rows", "0"}, 2, "--rows 0: want a positive number"},
		{[]string{"--payload", "-5"}, 2, "--payload -5: want a positive number"},
		{[]string{"--rows", "3"}, 2, "want at least 4, one per partition"},
		{[]string{"--rows", "lots"}, 2, `invalid value "lots" for flag -rows`},
		{[]string{"200000"}, 2, `unexpected argument "200000"`},
		{[]string{"-h"}, 0, "usage: cdc-bench shapes"},
	} {
		stderr.Reset()
		_, code, ok := shapesConfig(c.args, &stderr)
		if ok || code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: ok %v, code %d, stderr %q; want code %d and %q", c.args, ok, code, stderr.String(), c.code, c.want)
		}
	}
	// Without the services' variables it says how to get them.
	t.Setenv("CDC_RELAY_PG_URL", "")
	stderr.Reset()
	if _, code, _ := shapesConfig(nil, &stderr); code != 2 || !strings.Contains(stderr.String(), "scripts/dev-up.sh") {
		t.Errorf("no PostgreSQL URL: code %d, %q", code, stderr.String())
	}
	// run dispatches the subcommand.
	stderr.Reset()
	var stdout bytes.Buffer
	if code := run([]string{"shapes", "--repeats", "0"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--repeats 0") {
		t.Errorf("run shapes: code %d, %q", code, stderr.String())
	}
}

// fakeServices points the services' variables at addresses nothing listens on: flag parsing
// needs them set, and no test of it may reach a service.
func fakeServices(t *testing.T) {
	t.Helper()
	t.Setenv("CDC_RELAY_PG_URL", "postgres://bench@127.0.0.1:1/x")
	t.Setenv("CDC_RELAY_BROKERS", "127.0.0.1:2")
}
