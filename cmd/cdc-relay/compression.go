package main

import (
	"bytes"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// compressionFlag is --compression: the codec of every record batch the command produces,
// dead letters and exactly-once checkpoints included (they share the producer). run, poll and
// dead-letters replay register it, with one default.
type compressionFlag struct{ value string }

// defaultCompression is lz4, chosen by measurement (docs/configuration.md, "Values and
// compression"; docs/benchmark.md): a quarter of the bytes at the drain rate's target, with the
// steady p50 of uncompressed batches (small batches go uncompressed: smallBatchesPlain), and
// readable by every Kafka client and broker that reads compressed batches at all (zstd needs 2.1
// or later on both sides).
const defaultCompression = "lz4"

func (c *compressionFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&c.value, "compression", defaultCompression, "record batch compression: none, gzip, snappy, lz4 or zstd, with an optional level: "+
		"gzip:1-9 (6 when none is given), lz4:0-9 (0, the fastest, when none is given), zstd:1-4 (1 fastest, 4 smallest, 2 when none is given); snappy has none. "+
		"lz4, the default, stored 10 KB JSON documents in 0.23x the bytes at 1.15x the uncompressed drain rate, zstd:1 in 0.14x at 1.09x for more CPU; "+
		"batches under 4 KiB are sent uncompressed whatever the codec; "+
		"docs/configuration.md, \"Values and compression\", says what each costs")
}

// opts returns the producer option for the flag's codec. Errors are usage errors (exit 2).
func (c *compressionFlag) opts() ([]kgo.Opt, error) {
	codec, err := parseCompression(c.value)
	if err != nil {
		return nil, &usageError{fmt.Errorf("--compression %q: %w", c.value, err)}
	}
	comp, err := batchCompressor(codec)
	if err != nil {
		return nil, &usageError{fmt.Errorf("--compression %q: %w", c.value, err)}
	}
	if comp == nil {
		return []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression())}, nil
	}
	return []kgo.Opt{kgo.WithCompressor(comp)}, nil
}

// batchCompressor is codec's compressor behind smallBatchesPlain, or nil for none.
func batchCompressor(codec kgo.CompressionCodec) (kgo.Compressor, error) {
	comp, err := kgo.DefaultCompressor(codec)
	if err != nil || comp == nil {
		return nil, err
	}
	return smallBatchesPlain{comp}, nil
}

// minCompressedBatch is the smallest batch the relay compresses. A batch of one or a few small
// records (a steady relay's: one to three records a partition) shrinks by a few hundred bytes
// at most, and compressing it added about 1 ms to run's p50 at 2,000 rows/s with lz4
// (docs/benchmark.md, "The default codec"); 10 KB documents and full drain batches are
// compressed as before.
const minCompressedBatch = 4 << 10

// smallBatchesPlain sends batches under minCompressedBatch uncompressed and compresses the rest
// with the codec's own compressor. (franz-go sends a batch uncompressed whenever the compressed
// bytes are not fewer.)
type smallBatchesPlain struct{ kgo.Compressor }

func (s smallBatchesPlain) Compress(dst *bytes.Buffer, src []byte, flags ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	if len(src) < minCompressedBatch {
		return src, kgo.CodecNone
	}
	return s.Compressor.Compress(dst, src, flags...)
}

// parseCompression reads NAME[:LEVEL].
func parseCompression(s string) (kgo.CompressionCodec, error) {
	name, levelText, hasLevel := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	level := 0
	if hasLevel {
		n, err := strconv.Atoi(levelText)
		if err != nil {
			return kgo.CompressionCodec{}, fmt.Errorf("level %q is not a number", levelText)
		}
		level = n
	}
	inRange := func(lo, hi int) error {
		if level < lo || level > hi {
			return fmt.Errorf("%s takes a level from %d to %d", name, lo, hi)
		}
		return nil
	}
	switch name {
	case "none", "":
		if hasLevel {
			return kgo.CompressionCodec{}, fmt.Errorf("none takes no level")
		}
		return kgo.NoCompression(), nil
	case "snappy":
		if hasLevel {
			return kgo.CompressionCodec{}, fmt.Errorf("snappy takes no level")
		}
		return kgo.SnappyCompression(), nil
	case "gzip":
		if !hasLevel {
			return kgo.GzipCompression(), nil
		}
		return kgo.GzipCompression().WithLevel(level), inRange(1, 9)
	case "lz4":
		if !hasLevel || level == 0 {
			return kgo.Lz4Compression(), inRange(0, 9)
		}
		return kgo.Lz4Compression().WithLevel(1 << (8 + level)), inRange(0, 9) // lz4.Level1 is 1<<9
	case "zstd":
		if !hasLevel {
			return kgo.ZstdCompression(), nil
		}
		return kgo.ZstdCompression().WithLevel(level), inRange(1, 4) // zstd.SpeedFastest is 1, SpeedBestCompression 4
	}
	return kgo.CompressionCodec{}, fmt.Errorf("use none, gzip, snappy, lz4 or zstd, e.g. zstd or gzip:6")
}
