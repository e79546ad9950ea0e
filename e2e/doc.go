// Package e2e holds the end-to-end tests of cdc-relay: the real binary against the real
// PostgreSQL and Kafka that scripts/dev-up.sh starts. It has no code of its own.
//
// The tests prove the delivery contract: every committed outbox row reaches its topic with
// the contract's key, value and headers, in commit order per key; rolled-back rows never do;
// a kill -9 between Kafka's acknowledgement and the status update loses nothing and
// duplicates only the replayed transactions; a quiet outbox does not pin WAL; memory stays
// flat for a transaction of a million rows.
//
// # Contexts and goroutines
//
// The tests start the binary as child processes and consumers as goroutines (testkit/testenv);
// each test's cleanup stops and waits for what it started.
package e2e
