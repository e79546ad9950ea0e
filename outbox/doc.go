// Package outbox is the outbox table's shape and its event, one definition for every part of
// cdc-relay that reads the table or its rows: the relay's decoder (rows from the WAL), the polling
// publisher, cutover, prune and the pending-rows count.
//
// # The table and its rows
//
//   - Table is a schema-qualified table name. A name without a schema means public.name,
//     everywhere (the outbox table, the dead-letter tables, the inbox's processed table): the
//     relay matches WAL relation names, which are always schema.table, and a name resolved
//     through a connection's search_path would name different tables for different sessions
//     (a table earlier in the path captures the writes).
//   - Columns maps the contract's columns to the table's; zero fields take the default names.
//   - Event (event.go) is the one outbox event type, whichever publisher read the row.
//   - Profile (profile.go) is another publisher's table and records, e.g. Debezium's Outbox
//     Event Router with its defaults (docs/debezium.md); TopicTemplate names a row's topic
//     from its columns.
//
// # Headers and bad rows
//
// ParseHeaders turns the headers column into record headers; both publishers call it on the same
// text (the WAL's text output and the column's ::text), so they make the same headers and refuse
// the same rows. RowError and the bad-row reasons (ErrNullKey, ...) say why a row cannot become a
// record; both publishers dead-letter such a row with the error's text in dlq-error.
//
// # Contexts and goroutines
//
// The package does no I/O, starts no goroutines and takes no context.
package outbox
