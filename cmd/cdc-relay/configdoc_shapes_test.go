package main

// configDocShapes follows the flag reference in docs/configuration.md: what each outbox shape
// becomes and which flags serve it (the details: docs/outbox.md, docs/operations.md and
// docs/debezium.md).
const configDocShapes = `
## Outbox shapes

| the outbox | what the relay publishes | flags |
|---|---|---|
| ` + "`text`, `varchar`, `json`, `jsonb`" + ` payload | the value is the payload's text | none |
| ` + "`bytea`" + ` payload (Protobuf, Avro or other bytes serialised by the service) | the value is exactly the column's bytes; with ` + "`--format cloudevents`" + ` its content-type is ` + "`application/octet-stream`" + ` unless the row's headers give one | none; a payload column of another type is refused at start (exit 2) |
| a NULL payload | a bad row (dead-lettered), or a tombstone: a record with a null value, which deletes its key from a compacted topic | ` + "`--null-payload tombstone`" + ` (run, both delivery modes, and poll); an empty payload is never a tombstone |
| a partitioned table | every record's ` + "`outbox-table`" + ` is the table, never a partition, while partitions are attached, detached or dropped | ` + "`slot create`" + ` publishes it through its root; ` + "`run`" + ` refuses a publication without ` + "`publish_via_partition_root`" + ` and prints the ALTER PUBLICATION; ` + "`outbox prune --partitions drop`" + ` (or detach) |
| Debezium's outbox table (` + "`id uuid, aggregatetype, aggregateid, type, payload`" + `) | the records Debezium's Outbox Event Router writes with its defaults: topic ` + "`outbox.event.<aggregatetype>`" + `, key, value, partition, its ` + "`id`" + ` header, tombstones (docs/debezium.md lists the differences that remain and the switch from a running Debezium) | ` + "`--profile debezium`" + `; ` + "`--topic-template`" + ` for other topic names |
`
