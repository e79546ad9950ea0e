package testenv

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RelayEnv is one test's relay: its fixture, the cdc-relay binary and the environment that
// names the fixture's slot and publication.
type RelayEnv struct {
	F   *Fixture
	Bin string
	Env []string
}

// NewRelayEnv makes a fixture and creates its slot and publication with `cdc-relay slot create`.
// The binary is built with the race detector when race is set.
func NewRelayEnv(t *testing.T, race bool) *RelayEnv {
	t.Helper()
	e := RelayEnvOf(t, NewFixture(t), race)
	e.CreateSlot(t, e.F.Table)
	return e
}

// RelayEnvOf is fixture f's relay without its slot: the binary (built with the race detector
// when race is set) and the environment that names f's slot and publication.
func RelayEnvOf(t testing.TB, f *Fixture, race bool) *RelayEnv {
	t.Helper()
	return &RelayEnv{F: f, Bin: Binary(t, race), Env: f.SlotEnv()}
}

// CreateSlot creates the slot and publication of the tables (a comma-separated list) with
// `cdc-relay slot create`.
func (e *RelayEnv) CreateSlot(t testing.TB, tables string) {
	t.Helper()
	if out, errOut, code := Run(t, 30*time.Second, e.Bin, e.Env, "slot", "create", "--table", tables); code != 0 {
		t.Fatalf("slot create: exit %d\n%s%s", code, out, errOut)
	}
}

// Start runs `cdc-relay run` with a 1s status interval and the fixture's DLQ topic; args come
// after those, so they win.
func (e *RelayEnv) Start(t *testing.T, extraEnv []string, args ...string) *Proc {
	t.Helper()
	a := append([]string{"run", "--dlq-topic", e.F.DLQ, "--status-interval", "1s"}, args...)
	return Start(t, e.Bin, append(append([]string{}, e.Env...), extraEnv...), a...)
}

// Settle waits until the relay has confirmed past upTo (so everything committed before it is in
// Kafka, replays included) and the consumer has read every record the topic holds, and returns
// them. Without it a test can judge duplicates before a restarted relay has replayed anything.
func (e *RelayEnv) Settle(t *testing.T, cons *Consumer, upTo pglogrepl.LSN) []*kgo.Record {
	t.Helper()
	Eventually(t, 60*time.Second, "the slot to confirm past "+upTo.String(), func() bool { return e.F.SlotConfirmed(t) >= upTo })
	end := EndOffset(t, e.F.Topic)
	return cons.WaitFor(t, 60*time.Second, "every record on the topic", func(r []*kgo.Record) bool { return int64(len(r)) >= end })
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
