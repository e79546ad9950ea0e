package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// The slot CLI: create twice is a clear no-op, status reads the slot (text and JSON), status of a
// missing slot says so with exit 2, drop removes the slot and, when asked, the publication.
func TestSlotCLILifecycle(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t)
	bin := testenv.Binary(t, true)
	env := []string{"CDC_RELAY_SLOT=" + f.Slot}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return testenv.Run(t, 30*time.Second, bin, env, args...)
	}

	out, errOut, code := run("slot", "create", "--publication", f.Publication, "--table", f.Table)
	if code != 0 || !strings.Contains(out, "created publication "+f.Publication) || !strings.Contains(out, "created slot "+f.Slot) {
		t.Fatalf("first create: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = run("slot", "create", "--publication", f.Publication, "--table", f.Table)
	if code != 0 || !strings.Contains(out, "already exists") || strings.Contains(out, "created") {
		t.Fatalf("second create should be a reported no-op: exit %d\n%s%s", code, out, errOut)
	}
	var n int
	_ = f.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND plugin = 'pgoutput'`, f.Slot).Scan(&n)
	if n != 1 {
		t.Fatalf("%d pgoutput slots named %s", n, f.Slot)
	}
	var pubInsert, pubUpdate bool
	_ = f.Pool.QueryRow(context.Background(), `SELECT pubinsert, pubupdate FROM pg_publication WHERE pubname = $1`, f.Publication).Scan(&pubInsert, &pubUpdate)
	if !pubInsert || pubUpdate {
		t.Errorf("publication insert=%v update=%v, want insert only", pubInsert, pubUpdate)
	}

	out, errOut, code = run("slot", "status", "--publication", f.Publication)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"confirmed_flush_lsn", "restart_lsn", "wal_status", "reserved", "safe_wal_size", "lag", "retained_wal", f.Table} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = run("slot", "status", "--json")
	var st struct {
		Slot      string  `json:"slot"`
		Confirmed string  `json:"confirmed_flush_lsn"`
		WALStatus string  `json:"wal_status"`
		Active    bool    `json:"active"`
		Lag       *int64  `json:"lag_bytes"`
		Retained  *int64  `json:"retained_wal_bytes"`
		Safe      *int64  `json:"safe_wal_size"`
		PID       float64 `json:"active_pid"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("status --json: exit %d, %v:\n%s", code, err, out)
	}
	if _, err := pglogrepl.ParseLSN(st.Confirmed); err != nil || st.Slot != f.Slot || st.WALStatus != "reserved" || st.Lag == nil || st.Retained == nil || st.Active {
		t.Errorf("status --json: %+v", st)
	}

	_, errOut, code = testenv.Run(t, 30*time.Second, bin, nil, "slot", "status", "--slot", f.Slot+"_missing")
	if code != 2 || !strings.Contains(errOut, f.Slot+"_missing") || !strings.Contains(errOut, "does not exist") {
		t.Errorf("status of a missing slot: exit %d, stderr %q; want exit 2 naming the slot", code, errOut)
	}

	out, errOut, code = run("slot", "drop", "--publication", f.Publication)
	if code != 0 {
		t.Fatalf("drop: exit %d\n%s%s", code, out, errOut)
	}
	_ = f.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, f.Slot).Scan(&n)
	var pubs int
	_ = f.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_publication WHERE pubname = $1`, f.Publication).Scan(&pubs)
	if n != 0 || pubs != 0 {
		t.Errorf("after drop: %d slots, %d publications", n, pubs)
	}
	_, errOut, code = run("slot", "drop")
	if code == 0 || !strings.Contains(errOut, f.Slot) {
		t.Errorf("drop of a missing slot: exit %d, stderr %q", code, errOut)
	}
}

// SIGTERM: stop reading, flush Kafka, send the final status, exit 0. With a one-hour status
// interval, only the final status can have confirmed the last transaction.
func TestSIGTERMFlushesAndConfirms(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	p := e.Start(t, nil, "--status-interval", "1h", "--confirm-delay", "-1s")
	cons := testenv.Consume(t, e.F.Topic)
	var all []int64
	for i := 0; i < 20; i++ {
		all = append(all, e.F.Insert(t, false, testenv.Row{Key: "k", Payload: `{"n": 1}`}, testenv.Row{Key: "j", Payload: `{"n": 2}`})...)
	}
	recs := cons.WaitFor(t, 60*time.Second, "every row", hasAll(all))
	var lastCommit pglogrepl.LSN
	for _, r := range recs {
		lastCommit = max(lastCommit, lsnOf(t, r))
	}
	if c := e.F.SlotConfirmed(t); c > lastCommit {
		t.Fatalf("slot already confirmed %s before shutdown; the test cannot tell the final status apart", c)
	}
	if code := p.Stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, p.Output())
	}
	if c := e.F.SlotConfirmed(t); c <= lastCommit {
		t.Errorf("after shutdown the slot confirmed %s, not past the last commit %s: the final status was not sent", c, lastCommit)
	}
}

// A SIGTERM while `run`'s preflight waits for PostgreSQL to answer is a clean stop, as one while
// it waits for PostgreSQL to come up is: the relay exited 1 ("read role and settings: context
// canceled", or the publication lookup's), which a supervisor stopping it counts as a failure
// (found by TestSwitchingPublishersAsProperties, whose last relay was stopped as it started).
// The preflight is held here by a lock on pg_publication, on a server of the test's own.
func TestStopDuringThePreflightExitsZero(t *testing.T) {
	e := testenv.NewPrivateRelayEnv(t, false)
	tx, err := e.F.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `LOCK TABLE pg_catalog.pg_publication IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	p := e.Start(t, nil, "--metrics-addr", "")
	testenv.Eventually(t, 60*time.Second, "the relay's preflight to wait for the lock", func() bool {
		var n int
		err := e.F.Pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n > 0
	})
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after a SIGTERM during the preflight, want 0:\n%s", code, p.Output())
	}
	if !strings.Contains(p.Output(), "stopped during startup, before streaming: nothing was published or confirmed") {
		t.Errorf("no line saying the relay stopped before streaming:\n%s", p.Output())
	}
}
