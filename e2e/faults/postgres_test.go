package faults

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Postgres restarted (pg_ctl restart -m fast) while rows keep coming: the relay reconnects
// with backoff, resumes from the slot, and loses nothing; per key, first deliveries keep commit
// order.
func TestPostgresRestartReconnectsAndResumes(t *testing.T) {
	e := testenv.NewRelayEnv(t, true)
	p := e.Start(t, nil)
	w, cons := writing(t, e, 10*time.Millisecond)

	testenv.Eventually(t, 30*time.Second, "rows flowing before the restart", func() bool { return len(cons.Records()) > 50 })
	testenv.PGCtl(t, "restart")
	testenv.Eventually(t, 60*time.Second, "the relay to reconnect", func() bool {
		return strings.Contains(p.Output(), "replication connection lost: reconnecting") && strings.Count(p.Output(), "msg=streaming") >= 2
	})
	recs, dups := w.Finish(t, 50, "rows committed after the restart", 60*time.Second)
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
	t.Logf("%d rows committed across a Postgres restart, %d records, %d duplicates", len(w.Committed()), len(recs), dups)
}

// The walsender terminated (pg_terminate_backend): the relay reconnects and loses nothing.
func TestWalsenderTerminatedReconnects(t *testing.T) {
	e := testenv.NewRelayEnv(t, true)
	p := e.Start(t, nil)
	w, cons := writing(t, e, 10*time.Millisecond)

	for i := 0; i < 3; i++ {
		have := len(cons.Records())
		testenv.Eventually(t, 30*time.Second, "rows flowing", func() bool { return len(cons.Records()) > have+30 })
		var pid int32
		testenv.Eventually(t, 30*time.Second, "the slot to be active", func() bool {
			err := e.F.Pool.QueryRow(context.Background(), `SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1`, e.F.Slot).Scan(&pid)
			return err == nil && pid != 0
		})
		var ok bool
		if err := e.F.Pool.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("pg_terminate_backend(%d): %v %v", pid, ok, err)
		}
		testenv.Eventually(t, 30*time.Second, "the relay to stream again", func() bool {
			return strings.Count(p.Output(), "msg=streaming") >= i+2
		})
	}
	_, dups := w.Finish(t, 0, "", 60*time.Second)
	if n := strings.Count(p.Output(), "replication connection lost: reconnecting"); n < 3 {
		t.Errorf("%d reconnects logged, want 3", n)
	}
	t.Logf("%d rows across 3 walsender kills, %d duplicates", len(w.Committed()), dups)
}

// The slot dropped under a running relay (its walsender terminated, the slot dropped before
// the relay reconnects): the relay stops with exit 1 and an error that names the slot, says it
// does not exist and what to run; it does not retry forever.
func TestSlotDroppedStopsWithAClearError(t *testing.T) {
	e := testenv.NewRelayEnv(t, true)
	p := e.Start(t, nil)
	testenv.Eventually(t, 30*time.Second, "the relay to stream", func() bool { return strings.Contains(p.Output(), "msg=streaming") })
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, "the slot dropped", func() bool {
		_, _ = e.F.Pool.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, e.F.Slot)
		_, err := e.F.Pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, e.F.Slot)
		return err == nil
	})
	dropped := time.Now()
	code, _ := p.Wait(t, 30*time.Second)
	took := time.Since(dropped)
	out := p.Output()
	last := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{`slot "` + e.F.Slot + `"`, "does not exist", "was dropped while this relay used it",
		"cdc-relay slot create --slot " + e.F.Slot, "cdc-relay poll"} {
		if !strings.Contains(last, want) {
			t.Errorf("final message %q lacks %q", last, want)
		}
	}
	t.Logf("stopped %s after the drop: %s", took.Round(time.Millisecond), strings.TrimSpace(last))
}

// The slot invalidated by max_slot_wal_keep_size while the relay was stopped (on a throwaway
// server of the test's own: the setting is server-wide): `slot status` shows wal_status lost
// and what to do, and `run` stops at once with exit 1 and an error that names the slot, says
// what happened and how to recover. Invalidation happens at checkpoint time; CHECKPOINT forces it.
func TestSlotInvalidatedStopsWithAClearError(t *testing.T) {
	pgURL := testenv.TempPostgres(t, "wal_level = logical", "max_slot_wal_keep_size = 1MB", "max_wal_size = 64MB", "min_wal_size = 32MB")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := testenv.Name(t)
	table := "public." + name
	if _, err := conn.Exec(ctx, testenv.OutboxDDL(table)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE filler (b text)`); err != nil {
		t.Fatal(err)
	}
	topic := name + ".events"
	testenv.CreateTopic(t, topic, 1)
	testenv.CreateTopic(t, name+".dlq", 1)
	bin := testenv.Binary(t, true)
	env := []string{"CDC_RELAY_PG_URL=" + pgURL, "CDC_RELAY_SLOT=" + name, "CDC_RELAY_PUBLICATION=" + name, "CDC_RELAY_DLQ_TOPIC=" + name + ".dlq"}
	if out, errOut, code := testenv.Run(t, 30*time.Second, bin, env, "slot", "create", "--table", table); code != 0 {
		t.Fatalf("slot create: exit %d\n%s%s", code, out, errOut)
	}
	// The relay runs, publishes, and is stopped.
	cons := testenv.Consume(t, topic)
	p := testenv.Start(t, bin, env, "run", "--status-interval", "1s", "--metrics-addr", "")
	if _, err := conn.Exec(ctx, `INSERT INTO `+table+` (aggregate_id, topic, payload) VALUES ('k', $1, '{}')`, topic); err != nil {
		t.Fatal(err)
	}
	cons.WaitFor(t, 30*time.Second, "the first row", func(r []*kgo.Record) bool { return len(r) == 1 })
	if code := p.Stop(t); code != 0 {
		t.Fatalf("relay exit %d:\n%s", code, p.Output())
	}

	// Rows written while it is stopped, then WAL until the checkpoint invalidates the slot.
	if _, err := conn.Exec(ctx, `INSERT INTO `+table+` (aggregate_id, topic, payload) VALUES ('k', $1, '{}')`, topic); err != nil {
		t.Fatal(err)
	}
	var status string
	testenv.Eventually(t, 60*time.Second, "the slot to be invalidated", func() bool {
		for _, q := range []string{`INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 2000)`, `SELECT pg_switch_wal()`, `CHECKPOINT`} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		_ = conn.QueryRow(ctx, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&status)
		return status == "lost"
	})

	out, errOut, code := testenv.Run(t, 30*time.Second, bin, env, "slot", "status")
	if code != 0 || !strings.Contains(out, "wal_status") || !strings.Contains(out, "lost") || !strings.Contains(out, "Drop and re-create it") {
		t.Errorf("slot status: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = testenv.Run(t, 30*time.Second, bin, env, "slot", "status", "--json")
	var st struct {
		WALStatus string `json:"wal_status"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.WALStatus != "lost" {
		t.Errorf("slot status --json: wal_status %q (%v)\n%s", st.WALStatus, err, out)
	}

	began := time.Now()
	_, errOut, code = testenv.Run(t, 30*time.Second, bin, env, "run", "--metrics-addr", "")
	took := time.Since(began)
	if code != 1 || took > 10*time.Second {
		t.Errorf("run on a lost slot: exit %d after %s, want 1 within seconds", code, took)
	}
	for _, want := range []string{`slot "` + name + `"`, "invalidated", "max_slot_wal_keep_size", "cdc-relay slot drop --slot " + name, "cdc-relay slot create --slot " + name, "cdc-relay poll"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("run's error lacks %q:\n%s", want, errOut)
		}
	}
	t.Logf("run on the lost slot: exit %d after %s: %s", code, took.Round(time.Millisecond), strings.TrimSpace(errOut))
}
