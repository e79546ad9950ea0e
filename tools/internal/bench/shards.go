package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// DefaultShardCounts are the shard counts `cdc-bench shards` compares, 1 first: the others are
// read against it.
var DefaultShardCounts = []int{1, 2, 4}

// The cases of the shard filter's cost (`cdc-bench shards`' second table): pg_recvlogical
// streaming one backlog, every row with the same key, through the plain publication, through
// the shard's publication whose row filter every row passes, and through the other shard's,
// whose filter every row fails (the walsender decodes each row, evaluates the filter and skips
// it).
const (
	FilterNone = "no filter"
	FilterPass = "filter, every row sent"
	FilterSkip = "filter, every row skipped"
)

// FilterCases are the filter cases in the order their drains are interleaved.
var FilterCases = []string{FilterNone, FilterPass, FilterSkip}

// ShardsConfig configures `cdc-bench shards`. The services, binary, output, progress,
// Partitions and DrainTimeout come from Config.
type ShardsConfig struct {
	Config
	// Rows of the backlog each shard count drains. Default 200,000.
	Rows int
	// TxSize is the rows per transaction the backlog is written with. Default 1.
	TxSize int
	// Shards are the shard counts compared, side by side on one backlog: N relays `run
	// --shard I/N`, one per shard, on one topic. 0 is the unsharded relay (a plain slot and
	// publication). Default DefaultShardCounts.
	Shards []int
	// FilterRows of the filter-cost backlog (every row one key). Default Rows; negative
	// leaves the filter table out.
	FilterRows int
	// Repeats of each drain, interleaved in a rotating order; the tables give the median.
	// Default 3.
	Repeats int
}

func (c ShardsConfig) withDefaults() ShardsConfig {
	orDefault(&c.Rows, 200_000)
	orDefault(&c.TxSize, 1)
	orDefault(&c.FilterRows, c.Rows)
	orDefault(&c.Repeats, 3)
	if len(c.Shards) == 0 {
		c.Shards = DefaultShardCounts
	}
	c.Config.Repeats = c.Repeats
	c.SkipBacklog = c.FilterRows < 0 // pg_recvlogical is needed for the filter's table only
	c.Config = c.Config.withDefaults()
	return c
}

// Validate reports a configuration that cannot run (after defaults).
func (c ShardsConfig) Validate() error {
	c = c.withDefaults()
	errs := []error{c.Config.Validate()}
	if c.Rows <= 0 || c.TxSize <= 0 || c.Repeats <= 0 {
		errs = append(errs, errors.New("bench: rows, transaction size and repeats must be > 0"))
	}
	seen := map[int]bool{}
	for _, n := range c.Shards {
		if n < 0 || n > slotstore.MaxShards {
			errs = append(errs, fmt.Errorf("bench: %d shards: want 1 to %d (or 0, the unsharded relay)", n, slotstore.MaxShards))
		}
		if seen[n] {
			errs = append(errs, fmt.Errorf("bench: %d shards given twice", n))
		}
		seen[n] = true
	}
	return errors.Join(errs...)
}

// ParseShardCounts parses "1,2,4".
func ParseShardCounts(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > slotstore.MaxShards {
			return nil, fmt.Errorf("bench: shard count %q: want a number from 1 to %d (0: the unsharded relay), e.g. 1,2,4", p, slotstore.MaxShards)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("bench: shard count %d given twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// ShardsResult is one shard count draining the backlog: the median of its drains.
type ShardsResult struct {
	Shards  int             `json:"shards"` // 0: the unsharded relay
	Rows    int             `json:"rows"`
	Elapsed time.Duration   `json:"elapsed_ns"` // median: the first relay's start to every row on Kafka
	Runs    []time.Duration `json:"runs_ns"`
	Rate    float64         `json:"rows_per_s"`
	// WalsenderCPU is each shard's walsender's median CPU time over the drains (in shard
	// order; each walsender decodes the whole backlog and sends its shard's rows); nil when
	// the walsenders were not visible from here (PostgreSQL on another host).
	WalsenderCPU []time.Duration `json:"walsender_cpu_ns,omitempty"`
	// RelayCPU is the median of the drains' CPU time of all the shard's relays together.
	RelayCPU time.Duration `json:"relay_cpu_ns"`
	// Machine is the busiest of the drains' machine states.
	Machine *MachineState `json:"machine,omitempty"`
}

// FilterResult is one filter case: pg_recvlogical's median drain and its walsender's CPU.
type FilterResult struct {
	Case         string          `json:"case"`
	Rows         int             `json:"rows"`
	Elapsed      time.Duration   `json:"elapsed_ns"`
	WalsenderCPU *time.Duration  `json:"walsender_cpu_ns,omitempty"`
	WalsenderRun []time.Duration `json:"walsender_runs_ns,omitempty"`
	Machine      *MachineState   `json:"machine,omitempty"`
}

// ShardsReport is what `cdc-bench shards` measured.
type ShardsReport struct {
	Started time.Time `json:"started"`
	Command string    `json:"command,omitempty"`
	Prefix  string    `json:"prefix"` // every table, slot, publication and topic the run made starts with it
	Rows    int       `json:"rows"`
	TxSize  int       `json:"tx_size"`
	Repeats int       `json:"repeats"`
	// Before is the machine in the seconds before the first measurement (flagged busy when
	// others used it: the run goes on, and says so).
	Before *MachineState  `json:"machine_before,omitempty"`
	Drains []ShardsResult `json:"drains"`
	Filter []FilterResult `json:"filter,omitempty"`
}

// RunShards runs `cdc-bench shards` and writes shards.md and shards.json into OutDir. It
// returns the report (with the results up to then) even when a phase failed.
func RunShards(ctx context.Context, sc ShardsConfig) (*ShardsReport, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	sc = sc.withDefaults()
	rep := &ShardsReport{Started: time.Now(), Command: sc.Command, Rows: sc.Rows, TxSize: sc.TxSize, Repeats: sc.Repeats}
	return runReport(ctx, sc.Config, "tables, slots, publications and topics", "shards", rep, func(e *env) error {
		rep.Prefix, rep.Before = e.prefix, e.machineBefore(ctx)
		if err := e.shardDrains(ctx, sc, rep); err != nil || sc.FilterRows <= 0 {
			return err
		}
		return e.filterCost(ctx, sc, rep)
	})
}

// machineBefore samples the machine for 3 seconds before anything is measured and says so
// when it is busy: every drain's own state is flagged in the tables as well.
func (e *env) machineBefore(ctx context.Context) *MachineState {
	mw := e.watchMachine()
	sleep(ctx, 3*time.Second)
	m := mw.stop()
	if m.Busy {
		e.progress("the machine is busy before measuring (%s): the drains' figures will be a share of it; rerun on a quiet machine to publish them", m.Why)
	} else {
		e.progress("the machine before measuring: %s", m)
	}
	return m
}

// shardSlots runs `cdc-relay slot create --shards n` (n 0: plain `slot create`) for the
// fixture's outbox, slot base slot and publication base f.base, and returns the shards'
// slots, in shard order. Slots and publications are dropped at cleanup.
func (e *env) shardSlots(ctx context.Context, f *fixture, slot string, n int) ([]string, error) {
	if n == 0 {
		return []string{slot}, e.createRelaySlot(ctx, f, slot)
	}
	var slots []string
	for _, s := range slotstore.AllShards(n) {
		ss, pub := s.Slot(slot), s.Publication(f.base)
		slots = append(slots, ss)
		e.onClose(func(ctx context.Context) {
			e.dropSlot(ctx, ss)
			_, _ = e.pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{pub}.Sanitize())
		})
	}
	out, err := exec.CommandContext(ctx, e.bin, "slot", "create", "--pg-url", e.cfg.PGURL, "--shards", strconv.Itoa(n),
		"--slot", slot, "--publication", f.base, "--table", f.outbox).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("bench: cdc-relay slot create --shards %d: %w\n%s", n, err, out)
	}
	return slots, nil
}

// waitFlushed waits until the WAL written so far is flushed (a walsender sends only flushed
// WAL: the first drain would pay for it) and returns its end.
func (e *env) waitFlushed(ctx context.Context) (string, error) {
	var end string
	if err := e.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
		return "", err
	}
	return end, waitUntil(ctx, time.Minute, nil, "the WAL to be flushed", func() (bool, error) {
		var flushed bool
		err := e.pool.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, end).Scan(&flushed)
		return flushed, err
	})
}

// shardDrains drains Repeats backlogs, one per round: each round makes every shard count's
// slots, writes the backlog, then drains it with each count in a rotating order. A round at
// a time, so that the slots alive at once are one round's (max_replication_slots).
func (e *env) shardDrains(ctx context.Context, sc ShardsConfig, rep *ShardsReport) error {
	defer e.cleanupTo(e.mark())
	n := sc.Rows
	need := 0
	for _, count := range sc.Shards {
		need += max(count, 1)
	}
	if err := e.freeSlots(ctx, need); err != nil {
		return err
	}
	f, err := e.newFixture(ctx, "shards")
	if err != nil {
		return err
	}
	runs := map[int][]shardRun{}
	for k := 0; k < sc.Repeats; k++ {
		// The slots precede the round's rows and follow the last round's: each decodes
		// exactly this round's backlog.
		slots := map[int][]string{}
		for _, count := range sc.Shards {
			s, err := e.shardSlots(ctx, f, shardsSlotBase(f, count, k), count)
			if err != nil {
				return err
			}
			slots[count] = s
		}
		phase := fmt.Sprintf("shards: %d rows in %d-row transactions (round %d/%d)", n, sc.TxSize, k+1, sc.Repeats)
		if _, err := e.writeBacklog(ctx, phase, func(progress func(int)) error {
			return backlogLoad(ctx, e.pool, f, n, sc.TxSize, 0, progress)
		}, n); err != nil {
			return err
		}
		for i := range sc.Shards {
			count := sc.Shards[(i+k)%len(sc.Shards)]
			label := fmt.Sprintf("%s: %d shards", phase, count)
			topic := fmt.Sprintf("%s.n%d.%d", f.topic, count, k)
			if err := e.createTopic(ctx, topic); err != nil {
				return err
			}
			r, err := e.shardDrain(ctx, label, f, count, shardsSlotBase(f, count, k), slots[count], topic, n)
			if err != nil {
				return err
			}
			runs[count] = append(runs[count], r)
			for _, s := range slots[count] {
				e.dropSlot(ctx, s) // drained: its WAL is no longer needed
			}
		}
	}
	for _, count := range sc.Shards {
		rep.Drains = append(rep.Drains, summarizeShards(count, n, runs[count]))
	}
	return nil
}

// freeSlots fails, saying what to change, when the server has fewer than need replication
// slots free (max_replication_slots less the slots that exist).
func (e *env) freeSlots(ctx context.Context, need int) error {
	var max, used int
	if err := e.pool.QueryRow(ctx, `SELECT current_setting('max_replication_slots')::int, (SELECT count(*) FROM pg_replication_slots)`).Scan(&max, &used); err != nil {
		return err
	}
	if max-used < need {
		return fmt.Errorf("bench: the shard counts need %d replication slots at once and the server has %d free (max_replication_slots %d, %d in use): compare fewer shard counts, or raise max_replication_slots", need, max-used, max, used)
	}
	return nil
}

// writeBacklog runs write (n rows), printing its progress under phase, waits for the WAL to
// be flushed and returns its end.
func (e *env) writeBacklog(ctx context.Context, phase string, write func(progress func(int)) error, n int) (string, error) {
	e.progress("%s: writing", phase)
	start := time.Now()
	var last atomic.Int64
	err := write(func(done int) {
		if now := time.Now().UnixNano(); now-last.Load() >= int64(time.Second) || done >= n {
			last.Store(now)
			e.progress("%s: %d/%d rows written", phase, done, n)
		}
	})
	if err != nil {
		return "", err
	}
	end, err := e.waitFlushed(ctx)
	if err != nil {
		return "", err
	}
	e.progress("%s: written in %.1fs, WAL end %s", phase, time.Since(start).Seconds(), end)
	return end, nil
}

// shardsSlotBase is the slot (shards: the slots' base) of shard count count's drain k.
func shardsSlotBase(f *fixture, count, k int) string {
	return fmt.Sprintf("%s_n%dr%d", f.base, count, k)
}

// shardRun is one drain by one shard count's relays.
type shardRun struct {
	elapsed  time.Duration
	relayCPU time.Duration
	walCPU   []time.Duration // per shard
	walOK    bool            // every walsender was measured
	machine  *MachineState
}

// shardDrain starts count relays (`run --slot base --shard I/count`; one plain `run --slot
// base` for 0) on one topic, at once, and times them until Kafka holds all n rows, sampling the
// walsender of each of slots (the shards' slots, in shard order).
func (e *env) shardDrain(ctx context.Context, label string, f *fixture, count int, base string, slots []string, topic string, n int) (shardRun, error) {
	var procs []publisherRun
	defer func() {
		for _, p := range procs {
			_ = p.finish()
		}
	}()
	mw := e.watchMachine()
	defer mw.stop()
	var ws []*walsenderWatch
	for i := range slots {
		pub := Publisher{Name: "run"}
		if count > 0 {
			pub.Args = []string{"--shard", slotstore.Shard{Index: i, Count: count}.String()}
		}
		p, err := e.launch(ctx, pub, f, base, topic, fmt.Sprintf("shards-%s-%d", topic, i))
		if err != nil {
			return shardRun{}, err
		}
		procs = append(procs, p)
	}
	defer func() {
		for _, w := range ws {
			w.stop()
		}
	}()
	for _, slot := range slots {
		ws = append(ws, e.watchWalsender(ctx, slot))
	}
	start := procs[0].startedAt()
	var acked atomic.Int64
	stopTicker := e.tickProgress(label, func() string { return fmt.Sprintf("%d/%d acknowledged by Kafka", acked.Load(), n) })
	var done time.Time
	err := waitUntil(ctx, e.cfg.DrainTimeout, anyFailed(procs), fmt.Sprintf("%d shards to drain %d rows", count, n), func() (bool, error) {
		v, err := e.endOffsets(ctx, topic)
		if err != nil {
			return false, nil // a transient metadata error: ask again
		}
		acked.Store(v)
		done = time.Now()
		return v >= int64(n), nil
	})
	stopTicker()
	if err != nil {
		return shardRun{}, err
	}
	r := shardRun{elapsed: done.Sub(start), machine: mw.stop(), walOK: true}
	for _, w := range ws {
		cpu, ok := w.stop() // before the relays stop, and their walsenders with them
		r.walCPU, r.walOK = append(r.walCPU, cpu), r.walOK && ok
	}
	for _, p := range procs {
		if err := p.finish(); err != nil {
			return shardRun{}, err
		}
		r.relayCPU += p.cpu()
	}
	procs = nil
	// Each row is in exactly one shard: more records than rows after a clean drain means
	// shards that overlap (or a relay that ignored its shard), and a rate of duplicates.
	if held, err := e.endOffsets(ctx, topic); err != nil {
		return shardRun{}, err
	} else if held != int64(n) {
		return shardRun{}, fmt.Errorf("bench: %d shards published %d records for %d rows: every row must be in exactly one shard", count, held, n)
	}
	var wal time.Duration
	for _, c := range r.walCPU {
		wal += c
	}
	e.progress("%s: %.2fs (%.0f rows/s), relays' CPU %.2fs, walsenders' CPU %.2fs", label, r.elapsed.Seconds(),
		float64(n)/r.elapsed.Seconds(), r.relayCPU.Seconds(), wal.Seconds())
	return r, nil
}

// anyFailed reports the first of procs that stopped by itself.
type anyFailed []publisherRun

func (a anyFailed) failed() error {
	for _, p := range a {
		if err := p.failed(); err != nil {
			return err
		}
	}
	return nil
}

// summarizeShards takes the median drain, relay CPU and each walsender's CPU of the runs.
func summarizeShards(count, n int, runs []shardRun) ShardsResult {
	r := ShardsResult{Shards: count, Rows: n}
	var el, cpu []time.Duration
	walOK := len(runs) > 0
	var machines []*MachineState
	for _, x := range runs {
		r.Runs = append(r.Runs, x.elapsed)
		el, cpu = append(el, x.elapsed), append(cpu, x.relayCPU)
		walOK = walOK && x.walOK
		machines = append(machines, x.machine)
	}
	r.Machine = worst(machines)
	if len(el) == 0 {
		return r
	}
	slices.Sort(el)
	slices.Sort(cpu)
	r.Elapsed, r.RelayCPU = el[len(el)/2], cpu[len(cpu)/2]
	r.Rate = float64(n) / r.Elapsed.Seconds()
	if walOK {
		for i := range runs[0].walCPU {
			var w []time.Duration
			for _, x := range runs {
				w = append(w, x.walCPU[i])
			}
			slices.Sort(w)
			r.WalsenderCPU = append(r.WalsenderCPU, w[len(w)/2])
		}
	}
	return r
}

// filterCost streams Repeats backlogs of FilterRows rows that all have one key, one per
// round, with pg_recvlogical through the plain publication, the key's shard's (of 2) and the
// other shard's, in a rotating order, measuring each walsender's CPU.
func (e *env) filterCost(ctx context.Context, sc ShardsConfig, rep *ShardsReport) error {
	defer e.cleanupTo(e.mark())
	n := sc.FilterRows
	if err := e.freeSlots(ctx, len(FilterCases)); err != nil {
		return err
	}
	f, err := e.newFixture(ctx, "shardfilter")
	if err != nil {
		return err
	}
	const key = "order-0"
	var keyShard int
	if err := e.pool.QueryRow(ctx, `SELECT (hashtext($1::text) & 2147483647) % 2`, key).Scan(&keyShard); err != nil {
		return err
	}
	pubs := map[string]string{
		FilterNone: f.base,
		FilterPass: slotstore.Shard{Index: keyShard, Count: 2}.Publication(f.base),
		FilterSkip: slotstore.Shard{Index: 1 - keyShard, Count: 2}.Publication(f.base),
	}
	// The publications precede the slots (a slot decoding changes from before its
	// publication existed fails), and the slots the rows.
	if err := e.createPublication(ctx, f); err != nil {
		return err
	}
	runs := map[string][]drainRun{}
	for k := 0; k < sc.Repeats; k++ {
		// slot create --shards 2 makes both shards' publications (the first time) and slots;
		// the plain publication's slot is made with SQL.
		s, err := e.shardSlots(ctx, f, fmt.Sprintf("%s_r%d", f.base, k), 2)
		if err != nil {
			return err
		}
		plain := fmt.Sprintf("%s_r%d_plain", f.base, k)
		if err := e.createPlainSlot(ctx, plain); err != nil {
			return err
		}
		slots := map[string]string{FilterNone: plain, FilterPass: s[keyShard], FilterSkip: s[1-keyShard]}
		phase := fmt.Sprintf("shard filter: %d rows of one key in %d-row transactions (round %d/%d)", n, sc.TxSize, k+1, sc.Repeats)
		end, err := e.writeBacklog(ctx, phase, func(progress func(int)) error {
			err := oneKeyLoad(ctx, e, f, key, n, sc.TxSize)
			if err == nil {
				progress(n)
			}
			return err
		}, n)
		if err != nil {
			return err
		}
		for i := range FilterCases {
			c := FilterCases[(i+k)%len(FilterCases)]
			r, err := e.recvLogical(ctx, fmt.Sprintf("%s: %s", phase, c), pubs[c], slots[c], end, n)
			if err != nil {
				return err
			}
			runs[c] = append(runs[c], r)
			e.dropSlot(ctx, slots[c])
		}
	}
	for _, c := range FilterCases {
		s := summarize(c, sc.TxSize, n, runs[c])
		rep.Filter = append(rep.Filter, FilterResult{Case: c, Rows: n, Elapsed: s.Elapsed, WalsenderCPU: s.WalsenderCPU,
			WalsenderRun: s.WalsenderRuns, Machine: s.Machine})
	}
	return nil
}

// oneKeyLoad writes n outbox rows (and their orders, as backlogLoad does) whose aggregate id
// is key, in transactions of txSize, with server-side loops and asynchronous commits.
func oneKeyLoad(ctx context.Context, e *env, f *fixture, key string, n, txSize int) error {
	tx := func(size int) string {
		return strings.Replace(backlogTx(f, size, 0), `SELECT 'order-' || o.id,`, `SELECT `+quoteLiteral(key)+`,`, 1)
	}
	if !strings.Contains(tx(txSize), quoteLiteral(key)) {
		return errors.New("bench: oneKeyLoad: backlogTx's aggregate id expression changed")
	}
	if err := loopLoad(ctx, e.pool, n, txSize, max(txSize, 10_000/txSize*txSize), tx); err != nil {
		return fmt.Errorf("bench: write the one-key backlog into %s: %w", f.outbox, err)
	}
	return nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Markdown is the two tables: the drains by shard count, and the filter's cost.
func (r *ShardsReport) Markdown() string {
	var b strings.Builder
	if r.Before != nil && r.Before.Busy {
		fmt.Fprintf(&b, "**The machine was busy before the run** (%s): the figures are a share of it.\n\n", r.Before.Why)
	}
	fmt.Fprintf(&b, "### Shards: %d rows in %d-row transactions, median of %d drains\n\n", r.Rows, r.TxSize, r.Repeats)
	b.WriteString("| shards | median drain s | rows/s | × 1 shard | walsender CPU s / 10,000 rows, each | all walsenders | relays' CPU s / 10,000 rows | machine |\n")
	b.WriteString("|---:|---:|---:|---:|---|---:|---:|---|\n")
	var one float64
	for _, d := range r.Drains {
		if d.Shards == 1 {
			one = d.Rate
		}
	}
	for _, d := range r.Drains {
		name := strconv.Itoa(d.Shards)
		if d.Shards == 0 {
			name = "unsharded"
		}
		each, all := "–", "–"
		if len(d.WalsenderCPU) > 0 && d.Rows > 0 {
			var parts []string
			var sum time.Duration
			for _, c := range d.WalsenderCPU {
				parts = append(parts, fmt.Sprintf("%.3f", cpuPer10k(c, int64(d.Rows))))
				sum += c
			}
			each, all = strings.Join(parts, ", "), fmt.Sprintf("%.3f", cpuPer10k(sum, int64(d.Rows)))
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.0f | %s | %s | %s | %.3f | %s |\n", name, d.Elapsed.Seconds(), d.Rate, ratio(d.Rate, one),
			each, all, cpuPer10k(d.RelayCPU, int64(d.Rows)), d.Machine)
	}
	b.WriteString("\nEach walsender decodes the whole backlog and sends its shard's rows: its CPU is per 10,000 rows of the backlog.\n")
	if len(r.Filter) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "\n### What a shard's filter costs a walsender: %d rows of one key, pg_recvlogical, median of %d\n\n", r.Filter[0].Rows, r.Repeats)
	b.WriteString("| publication | median drain s | walsender CPU s / 10,000 rows | × no filter | machine |\n")
	b.WriteString("|---|---:|---:|---:|---|\n")
	var none float64
	for _, f := range r.Filter {
		if f.Case == FilterNone && f.WalsenderCPU != nil {
			none = cpuPer10k(*f.WalsenderCPU, int64(f.Rows))
		}
	}
	for _, f := range r.Filter {
		cpu, x := "–", "–"
		if f.WalsenderCPU != nil {
			c := cpuPer10k(*f.WalsenderCPU, int64(f.Rows))
			cpu, x = fmt.Sprintf("%.3f", c), ratio(c, none)
		}
		fmt.Fprintf(&b, "| %s | %.2f | %s | %s | %s |\n", f.Case, f.Elapsed.Seconds(), cpu, x, f.Machine)
	}
	return b.String()
}
