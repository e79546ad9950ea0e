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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
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
	// Pause is how long Kafka is paused (once, at about two fifths of the rows). Default 10s;
	// negative disables.
	Pause time.Duration
	// NoPGRestart disables the PostgreSQL restart (once, at about three fifths of the rows).
	NoPGRestart bool
	// Delivery is the relay's --delivery: AtLeastOnce (the default) or ExactlyOnce. Exactly-once
	// is checked by a read_committed reader, and a duplicate fails it.
	Delivery string
	// NoStandby runs one relay instead of two on the slot: without it a second relay waits as
	// a standby all along, and each kill -9 is a takeover.
	NoStandby bool
	// NoZombie disables the zombie (once, at about a fifth of the rows): the relay holding the
	// slot is stopped with SIGSTOP until its walsender's timeout ended its session and the
	// standby took over and published, then resumed. Without a standby there is no zombie.
	NoZombie bool
	// WalSenderTimeout is the wal_sender_timeout of every relay's sessions (a setting of its
	// connection), the zombie's pause's lower bound. Default 5s.
	WalSenderTimeout time.Duration
	// RelayArgs are extra arguments for every `cdc-relay run`.
	RelayArgs []string
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
	orDefault(&c.Delivery, AtLeastOnce)
	orDefault(&c.WalSenderTimeout, 5*time.Second)
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
	if c.Delivery != "" && c.Delivery != AtLeastOnce && c.Delivery != ExactlyOnce {
		errs = append(errs, fmt.Errorf("chaos: --delivery %q: want %s or %s", c.Delivery, AtLeastOnce, ExactlyOnce))
	}
	if c.WalSenderTimeout < 0 {
		errs = append(errs, errors.New("chaos: --wal-sender-timeout must not be negative"))
	}
	if c.Rows < 0 || c.Rate < 0 || c.MaxTxRows < 0 || c.Keys < 0 || c.MaxKills < 0 || c.Rollback < 0 || c.Rollback >= 1 {
		errs = append(errs, errors.New("chaos: counts must not be negative and --rollback must be in [0, 1)"))
	}
	return errors.Join(errs...)
}

// The relay's delivery modes (its --delivery).
const (
	AtLeastOnce = "at-least-once"
	ExactlyOnce = "exactly-once"
)

// Event is one fault injected, for attributing duplicates.
type Event struct {
	Kind string // "kill", "kafka-pause", "zombie", "pg-restart"
	N    int    // kill number, from 1
	At   time.Time
	Dups int // duplicate records first seen after this event and before the next
}

// Result holds the soak's figures.
type Result struct {
	Seed            uint64
	Delivery        string
	Started         time.Time
	Committed       int // rows committed
	CommittedTxs    int
	RolledBack      int // rows rolled back
	RolledBackTxs   int
	Ambiguous       int // commits whose outcome was resolved by looking (connection lost during COMMIT)
	Records         int // records read from the topic
	Duplicates      int // records beyond the first for an id
	Kills           int
	UnexpectedExits int
	// OutageExits are the exactly-once relays that exited 1 during a Kafka pause or a
	// PostgreSQL restart, or less than FaultGrace after it: each with its last error line. That
	// mode stops on a lost session or an unknown outcome and its restart replays (DESIGN.md,
	// E5); they are not UnexpectedExits.
	OutageExits       []string
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
	FirstDuplicate    string

	// Takeovers are the times from each kill -9 of the slot's holder to the next holder's
	// session (the standby's, or the killed relay's restart).
	Takeovers []time.Duration
	// ByStandby counts the takeovers by the relay that waited as a standby, not the killed
	// relay's restart.
	ByStandby int
	// Zombie is what became of the zombie; empty when there was none.
	Zombie string

	// Exactly-once only, from a read_uncommitted reader of the topic with the transaction
	// markers: the records of aborted transactions (AbortedUnreadable of them without an
	// outbox id), how many of those are rows a committed record delivered too (each a
	// duplicate had a reader seen it), how many the read_committed reader returned (none may),
	// the records of transactions still open at the end, and the records read_committed
	// returned that no transaction wrote.
	Aborted, AbortedUnreadable, AbortedDelivered, AbortedSeen, OpenAtEnd, NonTransactional int
}

// Print writes the figures.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "cdc-chaos: %s, seed %d, relay logs in %s\n", r.Delivery, r.Seed, r.LogDir)
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
	fmt.Fprintf(w, "  faults:     %d relay kill -9s, %s; %d unexpected relay exits, %d exits during an outage\n", r.Kills, strings.Join(faults, ", "), r.UnexpectedExits, len(r.OutageExits))
	for _, e := range r.OutageExits {
		fmt.Fprintf(w, "    exit during an outage: %s\n", e)
	}
	fmt.Fprintf(w, "  delivered:  %d records; %d committed ids lost, %d rolled-back ids delivered, %d keys out of commit order, %d dead letters\n",
		r.Records, r.Lost, r.RolledBackSeen, r.OrderViolations, r.DeadLettered)
	pct := 0.0
	if r.Committed > 0 {
		pct = 100 * float64(r.Duplicates) / float64(r.Committed)
	}
	fmt.Fprintf(w, "  duplicates: %d (%.2f%% of committed rows); largest from one crash: %d (kill #%d)\n",
		r.Duplicates, pct, r.MaxDupsOneCrash, r.MaxDupsCrash)
	fmt.Fprintf(w, "  by fault:   %s\n", r.dupsByFault())
	if r.Delivery == ExactlyOnce {
		fmt.Fprintf(w, "  aborted:    %d records in aborted transactions (%d of them rows a committed record delivered too), %d read by the read_committed reader; "+
			"%d records in transactions still open at the end, %d read_committed records written outside a transaction\n",
			r.Aborted, r.AbortedDelivered, r.AbortedSeen, r.OpenAtEnd, r.NonTransactional)
	}
	if len(r.Takeovers) > 0 {
		t := slices.Clone(r.Takeovers)
		slices.Sort(t)
		fmt.Fprintf(w, "  takeovers:  %d after a kill -9 of the slot's holder (%d by the standby, the others by the killed relay's restart): median %s, longest %s\n",
			len(t), r.ByStandby, t[len(t)/2].Round(time.Millisecond), t[len(t)-1].Round(time.Millisecond))
	}
	if r.Zombie != "" {
		fmt.Fprintf(w, "  zombie:     %s\n", r.Zombie)
	}
	fmt.Fprintf(w, "  caught up:  %s after writing ended; total %s\n", r.CatchUpTime.Round(time.Millisecond), r.TotalTime.Round(time.Millisecond))
	if r.FirstOrderProblem != "" {
		fmt.Fprintf(w, "  first order problem: %s\n", r.FirstOrderProblem)
	}
	if r.FirstDuplicate != "" && r.Delivery == ExactlyOnce {
		fmt.Fprintf(w, "  first duplicate: %s\n", r.FirstDuplicate)
	}
}

// PrintSideBySide writes a table of the runs' verdicts, one column per run (at-least-once
// beside exactly-once).
func PrintSideBySide(w io.Writer, rs []*Result) {
	row := func(name string, f func(r *Result) string) {
		fmt.Fprintf(w, "| %s |", name)
		for _, r := range rs {
			fmt.Fprintf(w, " %s |", f(r))
		}
		fmt.Fprintln(w)
	}
	itoa := func(f func(r *Result) int) func(r *Result) string {
		return func(r *Result) string { return strconv.Itoa(f(r)) }
	}
	eos := func(f func(r *Result) int) func(r *Result) string {
		return func(r *Result) string {
			if r.Delivery != ExactlyOnce {
				return "–"
			}
			return strconv.Itoa(f(r))
		}
	}
	fmt.Fprintln(w)
	row("delivery", func(r *Result) string { return r.Delivery })
	fmt.Fprintf(w, "|---|%s\n", strings.Repeat("---:|", len(rs)))
	row("rows committed", itoa(func(r *Result) int { return r.Committed }))
	row("rows rolled back", itoa(func(r *Result) int { return r.RolledBack }))
	row("kill -9s", itoa(func(r *Result) int { return r.Kills }))
	row("takeovers after a kill (by the standby)", func(r *Result) string { return fmt.Sprintf("%d (%d)", len(r.Takeovers), r.ByStandby) })
	row("zombie", func(r *Result) string {
		if r.Zombie == "" {
			return "none"
		}
		return "yes"
	})
	row("records read", itoa(func(r *Result) int { return r.Records }))
	row("lost", itoa(func(r *Result) int { return r.Lost }))
	row("duplicates", itoa(func(r *Result) int { return r.Duplicates }))
	row("keys out of order", itoa(func(r *Result) int { return r.OrderViolations }))
	row("rolled-back rows delivered", itoa(func(r *Result) int { return r.RolledBackSeen }))
	row("aborted records (read_uncommitted)", eos(func(r *Result) int { return r.Aborted }))
	row("aborted records read (read_committed)", eos(func(r *Result) int { return r.AbortedSeen }))
	row("unexpected relay exits", itoa(func(r *Result) int { return r.UnexpectedExits }))
	row("verdict", func(r *Result) string {
		if r.Err() != nil {
			return "**FAIL**"
		}
		return "pass"
	})
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
	if r.Delivery == ExactlyOnce {
		if r.Duplicates > 0 {
			errs = append(errs, fmt.Errorf("%d duplicates read read_committed, exactly-once allows none (first: %s)", r.Duplicates, r.FirstDuplicate))
		}
		if r.AbortedSeen > 0 {
			errs = append(errs, fmt.Errorf("the read_committed reader returned %d records of aborted transactions", r.AbortedSeen))
		}
		if r.NonTransactional > 0 {
			errs = append(errs, fmt.Errorf("%d records were written outside a transaction", r.NonTransactional))
		}
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
	ckpt    string // the checkpoint topic (exactly-once)
	sup     *supervisor
	v       *verifier

	logMu  sync.Mutex // Log is written by the writer, the kill loop and the faults
	mu     sync.Mutex
	events []Event
	// faulting is set while Kafka is paused or PostgreSQL restarts, and faultEnd is when the
	// last of those ended: an exactly-once relay may exit 1 on what they do to it (E5).
	faulting bool
	faultEnd time.Time
	// faultMu serializes a PostgreSQL restart with relay restarts: a relay whose preflight
	// meets a stopped server exits (correctly) with an error, which would count as unexpected.
	faultMu sync.Mutex
}

func (s *soak) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.log, "[chaos %s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// outage marks the start (true) or the end (false) of a Kafka pause or a PostgreSQL restart.
func (s *soak) outage(on bool) {
	s.mu.Lock()
	s.faulting = on
	if !on {
		s.faultEnd = time.Now()
	}
	s.mu.Unlock()
}

// FaultGrace is how long after a Kafka pause or a PostgreSQL restart an exactly-once relay's
// exit is put down to it.
const FaultGrace = 10 * time.Second

// inOutage reports whether a Kafka pause or a PostgreSQL restart is in effect, or ended less
// than FaultGrace ago.
func (s *soak) inOutage() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faulting || (!s.faultEnd.IsZero() && time.Since(s.faultEnd) < FaultGrace)
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
	} else if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: --log-dir: %w", err)
	}
	for _, sc := range []string{"kafka-ctl.sh", "pg-ctl.sh"} {
		if _, err := os.Stat(filepath.Join(cfg.Scripts, sc)); err != nil {
			return nil, fmt.Errorf("chaos: %s not found in --scripts %s: %w", sc, cfg.Scripts, err)
		}
	}
	s := &soak{cfg: cfg, log: cfg.Log, rng: rand.New(rand.NewPCG(cfg.Seed, 1)), killRng: rand.New(rand.NewPCG(cfg.Seed, 2)),
		table: "public." + cfg.Name, topic: cfg.Name + ".events", dlq: cfg.Name + ".dlq", ckpt: cfg.Name + ".checkpoints"}
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
	cleanup, err := s.setup(ctx, kcl, adm)
	if cleanup != nil && !cfg.Keep {
		defer cleanup()
	}
	if err != nil {
		return nil, err
	}

	res := &Result{Seed: cfg.Seed, Delivery: cfg.Delivery, LogDir: cfg.LogDir, Started: began}
	s.logf("seed %d, %s: %d rows at %d rows/s into %s, relay killed every ~%s (standby=%v), Kafka paused %s once, zombie=%v, PostgreSQL restarted once=%v; relay logs in %s",
		cfg.Seed, cfg.Delivery, cfg.Rows, cfg.Rate, s.table, cfg.KillEvery, !cfg.NoStandby, cfg.Pause, s.zombieOn(), !cfg.NoPGRestart, cfg.LogDir)

	v, err := newVerifier(cfg.Brokers, s.topic, s.dlq, cfg.Delivery == ExactlyOnce)
	if err != nil {
		return nil, err
	}
	defer v.close()
	s.v = v

	sup := newSupervisor(s)
	s.sup = sup
	defer sup.stop()
	if err := sup.begin(ctx); err != nil {
		return nil, err
	}

	wctx, cancelWrite := context.WithCancel(ctx)
	defer cancelWrite()
	w := newWriter(s)
	progress := make(chan int, 16)
	werr := make(chan error, 1)
	go func() { werr <- w.run(wctx, progress) }()

	// Faults: kills throughout the writing; one zombie, one Kafka pause and one Postgres
	// restart, one after the other, from a fifth of the rows on.
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
	if err := sup.ensureRunning(); err != nil {
		return nil, err
	}
	if err := v.waitFor(ctx, w.committedSet(), cfg.CatchUp); err != nil {
		s.logf("%v", err)
	}
	res.CatchUpTime = time.Since(writeEnd)
	// Give a replay in progress a moment to land, so that duplicates are counted whole.
	time.Sleep(2 * time.Second)
	sup.stop()
	res.Kills, res.UnexpectedExits, res.OutageExits, res.Takeovers, res.ByStandby, res.Zombie = sup.kills, sup.unexpected, sup.outageExits, sup.takeovers, sup.byStandby, sup.zombieFate()
	if v.markers != nil {
		if err := s.markersCaughtUp(ctx, adm); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	res.Events = append([]Event(nil), s.events...)
	s.mu.Unlock()
	v.check(w, res)
	res.TotalTime = time.Since(began)
	return res, nil
}

// zombieOn reports whether the run has a zombie: it needs a standby to take over.
func (s *soak) zombieOn() bool { return !s.cfg.NoZombie && !s.cfg.NoStandby }

// markersCaughtUp waits until the read_uncommitted reader of the markers has read the topic
// to its end (every relay has stopped, so every transaction has ended).
func (s *soak) markersCaughtUp(ctx context.Context, adm *kadm.Client) error {
	deadline := time.Now().Add(time.Minute)
	for {
		offs, err := adm.ListEndOffsets(ctx, s.topic)
		if err == nil {
			err = offs.Error()
		}
		if err == nil {
			ends := map[int32]int64{}
			offs.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
			if s.v.markers.caughtUp(ends) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: the read_uncommitted reader did not reach the end of %s within a minute (%v)", s.topic, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// setup creates the outbox table, the slot and publication (with the relay's CLI) and the
// topics, and returns what removes them.
func (s *soak) setup(ctx context.Context, kcl *kgo.Client, adm *kadm.Client) (func(), error) {
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
		_, _ = adm.DeleteTopics(c, s.topic, s.dlq, s.ckpt)
	}
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, s.topic); err != nil {
		return cleanup, fmt.Errorf("chaos: create topic %s: %w", s.topic, err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, s.dlq); err != nil {
		return cleanup, fmt.Errorf("chaos: create topic %s: %w", s.dlq, err)
	}
	if s.cfg.Delivery == ExactlyOnce {
		if err := kafkatxn.EnsureCheckpointTopic(ctx, kcl, s.ckpt, 1); err != nil {
			return cleanup, fmt.Errorf("chaos: create checkpoint topic %s: %w", s.ckpt, err)
		}
	}
	out, err := exec.CommandContext(ctx, s.cfg.RelayBin, "slot", "create", "--pg-url", s.cfg.PGURL, "--slot", s.cfg.Name,
		"--publication", s.cfg.Name, "--table", s.table).CombinedOutput()
	if err != nil {
		return cleanup, fmt.Errorf("chaos: cdc-relay slot create: %w\n%s", err, out)
	}
	return cleanup, nil
}

// faults makes the slot's holder a zombie at a fifth of the rows (supervisor.zombie), pauses
// Kafka once at two fifths and restarts PostgreSQL once at three fifths, one after the other,
// until the writing ends (wctx). A pause lasts its full length unless the run is abandoned
// (ctx). Result.Events says which faults happened.
func (s *soak) faults(ctx, wctx context.Context, progress <-chan int) error {
	steps := []struct {
		name  string
		on    bool
		fifth int
		run   func() error
	}{
		{"zombie", s.zombieOn(), 1, func() error { return s.sup.zombie(ctx) }},
		{"kafka-pause", s.cfg.Pause >= 0, 2, func() error { return s.pauseKafka(ctx) }},
		{"pg-restart", !s.cfg.NoPGRestart, 3, s.restartPostgres},
	}
	for _, st := range steps {
		for st.on {
			var n int
			select {
			case <-wctx.Done():
				s.logf("writing ended before every fault was injected: no %s and none after it", st.name)
				return nil
			case n = <-progress:
			}
			if n >= st.fifth*s.cfg.Rows/5 {
				if err := st.run(); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// pauseKafka pauses the broker (SIGSTOP) for Pause.
func (s *soak) pauseKafka(ctx context.Context) error {
	s.logf("Kafka: pause for %s", s.cfg.Pause)
	if err := s.script("kafka-ctl.sh", "pause"); err != nil {
		return err
	}
	s.event("kafka-pause", 0)
	s.outage(true)
	defer s.outage(false)
	select { // the outage is the scenario; it ends early only when the run is abandoned
	case <-time.After(s.cfg.Pause):
	case <-ctx.Done():
	}
	if err := s.script("kafka-ctl.sh", "resume"); err != nil {
		return err
	}
	s.logf("Kafka: resumed")
	return nil
}

// restartPostgres restarts the server (-m fast), with no relay starting meanwhile.
func (s *soak) restartPostgres() error {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.logf("PostgreSQL: restart -m fast")
	s.event("pg-restart", 0)
	s.outage(true)
	defer s.outage(false)
	if err := s.script("pg-ctl.sh", "restart"); err != nil {
		return err
	}
	s.logf("PostgreSQL: back")
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
