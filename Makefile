# cdc-relay: the two commands a new user needs are `make demo` and `make test`.
# Both start the local Postgres and Kafka (scripts/dev-up.sh) if they are not running.

COUNT ?= 100

.PHONY: demo test build up down vet

## demo: run the main job end to end on local services: COUNT orders through the relay to Kafka.
demo:
	COUNT=$(COUNT) scripts/demo.sh

## test: the full suite (unit + integration against real Postgres and Kafka) with -race.
test:
	scripts/test.sh

## build: the binaries into bin/.
build:
	go build -o bin/ ./cmd/...

## up / down: start or stop the local services.
up:
	@scripts/dev-up.sh
down:
	scripts/dev-down.sh

vet:
	go vet ./...
