#!/usr/bin/env bash
# Stop the local PostgreSQL and Kafka started by scripts/dev-up.sh.
#   scripts/dev-down.sh          # stop Kafka and every PostgreSQL version running from .dev/, keep data
#   scripts/dev-down.sh pg       # stop only the PostgreSQL of CDC_RELAY_DEV_PG_VERSION (15 by default)
#   scripts/dev-down.sh kafka    # stop only Kafka
#   scripts/dev-down.sh --wipe   # stop everything and delete .dev/ (data, logs, the copied Kafka jars)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

wipe=0 want_pg=0 want_kafka=0
for a in "$@"; do
	case "$a" in
	--wipe) wipe=1 ;;
	pg | postgres) want_pg=1 ;;
	kafka) want_kafka=1 ;;
	*) die "usage: $0 [pg] [kafka] | --wipe" ;;
	esac
done
if ((wipe && (want_pg || want_kafka))); then die "--wipe stops and deletes everything: give it alone"; fi
all=0
if ((!want_pg && !want_kafka)); then all=1 want_kafka=1; fi

[[ -d "$DEV_DIR" ]] || { log "nothing to stop ($DEV_DIR does not exist)"; exit 0; }
dev_lock
if ((want_kafka)); then kafka_stop TERM; fi
# pg_stop_here stops the selected version's server if it was ever initialized.
pg_stop_here() { if [[ -f "$PG_DATA/PG_VERSION" ]]; then pg_stop fast; else log "postgres $PG_VERSION not initialized"; fi; }
if ((all)); then
	for v in "${PG_MAJORS[@]}"; do
		pg_select_version "$v"
		if [[ "$v" == 15 || -f "$PG_DATA/PG_VERSION" ]]; then pg_stop_here; fi
	done
elif ((want_pg)); then
	pg_stop_here
fi
if ((wipe)); then
	log "deleting $DEV_DIR"
	rm -rf "$DEV_DIR"
fi
