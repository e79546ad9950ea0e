#!/usr/bin/env bash
# The full test suite: starts Postgres and Kafka if they are not running, then runs every
# unit and integration test with the race detector. Integration tests fail (never skip)
# without the services, so a green run means they ran.
#
# Two pairs of services: the shared pair (scripts/dev-up.sh) for everything that leaves the
# services alone, run in parallel (then the benchmark's quick run alone); and a private pair (scripts/faults-up.sh, with an ACL
# authorizer) for e2e/faults, whose tests pause, kill and restart the services, one at a time.
# Last, the PostgreSQL version matrix (scripts/test-matrix.sh): the core end-to-end tests on 14, 16,
# 17 and 18, each on a server of that version it starts and stops, with the shared Kafka. 15 is not
# repeated there: the first stage ran every test on it. CDC_RELAY_MATRIX_VERSIONS overrides the list.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Two modules: the relay (.) and its tools (tools/: benchmark, chaos soak, demo services).
faults='/e2e/faults$'
failover='/e2e/failover$'
go vet ./...
go vet -C tools ./...
# The simulation on virtual time, 10,000 schedules without -race (the -race run below runs its
# default, fewer: -race costs ~10x per schedule); no services, and alone, so it takes both cores.
go test -count=1 -timeout 15m -run 'SimVirtual$' ./relay -vsim.n 10000
(
	eval "$(scripts/dev-up.sh)"
	mapfile -t quiet < <(go list ./... | grep -Ev "$faults|$failover")
	go test -race -count=1 -timeout 40m "${quiet[@]}"
	# The benchmark's quick run compares latencies: alone, so the other tests' load does not
	# decide which publisher looks faster.
	go test -C tools -race -count=1 -timeout 20m ./...
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
