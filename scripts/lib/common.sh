# shellcheck shell=bash
# What every dev script shares: where the data dir is, logging, the lock, running as the postgres
# user, the plain exports, and finding, awaiting and stopping a JVM service (Kafka, the schema registry). Sourced by scripts/lib.sh (before tls.sh, pg.sh and kafka.sh).

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

# alive PID: the process exists and is not a zombie waiting to be reaped.
alive() { kill -0 "$1" 2>/dev/null && [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]]; }

# paused PID: the process is stopped (SIGSTOP), as the fault tests leave a service they pause.
paused() { [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" == T ]]; }

# resume_paused NAME PID: resume the service NAME (for the log) running as PID if it is paused.
resume_paused() {
	if paused "$2"; then
		log "$1 (pid $2) was paused (SIGSTOP): resuming it"
		kill -CONT "$2"
	fi
}

# jvm_pid PID_FILE MARKER prints the pid in PID_FILE if that process is alive and its command line
# holds MARKER (a fixed string naming our service), so that a stale pid file, or one whose pid was
# taken by another process, is ignored.
jvm_pid() {
	local pid
	[[ -f "$1" ]] || return 1
	pid="$(cat "$1" 2>/dev/null)"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	[[ -r "/proc/$pid/cmdline" ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$2" || return 1
	alive "$pid" || return 1
	echo "$pid"
}

# port_busy PORT: something accepts connections on 127.0.0.1:PORT.
port_busy() { timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' 127.0.0.1 "$1" 2>/dev/null; }

# any_port_busy PORT...: port_busy for one of them at least.
any_port_busy() {
	local port
	for port in "$@"; do
		port_busy "$port" && return 0
	done
	return 1
}

# await_jvm NAME PID PID_FILE LOG OFFSET CHECK...: run CHECK every 0.2 s until it succeeds, while the JVM
# service NAME starts as PID. If the JVM exits first (PID_FILE is removed) or $DEV_TIMEOUT passes, it dies
# with the tail of what this start wrote to LOG (from byte OFFSET on).
await_jvm() {
	local name="$1" pid="$2" pid_file="$3" log_file="$4" offset="$5" deadline=$((SECONDS + DEV_TIMEOUT))
	shift 5
	until "$@"; do
		if ! alive "$pid"; then
			tail -c +"$offset" "$log_file" | tail -n 30 >&2 || true
			rm -f "$pid_file"
			die "$name exited while starting; see $log_file"
		fi
		if ((SECONDS >= deadline)); then
			tail -c +"$offset" "$log_file" | tail -n 30 >&2 || true
			die "$name not ready after ${DEV_TIMEOUT}s (pid $pid still running); see $log_file"
		fi
		sleep 0.2
	done
}

# stop_jvm NAME PID_FN PID_FILE SIG GRACE PORT...: stop the JVM service NAME (for the log), whose pid
# PID_FN prints while it runs, with SIG, SIGKILL it if it is still running after GRACE seconds, remove
# its PID_FILE once it has exited, and wait (10 s at most) until none of its PORTs is taken any more.
# When it is not running, say so and remove a stale PID_FILE.
stop_jvm() {
	local name="$1" pid pid_file="$3" sig="$4" grace="$5"
	if ! pid="$("$2")"; then
		log "$name not running"
		rm -f "$pid_file"
		return 0
	fi
	shift 5
	log "stopping $name (pid $pid, SIG$sig)"
	kill -"$sig" "$pid" 2>/dev/null || true
	kill -CONT "$pid" 2>/dev/null || true # a paused JVM cannot handle SIGTERM
	local deadline=$((SECONDS + grace))
	while alive "$pid"; do
		if ((SECONDS >= deadline)); then
			log "$name (pid $pid) still running after ${grace}s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			deadline=$((SECONDS + 10))
		fi
		sleep 0.1
	done
	rm -f "$pid_file"
	# A JVM's main thread can be a zombie (not alive above) while its other threads still exit
	# and hold the listening sockets: a start right after a SIGKILL found the ports taken.
	deadline=$((SECONDS + 10))
	while ((SECONDS < deadline)) && any_port_busy "$@"; do
		sleep 0.1
	done
}
