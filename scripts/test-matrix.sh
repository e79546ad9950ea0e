#!/usr/bin/env bash
# The PostgreSQL version matrix (make test-matrix): the core end-to-end tests of e2e/ on every major
# this project supports, one version after another. Each version's server is the one scripts/dev-up.sh
# starts with CDC_RELAY_DEV_PG_VERSION (its own port and data dir; 15 is Debian's, the others the builds
# of scripts/pg-install.sh); all versions share the one Kafka of dev-up.sh. A server this script started
# it stops when that version is done (also on failure or Ctrl-C); one that was already running (the
# default 15 of make test) it leaves running.
#
#   scripts/test-matrix.sh                                    # 14 15 16 17 18, the core tests
#   CDC_RELAY_MATRIX_VERSIONS=14,18 scripts/test-matrix.sh    # some versions (commas or spaces)
#   CDC_RELAY_MATRIX_TESTS="TestSlotCLILifecycle" scripts/test-matrix.sh
#
# Every version runs every test even after a failure; the exit status is 1 if any failed, and the last
# lines are a table of versions, results and wall times. Full logs: .dev/matrix/pgMAJOR.log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# A test whose services are missing fails here, never skips (testkit/testenv's Require).
export CDC_RELAY_REQUIRE_SERVICES=1
source scripts/lib.sh

# The core tests: delivery in commit order per key, kill -9 after Kafka's ack (replay, no loss), bad rows
# to the dead-letter topic, schema changes mid-stream, the slot CLI, the idle slot following other
# tables' WAL, a 1,000,000-row transaction in bounded memory, and a partitioned outbox (published
# through its root, partitions attached and dropped while streaming, poll and cutover on it).
default_tests=(
	TestDeliversEveryCommittedRowInCommitOrderPerKey
	TestKill9AfterKafkaAckReplaysWithoutLoss
	TestBadRowsAreDeadLetteredAndTheStreamGoesOn
	TestSchemaChangesMidStream
	TestSlotCLILifecycle
	TestQuietOutboxSlotFollowsOtherTablesWAL
	TestMillionRowTransactionInBoundedMemory
	TestSlotCreatePublishesAPartitionedOutboxUnderItsOwnName
	TestRunRefusesAPartitionedOutboxPublishedUnderItsPartitionsNames
	TestPartitionsAttachedDetachedAndDroppedWhileStreamingLoseNothing
	TestPollAndCutoverOnAPartitionedOutbox
)
# On 15 and later (row-filtered publications) also: an outbox split over shards, each key in exactly
# one shard, a shard's relay killed while the others go on (14 refuses shards: a test of e2e/ pins that).
row_filter_tests=(
	TestSlotCLIShards
	TestShardRelaysSurviveKill9OfOneAndPublishEachKeyThroughItsShard
)
[[ -n "${CDC_RELAY_MATRIX_TESTS:-}" ]] && row_filter_tests=()
# Both lists take spaces or commas.
v="${CDC_RELAY_MATRIX_VERSIONS:-${PG_MAJORS[*]}}"
read -ra versions <<<"${v//,/ }"
v="${CDC_RELAY_MATRIX_TESTS:-${default_tests[*]}}"
read -ra tests <<<"${v//,/ }"
((${#versions[@]})) || die "CDC_RELAY_MATRIX_VERSIONS is empty: name some of ${PG_MAJORS[*]}"
((${#tests[@]})) || die "CDC_RELAY_MATRIX_TESTS is empty: name some tests of e2e/"
for v in "${versions[@]}"; do
	[[ " ${PG_MAJORS[*]} " == *" $v "* ]] || die "CDC_RELAY_MATRIX_VERSIONS: $v is not a PostgreSQL major this project runs: use some of ${PG_MAJORS[*]}"
done

logs="$DEV_DIR/matrix"
mkdir -p "$logs"
# The server of the version being tested, when this script started it: stopped on the way out.
started=""
stop_started() {
	if [[ -n "$started" ]]; then
		CDC_RELAY_DEV_PG_VERSION="$started" scripts/dev-down.sh pg || true
		started=""
	fi
}
tmp="$(mktemp -d)"
trap 'stop_started; rm -rf "$tmp"' EXIT
bin="$tmp/e2e.test"
log "building the e2e tests (-race)"
go test -race -c -o "$bin" ./e2e
# A renamed or deleted test must not silently drop out of the matrix.
listed="$(cd e2e && "$bin" -test.list '.*')"
for t in "${tests[@]}" "${row_filter_tests[@]}"; do
	if ! grep -qx -- "$t" <<<"$listed"; then
		[[ -n "${CDC_RELAY_MATRIX_TESTS:-}" ]] && die "CDC_RELAY_MATRIX_TESTS names $t, which is not a test in e2e/: name tests that go test -list . ./e2e lists"
		die "the matrix names $t, which is not a test in e2e/ (renamed?): fix the list in $0"
	fi
done
pattern() {
	local IFS='|'
	echo "^($*)\$"
}

summary=() failed=() total_start=$SECONDS
for v in "${versions[@]}"; do
	pg_select_version "$v"
	resolve_pg_bin
	if pg_running; then log "PostgreSQL $v already runs on port $PG_PORT: testing it and leaving it running"; else started="$v"; fi
	start=$SECONDS
	exports="$(CDC_RELAY_DEV_PG_VERSION="$v" scripts/dev-up.sh)"
	server="$("$PG_BIN/postgres" --version | grep -oE '[0-9]+\.[0-9]+' | head -n 1)"
	run_tests=("${tests[@]}")
	((v >= 15)) && run_tests+=("${row_filter_tests[@]}")
	run="$(pattern "${run_tests[@]}")"
	log "PostgreSQL $v ($server): ${#run_tests[@]} tests, log $logs/pg$v.log"
	rc=0
	(
		eval "$exports"
		cd e2e
		"$bin" -test.count=1 -test.v -test.timeout 20m -test.run "$run"
	) >"$logs/pg$v.log" 2>&1 || rc=$?
	grep -E '^(--- |FAIL|ok|PASS)' "$logs/pg$v.log" | sed "s/^/[pg$v] /" >&2 || true
	if ((rc != 0)); then
		failed+=("$v")
		tail -n 60 "$logs/pg$v.log" | sed "s/^/[pg$v] /" >&2
	fi
	stop_started
	summary+=("$(printf '%-6s %-8s %-6s %4ds' "$v" "$server" "$( ((rc == 0)) && echo ok || echo FAIL)" $((SECONDS - start)))")
done

printf '\nPostgreSQL version matrix: %d tests per version (%d more on 15 and later)\n%-6s %-8s %-6s %s\n' "${#tests[@]}" "${#row_filter_tests[@]}" major server result time
printf '%s\n' "${summary[@]}"
printf 'total %ds\n' $((SECONDS - total_start))
if ((${#failed[@]})); then
	die "the matrix failed on PostgreSQL ${failed[*]}: see $logs/pgMAJOR.log"
fi
