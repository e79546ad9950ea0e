package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// The relay serves Prometheus metrics that follow what it did, /healthz, and /readyz that is
// 200 only while it holds the slot; a second relay on the same slot is a standby, not ready.
func TestMetricsAndHealthFollowTheRelay(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	p := e.Start(t, nil, "--metrics-addr", "127.0.0.1:0", "--slot-status-interval", "200ms")
	addr := metricsAddr(t, p)
	if code, _ := httpGet(t, addr, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	testenv.Eventually(t, 30*time.Second, "/readyz to be 200", func() bool {
		code, _ := httpGet(t, addr, "/readyz")
		return code == http.StatusOK
	})

	cons := testenv.Consume(t, e.F.Topic)
	var all []int64
	payloadBytes := 0
	for i := 0; i < 4; i++ {
		var rows []testenv.Row
		for j := 0; j < 5; j++ {
			pl := fmt.Sprintf(`{"tx": %d, "row": %d}`, i, j)
			payloadBytes += len(pl)
			rows = append(rows, testenv.Row{Key: fmt.Sprintf("k%d", j), Payload: pl})
		}
		all = append(all, e.F.Insert(t, false, rows...)...)
	}
	cons.WaitFor(t, 60*time.Second, "every row", hasAll(all))
	lastCommit := e.F.CurrentWAL(t)

	m := metricAtLeast(t, addr, "cdc_relay_records_published_total", float64(len(all)))
	if got := m["cdc_relay_published_bytes_total"]; got < float64(payloadBytes) {
		t.Errorf("published_bytes_total %v < %d payload bytes (jsonb text may only grow)", got, payloadBytes)
	}
	if got := m["cdc_relay_commit_to_ack_seconds_count"]; got < float64(len(all)) {
		t.Errorf("commit_to_ack_seconds_count %v, want >= %d", got, len(all))
	}
	// One per transaction with its commit and send times, each at least 0 (the server's own
	// clock) and not longer than the test.
	if n, sum := m["cdc_relay_commit_to_send_seconds_count"], m["cdc_relay_commit_to_send_seconds_sum"]; n < 1 || sum < 0 || sum > n*60 {
		t.Errorf("commit_to_send_seconds: count %v, sum %v", n, sum)
	}
	if m[`cdc_relay_replication_state{state="streaming"}`] != 1 || m["cdc_relay_active"] != 1 {
		t.Errorf("state: streaming=%v active=%v, want 1 and 1", m[`cdc_relay_replication_state{state="streaming"}`], m["cdc_relay_active"])
	}
	if m[`cdc_relay_info{mode="run",version="dev"}`] != 1 {
		t.Errorf("cdc_relay_info{mode=run} missing")
	}
	for _, s := range []string{`cdc_relay_produce_errors_total{class="rejected"}`, "cdc_relay_records_dead_lettered_total", "cdc_relay_reconnects_total",
		"cdc_relay_records_parked_in_table_total", "cdc_relay_kafka_outages_total", "cdc_relay_key_order_at_risk_total"} {
		if v, ok := m[s]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", s, v, ok)
		}
	}
	// Everything acknowledged: nothing in flight, and the confirmed position passes the rows.
	testenv.Eventually(t, 30*time.Second, "the confirmed LSN to pass the last commit and nothing in flight", func() bool {
		m = scrape(t, addr)
		return m["cdc_relay_confirmed_lsn"] >= float64(lastCommit) && m["cdc_relay_records_in_flight"] == 0 &&
			m["cdc_relay_transactions_in_flight"] == 0 && m["cdc_relay_oldest_unacked_age_seconds"] == 0
	})
	// Slot-side numbers come from pg_replication_slots on a normal connection.
	testenv.Eventually(t, 30*time.Second, "slot metrics", func() bool {
		m = scrape(t, addr)
		return m["cdc_relay_slot_active"] == 1 && m[`cdc_relay_slot_wal_status{status="reserved"}`] == 1 &&
			m["cdc_relay_slot_status_last_success_timestamp_seconds"] > 0
	})
	for _, s := range []string{"cdc_relay_slot_lag_bytes", "cdc_relay_slot_retained_wal_bytes", "cdc_relay_slot_retained_wal_threshold_bytes"} {
		if _, ok := m[s]; !ok {
			t.Errorf("%s missing", s)
		}
	}
	if m["cdc_relay_slot_retained_wal_threshold_bytes"] != 1<<30 {
		t.Errorf("default threshold %v, want 1 GiB", m["cdc_relay_slot_retained_wal_threshold_bytes"])
	}

	// A second relay on the same slot waits as a standby: alive, not ready, active 0.
	s := e.Start(t, nil, "--metrics-addr", "127.0.0.1:0")
	saddr := metricsAddr(t, s)
	testenv.Eventually(t, 30*time.Second, "the second relay to report standby", func() bool {
		return scrape(t, saddr)[`cdc_relay_replication_state{state="standby"}`] == 1
	})
	code, body := httpGet(t, saddr, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "standby") {
		t.Errorf("standby /readyz: %d %q, want 503 naming standby", code, body)
	}
	if scrape(t, saddr)["cdc_relay_active"] != 0 {
		t.Errorf("standby reports active")
	}
	if code, _ := httpGet(t, saddr, "/healthz"); code != http.StatusOK {
		t.Errorf("standby /healthz: %d", code)
	}
}

// The password in --pg-url never reaches the logs, neither from the relay's connections nor
// from the slot watcher's, in text or JSON.
func TestLogsNeverContainThePassword(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	const secret = "s3cr3t-Pa55word"
	url := strings.Replace(testenv.PGURL(t), "postgres@", "postgres:"+secret+"@", 1)
	if !strings.Contains(url, secret) {
		t.Fatalf("cannot put a password into %q", testenv.PGURL(t))
	}
	// The local server trusts the connection, so the relay streams; the watcher connects too.
	p := e.Start(t, []string{"CDC_RELAY_PG_URL=" + url}, "--metrics-addr", "127.0.0.1:0", "--slot-status-interval", "100ms", "--log-format", "json", "--log-level", "debug")
	addr := metricsAddr(t, p)
	metricAtLeast(t, addr, "cdc_relay_slot_status_last_success_timestamp_seconds", 1)
	p.Stop(t)
	// A server that is not there: the connection error is logged, the password is not.
	bad := strings.Replace(url, "127.0.0.1:", "127.0.0.1:1", 1)
	_, errOut, code := testenv.Run(t, 60*time.Second, e.Bin, append(e.Env, "CDC_RELAY_PG_URL="+bad), "run", "--metrics-addr", "", "--pg-timeout", "2s")
	if code == 0 {
		t.Fatalf("run against a closed port exited 0:\n%s", errOut)
	}
	for name, out := range map[string]string{"streaming relay": p.Output(), "failed connect": errOut} {
		if strings.Contains(out, secret) {
			t.Errorf("%s: the password appears in the output:\n%s", name, out)
		}
	}
}

// `cdc-relay poll` serves the metrics that apply to it, plus the pending rows and the age of
// the oldest pending row, counted on the table.
func TestPollServesPendingMetrics(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t)
	bin := testenv.Binary(t, true)
	var all []int64
	for i := 0; i < 5; i++ {
		all = append(all, f.Insert(t, false, testenv.Row{Key: fmt.Sprintf("k%d", i), Payload: `{"n": 1}`}, testenv.Row{Key: "k", Payload: `{"n": 2}`})...)
	}
	cons := testenv.Consume(t, f.Topic)
	p := testenv.Start(t, bin, nil, "poll", "--table", f.Table, "--dlq-topic", f.DLQ, "--interval", "20ms",
		"--metrics-addr", "127.0.0.1:0", "--pending-interval", "100ms")
	addr := metricsAddr(t, p)
	cons.WaitFor(t, 60*time.Second, "every row", hasAll(all))
	m := metricAtLeast(t, addr, "cdc_relay_records_published_total", float64(len(all)))
	// The poller reports its own bytes and latency as it publishes (not only the counters).
	if m["cdc_relay_published_bytes_total"] <= 0 || m["cdc_relay_commit_to_ack_seconds_count"] < float64(len(all)) {
		t.Errorf("poll: published_bytes_total %v, commit_to_ack_seconds_count %v, want > 0 and >= %d",
			m["cdc_relay_published_bytes_total"], m["cdc_relay_commit_to_ack_seconds_count"], len(all))
	}
	if m[`cdc_relay_info{mode="poll",version="dev"}`] != 1 {
		t.Errorf("cdc_relay_info{mode=poll} missing")
	}
	testenv.Eventually(t, 30*time.Second, "no pending rows", func() bool {
		m = scrape(t, addr)
		_, ok := m["cdc_relay_outbox_oldest_pending_age_seconds"]
		return ok && m["cdc_relay_outbox_pending_rows"] == 0 && m["cdc_relay_outbox_pending_last_success_timestamp_seconds"] > 0
	})
	testenv.Eventually(t, 30*time.Second, "/readyz to be 200", func() bool {
		code, _ := httpGet(t, addr, "/readyz")
		return code == http.StatusOK
	})
	// Rows the poller cannot take (another transaction holds them) stay pending and age. The
	// row must be committed to count as pending, so the poller (every 20 ms) may publish it
	// before the lock is taken: then the lock finds it published and another row is tried.
	ctx := context.Background()
	var tx pgx.Tx
	for attempt := 1; ; attempt++ {
		var err error
		if tx, err = f.Pool.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := f.Pool.QueryRow(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload, created_at) VALUES ('late', $1, '{}', now() - interval '1 hour') RETURNING id`, f.Topic).Scan(&id); err != nil {
			t.Fatal(err)
		}
		// FOR UPDATE waits for a poller that holds the row and then re-checks published_at.
		tag, err := tx.Exec(ctx, `SELECT id FROM `+f.Table+` WHERE id = $1 AND published_at IS NULL FOR UPDATE`, id)
		if err != nil {
			t.Fatal(err)
		}
		if tag.RowsAffected() == 1 {
			break
		}
		_ = tx.Rollback(ctx)
		if attempt == 20 {
			t.Fatal("the poller published each of 20 rows before a transaction could lock it")
		}
	}
	defer func() { _ = tx.Rollback(ctx) }()
	testenv.Eventually(t, 30*time.Second, "one pending row an hour old", func() bool {
		m = scrape(t, addr)
		return m["cdc_relay_outbox_pending_rows"] == 1 && m["cdc_relay_outbox_oldest_pending_age_seconds"] >= 3600
	})
}
