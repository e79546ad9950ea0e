// Package bench is the project's benchmark (tools/cmd/cdc-bench, `make bench`): the relay (`run`,
// and `run --delivery exactly-once` as run-eos) against the polling publisher (`poll`), Debezium's
// PostgreSQL connector with its outbox EventRouter (as shipped, and DebeziumTuned), and the limit
// of one walsender (pg_recvlogical), on the services scripts/dev-up.sh starts.
//
// # What it measures
//
//   - Kill -9: each slot publisher killed mid-run under steady writes and restarted at once: the
//     time to its first record, before and after, and the duplicates; no committed row may miss.
//   - Steady load: commit-to-receipt latency (the cdc-commit-time header to the consumer's fetch;
//     read_committed for run-eos) at fixed rates, the rate achieved, peak RSS and CPU per 10,000
//     events; beside them RawProducer's records from memory, the Kafka client's own floor.
//   - Backlog drain: N rows written with no publisher running, then the time until Kafka holds all
//     N (and to the first record), with one-row and 100-row transactions and 10 KB payloads; the
//     same backlog through pg_recvlogical and RawProducer, and the walsender's CPU.
//
// # The machine and the report
//
// Every phase records what else the machine did (MachineState); a busy phase is flagged, and
// Report.DocsTables and UpdateDocs (`cdc-bench docs`) refuse a busy run. Publishers are
// subprocesses of a freshly built cdc-relay, each with its own tables, slot, publication and
// topics, removed at the end; Debezium is one Kafka Connect JVM (without java or mvn it is left
// out), stopped with SIGSTOP while another publisher is measured. The report is table.md,
// report.json and latency-cdf.svg; docs/benchmark.md says how to read them.
//
// # Contexts
//
// Run blocks until the suite is done or its ctx ends; a cancel stops the publishers and cleans up.
package bench
