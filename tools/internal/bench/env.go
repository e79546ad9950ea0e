package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
)

// env is one benchmark run's connections, binary and the resources to remove at the end.
type env struct {
	cfg    Config
	pool   *pgxpool.Pool
	kcl    *kgo.Client
	adm    *kadm.Client
	bin    string
	logDir string
	prefix string   // bench_<random>: every table, slot, publication and topic starts with it
	ours   ourProcs // the process trees that are the benchmark's own (MachineState)

	mu       sync.Mutex
	seq      int
	cleanups []func(context.Context)
	workers  map[string]*connectWorker // each debezium publisher's Kafka Connect worker
	logNames map[string]int            // how often each log name was taken (logName)
}

// logName returns name the first time, then name-2, name-3, ...: a phase that runs again
// (SteadyRepeats) keeps the earlier runs' logs and profiles.
func (e *env) logName(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.logNames == nil {
		e.logNames = map[string]int{}
	}
	e.logNames[name]++
	if n := e.logNames[name]; n > 1 {
		return fmt.Sprintf("%s-%d", name, n)
	}
	return name
}

func newEnv(ctx context.Context, cfg Config, bin string) (*env, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.PGURL)
	if err != nil {
		return nil, fmt.Errorf("bench: bad PostgreSQL URL: %w", err)
	}
	pcfg.MaxConns = int32(cfg.Writers + 4)
	pcfg.ConnConfig.RuntimeParams["application_name"] = "cdc-bench"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(cctx, pcfg)
	if err == nil {
		err = pool.Ping(cctx)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: PostgreSQL at %s:%d is not reachable: %w (run: eval \"$(scripts/dev-up.sh)\")",
			pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, err)
	}
	kcl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err == nil {
		err = kcl.Ping(cctx)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("bench: Kafka at %v is not reachable: %w (run: eval \"$(scripts/dev-up.sh)\")", cfg.Brokers, err)
	}
	var r [3]byte
	_, _ = rand.Read(r[:])
	return &env{cfg: cfg, pool: pool, kcl: kcl, adm: kadm.NewClient(kcl), bin: bin,
		logDir: filepath.Join(cfg.OutDir, "logs"), prefix: "bench_" + hex.EncodeToString(r[:]), workers: map[string]*connectWorker{}}, nil
}

// close stops the Kafka Connect workers, removes every resource the run made, newest first,
// and closes the connections.
func (e *env) close() {
	e.stopWorkers()
	e.cleanupTo(0)
	e.kcl.Close()
	e.pool.Close()
}

// stopWorkers stops every debezium publisher's Kafka Connect worker.
func (e *env) stopWorkers() {
	e.mu.Lock()
	ws := e.workers
	e.workers = map[string]*connectWorker{}
	e.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
}

// mark returns a point to clean up to: cleanupTo(mark()) at the end of a phase removes what
// the phase made, so that slots do not pile up (max_replication_slots is shared).
func (e *env) mark() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.cleanups)
}

// cleanupTo runs the cleanups registered after mark, newest first.
func (e *env) cleanupTo(mark int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e.mu.Lock()
	cs := e.cleanups[mark:]
	e.cleanups = e.cleanups[:mark]
	e.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i](ctx)
	}
}

func (e *env) onClose(f func(context.Context)) {
	e.mu.Lock()
	e.cleanups = append(e.cleanups, f)
	e.mu.Unlock()
}

func (e *env) progress(format string, args ...any) {
	fmt.Fprintf(e.cfg.Progress, "cdc-bench: "+format+"\n", args...)
}

// fixture is one scenario's tables, topic, slot and publication.
type fixture struct {
	base   string // unique name, also the slot and publication
	orders string // public.<base>_orders
	outbox string // public.<base>
	topic  string // <base>.events: the topic column of every row
}

// newFixture creates the orders and outbox tables (with the pending-rows index the poller
// needs) and the topic, all removed at close.
func (e *env) newFixture(ctx context.Context, label string) (*fixture, error) {
	base := e.nextBase(label)
	f := &fixture{base: base, orders: "public." + base + "_orders", outbox: "public." + base, topic: base + ".events"}
	e.onClose(func(ctx context.Context) {
		_, _ = e.pool.Exec(ctx, `DROP TABLE IF EXISTS `+f.outbox+`, `+f.orders)
	})
	ddl := `CREATE TABLE ` + f.orders + ` (
    id          BIGSERIAL    PRIMARY KEY,
    customer    TEXT         NOT NULL,
    amount      NUMERIC      NOT NULL,
    created_at  TIMESTAMPTZ  NOT NULL DEFAULT NOW()
);
CREATE TABLE ` + f.outbox + ` (
    id            BIGSERIAL    PRIMARY KEY,
    aggregate_id  TEXT         NOT NULL,
    topic         TEXT         NOT NULL,
    payload       JSONB        NOT NULL,
    created_at    TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    published_at  TIMESTAMPTZ  NULL
);
CREATE INDEX ` + base + `_pending_idx ON ` + f.outbox + ` (id) WHERE published_at IS NULL`
	if err := e.createFixture(ctx, f, ddl); err != nil {
		return nil, err
	}
	return f, nil
}

// nextBase is the base name of the env's next fixture: the run's prefix, a sequence number
// and label.
func (e *env) nextBase(label string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	return fmt.Sprintf("%s_%d_%s", e.prefix, e.seq, label)
}

// createFixture runs ddl, which creates f's tables, and creates f's topics.
func (e *env) createFixture(ctx context.Context, f *fixture, ddl string) error {
	if _, err := e.pool.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("bench: create tables %s: %w", f.base, err)
	}
	// The relay refuses to start without its dead-letter topic (--dlq-topic): each fixture has one.
	for _, topic := range []string{f.topic, f.base + ".dlq"} {
		if err := e.createTopic(ctx, topic); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) createTopic(ctx context.Context, topic string) error {
	e.onClose(func(ctx context.Context) { _, _ = e.adm.DeleteTopics(ctx, topic) })
	resp, err := e.adm.CreateTopic(ctx, int32(e.cfg.Partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("bench: create topic %s: %w", topic, err)
	}
	// Wait until every partition has a leader and answers a ListOffsets: a publisher that
	// meets a topic still being created backs off on metadata for seconds, which would be
	// timed as drain time.
	return waitUntil(ctx, 30*time.Second, nil, "topic "+topic+" to be ready", func() (bool, error) {
		md, err := e.adm.Metadata(ctx, topic)
		if err != nil {
			return false, nil
		}
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil || len(td.Partitions) != e.cfg.Partitions {
			return false, nil
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false, nil
			}
		}
		_, err = e.endOffsets(ctx, topic)
		return err == nil, nil
	})
}

// createRelaySlot runs `cdc-relay slot create` for the fixture: the slot, and the
// publication named after the fixture. Both are dropped at cleanup.
func (e *env) createRelaySlot(ctx context.Context, f *fixture, slot string) error {
	e.onClose(func(ctx context.Context) {
		e.dropSlot(ctx, slot)
		_, _ = e.pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{f.base}.Sanitize())
	})
	out, err := exec.CommandContext(ctx, e.bin, "slot", "create", "--pg-url", e.cfg.PGURL,
		"--slot", slot, "--publication", f.base, "--table", f.outbox).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bench: cdc-relay slot create: %w\n%s", err, out)
	}
	return nil
}

// dropAtCleanup drops, at cleanup, the slot and publication a Debezium connector makes for
// the fixture (after the phase has deleted the connector).
func (e *env) dropAtCleanup(f *fixture, slot string) {
	e.onClose(func(ctx context.Context) {
		e.dropSlot(ctx, slot)
		_, _ = e.pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{f.base}.Sanitize())
	})
}

// createPublication creates the fixture's publication as `cdc-relay slot create` would (FOR
// TABLE its outbox, inserts only), so that `slot create` for the same fixture finds it and
// leaves it as it is. It is dropped at cleanup.
func (e *env) createPublication(ctx context.Context, f *fixture) error {
	pub := pgx.Identifier{f.base}.Sanitize()
	e.onClose(func(ctx context.Context) { _, _ = e.pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pub) })
	_, err := e.pool.Exec(ctx, `CREATE PUBLICATION `+pub+` FOR TABLE `+f.outbox+` WITH (publish = 'insert')`)
	if err != nil {
		return fmt.Errorf("bench: create publication %s: %w (the role of --pg-url needs CREATE on the database)", f.base, err)
	}
	return nil
}

// createPlainSlot makes a pgoutput slot with SQL (for pg_recvlogical), dropped at close.
func (e *env) createPlainSlot(ctx context.Context, slot string) error {
	e.onClose(func(ctx context.Context) { e.dropSlot(ctx, slot) })
	_, err := e.pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
	if err != nil {
		return fmt.Errorf("bench: create slot %s: %w", slot, err)
	}
	return nil
}

// dropSlot drops a slot, waiting while a walsender that is exiting still holds it.
func (e *env) dropSlot(ctx context.Context, slot string) {
	for {
		_, err := e.pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		if err == nil || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// walPosition returns pg_current_wal_lsn() as a byte position.
func (e *env) walPosition(ctx context.Context) (int64, error) {
	var n int64
	err := e.pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&n)
	return n, err
}

// endOffsets returns the sum of the topic's high watermarks: the records Kafka holds.
func (e *env) endOffsets(ctx context.Context, topic string) (int64, error) {
	offs, err := e.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	if err := offs.Error(); err != nil {
		return 0, err
	}
	var n int64
	offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, nil
}

// serverInfo describes the services for the report's header.
func (e *env) serverInfo(ctx context.Context) string {
	var pgv string
	_ = e.pool.QueryRow(ctx, `SELECT current_setting('server_version')`).Scan(&pgv)
	var kv string
	if v, err := e.adm.ApiVersions(ctx); err == nil {
		v.Each(func(b kadm.BrokerApiVersions) {
			if kv == "" {
				kv = b.VersionGuess()
			}
		})
	}
	return fmt.Sprintf("PostgreSQL %s, Kafka %s at %s", pgv, strings.TrimPrefix(kv, "v"), strings.Join(e.cfg.Brokers, ","))
}

// startPublisher runs pub on the fixture (run on slot). topic, when set, overrides the rows'
// topic.
func (e *env) startPublisher(pub Publisher, f *fixture, slot, topic, logName string) (*proc, error) {
	args := []string{"--pg-url", e.cfg.PGURL, "--brokers", strings.Join(e.cfg.Brokers, ","), "--dlq-topic", f.base + ".dlq"}
	if topic != "" {
		args = append(args, "--topic", topic)
	}
	switch {
	case pub.Poll:
		args = append([]string{"poll", "--table", f.outbox, "--interval", pub.Interval.String()}, args...)
	case pub.ExactlyOnce:
		args = append([]string{"run", "--slot", slot, "--publication", f.base, "--delivery", "exactly-once", "--checkpoint-topic", checkpointTopic(f)}, args...)
	default:
		args = append([]string{"run", "--slot", slot, "--publication", f.base}, args...)
	}
	args = append(args, pub.Args...)
	bin := e.bin
	if pub.Bin != "" {
		bin = pub.Bin
	}
	env, err := publisherEnv(pub)
	if err != nil {
		return nil, err
	}
	if e.cfg.Profile {
		dir := filepath.Join(e.cfg.OutDir, "profiles")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		env = append(slices.Clone(env), "CDC_RELAY_CPU_PROFILE="+filepath.Join(dir, logName+".pprof"))
	}
	return startProc(pub.Name, filepath.Join(e.logDir, logName+".log"), env, bin, args...)
}

// checkpointTopic is the fixture's checkpoint topic for exactly-once publishers (keyed by
// slot: every drain of the fixture shares it).
func checkpointTopic(f *fixture) string { return f.base + ".checkpoints" }

// ensureCheckpointTopic creates the fixture's checkpoint topic unless it exists (a backlog's
// drains share it), removed at cleanup.
func (e *env) ensureCheckpointTopic(ctx context.Context, f *fixture) error {
	topic := checkpointTopic(f)
	e.onClose(func(ctx context.Context) { _, _ = e.adm.DeleteTopics(ctx, topic) })
	if err := kafkatxn.EnsureCheckpointTopic(ctx, e.kcl, topic, 1); err != nil {
		return fmt.Errorf("bench: checkpoint topic %s: %w", topic, err)
	}
	return nil
}

// failer is a process or publisher that reports when it stopped by itself.
type failer interface{ failed() error }

// waitUntil polls cond every 10ms until it holds, p (if any) fails, or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, p failer, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if p != nil {
			if err := p.failed(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
