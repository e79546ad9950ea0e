# shellcheck shell=bash
# What every dev script shares: where the data dir is, logging, the lock, running as the postgres
# user and the plain exports. Sourced by scripts/lib.sh (before tls.sh, pg.sh and kafka.sh).

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
# CDC_RELAY_DEV_DIR runs a second, private pair (with other ports) in its own data dir.
DEV_DIR="${CDC_RELAY_DEV_DIR:-$REPO_ROOT/.dev}"

# Seconds to wait for each service to become ready.
DEV_TIMEOUT="${CDC_RELAY_DEV_TIMEOUT:-120}"

log() { printf '[dev] %s\n' "$*" >&2; }
die() { printf '[dev] ERROR: %s\n' "$*" >&2; exit 1; }

is_root() { [[ "$(id -u)" == 0 ]]; }

# as_pg CMD...: run a command as the OS user that owns the Postgres data dir (postgres when we are root,
# since the server refuses to run as root; ourselves otherwise).
as_pg() {
	if is_root; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

print_exports() {
	printf "export CDC_RELAY_PG_URL='%s'\n" "$PG_URL"
	printf "export CDC_RELAY_BROKERS='%s'\n" "$KAFKA_BROKERS"
	printf "export CDC_RELAY_DEV_PG_BIN='%s'\n" "$PG_BIN"
}

# dev_lock serializes dev-up/dev-down/ctl scripts (tests may call them concurrently).
dev_lock() {
	mkdir -p "$DEV_DIR"
	exec 9>"$DEV_DIR/.lock"
	flock -w 600 9 || die "could not lock $DEV_DIR/.lock"
}
