package main

// configDocValues ends docs/configuration.md: what the value flags need beyond their one-line
// help (the registry's side is docs/schema-registry.md), and what each compression codec costs.
const configDocValues = `
## Values and compression

` + "`--value-format avro|protobuf|json-schema|wire`" + ` (run and poll) writes each value in a schema
registry's wire format; [docs/schema-registry.md](schema-registry.md) says how to set it up, how
subjects are named, and what happens to a payload that does not fit and during a registry outage.

` + "`--compression`" + ` (run, poll and ` + "`dead-letters replay`" + `) compresses every record batch the command
produces, dead letters and exactly-once checkpoints included. A batch the codec would not shrink (a
lone tiny record) is sent uncompressed. The default is ` + "`lz4`" + `, chosen by measurement
([docs/benchmark.md](benchmark.md), "The default codec"):

- **Bytes**: 10 KB JSON documents stored in 0.23x the bytes of ` + "`none`" + ` (` + "`zstd:1`" + ` 0.14x,
  ` + "`snappy`" + ` 0.25x); a produce request's small batch of three order records in 0.46x
  (` + "`zstd:1`" + ` 0.33x). The broker's disk, its replication and every consumer's fetches shrink alike.
- **Drain rate**: 0.91x the uncompressed drain of 10 KB rows (` + "`zstd:1`" + ` 1.01x, ` + "`snappy`" + ` 0.86x,
  under the 0.9x the benchmark asks).
- **CPU**: compressing a steady-rate batch of one to three small records takes 1 to 8 µs, against
  about 100 µs of the relay's CPU per event at 2,000 rows/s; draining 10 KB rows took 0.617 CPU s
  per 10,000 events against ` + "`none`" + `'s 0.427 (` + "`zstd:1`" + ` 0.652).
- **Latency**: at 2,000 small rows/s the p50 and p99 with ` + "`lz4`" + ` could not be told from
  ` + "`none`" + `'s: a few microseconds a batch, under the run-to-run spread of the benchmark.
- **Readers**: every Kafka client that reads compressed batches reads lz4 (Java's with lz4-java,
  which ships with Kafka; librdkafka; franz-go; Sarama), from any broker version; zstd needs
  brokers and consumers of Kafka 2.1 or later. KafkaJS reads only gzip without a codec plugin, and
  kafka-python needs its codec's package: give such consumers ` + "`--compression none`" + ` (Kafka's own
  producer default, and this relay's before) or add the plugin.

` + "`zstd:1`" + ` when the network or the topics' disk costs more than CPU. One batch of 200 outbox
records (JSON payloads of about 330 bytes with the contract's headers, 86 KB), compressed with the
libraries franz-go uses, on the 2-core development machine while other work ran (one run: read the
ratios as a guide, the speeds as an order of magnitude; real payloads repeat less than these):

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

So: ` + "`zstd:1`" + ` gives the smallest batches at a speed above most relays' throughput;
` + "`lz4`" + ` or ` + "`snappy`" + ` when CPU is scarce; gzip has no advantage here. High levels (` + "`lz4:9`" + `, ` + "`zstd:4`" + `, ` + "`gzip:9`" + `) cost many times the CPU for a few
percent. Size limits (` + "`--batch-max-bytes`" + `, a topic's max.message.bytes) are checked against the
uncompressed records, so compression never makes a record that fitted be refused.
`
