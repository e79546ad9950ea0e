# cdc-relay: the two commands a new user needs are `make demo` and `make test`.
# Both start the local Postgres and Kafka (scripts/dev-up.sh) if they are not running.

COUNT ?= 100

.PHONY: demo test unit lint sim bench faults faults-full chaos build up down faults-down vet

## demo: run the main job end to end on local services: COUNT orders through the relay to Kafka.
demo:
	COUNT=$(COUNT) scripts/demo.sh

## test: the full suite (unit + integration against real Postgres and Kafka) with -race.
test:
	scripts/test.sh

## lint: golangci-lint (.golangci.yml) on both modules, at the version tools/go.mod pins; the
## suite's first stage (make test) runs it too.
lint:
	scripts/lint.sh

## unit: every test that needs no services (no PostgreSQL, no Kafka, nothing started), in every
## package: go test ./... with the services' variables unset, so that each test that needs them
## stops at testkit/testenv's gate (testenv.Require) with a one-line skip. CI and
## CDC_RELAY_REQUIRE_SERVICES are unset too (either turns those skips into failures).
## e2e/make_test.go runs this target with the services' addresses pointing nowhere.
UNIT_UNSET := CI CDC_RELAY_REQUIRE_SERVICES CDC_RELAY_PG_URL CDC_RELAY_BROKERS CDC_RELAY_DEV_PG_BIN \
	CDC_RELAY_TLS_PG_URL CDC_RELAY_TLS_BROKERS CDC_RELAY_MTLS_BROKERS CDC_RELAY_TLS_CA
unit:
	env $(addprefix -u ,$(UNIT_UNSET)) CDC_RELAY_IN_MAKE_UNIT=1 go test ./...

## test-matrix: the core end-to-end tests on every supported PostgreSQL, 14 to 18, one after another
## (each version's server started by scripts/dev-up.sh, one shared Kafka). PG_VERSIONS=14,18 picks
## some; MATRIX_TESTS=TestSlotCLILifecycle,... other tests of e2e/ (by name).
PG_VERSIONS ?= 14 15 16 17 18
MATRIX_TESTS ?=
.PHONY: test-matrix
test-matrix:
	CDC_RELAY_MATRIX_VERSIONS="$(PG_VERSIONS)" CDC_RELAY_MATRIX_TESTS="$(MATRIX_TESTS)" scripts/test-matrix.sh

## sim: N seeded schedules of the relay's simulation on virtual time (relay/vsim_test.go: scripted
## walsender, kfake and franz-go in a testing/synctest bubble, all in memory); no services needed.
## It prints schedules per second; a failure prints the line that replays it. sim-real: N schedules
## of the same simulation on real sockets and timers (relay/sim_test.go), ~1 s each.
## SIMFLAGS adds schedules not run by default, e.g. SIMFLAGS="-sim.partition-down -vsim.holds".
N ?= 1000
SIMFLAGS ?=
.PHONY: sim-real
sim:
	bash -o pipefail -c "go test -count=1 -timeout 0 -run 'SimVirtual$$' ./relay -vsim.n $(N) $(SIMFLAGS) -v | grep -v '^=== RUN'"
sim-real:
	go test -count=1 -timeout 0 -run 'Sim$$' ./relay -sim.n $(N) $(SIMFLAGS)

## bench: run vs poll vs Debezium (as shipped and tuned; jars via scripts/debezium-jars.sh) vs
## pg_recvlogical on the local services; prints the table and writes results/<date>/ (table.md,
## latency-cdf.svg/png, report.json). BENCH_FLAGS=--quick for a short run,
## BENCH_FLAGS="--publishers run,debezium" for a subset.
bench:
	eval "$$(scripts/dev-up.sh)" && go run -C tools ./cmd/cdc-bench --out ../results $(BENCH_FLAGS)

## bench-docs: rewrite docs/benchmark.md's tables and the README's summary from
## results/latest/report.json (cdc-bench docs). Refuses a run with phases on a busy machine;
## BENCH_DOCS_FLAGS=--allow-busy publishes it anyway, its busy phases flagged.
.PHONY: bench-docs
bench-docs:
	go run -C tools ./cmd/cdc-bench docs --report ../results/latest/report.json $(BENCH_DOCS_FLAGS) ../docs/benchmark.md ../README.md

## faults: only the fault-injection suite (e2e/faults), against the private pair of
## scripts/faults-up.sh (.dev/faults/: Postgres 15442, Kafka 19192 with an ACL authorizer).
faults:
	eval "$$(scripts/faults-up.sh)" && CDC_RELAY_REQUIRE_SERVICES=1 go test -race -count=1 -p 1 -timeout 30m ./e2e/faults

## faults-full: the broker-outage tests with the seed's full 60 s outage.
faults-full:
	eval "$$(scripts/faults-up.sh)" && CDC_RELAY_REQUIRE_SERVICES=1 CDC_RELAY_FAULTS_OUTAGE=60s go test -race -count=1 -timeout 30m -run TestBroker ./e2e/faults

## chaos: the 100,000-row soak, at-least-once then exactly-once with the same seed, side by side:
##   the slot's holder killed -9 every few seconds beside a standby, a zombie, Kafka paused,
##   Postgres restarted (CHAOS_ARGS adds cdc-chaos flags, e.g. --delivery exactly-once).
chaos:
	go build -o bin/cdc-relay ./cmd/cdc-relay
	eval "$$(scripts/faults-up.sh)" && go run -C tools ./cmd/cdc-chaos --relay-bin ../bin/cdc-relay \
		--delivery at-least-once,exactly-once $(CHAOS_ARGS)

## build: the binaries into bin/: cdc-relay, and the tools (benchmark, chaos soak, demo services).
build:
	go build -o bin/ ./cmd/...
	go build -C tools -o ../bin/ ./cmd/...

## image: the release image cdc-relay:local (FROM scratch: static binary, CA bundle, user nonroot)
## with podman, installed with apt-get if missing; CDC_RELAY_ENGINE=docker builds it with Docker.
.PHONY: image
image:
	scripts/image.sh

## up / down: start or stop the local services. down stops everything make test starts: the dev
## pair of scripts/dev-up.sh (make test, make demo), the schema registry (scripts/registry-up.sh)
## and the private pair of scripts/faults-up.sh (make faults).
up:
	@scripts/dev-up.sh
down:
	scripts/registry-down.sh
	scripts/dev-down.sh
	scripts/faults-down.sh
faults-down:
	scripts/faults-down.sh

vet:
	go vet ./...
	go vet -C tools ./...

## The seed's demo (docs/operations.md, "The seed demo"): one target per step, on the local services (each
## step starts them if needed, as demo does), all in scripts/seed-demo.sh; every step ends by itself.
##   seed-demo             all the steps in order, with checks; exit 1 if a count is off
##   db-init               a fresh schema (orders, outbox, ...), and in cdc mode the slot and publication
##   topic-create          a fresh topic (3 partitions) and consumer group
##   run-service           COUNT orders (20), each an orders and an outbox row in one transaction
##   db-count / outbox-count / outbox-pending
##                         print a count: orders, outbox rows, outbox rows not yet published
##   chaos-kill-publisher  a publisher killed after Kafka acknowledged BATCH_SIZE (5) records,
##                         before they are marked published
##   run-publisher         the publisher, until every outbox row is published (or TIMEOUT, 2m)
##   run-consumer          the inbox consumer, until it has read the topic's end (or TIMEOUT)
##   dup-count / end-offsets
##                         unique events processed; records on the topic per partition and in total
## MODE=cdc (cdc-relay run, the default) or MODE=poll (cdc-relay poll). SEED_SCHEMA, SEED_TOPIC,
## SEED_SLOT and SEED_GROUP override the names. These variables (and COUNT, given on the command
## line) reach the script through the environment: the file's COUNT default is demo's, not the seed's.
SEED_STEPS := db-init topic-create run-service db-count outbox-count outbox-pending \
	chaos-kill-publisher run-publisher run-consumer dup-count end-offsets
.PHONY: seed-demo $(SEED_STEPS)

$(SEED_STEPS):
	@scripts/seed-demo.sh $@
seed-demo:
	@scripts/seed-demo.sh all

# Steps named together (make db-init topic-create run-service ...) run in that order, also with -j.
.NOTPARALLEL:
