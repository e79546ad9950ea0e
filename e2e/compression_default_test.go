package e2e

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// defaultCodec is the codec id (a record batch's attributes) of run's default --compression.
const defaultCodec = 3 // lz4

// TestDefaultCompressionIsReadByKafkasJavaConsumer: run with no --compression stores its
// batches with the default codec, and a consumer of Kafka's own Java client (the jars of its
// codec libraries beside it, as any Java consumer has them) reads every record unchanged.
func TestDefaultCompressionIsReadByKafkasJavaConsumer(t *testing.T) {
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

	// Kafka's client jar comes with lz4-java, zstd-jni and snappy-java.
	lines := javaLines(t, "read the topic with Kafka's Java consumer", filepath.Join("e2e", "testdata", "KafkaRead.java"),
		strings.Join(testenv.Brokers(t), ","), e.F.Topic, "30")
	got := map[string]string{}
	for _, line := range lines {
		id, b64, ok := strings.Cut(line, "\t")
		v, err := base64.StdEncoding.DecodeString(b64)
		if !ok || err != nil {
			t.Fatalf("Java's line %q: %v", line, err)
		}
		got[id] = string(v)
	}
	if len(got) != len(want) {
		t.Fatalf("Java read %d records, want %d", len(got), len(want))
	}
	for id, v := range want {
		if got[id] != v {
			t.Errorf("outbox id %s: Java read %q, want %q", id, got[id], v)
		}
	}
}
