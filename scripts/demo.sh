#!/usr/bin/env bash
# The main job end to end on local services: starts Postgres and Kafka, creates the outbox
# table, the slot and the publication, runs the relay, writes COUNT orders (an orders row and
# an outbox row in one transaction each), reads the topic back and reports. Exits non-zero if
# any committed outbox row is missing from Kafka.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

COUNT=${COUNT:-100}
SLOT=${DEMO_SLOT:-demo_slot}
PUB=${DEMO_PUBLICATION:-demo_pub}
TOPIC=${DEMO_TOPIC:-demo.orders.v1}

eval "$(scripts/dev-up.sh)"
echo "== building" >&2
go build -o bin/ ./cmd/cdc-relay
go build -C tools -o ../bin/ ./cmd/outbox-demo

echo "== outbox table and topic" >&2
bin/outbox-demo setup --topic "$TOPIC"

# A slot left by an earlier demo would first read all the WAL written since (make test writes
# gigabytes); the demo starts from now instead. A real deployment keeps its slot.
bin/cdc-relay slot drop --slot "$SLOT" >/dev/null 2>&1 || true

echo "== cdc-relay slot create" >&2
bin/cdc-relay slot create --slot "$SLOT" --publication "$PUB" --table public.outbox

echo "== cdc-relay run" >&2
log=.dev/demo-relay.log
bin/cdc-relay run --slot "$SLOT" --publication "$PUB" --status-interval 1s --create-topics 2>"$log" &
relay=$!
trap 'kill -TERM $relay 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
	grep -q 'msg=streaming' "$log" && break
	kill -0 "$relay" 2>/dev/null || { cat "$log" >&2; echo "demo: the relay exited" >&2; exit 1; }
	sleep 0.1
done
grep -q 'msg=streaming' "$log" || { cat "$log" >&2; echo "demo: the relay did not start streaming" >&2; exit 1; }

# A slot that sat idle while other work wrote WAL first reads past it; wait until it has caught
# up, so the latency below is the steady-state figure, not the catch-up.
for _ in $(seq 1 600); do
	lag=$(bin/cdc-relay slot status --slot "$SLOT" | awk '$1 == "lag" {print $2}')
	[ -n "$lag" ] && [ "$lag" -lt 65536 ] && break
	sleep 0.2
done

echo "== writing $COUNT orders and reading $TOPIC back" >&2
status=0
bin/outbox-demo orders --count "$COUNT" --topic "$TOPIC" || status=$?

kill -TERM "$relay"
relay_status=0
wait "$relay" || relay_status=$?
trap - EXIT
echo "== relay log" >&2
cat "$log" >&2
echo "relay exit status: $relay_status"
echo
echo "== cdc-relay slot status"
bin/cdc-relay slot status --slot "$SLOT" --publication "$PUB"
if [ "$relay_status" -ne 0 ]; then exit "$relay_status"; fi
exit "$status"
