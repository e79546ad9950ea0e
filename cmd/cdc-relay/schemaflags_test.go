package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/sink"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// startArgs are the flags run and poll need to get as far as the value flags' checks; nothing
// listens at these addresses.
func startArgs(cmd string) []string {
	a := []string{cmd, "--pg-url", "postgres://relay@127.0.0.1:1/db?connect_timeout=1", "--brokers", "127.0.0.1:1"}
	if cmd == "run" {
		a = append(a, "--slot", "s", "--publication", "p")
	}
	return a
}

// A value format and its registry flags that cannot work together are refused at start with
// exit code 2 and a message that says which flags, before anything is contacted.
func TestValueFlagsRefuseBadCombinations(t *testing.T) {
	t.Setenv("CDC_RELAY_REGISTRY_URL", "") // the CI's environment names the real registry
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--value-format", "avro"}, "--value-format avro needs --registry-url"},
		{[]string{"--registry-url", "http://127.0.0.1:1", "--registry-user", "u"}, "--registry-url, --registry-user given with --value-format json"},
		{[]string{"--value-format", "xml"}, `--value-format "xml": use json (the default), avro, protobuf, json-schema or wire`},
		{[]string{"--value-format", "avro", "--registry-url", "http://127.0.0.1:1", "--format", "cloudevents"}, "--format cloudevents with --value-format avro"},
		{[]string{"--value-format", "avro", "--registry-url", "http://127.0.0.1:1", "--register-schemas"}, "--register-schemas needs --schema-file"},
		{[]string{"--value-format", "avro", "--registry-url", "http://127.0.0.1:1", "--subject-strategy", "name"}, "subject strategy \"name\""},
		{[]string{"--value-format", "avro", "--registry-url", "http://127.0.0.1:1", "--registry-user", "u"}, "a registry user needs a password file"},
		{[]string{"--value-format", "avro", "--registry-url", "http://127.0.0.1:1", "--protobuf-message", "a.B"}, "--protobuf-message is for --value-format protobuf"},
		{[]string{"--compression", "brotli"}, `--compression "brotli": use none, gzip, snappy, lz4 or zstd`},
		{[]string{"--compression", "zstd:9"}, "zstd takes a level from 1 to 4"},
		{[]string{"--compression", "snappy:3"}, "snappy takes no level"},
	}
	for _, cmd := range []string{"run", "poll"} {
		for _, c := range cases {
			var out, errOut strings.Builder
			code := run(append(startArgs(cmd), c.args...), &out, &errOut)
			if code != exitUsage || !strings.Contains(errOut.String(), c.want) {
				t.Errorf("%s %v: exit %d, want %d with %q; stderr:\n%s", cmd, c.args, code, exitUsage, c.want, errOut.String())
			}
		}
	}
}

// At start the subject of a fixed --topic is looked up in the real registry: one it does not
// know stops the start with exit code 2 and the subject in the message, before PostgreSQL or
// Kafka is contacted.
func TestUnknownSubjectAtStartExits2(t *testing.T) {
	url := testenv.RegistryURL(t)
	topic := testenv.Name(t) + ".nosuch"
	for _, cmd := range []string{"run", "poll"} {
		var out, errOut strings.Builder
		code := run(append(startArgs(cmd), "--value-format", "avro", "--registry-url", url, "--topic", topic), &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), "subject "+topic+"-value") || !strings.Contains(errOut.String(), "register the subject's schema") {
			t.Errorf("%s: exit %d, want %d naming subject %s-value; stderr:\n%s", cmd, code, exitUsage, topic, errOut.String())
		}
	}
}

// A registry that refuses the credentials at start stops it with exit code 2 and a message that
// names the registry user and password file, never the password.
func TestRefusedRegistryCredentialsExit2(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error_code":401,"message":"Unauthorized"}`))
	}))
	defer srv.Close()
	pw := writeFile(t, t.TempDir(), "pw", testSecret+"\n")
	for _, cmd := range []string{"run", "poll"} {
		var out, errOut strings.Builder
		code := run(append(startArgs(cmd), "--value-format", "avro", "--registry-url", srv.URL, "--registry-user", "u", "--registry-password-file", pw), &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), "check the registry user and password file") {
			t.Errorf("%s: exit %d, want %d about the credentials; stderr:\n%s", cmd, code, exitUsage, errOut.String())
		}
		if strings.Contains(errOut.String(), testSecret) {
			t.Errorf("%s: the password is in the output:\n%s", cmd, errOut.String())
		}
	}
}

// Each --compression codec and level produces batches the real broker takes and stores with
// that codec (the fetched batch's attributes), and the records read back unchanged.
func TestCompressionCodecsOnTheBroker(t *testing.T) {
	brokers := testenv.Brokers(t)
	topic := testenv.Name(t)
	testenv.CreateTopic(t, topic, 1)
	want := map[string]uint8{"none": 0, "gzip": 1, "gzip:9": 1, "snappy": 2, "lz4": 3, "lz4:9": 3, "zstd": 4, "zstd:1": 4, "zstd:4": 4}
	value := []byte(strings.Repeat(`{"order_id":"A-1","status":"placed","amount":12.5},`, 20))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for flagValue := range want {
		opts, err := (&compressionFlag{value: flagValue}).opts()
		if err != nil {
			t.Fatalf("--compression %s: %v", flagValue, err)
		}
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers...), kgo.ProducerLinger(50*time.Millisecond))...)
		if err != nil {
			t.Fatal(err)
		}
		recs := make([]*kgo.Record, 5)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Key: []byte(flagValue), Value: value}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("--compression %s: produce: %v", flagValue, err)
		}
		cl.Close()
	}
	cons := testenv.Consume(t, topic)
	got := cons.WaitFor(t, 60*time.Second, "every record", func(r []*kgo.Record) bool { return len(r) >= 5*len(want) })
	for _, r := range got {
		if c := r.Attrs.CompressionType(); c != want[string(r.Key)] {
			t.Errorf("--compression %s: the broker stored codec %d, want %d", r.Key, c, want[string(r.Key)])
		}
		if string(r.Value) != string(value) {
			t.Errorf("--compression %s: value changed", r.Key)
		}
	}
}

// A registry whose certificate the relay does not trust stops the start with exit code 2 and a
// message that says to pass its CA; with --registry-ca-file the same start gets past the check.
func TestUntrustedRegistryCertificateExits2(t *testing.T) {
	url, ca := testenv.RegistryTLS(t)
	topic := testenv.Name(t) + ".nosuch"
	var out, errOut strings.Builder
	code := run(append(startArgs("run"), "--value-format", "avro", "--registry-url", url, "--topic", topic), &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), "registry CA file") {
		t.Errorf("without the CA: exit %d, want %d naming the registry CA file; stderr:\n%s", code, exitUsage, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	code = run(append(startArgs("run"), "--value-format", "avro", "--registry-url", url, "--registry-ca-file", ca, "--topic", topic), &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), "subject "+topic+"-value") {
		t.Errorf("with the CA: exit %d, want %d about the unknown subject (the TLS handshake passed); stderr:\n%s", code, exitUsage, errOut.String())
	}
}

// With --value-format json a registry named only in the environment is ignored (the CI's and a
// deployment's environment serve every command), while the same flag on the command line is
// refused. parse applies the environment twins with fs.Set, so fs.Visit alone cannot tell them
// apart: every relay of the e2e suite saw CDC_RELAY_REGISTRY_URL and exited 2.
func TestRegistryFromTheEnvironmentIsIgnoredWithJSON(t *testing.T) {
	t.Setenv("CDC_RELAY_REGISTRY_URL", "http://127.0.0.1:1")
	var v valueFlags
	fs := newFlagSet("run", "run", io.Discard)
	v.register(fs)
	if err := parse(fs, nil); err != nil {
		t.Fatal(err)
	}
	if enc, err := v.apply(fs, record.FormatOutbox, &sink.Config{}); err != nil || enc != nil {
		t.Fatalf("json with the registry URL from the environment: encoder %v, error %v; want neither", enc, err)
	}
	var w valueFlags
	fs = newFlagSet("run", "run", io.Discard)
	w.register(fs)
	if err := parse(fs, []string{"--registry-user", "u"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.apply(fs, record.FormatOutbox, &sink.Config{}); err == nil || !strings.Contains(err.Error(), "--registry-user given with --value-format json") {
		t.Fatalf("json with --registry-user on the command line: %v, want it refused", err)
	}
}
