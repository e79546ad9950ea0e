#!/usr/bin/env bash
# The seed's demo (shared/seeds/000, "Демо") made real, for the WAL relay (MODE=cdc, the default)
# and for the polling publisher it replaces (MODE=poll). The Makefile's seed targets run it
# (`make run-service COUNT=20` is `scripts/seed-demo.sh run-service` with COUNT=20):
#
#   scripts/seed-demo.sh up | db-init | topic-create | run-service | db-count | outbox-count |
#                        outbox-pending | chaos-kill-publisher | run-publisher | run-consumer |
#                        dup-count | end-offsets | all
#
# Env: MODE (cdc|poll), COUNT (orders for run-service, 20), BATCH_SIZE (chaos-kill-publisher, 5),
# TIMEOUT (how long run-publisher and run-consumer wait to catch up before failing, 2m).
# Names (each mode has its own, so the two never see each other's rows): SEED_SCHEMA (seed_$MODE),
# SEED_TOPIC (brew.orders.v1.$MODE), SEED_SLOT (seed_cdc: slot and publication), SEED_GROUP (order-consumer).
# `all` runs the whole sequence and checks: outbox-count = db-count = COUNT, dup-count = COUNT
# (unique = orders), processed = unique + duplicates, end-offsets >= COUNT, outbox-pending = 0;
# exit 1 otherwise. Every step ends by itself: none runs until interrupted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MODE=${MODE:-cdc}
COUNT=${COUNT:-20}
BATCH_SIZE=${BATCH_SIZE:-5}
TIMEOUT=${TIMEOUT:-2m}
case "$MODE" in cdc | poll) ;; *) echo "seed-demo: MODE=$MODE: use cdc or poll" >&2; exit 2 ;; esac
case "${1:-}" in
up | db-init | topic-create | run-service | db-count | outbox-count | outbox-pending | chaos-kill-publisher | run-publisher | run-consumer | dup-count | end-offsets | all) ;;
*) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
export SEED_SCHEMA=${SEED_SCHEMA:-seed_$MODE}
export SEED_TOPIC=${SEED_TOPIC:-brew.orders.v1.$MODE}
export SEED_GROUP=${SEED_GROUP:-order-consumer}
SLOT=${SEED_SLOT:-seed_cdc}
BIN=${SEED_BIN:-.dev/seed-bin}
LOG=.dev/seed-$SEED_SCHEMA-publisher.log

# Each step starts the services if needed; when they are already up it says nothing about them.
exports=$(scripts/dev-up.sh 2> >(grep --line-buffered -v -e '] postgres already running' -e '] Kafka already running' -e '] up in ' >&2))
eval "$exports"
mkdir -p "$BIN" .dev
if [[ -z "${SEED_NO_BUILD:-}" ]]; then
	go build -o "$BIN/" ./cmd/cdc-relay
	go build -C tools -o "$(cd "$BIN" && pwd)/" ./cmd/order-service ./cmd/order-consumer
fi
relay=("$BIN/cdc-relay")
svc=("$BIN/order-service")
cons=("$BIN/order-consumer")
say() { printf '== %s\n' "$*" >&2; }

# publisher runs the mode's publisher with the given extra flags, logging to $LOG. It execs, so
# that `publisher &` leaves the publisher's own pid in $!.
publisher() {
	if [[ $MODE == cdc ]]; then
		exec "${relay[@]}" run --slot "$SLOT" --publication "$SLOT" --dlq-topic "$SEED_TOPIC.dlq" --create-topics --metrics-addr "" "$@" 2>>"$LOG"
	else
		exec "${relay[@]}" poll --table "$SEED_SCHEMA.outbox" --dlq-topic "$SEED_TOPIC.dlq" --create-topics --metrics-addr "" "$@" 2>>"$LOG"
	fi
}

end_total() { "${cons[@]}" end-offsets | awk '$1 == "total" {print $2}'; }

cmd_up() { say "Postgres and Kafka are up"; } # started above, with every step

cmd_db_init() {
	"${svc[@]}" init --reset
	if [[ $MODE == cdc ]]; then
		"${relay[@]}" slot drop --slot "$SLOT" --publication "$SLOT" >/dev/null 2>&1 || true
		"${relay[@]}" slot create --slot "$SLOT" --publication "$SLOT" --table "$SEED_SCHEMA.outbox"
	fi
	say "schema $SEED_SCHEMA: orders, outbox, inbox_processed, reservations"
}

cmd_topic_create() { "${cons[@]}" topic-create --reset; }
cmd_run_service() { "${svc[@]}" orders --count "$COUNT"; }
cmd_db_count() { "${svc[@]}" count orders; }
cmd_outbox_count() { "${svc[@]}" count outbox; }

cmd_outbox_pending() {
	if [[ $MODE == poll ]]; then
		"${svc[@]}" count pending
	else
		# The relay marks nothing in the table: the slot's confirmed position is the mark, and the
		# pending rows are the outbox inserts the slot still holds past it.
		"${svc[@]}" count --slot "$SLOT" pending
	fi
}

cmd_chaos_kill_publisher() {
	# Without pending rows there is no batch to crash after (and the poller would wait forever).
	if (($(cmd_outbox_pending) == 0)); then
		echo "seed-demo: no outbox row is pending: run run-service first" >&2
		exit 1
	fi
	: >"$LOG"
	if [[ $MODE == poll ]]; then
		# The poller's test hook: SIGKILL after Kafka acknowledged the first batch, before UPDATE ... published_at.
		local code=0
		(CDC_RELAY_TEST_CRASH_AFTER_BATCHES=1 publisher --batch "$BATCH_SIZE") || code=$?
		[[ $code == 137 ]] || { cat "$LOG" >&2; echo "seed-demo: the poller exited $code, not killed by its hook" >&2; exit 1; }
	else
		# The relay confirms nothing for an hour (no prompt confirm after an acknowledgement either);
		# kill -9 once Kafka holds BATCH_SIZE records.
		publisher --status-interval 1h --confirm-delay -1s &
		local pid=$! n=0
		for _ in $(seq 1 600); do
			n=$(end_total)
			((n >= BATCH_SIZE)) && break
			kill -0 "$pid" 2>/dev/null || { cat "$LOG" >&2; echo "seed-demo: the relay exited" >&2; exit 1; }
			sleep 0.05
		done
		kill -KILL "$pid"
		wait "$pid" 2>/dev/null || true
	fi
	echo "CRASH: publisher killed after Kafka acknowledged $(end_total) records, before they were marked published"
	echo "       (cdc: the slot's confirmed position did not move; poll: published_at is still NULL)"
}

cmd_run_publisher() {
	: >"$LOG"
	if [[ $MODE == cdc ]]; then
		publisher --status-interval 1s &
		local pid=$!
		"${svc[@]}" wait-confirmed --slot "$SLOT" --timeout "$TIMEOUT" || { kill "$pid"; cat "$LOG" >&2; exit 1; }
	else
		publisher --interval 50ms &
		local pid=$!
		"${svc[@]}" wait-pending --timeout "$TIMEOUT" || { kill "$pid"; cat "$LOG" >&2; exit 1; }
	fi
	kill -TERM "$pid"
	wait "$pid" || { cat "$LOG" >&2; echo "seed-demo: the publisher failed" >&2; exit 1; }
	grep -o 'msg=stopped.*' "$LOG" || true
}

cmd_run_consumer() { "${cons[@]}" run --timeout "$TIMEOUT"; }
cmd_dup_count() { "${cons[@]}" dup-count; }
cmd_end_offsets() { "${cons[@]}" end-offsets; }

cmd_all() {
	say "up, db-init, topic-create"
	cmd_up
	cmd_db_init
	cmd_topic_create
	say "run-service COUNT=$COUNT"
	cmd_run_service | tail -n 1
	say "chaos-kill-publisher BATCH_SIZE=$BATCH_SIZE"
	cmd_chaos_kill_publisher
	say "run-publisher"
	cmd_run_publisher
	say "run-consumer"
	local out
	out=$(cmd_run_consumer)
	printf '%s\n' "$out" | grep -c '^DUP' >/dev/null || true
	printf '%s\n' "$out" | tail -n 1
	local orders outbox unique total processed inserted skipped
	orders=$(cmd_db_count)
	outbox=$(cmd_outbox_count)
	unique=$(cmd_dup_count)
	total=$(end_total)
	read -r processed inserted skipped < <(printf '%s\n' "$out" | tail -n 1 | sed 's/[a-z]*=//g')
	echo "db-count=$orders outbox-count=$outbox dup-count=$unique end-offsets=$total"
	local pending
	pending=$(cmd_outbox_pending)
	echo "outbox-pending=$pending"
	local ok=1
	check() { if ! eval "$1"; then echo "FAILED: $1 ($2)" >&2; ok=0; fi; }
	check "((orders == COUNT && outbox == COUNT))" "every order has its outbox row"
	check "((unique == orders))" "unique events processed = orders"
	check "((processed == inserted + skipped && inserted == unique))" "processed = unique + duplicates"
	check "((processed == total && total >= orders))" "the consumer read every record, duplicates included"
	check "((skipped >= 1))" "the chaos run left duplicates on the topic"
	check "((pending == 0))" "outbox-pending = 0"
	((ok)) || exit 1
	echo "OK ($MODE): $orders orders, $total records on the topic ($skipped duplicates), $unique applied once each"
}

c=$1
"cmd_${c//-/_}"
