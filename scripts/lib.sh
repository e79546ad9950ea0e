# shellcheck shell=bash
# Shared settings and helpers for the local Postgres and Kafka (dev-up.sh, dev-down.sh, kafka-ctl.sh,
# pg-ctl.sh, ...). Source it; it defines functions and variables only. Everything it prints goes to
# stderr: stdout belongs to dev-up.sh's export lines. One file a subject, under scripts/lib/:
#   common.sh  the data dir, log/die, the lock, as_pg, the plain exports, a JVM's pid, wait and stop
#   tls.sh     the secure variant's test CA, certificates and passwords, and their exports
#   pg.sh      PostgreSQL: install, initdb, settings, start/stop, TLS settings and roles
#   kafka.sh   Kafka: jars, settings, start/stop, readiness, SCRAM credentials

for _lib in common tls pg kafka; do
	# shellcheck source=/dev/null
	source "$(dirname "${BASH_SOURCE[0]}")/lib/$_lib.sh"
done
unset _lib

pg_select_version "${CDC_RELAY_DEV_PG_VERSION:-15}"
