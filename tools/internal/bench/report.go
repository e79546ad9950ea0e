package bench

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Report is the outcome of a benchmark run.
type Report struct {
	Started  time.Time     `json:"started"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Machine  string        `json:"machine"`
	Services string        `json:"services"`
	Command  string        `json:"command,omitempty"`
	Prefix   string        `json:"prefix"` // of every table, slot, publication and topic the run made
	// LoadAvg is /proc/loadavg's 1-minute load at the start and at the end: other work on
	// the machine shows in the numbers.
	LoadAvg [2]float64      `json:"load_avg"`
	Config  ReportConfig    `json:"config"`
	Steady  []SteadyResult  `json:"steady"`
	Backlog []BacklogResult `json:"backlog"`
	Replay  []ReplayResult  `json:"replay"`
	Targets []Target        `json:"targets"`
	// LeftOut names the publishers the run could not include, and why (no JVM, no Maven).
	LeftOut []string `json:"left_out,omitempty"`
}

// ReportConfig is the part of Config the numbers depend on.
type ReportConfig struct {
	Duration time.Duration `json:"duration_ns"`
	Rates    []int         `json:"rates"`
	Backlog  int           `json:"backlog"`
	TxSizes  []int         `json:"tx_sizes"`
	Repeats  int           `json:"repeats"`
	// SteadyRepeats is how many times each publisher ran each steady rate (0: once).
	SteadyRepeats int           `json:"steady_repeats,omitempty"`
	Writers       int           `json:"writers"`
	Partitions    int           `json:"partitions"`
	Warmup        time.Duration `json:"warmup_ns"`
	// LargeRows rows of LargePayload bytes were drained in 1-row transactions (0: not run).
	LargeRows    int `json:"large_rows"`
	LargePayload int `json:"large_payload_bytes"`
	// ReplayRate is the load of the kill -9 test (0: not run); KillAfter the kill's delay
	// after the first record.
	ReplayRate int              `json:"replay_rows_per_s"`
	KillAfter  time.Duration    `json:"kill_after_ns"`
	Debezium   []DebeziumConfig `json:"debezium,omitempty"`
}

// DebeziumConfig is what a debezium publisher changed from the shipped settings.
type DebeziumConfig struct {
	Publisher string   `json:"publisher"`
	Settings  []string `json:"settings"`
}

// Target is one of the targets with the measured value.
type Target struct {
	Name     string `json:"name"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// steadyOf returns the steady result of publisher at rate.
func (r *Report) steadyOf(publisher string, rate int) (SteadyResult, bool) {
	for _, s := range r.Steady {
		if s.Publisher == publisher && s.Rate == rate {
			return s, true
		}
	}
	return SteadyResult{}, false
}

// writeTargets writes the targets' table and a blank line.
func (r *Report) writeTargets(b *strings.Builder) {
	b.WriteString("| target | measured | met |\n|---|---|---|\n")
	for _, t := range r.Targets {
		met := "yes"
		if !t.Met {
			met = "**no**"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", t.Name, t.Measured, met)
	}
	b.WriteString("\n")
}

// evaluate fills Targets from the results present.
func (r *Report) evaluate() {
	r.Targets = nil
	add := func(name, measured string, met bool) {
		r.Targets = append(r.Targets, Target{Name: name, Measured: measured, Met: met})
	}
	if run, ok := r.steadyOf("run", 2000); ok {
		add("run at 2,000 rows/s: p50 ≤ 5 ms", ms(run.P50), run.P50 <= 5*time.Millisecond)
		add("run at 2,000 rows/s: p99 ≤ 25 ms", ms(run.P99), run.P99 <= 25*time.Millisecond)
		if poll, ok := r.steadyOf("poll 100ms", 2000); ok && run.P50 > 0 {
			x := float64(poll.P50) / float64(run.P50)
			add("run at 2,000 rows/s: p50 ≥ 10× lower than poll 100ms", fmt.Sprintf("%.1f× (%s vs %s)", x, ms(run.P50), ms(poll.P50)), x >= 10)
		}
	}
	for _, size := range r.Config.TxSizes {
		var run, recv, bestPoll BacklogResult
		for _, b := range r.Backlog {
			if b.TxSize != size || b.Payload != 0 {
				continue
			}
			switch {
			case b.Publisher == "run":
				run = b
			case b.Publisher == RecvLogical:
				recv = b
			case strings.HasPrefix(b.Publisher, "poll") && b.Rate > bestPoll.Rate:
				bestPoll = b
			}
		}
		if run.Rate == 0 {
			continue
		}
		if recv.Rate > 0 {
			x := run.Rate / recv.Rate
			add(fmt.Sprintf("backlog, %d-row transactions: run ≥ 0.7 × pg_recvlogical", size),
				fmt.Sprintf("%.2f× (%.0f vs %.0f rows/s)", x, run.Rate, recv.Rate), x >= 0.7)
		}
		if bestPoll.Rate > 0 {
			x := run.Rate / bestPoll.Rate
			add(fmt.Sprintf("backlog, %d-row transactions: run ≥ 2 × best poll", size),
				fmt.Sprintf("%.1f× (%.0f vs %s %.0f rows/s)", x, run.Rate, bestPoll.Publisher, bestPoll.Rate), x >= 2)
		}
	}
	// The large payloads: the relay against the lower of its two limits, the walsender's
	// (pg_recvlogical) and Kafka's (the same records from memory, RawProducer).
	for _, x := range r.Backlog {
		if x.Publisher != "run" || x.Payload == 0 {
			continue
		}
		var recv, raw float64
		for _, y := range r.Backlog {
			if y.TxSize == x.TxSize && y.Payload == x.Payload {
				switch y.Publisher {
				case RecvLogical:
					recv = y.MBps
				case RawProducer:
					raw = y.MBps
				}
			}
		}
		if limit := min(recv, raw); recv > 0 && raw > 0 {
			k := x.MBps / limit
			add(fmt.Sprintf("backlog, %s: run ≥ 0.9 × min(pg_recvlogical, kafka producer)", x.scenario()),
				fmt.Sprintf("%.2f× (%.1f MB/s vs pg_recvlogical %.1f, kafka producer %.1f)", k, x.MBps, recv, raw), k >= 0.9)
		}
	}
	var peak int64
	seen := false
	for _, s := range r.Steady {
		if s.Publisher == "run" {
			peak, seen = max(peak, s.PeakRSS), true
		}
	}
	if seen {
		add("run: peak RSS ≤ 64 MB during the steady runs", fmt.Sprintf("%.1f MB", mb(peak)), peak <= 64<<20)
	}
	r.evaluateDebezium(add)
	r.evaluateExactlyOnce(add)
}

// evaluateExactlyOnce adds the exactly-once targets: run-eos beside run, at every steady rate
// (p99 within run's plus the transaction interval, the most a record waits for under load),
// at 2,000 and 5,000 rows/s within fixed bounds (a relay caught up commits at once, so a
// record waits for a commit's round trip, not the interval), and every backlog (at least
// 0.9 × run's drain rate).
func (r *Report) evaluateExactlyOnce(add func(name, measured string, met bool)) {
	for _, rate := range r.Config.Rates {
		eos, ok := r.steadyOf(RunEOS, rate)
		if !ok {
			continue
		}
		switch rate {
		case 2000:
			add(fmt.Sprintf("%s at 2,000 rows/s: p50 ≤ 10 ms", RunEOS), ms(eos.P50), eos.P50 <= 10*time.Millisecond)
			add(fmt.Sprintf("%s at 2,000 rows/s: p99 ≤ 30 ms", RunEOS), ms(eos.P99), eos.P99 <= 30*time.Millisecond)
		case 5000:
			add(fmt.Sprintf("%s at 5,000 rows/s: p99 ≤ 40 ms", RunEOS), ms(eos.P99), eos.P99 <= 40*time.Millisecond)
		}
		run, ok := r.steadyOf("run", rate)
		if !ok {
			continue
		}
		limit := run.P99 + TransactionInterval
		add(fmt.Sprintf("%s at %s rows/s: p99 ≤ run's p99 + %s", RunEOS, thousands(rate), TransactionInterval),
			fmt.Sprintf("%s vs %s (run's %s; p50 %s vs %s)", ms(eos.P99), ms(limit), ms(run.P99), ms(eos.P50), ms(run.P50)), eos.P99 <= limit)
	}
	for _, x := range r.Backlog {
		if x.Publisher != RunEOS {
			continue
		}
		for _, y := range r.Backlog {
			if y.Publisher != "run" || y.TxSize != x.TxSize || y.Payload != x.Payload || y.Rate == 0 {
				continue
			}
			k := x.Rate / y.Rate
			add(fmt.Sprintf("backlog, %s: %s ≥ 0.9 × run's rate", x.scenario(), RunEOS),
				fmt.Sprintf("%.2f× (%.0f vs %.0f rows/s)", k, x.Rate, y.Rate), k >= 0.9)
		}
	}
}

// Debezium is the publisher the Debezium targets compare with: as shipped.
const Debezium = "debezium"

// evaluateDebezium adds issue 12's targets: cdc-relay against Debezium as shipped.
func (r *Report) evaluateDebezium(add func(name, measured string, met bool)) {
	run, ok1 := r.steadyOf("run", 2000)
	dbz, ok2 := r.steadyOf(Debezium, 2000)
	if ok1 && ok2 && run.P99 > 0 {
		x := float64(dbz.P99) / float64(run.P99)
		add("run at 2,000 rows/s: p99 ≤ 1/10 of debezium's", fmt.Sprintf("1/%.1f (%s vs %s)", x, ms(run.P99), ms(dbz.P99)), x >= 10)
	}
	for _, b := range r.Backlog {
		if b.Publisher != Debezium {
			continue
		}
		for _, x := range r.Backlog {
			if x.Publisher != "run" || x.TxSize != b.TxSize || x.Payload != b.Payload {
				continue
			}
			k := x.afterFirst() / b.afterFirst()
			add(fmt.Sprintf("backlog, %s: run ≥ 3 × debezium's rate", b.scenario()),
				fmt.Sprintf("%.1f× (%.0f vs %.0f rows/s after the first record; from the start %.0f vs %.0f)", k, x.afterFirst(), b.afterFirst(), x.Rate, b.Rate), k >= 3)
		}
	}
	runPeak, ok1 := r.peakRSS("run")
	dbzPeak, ok2 := r.peakRSS(Debezium)
	if ok1 && ok2 && runPeak > 0 {
		x := float64(dbzPeak) / float64(runPeak)
		add("run: peak RSS ≤ 1/10 of debezium's JVM", fmt.Sprintf("1/%.1f (%.1f vs %.1f MB)", x, mb(runPeak), mb(dbzPeak)), x >= 10)
	}
	var runRe, dbzRe *ReplayResult
	for i := range r.Replay {
		switch r.Replay[i].Publisher {
		case "run":
			runRe = &r.Replay[i]
		case Debezium:
			dbzRe = &r.Replay[i]
		}
	}
	if runRe != nil && dbzRe != nil {
		met := runRe.Duplicates*10 <= dbzRe.Duplicates
		add("kill -9: run's duplicates ≤ 1/10 of debezium's", fmt.Sprintf("%d vs %d", runRe.Duplicates, dbzRe.Duplicates), met)
	}
}

// peakRSS is the largest peak RSS of publisher in any phase.
func (r *Report) peakRSS(publisher string) (int64, bool) {
	var peak int64
	seen := false
	for _, s := range r.Steady {
		if s.Publisher == publisher {
			peak, seen = max(peak, s.PeakRSS), true
		}
	}
	for _, b := range r.Backlog {
		if b.Publisher == publisher {
			peak, seen = max(peak, b.PeakRSS), true
		}
	}
	for _, x := range r.Replay {
		if x.Publisher == publisher {
			peak, seen = max(peak, x.PeakRSS), true
		}
	}
	return peak, seen
}

// afterFirst is the drain's rate from its first record on: without the start-up, which the
// table shows apart.
func (b BacklogResult) afterFirst() float64 {
	d := b.Elapsed - b.FirstRecord
	if d <= 0 {
		return b.Rate
	}
	return float64(b.Rows) / d.Seconds()
}

// scenario names the backlog: "1-row transactions", or with the payload size.
func (b BacklogResult) scenario() string {
	s := fmt.Sprintf("%d-row transactions", b.TxSize)
	if b.Payload > 0 {
		s += fmt.Sprintf(", %s payloads", size(b.Payload))
	}
	return s
}

// size renders bytes as B or KB (1024).
func size(n int) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.0f KB", float64(n)/1024)
}

// Markdown renders the report as the table.md document.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# cdc-relay benchmark, %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "%s; %s. Suite took %s; load average %.2f at the start, %.2f at the end.\n\n",
		r.Machine, r.Services, r.Elapsed.Round(time.Second), r.LoadAvg[0], r.LoadAvg[1])
	if r.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`\n\n", r.Command)
	}
	b.WriteString(r.machineNote())

	if len(r.Steady) > 0 {
		fmt.Fprintf(&b, "## Steady load: commit to consumer latency\n\n")
		fmt.Fprintf(&b, "Single-row transactions (one order and its outbox row) at a fixed rate for %s each, from %d connections; "+
			"latency is the consumer's receipt minus the record's cdc-commit-time (commit time for run; created_at for poll and for debezium, whose EventRouter has no commit time: for a one-row transaction it is the transaction's start); "+
			"run-eos (run --delivery exactly-once) is read by a read_committed consumer, which gets a record once its Kafka transaction committed. "+
			"The first %s of each rate are a warm-up, not measured (the JVM compiles Debezium's hot code during its first seconds of load). "+
			"'To produce' is commit to the record's timestamp, when the publisher handed it to its Kafka client (millisecond precision): "+
			"the part spent before Kafka. Peak RSS is the publisher's VmHWM (debezium: its Kafka Connect JVM's, since it started); CPU is its utime+stime over its whole life per 10,000 records it published "+
			"(debezium: the JVM's while the phase's connector ran). "+
			"Server WAL is all the WAL the server wrote during the load, by anyone: a walsender decodes all of it, so other writers on the server delay run, not poll. "+
			"Kafka broker CPU is the broker's cores during the measured part (when it runs on this host) ÷ the rows committed per second, per 10,000: "+
			"the broker's work for a publisher's records, its consumer's fetches included. "+
			"Batches / record is the record batches the consumer fetched per record read: a produce request appends one batch per partition it carries, "+
			"so fewer means fuller produce requests (run-eos: the transactions' markers count as batches too). "+
			"kafka producer is no publisher but the floor under one: the same records (key, value, the contract's headers) built in memory and produced at the rate, the rows due each millisecond at once, on one processor as run is while it keeps up, "+
			"by the relay's own producer settings (acks=all, idempotent, linger 0) to the same broker; its latency is from the produce call to Kafka's acknowledgement and its CPU the benchmark's own while it produced.\n\n",
			r.Config.Duration, r.Config.Writers, r.Config.Warmup)
		b.WriteString("| publisher | target rows/s | achieved rows/s | records | p50 ms | p90 ms | p99 ms | max ms | p50 / p99 ÷ run's | to produce p50 / p99 ms | peak RSS MB | CPU s / 10k events | CPU ÷ run's | Kafka broker CPU s / 10k events | batches / record | server WAL MB/s | machine |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, s := range r.Steady {
			lat, cpu := "–", "–"
			if run, ok := r.steadyOf("run", s.Rate); ok {
				lat = ratio(float64(s.P50), float64(run.P50)) + " / " + ratio(float64(s.P99), float64(run.P99))
				cpu = ratio(cpuPer10k(s.CPU, s.Events), cpuPer10k(run.CPU, run.Events))
			}
			toProduce, rss, wal := fmt.Sprintf("%.0f / %.0f", max(0, msf(s.ToProduceP50)), max(0, msf(s.ToProduceP99))),
				fmt.Sprintf("%.1f", mb(s.PeakRSS)), fmt.Sprintf("%.1f", s.WALRate/(1<<20))
			broker, batches := "–", "–"
			if x := brokerPer10k(s); x >= 0 {
				broker = fmt.Sprintf("%.3f", x)
			}
			if s.BatchesPerRecord > 0 {
				batches = fmt.Sprintf("%.3f", s.BatchesPerRecord)
			}
			if s.Publisher == RawProducer {
				toProduce, rss, wal, batches = "–", "–", "–", "–" // in the benchmark's process, with no PostgreSQL; no consumer
			}
			fmt.Fprintf(&b, "| %s | %d | %.0f | %d | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %.3f | %s | %s | %s | %s | %s |\n",
				s.Publisher, s.Rate, s.Achieved, s.Records, msf(s.P50), msf(s.P90), msf(s.P99), msf(s.Max), lat,
				toProduce, rss, cpuPer10k(s.CPU, s.Events), cpu, broker, batches, wal, s.Machine)
		}
		b.WriteString("\n")
		if r.Config.SteadyRepeats > 1 {
			fmt.Fprintf(&b, "Each publisher ran each rate %d times, interleaved in a rotating order; the figures above are the medians, every run's (p50 / p99 ms, CPU s per 10k events) here:\n\n", r.Config.SteadyRepeats)
			for _, s := range r.Steady {
				parts := make([]string, len(s.Runs))
				for i, x := range s.Runs {
					parts[i] = fmt.Sprintf("%.1f / %.1f, %.3f", msf(x.P50), msf(x.P99), x.CPUPer10k)
					if x.Machine != nil && x.Machine.Busy {
						parts[i] += " (busy)"
					}
				}
				fmt.Fprintf(&b, "- %s at %d rows/s: %s\n", s.Publisher, s.Rate, strings.Join(parts, "; "))
			}
			b.WriteString("\n")
		}
		for _, s := range r.Steady {
			if s.SpillBytes > 0 {
				fmt.Fprintf(&b, "- %s at %d rows/s: its slot spilled %.1f MB to disk while decoding (a transaction larger than logical_decoding_work_mem, from any session).\n",
					s.Publisher, s.Rate, mb(s.SpillBytes))
			}
		}
	}
	if len(r.Backlog) > 0 {
		fmt.Fprintf(&b, "## Backlog drain\n\n")
		fmt.Fprintf(&b, "%d rows (and %d rows of %s payloads in 1-row transactions) written with no publisher running; time from starting the publisher until Kafka has acknowledged "+
			"all of them (sum of the topic's high watermarks, a fresh topic per publisher). Every slot (run, debezium, pg_recvlogical) existed before the rows were written; debezium, which has no offset of its own yet, streams its slot from the slot's position. "+
			"First record is the start to the first record on Kafka (debezium: adding the connector to its running worker), and rows/s after it leaves that start-up out. "+
			"MB/s is the record values' bytes (the payloads' JSON text) per second, MB = 2^20 bytes. pg_recvlogical (pgoutput, to /dev/null, "+
			"--endpos at the end of the backlog) is the limit of one walsender; kafka producer is the same records (key, value, the contract's headers) built in memory first and produced by the relay's own producer settings to the same broker, timed until Kafka acknowledged all: the limit of the Kafka side. run-eos's drain ends when a read_committed consumer has read every record (its high watermarks count the transactions' markers too). poll runs with --batch 100 on its own fresh copy of the backlog table. Each drain ran %d times, "+
			"interleaved with the others; seconds is the median (all runs in brackets) and the ratios are of medians. "+
			"Walsender CPU is the utime+stime of the Postgres backend that decodes the slot for the drain (median, per 10,000 events) "+
			"and walsender busy is each drain's walsender CPU ÷ that drain's seconds (median, all drains in brackets): a walsender near 100%% busy is the limit of one slot; poll has no walsender "+
			"(– also when Postgres's processes are not visible from the benchmark's host).\n\n", r.Config.Backlog, r.Config.LargeRows, size(r.Config.LargePayload), r.Config.Repeats)
		b.WriteString("| tx size | payload | publisher | seconds | rows/s | first record s | rows/s after it | MB/s | ÷ pg_recvlogical | run ÷ this | peak RSS MB | CPU s / 10k events | walsender CPU s / 10k events | walsender busy | machine (busiest drain) |\n")
		b.WriteString("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, x := range r.Backlog {
			var recv, run float64
			for _, y := range r.Backlog {
				if y.TxSize != x.TxSize || y.Payload != x.Payload {
					continue
				}
				if y.Publisher == RecvLogical {
					recv = y.Rate
				}
				if y.Publisher == "run" {
					run = y.Rate
				}
			}
			walCPU, walBusy := "–", "–"
			if x.WalsenderCPU != nil {
				walCPU = fmt.Sprintf("%.3f", cpuPer10k(*x.WalsenderCPU, int64(x.Rows)))
				walBusy = walsenderBusy(x)
			}
			first, after := "–", "–"
			if x.Publisher != RecvLogical {
				first, after = fmt.Sprintf("%.2f", x.FirstRecord.Seconds()), fmt.Sprintf("%.0f", x.afterFirst())
			}
			payload := "–"
			if x.Rows > 0 && x.ValueBytes > 0 {
				payload = size(int(x.ValueBytes / int64(x.Rows)))
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %.0f | %s | %s | %.1f | %s | %s | %.1f | %.3f | %s | %s | %s |\n", x.TxSize, payload, x.Publisher, seconds(x), x.Rate,
				first, after, x.MBps, ratio(x.Rate, recv), ratio(run, x.Rate), mb(x.PeakRSS), cpuPer10k(x.CPU, int64(x.Rows)), walCPU, walBusy, x.Machine)
		}
		b.WriteString("\n")
	}
	if len(r.Replay) > 0 {
		fmt.Fprintf(&b, "## kill -9 in the middle of a steady run\n\n")
		fmt.Fprintf(&b, "Each publisher started from nothing (debezium: its Kafka Connect JVM, then the connector, which makes its slot) while one-row transactions were written at %d rows/s; "+
			"killed -9 %s after its first record and started again at once (debezium: the JVM and the same connector, resuming from Connect's offset file, or from its slot's position when Connect had stored none) while the load went on for as long again. "+
			"Every row committed from its first record on arrived (the bench fails otherwise); duplicates are records of an outbox id read before: the kill's replay. "+
			"Startup is the start to the first record read; restart the new start to the first record the new process produced.\n\n", r.Config.ReplayRate, r.Config.KillAfter)
		b.WriteString("| publisher | rows/s | rows | killed after s | records read before the kill | duplicates | startup s | restart to first record s | peak RSS MB | machine |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, x := range r.Replay {
			fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %d | %d | %.2f | %.2f | %.1f | %s |\n", x.Publisher, x.Rate, x.Rows, x.KilledAfter.Seconds(), x.ReadBeforeKill, x.Duplicates,
				x.Startup.Seconds(), x.Restart.Seconds(), mb(x.PeakRSS), x.Machine)
		}
		b.WriteString("\n")
	}
	if len(r.Config.Debezium) > 0 {
		b.WriteString("Debezium 3.6.1.Final (PostgreSQL connector, pgoutput, snapshot.mode=no_data, outbox EventRouter, String converters) on Kafka Connect 4.3.1 standalone, the JVM options of connect-standalone.sh (-Xms256M -Xmx2G, G1). Settings changed from the shipped ones:\n\n")
		for _, d := range r.Config.Debezium {
			set := "none (as shipped)"
			if len(d.Settings) > 0 {
				set = "`" + strings.Join(d.Settings, "`, `") + "`"
			}
			fmt.Fprintf(&b, "- %s: %s\n", d.Publisher, set)
		}
		b.WriteString("\n")
	}
	if len(r.LeftOut) > 0 {
		b.WriteString("Left out of this run:\n\n")
		for _, l := range r.LeftOut {
			fmt.Fprintf(&b, "- %s\n", l)
		}
		b.WriteString("\n")
	}
	if len(r.Targets) > 0 {
		b.WriteString("## Targets\n\n")
		r.writeTargets(&b)
	}
	if len(r.Steady) > 0 {
		b.WriteString("![latency CDF](latency-cdf.svg)\n")
	}
	return b.String()
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// busy is cpu ÷ elapsed as a percentage: how much of the time a single-threaded process
// (a walsender) was on a CPU.
func busy(cpu, elapsed time.Duration) string {
	if elapsed <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*cpu.Seconds()/elapsed.Seconds())
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// loadAvg returns the 1-minute load average, or 0.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	_, _ = fmt.Sscan(string(b), &l)
	return l
}

func machine() string {
	return fmt.Sprintf("%d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// walsenderBusy is the median of the drains' walsender CPU ÷ drain time, with every drain's
// in brackets when there were several ("–" for a drain whose walsender was not seen). Per
// drain, because the drains are bimodal (DESIGN.md, "Reading a backlog"): a median CPU over
// a median time would pair numbers from different drains.
func walsenderBusy(x BacklogResult) string {
	var pcts []float64
	parts := make([]string, len(x.WalsenderRuns))
	for i, w := range x.WalsenderRuns {
		parts[i] = "–"
		if w > 0 && i < len(x.Runs) && x.Runs[i] > 0 {
			p := 100 * w.Seconds() / x.Runs[i].Seconds()
			pcts = append(pcts, p)
			parts[i] = fmt.Sprintf("%.0f", p)
		}
	}
	if len(pcts) == 0 {
		if x.WalsenderCPU != nil {
			return busy(*x.WalsenderCPU, x.Elapsed)
		}
		return "–"
	}
	slices.Sort(pcts)
	s := fmt.Sprintf("%.0f%%", pcts[len(pcts)/2])
	if len(parts) > 1 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// seconds is the median drain time, with every run in brackets when there were several.
func seconds(x BacklogResult) string {
	s := fmt.Sprintf("%.2f", x.Elapsed.Seconds())
	if len(x.Runs) > 1 {
		parts := make([]string, len(x.Runs))
		for i, r := range x.Runs {
			parts[i] = fmt.Sprintf("%.2f", r.Seconds())
		}
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// phases returns every phase's label and machine state, in the report's order.
func (r *Report) phases() (labels []string, states []*MachineState) {
	for _, x := range r.Replay {
		labels, states = append(labels, "kill -9 "+x.Publisher), append(states, x.Machine)
	}
	for _, x := range r.Steady {
		labels, states = append(labels, fmt.Sprintf("steady %s at %d rows/s", x.Publisher, x.Rate)), append(states, x.Machine)
	}
	for _, x := range r.Backlog {
		labels, states = append(labels, fmt.Sprintf("backlog %s, %s", x.scenario(), x.Publisher)), append(states, x.Machine)
	}
	return labels, states
}

// BusyPhases returns the labels of the phases whose machine was busy.
func (r *Report) BusyPhases() []string {
	var busy []string
	labels, states := r.phases()
	for i, m := range states {
		if m != nil && m.Busy {
			s := labels[i] + ": " + m.Why
			if len(m.Top) > 0 {
				s += " (" + strings.Join(m.Top, ", ") + ")"
			}
			busy = append(busy, s)
		}
	}
	return busy
}

// machineNote says, above the tables, how the machine column reads and which phases ran on a
// busy machine.
func (r *Report) machineNote() string {
	_, states := r.phases()
	seen := false
	for _, m := range states {
		seen = seen || m != nil
	}
	if !seen {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The machine column is what the machine did besides the benchmark while each phase was measured (/proc, sampled once a second): "+
		"the CPU of other processes (not the benchmark, its publishers, load writers and consumers, nor the PostgreSQL server and Kafka broker it uses), "+
		"the CPU the hypervisor stole, and the 1-minute load average's range (the benchmark's own work included). "+
		"A phase is **busy** when others used %.1f cores or more, or steal reached %.0f %%: its absolute figures are those of a share of the machine, "+
		"and only the ratios of publishers measured side by side compare.\n\n", BusyCores, BusySteal)
	if busy := r.BusyPhases(); len(busy) > 0 {
		fmt.Fprintf(&b, "**%d of %d phases ran on a busy machine; do not publish their absolute figures:**\n\n", len(busy), len(states))
		for _, x := range busy {
			fmt.Fprintf(&b, "- %s\n", x)
		}
		b.WriteString("\n")
	} else {
		b.WriteString("No phase ran on a busy machine.\n\n")
	}
	return b.String()
}
