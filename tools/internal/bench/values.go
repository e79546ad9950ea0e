package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cdc-relay/cdc-relay/testkit/orderevent"
)

// ValueFormats are the value formats `cdc-bench values` compares, json first: the others are
// read against it.
var ValueFormats = []string{"json", "avro", "protobuf"}

// DefaultCodecs are the --compression settings `cdc-bench values` compares, none first: the
// others are read against it.
var DefaultCodecs = []string{"none", "snappy", "lz4", "zstd:1", "gzip"}

// RelayDefaultCodec is cdc-relay's default --compression (docs/configuration.md).
const RelayDefaultCodec = "lz4"

// The targets of `cdc-bench values`: Avro's CPU per event at most AvroCPURatio × json's and
// its p99 at the steady rate at most AvroP99Slack above json's; a codec's bytes per row at
// most CodecBytesRatio × the uncompressed one's, with a drain at least CodecDrainRatio × its.
const (
	AvroCPURatio    = 1.3
	AvroP99Slack    = time.Millisecond
	CodecBytesRatio = 0.5
	CodecDrainRatio = 0.9
)

// ValuesConfig configures `cdc-bench values`: the value formats side by side (drains and a
// steady rate) and the codecs on 10 KB payloads (drains). The services, binary, output and
// progress come from Config (its Partitions, Writers, Warmup, DrainTimeout too).
type ValuesConfig struct {
	Config
	// RegistryURL is the schema registry (Confluent API). Default $CDC_RELAY_REGISTRY_URL.
	RegistryURL string
	// Rows of each value-format drain. Default 20,000.
	Rows int
	// CodecRows of each codec drain (Payload bytes each). Default 2,000.
	CodecRows int
	// Payload is the codec drains' payload size, bytes. Default 10,240.
	Payload int
	// RandomPayload pads the codec drains' payloads with random hex, as the backlog phase
	// does (at most 2× smaller for any codec), instead of an order document of as many
	// line items (documentLoad): a document of repeated structure, what a real payload is.
	RandomPayload bool
	// Rate and Duration are the steady phase of each format: rows/s, held that long after
	// Config.Warmup (default 2s). Defaults 2,000 and 15s.
	Rate     int
	Duration time.Duration
	// Repeats of each drain and steady run, interleaved across formats (codecs). Default 3.
	Repeats int
	// Codecs compared, the first the baseline. Default DefaultCodecs.
	Codecs []string
}

func (c ValuesConfig) withDefaults() ValuesConfig {
	orDefault(&c.RegistryURL, os.Getenv("CDC_RELAY_REGISTRY_URL"))
	orDefault(&c.Rows, 20_000)
	orDefault(&c.CodecRows, 2_000)
	orDefault(&c.Payload, 10_240)
	orDefault(&c.Rate, 2000)
	orDefault(&c.Duration, 15*time.Second)
	orDefault(&c.Repeats, 3)
	if len(c.Codecs) == 0 {
		c.Codecs = DefaultCodecs
	}
	orDefault(&c.Warmup, 2*time.Second)
	c.Config.Repeats = c.Repeats
	c.SkipBacklog = true // no pg_recvlogical needed
	c.Config = c.Config.withDefaults()
	return c
}

// Validate reports a configuration that cannot run (after defaults).
func (c ValuesConfig) Validate() error {
	c = c.withDefaults()
	errs := []error{c.Config.Validate()}
	if c.RegistryURL == "" {
		errs = append(errs, errors.New(`bench: no schema registry: set --registry-url or CDC_RELAY_REGISTRY_URL (run: eval "$(scripts/registry-up.sh)")`))
	}
	if c.Rows <= 0 || c.CodecRows <= 0 || c.Payload <= 0 || c.Rate <= 0 || c.Duration <= 0 || c.Repeats <= 0 {
		errs = append(errs, errors.New("bench: rows, codec rows, payload, rate, duration and repeats must be > 0"))
	}
	if _, err := ParseCodecs(strings.Join(c.Codecs, ",")); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ParseCodecs parses a comma-separated list of --compression settings: none, snappy, lz4,
// zstd or gzip, each optionally :level; no duplicates.
func ParseCodecs(s string) ([]string, error) {
	var out []string
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		name, level, hasLevel := strings.Cut(c, ":")
		if !slices.Contains([]string{"none", "gzip", "snappy", "lz4", "zstd"}, name) {
			return nil, fmt.Errorf("bench: codec %q: want none, snappy, lz4, zstd or gzip, optionally :level (e.g. zstd:1)", c)
		}
		if hasLevel {
			var n int
			if _, err := fmt.Sscanf(level, "%d", &n); err != nil || fmt.Sprint(n) != level || name == "none" || name == "snappy" {
				return nil, fmt.Errorf("bench: codec %q: a level is a number, and only lz4, zstd and gzip take one", c)
			}
		}
		if slices.Contains(out, c) {
			return nil, fmt.Errorf("bench: codec %q given twice", c)
		}
		out = append(out, c)
	}
	return out, nil
}

// FormatResult is one value format: the median of its drains and steady runs.
type FormatResult struct {
	Format    string          `json:"format"`
	Rows      int             `json:"rows"`
	DrainRate float64         `json:"drain_rows_per_s"` // median drain
	Drains    []time.Duration `json:"drains_ns"`        // every drain, in the order run
	CPUPer10k float64         `json:"cpu_s_per_10k"`    // median of the drains'
	Rate      int             `json:"steady_rows_per_s"`
	P99       time.Duration   `json:"p99_ns"` // median of the steady runs'
	P99Runs   []time.Duration `json:"p99_runs_ns"`
	// SteadyCPUPer10k is the median of the steady runs' CPU per 10,000 events (warm-up
	// included): at a steady rate the relay's timers and idle wake-ups count too.
	SteadyCPUPer10k float64       `json:"steady_cpu_s_per_10k"`
	Machine         *MachineState `json:"machine,omitempty"` // the busiest of its phases
}

// CodecResult is one --compression setting draining the large payloads.
type CodecResult struct {
	Codec        string          `json:"codec"`
	Rows         int             `json:"rows"`
	PayloadBytes float64         `json:"payload_bytes_per_row"` // the JSON payloads' mean size
	DrainRate    float64         `json:"drain_rows_per_s"`
	Drains       []time.Duration `json:"drains_ns"`
	CPUPer10k    float64         `json:"cpu_s_per_10k"`
	BytesPerRow  float64         `json:"stored_bytes_per_row"` // median of the drains' topic size on disk ÷ rows
	Machine      *MachineState   `json:"machine,omitempty"`
}

// ValuesReport is what `cdc-bench values` measured.
type ValuesReport struct {
	Started time.Time      `json:"started"`
	Command string         `json:"command,omitempty"`
	Prefix  string         `json:"prefix"` // every table, slot, topic and subject the run made starts with it
	Formats []FormatResult `json:"formats"`
	Codecs  []CodecResult  `json:"codecs"`
}

// RunValues runs `cdc-bench values` and writes values.md and values.json into OutDir. It
// returns the report (with the results up to then) even when a phase failed.
func RunValues(ctx context.Context, vc ValuesConfig) (*ValuesReport, error) {
	if err := vc.Validate(); err != nil {
		return nil, err
	}
	vc = vc.withDefaults()
	rep := &ValuesReport{Started: time.Now(), Command: vc.Command}
	return runReport(ctx, vc.Config, "tables, slots, publications, topics and subjects", "values", rep, func(e *env) error {
		rep.Prefix = e.prefix
		if err := e.valueFormats(ctx, vc, rep); err != nil {
			return err
		}
		return e.codecs(ctx, vc, rep)
	})
}

// valueFormats drains one backlog of order events with each format, then runs each at the
// steady rate, Repeats times each, interleaved in a rotating order.
func (e *env) valueFormats(ctx context.Context, vc ValuesConfig, rep *ValuesReport) error {
	defer e.cleanupTo(e.mark())
	reps, n := vc.Repeats, vc.Rows
	phase := fmt.Sprintf("values: %d rows", n)
	f, slots, err := e.valuesFixture(ctx, "v_formats", ValueFormats, reps)
	if err != nil {
		return err
	}
	if err := e.valuesBacklog(ctx, phase, f, n, 0); err != nil {
		return err
	}
	drains := map[string][]drainRun{}
	for k := 0; k < reps; k++ {
		for i := range ValueFormats {
			fm := ValueFormats[(i+k)%len(ValueFormats)]
			topic := fmt.Sprintf("%s.%s.%d", f.topic, fm, k)
			if err := e.createTopic(ctx, topic); err != nil {
				return err
			}
			if err := e.valuesRegister(ctx, vc.RegistryURL, topic, fm); err != nil {
				return err
			}
			r, err := e.drain(ctx, fmt.Sprintf("%s: %s (%d/%d)", phase, fm, k+1, reps), e.valuesPublisher(vc, fm), f, slots[fm][k], topic, n)
			if err != nil {
				return err
			}
			drains[fm] = append(drains[fm], r)
			e.dropSlot(ctx, slots[fm][k])
		}
	}
	steady := map[string][]SteadyResult{}
	for k := 0; k < reps; k++ {
		for i := range ValueFormats {
			fm := ValueFormats[(i+k)%len(ValueFormats)]
			r, err := e.valuesSteady(ctx, vc, fm)
			if err != nil {
				return fmt.Errorf("steady %s at %d rows/s: %w", fm, vc.Rate, err)
			}
			steady[fm] = append(steady[fm], r)
		}
	}
	for _, fm := range ValueFormats {
		s := summarize(fm, 1, n, drains[fm])
		r := FormatResult{Format: fm, Rows: n, DrainRate: s.Rate, Drains: s.Runs, Rate: vc.Rate}
		var cpu []float64
		machines := s.MachineRuns
		for _, d := range drains[fm] {
			cpu = append(cpu, cpuPer10k(d.cpu, int64(n)))
		}
		var p99 []time.Duration
		var steadyCPU []float64
		for _, st := range steady[fm] {
			steadyCPU = append(steadyCPU, cpuPer10k(st.CPU, st.Events))
			r.P99Runs = append(r.P99Runs, st.P99)
			p99 = append(p99, st.P99)
			machines = append(machines, st.Machine)
		}
		r.CPUPer10k, r.P99, r.Machine = valuesMedian(cpu), valuesMedian(p99), worst(machines)
		r.SteadyCPUPer10k = valuesMedian(steadyCPU)
		rep.Formats = append(rep.Formats, r)
	}
	return nil
}

// valuesFixture makes the fixture of one of values' tables, its publication and, before
// its backlog is written, reps slots for each of names: slots[name][k] is repeat k's,
// <base>_<slug(name)>_<k>.
func (e *env) valuesFixture(ctx context.Context, label string, names []string, reps int) (*fixture, map[string][]string, error) {
	f, err := e.newFixture(ctx, label)
	if err != nil {
		return nil, nil, err
	}
	if err := e.createPublication(ctx, f); err != nil {
		return nil, nil, err
	}
	slots := map[string][]string{}
	for k := 0; k < reps; k++ {
		for _, name := range names {
			slot := fmt.Sprintf("%s_%s_%d", f.base, slug(name), k)
			if err := e.createRelaySlot(ctx, f, slot); err != nil {
				return nil, nil, err
			}
			slots[name] = append(slots[name], slot)
		}
	}
	return f, slots, nil
}

// codecs drains one backlog of large payloads with each codec, Repeats times interleaved,
// and reads the size of each drain's topic on the broker's disk.
func (e *env) codecs(ctx context.Context, vc ValuesConfig, rep *ValuesReport) error {
	defer e.cleanupTo(e.mark())
	reps, n := vc.Repeats, vc.CodecRows
	phase := fmt.Sprintf("codecs: %d rows of %d-byte payloads", n, vc.Payload)
	f, slots, err := e.valuesFixture(ctx, fmt.Sprintf("v_codecs_%db", vc.Payload), vc.Codecs, reps)
	if err != nil {
		return err
	}
	var err2 error
	if vc.RandomPayload {
		err2 = e.valuesBacklog(ctx, phase, f, n, vc.Payload)
	} else {
		e.progress("%s: writing order documents", phase)
		err2 = documentLoad(ctx, e, f, n, vc.Payload)
	}
	if err2 != nil {
		return err2
	}
	var payload float64
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(avg(octet_length(payload::text)), 0) FROM `+f.outbox).Scan(&payload); err != nil {
		return err
	}
	drains, stored := map[string][]drainRun{}, map[string][]float64{}
	for k := 0; k < reps; k++ {
		for i := range vc.Codecs {
			c := vc.Codecs[(i+k)%len(vc.Codecs)]
			topic := fmt.Sprintf("%s.%s.%d", f.topic, slug(c), k)
			if err := e.createTopic(ctx, topic); err != nil {
				return err
			}
			pub := Publisher{Name: "run --compression " + c, Args: []string{"--compression", c}}
			r, err := e.drain(ctx, fmt.Sprintf("%s: %s (%d/%d)", phase, c, k+1, reps), pub, f, slots[c][k], topic, n)
			if err != nil {
				return err
			}
			size, err := e.valuesTopicSize(ctx, topic)
			if err != nil {
				return err
			}
			e.progress("%s: %s (%d/%d): %.0f bytes stored per row (payload %.0f)", phase, c, k+1, reps, float64(size)/float64(n), payload)
			drains[c] = append(drains[c], r)
			stored[c] = append(stored[c], float64(size)/float64(n))
			e.dropSlot(ctx, slots[c][k])
			_, _ = e.adm.DeleteTopics(ctx, topic) // measured: free the broker's disk
		}
	}
	for _, c := range vc.Codecs {
		s := summarize(c, 1, n, drains[c])
		var cpu []float64
		for _, d := range drains[c] {
			cpu = append(cpu, cpuPer10k(d.cpu, int64(n)))
		}
		rep.Codecs = append(rep.Codecs, CodecResult{Codec: c, Rows: n, PayloadBytes: payload, DrainRate: s.Rate, Drains: s.Runs,
			CPUPer10k: valuesMedian(cpu), BytesPerRow: valuesMedian(stored[c]), Machine: s.Machine})
	}
	return nil
}

// valuesPublisher is `cdc-relay run` writing values in format fm.
func (e *env) valuesPublisher(vc ValuesConfig, fm string) Publisher {
	return Publisher{Name: "run --value-format " + fm, Args: []string{"--value-format", fm, "--registry-url", vc.RegistryURL}}
}

// valuesSteady is the steady phase (steady) for one value format: its fixture's subject is
// registered before the publisher starts.
func (e *env) valuesSteady(ctx context.Context, vc ValuesConfig, fm string) (SteadyResult, error) {
	pub := e.valuesPublisher(vc, fm)
	res := SteadyResult{Publisher: fm, Rate: vc.Rate}
	phase := fmt.Sprintf("values: steady %s at %d rows/s", fm, vc.Rate)
	defer e.cleanupTo(e.mark())
	f, err := e.newFixture(ctx, fmt.Sprintf("vs_%s", fm))
	if err != nil {
		return res, err
	}
	if err := e.createRelaySlot(ctx, f, f.base); err != nil {
		return res, err
	}
	if err := e.valuesRegister(ctx, vc.RegistryURL, f.topic, fm); err != nil {
		return res, err
	}
	cons, err := e.consume(f.topic, pub)
	if err != nil {
		return res, err
	}
	defer cons.close()
	p, err := e.launch(ctx, pub, f, f.base, "", e.logName("values-steady-"+fm))
	if err != nil {
		return res, err
	}
	defer func() { _ = p.finish() }()
	if _, err := e.firstRecord(ctx, f, p, cons); err != nil {
		return res, err
	}
	n, elapsed, err := e.steadyPart(ctx, phase, f, p, cons, vc.Rate, vc.Duration, &res)
	if err != nil {
		return res, err
	}
	if err := p.finish(); err != nil {
		return res, err
	}
	res.CPU, res.Events = p.cpu(), cons.records.Load()
	lat, _, bad := cons.result()
	if bad != nil {
		return res, fmt.Errorf("bench: %s: %w", phase, bad)
	}
	slices.Sort(lat)
	res.Records, res.Achieved = len(lat), float64(n)/elapsed.Seconds()
	res.P50, res.P99 = quantile(lat, 0.5), quantile(lat, 0.99)
	e.progress("%s: %.0f rows/s achieved, p50 %s p99 %s", phase, res.Achieved, ms(res.P50), ms(res.P99))
	return res, nil
}

// valuesBacklog writes n one-row transactions into f (payload > 0: each payload padded to
// that size, as the backlog phase writes them) and waits until their WAL is flushed.
func (e *env) valuesBacklog(ctx context.Context, phase string, f *fixture, n, payload int) error {
	_, err := e.writeBacklog(ctx, phase, func(progress func(int)) error {
		return backlogLoad(ctx, e.pool, f, n, 1, payload, progress)
	}, n)
	return err
}

// documentLoad writes n orders in one-row transactions whose payloads are an order document of
// line items, about payload bytes of JSON: each line a SKU, a name, a quantity and a price
// drawn at random, so that the text repeats its structure, not its values. Commits are
// asynchronous, as backlogLoad's, and documentLoad waits until the WAL is flushed.
func documentLoad(ctx context.Context, e *env, f *fixture, n, payload int) error {
	const chunk = 200
	lines := max(1, payload/67) // {"qty": 3, "sku": "sku-0421", "name": "flat white", "price": 42.17}, 65-70 bytes with its separator
	stmt := fmt.Sprintf(`WITH o AS (INSERT INTO %[1]s (customer, amount) VALUES ('customer-' || t, 12.5) RETURNING id, customer, amount)
      INSERT INTO %[2]s (aggregate_id, topic, payload)
      SELECT 'order-' || o.id, '%[3]s', jsonb_build_object('event', 'order.created', 'order_id', o.id, 'customer', o.customer,
             'amount', o.amount, 'currency', 'EUR', 'lines', (SELECT jsonb_agg(jsonb_build_object(
                 'sku', 'sku-' || lpad((random() * 9999)::int::text, 4, '0'),
                 'name', (ARRAY['espresso', 'flat white', 'cortado', 'croissant', 'cheesecake', 'latte'])[1 + (random() * 5)::int],
                 'qty', 1 + (random() * 9)::int, 'price', round((random() * 100)::numeric, 2))) FROM generate_series(1, %[4]d) g WHERE o.id > 0))
        FROM o`, f.orders, f.outbox, f.topic, lines)
	if err := loopLoad(ctx, e.pool, n, 1, chunk, func(int) string { return stmt }); err != nil {
		return fmt.Errorf("bench: write order documents into %s: %w", f.outbox, err)
	}
	_, err := e.waitFlushed(ctx)
	return err
}

// valuesTopicSize is the size of topic's partitions on the brokers' disks, replicas included.
func (e *env) valuesTopicSize(ctx context.Context, topic string) (int64, error) {
	set := kadm.TopicsSet{topic: {}}
	for p := 0; p < e.cfg.Partitions; p++ {
		set[topic][int32(p)] = struct{}{}
	}
	dirs, err := e.adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		return 0, fmt.Errorf("bench: describe the log dirs of %s: %w", topic, err)
	}
	var size int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		for _, p := range d.Topics[topic] {
			size += p.Size
		}
	})
	return size, nil
}

// registryContentType is the media type of the schema registry's (Confluent) API.
const registryContentType = "application/vnd.schemaregistry.v1+json"

// valuesRegister registers the order event's schema (testkit/orderevent) in format fm under
// <topic>-value (nothing for json), deleted (soft, then permanently) at cleanup.
func (e *env) valuesRegister(ctx context.Context, registry, topic, fm string) error {
	var body map[string]string
	switch fm {
	case "json":
		return nil
	case "avro":
		body = map[string]string{"schema": orderevent.Avro, "schemaType": "AVRO"}
	case "protobuf":
		body = map[string]string{"schema": orderevent.Protobuf, "schemaType": "PROTOBUF"}
	default:
		return fmt.Errorf("bench: no schema for value format %q", fm)
	}
	subject := topic + "-value"
	base := strings.TrimRight(registry, "/") + "/subjects/" + url.PathEscape(subject)
	e.onClose(func(ctx context.Context) {
		_ = restCall(ctx, http.DefaultClient, http.MethodDelete, base, registryContentType, nil)
		_ = restCall(ctx, http.DefaultClient, http.MethodDelete, base+"?permanent=true", registryContentType, nil)
	})
	js, _ := json.Marshal(body)
	if err := restCall(ctx, http.DefaultClient, http.MethodPost, base+"/versions", registryContentType, js); err != nil {
		return fmt.Errorf("bench: register %s: %w", subject, err)
	}
	return nil
}

// valuesMedian is the median of a list of figures (the upper one of an even count); zero for none.
func valuesMedian[T float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// formatOf and codecOf find a result by name.
func (r *ValuesReport) formatOf(name string) (FormatResult, bool) {
	for _, f := range r.Formats {
		if f.Format == name {
			return f, true
		}
	}
	return FormatResult{}, false
}

// AvroTarget says whether avro met its targets against json: CPU per event at most
// AvroCPURatio × json's, p99 at the steady rate at most AvroP99Slack above json's.
func (r *ValuesReport) AvroTarget() (cpuOK, p99OK, measured bool) {
	j, ok1 := r.formatOf("json")
	a, ok2 := r.formatOf("avro")
	if !ok1 || !ok2 || j.CPUPer10k <= 0 {
		return false, false, false
	}
	return a.CPUPer10k <= AvroCPURatio*j.CPUPer10k, a.P99 <= j.P99+AvroP99Slack, true
}

// CodecTarget says whether codec c stored at most CodecBytesRatio of the baseline's (the
// first codec's) bytes per row with a drain at least CodecDrainRatio × the baseline's.
func (r *ValuesReport) CodecTarget(c CodecResult) (bytesOK, drainOK, measured bool) {
	if len(r.Codecs) == 0 || r.Codecs[0].BytesPerRow <= 0 || r.Codecs[0].DrainRate <= 0 {
		return false, false, false
	}
	b := r.Codecs[0]
	return c.BytesPerRow <= CodecBytesRatio*b.BytesPerRow, c.DrainRate >= CodecDrainRatio*b.DrainRate, true
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// Markdown is the two tables: value formats against json, codecs against the first (none).
func (r *ValuesReport) Markdown() string {
	var b strings.Builder
	if len(r.Formats) > 0 {
		j, _ := r.formatOf("json")
		fmt.Fprintf(&b, "### Value formats (%d-row drains, steady %d rows/s)\n\n", r.Formats[0].Rows, r.Formats[0].Rate)
		b.WriteString("| format | drain rows/s | vs json | CPU s / 10k events | vs json | p99 at steady rate | vs json | CPU s / 10k at steady rate | target met | machine |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, f := range r.Formats {
			target := "–"
			if f.Format == "avro" {
				if cpuOK, p99OK, ok := r.AvroTarget(); ok {
					target = fmt.Sprintf("CPU ≤ %.1f× json: %s; p99 ≤ json + %s: %s", AvroCPURatio, yesNo(cpuOK), AvroP99Slack, yesNo(p99OK))
				}
			}
			dp := fmt.Sprintf("%+.1f ms", msf(f.P99-j.P99))
			if f.Format == "json" {
				dp = "–"
			}
			fmt.Fprintf(&b, "| %s | %.0f | %s | %.3f | %s | %.1f ms | %s | %.3f | %s | %s |\n", f.Format, f.DrainRate, ratio(f.DrainRate, j.DrainRate),
				f.CPUPer10k, ratio(f.CPUPer10k, j.CPUPer10k), msf(f.P99), dp, f.SteadyCPUPer10k, target, f.Machine)
		}
		b.WriteString("\n")
	}
	if len(r.Codecs) > 0 {
		base := r.Codecs[0]
		fmt.Fprintf(&b, "### Codecs (%d-row drains, JSON payloads of %.0f bytes)\n\n", base.Rows, base.PayloadBytes)
		fmt.Fprintf(&b, "| --compression | drain rows/s | vs %[1]s | CPU s / 10k events | stored bytes / row | vs %[1]s | ≤ %.1f× bytes and ≥ %.1f× drain | machine |\n|---|---|---|---|---|---|---|---|\n",
			base.Codec, CodecBytesRatio, CodecDrainRatio)
		for _, c := range r.Codecs {
			name := c.Codec
			if name == RelayDefaultCodec {
				name += " (default)"
			}
			target := "–"
			if bytesOK, drainOK, ok := r.CodecTarget(c); ok && c.Codec != base.Codec {
				target = fmt.Sprintf("bytes %s, drain %s", yesNo(bytesOK), yesNo(drainOK))
			}
			fmt.Fprintf(&b, "| %s | %.0f | %s | %.3f | %.0f | %s | %s | %s |\n", name, c.DrainRate, ratio(c.DrainRate, base.DrainRate),
				c.CPUPer10k, c.BytesPerRow, ratio(c.BytesPerRow, base.BytesPerRow), target, c.Machine)
		}
		b.WriteString("\n")
	}
	var busy []string
	for _, f := range r.Formats {
		if f.Machine != nil && f.Machine.Busy {
			busy = append(busy, f.Format)
		}
	}
	for _, c := range r.Codecs {
		if c.Machine != nil && c.Machine.Busy {
			busy = append(busy, c.Codec)
		}
	}
	if len(busy) > 0 {
		fmt.Fprintf(&b, "**The machine was busy** during %s: absolute figures are a slice of the machine's; the ratios of runs interleaved side by side still compare.\n",
			strings.Join(busy, ", "))
	}
	return b.String()
}
