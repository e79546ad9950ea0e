// Package deadletters reads the letters the relay parked (on the dead-letter topic or in the
// PostgreSQL dead-letter table), selects and groups them, and replays or discards them for
// `cdc-relay dead-letters`. A Kafka topic cannot be edited, so what was done to a letter of the
// topic is kept in a PostgreSQL marks table keyed by (topic, partition, offset); the
// dead-letter table carries replayed_at and discarded_at columns of its own.
//
// Contexts and goroutines: the package starts no goroutines (a Replayer's producer is the
// caller's sink, with franz-go's). Every call takes ctx first and passes it to pgx and
// franz-go; a cancel ends the read or the replay in flight, and a letter is marked replayed
// only after Kafka acknowledged it, so a cancelled replay leaves nothing marked that was not sent.
package deadletters
