// Package deadletters owns the PostgreSQL dead-letter table and the marks table: their DDL
// (TableDDL, MarksTableDDL), creation and migration (CreateTable, MigrateTable,
// CreateMarksTable: `slot create`, `cutover`, `dead-letters` and the relay call them), the
// relay's INSERT of a letter the dead-letter topic refused (TableWriter, table.go) and every
// SELECT and UPDATE of them (store.go). Nothing else in the module names their columns.
//
// It also reads the letters the relay parked (on the dead-letter topic or in the dead-letter
// table), selects and groups them, and replays or discards them for `cdc-relay dead-letters`.
// A Kafka topic cannot be edited, so what was done to a letter of the topic is kept in the
// marks table keyed by what the letter is (the topic's name and ID, partition, offset and
// record timestamp; DefaultMarksTable); the dead-letter table carries replayed_at and
// discarded_at columns of its own. Why a letter was
// parked is its class (Letter.Class: the dlq-class header or the table's class column, decided
// by the relay when it parked it), never a reading of its error text: a bad row is never
// replayed, and a letter without a class is replayed only when Replayer.ReplayUnclassified says so.
//
// Both tables are always named schema-qualified (outbox.Table: a bare name is public.name),
// whatever a connection's search_path. A refused privilege wraps slotstore.ErrPermission and
// says what to grant or what the owner must run once.
//
// # Contexts and goroutines
//
// The package starts no goroutines (a Replayer's producer is the caller's sink, with franz-go's).
// Every call takes ctx first and passes it to pgx and franz-go; a cancel ends the read or the
// replay in flight, and a letter is marked replayed only after Kafka acknowledged it, so a
// cancelled replay leaves nothing marked that was not sent.
package deadletters
