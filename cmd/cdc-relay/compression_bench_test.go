package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkCompressSmallBatch is what each --compression codec costs a produce request at the
// steady rate of small rows, where a request carries a batch of one to a few records per
// partition: the franz-go compressor on 1, 3 and 20 of cdc-bench's order records (the value
// and the contract's headers, ~330 bytes each). ns/op is per batch; stored/in is the ratio.
func BenchmarkCompressSmallBatch(b *testing.B) {
	rec := func(i int) string {
		return fmt.Sprintf(`outbox-id%d outbox-table public.orders aggregate-id order-%d cdc-lsn 0/%X cdc-commit-time 2026-12-06T21:00:00.%06dZ `+
			`correlation-id 7f3c%08x {"items": [{"qty": 2, "sku": "espresso"}], "event": "order.created", "amount": %d.5, "currency": "EUR", "customer": "customer-%d", "order_id": %d}`,
			4000+i, 4000+i, 0x16B3748+i*97, i*131, i*7919, 10+i%40, i%8, 4000+i)
	}
	for _, codec := range []string{"snappy", "lz4", "zstd:1"} {
		c, err := parseCompression(codec)
		if err != nil {
			b.Fatal(err)
		}
		comp, err := kgo.DefaultCompressor(c)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 3, 20} {
			var recs []string
			for i := range n {
				recs = append(recs, rec(i))
			}
			src := []byte(strings.Join(recs, "\n"))
			b.Run(fmt.Sprintf("%s/%d", codec, n), func(b *testing.B) {
				var dst bytes.Buffer
				var out []byte
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					dst.Reset()
					out, _ = comp.Compress(&dst, src)
				}
				b.ReportMetric(float64(len(out))/float64(len(src)), "stored/in")
			})
		}
	}
}
