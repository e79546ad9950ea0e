// Package deadletters reads the letters the relay parked (on the dead-letter topic or in the
// PostgreSQL dead-letter table), selects and groups them, and replays or discards them for
// `cdc-relay dead-letters`. A Kafka topic cannot be edited, so what was done to a letter of the
// topic is kept in a PostgreSQL marks table keyed by what the letter is (the topic's name and
// ID, partition, offset and record timestamp; slotstore.DefaultDeadLetterMarksTable); the
// dead-letter table carries replayed_at and discarded_at columns of its own. Why a letter was
// parked is its class (Letter.Class: the dlq-class header or the table's class column, decided
// by the relay when it parked it), never a reading of its error text: a bad row is never
// replayed, and a letter without a class is replayed only when Replayer.ReplayUnclassified says so.
//
// Contexts and goroutines: the package starts no goroutines (a Replayer's producer is the
// caller's sink, with franz-go's). Every call takes ctx first and passes it to pgx and
// franz-go; a cancel ends the read or the replay in flight, and a letter is marked replayed
// only after Kafka acknowledged it, so a cancelled replay leaves nothing marked that was not sent.
package deadletters
