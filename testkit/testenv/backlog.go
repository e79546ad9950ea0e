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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
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

// CreateTopicWithConfig creates a topic with topic-level configuration (e.g. max.message.bytes),
// deleted at cleanup. It returns once the broker's metadata has the topic with a leader for every
// partition: the controller answers the creation before the brokers know of it, and a relay
// started in between found its dead-letter topic missing (exit 2).
func CreateTopicWithConfig(t testing.TB, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	adm := kadm.NewClient(Kafka(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	if _, err := adm.CreateTopic(ctx, partitions, 1, cfg, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic)
	})
	Eventually(t, 30*time.Second, "topic "+topic+" in the broker's metadata", func() bool {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil || td.Error() != nil {
			return false
		}
		d, ok := td[topic]
		if !ok || d.Err != nil || len(d.Partitions) != int(partitions) {
			return false
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
		return true
	})
}

// SetTopicConfig sets one topic-level configuration (e.g. max.message.bytes) of topic. The broker
// may take a moment to show the new value in DescribeConfigs.
func SetTopicConfig(t testing.TB, topic, name, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(Kafka(t)).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: &value}}, topic); err != nil {
		t.Fatalf("set %s=%s on topic %s: %v", name, value, topic, err)
	}
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
