// Package bench is the project's benchmark (tools/cmd/cdc-bench, `make bench`): the relay
// (`cdc-relay run`, and `run --delivery exactly-once` as the publisher run-eos)
// against the polling publisher (`cdc-relay poll`), against Debezium's
// PostgreSQL connector with its outbox EventRouter on Kafka Connect standalone (as shipped,
// and tuned for latency: DebeziumTuned), and against the physical limit of one walsender
// (pg_recvlogical), on the local PostgreSQL and Kafka that scripts/dev-up.sh starts.
//
// It measures, in one run:
//
//   - Kill -9 (first): each slot publisher started from nothing while rows are written at a
//     steady rate, killed -9 in the middle and started again at once; the time to its first
//     record at the start and after the restart, and the duplicates the kill replayed. No
//     committed row may be missing.
//   - Steady load: orders and outbox rows written in single-row transactions at fixed rates
//     while a consumer (read_committed for run-eos) measures each record's latency from commit to receipt: the
//     cdc-commit-time header (the commit time for run, created_at for poll and debezium) to
//     the moment the consumer's fetch returned it, after a warm-up at the same rate. Percentiles, the rate achieved, and the publisher's
//     peak RSS (VmHWM) and CPU time (utime+stime) per 10,000 events. Beside the publishers,
//     the same records produced from memory at the rate by the relay's producer settings
//     (RawProducer, rawSteady): the Kafka client's own CPU per event and its latency from the
//     produce call to the acknowledgement, the floor under a relay's.
//   - Backlog drain: N rows written while no publisher runs, in single-row and in 100-row
//     transactions; then the time from starting each publisher until Kafka has acknowledged
//     all N records, measured as the sum of the topic's high watermarks (a fresh topic per
//     publisher, so the sum is the records Kafka holds; for run-eos, whose high watermarks
//     count its transactions' markers too, the records a read_committed consumer has read),
//     and the time to its first record.
//     Once more with 10 KB payloads, reported in MB/s of record values. The same backlog
//     streamed by pg_recvlogical (pgoutput, to /dev/null, --endpos at the end of the backlog) is the
//     limit of one walsender; the same records produced from memory by the relay's producer
//     settings to the same broker (RawProducer) are the Kafka side's limit. For run and
//     pg_recvlogical, also the CPU time (utime+stime, from /proc) of the slot's walsender
//     during the drain, when Postgres runs on this machine.
//
// Every phase also records what the machine did besides the benchmark (MachineState: load
// average, steal, other processes' CPU) and how much of it was used, the PostgreSQL server's
// and the Kafka broker's share named, and the table flags a phase whose machine was busy;
// Report.DocsTables and UpdateDocs (`cdc-bench docs`) write the published tables from a
// report.json and refuse a busy run.
//
// Publishers run as subprocesses of a freshly built cdc-relay binary, each with its own
// tables, slot, publication and topics, all removed at the end (also when the run is
// interrupted). A debezium publisher is one Kafka Connect JVM for the whole run (jars from
// scripts/debezium-jars.sh; without java or mvn it is left out and the report says so) to
// which each phase adds a connector of its own over the REST API; it is stopped (SIGSTOP)
// while any other publisher is measured. The report is a markdown
// table (table.md), the raw numbers (report.json) and a latency CDF per publisher
// (latency-cdf.svg).
//
// Run blocks until the suite is done or its context ends; cancelling the context stops the
// publishers and cleans up.
package bench
