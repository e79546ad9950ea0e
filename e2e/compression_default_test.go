package e2e

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// defaultCodec is the codec id (a record batch's attributes) of run's default --compression.
const defaultCodec = 3 // lz4

// TestDefaultCompressionIsReadByKafkasJavaConsumer: run with no --compression stores its
// batches with the default codec, and a consumer of Kafka's own Java client (the jars of its
// codec libraries beside it, as any Java consumer has them) reads every record unchanged.
func TestDefaultCompressionIsReadByKafkasJavaConsumer(t *testing.T) {
	jars := testenv.RegistryJars(t) // kafka-clients with lz4-java, zstd-jni and snappy-java
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("java is needed to read the records with Kafka's Java client: %v", err)
	}
	e := testenv.NewRelayEnv(t, false)
	for i := range 30 {
		// A batch under 4 KiB, or one compression would not shrink, is sent uncompressed: each
		// payload alone is over 4 KiB and compresses, so every batch is stored compressed.
		e.F.Insert(t, false, testenv.Row{Key: "k" + strconv.Itoa(i%4), Payload: fmt.Sprintf(`{"n": %d, "note": "%s"}`, i, strings.Repeat("again ", 700))}) // over minCompressedBatch alone
	}
	p := e.Start(t, nil)
	recs := e.Settle(t, testenv.Consume(t, e.F.Topic), e.F.CurrentWAL(t))
	p.Stop(t)
	if len(recs) != 30 {
		t.Fatalf("%d records, want 30", len(recs))
	}
	want := map[string]string{} // outbox id -> value
	for _, r := range recs {
		if c := r.Attrs.CompressionType(); c != defaultCodec {
			t.Errorf("record %s: batch codec %d, want %d (the default)", testenv.Header(r, "outbox-id"), c, defaultCodec)
		}
		want[testenv.Header(r, "outbox-id")] = string(r.Value)
	}

	cmd := exec.CommandContext(t.Context(), java, "-cp", filepath.Join(jars, "*"),
		filepath.Join(repoRoot(t), "e2e", "testdata", "KafkaRead.java"), strings.Join(testenv.Brokers(t), ","), e.F.Topic, "30")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Kafka's Java consumer could not read the topic: %v\n%s", err, stderr.String())
	}
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		id, b64, ok := strings.Cut(sc.Text(), "\t")
		v, err := base64.StdEncoding.DecodeString(b64)
		if !ok || err != nil {
			t.Fatalf("Java's line %q: %v", sc.Text(), err)
		}
		got[id] = string(v)
	}
	if len(got) != len(want) {
		t.Fatalf("Java read %d records, want %d; stderr:\n%s", len(got), len(want), stderr.String())
	}
	for id, v := range want {
		if got[id] != v {
			t.Errorf("outbox id %s: Java read %q, want %q", id, got[id], v)
		}
	}
}
