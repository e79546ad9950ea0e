package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
