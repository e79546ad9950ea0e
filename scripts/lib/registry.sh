# shellcheck shell=bash
# The schema registry: Apicurio Registry 2.6 (Maven Central, runs on Java 17) with its
# Confluent-compatible API (/apis/ccompat/v7), fetched, started, awaited and stopped. Sourced by
# scripts/registry-up.sh and registry-down.sh after lib/common.sh and lib/tls.sh.
#
# The application is the release's "-all.tar.gz" (a Quarkus runner jar and its lib/, already built:
# no Quarkus build step), fetched with Maven into ~/.m2 (~140 MB on a fresh machine) and unpacked into
# $REGISTRY_HOME/app. Storage is H2 in a file under $REGISTRY_HOME/data, so subjects survive a restart.
# HTTP on $REGISTRY_PORT, HTTPS with the dev CA's server certificate (lib/tls.sh) on port+1.

REGISTRY_VERSION="2.6.13.Final"
REGISTRY_ARTIFACT="io.apicurio:apicurio-registry-app:$REGISTRY_VERSION:tar.gz:all"
REGISTRY_PORT="${CDC_RELAY_DEV_REGISTRY_PORT:-18081}"
REGISTRY_TLS_PORT="${CDC_RELAY_DEV_REGISTRY_TLS_PORT:-$((REGISTRY_PORT + 1))}"
REGISTRY_HOME="$DEV_DIR/registry"
REGISTRY_APP="$REGISTRY_HOME/app"
REGISTRY_JAR="$REGISTRY_APP/apicurio-registry-app-$REGISTRY_VERSION-runner.jar"
REGISTRY_DATA="$REGISTRY_HOME/data"
REGISTRY_LOG="$REGISTRY_HOME/registry.log"
REGISTRY_PID_FILE="$REGISTRY_HOME/registry.pid"
REGISTRY_API="/apis/ccompat/v7"
REGISTRY_URL="http://127.0.0.1:$REGISTRY_PORT$REGISTRY_API"
REGISTRY_TLS_URL="https://127.0.0.1:$REGISTRY_TLS_PORT$REGISTRY_API"

# registry_pid prints the pid of our registry JVM if it is alive (a stale pid file is ignored).
registry_pid() { jvm_pid "$REGISTRY_PID_FILE" "-jar $REGISTRY_JAR"; }

# registry_ping: the Confluent-compatible API answered GET /subjects with 200 within 5 s (an open
# port is not enough: Quarkus listens before the storage is ready). Plain bash, no curl needed.
registry_ping() {
	timeout 5 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
		printf "GET %s/subjects HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" "$1" >&3
		IFS= read -r status <&3 || exit 1
		[[ "$status" == "HTTP/1."[01]" 200"* ]]' "$REGISTRY_PORT" "$REGISTRY_API" 2>/dev/null
}

# registry_app fetches (Maven, cached in ~/.m2) and unpacks the application unless it is in place.
registry_app() {
	local stamp="$REGISTRY_APP/.artifact"
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$REGISTRY_ARTIFACT" && -f "$REGISTRY_JAR" ]]; then return 0; fi
	command -v mvn >/dev/null || die "mvn not found (needed to fetch the schema registry $REGISTRY_ARTIFACT)"
	command -v java >/dev/null || die "java not found (needed to run the schema registry; Java 17 or newer)"
	local tmp="$REGISTRY_HOME/app.tmp" mvnlog="$REGISTRY_HOME/mvn.log"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	log "fetching the schema registry $REGISTRY_ARTIFACT with Maven (first run on a machine downloads ~140 MB into ~/.m2; log $mvnlog)"
	if ! mvn -B -ntp org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy -Dartifact="$REGISTRY_ARTIFACT" \
		-DoutputDirectory="$tmp" -Dmdep.useBaseVersion=true >"$mvnlog" 2>&1; then
		grep -E '^\[(ERROR|WARNING)\]' "$mvnlog" | tail -20 >&2 || true
		die "mvn dependency:copy of $REGISTRY_ARTIFACT failed: see $mvnlog"
	fi
	tar -xzf "$tmp"/apicurio-registry-app-*-all.tar.gz -C "$tmp" || die "unpacking the schema registry failed ($tmp)"
	rm -f "$tmp"/apicurio-registry-app-*-all.tar.gz
	[[ -f "$tmp/$(basename "$REGISTRY_JAR")" ]] || die "the registry archive has no $(basename "$REGISTRY_JAR") (see $tmp)"
	echo "$REGISTRY_ARTIFACT" >"$tmp/.artifact"
	rm -rf "$REGISTRY_APP"
	mv "$tmp" "$REGISTRY_APP"
	log "schema registry ready to run: $(du -sh "$REGISTRY_APP" | cut -f1) in $REGISTRY_APP"
}

# registry_up starts the registry unless it already answers, and waits until its API serves requests.
registry_up() {
	local pid
	mkdir -p "$REGISTRY_HOME"
	if pid="$(registry_pid)"; then
		resume_paused "schema registry" "$pid"
		registry_wait "$pid" 0
		log "schema registry already running on $REGISTRY_URL (pid $pid)"
		return 0
	fi
	if port_busy "$REGISTRY_PORT" || port_busy "$REGISTRY_TLS_PORT"; then
		die "port $REGISTRY_PORT or $REGISTRY_TLS_PORT is taken by another process (not our registry, no live pid in $REGISTRY_PID_FILE)"
	fi
	registry_app
	tls_certs
	mkdir -p "$REGISTRY_DATA"
	local offset
	touch "$REGISTRY_LOG"
	offset=$(($(stat -c %s "$REGISTRY_LOG") + 1))
	log "starting the schema registry (Apicurio $REGISTRY_VERSION) on $REGISTRY_URL and $REGISTRY_TLS_URL, log $REGISTRY_LOG"
	(
		cd "$REGISTRY_HOME" || exit 1
		# Quarkus reads its settings from the environment. setsid + nohup: the JVM outlives this
		# script and its terminal; exec: $! is the JVM.
		export QUARKUS_HTTP_HOST=127.0.0.1 QUARKUS_HTTP_PORT="$REGISTRY_PORT" QUARKUS_HTTP_SSL_PORT="$REGISTRY_TLS_PORT" \
			QUARKUS_HTTP_SSL_CERTIFICATE_FILES="$TLS_DIR/server.crt" QUARKUS_HTTP_SSL_CERTIFICATE_KEY_FILES="$TLS_DIR/server.key" \
			REGISTRY_DATASOURCE_URL="jdbc:h2:file:$REGISTRY_DATA/registry;DB_CLOSE_ON_EXIT=FALSE"
		exec setsid nohup java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
			-jar "$REGISTRY_JAR" >>"$REGISTRY_LOG" 2>&1 </dev/null 9>&-
	) &
	pid=$!
	echo "$pid" >"$REGISTRY_PID_FILE"
	registry_wait "$pid" "$offset"
	log "schema registry ready (pid $pid)"
}

# registry_wait PID LOG_OFFSET: until the API answers; dies with the log's tail if the JVM exits or
# $DEV_TIMEOUT passes.
registry_wait() { await_jvm "the schema registry" "$1" "$REGISTRY_PID_FILE" "$REGISTRY_LOG" "$2" registry_ping; }

# registry_stop [TERM|KILL]: stop the registry and wait until the JVM has exited and its ports are free.
registry_stop() { stop_jvm "the schema registry" registry_pid "$REGISTRY_PID_FILE" "${1:-TERM}" 30 "$REGISTRY_PORT" "$REGISTRY_TLS_PORT"; }

# print_registry_exports prints the registry's settings for the tests (testkit/testenv/registry.go).
print_registry_exports() {
	printf "export CDC_RELAY_REGISTRY_URL='%s'\n" "$REGISTRY_URL"
	printf "export CDC_RELAY_REGISTRY_TLS_URL='%s'\n" "$REGISTRY_TLS_URL"
	printf "export CDC_RELAY_REGISTRY_TLS_CA='%s'\n" "$TLS_DIR/ca.crt"
	# The registry's jars hold Apache Avro's Java library: the tests read values back with it.
	printf "export CDC_RELAY_REGISTRY_JARS='%s'\n" "$REGISTRY_APP/lib"
}
