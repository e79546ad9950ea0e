package main

// configDocValues ends docs/configuration.md: what the value flags need beyond their one-line
// help (the registry's side is docs/schema-registry.md), and what each compression codec costs.
const configDocValues = `
## Values and compression

` + "`--value-format avro|protobuf|json-schema|wire`" + ` (run and poll) writes each value in a schema
registry's wire format; [docs/schema-registry.md](schema-registry.md) says how to set it up, how
subjects are named, and what happens to a payload that does not fit and during a registry outage.

` + "`--compression`" + ` (run and poll) compresses every record batch the command produces, dead letters
and exactly-once checkpoints included; consumers need nothing set (Kafka clients read every codec).
The default stays ` + "`none`" + `: it is what the benchmark figures were measured with, and the codec's
CPU comes out of the producer's share of the relay's cores. One batch of 200 outbox records (JSON
payloads of about 330 bytes with the contract's headers, 86 KB), compressed with the libraries
franz-go uses, on the 2-core development machine while other work ran (one run: read the ratios
as a guide, the speeds as an order of magnitude; real payloads repeat less than these):

| ` + "`--compression`" + ` | batch | ratio | compress speed |
|---|---|---|---|
| ` + "`none`" + ` | 86 137 B | 1x | - |
| ` + "`snappy`" + ` | 15 336 B | 5.6x | ~780 MB/s |
| ` + "`lz4`" + ` (level 0) | 15 891 B | 5.4x | ~350 MB/s |
| ` + "`lz4:9`" + ` | 14 830 B | 5.8x | ~18 MB/s |
| ` + "`gzip:1`" + ` | 12 136 B | 7.1x | ~52 MB/s |
| ` + "`gzip`" + ` (level 6) | 10 071 B | 8.6x | ~16 MB/s |
| ` + "`gzip:9`" + ` | 9 604 B | 9.0x | ~16 MB/s |
| ` + "`zstd:1`" + ` | 8 147 B | 10.6x | ~90 MB/s |
| ` + "`zstd`" + ` (level 2) | 8 241 B | 10.5x | ~43 MB/s |
| ` + "`zstd:4`" + ` | 7 957 B | 10.8x | ~5 MB/s |

So: ` + "`zstd:1`" + ` when the network or the topics' disk is what costs (the smallest batches at a
speed above most relays' throughput); ` + "`snappy`" + ` or ` + "`lz4`" + ` when CPU is scarce; gzip has no
advantage here. High levels (` + "`lz4:9`" + `, ` + "`zstd:4`" + `, ` + "`gzip:9`" + `) cost many times the CPU for a few
percent. Size limits (` + "`--batch-max-bytes`" + `, a topic's max.message.bytes) are checked against the
uncompressed records, so compression never makes a record that fitted be refused.
`
