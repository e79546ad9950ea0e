#!/usr/bin/env bash
# The full test suite: starts Postgres and Kafka if they are not running, then runs every
# unit and integration test with the race detector. Integration tests fail (never skip)
# without the services, so a green run means they ran.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

eval "$(scripts/dev-up.sh)"
go vet ./...
# Packages whose tests pause, kill or restart the shared services run alone, after the rest.
disruptive='/e2e/faults$'
mapfile -t quiet < <(go list ./... | grep -Ev "$disruptive")
mapfile -t loud < <(go list ./... | grep -E "$disruptive" || true)
go test -race -count=1 -timeout 40m "${quiet[@]}"
if ((${#loud[@]})); then
	go test -race -count=1 -p 1 -timeout 40m "${loud[@]}"
fi
