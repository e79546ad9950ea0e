// Package failover holds the end-to-end tests of a PostgreSQL failover: a real primary and a
// real physical standby (streaming replication through a physical slot), started by the tests
// themselves with the server binaries scripts/pg-install.sh installs (17 and 18 for failover
// slots, 16 for the procedure before 17), and Kafka from the suite's environment
// (CDC_RELAY_BROKERS). The primary is stopped with -m immediate, the standby promoted, and
// writes continue on it; every row acknowledged to a writer must reach Kafka, per key in order.
//
// These servers are PostgreSQL servers, not relays: e2e/faults's "standby" test is about a
// second relay waiting for the slot. scripts/test.sh runs this package as its own stage.
//
// # Contexts and goroutines
//
// Each test starts its servers, relays and writers as child processes and goroutines of its own,
// and its cleanup stops them and waits.
package failover
