package slotstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/slotstore"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// observer records what a Watcher reports, safe for the watcher's goroutine and the test.
type observer struct {
	mu     sync.Mutex
	last   slotstore.Status
	reads  int
	failed int
	logs   bytes.Buffer
}

func (o *observer) Update(st slotstore.Status) {
	o.mu.Lock()
	o.last, o.reads = st, o.reads+1
	o.mu.Unlock()
}
func (o *observer) Failed() { o.mu.Lock(); o.failed++; o.mu.Unlock() }
func (o *observer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.logs.Write(p)
}

func (o *observer) get() (slotstore.Status, int, int, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last, o.reads, o.failed, o.logs.String()
}

// watch runs a Watcher on slot until the test ends.
func watch(t *testing.T, slot string, interval time.Duration, warn int64) *observer {
	o := &observer{}
	url := pgURL(t) // here, on the test's goroutine: the gate may stop the test
	w := &slotstore.Watcher{Connect: func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, url) },
		Slot: slot, Interval: interval, WarnBytes: warn, Observer: o, Logger: slog.New(slog.NewTextHandler(o, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return o
}

// Against the real PostgreSQL: a slot nobody reads retains the WAL written after it, the
// watcher reports it and warns once when it crosses the threshold.
func TestWatcherReportsRetainedWAL(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	slot := testenv.Name(t)
	if _, err := pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot) })
	table := "public." + slot + "_filler"
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` AS SELECT g, repeat('x', 200) AS filler FROM generate_series(1, 5000) g`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })

	o := watch(t, slot, 50*time.Millisecond, 64<<10)
	testenv.Eventually(t, 30*time.Second, "the warning", func() bool {
		_, _, _, logs := o.get()
		return strings.Contains(logs, "retains more WAL than --wal-retained-warn-bytes")
	})
	st, _, _, _ := o.get()
	if st.RetainedWALBytes <= 64<<10 || st.LagBytes <= 64<<10 || st.Active {
		t.Errorf("status %+v: want more than 64 KiB retained and lagging after a 1 MB table, not active", st)
	}
	testenv.Eventually(t, 10*time.Second, "two more reads", func() bool { _, n, _, _ := o.get(); return n >= 3 })
	if _, _, _, logs := o.get(); strings.Count(logs, "retains more WAL") != 1 {
		t.Errorf("warned %d times, want once per crossing:\n%s", strings.Count(logs, "retains more WAL"), logs)
	}
}

// A slot that disappears is a failed read, counted and logged once, never a crash; the log
// says the slot does not exist without advice (`slot create` is wrong after a promotion: the
// relay itself says what to run).
func TestWatcherCountsFailures(t *testing.T) {
	// The interval bounds each read too: 20 ms timed reads out on a loaded machine (another
	// failure than the missing slot, logged instead of it).
	o := watch(t, "no_such_slot_"+strings.ToLower(testenv.Name(t))[2:12], 250*time.Millisecond, 0)
	testenv.Eventually(t, 30*time.Second, "three failed reads", func() bool { _, _, n, _ := o.get(); return n >= 3 })
	logs := ""
	if _, _, _, logs = o.get(); strings.Count(logs, "the slot does not exist on this server") != 1 {
		t.Errorf("logged %d times, want once:\n%s", strings.Count(logs, "the slot does not exist on this server"), logs)
	}
	if strings.Contains(logs, "slot create") {
		t.Errorf("the watcher advises slot create:\n%s", logs)
	}
}

// A watcher that never read the slot (a wrong password, a missing database) says nothing of
// stale metrics: there were none, and the relay's own connection reports the cause.
func TestWatcherThatNeverReadSaysNothingStale(t *testing.T) {
	o := &observer{}
	w := &slotstore.Watcher{Connect: func(context.Context) (*pgx.Conn, error) { return nil, errors.New("password authentication failed") },
		Slot: "s", Interval: 10 * time.Millisecond, Observer: o, Logger: slog.New(slog.NewTextHandler(o, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testenv.Eventually(t, 10*time.Second, "three failed reads", func() bool { _, _, n, _ := o.get(); return n >= 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, _, _, logs := o.get(); strings.Contains(logs, "stale") || strings.Contains(logs, "WARN") {
		t.Errorf("a watcher that never read the slot warned:\n%s", logs)
	}
}
