#!/usr/bin/env bash
# Print the directory of the Kafka Connect worker and the Debezium PostgreSQL plugin that the
# benchmark's `debezium` publisher runs, fetching them with Maven first if needed. Progress goes
# to stderr; stdout is only the directory, which holds:
#
#   lib/                          the Connect 4.3.1 worker's classpath (scripts/debezium/worker-pom.xml)
#   plugins/debezium-postgres/    Debezium 3.6.1.Final's connector and EventRouter, without its own
#                                 Kafka and SLF4J jars (scripts/debezium/plugin-pom.xml): plugin.path
#
#   scripts/debezium-jars.sh      # e.g. /path/to/repo/.dev/debezium
#
# Exit 3 when java or mvn is missing (the benchmark then leaves Debezium out and says so), 1 when
# Maven fails. The jars are cached in ~/.m2: only the first run on a machine downloads (~50 MB).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

home="$DEV_DIR/debezium"
worker_pom="$REPO_ROOT/scripts/debezium/worker-pom.xml"
plugin_pom="$REPO_ROOT/scripts/debezium/plugin-pom.xml"
for tool in java mvn; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		log "$tool not found: Debezium (Kafka Connect) needs Java 17 and Maven to fetch its jars (apt-get install openjdk-17-jre-headless maven)"
		exit 3
	fi
done

want="$(cat "$worker_pom" "$plugin_pom" | sha256sum | cut -d' ' -f1)"
stamp="$home/.poms.sha256"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "$home"
	exit 0
fi
log "fetching Kafka Connect 4.3.1 and Debezium 3.6.1.Final with Maven into $home (first run on a machine downloads ~50 MB into ~/.m2)"
tmp="$home.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
mvnlog="$home.mvn.log"
: >"$mvnlog"
for step in "$worker_pom -Ddebezium.lib.dir=$tmp/lib" "$plugin_pom -Ddebezium.plugin.dir=$tmp/plugins/debezium-postgres"; do
	# shellcheck disable=SC2086 # the step is a pom and a -D option
	set -- $step
	log "mvn dependency:copy-dependencies -f $(basename "$1") (log $mvnlog)"
	# Maven's output (a line per downloaded file on a fresh machine) goes to the log alone.
	if ! mvn -B -ntp -f "$@" dependency:copy-dependencies >>"$mvnlog" 2>&1; then
		grep -E '^\[(ERROR|WARNING)\]' "$mvnlog" | tail -20 >&2 || true
		die "mvn dependency:copy-dependencies failed: see $mvnlog (run: mvn -B -f $* dependency:copy-dependencies)"
	fi
done
ls "$tmp"/lib/connect-runtime-*.jar "$tmp"/plugins/debezium-postgres/debezium-connector-postgres-*.jar >/dev/null 2>&1 ||
	die "Maven finished but the Connect runtime or the Debezium connector jar is missing under $tmp"
echo "$want" >"$tmp/.poms.sha256"
rm -rf "$home"
mv "$tmp" "$home"
log "Debezium ready: $(find "$home" -name '*.jar' | wc -l) jars, $(du -sh "$home" | cut -f1)"
echo "$home"
