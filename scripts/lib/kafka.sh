# shellcheck shell=bash
# Kafka: the broker's jars (Maven), its KRaft settings (plaintext, SASL_SSL and SSL listeners), start,
# readiness (kafka_ping, a franz-go program built into .dev/bin), stop and the SCRAM credentials.

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
KAFKA_SASL_PORT="${CDC_RELAY_DEV_KAFKA_SASL_PORT:-$((KAFKA_PORT + 2))}"
KAFKA_SSL_PORT="${CDC_RELAY_DEV_KAFKA_SSL_PORT:-$((KAFKA_PORT + 3))}"
KAFKA_SCRAM_USER="cdc_relay"

# kafka_pid prints the pid of our broker JVM if it is alive (a stale pid file is ignored).
kafka_pid() { jvm_pid "$KAFKA_PID_FILE" "kafka.Kafka $KAFKA_CONF"; }

# kafka_ping HOST PORT: the broker answered one ApiVersions request (franz-go's Ping, within 5 s). The
# broker only serves requests once started. The check is a Go program of its own (scripts/kafka/ping),
# built by kafka_ping_build: no JVM, and no Kafka protocol encoded by hand.
KAFKA_PING="$REPO_ROOT/.dev/bin/kafka-ping"
KAFKA_PING_SRC="$REPO_ROOT/scripts/kafka/ping"
kafka_ping() { "$KAFKA_PING" -timeout 5s "$1:$2" 2>/dev/null; }

# kafka_ping_build builds $KAFKA_PING unless it is newer than its source and go.sum (one build per
# checkout: the faults pair shares it). Written under a temporary name and renamed, so that a dev-up of
# the faults pair building at the same time never runs a half-written file.
kafka_ping_build() {
	if [[ -x "$KAFKA_PING" && "$KAFKA_PING" -nt "$KAFKA_PING_SRC/main.go" && "$KAFKA_PING" -nt "$REPO_ROOT/go.sum" ]]; then
		return 0
	fi
	command -v go >/dev/null || die "go not found (needed to build $KAFKA_PING, the Kafka readiness check)"
	mkdir -p "$(dirname "$KAFKA_PING")"
	local tmp="$KAFKA_PING.$$"
	(cd "$REPO_ROOT" && go build -o "$tmp" ./scripts/kafka/ping) >&2 || {
		rm -f "$tmp"
		die "building $KAFKA_PING from $KAFKA_PING_SRC failed (above)"
	}
	mv -f "$tmp" "$KAFKA_PING"
}

# kafka_started LOG_OFFSET: the broker logged that it started (after LOG_OFFSET: this start) and answers.
kafka_started() { tail -c +"$1" "$KAFKA_LOG" | grep -q 'Kafka Server started' && kafka_ping 127.0.0.1 "$KAFKA_PORT"; }

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
		resume_paused Kafka "$pid"
		kafka_ping_build
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
	if port_busy "$KAFKA_PORT" || port_busy "$KAFKA_CONTROLLER_PORT"; then
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
	# The readiness check builds while the JVM starts (seconds), so that it costs no time of its own.
	kafka_ping_build 9>&- &
	local build=$!
	wait "$build" || die "the Kafka readiness check could not be built (above)"

	await_jvm Kafka "$pid" "$KAFKA_PID_FILE" "$KAFKA_LOG" "$offset" kafka_started "$offset"
	log "Kafka ready (pid $pid)"
	kafka_scram_users
}

# kafka_stop [TERM|KILL]: stop the broker and wait until the JVM has exited.
kafka_stop() { stop_jvm Kafka kafka_pid "$KAFKA_PID_FILE" "${1:-TERM}" 60 "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; }

# kafka_tls_conf prints the broker settings of the SASL_SSL and SSL listeners (write_kafka_conf appends them).
kafka_tls_conf() {
	local ks_pw kafka_pw
	ks_pw="$(cat "$TLS_DIR/keystore-password")"
	kafka_pw="$(cat "$TLS_DIR/kafka-password")"
	cat <<EOF

# The secure listeners (scripts/lib/kafka.sh kafka_tls_conf): SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) on
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
# them by authenticating and repair them if needed (testkit/testenv/secure.go).
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
