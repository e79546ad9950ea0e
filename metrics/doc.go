// Package metrics defines what cdc-relay exposes to Prometheus and to health checks, and
// serves it over HTTP.
//
// Every process builds its own registry with NewRegistry (never the global default one), so
// tests can run several relays in one process. The parts register into it:
//
//   - Relay: the metrics of `cdc-relay run`. Counters and gauges that the relay already keeps
//     (records and bytes published, dead-lettered, in flight, confirmed LSN, replication state,
//     reconnects, the age of the oldest unacknowledged event) are read from a RelaySource when
//     Prometheus scrapes, so the hot path pays nothing for them. Only what exists at event time
//     is pushed: the commit-to-acknowledgement latency histogram and produce errors by class.
//     Those hooks are atomic adds and never allocate; their methods are no-ops on a nil *Relay,
//     so a relay built without metrics calls them unguarded.
//   - Slot: the replication slot as PostgreSQL sees it (lag, retained WAL, safe_wal_size,
//     wal_status), refreshed by SlotWatcher, and the retained-WAL warning threshold.
//     SlotWatcher is the one part that does I/O: it owns a normal (non-replication) connection
//     and runs slotstore's status query on it every interval.
//   - Poller: the metrics of `cdc-relay poll` that apply (published, errors, latency) plus the
//     pending rows and the age of the oldest pending row.
//
// Handler serves /metrics, /healthz (the process is alive) and /readyz (the caller's readiness
// function: for `run`, holding the slot and Kafka reachable). Serve binds it and shuts it down
// with its context. Nothing here logs connection strings: the slot watcher reports connection
// failures with pgconn's errors, which never contain the password.
//
// Contexts and goroutines: SlotWatcher.Run, PendingWatcher.Run and Serve block until ctx ends
// and run on the caller's goroutine (Serve starts the HTTP server's, and shuts it down before
// it returns); readiness functions receive the request's context, bounded by a short timeout.
// The metric hooks start nothing and take no context.
package metrics
