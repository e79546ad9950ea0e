#!/usr/bin/env bash
# Start (idempotently) the private PostgreSQL and Kafka pair of the fault-injection tests
# (e2e/faults) and the chaos soak (tools/cmd/cdc-chaos), next to the shared pair of scripts/dev-up.sh:
# its own data dir (.dev/faults/), its own ports (Postgres 15442, Kafka 19192, controller 19193;
# the TLS listeners on 19194/19195), and a broker with an ACL authorizer that allows everything
# no ACL denies. Pausing, killing or restarting it disturbs nobody else.
#
#   eval "$(scripts/faults-up.sh)"   # prints eval-able exports, as dev-up.sh does, plus the
#                                    # CDC_RELAY_DEV_* variables that make scripts/kafka-ctl.sh and
#                                    # scripts/pg-ctl.sh control this pair
#   scripts/faults-down.sh           # stop it (--wipe to delete .dev/faults/)
#
# Env: CDC_RELAY_FAULTS_PG_PORT, CDC_RELAY_FAULTS_KAFKA_PORT, CDC_RELAY_FAULTS_DIR override the defaults.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
export CDC_RELAY_DEV_DIR="${CDC_RELAY_FAULTS_DIR:-$root/.dev/faults}"
export CDC_RELAY_DEV_PG_PORT="${CDC_RELAY_FAULTS_PG_PORT:-15442}"
export CDC_RELAY_DEV_KAFKA_PORT="${CDC_RELAY_FAULTS_KAFKA_PORT:-19192}"
export CDC_RELAY_DEV_KAFKA_AUTHORIZER=1
unset CDC_RELAY_DEV_KAFKA_CONTROLLER_PORT CDC_RELAY_DEV_KAFKA_SASL_PORT CDC_RELAY_DEV_KAFKA_SSL_PORT
printf "export CDC_RELAY_DEV_DIR='%s'\n" "$CDC_RELAY_DEV_DIR"
printf "export CDC_RELAY_DEV_PG_PORT='%s'\n" "$CDC_RELAY_DEV_PG_PORT"
printf "export CDC_RELAY_DEV_KAFKA_PORT='%s'\n" "$CDC_RELAY_DEV_KAFKA_PORT"
printf "export CDC_RELAY_DEV_KAFKA_AUTHORIZER=1\n"
exec "$root/scripts/dev-up.sh" "$@"
