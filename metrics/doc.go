// Package metrics defines what cdc-relay exposes to Prometheus and to health checks, and
// serves it over HTTP.
//
// # Registries and parts
//
// Every process builds its own registry with NewRegistry (never the global default one), so
// tests can run several relays in one process. The parts register into it:
//
//   - Relay: the metrics of `cdc-relay run`. Counters and gauges that the relay already keeps
//     (records and bytes published, dead-lettered, in flight, confirmed LSN, replication state,
//     reconnects, the age of the oldest unacknowledged event) are read from a RelaySource when
//     Prometheus scrapes, so the hot path pays nothing for them. Only what exists at event time
//     is pushed: the commit-to-acknowledgement latency histogram and produce errors by class.
//     Those hooks are atomic adds, never allocate, and are no-ops on a nil *Relay.
//   - Slot: the slot as PostgreSQL sees it (lag, retained WAL, safe_wal_size, wal_status) and
//     the retained-WAL warning threshold: a slotstore.Observer, which slotstore.Watcher updates.
//   - Poller: the metrics of `cdc-relay poll` that apply (published, errors, latency) plus the
//     pending rows and the age of the oldest pending row (set by poller.WatchPending).
//
// Nothing here queries PostgreSQL or Kafka: the packages that own those connections feed it.
//
// # Serving
//
// Handler serves /metrics, /healthz (the process is alive) and /readyz (the caller's readiness
// function: for `run`, holding the slot and Kafka reachable). Serve binds it on the configured
// address and runs it in a goroutine of its own until the stop function it returns is called.
//
// Serve's goroutine is the HTTP server's, ended by that stop function; the metric hooks start
// nothing and take no context; readiness functions get the request's context, with a short timeout.
package metrics
