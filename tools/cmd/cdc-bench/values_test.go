package main

import (
	"bytes"
	"strings"
	"testing"
)

// Bad values flags are refused with exit code 2 and a message naming the flag, before any
// service is needed.
func TestValuesBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"values", "--codecs", "none,brotli"}, `--codecs: bench: codec "brotli": want none, snappy, lz4, zstd or gzip`},
		{[]string{"values", "--rows", "0"}, "--rows, --codec-rows, --payload, --rate, --duration and --repeats must be > 0"},
		{[]string{"values", "--repeats", "-1"}, "must be > 0"},
		{[]string{"values", "extra"}, `unexpected argument "extra"`},
		{[]string{"values", "--pg-url", "postgres://x", "--brokers", "b:9092", "--registry-url", ""}, "no schema registry: set --registry-url or CDC_RELAY_REGISTRY_URL"},
	} {
		t.Setenv("CDC_RELAY_REGISTRY_URL", "")
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
