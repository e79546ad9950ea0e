// Package chaos is the soak behind tools/cmd/cdc-chaos: outbox rows written at a steady rate in
// random multi-row transactions (some rolled back) while the relay is killed -9 and restarted
// every few seconds, Kafka is paused once and PostgreSQL restarted once; then an independent
// consumer checks the delivery contract (internal/oracle writes the rows and gives the verdict). Run returns the figures; Result.Err is the verdict: an
// error on any loss, any rolled-back row delivered, any per-key reordering of first deliveries,
// any dead letter or any relay exit the soak did not cause.
//
// It drives the real cdc-relay binary and the services that scripts/dev-up.sh starts, through
// scripts/kafka-ctl.sh and scripts/pg-ctl.sh: it disturbs everyone using them.
//
// Context: Run stops early with an error when its context ends; a paused Kafka is resumed and
// the relay processes it started are stopped either way.
package chaos
