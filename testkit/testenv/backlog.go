package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// InsertOneRowTxns commits n outbox rows, each in its own transaction, all with the given key and
// topic ("" means the fixture's topic) and a payload of about payloadBytes bytes of random hex.
// It runs in the server (a DO block that COMMITs after every INSERT), so tens of thousands take
// seconds, and returns the ids in commit order.
func (f *Fixture) InsertOneRowTxns(t testing.TB, n int, key, topic string, payloadBytes int) []int64 {
	t.Helper()
	if topic == "" {
		topic = f.Topic
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := f.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var before int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+f.Table).Scan(&before); err != nil {
		t.Fatal(err)
	}
	// Literals, not parameters: a DO block takes none. The names are the fixture's own.
	lit := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	pad := `NULL`
	if payloadBytes > 0 {
		pad = fmt.Sprintf(`(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, %d))`, max(1, payloadBytes/32))
	}
	do := fmt.Sprintf(`DO $do$
BEGIN
  FOR i IN 1..%d LOOP
    INSERT INTO %s (aggregate_id, topic, payload) VALUES (%s, %s, jsonb_strip_nulls(jsonb_build_object('n', i, 'pad', %s)));
    COMMIT;
  END LOOP;
END
$do$`, n, f.Table, lit(key), lit(topic), pad)
	// Commits need not wait for the disk: the rows are test data.
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), `RESET synchronous_commit`) }()
	if _, err := conn.Exec(ctx, do); err != nil {
		t.Fatalf("insert %d one-row transactions into %s: %v", n, f.Table, err)
	}
	rows, err := conn.Query(ctx, `SELECT id FROM `+f.Table+` WHERE id > $1 AND aggregate_id = $2 ORDER BY id`, before, key)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != n {
		t.Fatalf("inserted %d one-row transactions, found %d rows", n, len(ids))
	}
	return ids
}

// CPUTicks returns the CPU time a live process has used so far, user plus system, in clock
// ticks (USER_HZ, 100 a second on Linux), from /proc/PID/stat: every thread counts.
func CPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields: %q", pid, s)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return utime + stime, nil
}

var stoppedLine = regexp.MustCompile(`(?m)msg=stopped\b.*\bconfirmed=([0-9A-Fa-f]+/[0-9A-Fa-f]+)|"msg":"stopped".*"confirmed":"([0-9A-Fa-f]+/[0-9A-Fa-f]+)"`)

// StoppedConfirmed returns the position a relay's final `stopped` log line reports
// (confirmed=X), and whether there is such a line.
func StoppedConfirmed(t testing.TB, output string) (pglogrepl.LSN, bool) {
	t.Helper()
	m := stoppedLine.FindAllStringSubmatch(output, -1)
	if m == nil {
		return 0, false
	}
	last := m[len(m)-1]
	lsn, err := pglogrepl.ParseLSN(last[1] + last[2])
	if err != nil {
		t.Fatalf("stopped line: confirmed=%q: %v", last[1]+last[2], err)
	}
	return lsn, true
}

// SlotReleased waits until no walsender holds the fixture's slot any more, so that whatever the
// last one was sent (a final standby status) has been applied or never will be.
func (f *Fixture) SlotReleased(t testing.TB, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "the walsender to release slot "+f.Slot, func() bool {
		var active bool
		err := f.Pool.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, f.Slot).Scan(&active)
		return err == nil && !active
	})
}

// NewPrivateRelayEnv is NewRelayEnv on a throwaway PostgreSQL of the test's own (TempPostgres,
// wal_level = logical), for measurements that other tests' WAL on the shared server would
// disturb: a walsender decodes all WAL of its server, and wakes its client for it. Kafka is the
// shared one; topics are the test's own as usual.
func NewPrivateRelayEnv(t *testing.T, race bool) *RelayEnv {
	t.Helper()
	url := TempPostgres(t, "wal_level = logical")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		t.Fatalf("the throwaway PostgreSQL: %v", err)
	}
	t.Cleanup(pool.Close)
	e := RelayEnvOf(t, newFixture(t, pool), race)
	e.Env = append([]string{"CDC_RELAY_PG_URL=" + url}, e.Env...)
	e.CreateSlot(t, e.F.Table)
	return e
}
