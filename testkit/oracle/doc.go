// Package oracle decides whether a run kept the delivery contract: every committed outbox row
// reaches the topic, no rolled-back row does, and per key the first deliveries come in commit
// order; duplicates are allowed and counted. It is the test oracle of the e2e tests (through
// testkit/testenv), the chaos soak (testkit/chaos) and the benchmark (tools/internal/bench):
// one writer and one checker, so that the three check the same contract the same way.
//
// # Writing and checking
//
// The writing side is a Writer, which commits transactions and records them in a Ledger (a
// commit whose outcome is unknown is looked up, never guessed). The reading side is a
// Delivery per record read (Read), and Ledger.Check gives the Verdict. A row is known by its
// outbox id and its tag, a number unique per Writer in the row's payload ({"n": N}): after a
// failover the new primary may reuse the id of a row lost with the old one, and that record is
// another row. Seen is the reading side alone (ids read, duplicates) for a consumer on the hot
// path of a measurement, whose ledger is the table itself.
//
// # Contexts and goroutines
//
// It imports no testing package: the soak and the bench are programs. Contexts bound the
// writer's waits (a Postgres that is away is waited for until the context ends); nothing here
// starts a goroutine.
package oracle
