#!/usr/bin/env bash
# Stop the private pair of scripts/faults-up.sh (--wipe also deletes its data dir).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
export CDC_RELAY_DEV_DIR="${CDC_RELAY_FAULTS_DIR:-$root/.dev/faults}"
export CDC_RELAY_DEV_PG_PORT="${CDC_RELAY_FAULTS_PG_PORT:-15442}"
export CDC_RELAY_DEV_KAFKA_PORT="${CDC_RELAY_FAULTS_KAFKA_PORT:-19192}"
exec "$root/scripts/dev-down.sh" "$@"
