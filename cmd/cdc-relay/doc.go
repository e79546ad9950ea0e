// Command cdc-relay publishes transactional-outbox rows from PostgreSQL to Kafka by reading
// the write-ahead log through a logical replication slot (pgoutput).
//
//	cdc-relay slot create|status|drop --pg-url URL --slot NAME [--publication NAME] [--table public.outbox]
//	cdc-relay run         --pg-url URL --brokers HOST:PORT[,..] --slot NAME --publication NAME
//	cdc-relay poll        --pg-url URL --brokers HOST:PORT[,..] [--table public.outbox] [--interval 100ms] [--batch 100]
//	cdc-relay outbox prune --pg-url URL --older-than 168h [--mode run|poll] [--slot NAME]
//	cdc-relay cutover     --pg-url URL --brokers HOST:PORT[,..] --slot NAME --publication NAME [--table public.outbox]
//	cdc-relay outbox mark-published --pg-url URL --slot NAME --publication NAME [--table public.outbox]
//	cdc-relay dead-letters list|show ID|replay|discard --pg-url URL [--from topic|table] [--brokers HOST:PORT[,..]]
//
// # Flags and exit codes
//
// `cdc-relay --help` prints the usage, `cdc-relay COMMAND --help` a command's flags (all in
// docs/configuration.md). Every flag has an environment twin CDC_RELAY_<FLAG> (dashes become
// underscores); the command line wins. Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad
// usage or configuration. CDC_RELAY_CPU_PROFILE=FILE writes a CPU profile at exit.
//
// # Contexts and goroutines
//
// main's context ends on SIGINT or SIGTERM and every command takes it: cancelling it is the clean
// stop (run and poll flush Kafka and confirm within --shutdown-timeout). The watcher beside run or
// poll and the ops server (metrics.Serve) run on goroutines the command's stop function cancels
// and waits for before the command returns.
package main

//go:generate go test -run TestConfigurationReferenceIsCurrent -update
