package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A batch under minCompressedBatch goes out uncompressed (compressing a steady relay's one to
// three small records cost about 1 ms of p50 for a few hundred bytes); a larger one is compressed
// with the chosen codec.
func TestSmallBatchesAreSentUncompressedAndLargeOnesCompressed(t *testing.T) {
	codec, err := parseCompression(defaultCompression)
	if err != nil {
		t.Fatal(err)
	}
	comp, err := batchCompressor(codec)
	if err != nil || comp == nil {
		t.Fatalf("batchCompressor(%s) = %v, %v", defaultCompression, comp, err)
	}
	small := []byte(strings.Repeat("again ", (minCompressedBatch-1)/6))
	if out, c := comp.Compress(new(bytes.Buffer), small); c != kgo.CodecNone || !bytes.Equal(out, small) {
		t.Errorf("a %d-byte batch: codec %d, %d bytes; want it as it is, uncompressed", len(small), c, len(out))
	}
	large := []byte(strings.Repeat("again ", minCompressedBatch/6+1))
	if out, c := comp.Compress(new(bytes.Buffer), large); c != kgo.CodecLz4 || len(out) >= len(large)/2 {
		t.Errorf("a %d-byte batch: codec %d, %d bytes; want lz4 and under half", len(large), c, len(out))
	}
	if comp, err := batchCompressor(kgo.NoCompression()); comp != nil || err != nil {
		t.Errorf("batchCompressor(none) = %v, %v; want no compressor", comp, err)
	}
}
