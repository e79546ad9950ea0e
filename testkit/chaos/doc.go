// Package chaos is the soak behind tools/cmd/cdc-chaos: outbox rows written at a steady rate in
// random multi-row transactions (some rolled back) while the relay holding the slot is killed -9
// every few seconds (a second relay waits as a standby all along, so each kill is a takeover by
// the standby or by the killed relay's restart), Kafka is paused once, the holder is made a
// zombie once (SIGSTOP until its walsender's wal_sender_timeout ended its session and the
// standby took over and published, then SIGCONT) and PostgreSQL is restarted once; then an
// independent consumer checks the delivery contract (testkit/oracle writes the rows and gives
// the verdict). Run returns the figures; Result.Err is the verdict: an error on any loss, any
// rolled-back row delivered, any per-key reordering of first deliveries, any dead letter or any
// relay exit the soak did not cause.
//
// With Config.Delivery ExactlyOnce the relays run `--delivery exactly-once` and the consumer
// reads read_committed, what that mode's consumers see: one duplicate fails the verdict too,
// and so does a record of an aborted transaction read, or a record written outside a
// transaction. A second reader beside it reads the topic read_uncommitted with the transaction
// markers and counts what the aborted transactions held (and how many of those rows a commit
// delivered later): the records that would have been duplicates, which shows the check is not
// vacuous. At-least-once (the default) allows and counts duplicates.
//
// It drives the real cdc-relay binary and the services that scripts/dev-up.sh starts, through
// scripts/kafka-ctl.sh and scripts/pg-ctl.sh: it disturbs everyone using them. The slot's holder
// is the relay whose application_name its walsender's pg_stat_activity row carries.
//
// # Context
//
// Run stops early with an error when its context ends; a paused Kafka is resumed, a paused relay
// continued, and the relay processes it started are stopped either way.
package chaos
