#!/usr/bin/env bash
# The full test suite: vet and lint (scripts/lint.sh) first; then it starts Postgres and Kafka
# if they are not running and runs every unit and integration test with the race detector.
# CDC_RELAY_REQUIRE_SERVICES=1: a test whose services are missing fails here (elsewhere it
# skips, testkit/testenv's Require), so a green run means the integration tests ran.
#
# Two pairs of services: the shared pair (scripts/dev-up.sh) for everything that leaves the
# services alone, run in parallel (then the benchmark's quick run alone); and a private pair (scripts/faults-up.sh, with an ACL
# authorizer) for e2e/faults, whose tests pause, kill and restart the services, one at a time.
# Last, the PostgreSQL version matrix (scripts/test-matrix.sh): the core end-to-end tests on 14, 16,
# 17 and 18, each on a server of that version it starts and stops, with the shared Kafka. 15 is not
# repeated there: the first stage ran every test on it. CDC_RELAY_MATRIX_VERSIONS overrides the list.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CDC_RELAY_REQUIRE_SERVICES=1

# Two modules: the relay (.) and its tools (tools/: benchmark, chaos soak, demo services).
faults='/e2e/faults$'
failover='/e2e/failover$'
go vet ./...
go vet -C tools ./...
scripts/lint.sh
# The simulation on virtual time, 10,000 schedules without -race (the -race run below runs its
# default, fewer: -race costs ~10x per schedule), then 200 seeds run twice, each giving one trace
# both times (TestSimVirtualDeterministic); no services, and alone, so it takes both cores:
# ~22 ms of CPU a schedule, ~225 CPU seconds for the 10,000: 118 s on two quiet cores (the count
# is the proof: it is not cut to fit a round figure).
go test -count=1 -timeout 15m -run 'SimVirtual$' ./relay -vsim.n 10000
go test -count=1 -timeout 5m -run 'SimVirtualDeterministic$' ./relay
(
	eval "$(scripts/dev-up.sh)"
	# The schema registry (Apicurio, from Maven Central) for schema/'s tests against a real one.
	eval "$(scripts/registry-up.sh)"
	mapfile -t quiet < <(go list ./... | grep -Ev "$faults|$failover")
	go test -race -count=1 -timeout 40m "${quiet[@]}"
	# The benchmark's quick run compares latencies: alone, so the other tests' load does not
	# decide which publisher looks faster.
	mapfile -t tools < <(go list -C tools ./... | grep -v '/helmchart$')
	go test -C tools -race -count=1 -timeout 20m "${tools[@]}"
	# The Helm chart (deploy/helm/cdc-relay): linted, rendered, decoded and tied to the binary,
	# then its rendered pods run against the services; after the benchmark, so as not to load it.
	go test -C tools -race -count=1 -timeout 10m ./helmchart
	# PostgreSQL failovers: each test starts its own primary and standby (PostgreSQL 16, 17 and 18
	# from scripts/pg-install.sh) on free ports and uses the shared Kafka; alone, since the gap
	# they measure is a latency.
	go test -race -count=1 -p 1 -timeout 15m ./e2e/failover
)
(
	eval "$(scripts/faults-up.sh)"
	go test -race -count=1 -p 1 -timeout 30m ./e2e/faults
)
CDC_RELAY_MATRIX_VERSIONS="${CDC_RELAY_MATRIX_VERSIONS:-14 16 17 18}" scripts/test-matrix.sh
