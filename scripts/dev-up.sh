#!/usr/bin/env bash
# Start the local PostgreSQL (wal_level=logical) and single-node Kafka (KRaft) used by tests, the demo,
# benchmarks and CI, unless they are already running, and wait until both really serve requests.
#
#   eval "$(scripts/dev-up.sh)"        # both; stdout is only export lines, progress is on stderr
#   scripts/dev-up.sh pg | kafka       # just one (exports are printed all the same)
#
# Data and logs live in .dev/ at the repo root (pg/, pg.log, kafka/, kafka.log, kafka.pid).
# Env: CDC_RELAY_DEV_PG_PORT (15432), CDC_RELAY_DEV_KAFKA_PORT (19092; controller on port+1, or
# CDC_RELAY_DEV_KAFKA_CONTROLLER_PORT), CDC_RELAY_DEV_TIMEOUT (120 s per service), CDC_RELAY_DEV_PG_BIN.
#
# CDC_RELAY_DEV_PG_VERSION=14|15|16|17|18 picks the PostgreSQL major (15, Debian's, by default). The
# others are the builds scripts/pg-install.sh fetches from Maven Central; each runs on its own port,
# CDC_RELAY_DEV_PG_PORT + MAJOR - 13 (14: 15433, 16: 15435, 17: 15436, 18: 15437), with its own data dir
# (.dev/pgMAJOR/, log .dev/pgMAJOR.log), so several run side by side; psql comes from Debian's 15. The
# exports have the same shape for every version: CDC_RELAY_PG_URL names the chosen server.
#
# The secure variant runs in the same servers, next to the plaintext one: a test CA and certificates in
# .dev/tls/, Postgres with ssl=on and the roles cdc_relay_app (password, hostssl only) and cdc_relay_cert
# (client certificate), Kafka listeners SASL_SSL on port+2 (SCRAM-SHA-256/512, PLAIN) and SSL with
# required client certificates on port+3 (CDC_RELAY_DEV_KAFKA_SASL_PORT, CDC_RELAY_DEV_KAFKA_SSL_PORT).
# Its exports are the CDC_RELAY_TLS_*, CDC_RELAY_MTLS_BROKERS and CDC_RELAY_SCRAM_* lines; passwords are
# only ever in files (CDC_RELAY_TLS_PG_PASSWORD_FILE, CDC_RELAY_SCRAM_PASSWORD_FILE).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

want_pg=1 want_kafka=1
if (($#)); then
	want_pg=0 want_kafka=0
	for a in "$@"; do
		case "$a" in
		pg | postgres) want_pg=1 ;;
		kafka) want_kafka=1 ;;
		*) die "usage: $0 [pg] [kafka]" ;;
		esac
	done
fi

dev_lock
start=$SECONDS
if ((want_pg)); then pg_up; else resolve_pg_bin; fi
if ((want_kafka)); then kafka_up; fi
log "up in $((SECONDS - start))s: $PG_URL, $KAFKA_BROKERS"
print_exports
print_tls_exports
