#!/usr/bin/env bash
# Stop the local PostgreSQL and Kafka started by scripts/dev-up.sh.
#   scripts/dev-down.sh          # stop both, keep data
#   scripts/dev-down.sh --wipe   # stop both and delete .dev/ (data, logs, the copied Kafka jars)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

wipe=0
case "${1:-}" in
"") ;;
--wipe) wipe=1 ;;
*) die "usage: $0 [--wipe]" ;;
esac

[[ -d "$DEV_DIR" ]] || { log "nothing to stop ($DEV_DIR does not exist)"; exit 0; }
dev_lock
kafka_stop TERM
if [[ -f "$PG_DATA/PG_VERSION" ]]; then pg_stop fast; else log "postgres not initialized"; fi
if ((wipe)); then
	log "deleting $DEV_DIR"
	rm -rf "$DEV_DIR"
fi
