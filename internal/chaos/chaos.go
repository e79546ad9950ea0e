package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures a soak. Zero fields take the defaults stated.
type Config struct {
	PGURL   string   // required
	Brokers []string // required
	// RelayBin is the cdc-relay binary. Required.
	RelayBin string
	// Scripts is the directory holding kafka-ctl.sh and pg-ctl.sh. Default "scripts".
	Scripts string
	// Rows is how many outbox rows to commit. Default 100,000.
	Rows int
	// Rate is the target of rows per second (committed and rolled back). Default 2,000.
	Rate int
	// MaxTxRows bounds the rows of one transaction (1..MaxTxRows, uniform). Default 20.
	MaxTxRows int
	// Rollback is the fraction of transactions rolled back. Default 0.1.
	Rollback float64
	// Keys is the number of distinct aggregate ids. Default 64.
	Keys int
	// KillEvery is the mean interval between kill -9s of the relay (uniform in ±50%). Default 3s.
	KillEvery time.Duration
	// MaxKills, when set, is the number of kills, made even if the writing ends first; 0 means
	// as many as fit while rows are written.
	MaxKills int
	// Pause is how long Kafka is paused (once, at about a third of the rows). Default 10s;
	// negative disables.
	Pause time.Duration
	// NoPGRestart disables the PostgreSQL restart (once, at about two thirds of the rows).
	NoPGRestart bool
	// CatchUp bounds the wait for every committed row after writing ends. Default 5m.
	CatchUp time.Duration
	// Seed seeds the randomness; 0 picks one (printed).
	Seed uint64
	// Name prefixes the table, slot, publication and topics. Default "chaos_<unix time>".
	Name string
	// Keep leaves the table, slot, publication and topics in place.
	Keep bool
	// LogDir receives the relay's logs (relay-N.log). Default: a new temporary directory.
	LogDir string
	// Log receives progress lines. Default os.Stderr.
	Log io.Writer
}

func (c Config) withDefaults() Config {
	orDefault(&c.Rows, 100_000)
	orDefault(&c.Rate, 2_000)
	orDefault(&c.MaxTxRows, 20)
	orDefault(&c.Keys, 64)
	orDefault(&c.Rollback, 0.1)
	orDefault(&c.KillEvery, 3*time.Second)
	orDefault(&c.Pause, 10*time.Second)
	orDefault(&c.CatchUp, 5*time.Minute)
	orDefault(&c.Scripts, "scripts")
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Name == "" {
		c.Name = fmt.Sprintf("chaos_%d", time.Now().Unix())
	}
	orDefault[io.Writer](&c.Log, os.Stderr)
	return c
}

// orDefault sets *v to d if it is the zero value.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.PGURL == "" {
		errs = append(errs, errors.New("chaos: no PostgreSQL URL (--pg-url or CDC_RELAY_PG_URL)"))
	}
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("chaos: no Kafka brokers (--brokers or CDC_RELAY_BROKERS)"))
	}
	if c.RelayBin == "" {
		errs = append(errs, errors.New("chaos: no relay binary (--relay-bin; go build -o bin/cdc-relay ./cmd/cdc-relay)"))
	}
	if c.Rows < 0 || c.Rate < 0 || c.MaxTxRows < 0 || c.Keys < 0 || c.MaxKills < 0 || c.Rollback < 0 || c.Rollback >= 1 {
		errs = append(errs, errors.New("chaos: counts must not be negative and --rollback must be in [0, 1)"))
	}
	return errors.Join(errs...)
}

// Event is one fault injected, for attributing duplicates.
type Event struct {
	Kind string // "kill", "kafka-pause", "pg-restart"
	N    int    // kill number, from 1
	At   time.Time
	Dups int // duplicate records first seen after this event and before the next
}

// Result holds the soak's figures.
type Result struct {
	Seed              uint64
	Started           time.Time
	Committed         int // rows committed
	CommittedTxs      int
	RolledBack        int // rows rolled back
	RolledBackTxs     int
	Ambiguous         int // commits whose outcome was resolved by looking (connection lost during COMMIT)
	Records           int // records read from the topic
	Duplicates        int // records beyond the first for an id
	Kills             int
	UnexpectedExits   int
	Events            []Event
	MaxDupsOneCrash   int
	MaxDupsCrash      int // which kill (1-based) caused MaxDupsOneCrash
	Lost              int
	RolledBackSeen    int
	OrderViolations   int // keys whose first deliveries differ from commit order
	DeadLettered      int // records on the dead-letter topic (none expected)
	WriteTime         time.Duration
	CatchUpTime       time.Duration // from the end of writing until every committed row was read
	TotalTime         time.Duration
	LogDir            string
	FirstOrderProblem string
}

// Print writes the figures.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "cdc-chaos: seed %d, relay logs in %s\n", r.Seed, r.LogDir)
	fmt.Fprintf(w, "  written:    %d rows committed in %d transactions, %d rows rolled back in %d transactions (%d commits resolved after a lost connection), in %s\n",
		r.Committed, r.CommittedTxs, r.RolledBack, r.RolledBackTxs, r.Ambiguous, r.WriteTime.Round(time.Millisecond))
	var faults []string
	for _, e := range r.Events {
		if e.Kind != "kill" {
			faults = append(faults, fmt.Sprintf("%s at +%s", e.Kind, e.At.Sub(r.Started).Round(time.Millisecond)))
		}
	}
	if len(faults) == 0 {
		faults = []string{"no other fault"}
	}
	fmt.Fprintf(w, "  faults:     %d relay kill -9s, %s; %d unexpected relay exits\n", r.Kills, strings.Join(faults, ", "), r.UnexpectedExits)
	fmt.Fprintf(w, "  delivered:  %d records; %d committed ids lost, %d rolled-back ids delivered, %d keys out of commit order, %d dead letters\n",
		r.Records, r.Lost, r.RolledBackSeen, r.OrderViolations, r.DeadLettered)
	pct := 0.0
	if r.Committed > 0 {
		pct = 100 * float64(r.Duplicates) / float64(r.Committed)
	}
	fmt.Fprintf(w, "  duplicates: %d (%.2f%% of committed rows); largest from one crash: %d (kill #%d)\n",
		r.Duplicates, pct, r.MaxDupsOneCrash, r.MaxDupsCrash)
	fmt.Fprintf(w, "  by fault:   %s\n", r.dupsByFault())
	fmt.Fprintf(w, "  caught up:  %s after writing ended; total %s\n", r.CatchUpTime.Round(time.Millisecond), r.TotalTime.Round(time.Millisecond))
	if r.FirstOrderProblem != "" {
		fmt.Fprintf(w, "  first order problem: %s\n", r.FirstOrderProblem)
	}
}

// dupsByFault sums the duplicates attributed to each kind of fault: the kills' mean is the
// replay window a kill -9 costs.
func (r *Result) dupsByFault() string {
	var kills, killDups int
	var other []string
	for _, e := range r.Events {
		if e.Kind == "kill" {
			kills++
			killDups += e.Dups
			continue
		}
		other = append(other, fmt.Sprintf("%s %d", e.Kind, e.Dups))
	}
	s := "no kill"
	if kills > 0 {
		s = fmt.Sprintf("%d kills %d (%.0f per kill)", kills, killDups, float64(killDups)/float64(kills))
	}
	return strings.Join(append([]string{s}, other...), ", ")
}

// Err is nil when the contract held.
func (r *Result) Err() error {
	var errs []error
	if r.Lost > 0 {
		errs = append(errs, fmt.Errorf("%d committed rows lost", r.Lost))
	}
	if r.RolledBackSeen > 0 {
		errs = append(errs, fmt.Errorf("%d rolled-back rows delivered", r.RolledBackSeen))
	}
	if r.OrderViolations > 0 {
		errs = append(errs, fmt.Errorf("%d keys out of commit order", r.OrderViolations))
	}
	if r.UnexpectedExits > 0 {
		errs = append(errs, fmt.Errorf("the relay exited on its own %d times (see its logs)", r.UnexpectedExits))
	}
	if r.DeadLettered > 0 {
		errs = append(errs, fmt.Errorf("%d records dead-lettered although every row was good", r.DeadLettered))
	}
	return errors.Join(errs...)
}

// soak is one run's state.
type soak struct {
	cfg     Config
	log     io.Writer
	rng     *rand.Rand // the writer's
	killRng *rand.Rand // the kill schedule's
	pool    *pgxpool.Pool
	table   string
	topic   string
	dlq     string

	logMu  sync.Mutex // Log is written by the writer, the kill loop and the faults
	mu     sync.Mutex
	events []Event
	// faultMu serializes a PostgreSQL restart with relay restarts: a relay whose preflight
	// meets a stopped server exits (correctly) with an error, which would count as unexpected.
	faultMu sync.Mutex
}

func (s *soak) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.log, "[chaos %s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (s *soak) event(kind string, n int) {
	s.mu.Lock()
	s.events = append(s.events, Event{Kind: kind, N: n, At: time.Now()})
	s.mu.Unlock()
}

// Run runs the soak. The error is about the run itself (setup failed); the contract's verdict
// is Result.Err.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.LogDir == "" {
		d, err := os.MkdirTemp("", "cdc-chaos")
		if err != nil {
			return nil, err
		}
		cfg.LogDir = d
	}
	for _, sc := range []string{"kafka-ctl.sh", "pg-ctl.sh"} {
		if _, err := os.Stat(filepath.Join(cfg.Scripts, sc)); err != nil {
			return nil, fmt.Errorf("chaos: %s not found in --scripts %s: %w", sc, cfg.Scripts, err)
		}
	}
	s := &soak{cfg: cfg, log: cfg.Log, rng: rand.New(rand.NewPCG(cfg.Seed, 1)), killRng: rand.New(rand.NewPCG(cfg.Seed, 2)),
		table: "public." + cfg.Name, topic: cfg.Name + ".events", dlq: cfg.Name + ".dlq"}
	began := time.Now()
	pool, err := pgxpool.New(ctx, cfg.PGURL)
	if err != nil {
		return nil, fmt.Errorf("chaos: connect to PostgreSQL: %w", err)
	}
	defer pool.Close()
	s.pool = pool
	kcl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return nil, err
	}
	defer kcl.Close()
	adm := kadm.NewClient(kcl)
	cleanup, err := s.setup(ctx, adm)
	if cleanup != nil && !cfg.Keep {
		defer cleanup()
	}
	if err != nil {
		return nil, err
	}

	res := &Result{Seed: cfg.Seed, LogDir: cfg.LogDir, Started: began}
	s.logf("seed %d: %d rows at %d rows/s into %s, relay killed every ~%s, Kafka paused %s once, PostgreSQL restarted once=%v; relay logs in %s",
		cfg.Seed, cfg.Rows, cfg.Rate, s.table, cfg.KillEvery, cfg.Pause, !cfg.NoPGRestart, cfg.LogDir)

	v, err := newVerifier(cfg.Brokers, s.topic, s.dlq)
	if err != nil {
		return nil, err
	}
	defer v.close()

	sup := newSupervisor(s)
	if err := sup.start(ctx); err != nil {
		return nil, err
	}
	defer sup.stop()

	wctx, cancelWrite := context.WithCancel(ctx)
	defer cancelWrite()
	w := newWriter(s)
	progress := make(chan int, 16)
	werr := make(chan error, 1)
	go func() { werr <- w.run(wctx, progress) }()

	// Faults: kills throughout the writing, one Kafka pause at a third, one Postgres restart
	// at two thirds.
	killDone := make(chan struct{})
	go func() {
		defer close(killDone)
		// With MaxKills set, every kill happens, after the writing if it ends first.
		kctx := wctx
		if cfg.MaxKills > 0 {
			kctx = ctx
		}
		sup.killLoop(kctx)
	}()
	faultsDone := make(chan error, 1)
	go func() { faultsDone <- s.faults(ctx, wctx, progress) }()

	err = <-werr
	writeEnd := time.Now()
	res.WriteTime = writeEnd.Sub(began)
	cancelWrite()
	<-killDone
	ferr := <-faultsDone // also after a failure: Kafka is resumed before Run returns
	if err != nil {
		return nil, fmt.Errorf("chaos: writer: %w", err)
	}
	if ferr != nil {
		return nil, fmt.Errorf("chaos: fault injection: %w", ferr)
	}
	s.logf("writing done: %d rows committed; waiting for every one on %s", len(w.Committed()), s.topic)
	if err := sup.ensureRunning(ctx); err != nil {
		return nil, err
	}
	if err := v.waitFor(ctx, w.committedSet(), cfg.CatchUp); err != nil {
		s.logf("%v", err)
	}
	res.CatchUpTime = time.Since(writeEnd)
	// Give a replay in progress a moment to land, so that duplicates are counted whole.
	time.Sleep(2 * time.Second)
	sup.stop()
	res.Kills, res.UnexpectedExits = sup.kills, sup.unexpected
	s.mu.Lock()
	res.Events = append([]Event(nil), s.events...)
	s.mu.Unlock()
	v.check(w, res)
	res.TotalTime = time.Since(began)
	return res, nil
}

// setup creates the outbox table, the slot and publication (with the relay's CLI) and the
// topics, and returns what removes them.
func (s *soak) setup(ctx context.Context, adm *kadm.Client) (func(), error) {
	ddl := `CREATE TABLE ` + s.table + ` (
		id bigserial PRIMARY KEY, aggregate_id text NOT NULL, topic text NOT NULL, payload jsonb NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now(), published_at timestamptz)`
	if _, err := s.pool.Exec(ctx, ddl); err != nil {
		return nil, fmt.Errorf("chaos: create %s: %w", s.table, err)
	}
	cleanup := func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for c.Err() == nil {
			_, err := s.pool.Exec(c, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, s.cfg.Name)
			if err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		_, _ = s.pool.Exec(c, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{s.cfg.Name}.Sanitize())
		_, _ = s.pool.Exec(c, `DROP TABLE IF EXISTS `+s.table)
		_, _ = adm.DeleteTopics(c, s.topic, s.dlq)
	}
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, s.topic); err != nil {
		return cleanup, fmt.Errorf("chaos: create topic %s: %w", s.topic, err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, s.dlq); err != nil {
		return cleanup, fmt.Errorf("chaos: create topic %s: %w", s.dlq, err)
	}
	out, err := exec.CommandContext(ctx, s.cfg.RelayBin, "slot", "create", "--pg-url", s.cfg.PGURL, "--slot", s.cfg.Name,
		"--publication", s.cfg.Name, "--table", s.table).CombinedOutput()
	if err != nil {
		return cleanup, fmt.Errorf("chaos: cdc-relay slot create: %w\n%s", err, out)
	}
	return cleanup, nil
}

// faults pauses Kafka once at a third of the rows and restarts PostgreSQL once at two thirds,
// until the writing ends (wctx). A pause lasts its full length unless the run is abandoned (ctx).
func (s *soak) faults(ctx, wctx context.Context, progress <-chan int) error {
	paused, restarted := s.cfg.Pause < 0, s.cfg.NoPGRestart
	for !paused || !restarted {
		var n int
		select {
		case <-wctx.Done():
			if !paused || !restarted {
				s.logf("writing ended before every fault was injected (paused=%v restarted=%v)", paused, restarted)
			}
			return nil
		case n = <-progress:
		}
		switch {
		case !paused && n >= s.cfg.Rows/3:
			paused = true
			s.logf("Kafka: pause for %s", s.cfg.Pause)
			if err := s.script("kafka-ctl.sh", "pause"); err != nil {
				return err
			}
			s.event("kafka-pause", 0)
			select { // the outage is the scenario; it ends early only when the run is abandoned
			case <-time.After(s.cfg.Pause):
			case <-ctx.Done():
			}
			if err := s.script("kafka-ctl.sh", "resume"); err != nil {
				return err
			}
			s.logf("Kafka: resumed")
		case paused && !restarted && n >= 2*s.cfg.Rows/3:
			restarted = true
			s.faultMu.Lock()
			s.logf("PostgreSQL: restart -m fast")
			s.event("pg-restart", 0)
			err := s.script("pg-ctl.sh", "restart")
			s.faultMu.Unlock()
			if err != nil {
				return err
			}
			s.logf("PostgreSQL: back")
		}
	}
	return nil
}

func (s *soak) script(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.cfg.Scripts, name), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
