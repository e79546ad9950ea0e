// Package faults holds the fault-injection tests of cdc-relay: each failure class of docs/operations.md,
// "What happens when things go wrong", provoked against the real PostgreSQL and Kafka, through scripts/kafka-ctl.sh and
// scripts/pg-ctl.sh (broker paused or killed, Postgres restarted, relay killed -9, slot lost),
// plus CI-size runs of the chaos soak (tools/cmd/cdc-chaos), at-least-once and exactly-once.
//
// # Running them
//
// These tests disturb the services for everyone using them, so none of them is parallel, and
// the package must not run at the same time as other packages' tests against the same pair:
// run it with `go test -p 1`, or better against a private pair of its own
// (CDC_RELAY_DEV_DIR and the CDC_RELAY_DEV_*_PORT variables; see `make faults`). A test checks
// that the control scripts and CDC_RELAY_PG_URL / CDC_RELAY_BROKERS name the same services
// before it touches them. It has no code of its own.
package faults
